//! What a script can call: every guard (a function taking an object map),
//! the app's script-only functions, plus write_artifact,
//! read_written_artifact, to_csv, final_answer, the chart helpers and
//! report (`super::charts`), `map_call` (`super::map_call`) and the math
//! prelude (`super::prelude`).
//!
//! Pure guards run inline here; all other guards and every artifact
//! operation go through the [`Door`] to the server, which runs them via
//! the executor. A guard error becomes a catchable Rhai error whose value is
//! a map with `code`, `message` and `field`.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rhai::{Dynamic, Engine, EvalAltResult, Map, NativeCallContext, Position};
use serde_json::Value;

use super::charts::Chart;
use super::door::Door;
use crate::protocol::FromWorker;
use warden_core::error::GuardError;
use warden_core::guard::{Mode, Resources};
use warden_core::registry::Registry;

/// Every helper a script gets besides the guards, by name: a guard may not
/// take one of these names (`warden_core::registry::RESERVED_SCRIPT_NAMES`).
#[cfg(test)]
pub(crate) const HELPERS: &[&str] = &[
    "final_answer",
    "to_csv",
    "write_artifact",
    "read_written_artifact",
    "map_call",
    "search_guards",
];

/// Value thrown to stop the script once final_answer has been recorded.
pub const FINAL_ANSWER_MARK: &str = "__warden_final_answer";

type Shared<T> = Arc<Mutex<T>>;
type RhaiResult = Result<Dynamic, Box<EvalAltResult>>;

pub(super) fn thrown(error: GuardError, position: Position) -> Box<EvalAltResult> {
    let mut map = Map::new();
    map.insert("code".into(), error.code.into());
    map.insert("message".into(), error.message.into());
    map.insert(
        "field".into(),
        error.field.map(Dynamic::from).unwrap_or(Dynamic::UNIT),
    );
    Box::new(EvalAltResult::ErrorRuntime(map.into(), position))
}

/// A script value as JSON, refused (`invalid_arguments`, catchable) when
/// it is nested deeper than [`warden_calls::limits::MAX_ARGUMENT_DEPTH`]: the
/// conversion below recurses once per level, so a map built thousands of
/// levels deep would overflow the worker's stack and kill the task instead
/// of raising an error the script can handle.
pub(super) fn to_json(value: &Dynamic) -> Result<Value, GuardError> {
    check_depth(value)?;
    rhai::serde::from_dynamic::<Value>(value).map_err(|e| {
        GuardError::new(
            warden_core::error::codes::INVALID_ARGUMENTS,
            format!("value is not representable as JSON: {e}"),
        )
    })
}

/// Refuses a value nested deeper than [`warden_calls::limits::MAX_ARGUMENT_DEPTH`].
pub(super) fn check_depth(value: &Dynamic) -> Result<(), GuardError> {
    let limit = warden_calls::limits::MAX_ARGUMENT_DEPTH;
    if deeper_than(value, limit, 1) {
        return Err(GuardError::new(
            warden_core::error::codes::INVALID_ARGUMENTS,
            format!(
                "the value is nested more than {limit} levels deep; the limit is {limit} levels: \
pass flatter data (e.g. a list of flat maps)"
            ),
        )
        .with_field("arguments"));
    }
    Ok(())
}

/// Whether `value` has maps or arrays more than `limit` levels deep; the
/// recursion itself stops one level past the limit, so its stack stays small.
fn deeper_than(value: &Dynamic, limit: usize, level: usize) -> bool {
    if let Ok(map) = value.as_map_ref() {
        return level > limit || map.values().any(|v| deeper_than(v, limit, level + 1));
    }
    if let Ok(items) = value.as_array_ref() {
        return level > limit || items.iter().any(|v| deeper_than(v, limit, level + 1));
    }
    false
}

pub(super) fn to_rhai(value: Value, position: Position) -> RhaiResult {
    rhai::serde::to_dynamic(value).map_err(|e| thrown(GuardError::failed(e.to_string()), position))
}

