//! `run_batch`: several guard calls in one request, run as a small graph.
//!
//! A batch is planned first ([`plan`]): names, destructive guards, reference
//! shapes and `$artifact` columns are checked for every call, so a refused
//! batch has run nothing. It is then admitted as ONE request: it takes one
//! call slot with [`Executor::try_admit_batch`] (`Admission::TryNow`
//! semantics, so with every slot in use it is rejected `server_busy` like a
//! direct call) and holds it until its last call ends. Its calls run with
//! [`Admission::InTask`] under a batch-local semaphore of
//! `max_concurrent_calls` permits: calls whose references do not connect them
//! run concurrently, a call that uses another's result waits for it, and a
//! call waiting for a permit waits, never "Server busy". So one batch may run
//! up to `max_concurrent_calls` guards while holding a single slot; the slots
//! bound how many requests are admitted, the batch's semaphore how wide each
//! one runs. The whole batch shares one deadline, the server's
//! `max_timeout`, which caps every call's own.
//!
//! A failed call keeps its own error; calls that use its result are skipped
//! with the reason; the rest still run. Every call goes through the executor,
//! which records its `function_call_*` events under the batch's origin (mode
//! `batch`). The CLI's `call --batch file.json` runs the same code
//! ([`run_file`]).

mod artifact;
mod plan;
mod refs;
mod shape;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant as StdInstant;

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::artifacts::ArtifactStore;
use crate::builtins::run_batch::{ReturnMode, RunBatchInput};
use crate::error::{GuardError, codes};
use crate::events::Origin;
use crate::executor::{Admission, CallRequest, Executor, Failure, Status};
use plan::Planned;
use refs::ref_id;

/// Most significant figures `digits` accepts (an f64 holds about 17).
const MAX_DIGITS: u64 = 17;

/// How one call of a batch ended.
#[derive(Debug)]
enum Outcome {
    /// It reached the executor (or failed substituting its references).
    Ran {
        result: Result<Value, Failure>,
        duration_ms: f64,
    },
    /// It never ran: a call it depends on did not succeed.
    Skipped { reason: String },
}

/// Plans, admits and runs a batch; the result lists every call.
pub(crate) async fn run(
    executor: &Arc<Executor>,
    store: &ArtifactStore,
    input: RunBatchInput,
    origin: &Origin,
    cancel: CancellationToken,
) -> Result<Value, GuardError> {
    let started = StdInstant::now();
    if let Some(digits) = input.digits {
        crate::builtins::in_range("digits", digits, 1, MAX_DIGITS)?;
    }
    for (i, path) in input.select.iter().enumerate() {
        if path.is_empty() {
            return Err(GuardError::invalid_input(
                format!("select[{i}]"),
                "must not be empty; give a dotted path such as \"evidence.sharpe\"",
            ));
        }
        refs::check_path(path).map_err(|e| GuardError::invalid_input(format!("select[{i}]"), e))?;
    }
    let calls = plan::plan(input.calls, executor.registry(), executor.limits(), store)?;
    let _slot = executor.try_admit_batch().map_err(|failure| failure.error)?;
    let names: Vec<String> = calls.iter().map(|c| c.name.clone()).collect();
    let deps: Vec<BTreeSet<usize>> = calls.iter().map(|c| c.deps.clone()).collect();
    let outcomes = execute(executor, calls, &names, origin, &cancel).await;

    let last = outcomes.len().saturating_sub(1);
    let (mut succeeded, mut failed, mut skipped) = (0, 0, 0);
    let mut listed = Vec::with_capacity(outcomes.len());
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let mut entry = json!({
            "index": i,
            "ref": ref_id(i),
            "name": names[i],
            "depends_on": deps[i],
        });
        match outcome {
            Outcome::Ran { result, duration_ms } => {
                entry["duration_ms"] = json!(duration_ms);
                match result {
                    Ok(mut output) => {
                        succeeded += 1;
                        entry["status"] = json!("success");
                        if input.return_mode == ReturnMode::All || i == last {
                            if !input.select.is_empty() {
                                let (kept, missing) = shape::select(&output, &input.select);
                                output = kept;
                                if !missing.is_empty() {
                                    entry["select_missing"] = json!(missing);
                                }
                            }
                            if let Some(digits) = input.digits {
                                shape::round(&mut output, digits as u32);
                            }
                            entry["output"] = output;
                        }
                    }
                    Err(failure) => {
                        failed += 1;
                        entry["status"] = json!(failure.status.as_str());
                        entry["error"] = json!(failure.error);
                    }
                }
            }
            Outcome::Skipped { reason } => {
                skipped += 1;
                entry["status"] = json!("skipped");
                entry["duration_ms"] = json!(0.0);
                entry["reason"] = json!(reason);
            }
        }
        listed.push(entry);
    }
    let status = if failed + skipped == 0 {
        "success"
    } else if cancel.is_cancelled() {
        "cancelled"
    } else {
        "failed"
    };
    Ok(json!({
        "request_id": origin.request_id,
        "status": status,
        "calls": listed,
        "succeeded": succeeded,
        "failed": failed,
        "skipped": skipped,
        "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
    }))
}

