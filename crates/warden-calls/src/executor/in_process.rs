//! Running a guard on a server thread (`in_process` and direct `pure` calls).
//!
//! The function runs on a guard-pool thread under a guard-thread permit the
//! executor took before the call started (see `threads`). A thread cannot be
//! killed, so at the deadline (or on cancellation) the caller is answered
//! `timed_out` (`cancelled`) while the function runs on: the permit's
//! [`Held`] cell then swaps the running permit for an overdue one if one is
//! free, and the thread releases whichever it holds when the function
//! finally returns. The caller's call slot, if any, is free once answered.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::threads::{GuardThreads, Held};
use super::{Failure, Status};
use warden_core::error::{GuardError, codes};
use warden_core::guard::{Guard, Resources};

/// Runs `guard` on a guard thread under `held`, answering by `deadline` at
/// the latest.
pub(super) async fn run(
    guard: Guard,
    resources: Arc<Resources>,
    parent: opentelemetry::Context,
    arguments: Value,
    (threads, held): (&GuardThreads, &Held),
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Value, Failure> {
    // The guard's progress and log messages go to the MCP request that
    // scoped a sink around this call (`warden_core::notify`), if any.
    let notices = warden_core::notify::for_this_task();
    // Likewise its questions (`warden_core::ask`): answered by that request's
    // client, or refused at once where there is none.
    let asker = warden_core::ask::for_this_task();
    let (sender, receiver) = oneshot::channel();
    let name = guard.name.clone();
    let due = deadline.into_std();
    threads.spawn(
        held.clone(),
        Box::new(move || {
            let outcome = warden_core::ask::with_asker(asker, Some(due), || {
                warden_core::notify::with_sink(notices, || {
                    invoke_caught(&guard, &resources, &parent, arguments)
                })
            });
            let _ = sender.send(outcome);
        }),
    )?;
    tokio::select! {
        outcome = receiver => outcome.unwrap_or_else(|_| {
            Err(Failure::new(Status::Failed, GuardError::failed("guard thread ended without a result")))
        }),
        _ = tokio::time::sleep_until(deadline) => {
            held.overrun();
            Err(answered_early(&name, Status::TimedOut))
        }
        _ = cancel.cancelled() => {
            held.overrun();
            Err(answered_early(&name, Status::Cancelled))
        }
    }
}

/// What the caller of an in-process call is answered when it is answered
/// before the function returned: `timed_out` at the deadline, `cancelled`
/// for any other `status`. The script door answers its own calls with it.
pub fn answered_early(name: &str, status: Status) -> Failure {
    match status {
        Status::TimedOut => Failure::new(
            Status::TimedOut,
            GuardError::new(
                codes::TIMED_OUT,
                format!(
                    "guard '{name}' timed out; it runs in the server process and may still finish in the background"
                ),
            ),
        ),
        _ => Failure::new(
            Status::Cancelled,
            GuardError::new(codes::CANCELLED, format!("call to '{name}' was cancelled")),
        ),
    }
}

/// Runs `guard` on the current thread under a `library.function` span,
/// turning a panic into a `guard_panicked` failure.
pub(super) fn invoke_caught(
    guard: &Guard,
    resources: &Resources,
    parent: &opentelemetry::Context,
    arguments: Value,
) -> Result<Value, Failure> {
    let span = crate::telemetry::start(
        "library.function",
        opentelemetry::trace::SpanKind::Internal,
        parent,
        vec![opentelemetry::KeyValue::new(
            "warden.function",
            guard.name.clone(),
        )],
    );
    let outcome = warden_core::error::catch_guard_panic(&guard.name, || guard.invoke(resources, arguments))
        .map_err(|e| {
            let status = if e.code == codes::INPUT_REQUIRED {
                Status::InputRequired
            } else {
                Status::Failed
            };
            Failure::new(status, e)
        });
    let error_type = outcome.as_ref().err().map(|f| f.error.code.as_str());
    crate::telemetry::end(
        &span,
        if error_type.is_none() { "success" } else { "failed" },
        error_type,
    );
    outcome
}
