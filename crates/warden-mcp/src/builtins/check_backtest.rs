//! `check_backtest`: run every guard a bundle of data can feed, in one call.
//!
//! The bundle's keys are slots (see [`warden_core::catalogue`]). The tool takes one
//! call slot, like a direct call (waiting for one the same bounded time),
//! then runs the ready guards one after the other through the executor with
//! [`Admission::InTask`], so each has its own validation, mode, timeout,
//! events and, when in-process, guard-thread permit. It runs registered guards only:
//! built-in tools and script-only functions are never run from here. It
//! runs read-only guards only: a guard that may change something (not
//! read-only, destructive) is named in `not_read_only` and never run, since
//! handing a bundle to every matching guard is not a request to act.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{Builtin, BuiltinTool, Call, Reply, decode, tool};
use warden_calls::executor::{CallRequest, Status};
use warden_core::catalogue::{accepts, missing};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// Run every guard whose required data is in your bundle, and report which passed, failed, were skipped or rejected.
///
/// `slots` maps slot names (the guards' input field names, see bundle_coverage) to values, e.g.
/// {"series": [...], "threshold": 5} (bundle_coverage lists the slot names). Each guard
/// whose required slots are all present runs with only the slots it accepts (a guard without required slots
/// runs only when the bundle has a slot it accepts). Returns {passed, ran, failed, skipped {guard: [missing
/// slots]}, rejected {guard: error}, not_read_only [guards the bundle matches that are not read-only: never run here, call them
/// directly], script_only {function: reason}, unused_slots, results {guard: result}}.
/// A guard passes when its result has passed=true or, without that key, when it succeeds; `passed` is true
/// when at least one guard ran, every guard that ran passed, and none rejected its input. The whole run uses
/// one call slot and ends within the server's maximum timeout.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckBacktestInput {
    /// Slot name → value: the data of one backtest, shared by every guard that takes that slot.
    pub slots: Map<String, Value>,
}

pub(super) struct CheckBacktest;

impl Builtin for CheckBacktest {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::CheckBacktest
    }
    fn mode(&self) -> &'static str {
        "batch"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<CheckBacktestInput>(self.name(), "Check a backtest", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: CheckBacktestInput = decode(call.arguments)?;
            if input.slots.is_empty() {
                return Err(GuardError::invalid_input(
                    "slots",
                    "is empty: give at least one slot, e.g. {\"returns\": [...]}; bundle_coverage lists the slot names",
                ));
            }
            let executor = call.ctx.executor();
            // One call slot for the whole run, held until this function returns.
            let _permit = executor
                .admit_batch(&call.origin.principal, &call.cancel)
                .await
                .map_err(|failure| failure.error)?;
            let deadline = Instant::now() + executor.limits().max_timeout;
            // Only the guards this caller may call: a denied one is neither
            // run nor named (skipped, rejected, unused_slots).
            let registry = executor.visible_to(call.origin);
            let have: BTreeSet<String> = input.slots.keys().cloned().collect();
            let mut report = Report::default();
            for guard in registry.iter() {
                let lacking = missing(guard, &have);
                let arguments: Map<String, Value> = input
                    .slots
                    .iter()
                    .filter(|(slot, _)| accepts(guard, slot))
                    .map(|(slot, value)| (slot.clone(), value.clone()))
                    .collect();
                if !lacking.is_empty() || arguments.is_empty() {
                    report.skipped.insert(guard.name.clone(), lacking);
                    continue;
                }
                if !guard.hints.read_only || guard.hints.destructive {
                    report.not_read_only.push(guard.name.clone());
                    continue;
                }
                let outcome = executor
                    .call(
                        CallRequest::new(
                            &guard.name,
                            Value::Object(arguments),
                            &*call.origin,
                            call.cancel.clone(),
                        )
                        .in_task(deadline),
                    )
                    .await;
                match outcome {
                    Ok(result) => report.record(&guard.name, result),
                    // The client gave up: stop, as a direct call would.
                    Err(failure) if failure.status == Status::Cancelled => return Err(failure.error),
                    Err(failure) => {
                        report.rejected.insert(guard.name.clone(), failure.error);
                    }
                }
            }
            let script_only: BTreeMap<&str, &str> =
                registry.script_functions().map(|f| (f.name, f.reason)).collect();
            let unused: Vec<&String> = have
                .iter()
                .filter(|slot| !registry.iter().any(|g| accepts(g, slot)))
                .collect();
            let passed = !report.ran.is_empty() && report.failed.is_empty() && report.rejected.is_empty();
            Reply::data(&Checked {
                passed,
                report,
                script_only,
                unused_slots: unused,
            })
        })
    }
}

/// The answer: whether the bundle passed, and the run's report.
#[derive(Serialize)]
struct Checked<'a> {
    passed: bool,
    #[serde(flatten)]
    report: Report,
    script_only: BTreeMap<&'a str, &'a str>,
    unused_slots: Vec<&'a String>,
}

/// What a guard's result says about passing: `passed: false` fails it;
/// without a boolean `passed` it passed by succeeding.
#[derive(Deserialize)]
struct Verdict {
    #[serde(default, deserialize_with = "lenient_bool")]
    passed: Option<bool>,
}

/// A boolean, or `None` for any other value.
fn lenient_bool<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    Ok(Value::deserialize(deserializer)?.as_bool())
}

/// What the run found so far.
#[derive(Default, Serialize)]
struct Report {
    ran: Vec<String>,
    failed: Vec<String>,
    skipped: BTreeMap<String, Vec<String>>,
    rejected: BTreeMap<String, GuardError>,
    /// Guards the bundle could feed that are not read-only: never run here.
    not_read_only: Vec<String>,
    results: BTreeMap<String, Value>,
}

impl Report {
    /// A guard that returned: it passed unless its result says `passed: false`.
    fn record(&mut self, guard: &str, result: Value) {
        let passed = !Verdict::deserialize(&result).is_ok_and(|v| v.passed == Some(false));
        self.ran.push(guard.to_string());
        if !passed {
            self.failed.push(guard.to_string());
        }
        self.results.insert(guard.to_string(), result);
    }
}