/// Runs the planned calls, each as soon as the calls it depends on have
/// ended, at most `max_concurrent_calls` at a time. Returns one outcome per
/// call, in call order.
async fn execute(
    executor: &Arc<Executor>,
    calls: Vec<Planned>,
    names: &[String],
    origin: &Origin,
    cancel: &CancellationToken,
) -> Vec<Outcome> {
    let limits = executor.limits();
    // The batch's workers: a call holds a permit while it runs, taken in
    // spawn (call) order and released when the call's task ends. Never
    // closed, and dropped with the batch.
    let workers = Arc::new(Semaphore::new(limits.max_concurrent_calls));
    let deadline = Instant::now() + limits.max_timeout;
    let count = calls.len();
    let mut outcomes: Vec<Option<Outcome>> = (0..count).map(|_| None).collect();
    let mut pending: Vec<Option<Planned>> = calls.into_iter().map(Some).collect();
    // Running calls. Dropping the set (the request future dropped) aborts
    // them, which drops their executor futures and kills their workers.
    let mut running: JoinSet<Outcome> = JoinSet::new();
    let mut index_of: HashMap<tokio::task::Id, usize> = HashMap::new();
    loop {
        // Dependencies always point backwards, so one pass in order settles
        // every call whose dependencies are settled, skips included.
        for i in 0..count {
            let ready = pending[i]
                .as_ref()
                .is_some_and(|call| call.deps.iter().all(|d| outcomes[*d].is_some()));
            if !ready {
                continue;
            }
            let Some(call) = pending[i].take() else {
                continue;
            };
            if let Some(reason) = blocked(&call.deps, &outcomes) {
                outcomes[i] = Some(Outcome::Skipped { reason });
                continue;
            }
            match substitute(i, call.arguments, &outcomes, names) {
                Err(error) => {
                    outcomes[i] = Some(Outcome::Ran {
                        result: Err(Failure::new(Status::Failed, error)),
                        duration_ms: 0.0,
                    });
                }
                Ok(arguments) => {
                    let handle = running.spawn(run_one(
                        executor.clone(),
                        call.name,
                        arguments,
                        origin.clone(),
                        cancel.clone(),
                        workers.clone(),
                        deadline,
                    ));
                    index_of.insert(handle.id(), i);
                }
            }
        }
        let Some(joined) = running.join_next_with_id().await else {
            break;
        };
        let (id, outcome) = match joined {
            Ok((id, outcome)) => (id, outcome),
            Err(error) => (
                error.id(),
                Outcome::Ran {
                    result: Err(Failure::new(
                        Status::Failed,
                        GuardError::failed(format!("the call's task ended abnormally: {error}")),
                    )),
                    duration_ms: 0.0,
                },
            ),
        };
        if let Some(i) = index_of.get(&id) {
            outcomes[*i] = Some(outcome);
        }
    }
    outcomes
        .into_iter()
        .map(|outcome| {
            outcome.unwrap_or_else(|| Outcome::Skipped {
                reason: "it was never scheduled".into(),
            })
        })
        .collect()
}

