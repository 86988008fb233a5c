//! The runner as a long-lived service: the task store opened and swept,
//! the heartbeat (leases, lapsed tasks, cancels from other nodes), the
//! queue claimed into free task slots (each claimed task counted against
//! its owner's share of them, like a direct task), cancellation in every
//! state, and the ends of serving (a departed stdio client's tasks, a
//! drain, a shutdown).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{TaskRunner, running, store};
use warden_calls::executor::Admitted;

impl TaskRunner {
    /// Opens the task store in the background, settles what a dead
    /// server left (its running tasks become `interrupted`), starts the
    /// heartbeat, and sweeps expired tasks every
    /// [`crate::limits::TASK_SWEEP_INTERVAL`] from then on. For a serving
    /// process; others open the store on first use.
    ///
    /// Nothing here delays the first answer: direct guard calls never
    /// need the store, and a task tool that comes first waits for the
    /// same opening (every record operation goes through
    /// [`super::records::Records::open`], one `OnceCell`). A store that
    /// cannot open — damaged, unwritable, an unreachable database — is
    /// logged here and is the error of each task tool (naming the file or
    /// URL and the fix) until a later call opens it; the server keeps
    /// serving everything else.
    pub fn start_records(&self) {
        self.start_heartbeat();
        let records = Arc::clone(&self.records);
        tokio::spawn(async move {
            if let Err(error) = records.open().await {
                tracing::warn!(%error, "task tools are unavailable until the task store opens");
            }
            let records = Arc::downgrade(&records);
            let mut every = tokio::time::interval(crate::limits::TASK_SWEEP_INTERVAL);
            loop {
                every.tick().await;
                let Some(records) = records.upgrade() else {
                    return;
                };
                records.sweep().await;
            }
        });
    }

