//! The script worker check: a real script worker, sandboxed as a task's
//! would be, runs `40 + 2` through its door.
//!
//! The sandbox probes ([`super::sandbox_probe`]) ask the kernel whether each
//! layer *could* be applied; this check starts the worker that applies them
//! and reads back what it really got, so a layer that probes well but fails
//! inside the worker, or a worker that cannot start at all, shows up before
//! a client's first `run_script`. No guard runs and no task is created: the
//! worker's files go to the preflight's private diagnostics directory.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::report::Check;
use warden_calls::artifacts::ArtifactStore;
use warden_calls::events::{Events, Origin};
use warden_calls::executor::Executor;
use warden_sandbox::process::Rlimits;
use warden_script::host::session::{Budget, Context, RunEnd, Session};

/// The script the check runs.
const PROBE_SCRIPT: &str = "40 + 2";

/// Starts a script worker under `diag`, runs [`PROBE_SCRIPT`] and reports
/// the sandbox layers the worker found.
pub(crate) async fn script_worker(executor: &Arc<Executor>, diag: &Path, timeout: Duration) -> Check {
    let name = "script_worker";
    let dir = diag.join("script-worker");
    let exe = match std::fs::create_dir_all(&dir).and_then(|()| std::env::current_exe()) {
        Ok(exe) => exe,
        Err(error) => {
            return Check::fail(
                name,
                format!("cannot prepare the script worker check: {error}"),
                "check that the diagnostics directory is writable",
            );
        }
    };
    let started = Instant::now();
    let deadline = started + timeout;
    let rlimits = Rlimits::for_call(&executor.limits().worker, timeout.as_secs());
    let mut session = match Session::start(
        executor.clone(),
        &warden_script::workers(exe),
        &dir,
        rlimits,
        deadline,
        || (),
    )
    .await
    {
        Ok((session, ())) => session,
        Err(reason) => {
            return Check::fail(
                name,
                format!("a script worker did not start: {reason}"),
                format!(
                    "read {} for the worker's own words",
                    dir.join("worker_stderr.log").display()
                ),
            );
        }
    };
    let store = ArtifactStore::new(&dir, 1);
    let events = Events::disabled();
    let origin = Origin::request("preflight", "preflight");
    let cancel = CancellationToken::new();
    let ctx = Context {
        executor,
        store: &store,
        events: &events,
        origin: &origin,
        task_id: "preflight",
        cancel: &cancel,
        progress: None,
    };
    let budget = Budget {
        calls_left: 0,
        count_pure: false,
    };
    let end = session.run(&ctx, PROBE_SCRIPT, deadline, budget).await;
    let elapsed = started.elapsed().as_millis();
    let pid = session.pid();
    let layers = session.layers.clone();
    session.finish().wait().await;
    let worker_log = dir.join("worker_stderr.log");
    if let Some(failed) = run_failed(end, timeout, &worker_log) {
        return failed;
    }
    let missing = layers.missing();
    let summary = format!("script worker pid {pid} ran `{PROBE_SCRIPT}` through its door in {elapsed} ms");
    if missing.is_empty() {
        Check::pass(
            name,
            format!(
                "{summary}; sandbox in force: network namespace, Landlock full, rlimits, no-new-privileges, \
capabilities dropped, process limit, seccomp"
            ),
        )
    } else {
        Check::warn(
            name,
            format!("{summary}, but without: {}", missing.join(", ")),
            "see the sandbox.* checks for what the kernel refused; scripts still run, with those walls missing, \
unless WARDEN_SANDBOX=strict (then they are refused)",
        )
    }
}

/// Why the probe's run failed, as the check's answer; `None` when it
/// answered 42.
fn run_failed(end: RunEnd, timeout: Duration, worker_log: &Path) -> Option<Check> {
    let name = "script_worker";
    let failed = |why: String| Check::fail(name, why, format!("read {}", worker_log.display()));
    match end {
        RunEnd::Finished(outcome) if outcome.error.is_none() && outcome.value == json!(42) => None,
        RunEnd::Finished(outcome) => Some(failed(format!(
            "the script worker answered {} instead of 42 (error: {:?})",
            outcome.value, outcome.error
        ))),
        RunEnd::TimedOut => Some(Check::fail(
            name,
            format!(
                "the script worker did not finish `{PROBE_SCRIPT}` within {} s",
                timeout.as_secs()
            ),
            "raise --timeout if this machine is slow",
        )),
        RunEnd::Cancelled => Some(failed("the check was cancelled".into())),
        RunEnd::Paused => Some(failed(
            "the probe script paused for a question it never asks".into(),
        )),
        RunEnd::Crashed(reason) => Some(failed(format!("the script worker failed: {reason}"))),
    }
}
