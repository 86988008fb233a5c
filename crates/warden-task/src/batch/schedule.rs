//! Scheduling a planned batch: who runs when, and with which arguments.
//!
//! Each call starts as soon as every call it references has ended: it is
//! skipped if one of them did not succeed, fails on its own if a path does
//! not fit a real result, and otherwise runs through the executor with
//! `Admission::InTask` once it holds one of the batch's worker permits. The
//! caller ([`super::run`]) has already taken the batch's call slot; nothing
//! here takes another (an in-process call still takes a guard thread in the
//! executor). A call's references are replaced only once it holds its
//! worker permit, and the values they stand for count against the argument
//! cap as they are made (`arguments_too_large` before the next one is
//! copied): at most `max_concurrent_calls` calls' arguments exist at once.
//! Outcomes come back in call order.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant as StdInstant;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::artifact::ARTIFACT_KEY;
use super::artifact::{self, ArtifactError, Tables};
use super::plan::Planned;
use super::refs::{self, RefError, ref_id};
use warden_calls::events::{Events, Origin};
use warden_calls::executor::arguments::json_size;
use warden_calls::executor::confirm::Consent;
use warden_calls::executor::{CallRequest, Executor, Failure, Status};
use warden_core::error::{GuardError, codes};
use warden_core::receipt::CallReceipt;

/// How one call of a batch ended.
#[derive(Debug)]
pub(super) enum Outcome {
    /// It reached the executor (or failed substituting its references).
    Ran {
        result: Result<Value, Failure>,
        duration_ms: f64,
        /// Its receipt, when the batch asked for them and it succeeded.
        receipt: Option<Box<CallReceipt>>,
    },
    /// It never ran: a call it depends on did not succeed.
    Skipped { reason: String },
}

/// Runs the planned calls, each as soon as the calls it depends on have
/// ended, at most `max_concurrent_calls` at a time. Returns one outcome per
/// call, in call order.
pub(super) async fn execute(
    executor: &Arc<Executor>,
    calls: Vec<Planned>,
    tables: &Tables,
    names: &[String],
    (origin, events): (&Origin, &Events),
    cancel: &CancellationToken,
    (receipts, asker, allow_destructive): (bool, warden_core::reach::Reach, bool),
) -> Vec<Outcome> {
    let limits = executor.limits();
    // The batch's workers: taken here, in call order, before a call's
    // references are replaced, moved into its task and released when it
    // ends. Never closed, and dropped with the batch.
    let workers = Arc::new(Semaphore::new(limits.max_concurrent_calls));
    let deadline = Instant::now() + limits.max_timeout;
    let count = calls.len();
    let mut outcomes: Vec<Option<Outcome>> = (0..count).map(|_| None).collect();
    let mut pending: Vec<Option<Planned>> = calls.into_iter().map(Some).collect();
    // Running calls. Dropping the set (the request future dropped) aborts
    // them, which drops their executor futures: an isolated worker's process
    // group is killed; an in-process thread runs on, as for any dropped call.
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
            // Running calls release their permits as they end, joined or not.
            let permit = match wait_for_worker(&workers, cancel, deadline).await {
                Ok(permit) => permit,
                Err(outcome) => {
                    outcomes[i] = outcome;
                    continue;
                }
            };
            match substitute(
                i,
                call.arguments,
                &outcomes,
                names,
                tables,
                limits.max_argument_bytes,
            ) {
                Err(error) => {
                    outcomes[i] = Some(Outcome::Ran {
                        result: Err(Failure::new(Status::Failed, error)),
                        duration_ms: 0.0,
                        receipt: None,
                    });
                }
                Ok(arguments) => {
                    let handle = running.spawn(run_one(
                        executor.clone(),
                        call.name,
                        arguments,
                        origin.clone(),
                        cancel.clone(),
                        permit,
                        Terms {
                            deadline,
                            receipts,
                            asker: asker.clone(),
                            allow_destructive,
                            events: events.clone(),
                        },
                    ));
                    index_of.insert(handle.id(), i);
                }
            }
        }
        let Some(joined) = running.join_next_with_id().await else {
            break;
        };
        let (id, outcome) = settled(joined);
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

/// A batch worker for the next call; `Err` the call's outcome (none when
/// the semaphore closed, which it never is) when the request is cancelled
/// or the batch deadline passes first.
async fn wait_for_worker(
    workers: &Arc<Semaphore>,
    cancel: &CancellationToken,
    deadline: Instant,
) -> Result<tokio::sync::OwnedSemaphorePermit, Option<Outcome>> {
    tokio::select! {
        permit = workers.clone().acquire_owned() => permit.map_err(|_| None),
        _ = cancel.cancelled() => Err(Some(not_started(
            Status::Cancelled,
            codes::CANCELLED,
            "the request was cancelled before this call started",
        ))),
        _ = tokio::time::sleep_until(deadline) => Err(Some(not_started(
            Status::TimedOut,
            codes::TIMED_OUT,
            "the batch deadline passed before this call started; split the batch",
        ))),
    }
}

