//! `run_batch`: several guard calls in one request, run as a small graph.
//!
//! A batch is planned first (`plan`): names, destructive guards, reference
//! shapes and `$artifact` columns are checked for every call, and the files
//! `$artifact` references stand for (in the caller's own tasks only: see
//! [`warden_calls::artifacts::View`]) are sized against the argument cap
//! before any is read, so a refused batch has run (and loaded) nothing. It is
//! then admitted as ONE request: it takes one call slot with
//! [`Executor::admit_batch`] (waiting for one like a direct call, and
//! rejected `server_busy` like one when none frees in time) and holds it
//! until its last call ends. Its calls run with `Admission::InTask` under a
//! batch-local semaphore of `max_concurrent_calls` permits: calls whose
//! references do not connect them run concurrently, a call that uses
//! another's result waits for it, and a call waiting for a permit waits,
//! never "Server busy". So one batch may run up to `max_concurrent_calls`
//! guards while holding a single slot; the slots bound how many requests
//! are admitted, the batch's semaphore how wide each one runs, and the
//! executor's guard-thread budget how many threads all in-process calls
//! together may use. References are replaced only when their call is about
//! to run. The whole batch shares one deadline, the server's `max_timeout`,
//! which caps every call's own.
//!
//! A failed call keeps its own error; calls that use its result are skipped
//! with the reason; the rest still run. Every call goes through the executor,
//! which records its `function_call_*` events under the batch's origin (mode
//! `batch`). The CLI's `call --batch file.json` runs the same code
//! (`run_file`).

mod artifact;
mod input;
mod plan;
mod refs;
mod result;
mod schedule;
mod shape;

pub use input::{BatchCall, ReturnMode, RunBatchInput};
pub use result::{BatchCounts, BatchResult, CallResult, CallStatus};

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant as StdInstant;

use tokio_util::sync::CancellationToken;

use crate::TaskStatus;
use refs::ref_id;
use schedule::{Outcome, execute};
use serde_json::Value;
use warden_calls::artifacts::ArtifactStore;
use warden_calls::events::{Events, Origin};
use warden_calls::executor::Executor;
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;
use warden_core::reach::Reach;

/// The batch's destructive calls as a plan: each destructive guard and how
/// many of the batch's calls name it.
fn destructive_plan<'a>(
    executor: &Executor,
    names: impl Iterator<Item = &'a str>,
) -> Vec<warden_core::approval::PlanItem> {
    let mut counts: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for name in names {
        if executor.registry().get(name).is_some_and(|g| g.hints.destructive) {
            *counts.entry(name).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|(guard, max_calls)| warden_core::approval::PlanItem {
            guard: guard.to_string(),
            max_calls,
            arguments: Vec::new(),
        })
        .collect()
}

/// Most significant figures `digits` accepts (an f64 holds about 17).
const MAX_DIGITS: u64 = 17;

/// Plans, admits and runs a batch; the result lists every call. Its
/// calls are recorded in `events`: the executor's log, or a batch task's
/// handle that also writes its own log (where a destructive call is
/// written through before it runs, see `warden_calls::events::recovered`).
/// Boxed: compiled here once, not in each crate that awaits it
/// ([`warden_core::future`]).
pub fn run<'a>(
    executor: &'a Arc<Executor>,
    store: &'a ArtifactStore,
    limits: &'a crate::limits::TaskLimits,
    input: RunBatchInput,
    (origin, events): (&'a Origin, &'a Events),
    cancel: CancellationToken,
) -> BoxFuture<'a, Result<BatchResult, GuardError>> {
    Box::pin(async move {
        let started = StdInstant::now();
        check_shaping(&input)?;
        let store = store.view(&origin.principal);
        // The person behind this request, when they can be asked: each
        // destructive call is then confirmed before it runs.
        let asker = Reach::here();
        let (calls, tables) = plan::plan(
            input.calls,
            // A guard the policy denies the caller is planned as an unknown
            // name: the whole batch is refused before anything runs (the
            // executor would refuse the call itself too).
            &executor.visible_to(origin),
            executor.limits(),
            limits.allow_destructive_in_batch,
            store,
            match &asker {
                Reach::Asker(_) | Reach::Recorded { .. } => Ok(()),
                Reach::Nobody(why) => Err(*why),
                // Its plan is asked before anything runs (below).
                Reach::Durable(_) => Ok(()),
            },
        )?;
        ask_plan_first(executor, limits, &calls, &asker)?;
        let _slot = executor
            .admit_batch(&origin.principal, &cancel)
            .await
            .map_err(|failure| failure.error)?;
        let names: Vec<String> = calls.iter().map(|c| c.name.clone()).collect();
        let deps: Vec<BTreeSet<usize>> = calls.iter().map(|c| c.deps.clone()).collect();
        let outcomes = execute(
            executor,
            calls,
            &tables,
            &names,
            (origin, events),
            &cancel,
            (input.receipt, asker, limits.allow_destructive_in_batch),
        )
        .await;
        drop(tables);
        let shaping = Shaping {
            return_mode: input.return_mode,
            select: &input.select,
            digits: input.digits,
        };
        let counts = list(outcomes, &names, &deps, &shaping);
        let status = if counts.failed + counts.skipped == 0 {
            TaskStatus::Success
        } else if cancel.is_cancelled() {
            TaskStatus::Cancelled
        } else {
            TaskStatus::Failed
        };
        Ok(BatchResult {
            request_id: origin.request_id.clone(),
            status,
            counts,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        })
    })
}