/// Registers every guard and the door's helpers on `engine` (`map_call`
/// and the prelude register themselves beside it, see `super::main`).
pub fn register(
    engine: &mut Engine,
    registry: Arc<Registry>,
    door: Shared<Door>,
    final_answer: Shared<Option<Value>>,
) {
    let names: Vec<String> = registry.names().into_iter().map(String::from).collect();
    for name in names {
        let registry = registry.clone();
        let door = door.clone();
        let guard_name = name.clone();
        // Looked up once here, not on every call of a loop.
        let pure = registry.get(&name).filter(|g| g.mode() == Mode::Pure).cloned();
        engine.register_fn(
            name.as_str(),
            move |ctx: NativeCallContext, arguments: Map| -> RhaiResult {
                let position = ctx.call_position();
                if hidden(&door, &guard_name) {
                    return Err(not_found(&guard_name, position));
                }
                if let Some(guard) = &pure {
                    return call_pure(guard, &door, Dynamic::from_map(arguments))
                        .map_err(|e| thrown(e, position));
                }
                let arguments = to_json(&Dynamic::from_map(arguments)).map_err(|e| thrown(e, position))?;
                let result = call_guard(&registry, &door, &guard_name, arguments);
                match result {
                    Ok(value) => to_rhai(value, position),
                    Err(error) => Err(thrown(error, position)),
                }
            },
        );
    }
    // Script-only functions register themselves under a private name; the
    // public name is a wrapper that records each call like an inline pure
    // call, so they count for the `analysis` gate and appear in
    // function_calls.json. The registry has already checked that their
    // names clash with no guard.
    for function in registry.script_functions() {
        let private = private_name(function.name);
        (function.register)(engine, &private);
        register_recorded(engine, function.name, private, door.clone());
    }
    super::charts::register(engine, thrown);
    register_search(engine, registry.clone(), door.clone());
    register_artifacts(engine, door);
    engine.register_fn(
        "final_answer",
        move |ctx: NativeCallContext, answer: Map| -> RhaiResult {
            let value = to_json(&Dynamic::from_map(answer)).map_err(|e| thrown(e, ctx.call_position()))?;
            if let Ok(mut slot) = final_answer.lock() {
                *slot = Some(value);
            }
            Err(Box::new(EvalAltResult::ErrorTerminated(
                FINAL_ANSWER_MARK.into(),
                ctx.call_position(),
            )))
        },
    );
    engine.register_fn(
        "to_csv",
        |ctx: NativeCallContext, rows: rhai::Array| -> RhaiResult {
            super::csv::to_csv(&rows, None)
                .map(Into::into)
                .map_err(|e| thrown(e, ctx.call_position()))
        },
    );
    engine.register_fn(
        "to_csv",
        |ctx: NativeCallContext, rows: rhai::Array, columns: rhai::Array| -> RhaiResult {
            let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
            super::csv::to_csv(&rows, Some(&columns))
                .map(Into::into)
                .map_err(|e| thrown(e, ctx.call_position()))
        },
    );
}

/// `search_guards(query)` and `search_guards(query, limit)`: the guards
/// the model may use that match `query`, best first, each a map of name,
/// category, signature, doc and score (`warden_core::search`; at most
/// `MAX_SEARCH_HITS`). A guard the caller's policy denies, or one kept
/// from the model, is never found. It runs nothing and costs no call.
fn register_search(engine: &mut Engine, registry: Arc<Registry>, door: Shared<Door>) {
    use warden_core::search::{DEFAULT_SEARCH_HITS, MAX_SEARCH_HITS};
    let search = move |query: &str, limit: usize, position: Position| -> RhaiResult {
        let guards = registry.for_model().filter(|g| !hidden(&door, &g.name));
        let hits = warden_core::search::search(guards, query, limit);
        to_rhai(
            serde_json::to_value(hits).map_err(|e| thrown(GuardError::failed(e.to_string()), position))?,
            position,
        )
    };
    let search_limited = search.clone();
    engine.register_fn("search_guards", move |ctx: NativeCallContext, query: &str| {
        search(query, DEFAULT_SEARCH_HITS, ctx.call_position())
    });
    engine.register_fn(
        "search_guards",
        move |ctx: NativeCallContext, query: &str, limit: i64| -> RhaiResult {
            let position = ctx.call_position();
            match usize::try_from(limit) {
                Ok(limit) if (1..=MAX_SEARCH_HITS).contains(&limit) => search_limited(query, limit, position),
                _ => Err(thrown(
                    GuardError::invalid_input(
                        "limit",
                        format!("search_guards takes a limit from 1 to {MAX_SEARCH_HITS}, got {limit}"),
                    ),
                    position,
                )),
            }
        },
    );
}

/// Most arguments a script-only function can take through its wrapper: 8.
/// The wrapper is registered once per arity up to this, each parameter
/// typed `Dynamic` (any value); the app's own function still checks types.
const MAX_SCRIPT_FUNCTION_ARITY: usize = 8;

/// Where the app's script-only function `name` really lives.
fn private_name(name: &str) -> String {
    format!("__warden_script_fn_{name}")
}

