//! Running a guard on a server thread (`in_process` and direct `pure` calls).
//!
//! A thread cannot be killed, so at the deadline the caller is answered
//! `timed_out` while the function runs on. Slot accounting: the call slot
//! travels with the thread in a shared cell. At the deadline the executor
//! tries to swap it for an "overdue" permit: on success the call slot is free
//! again at once and the thread holds the overdue permit until it returns;
//! when every overdue permit is taken, the thread keeps the call slot, so
//! hung guards show up as reduced capacity instead of unbounded threads.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Failure, Status};
use crate::error::{GuardError, codes};
use crate::guard::{Guard, Resources};
use crate::worker::panic_message;

type HeldPermit = Arc<Mutex<Option<OwnedSemaphorePermit>>>;

/// The call's slot (if it holds one) and the overdue pool it may move to.
pub(super) struct Slots {
    pub permit: Option<OwnedSemaphorePermit>,
    pub overdue: Arc<Semaphore>,
}

/// Runs `guard` on a blocking thread, answering by `deadline` at the latest.
pub(super) async fn run(
    guard: Guard,
    resources: Arc<Resources>,
    parent: opentelemetry::Context,
    arguments: Value,
    slots: Slots,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Value, Failure> {
    let Slots { permit, overdue } = slots;
    let held: HeldPermit = Arc::new(Mutex::new(permit));
    let held_by_thread = held.clone();
    let (sender, receiver) = oneshot::channel();
    let name = guard.name.clone();
    tokio::task::spawn_blocking(move || {
        let outcome = invoke_caught(&guard, &resources, &parent, arguments);
        // The function returned: whatever permit it held is free now.
        if let Ok(mut slot) = held_by_thread.lock() {
            slot.take();
        }
        let _ = sender.send(outcome);
    });
    tokio::select! {
        outcome = receiver => outcome.unwrap_or_else(|_| {
            Err(Failure::new(Status::Failed, GuardError::failed("guard thread ended without a result")))
        }),
        _ = tokio::time::sleep_until(deadline) => {
            release_to_overdue(&held, &overdue);
            Err(Failure::new(Status::TimedOut, GuardError::new(
                codes::TIMED_OUT,
                format!("guard '{name}' timed out; it runs in the server process and may still finish in the background"),
            )))
        }
        _ = cancel.cancelled() => {
            release_to_overdue(&held, &overdue);
            Err(Failure::new(Status::Cancelled, GuardError::new(codes::CANCELLED, format!("call to '{name}' was cancelled"))))
        }
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
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        guard.invoke(resources, arguments)
    }));
    let outcome = match outcome {
        Ok(result) => result.map_err(|e| Failure::new(Status::Failed, e)),
        Err(payload) => Err(Failure::new(
            Status::Failed,
            GuardError::new(
                codes::GUARD_PANICKED,
                format!("guard '{}' panicked: {}", guard.name, panic_message(&payload)),
            ),
        )),
    };
    let error_type = outcome.as_ref().err().map(|f| f.error.code.as_str());
    crate::telemetry::end(
        &span,
        if error_type.is_none() { "success" } else { "failed" },
        error_type,
    );
    outcome
}

/// Swaps the call slot held by a still-running thread for an overdue permit.
fn release_to_overdue(held: &HeldPermit, overdue: &Arc<Semaphore>) {
    let Ok(mut slot) = held.lock() else { return };
    if slot.is_none() {
        return;
    }
    if let Ok(permit) = overdue.clone().try_acquire_owned() {
        *slot = Some(permit);
    }
}
