//! Per-principal limits: the request rate, and each principal's share of
//! the call and task slots.
//!
//! [`Rate`] is a token bucket per principal (`WARDEN_CALLS_PER_MINUTE`);
//! [`Gates`] holds one small semaphore per principal that the executor's
//! admission ([`crate::executor`]) takes before a server slot, so one
//! principal never holds more than its share of them. Both are consulted
//! only for a [`bound`] principal: `local` is the server's operator (the
//! stdio client, or every caller of an HTTP server without authentication,
//! which listens on loopback only) and keeps the server-wide limits alone,
//! exactly as before principals existed. Their maps hold one entry per
//! principal seen recently: idle entries (a full bucket, a gate nobody
//! holds or waits for) are swept whenever a map has doubled since its
//! last sweep, so memory follows the active principals, not all of them.
//! Nothing here runs or waits: callers do.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Semaphore;

use super::Principal;
use warden_core::error::{GuardError, codes};

/// Whether per-principal limits apply to `principal`: every principal but
/// `local` (see the module docs).
pub fn bound(principal: &Principal) -> bool {
    principal.as_str() != super::LOCAL
}

/// A map of per-principal state that drops idle entries as it grows.
struct Swept<T> {
    map: HashMap<Principal, T>,
    /// Entries left by the last sweep.
    after_sweep: usize,
}

impl<T> Default for Swept<T> {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            after_sweep: 0,
        }
    }
}

impl<T> Swept<T> {
    /// The entry of `principal`, made by `new` if there is none; first
    /// drops the idle entries when the map has doubled since the last sweep.
    fn entry(&mut self, principal: &Principal, idle: impl Fn(&T) -> bool, new: impl FnOnce() -> T) -> &mut T {
        if !self.map.contains_key(principal) && self.map.len() >= 2 * self.after_sweep {
            self.map.retain(|_, value| !idle(value));
            self.after_sweep = self.map.len();
        }
        self.map.entry(principal.clone()).or_insert_with(new)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Requests per minute, per principal: a token bucket holding up to
/// `per_minute` tokens, refilled continuously at `per_minute / 60` a second.
pub struct Rate {
    per_minute: u32,
    buckets: Mutex<Swept<Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Rate {
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute: per_minute.max(1),
            buckets: Mutex::default(),
        }
    }

    /// Takes one request from `principal`'s bucket, or refuses it
    /// `rate_limited`, saying when the next one is allowed.
    pub fn take(&self, principal: &Principal) -> Result<(), GuardError> {
        self.take_at(principal, Instant::now())
    }

    fn take_at(&self, principal: &Principal, now: Instant) -> Result<(), GuardError> {
        if !bound(principal) {
            return Ok(());
        }
        let capacity = f64::from(self.per_minute);
        let per_second = capacity / 60.0;
        let refill = |bucket: &Bucket| {
            let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
            (bucket.tokens + elapsed * per_second).min(capacity)
        };
        let mut buckets = lock(&self.buckets);
        let bucket = buckets.entry(
            principal,
            |bucket| refill(bucket) >= capacity,
            || Bucket {
                tokens: capacity,
                at: now,
            },
        );
        bucket.tokens = refill(bucket);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = ((1.0 - bucket.tokens) / per_second).ceil().max(1.0) as u64;
        Err(GuardError::new(
            codes::RATE_LIMITED,
            format!(
                "rate limited: principal '{principal}' has used its {} requests per minute (the per-principal rate, WARDEN_CALLS_PER_MINUTE); retry after {wait} s",
                self.per_minute
            ),
        )
        .retry_after(wait))
    }
}

/// One principal's gate in front of a kind of slot.
pub struct Gate {
    /// `cap` permits; one is held (moved into the request) for as long as
    /// the request holds its server slot, and dropped with it.
    pub permits: Arc<Semaphore>,
    /// Requests of this principal waiting for a permit now, bounded by the
    /// admission queue.
    pub waiting: AtomicUsize,
}

/// The gates of every principal for one kind of slot, `cap` permits each.
pub struct Gates {
    cap: usize,
    gates: Mutex<Swept<Arc<Gate>>>,
}

impl Gates {
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            gates: Mutex::default(),
        }
    }

    /// How many slots one principal may hold.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// `principal`'s gate. A gate is idle — and may be swept — when only
    /// the map refers to it or its semaphore (no permit is held, nobody
    /// waits).
    pub fn of(&self, principal: &Principal) -> Arc<Gate> {
        let cap = self.cap;
        lock(&self.gates)
            .entry(
                principal,
                |gate| Arc::strong_count(gate) == 1 && Arc::strong_count(&gate.permits) == 1,
                || {
                    Arc::new(Gate {
                        permits: Arc::new(Semaphore::new(cap)),
                        waiting: AtomicUsize::new(0),
                    })
                },
            )
            .clone()
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        lock(&self.gates).map.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn principal(name: &str) -> Principal {
        Principal::new(name).expect("principal name")
    }

    #[test]
    fn the_bucket_refuses_past_the_rate_and_says_when_to_retry() {
        // 3 a minute: three pass at once, the fourth waits 20 s for a token; local is never limited.
        let rate = Rate::new(3);
        let start = Instant::now();
        let alice = principal("alice");
        for _ in 0..3 {
            rate.take_at(&alice, start).expect("within the rate");
        }
        let refused = rate.take_at(&alice, start).expect_err("over the rate");
        assert_eq!(refused.code, codes::RATE_LIMITED);
        assert_eq!(refused.retry_after_seconds, Some(20));
        assert!(
            refused.message.contains("WARDEN_CALLS_PER_MINUTE"),
            "{}",
            refused.message
        );
        // Another principal has its own bucket.
        rate.take_at(&principal("bob"), start).expect("bob's own bucket");
        // 20 s later one token is back, and only one.
        let later = start + Duration::from_secs(20);
        rate.take_at(&alice, later).expect("refilled");
        assert!(rate.take_at(&alice, later).is_err());
        for _ in 0..100 {
            rate.take_at(&Principal::local(), start)
                .expect("local is not bound");
        }
    }

    #[test]
    fn idle_entries_are_swept_as_the_map_grows() {
        // A thousand principals passing through leave few entries once their buckets refill.
        let rate = Rate::new(60);
        let start = Instant::now();
        for i in 0..1000 {
            let at = start + Duration::from_secs(i);
            rate.take_at(&principal(&format!("p{i}")), at)
                .expect("first request");
        }
        assert!(
            lock(&rate.buckets).map.len() < 64,
            "{}",
            lock(&rate.buckets).map.len()
        );

        let gates = Gates::new(1);
        let held = gates.of(&principal("holder")).permits.clone().try_acquire_owned();
        for i in 0..1000 {
            drop(gates.of(&principal(&format!("p{i}"))));
        }
        assert!(gates.tracked() < 64, "{}", gates.tracked());
        // The held gate survived every sweep: it is the same semaphore.
        let again = gates.of(&principal("holder"));
        assert_eq!(again.permits.available_permits(), 0);
        drop(held);
    }
}
