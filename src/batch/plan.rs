//! Planning a batch: everything that can be checked before a call runs.
//!
//! The call count, guard names, the destructive-guard rule, every reference's
//! shape (no forward or self references, well-formed paths) and every
//! `$artifact` reference (loaded here) are checked for the whole batch at
//! once, so a rejected batch has run nothing and its error lists every
//! problem with the call and argument path to fix. The plan records which
//! earlier calls each call depends on; [`super::run`] uses that to decide
//! what can run concurrently. Paths into results are checked later, at
//! substitution, because results do not exist yet.

use std::collections::BTreeSet;

use serde_json::Value;

use super::artifact::{self, Loader};
use super::refs::{self, ARTIFACT_KEY, RESULT_KEY};
use crate::artifacts::ArtifactStore;
use crate::builtins::run_batch::BatchCall;
use crate::error::GuardError;
use crate::limits::{Limits, MAX_BATCH_CALLS};
use crate::registry::Registry;

/// One call ready to be scheduled.
#[derive(Debug)]
pub(crate) struct Planned {
    pub name: String,
    /// Arguments with `$artifact` references already replaced by their
    /// values; `$result` references are still in place.
    pub arguments: Value,
    /// Indices of the earlier calls whose results it uses.
    pub deps: BTreeSet<usize>,
}

/// Checks a whole batch and returns its calls, or one error listing every
/// problem found (the field is the first offending location).
pub(crate) fn plan(
    calls: Vec<BatchCall>,
    registry: &Registry,
    limits: &Limits,
    store: &ArtifactStore,
) -> Result<Vec<Planned>, GuardError> {
    let count = calls.len();
    if !(1..=MAX_BATCH_CALLS).contains(&count) {
        return Err(GuardError::invalid_input(
            "calls",
            format!(
                "a batch takes 1 to {MAX_BATCH_CALLS} calls, got {count}; {}",
                if count == 0 {
                    "add at least one {\"name\", \"arguments\"} call"
                } else {
                    "split it into several batches"
                }
            ),
        ));
    }
    let mut problems: Vec<(String, String)> = Vec::new();
    let mut loader = Loader::new(store, limits.max_argument_bytes);
    let mut planned = Vec::with_capacity(count);
    for (index, call) in calls.into_iter().enumerate() {
        check_name(index, &call.name, registry, limits, &mut problems);
        let at = format!("calls[{index}].arguments");
        let arguments = Value::Object(call.arguments);
        let mut deps = BTreeSet::new();
        refs::visit(&arguments, &at, &mut |location, map| {
            if map.contains_key(RESULT_KEY) && map.contains_key(ARTIFACT_KEY) {
                problems.push((
                    location.into(),
                    "a reference has either $result or $artifact, not both".into(),
                ));
            } else if map.contains_key(RESULT_KEY) {
                match refs::parse_result(map, index, count) {
                    Ok(reference) => {
                        deps.insert(reference.call);
                    }
                    Err(message) => problems.push((location.into(), message)),
                }
            } else if let Err(message) = artifact::parse(map) {
                problems.push((location.into(), message));
            }
        });
        // Artifact values replace their references now; `$result` ones stay.
        let arguments = refs::rewrite(arguments, &at, &mut |_, map| {
            if map.contains_key(RESULT_KEY) {
                return Ok(Value::Object(map));
            }
            let reference = artifact::parse(&map)?;
            loader.load(&reference)
        });
        let arguments = match arguments {
            Ok(arguments) => arguments,
            Err((location, message)) => {
                // Shape errors were already reported by the visit above.
                if !problems.iter().any(|(at, _)| *at == location) {
                    problems.push((location, message));
                }
                Value::Null
            }
        };
        planned.push(Planned {
            name: call.name,
            arguments,
            deps,
        });
    }
    match problems.first() {
        None => Ok(planned),
        Some((field, _)) => {
            let listed: Vec<String> = problems.iter().map(|(at, m)| format!("{at}: {m}")).collect();
            Err(GuardError {
                code: crate::error::codes::INVALID_INPUT.into(),
                message: format!(
                    "batch refused before any call ran ({} problem{}): {}",
                    problems.len(),
                    if problems.len() == 1 { "" } else { "s" },
                    listed.join("; ")
                ),
                field: Some(field.clone()),
            })
        }
    }
}

/// The guard must exist and, unless the app allows it, not be destructive.
fn check_name(
    index: usize,
    name: &str,
    registry: &Registry,
    limits: &Limits,
    problems: &mut Vec<(String, String)>,
) {
    let at = format!("calls[{index}].name");
    match registry.get(name) {
        None => {
            let builtin = crate::registry::BUILTIN_TOOLS.contains(&name);
            problems.push((
                at,
                format!(
                    "{}; a batch calls guards: {}",
                    if builtin {
                        format!("'{name}' is a built-in tool, not a guard, and cannot be batched")
                    } else {
                        format!("no guard named '{name}'")
                    },
                    registry.names().join(", ")
                ),
            ));
        }
        Some(guard) if guard.hints.destructive && !limits.allow_destructive_in_batch => {
            problems.push((
                at,
                format!(
                    "'{name}' is annotated destructive, and this server refuses destructive guards in a batch; \
call it directly, one deliberate call at a time (the app can allow it with App::allow_destructive_in_batch)"
                ),
            ));
        }
        Some(_) => {}
    }
}
