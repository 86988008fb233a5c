//! Planning a batch: everything that can be checked before a call runs.
//!
//! The call count, guard names, the destructive-guard rule, every reference's
//! shape (no forward or self references, well-formed paths) and every
//! `$artifact` reference are checked for the whole batch at once, so a
//! rejected batch has run nothing and its error lists every problem with the
//! call and argument path to fix. `$artifact` references are sized before
//! any file is read: a call whose own arguments plus the files it references
//! (counted once per reference) exceed the argument cap, or a batch whose
//! distinct files do, is refused `arguments_too_large` naming the call and
//! the reference. Only then is each file parsed, once, into the batch's
//! [`Tables`]. The plan records which earlier calls each call depends on;
//! [`super::run`] uses that to decide what can run concurrently. Paths into
//! results are checked later, at substitution, because results do not
//! exist yet.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::BatchCall;
use super::artifact::ARTIFACT_KEY;
use super::artifact::{self, ArtifactRef, Loader, Tables};
use super::refs::{self, RESULT_KEY};
use crate::limits::MAX_BATCH_CALLS;
use warden_calls::artifacts::View;
use warden_calls::executor::arguments::json_size;
use warden_calls::limits::CallLimits;
use warden_core::error::{GuardError, codes};
use warden_core::registry::Visible;

/// One call ready to be scheduled.
#[derive(Debug)]
pub(crate) struct Planned {
    pub name: String,
    /// Arguments with every reference still in place: they are replaced
    /// just before the call runs (see `schedule`).
    pub arguments: Value,
    /// Indices of the earlier calls whose results it uses.
    pub deps: BTreeSet<usize>,
}

/// An `$artifact` reference found in call `call` at `location`.
struct Found {
    call: usize,
    location: String,
    reference: ArtifactRef,
}

/// Checks a whole batch and returns its calls and the artifact tables they
/// reference, or one error listing every problem found (the field is the
/// first offending location).
/// `confirmable`: `Ok` when the batch's client can be asked to confirm a
/// destructive call (each is then confirmed when it runs, see `schedule`),
/// else why nobody can be asked.
/// `registry` is the caller's view: a guard the policy denies it is
/// reported exactly as a name that was never registered.
pub(crate) fn plan(
    calls: Vec<BatchCall>,
    registry: &Visible<'_>,
    limits: &CallLimits,
    allow_destructive: bool,
    store: View<'_>,
    confirmable: Result<(), &'static str>,
) -> Result<(Vec<Planned>, Tables), GuardError> {
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
    let mut found: Vec<Found> = Vec::new();
    let mut own_bytes = Vec::with_capacity(count);
    let mut planned = Vec::with_capacity(count);
    // Problems that are a destructive call nobody can confirm.
    let mut unconfirmable = 0;
    for (index, call) in calls.into_iter().enumerate() {
        unconfirmable += usize::from(check_name(
            index,
            &call.name,
            registry,
            if allow_destructive { Ok(()) } else { confirmable },
            &mut problems,
        ));
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
                    Err(error) => problems.push((location.into(), error.to_string())),
                }
            } else {
                match artifact::parse(map) {
                    Ok(reference) => found.push(Found {
                        call: index,
                        location: location.into(),
                        reference,
                    }),
                    Err(error) => problems.push((location.into(), error.to_string())),
                }
            }
        });
        own_bytes.push(json_size(&arguments));
        planned.push(Planned {
            name: call.name,
            arguments,
            deps,
        });
    }
    let loader = Loader::new(store, limits.max_argument_bytes);
    let sizes = size_files(&found, &loader, &mut problems);
    check_sizes(&found, &sizes, &own_bytes, &planned, limits.max_argument_bytes)?;
    // Within the cap: parse each file once, and check the columns named.
    let tables = load_tables(&found, &sizes, &loader, &mut problems);
    match refused(&problems, unconfirmable == problems.len()) {
        None => Ok((planned, tables)),
        Some(error) => Err(error),
    }
}

/// Each referenced file within the cap, parsed once, with the columns
/// each reference names checked; a file or column that fails is a
/// problem at that reference.
fn load_tables(
    found: &[Found],
    sizes: &HashMap<(String, String), u64>,
    loader: &Loader<'_>,
    problems: &mut Vec<(String, String)>,
) -> Tables {
    let mut tables = Tables::new();
    for item in found {
        let key = item.reference.key();
        if !sizes.contains_key(&key) {
            continue;
        }
        if !tables.contains_key(&key) {
            match loader.table(&item.reference) {
                Ok(table) => {
                    tables.insert(key.clone(), table);
                }
                Err(error) => {
                    problems.push((item.location.clone(), error.to_string()));
                    continue;
                }
            }
        }
        if let Some(Err(error)) = tables.get(&key).map(|t| t.check(&item.reference)) {
            problems.push((item.location.clone(), error.to_string()));
        }
    }
    tables
}

