//! How many tool calls the server is answering right now, so a draining
//! server can wait for them to finish.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// A count of calls in progress; [`InFlight::enter`] holds one.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

/// One call in progress; dropping it ends the call.
pub(crate) struct Entered<'a>(&'a InFlight);

impl InFlight {
    pub(crate) fn enter(&self) -> Entered<'_> {
        self.count.fetch_add(1, Ordering::SeqCst);
        Entered(self)
    }

    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Waits until no call is in progress or `deadline` passes; returns
    /// how many were still in progress.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) async fn wait_idle(&self, deadline: tokio::time::Instant) -> usize {
        loop {
            let idle = self.idle.notified();
            let count = self.count();
            if count == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.count();
            }
        }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_the_last_call() {
        let in_flight = std::sync::Arc::new(InFlight::default());
        let held = in_flight.clone();
        let call = tokio::spawn(async move {
            let _entered = held.enter();
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        });
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        assert_eq!(in_flight.count(), 1);
        let far = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        assert_eq!(in_flight.wait_idle(far).await, 0);
        call.await.unwrap();
        let _stuck = in_flight.enter();
        let soon = tokio::time::Instant::now() + std::time::Duration::from_millis(20);
        assert_eq!(in_flight.wait_idle(soon).await, 1);
    }
}