/// A joined call's outcome; a call task that panicked or was aborted
/// failed.
fn settled(joined: Result<(tokio::task::Id, Outcome), tokio::task::JoinError>) -> (tokio::task::Id, Outcome) {
    match joined {
        Ok((id, outcome)) => (id, outcome),
        Err(error) => (
            error.id(),
            Outcome::Ran {
                result: Err(Failure::new(
                    Status::Failed,
                    GuardError::failed(format!("the call's task ended abnormally: {error}")),
                )),
                duration_ms: 0.0,
                receipt: None,
            },
        ),
    }
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

/// An outcome for a call that never started.
fn not_started(status: Status, code: &str, message: &str) -> Outcome {
    Outcome::Ran {
        result: Err(Failure::new(status, GuardError::new(code, message))),
        duration_ms: 0.0,
        receipt: None,
    }
}

/// Replaces call `index`'s references with the values they name: `$result`
/// with (a copy of) part of an earlier output, `$artifact` with a column of
/// a planned table. Each value is sized before it is copied; once the
/// call's arguments would pass `cap` bytes it fails `arguments_too_large`.
fn substitute(
    index: usize,
    arguments: Value,
    outcomes: &[Option<Outcome>],
    names: &[String],
    tables: &Tables,
    cap: usize,
) -> Result<Value, GuardError> {
    let at = format!("calls[{index}].arguments");
    let mut total = json_size(&arguments);
    let mut too_large = false;
    let rewritten = refs::rewrite(arguments, &at, &mut |_, map| {
        let (size, make): (usize, Box<dyn FnOnce() -> Result<Value, RefError>>) =
            if map.contains_key(ARTIFACT_KEY) {
                let reference = artifact::parse(&map)?;
                let table = tables
                    .get(&reference.key())
                    .ok_or_else(|| ArtifactError::NotLoaded {
                        filename: reference.filename.clone(),
                    })?;
                (
                    table.size(&reference)?,
                    Box::new(move || Ok(table.value(&reference)?)),
                )
            } else {
                let reference = refs::parse_result(&map, index, outcomes.len())?;
                let source = reference.call;
                let Some(Some(Outcome::Ran {
                    result: Ok(output), ..
                })) = outcomes.get(source)
                else {
                    return Err(RefError::NotAvailable { call: source });
                };
                let value = refs::resolve(output, &reference.path).map_err(|error| RefError::PathInto {
                    path: reference.path.clone(),
                    call: source,
                    id: ref_id(source),
                    guard: names[source].clone(),
                    error: Box::new(error),
                })?;
                (json_size(value), Box::new(|| Ok(value.clone())))
            };
        total += size;
        if total > cap {
            too_large = true;
            return Err(RefError::TooLarge {
                size,
                index,
                guard: names[index].clone(),
                cap,
            });
        }
        make()
    });
    rewritten.map_err(|(location, error)| {
        let message = error.to_string();
        if too_large {
            GuardError::new(codes::ARGUMENTS_TOO_LARGE, message).with_field(location)
        } else {
            GuardError::invalid_input(location, message)
        }
    })
}

/// What every call of a batch runs under.
#[derive(Clone)]
struct Terms {
    /// The batch's deadline.
    deadline: Instant,
    /// Whether each call's receipt is kept.
    receipts: bool,
    /// Who confirms a destructive call (see `warden_calls::executor::confirm`).
    asker: warden_core::reach::Reach,
    /// Whether destructive guards run without asking
    /// (`TaskLimits::allow_destructive_in_batch`).
    allow_destructive: bool,
    /// Where the calls are recorded (a batch task's own log too).
    events: Events,
}

/// One call, holding one of the batch's worker permits until it ends.
async fn run_one(
    executor: Arc<Executor>,
    name: String,
    arguments: Value,
    origin: Origin,
    cancel: CancellationToken,
    permit: OwnedSemaphorePermit,
    Terms {
        deadline,
        receipts,
        asker,
        allow_destructive,
        events,
    }: Terms,
) -> Outcome {
    let started = StdInstant::now();
    let consent = match executor.registry().get(&name) {
        Some(_) if allow_destructive => Consent::Operator,
        Some(guard) => {
            let confirmed = warden_calls::executor::confirm::destructive_call_async(
                guard,
                &arguments,
                &origin,
                &events,
                asker,
                deadline.into_std(),
            )
            .await;
            match confirmed {
                Ok(consent) => consent,
                Err(error) => {
                    drop(permit);
                    return Outcome::Ran {
                        result: Err(Failure::new(Status::Failed, error)),
                        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
                        receipt: None,
                    };
                }
            }
        }
        None => Consent::None,
    };
    // Hashed before the call, which consumes them (references replaced:
    // what the guard really got).
    let arguments_sha256 = receipts.then(|| warden_core::receipt::digest(&arguments));
    let result = executor
        .call(
            CallRequest::new(&name, arguments, &origin, cancel)
                .in_task(deadline)
                .events(&events)
                .consent(consent),
        )
        .await;
    drop(permit);
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    let receipt = match (&result, arguments_sha256) {
        (Ok(output), Some(arguments_sha256)) => executor
            .registry()
            .receipt(&name, arguments_sha256, output)
            .map(Box::new),
        _ => None,
    };
    Outcome::Ran {
        result,
        duration_ms,
        receipt,
    }
}