    /// Starts (once) the loop that, every [`crate::limits::TASK_HEARTBEAT`],
    /// renews this process's leases, stops the tasks it lost, cancels
    /// those another server asked to cancel, and ends lapsed ones
    /// everywhere. Every process that runs tasks runs it.
    pub(super) fn start_heartbeat(&self) {
        let (records, running) = (Arc::downgrade(&self.records), Arc::downgrade(&self.running));
        self.heartbeat.call_once(|| {
            tokio::spawn(async move {
                let mut every = tokio::time::interval(crate::limits::TASK_HEARTBEAT);
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    every.tick().await;
                    let (Some(records), Some(running)) = (records.upgrade(), running.upgrade()) else {
                        return;
                    };
                    let beat = records.heartbeat(&running.ids()).await;
                    for id in beat.lost.iter().chain(&beat.cancels) {
                        running.cancel(id);
                    }
                }
            });
        });
    }

    /// Reserves a free task slot and claims the oldest queued task for it
    /// (see [`crate::records`]); `None` when no slot is free or nothing is queued.
    pub async fn claim_next(&self) -> Result<Option<(store::Claimed, Admitted)>, store::StoreError> {
        if self.draining.load(std::sync::atomic::Ordering::Relaxed) || self.running.stopping() {
            return Ok(None);
        }
        let Some(slot) = self.task_slots.try_slot() else {
            return Ok(None);
        };
        Ok(self.records.claim().await?.map(|claimed| (claimed, slot)))
    }

    /// The task slot a claimed task runs in, counted against its owner's
    /// share of the task slots like a direct task's
    /// (`WARDEN_TASKS_PER_PRINCIPAL`): `slot`, reserved by the claim, when
    /// the owner has a share permit free. Otherwise the slot goes back at
    /// once (to the next queued task, often another principal's) and the
    /// task waits for one of its owner's tasks to end, then for a slot;
    /// meanwhile it is registered as running here under `cancel`, so its
    /// lease is renewed and `tasks/cancel` or a shutdown stops the wait.
    /// `None` when the wait was stopped: the record is then ended
    /// `cancelled` (or `interrupted` when the server is stopping).
    pub async fn seat_claimed(
        &self,
        record: &store::TaskRecord,
        slot: Admitted,
        cancel: &CancellationToken,
    ) -> Option<Admitted> {
        let slot = match self.task_slots.with_share(slot, &record.owner) {
            Ok(seated) => return Some(seated),
            Err(slot) => slot,
        };
        drop(slot);
        self.running.insert(&record.id, cancel, true);
        self.submitted.notify_one();
        let note = "waiting: its principal already runs its limit of tasks (WARDEN_TASKS_PER_PRINCIPAL);                     it starts when one of them ends";
        warden_script::host::progress::TaskNotes::note(self.records.as_ref(), &record.id, note).await;
        if let Some(seated) = self.task_slots.admit_claimed(&record.owner, cancel).await {
            return Some(seated);
        }
        let ended = if self.running.stopping() {
            super::records::interrupted()
        } else {
            super::TaskResult::failure(
                super::TaskStatus::Cancelled,
                warden_core::error::TaskErrorKind::Cancelled,
                "cancelled while it waited for its principal's running task to end; it never started",
            )
        };
        let _ = self.records.end(&record.id, &ended).await;
        self.running.remove(&record.id);
        None
    }

    /// Forgets a claimed task that ended before it began (its record is
    /// ended by the caller); a no-op for a task that was never registered.
    pub fn forget_claimed(&self, id: &str) {
        if self.running.ids().iter().any(|running| running == id) {
            self.running.remove(id);
        }
    }

    /// Resolves when a claim may succeed: a task was queued here or a task
    /// here ended (a slot freed), or after a heartbeat (another server
    /// queued one).
    pub async fn claim_chance(&self) {
        let wake = self.records.wake();
        let elsewhere = async {
            match &wake {
                Some(wake) => wake.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.submitted.notified() => {}
            _ = self.running.done.notified() => {}
            _ = elsewhere => {}
            _ = tokio::time::sleep(crate::limits::TASK_HEARTBEAT) => {}
        }
    }

    /// Cancels task `id` (`tasks/cancel`): at once if it runs here; a
    /// queued one before it starts; else through the store, where the
    /// server running it finds the request within a heartbeat. `false` if
    /// it is not queued or running anywhere.
    pub async fn cancel(&self, id: &str) -> Result<bool, store::StoreError> {
        if self.running.cancel(id) {
            return Ok(true);
        }
        if self.records.cancel_queued(id).await? {
            return Ok(true);
        }
        self.records.request_cancel(id).await
    }

    /// Waits until no detached task runs here and none waits in the queue:
    /// a stdio server whose client left stays (claiming and running) for
    /// the tasks that client will come back for. A task this server
    /// claimed counts from the claim (its record names this node), before
    /// its worker starts.
    pub async fn detached_done(&self) {
        loop {
            let done = self.running.done.notified();
            let pending = match self.records.opened() {
                Some(store) => {
                    let queued = store.queued().await.unwrap_or(0);
                    let node = self.records.node();
                    let claimed = store
                        .running()
                        .await
                        .map(|records| records.iter().filter(|r| r.node == node && r.detached).count())
                        .unwrap_or(0);
                    queued as usize + claimed
                }
                None => 0,
            };
            if self.running.detached() == 0 && pending == 0 {
                return;
            }
            let _ = tokio::time::timeout(crate::limits::TASK_HEARTBEAT, done).await;
        }
    }

    /// Starts draining: no more queued tasks are claimed here. Then waits
    /// until no task runs here or `until` passes; returns how many still
    /// run.
    pub async fn drain(&self, until: Instant) -> usize {
        self.draining.store(true, std::sync::atomic::Ordering::Relaxed);
        loop {
            let done = self.running.done.notified();
            if self.running.count() == 0 {
                return 0;
            }
            if tokio::time::timeout_at(until, done).await.is_err() {
                return self.running.count();
            }
        }
    }

    /// Closes the task store (at the end of serving).
    pub async fn close_records(&self) {
        if let Some(store) = self.records.opened() {
            store.close().await;
        }
    }

    /// Cancels every running task and waits up to `grace` for each to
    /// write its `cancelled` record. Returns how many were still running
    /// when the grace ran out (they are marked `interrupted` at the next
    /// start).
    pub async fn shutdown(&self, grace: Duration) -> usize {
        self.running.cancel_all();
        let until = Instant::now() + grace;
        loop {
            let done = self.running.done.notified();
            if self.running.count() == 0 {
                return 0;
            }
            if tokio::time::timeout_at(until, done).await.is_err() {
                return self.running.count();
            }
        }
    }

    /// Wraps the server's input so that its end (the client went away)
    /// cancels every running task at once, rather than after the transport
    /// has waited for them to finish.
    pub fn cancel_on_eof<R>(&self, input: R) -> running::CancelOnEof<R> {
        running::CancelOnEof::new(input, self.running.clone())
    }
}
