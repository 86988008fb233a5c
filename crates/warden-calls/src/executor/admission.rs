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
//! milliseconds too. In front of the server's slots, each bound principal
//! has a share of them ([`Slots::per_principal`], counted by
//! [`crate::tenant::limits::Gates`]): a principal's requests beyond its
//! share wait for its own requests, within the same bounded wait, and are
//! then refused `principal_busy`. A queued MCP task claimed into a task
//! slot takes a permit of its owner's share too ([`Slots::with_share`]),
//! so a principal's task slots are bounded whichever path took them
//! (direct `run_script` / `run_coding_task`, or the queue). Nothing here
//! runs a guard.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Failure, Status};
use crate::tenant::Principal;
use crate::tenant::limits::{Gates, bound};
use warden_core::error::{GuardError, codes};

/// Slots of one kind and their wait queue.
pub struct Slots {
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
    /// Each bound principal's share of these slots, when capped.
    share: Option<Share>,
}

/// A per-principal cap in front of a kind of slot.
struct Share {
    gates: Gates,
    /// The limit as a refusal names it, e.g. "its share of the call slots
    /// (WARDEN_PRINCIPAL_CALL_SHARE_PERCENT)".
    limit: String,
}

/// An admitted request: its server slot and, for a bound principal, its
/// share permit. Held by the request until it is answered; dropping it
/// frees both.
#[derive(Debug)]
pub struct Admitted {
    _slot: OwnedSemaphorePermit,
    _share: Option<OwnedSemaphorePermit>,
}

/// Why waiting for a permit ended without one.
enum NoPermit {
    /// The queue was full (or waiting is off): `n` callers wait already.
    QueueFull(usize),
    /// The wait ran out.
    TimedOut,
    /// The client cancelled.
    Cancelled,
}

impl Slots {
    pub fn new(what: &'static str, size: usize, queue: usize, wait: Duration) -> Self {
        Self {
            what,
            slots: Arc::new(Semaphore::new(size)),
            size,
            waiting: AtomicUsize::new(0),
            queue,
            wait,
            share: None,
        }
    }

    /// Caps how many of these slots one bound principal holds at once to
    /// `cap`; `limit` names the limit and its variable in refusals. A cap
    /// of the whole size changes nothing and is left out.
    pub fn per_principal(mut self, cap: usize, limit: String) -> Self {
        if cap < self.size {
            self.share = Some(Share {
                gates: Gates::new(cap),
                limit,
            });
        }
        self
    }

    /// A slot for `principal`: at once when one is free, else after a
    /// bounded wait. A bound principal first takes a permit of its share,
    /// waiting (within the same wait) only for its own requests to end:
    /// requests beyond its share never enter the server's queue, so one
    /// principal's flood cannot fill that queue for the others.
    pub async fn admit(
        &self,
        principal: &Principal,
        cancel: &CancellationToken,
    ) -> Result<Admitted, Failure> {
        let until = Instant::now() + self.wait;
        let share = match &self.share {
            Some(share) if bound(principal) => {
                let gate = share.gates.of(principal);
                let permit = acquire(&gate.permits, &gate.waiting, self.queue, self.wait, until, cancel)
                    .await
                    .map_err(|why| self.refusal(why, |_| self.principal_busy(share, principal)))?;
                Some(permit)
            }
            _ => None,
        };
        let slot = acquire(&self.slots, &self.waiting, self.queue, self.wait, until, cancel)
            .await
            .map_err(|why| self.refusal(why, |why| self.server_busy(why)))?;
        Ok(Admitted {
            _slot: slot,
            _share: share,
        })
    }

    /// A free slot now, or `None`, without a principal share: the claimer
    /// reserves it before it knows whose queued task it claims, then
    /// attaches the owner's share ([`Slots::with_share`]).
    pub fn try_slot(&self) -> Option<Admitted> {
        let slot = self.slots.clone().try_acquire_owned().ok()?;
        Some(Admitted {
            _slot: slot,
            _share: None,
        })
    }