/// The one error listing every problem found (the field is the first
/// offending location), or none: `forbidden` when every problem is a
/// destructive call nobody can confirm (as a script's call of it is), else
/// `invalid_input`.
fn refused(problems: &[(String, String)], all_unconfirmable: bool) -> Option<GuardError> {
    let (field, _) = problems.first()?;
    let listed: Vec<String> = problems.iter().map(|(at, m)| format!("{at}: {m}")).collect();
    Some(
        GuardError::new(
            if all_unconfirmable {
                codes::FORBIDDEN
            } else {
                codes::INVALID_INPUT
            },
            format!(
                "batch refused before any call ran ({} problem{}): {}",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" },
                listed.join("; ")
            ),
        )
        .with_field(field.clone()),
    )
}

/// The size of every distinct referenced file, opened but not read; a file
/// that cannot be opened is a problem at its first reference.
fn size_files(
    found: &[Found],
    loader: &Loader<'_>,
    problems: &mut Vec<(String, String)>,
) -> HashMap<(String, String), u64> {
    let mut sizes = HashMap::new();
    let mut failed = BTreeSet::new();
    for item in found {
        let key = item.reference.key();
        if sizes.contains_key(&key) || failed.contains(&key) {
            continue;
        }
        match loader.size(&item.reference) {
            Ok(size) => {
                sizes.insert(key, size);
            }
            Err(error) => {
                problems.push((item.location.clone(), error.to_string()));
                failed.insert(key);
            }
        }
    }
    sizes
}

/// Refuses the batch `arguments_too_large` when a call's own arguments plus
/// the files it references (each reference counted in full) exceed `cap`,
/// or when its distinct files do; names every call over it and the
/// reference at which it went over.
fn check_sizes(
    found: &[Found],
    sizes: &HashMap<(String, String), u64>,
    own_bytes: &[usize],
    planned: &[Planned],
    cap: usize,
) -> Result<(), GuardError> {
    let cap64 = cap as u64;
    let mut per_call: Vec<u64> = own_bytes.iter().map(|b| *b as u64).collect();
    let mut over: Vec<(String, String)> = Vec::new();
    let mut distinct = BTreeSet::new();
    let mut distinct_bytes = 0u64;
    for item in found {
        let key = item.reference.key();
        let Some(size) = sizes.get(&key).copied() else {
            continue;
        };
        let total = &mut per_call[item.call];
        let was = *total;
        *total += size;
        if was <= cap64 && *total > cap64 {
            let count = found.iter().filter(|f| f.call == item.call).count();
            over.push((
                item.location.clone(),
                format!(
                    "calls[{}] ({}) goes over the {cap}-byte argument limit at this reference to {} of task {} \
({size} bytes, loaded in full for each of the call's {count} $artifact references): reference fewer or smaller files",
                    item.call, planned[item.call].name, item.reference.filename, item.reference.task_id
                ),
            ));
        }
        if distinct.insert(key) {
            distinct_bytes += size;
            if distinct_bytes > cap64 && distinct_bytes - size <= cap64 {
                over.push((
                    item.location.clone(),
                    format!(
                        "the batch's distinct $artifact files add up to more than the {cap}-byte argument limit at this \
reference to {} of task {} ({size} bytes): split the batch",
                        item.reference.filename, item.reference.task_id
                    ),
                ));
            }
        }
    }
    match over.first() {
        None => Ok(()),
        Some((field, _)) => {
            let listed: Vec<String> = over.iter().map(|(at, m)| format!("{at}: {m}")).collect();
            Err(GuardError::new(
                codes::ARGUMENTS_TOO_LARGE,
                format!(
                    "batch refused before any file was read or any call ran: {}",
                    listed.join("; ")
                ),
            )
            .with_field(field.clone()))
        }
    }
}

/// The guard must exist and, unless destructive calls may run here (the
/// app allows them, or the person can confirm each), not be destructive.
/// True when the problem found is a destructive call nobody can confirm.
fn check_name(
    index: usize,
    name: &str,
    registry: &Visible<'_>,
    destructive_ok: Result<(), &'static str>,
    problems: &mut Vec<(String, String)>,
) -> bool {
    let at = format!("calls[{index}].name");
    match registry.get(name) {
        None => {
            let builtin = warden_core::registry::BuiltinTool::from_name(name).is_some();
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
            false
        }
        Some(guard) if guard.hints.destructive && destructive_ok.is_err() => {
            let why = destructive_ok.err().unwrap_or_default();
            problems.push((
                at,
                format!(
                    "'{name}' is annotated destructive: a batch runs it only when the person confirms the call, and nobody \
can be asked here: {why}; call it directly, one deliberate call at a time (the app can allow it with \
App::allow_destructive_in_batch)"
                ),
            ));
            true
        }
        Some(_) => false,
    }
}