/// Why a call cannot run: the first dependency that did not succeed.
fn blocked(deps: &BTreeSet<usize>, outcomes: &[Option<Outcome>]) -> Option<String> {
    deps.iter().find_map(|d| match &outcomes[*d] {
        Some(Outcome::Ran { result: Ok(_), .. }) => None,
        Some(Outcome::Ran { result: Err(f), .. }) => Some(format!(
            "it uses the result of calls[{d}] ({}), which ended {} ({}); fix that call and run the batch again",
            ref_id(*d),
            f.status.as_str(),
            f.error.code
        )),
        Some(Outcome::Skipped { .. }) | None => Some(format!(
            "it uses the result of calls[{d}] ({}), which was skipped",
            ref_id(*d)
        )),
    })
}

/// Replaces call `index`'s `$result` references with the values they name.
fn substitute(
    index: usize,
    arguments: Value,
    outcomes: &[Option<Outcome>],
    names: &[String],
) -> Result<Value, GuardError> {
    let at = format!("calls[{index}].arguments");
    refs::rewrite(arguments, &at, &mut |_, map| {
        let reference = refs::parse_result(&map, index, outcomes.len())?;
        let source = reference.call;
        let Some(Some(Outcome::Ran {
            result: Ok(output), ..
        })) = outcomes.get(source)
        else {
            return Err(format!("the result of calls[{source}] is not available"));
        };
        refs::resolve(output, &reference.path).cloned().map_err(|e| {
            format!(
                "path '{}' into the result of calls[{source}] ({}, {}): {e}",
                reference.path,
                ref_id(source),
                names[source]
            )
        })
    })
    .map_err(|(location, message)| GuardError::invalid_input(location, message))
}

/// One call: wait for a batch worker permit, then the executor.
async fn run_one(
    executor: Arc<Executor>,
    name: String,
    arguments: Value,
    origin: Origin,
    cancel: CancellationToken,
    workers: Arc<Semaphore>,
    deadline: Instant,
) -> Outcome {
    let not_started = |status: Status, code: &str, message: &str| Outcome::Ran {
        result: Err(Failure::new(status, GuardError::new(code, message))),
        duration_ms: 0.0,
    };
    let _permit = tokio::select! {
        permit = workers.acquire_owned() => permit.ok(),
        _ = cancel.cancelled() => {
            return not_started(Status::Cancelled, codes::CANCELLED, "the request was cancelled before this call started");
        }
        _ = tokio::time::sleep_until(deadline) => {
            return not_started(Status::TimedOut, codes::TIMED_OUT, "the batch deadline passed before this call started; split the batch");
        }
    };
    let started = StdInstant::now();
    let result = executor
        .call(CallRequest {
            guard: &name,
            arguments,
            origin: &origin,
            cancel,
            admission: Admission::InTask,
            deadline_cap: Some(deadline),
            events: None,
        })
        .await;
    Outcome::Ran {
        result,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
    }
}

/// `<app> call --batch file.json`: a `run_batch` argument object (or a bare
/// list of calls) from a file, run by [`run`] and printed as JSON. Exit
/// codes: 0 every call succeeded, 1 a call failed or the batch was refused,
/// 2 the file is unreadable or not a batch.
pub(crate) async fn run_file(tasks: &crate::task::TaskRunner, file: &Path) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("error: cannot read batch file {}: {error}", file.display());
            return ExitCode::from(2);
        }
    };
    let value = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(calls)) => json!({ "calls": calls }),
        Ok(value) => value,
        Err(error) => {
            eprintln!("error: batch file {} is not valid JSON: {error}", file.display());
            return ExitCode::from(2);
        }
    };
    let input: RunBatchInput = match crate::builtins::decode(value) {
        Ok(input) => input,
        Err(error) => {
            eprintln!(
                "error ({}): batch file {}: {}",
                error.code,
                file.display(),
                error.message
            );
            return ExitCode::from(2);
        }
    };
    let origin = Origin::request("batch", "run_batch");
    match run(
        &tasks.executor,
        &tasks.store,
        input,
        &origin,
        CancellationToken::new(),
    )
    .await
    {
        Ok(result) => {
            println!("{}", serde_json::to_string_pretty(&result).unwrap_or_default());
            if result["status"] == "success" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(error) => {
            eprintln!("error ({}): {}", error.code, error.message);
            ExitCode::from(1)
        }
    }
}