    /// `slot` (from [`Slots::try_slot`]) with a permit of `principal`'s
    /// share attached, so a claimed queued task counts against its owner's
    /// share exactly like a direct one; `Err(slot)` when the owner holds
    /// all of its share now (the caller gives the slot back and waits with
    /// [`Slots::admit_claimed`]). An unbound principal, or no share, needs
    /// no permit.
    pub fn with_share(&self, mut slot: Admitted, principal: &Principal) -> Result<Admitted, Admitted> {
        match &self.share {
            Some(share) if bound(principal) => {
                match share.gates.of(principal).permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        slot._share = Some(permit);
                        Ok(slot)
                    }
                    Err(_) => Err(slot),
                }
            }
            _ => Ok(slot),
        }
    }

    /// A slot and share permit for a claimed queued task whose owner held
    /// all of its share when it was claimed: waits, with no time limit
    /// (the task is already accepted; its lease is renewed meanwhile), for
    /// one of the owner's tasks to end, then for a free slot, in arrival
    /// order with every other waiter. `None` when `cancel` fires first.
    pub async fn admit_claimed(&self, principal: &Principal, cancel: &CancellationToken) -> Option<Admitted> {
        let share = match &self.share {
            Some(share) if bound(principal) => {
                let gate = share.gates.of(principal);
                tokio::select! {
                    permit = gate.permits.clone().acquire_owned() => Some(permit.ok()?),
                    _ = cancel.cancelled() => return None,
                }
            }
            _ => None,
        };
        let slot = tokio::select! {
            permit = self.slots.clone().acquire_owned() => permit.ok()?,
            _ = cancel.cancelled() => return None,
        };
        Some(Admitted {
            _slot: slot,
            _share: share,
        })
    }

    fn refusal(&self, why: NoPermit, busy: impl FnOnce(&NoPermit) -> Failure) -> Failure {
        match why {
            NoPermit::Cancelled => Failure::new(
                Status::Cancelled,
                GuardError::new(
                    codes::CANCELLED,
                    format!("the request was cancelled while waiting for a {} slot", self.what),
                ),
            ),
            NoPermit::QueueFull(_) | NoPermit::TimedOut => busy(&why),
        }
    }

    fn server_busy(&self, why: &NoPermit) -> Failure {
        let why = match why {
            NoPermit::QueueFull(waiting) => format!(
                "all {} {} slots are in use and {waiting} requests already wait for one",
                self.size, self.what
            ),
            _ => format!(
                "all {} {} slots stayed in use for {} ms",
                self.size,
                self.what,
                self.wait.as_millis()
            ),
        };
        Failure::new(
            Status::Rejected,
            GuardError::new(codes::SERVER_BUSY, format!("Server busy; retry later ({why})")),
        )
    }

    /// `principal_busy`: the principal holds all of its share. When one of
    /// its requests ends is unknown; a second is the hint.
    fn principal_busy(&self, share: &Share, principal: &Principal) -> Failure {
        let wait = self.wait.as_secs().max(1);
        Failure::new(
            Status::Rejected,
            GuardError::new(
                codes::PRINCIPAL_BUSY,
                format!(
                    "principal busy: '{principal}' already holds {} of the {} {} slots, {}; retry when one of its {}s ends (after {wait} s or later)",
                    share.gates.cap(),
                    self.size,
                    self.what,
                    share.limit,
                    self.what,
                ),
            )
            .retry_after(wait),
        )
    }
}

