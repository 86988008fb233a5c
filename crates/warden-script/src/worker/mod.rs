//! Entry point of a script worker process.
//!
//! Applies the sandbox layers, says hello, then runs each script it is sent
//! in one persistent scope (variables and functions survive between runs,
//! which is what lets a model repair its code step by step). Ends when the
//! server closes stdin.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rhai::{AST, Dynamic, EvalAltResult, Scope};
use serde_json::Value;

pub mod bindings;
pub mod charts;
pub mod check;
mod csv;
pub mod door;
pub mod engine;
pub mod errors;
mod map_call;
pub mod prelude;

use self::bindings::{FINAL_ANSWER_MARK, register};
use self::door::Door;
use self::engine::{EngineState, Output, build};
use self::errors::eval_error;
use super::protocol::{FromWorker, RunOutcome, ToWorker};
use warden_core::registry::Registry;

/// A script worker built up to its first message: the engine with every
/// binding and the prelude, and what the pre-run check knows of it. None
/// of it depends on the task, so the script workers' zygote builds it once
/// and each forked worker starts with it ready ([`zygote_main`]).
pub struct Ready {
    engine: rhai::Engine,
    state: EngineState,
    door: Arc<Mutex<Door>>,
    final_answer: Arc<Mutex<Option<Value>>>,
    registry: Arc<Registry>,
    known: check::Known,
    /// What the zygote set up for the sandbox layers; `None` for a worker
    /// started alone.
    prepared: Option<warden_sandbox::layers::Prepared>,
}

impl Ready {
    pub fn new(registry: Arc<Registry>) -> Self {
        let state = EngineState::default();
        let mut engine = build(&state);
        let door = Arc::new(Mutex::new(Door::new()));
        let final_answer = Arc::new(Mutex::new(None));
        register(&mut engine, registry.clone(), door.clone(), final_answer.clone());
        map_call::register(&mut engine, registry.clone(), door.clone());
        prelude::register(&mut engine);
        let known = check::Known::of(&engine);
        Self {
            engine,
            state,
            door,
            final_answer,
            registry,
            known,
            prepared: None,
        }
    }
}

/// Entry point of a script worker started alone.
pub fn main(registry: Arc<Registry>) -> ExitCode {
    exit_with(Ready::new(registry))
}

/// Serves `ready`, then lets it go without dropping it: the pipe must close
/// with the process, not before (the server takes its end as the worker's
/// exit, and reaps it), and the process is about to end anyway.
fn exit_with(ready: Ready) -> ExitCode {
    let code = serve(&ready);
    std::mem::forget(ready);
    code
}

/// Entry point of the script workers' zygote (see [`crate::workers`]):
/// builds the worker once ([`Ready`]), then forks a copy of it per task.
pub fn zygote_main(registry: Arc<Registry>) -> ExitCode {
    // First, while nothing else runs: entering a namespace needs a
    // single-threaded process.
    let prepared = warden_sandbox::layers::prepare_zygote();
    let ready = Ready {
        prepared: Some(prepared),
        ..Ready::new(registry)
    };
    // Each forked child has its own copy of this memory: it takes the
    // ready worker out of its copy; the zygote's stays for the next fork.
    let ready = std::cell::RefCell::new(Some(ready));
    warden_sandbox::zygote::child::serve(|| match ready.borrow_mut().take() {
        Some(ready) => exit_with(ready),
        None => ExitCode::from(3),
    })
}

/// Runs a ready worker on its pipe: applies the sandbox layers, says
/// hello, then runs each script it is sent.
fn serve(ready: &Ready) -> ExitCode {
    let Ready {
        engine,
        state,
        door,
        final_answer,
        registry,
        known,
        prepared,
    } = ready;
    // Before the layers: the seccomp filter allows no new descriptor.
    let protocol_out = match warden_sandbox::process::redirect_stdout() {
        Ok(file) => file,
        Err(error) => {
            eprintln!("warden script worker: cannot set up the protocol descriptor: {error}");
            return ExitCode::from(3);
        }
    };
    let layers = warden_sandbox::layers::apply(prepared.as_ref());
    let hello = door.lock().map(|mut door| {
        door.connect(protocol_out);
        door.send(&FromWorker::Hello { layers })
    });
    if !matches!(hello, Ok(Ok(()))) {
        return ExitCode::from(3);
    }
    if warden_sandbox::zygote::child::forked_as_spare() {
        warm_up(engine, known, registry);
    }
    let mut scope = Scope::new();
    let mut functions = AST::empty();
    loop {
        let message = match door.lock().map(|mut d| d.receive()) {
            Ok(Ok(Some(message))) => message,
            Ok(Ok(None)) => return ExitCode::SUCCESS,
            _ => return ExitCode::from(3),
        };
        // A spare's task has arrived: it is named as any worker again.
        warden_sandbox::zygote::child::claimed();
        let ToWorker::Run {
            code,
            deadline_ms,
            calls_left,
            inline_left,
            denied,
        } = message
        else {
            eprintln!("warden script worker: expected a run message");
            return ExitCode::from(3);
        };
        let due = Instant::now() + Duration::from_millis(deadline_ms);
        if let Ok(mut deadline) = state.deadline.lock() {
            *deadline = Some(due);
        }
        // For this run's caller, a guard its policy denies does not exist.
        let hidden: std::collections::BTreeSet<String> = denied.keys().cloned().collect();
        if let Ok(mut door) = door.lock() {
            door.deadline = Some(due);
            door.calls_left = calls_left;
            door.inline_left = inline_left;
            door.denied = denied;
            door.door_calls = 0;
            door.inline_calls = 0;
            door.reset_clock();
        }
        if let Ok(mut slot) = final_answer.lock() {
            *slot = None;
        }
        let visible = registry.visible(hidden);
        let checker = Checker {
            known,
            registry: &visible,
        };
        let mut outcome = run_once(engine, &checker, &mut scope, &mut functions, &code);
        if let Ok(mut output) = state.output.lock() {
            let taken = std::mem::take(&mut *output);
            let Output { text, truncated } = taken;
            outcome.output = text;
            outcome.output_truncated = truncated;
        }
        outcome.final_answer = final_answer.lock().ok().and_then(|mut s| s.take());
        let sent = door.lock().map(|mut d| {
            outcome.door_calls = d.door_calls;
            outcome.inline_calls = d.inline_calls;
            d.flush_pure().and_then(|_| d.send(&FromWorker::Done { outcome }))
        });
        if !matches!(sent, Ok(Ok(()))) {
            return ExitCode::from(3);
        }
    }
}

