//! Turning Rhai errors into classified [`ScriptError`]s with positions.
//!
//! Kinds: `parse` (the code does not compile; the pre-run check in
//! `super::check` reports those before anything runs), `runtime` (a thrown or
//! evaluation error), `limit` (operations, call depth, data size, variables),
//! `timeout` (the task deadline), `guard` (an uncaught guard error).

use rhai::{EvalAltResult, Position};

use super::engine::DEADLINE_MARK;
use crate::protocol::ScriptError;
use warden_core::error::TaskErrorKind as Kind;

fn position(pos: Position) -> (Option<usize>, Option<usize>) {
    (pos.line(), pos.position())
}

fn make(kind: Kind, message: String, pos: Position) -> ScriptError {
    let (line, column) = position(pos);
    ScriptError::at(kind, message, line, column)
}

/// A runtime error, unwrapped from function-call frames so the position is
/// where it happened.
pub fn eval_error(error: &EvalAltResult) -> ScriptError {
    match error {
        EvalAltResult::ErrorInFunctionCall(name, _, inner, _) => {
            let mut classified = eval_error(inner);
            if classified.kind != Kind::Timeout {
                classified.message = format!("in function '{name}': {}", classified.message);
            }
            classified
        }
        EvalAltResult::ErrorParsing(parse, pos) => make(Kind::Parse, format!("syntax error: {parse}"), *pos),
        EvalAltResult::ErrorTerminated(value, pos) if value.to_string() == DEADLINE_MARK => make(
            Kind::Timeout,
            "the task deadline passed while the script was running".into(),
            *pos,
        ),
        EvalAltResult::ErrorTooManyOperations(pos) => make(
            Kind::Limit,
            format!(
                "too many operations (limit {}): loop less or do the work in a guard",
                crate::limits::SCRIPT_MAX_OPERATIONS
            ),
            *pos,
        ),
        EvalAltResult::ErrorStackOverflow(pos) => make(
            Kind::Limit,
            format!(
                "call depth exceeded (limit {}): recursion too deep",
                crate::limits::SCRIPT_MAX_CALL_LEVELS
            ),
            *pos,
        ),
        EvalAltResult::ErrorDataTooLarge(what, pos) => make(
            Kind::Limit,
            format!("{what} too large: strings ≤ 4 MiB, arrays ≤ 200,000 items, maps ≤ 10,000 keys"),
            *pos,
        ),
        EvalAltResult::ErrorTooManyVariables(pos) => make(
            Kind::Limit,
            format!(
                "too many variables (limit {})",
                crate::limits::SCRIPT_MAX_VARIABLES
            ),
            *pos,
        ),
        EvalAltResult::ErrorRuntime(value, pos) if value.is_map() => {
            let map = value.clone().cast::<rhai::Map>();
            let field = |k: &str| map.get(k).map(|v| v.to_string()).unwrap_or_default();
            if map.contains_key("code") {
                make(
                    Kind::Guard,
                    format!("uncaught guard error [{}]: {}", field("code"), field("message")),
                    *pos,
                )
            } else {
                make(Kind::Runtime, format!("uncaught throw: {value}"), *pos)
            }
        }
        other => {
            let pos = other.position();
            let mut text = other.to_string();
            // Rhai appends " (line x, position y)"; the position is separate.
            if let Some(cut) = text.rfind(" (line ") {
                text.truncate(cut);
            }
            make(Kind::Runtime, text, pos)
        }
    }
}
