//! Slots (call slots and task slots) and the bounded wait for one.
//!
//! A direct call, a batch and `check_backtest` each hold one call slot while
//! they run. A call slot frees within milliseconds of most calls, so refusing
//! a caller the instant every slot is taken turned ordinary bursts into
//! "Server busy" (62% of calls with only 4 concurrent callers). Instead a
//! caller that finds no slot joins a bounded queue (`admission_queue`
//! waiters at most) and waits up to `admission_wait` for a slot, in arrival
//! order (tokio's semaphore is fair). A caller beyond the queue, or still
//! waiting when the wait ends, is rejected `server_busy`; one whose client
//! cancels stops waiting at once. Task slots (`run_script`,
//! `run_coding_task`) wait the same way: a quick script frees its slot in
//! milliseconds too. Nothing here runs a guard.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::{Failure, Status};
use crate::error::{GuardError, codes};

/// Slots of one kind and their wait queue.
pub(crate) struct Slots {
    /// What a slot is called in messages: "call" or "task".
    what: &'static str,
    /// One permit per admitted request, moved into the request and dropped
    /// when it is answered. Never closed.
    slots: Arc<Semaphore>,
    size: usize,
    /// Callers waiting for a slot now; bounded by `queue`.
    waiting: AtomicUsize,
    queue: usize,
    wait: Duration,
}

impl Slots {
    pub(crate) fn new(what: &'static str, size: usize, queue: usize, wait: Duration) -> Self {
        Self {
            what,
            slots: Arc::new(Semaphore::new(size)),
            size,
            waiting: AtomicUsize::new(0),
            queue,
            wait,
        }
    }

    /// A slot: at once when one is free, else after a bounded wait.
    pub(crate) async fn admit(&self, cancel: &CancellationToken) -> Result<OwnedSemaphorePermit, Failure> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        if self.wait.is_zero() || self.waiting.fetch_add(1, Ordering::AcqRel) >= self.queue {
            if !self.wait.is_zero() {
                self.waiting.fetch_sub(1, Ordering::AcqRel);
            }
            return Err(self.busy(format!(
                "all {} {} slots are in use and {} requests already wait for one",
                self.size,
                self.what,
                self.waiting.load(Ordering::Acquire)
            )));
        }
        let _leave = Waiting(&self.waiting);
        tokio::select! {
            permit = tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()) => match permit {
                Ok(Ok(permit)) => Ok(permit),
                _ => Err(self.busy(format!(
                    "all {} {} slots stayed in use for {} ms",
                    self.size,
                    self.what,
                    self.wait.as_millis()
                ))),
            },
            _ = cancel.cancelled() => Err(Failure::new(
                Status::Cancelled,
                GuardError::new(
                    codes::CANCELLED,
                    format!("the request was cancelled while waiting for a {} slot", self.what),
                ),
            )),
        }
    }

    fn busy(&self, why: String) -> Failure {
        Failure::new(
            Status::Rejected,
            GuardError::new(codes::SERVER_BUSY, format!("Server busy; retry later ({why})")),
        )
    }
}

/// Leaves the wait queue when the waiting caller is done, however it ends.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_caller_waits_for_a_slot_within_the_bounds() {
        // A freed slot goes to the waiter; beyond the queue or the wait it is busy.
        let slots = Arc::new(Slots::new("call", 1, 1, Duration::from_millis(300)));
        let never = CancellationToken::new();
        let held = slots.admit(&never).await.expect("free slot");
        let waiter = {
            let slots = slots.clone();
            tokio::spawn(async move { slots.admit(&CancellationToken::new()).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The queue (1) is full: refused at once.
        let refused = slots.admit(&never).await.expect_err("queue full");
        assert!(
            refused.error.message.contains("already wait"),
            "{}",
            refused.error.message
        );
        drop(held);
        assert!(waiter.await.expect("joined").is_ok());
        let held = slots.admit(&never).await.expect("free again");
        let late = slots.admit(&never).await.expect_err("wait ran out");
        assert_eq!(late.status, Status::Rejected);
        assert!(late.error.message.contains("300 ms"), "{}", late.error.message);
        drop(held);
    }
}