/// A permit of `semaphore`: at once when one is free; else, unless
/// `queue` callers already wait (counted in `waiting`) or `wait` is zero,
/// after waiting until `until`, in arrival order (tokio's semaphore is fair).
async fn acquire(
    semaphore: &Arc<Semaphore>,
    waiting: &AtomicUsize,
    queue: usize,
    wait: Duration,
    until: Instant,
    cancel: &CancellationToken,
) -> Result<OwnedSemaphorePermit, NoPermit> {
    if let Ok(permit) = semaphore.clone().try_acquire_owned() {
        return Ok(permit);
    }
    if wait.is_zero() {
        return Err(NoPermit::QueueFull(waiting.load(Ordering::Acquire)));
    }
    if waiting.fetch_add(1, Ordering::AcqRel) >= queue {
        waiting.fetch_sub(1, Ordering::AcqRel);
        return Err(NoPermit::QueueFull(waiting.load(Ordering::Acquire)));
    }
    let _leave = Waiting(waiting);
    tokio::select! {
        permit = tokio::time::timeout_at(until, semaphore.clone().acquire_owned()) => match permit {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(NoPermit::TimedOut),
        },
        _ = cancel.cancelled() => Err(NoPermit::Cancelled),
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
        let local = Principal::local();
        let held = slots.admit(&local, &never).await.expect("free slot");
        let waiter = {
            let slots = slots.clone();
            tokio::spawn(async move {
                slots
                    .admit(&Principal::local(), &CancellationToken::new())
                    .await
                    .map(drop)
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The queue (1) is full: refused at once.
        let refused = slots.admit(&local, &never).await.expect_err("queue full");
        assert!(
            refused.error.message.contains("already wait"),
            "{}",
            refused.error.message
        );
        drop(held);
        assert!(waiter.await.expect("joined").is_ok());
        let held = slots.admit(&local, &never).await.expect("free again");
        let late = slots.admit(&local, &never).await.expect_err("wait ran out");
        assert_eq!(late.status, Status::Rejected);
        assert!(late.error.message.contains("300 ms"), "{}", late.error.message);
        drop(held);
    }

    #[tokio::test]
    async fn a_principal_beyond_its_share_waits_for_its_own_calls_and_others_pass() {
        // Share 1 of 2 slots: Alice's second call is refused principal_busy after the wait,
        // while Bob is admitted at once; local is not bound.
        let slots = Slots::new("call", 2, 4, Duration::from_millis(200))
            .per_principal(1, "its share (WARDEN_PRINCIPAL_CALL_SHARE_PERCENT)".into());
        let never = CancellationToken::new();
        let (alice, bob) = (
            Principal::new("alice").expect("name"),
            Principal::new("bob").expect("name"),
        );
        let held = slots.admit(&alice, &never).await.expect("alice's first");
        let started = Instant::now();
        let (second, bobs) = tokio::join!(slots.admit(&alice, &never), async {
            let admitted = slots.admit(&bob, &never).await;
            (admitted, started.elapsed())
        });
        let refused = second.expect_err("beyond alice's share");
        assert_eq!(refused.status, Status::Rejected);
        assert_eq!(refused.error.code, codes::PRINCIPAL_BUSY);
        assert_eq!(refused.error.retry_after_seconds, Some(1));
        assert!(
            refused
                .error
                .message
                .contains("WARDEN_PRINCIPAL_CALL_SHARE_PERCENT"),
            "{}",
            refused.error.message
        );
        assert!(started.elapsed() >= Duration::from_millis(200));
        let (bobs, waited) = bobs;
        assert!(waited < Duration::from_millis(100), "bob waited {waited:?}");
        drop(bobs);
        // With alice's first call done, her next one is admitted.
        drop(held);
        let again = slots.admit(&alice, &never).await.expect("alice again");
        let local = slots.admit(&Principal::local(), &never).await.expect("local");
        drop((again, local));
    }

    #[tokio::test]
    async fn a_claimed_task_takes_its_owners_share_and_waits_for_it() {
        // Share 1 of 2 task slots: alice's claimed task holds her share, so her direct task
        // is refused; her second claimed task gets its slot back and waits for the first.
        let slots = Arc::new(
            Slots::new("task", 2, 4, Duration::from_millis(100))
                .per_principal(1, "its task limit (WARDEN_TASKS_PER_PRINCIPAL)".into()),
        );
        let never = CancellationToken::new();
        let alice = Principal::new("alice").expect("name");
        let first = slots
            .with_share(slots.try_slot().expect("a free slot"), &alice)
            .expect("alice's share is free");
        let direct = slots.admit(&alice, &never).await.expect_err("beyond her share");
        assert_eq!(direct.error.code, codes::PRINCIPAL_BUSY);
        let second = slots.try_slot().expect("the other slot");
        let returned = slots.with_share(second, &alice).expect_err("her share is held");
        drop(returned);
        let waiter = {
            let (slots, alice) = (slots.clone(), alice.clone());
            tokio::spawn(async move { slots.admit_claimed(&alice, &CancellationToken::new()).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "it waits while her first task runs");
        // Bob is not held up by alice's waiting task.
        let bob = Principal::new("bob").expect("name");
        let bobs = slots.admit(&bob, &never).await.expect("bob's slot");
        drop(first);
        drop(bobs);
        let seated = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("seated once her first task ended")
            .expect("joined");
        assert!(seated.is_some());
        // A cancelled wait gives up.
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(slots.admit_claimed(&alice, &cancel).await.is_none());
    }
}