/// What a spare does while it waits for its task: checks and runs a
/// throwaway script in a scope of its own, so the memory a run writes (the
/// allocator's free lists, the engine's, the zygote's pages they sit in)
/// is already this process's copy when the task arrives, instead of each
/// first write faulting a page away from the zygote during the task (~65
/// of a trivial task's ~100 faults happen before its run; this takes some
/// of the rest ahead). Nothing of it is kept: the task's run starts from
/// its own scope, and the script neither prints nor calls a guard. It
/// comes after the hello, so a task that took the spare before it was
/// done starting waits for it too (a tenth of a millisecond); one that
/// finds the spare ready, as back-to-back tasks here do, does not.
fn warm_up(engine: &rhai::Engine, known: &check::Known, registry: &Registry) {
    let visible = registry.visible(std::collections::BTreeSet::new());
    let checker = Checker {
        known,
        registry: &visible,
    };
    let mut scope = Scope::new();
    let mut functions = AST::empty();
    let outcome = run_once(
        engine,
        &checker,
        &mut scope,
        &mut functions,
        "let warm = [1, 2.0, \"three\", #{four: 4}]; warm.len()",
    );
    let _ = serde_json::to_vec(&FromWorker::Done { outcome });
}

/// What the pre-run check needs besides the engine.
struct Checker<'a> {
    known: &'a check::Known,
    /// The registry as this run's caller sees it.
    registry: &'a warden_core::registry::Visible<'a>,
}

/// Checks, then runs one piece of code in the persistent scope. Code the
/// check refuses does not run: its outcome is `not_run`, with every
/// problem in one `parse` error.
fn run_once(
    engine: &rhai::Engine,
    checker: &Checker<'_>,
    scope: &mut Scope,
    functions: &mut AST,
    code: &str,
) -> RunOutcome {
    let checked = check::check(engine, checker.known, checker.registry, scope, functions, code);
    let ast = match checked {
        Ok(ast) => ast,
        Err(problems) => {
            return RunOutcome {
                error: Some(refused(&problems)),
                not_run: true,
                ..RunOutcome::default()
            };
        }
    };
    // Functions defined in earlier runs stay callable.
    let merged = functions.merge(&ast);
    let result = engine.eval_ast_with_scope::<Dynamic>(scope, &merged);
    *functions = merged.clone_functions_only();
    match result {
        // A value JSON cannot carry (a function pointer, say) is null; one
        // nested too deep to convert safely is an error.
        Ok(value) => match bindings::check_depth(&value) {
            Ok(()) => RunOutcome {
                value: rhai::serde::from_dynamic::<Value>(&value).unwrap_or(Value::Null),
                ..RunOutcome::default()
            },
            Err(error) => RunOutcome {
                error: Some(super::protocol::ScriptError::new(
                    warden_core::error::TaskErrorKind::Limit,
                    format!("the script's value cannot be returned: {}", error.message),
                )),
                ..RunOutcome::default()
            },
        },
        Err(error) if is_final_answer(&error) => RunOutcome::default(),
        Err(error) => RunOutcome {
            error: Some(eval_error(&error)),
            ..RunOutcome::default()
        },
    }
}

/// The check's problems as one `parse` error at the first one's place.
fn refused(problems: &[check::Problem]) -> super::protocol::ScriptError {
    let mut message = format!(
        "the script did not run: {} problem(s) found before running it:",
        problems.len()
    );
    for problem in problems {
        let at = match (problem.line, problem.column) {
            (Some(line), Some(column)) => format!("line {line}, column {column}: "),
            _ => String::new(),
        };
        message.push_str(&format!("\n- {at}{}", problem.message));
    }
    let first = problems.first();
    super::protocol::ScriptError::at(
        warden_core::error::TaskErrorKind::Parse,
        message,
        first.and_then(|p| p.line),
        first.and_then(|p| p.column),
    )
}

fn is_final_answer(error: &EvalAltResult) -> bool {
    match error {
        EvalAltResult::ErrorTerminated(value, _) => value.to_string() == FINAL_ANSWER_MARK,
        EvalAltResult::ErrorInFunctionCall(_, _, inner, _) => is_final_answer(inner),
        _ => false,
    }
}