/// `digits` and `select` are checked before anything is planned.
fn check_shaping(input: &RunBatchInput) -> Result<(), GuardError> {
    if let Some(digits) = input.digits {
        warden_core::schema::in_range("digits", digits, 1, MAX_DIGITS)?;
    }
    for (i, path) in input.select.iter().enumerate() {
        if path.is_empty() {
            return Err(GuardError::invalid_input(
                format!("select[{i}]"),
                "must not be empty; give a dotted path such as \"stats.mean\"",
            ));
        }
        refs::check_path(path)
            .map_err(|e| GuardError::invalid_input(format!("select[{i}]"), e.to_string()))?;
    }
    Ok(())
}

/// A batch that can wait for the person (a detached task, a stateless
/// request) asks once for all its destructive calls, before any runs:
/// they are known from the batch itself. `Err` (`input_required`) when
/// the question was just asked.
fn ask_plan_first(
    executor: &Executor,
    limits: &crate::limits::TaskLimits,
    calls: &[plan::Planned],
    asker: &Reach,
) -> Result<(), GuardError> {
    let Some(book) = asker.book() else {
        return Ok(());
    };
    if limits.allow_destructive_in_batch {
        return Ok(());
    }
    let plan = destructive_plan(executor, calls.iter().map(|c| c.name.as_str()));
    if plan.is_empty() {
        return Ok(());
    }
    // The plan is bound to the whole batch (every call's name and
    // arguments as given, references in place) and shows its destructive
    // calls in full: the person approves these calls, not a count.
    let whole: Vec<serde_json::Value> = calls
        .iter()
        .map(|c| serde_json::json!({"name": c.name, "arguments": c.arguments}))
        .collect();
    let source = warden_core::receipt::digest(&serde_json::Value::Array(whole));
    // Its destructive calls, and every call whose output feeds one of
    // them (a `$result` reference): the values the person approves come
    // from those.
    let destructive = |c: &plan::Planned| {
        executor
            .registry()
            .get(&c.name)
            .is_some_and(|g| g.hints.destructive)
    };
    let mut shown_calls: BTreeSet<usize> = (0..calls.len()).filter(|&i| destructive(&calls[i])).collect();
    let mut frontier: Vec<usize> = shown_calls.iter().copied().collect();
    while let Some(i) = frontier.pop() {
        for &dep in &calls[i].deps {
            if shown_calls.insert(dep) {
                frontier.push(dep);
            }
        }
    }
    let listing: String = shown_calls
        .iter()
        .map(|&i| {
            let c = &calls[i];
            let mark = if destructive(c) { " (destructive)" } else { "" };
            format!("calls[{i}] '{}'{mark} with {}\n", c.name, c.arguments)
        })
        .collect();
    let Some(shown) = warden_core::approval::plan_source(&listing) else {
        return Err(GuardError::new(
            warden_core::error::codes::FORBIDDEN,
            format!(
                "the batch's destructive calls are {} bytes as the approval form would show them, above its {}-byte limit (MAX_PLAN_SOURCE_BYTES), and the person must see every call they approve; split the batch or pass smaller arguments",
                listing.len(),
                warden_core::limits::MAX_PLAN_SOURCE_BYTES
            ),
        ));
    };
    let Some(key) = book.start(&source, &plan) else {
        return Ok(());
    };
    let mut pending = warden_core::approval::plan_question(&plan, &source, "batch", &shown);
    pending.key = key;
    book.ask(pending);
    Err(GuardError::new(
        warden_core::error::codes::INPUT_REQUIRED,
        "the batch waits for the person to approve its destructive calls",
    ))
}

/// How the outputs a batch returns are shaped.
struct Shaping<'a> {
    return_mode: ReturnMode,
    select: &'a [String],
    digits: Option<u64>,
}

/// Every call's entry, in order, with the counts: the outputs returned
/// (all, or the last call's) shaped by `select` and `digits`.
fn list(
    outcomes: Vec<Outcome>,
    names: &[String],
    deps: &[BTreeSet<usize>],
    shaping: &Shaping,
) -> BatchCounts {
    let last = outcomes.len().saturating_sub(1);
    let (mut succeeded, mut failed, mut skipped) = (0, 0, 0);
    let mut listed = Vec::with_capacity(outcomes.len());
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let mut entry = CallResult {
            index: i,
            reference: ref_id(i),
            name: names[i].clone(),
            depends_on: deps[i].iter().copied().collect(),
            status: CallStatus::Skipped,
            duration_ms: 0.0,
            output: None,
            select_missing: None,
            error: None,
            reason: None,
            receipt: None,
        };
        match outcome {
            Outcome::Ran {
                result,
                duration_ms,
                receipt,
            } => {
                entry.duration_ms = duration_ms;
                entry.receipt = receipt.map(|receipt| *receipt);
                match result {
                    Ok(output) => {
                        succeeded += 1;
                        entry.status = CallStatus::Success;
                        if shaping.return_mode == ReturnMode::All || i == last {
                            entry.output = Some(shape_output(output, shaping, &mut entry.select_missing));
                        }
                    }
                    Err(failure) => {
                        failed += 1;
                        entry.status = failure.status.into();
                        entry.error = Some(failure.error);
                    }
                }
            }
            Outcome::Skipped { reason } => {
                skipped += 1;
                entry.reason = Some(reason);
            }
        }
        listed.push(entry);
    }
    BatchCounts {
        calls: listed,
        succeeded,
        failed,
        skipped,
    }
}

/// One returned output, shaped: `select`ed paths (the missing ones noted
/// in `missing`), numbers rounded to `digits`.
fn shape_output(mut output: Value, shaping: &Shaping, missing: &mut Option<Vec<String>>) -> Value {
    if !shaping.select.is_empty() {
        let (kept, absent) = shape::select(&output, shaping.select);
        output = kept;
        if !absent.is_empty() {
            *missing = Some(absent);
        }
    }
    if let Some(digits) = shaping.digits {
        shape::round(&mut output, digits as u32);
    }
    output
}