/// Registers `name` as a wrapper around the app's function at `private`:
/// it spends an inline call (budgeted in coding tasks), forwards the
/// arguments unchanged (function pointers keep working: same engine, same
/// call context) and records the call through the door. The door is not
/// held while the function runs: it may call guards through its callbacks.
fn register_recorded(engine: &mut Engine, name: &'static str, private: String, door: Shared<Door>) {
    for arity in 0..=MAX_SCRIPT_FUNCTION_ARITY {
        let private = private.clone();
        let door = door.clone();
        let types = vec![std::any::TypeId::of::<Dynamic>(); arity];
        #[allow(deprecated)] // volatile, not deprecated: rhai's own wording
        engine.register_raw_fn(
            name,
            types,
            move |ctx: NativeCallContext, args: &mut [&mut Dynamic]| {
                let position = ctx.call_position();
                door.lock()
                    .map_err(|_| {
                        GuardError::new(
                            warden_core::error::codes::DOOR_CLOSED,
                            "worker door lock poisoned",
                        )
                    })
                    .and_then(|mut door| door.spend_inline_call())
                    .map_err(|e| thrown(e, position))?;
                let started = Instant::now();
                let outcome = ctx
                    .call_native_fn_raw(&private, false, args)
                    .map_err(|error| unprivate(error, &private, name));
                let error = outcome.as_ref().err().map(|e| script_error_code(e));
                if let Ok(mut door) = door.lock() {
                    door.record_pure(name, started, Instant::now(), error.as_deref(), (None, None));
                }
                outcome
            },
        );
    }
}

/// Error messages name the public function, never its private name.
fn unprivate(mut error: Box<EvalAltResult>, private: &str, name: &str) -> Box<EvalAltResult> {
    if let EvalAltResult::ErrorFunctionNotFound(signature, _) = error.as_mut() {
        *signature = signature.replace(private, name);
    }
    error
}

/// The `code` of a thrown guard-style error map, else `guard_failed`.
fn script_error_code(error: &EvalAltResult) -> String {
    if let EvalAltResult::ErrorRuntime(value, _) = error
        && let Some(map) = value.read_lock::<Map>()
        && let Some(code) = map.get("code")
    {
        return code.to_string();
    }
    warden_core::error::codes::GUARD_FAILED.to_string()
}

/// Whether this run's caller may not know of guard `name` (its policy
/// denies it; see `warden_core::registry::Visible`). A poisoned door
/// hides nothing: the call then fails `door_closed`, like any other.
pub(super) fn hidden(door: &Shared<Door>, name: &str) -> bool {
    door.lock().is_ok_and(|door| door.denied.contains_key(name))
}

/// The error Rhai raises for a function that does not exist, called with
/// one map: what a script gets for a guard hidden from its caller, so the
/// two cannot be told apart (caught, printed or uncaught).
pub(super) fn not_found(name: &str, position: Position) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorFunctionNotFound(
        format!("{name} (map)"),
        position,
    ))
}

/// Runs a pure guard inline, on Rhai values, and records the call for the
/// server's event log (an inline call, budgeted in coding tasks). Its
/// callers have already answered a guard hidden from the run's caller as
/// unknown ([`hidden`]).
pub(super) fn call_pure(
    guard: &warden_core::guard::Guard,
    door: &Shared<Door>,
    arguments: Dynamic,
) -> Result<Dynamic, GuardError> {
    let mut door = door.lock().map_err(|_| {
        GuardError::new(
            warden_core::error::codes::DOOR_CLOSED,
            "worker door lock poisoned",
        )
    })?;
    let name = guard.tool_name();
    door.spend_inline_call()?;
    let started = Instant::now();
    // Receipt hashes, as the server's own calls take them: the JSON the
    // guard's arguments and output stand for (see `warden_core::receipt`).
    let hash = door.hash_next_call();
    let arguments_sha256 = hash.then(|| dynamic_digest(&arguments)).flatten();
    let outcome =
        warden_core::error::catch_guard_panic(name, || guard.invoke_inline(&Resources::default(), arguments));
    let ended = Instant::now();
    let output_sha256 = outcome.as_ref().ok().filter(|_| hash).and_then(dynamic_digest);
    let error = outcome.as_ref().err().map(|e| e.code.as_str());
    door.record_pure(
        name,
        started,
        ended,
        error,
        (arguments_sha256.as_deref(), output_sha256.as_deref()),
    );
    outcome
}

/// The receipt digest of a script value: its JSON form's
/// ([`warden_core::receipt::digest`]), written straight from the value
/// when it is made of JSON's kinds within the depth limit; `None` for a
/// value JSON cannot hold (a function pointer).
fn dynamic_digest(value: &Dynamic) -> Option<String> {
    warden_core::receipt::digest_script_value(value, warden_calls::limits::MAX_ARGUMENT_DEPTH).or_else(|| {
        to_json(value)
            .ok()
            .map(|json| warden_core::receipt::digest(&json))
    })
}

/// Runs a guard that is not pure through the door (the server runs it).
fn call_guard(
    registry: &Registry,
    door: &Shared<Door>,
    name: &str,
    arguments: Value,
) -> Result<Value, GuardError> {
    if registry.get(name).is_none() {
        return Err(registry.unknown_guard(name));
    }
    let mut door = door.lock().map_err(|_| {
        GuardError::new(
            warden_core::error::codes::DOOR_CLOSED,
            "worker door lock poisoned",
        )
    })?;
    door.spend_door_call()?;
    door.request(&FromWorker::GuardCall {
        guard: name.to_string(),
        arguments,
    })
}

/// write_artifact content that is not a chart: a string as is, anything
/// else as JSON.
fn text_content(ctx: &NativeCallContext, content: &Dynamic) -> Result<String, Box<EvalAltResult>> {
    if content.is_string() {
        Ok(content.to_string())
    } else {
        to_json(content)
            .map(|v| v.to_string())
            .map_err(|e| thrown(e, ctx.call_position()))
    }
}

/// What write_artifact returns: `#{path, bytes}` (the file's path in the
/// task directory and its size), from the server's reply.
fn written(reply: &Value) -> Dynamic {
    let mut map = Map::new();
    let path = reply.get("path").and_then(Value::as_str).unwrap_or_default();
    map.insert("path".into(), path.into());
    let bytes = reply
        .get("size_bytes")
        .and_then(Value::as_i64)
        .unwrap_or_default();
    map.insert("bytes".into(), bytes.into());
    map.into()
}

fn register_artifacts(engine: &mut Engine, door: Shared<Door>) {
    let write = {
        let door = door.clone();
        move |ctx: &NativeCallContext, filename: &str, content: &Dynamic, encoding: &str| -> RhaiResult {
            // A chart is drawn here, in the worker, as the extension asks.
            let (content, encoding) = if let Some(chart) = content.read_lock::<Chart>() {
                let (text, encoding) = super::charts::artifact_content(&chart, filename)
                    .map_err(|e| thrown(e, ctx.call_position()))?;
                (text, encoding)
            } else {
                (text_content(ctx, content)?, encoding)
            };
            let message = FromWorker::WriteArtifact {
                filename: filename.to_string(),
                content,
                encoding: encoding.to_string(),
            };
            let mut door = door
                .lock()
                .map_err(|_| thrown(GuardError::failed("door lock"), ctx.call_position()))?;
            let reply = door
                .request(&message)
                .map_err(|e| thrown(e, ctx.call_position()))?;
            Ok(written(&reply))
        }
    };
    let write3 = write.clone();
    let write_report = write.clone();
    engine.register_fn(
        "report",
        move |ctx: NativeCallContext, options: Map| -> RhaiResult {
            let page = super::charts::report::html(&options).map_err(|e| thrown(e, ctx.call_position()))?;
            let filename =
                super::charts::report::filename(&options).map_err(|e| thrown(e, ctx.call_position()))?;
            let written = write_report(&ctx, &filename, &Dynamic::from(page), "utf-8")?;
            // The path alone: what a model puts in its answer.
            Ok(written
                .read_lock::<Map>()
                .and_then(|m| m.get("path").cloned())
                .unwrap_or(Dynamic::UNIT))
        },
    );
    engine.register_fn(
        "write_artifact",
        move |ctx: NativeCallContext, filename: &str, content: Dynamic| {
            write(&ctx, filename, &content, "utf-8")
        },
    );
    engine.register_fn(
        "write_artifact",
        move |ctx: NativeCallContext, filename: &str, content: Dynamic, encoding: &str| {
            write3(&ctx, filename, &content, encoding)
        },
    );
    engine.register_fn(
        "read_written_artifact",
        move |ctx: NativeCallContext, filename: &str| -> RhaiResult {
            let mut door = door
                .lock()
                .map_err(|_| thrown(GuardError::failed("door lock"), ctx.call_position()))?;
            let reply = door
                .request(&FromWorker::ReadArtifact {
                    filename: filename.to_string(),
                })
                .map_err(|e| thrown(e, ctx.call_position()))?;
            to_rhai(reply, ctx.call_position())
        },
    );
}
