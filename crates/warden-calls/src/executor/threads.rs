//! Guard threads: the one bound on threads that run in-process guard code.
//!
//! A thread running a guard cannot be killed, so a guard that hangs keeps its
//! thread for as long as it hangs. Left unbounded, hung guards would pile up
//! threads until the process (or, before this module, tokio's blocking pool,
//! which the stdio transport also needs to read stdin) runs out, and the
//! server would stop answering anything. So every in-process execution —
//! a direct call, a call of a batch or `check_backtest` (all through
//! `Executor::call`), and a script's call answered on a door thread
//! (`Executor::begin_here`) — first takes a permit here, and the thread
//! running the function holds it (in a [`Held`] cell) until the function
//! really returns:
//!
//! - *running* permits (`max_guard_threads`) are taken before a function
//!   starts; a call that finds none waits up to the admission wait, then
//!   fails `server_busy`: nothing is spawned;
//! - at the call's deadline (or cancellation) the caller is answered while
//!   the function runs on; its thread then swaps the running permit for an
//!   *overdue* one (`max_overdue_in_process`) if one is free, so running
//!   capacity is back at once, or else keeps the running permit, so hung
//!   guards show up as fewer threads for new calls, never as more threads.
//!
//! At most `max_guard_threads + max_overdue_in_process` functions therefore
//! run at any time. Calls made through `Executor::call` run on this module's
//! own pool, whose threads are only started for a job that holds a permit and
//! finds no idle thread, so the pool never has more threads than permits;
//! idle pool threads wait for the next job and never exit. Door threads run
//! their calls themselves (see `task::door`) under a permit of the same
//! budget; one the watchdog replaces keeps its permit until its guard
//! returns. Isolated guards need no permit: they run in worker processes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Failure, Status};
use warden_core::error::{GuardError, codes};

/// The guard-thread budget and the pool that runs `Executor::call`'s
/// in-process functions.
pub(super) struct GuardThreads {
    /// On-time permits: taken by [`GuardThreads::acquire`] before a function
    /// starts, held by its [`Held`] cell until the function returns or the
    /// deadline swaps it for an overdue permit. Never closed.
    running: Arc<Semaphore>,
    /// Overdue permits: taken by [`Held::overrun`] at a call's deadline,
    /// held until the function returns. Never closed.
    overdue: Arc<Semaphore>,
    running_size: usize,
    overdue_size: usize,
    /// How long a call waits for a running permit before `server_busy`.
    wait: Duration,
    pool: Arc<Pool>,
}

impl GuardThreads {
    pub(super) fn new(running: usize, overdue: usize, wait: Duration) -> Self {
        Self {
            running: Arc::new(Semaphore::new(running)),
            overdue: Arc::new(Semaphore::new(overdue)),
            running_size: running,
            overdue_size: overdue,
            wait,
            pool: Arc::new(Pool::default()),
        }
    }

    /// Takes a running permit, waiting up to the admission wait (never past
    /// `deadline`). `server_busy` when none frees in time.
    pub(super) async fn acquire(
        &self,
        deadline: Option<Instant>,
        cancel: &CancellationToken,
    ) -> Result<Held, Failure> {
        if let Some(held) = self.try_acquire() {
            return Ok(held);
        }
        let mut until = Instant::now() + self.wait;
        if let Some(deadline) = deadline {
            until = until.min(deadline);
        }
        tokio::select! {
            permit = self.running.clone().acquire_owned() => match permit {
                Ok(permit) => Ok(self.held(permit)),
                Err(_) => Err(self.busy()),
            },
            _ = tokio::time::sleep_until(until) => Err(self.busy()),
            _ = cancel.cancelled() => Err(Failure::new(
                Status::Cancelled,
                GuardError::new(codes::CANCELLED, "the call was cancelled while waiting for a guard thread"),
            )),
        }
    }

    /// [`GuardThreads::acquire`] for a thread outside the runtime (a door
    /// thread), waiting through `runtime` only when no permit is free.
    pub(super) fn acquire_blocking(
        &self,
        runtime: &tokio::runtime::Handle,
        deadline: Option<Instant>,
        cancel: &CancellationToken,
    ) -> Result<Held, Failure> {
        match self.try_acquire() {
            Some(held) => Ok(held),
            None => runtime.block_on(self.acquire(deadline, cancel)),
        }
    }

    fn try_acquire(&self) -> Option<Held> {
        self.running
            .clone()
            .try_acquire_owned()
            .ok()
            .map(|permit| self.held(permit))
    }

    fn held(&self, permit: OwnedSemaphorePermit) -> Held {
        Held {
            permit: Arc::new(Mutex::new(Some(permit))),
            overdue: self.overdue.clone(),
        }
    }

    fn busy(&self) -> Failure {
        let overdue = self.overdue_size - self.overdue.available_permits();
        Failure::new(
            Status::Rejected,
            GuardError::new(
                codes::SERVER_BUSY,
                format!(
                    "Server busy; retry later (all {} in-process guard threads stayed in use for {} ms; \
{overdue} more still run past their deadline)",
                    self.running_size,
                    self.wait.as_millis()
                ),
            ),
        )
    }

    /// Runs `work` on a pool thread. `held` is the job's permit: the thread
    /// releases it when `work` returns, after it counts itself idle, which
    /// is what keeps the pool no larger than the permits.
    pub(super) fn spawn(&self, held: Held, work: Box<dyn FnOnce() + Send>) -> Result<(), Failure> {
        Pool::submit(&self.pool, Job { work, held }).map_err(|error| {
            Failure::new(
                Status::Failed,
                GuardError::failed(format!("cannot start a guard thread: {error}")),
            )
        })
    }

    /// Threads the pool has started (busy or idle), for tests.
    #[cfg(test)]
    fn pool_threads(&self) -> usize {
        lock(&self.pool.state).threads
    }
}

/// The permit of one running function, shared by the thread that runs it
/// (which releases it when the function returns) and whoever keeps the
/// call's deadline (which may swap it for an overdue permit).
#[derive(Clone)]
pub(super) struct Held {
    /// A running permit, an overdue permit after [`Held::overrun`], or none
    /// once the function returned.
    permit: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
    overdue: Arc<Semaphore>,
}

impl Held {
    /// The call was answered (deadline, cancellation) while its function
    /// runs on: swap the running permit for an overdue one if one is free.
    /// Does nothing once the function has returned or already swapped.
    pub(super) fn overrun(&self) {
        let mut slot = lock(&self.permit);
        let Some(current) = slot.as_ref() else { return };
        if Arc::ptr_eq(current.semaphore(), &self.overdue) {
            return;
        }
        if let Ok(permit) = self.overdue.clone().try_acquire_owned() {
            *slot = Some(permit);
        }
    }

    /// The function returned: its permit is free.
    pub(super) fn release(&self) {
        lock(&self.permit).take();
    }
}

/// One function to run and the permit it runs under.
struct Job {
    work: Box<dyn FnOnce() + Send>,
    held: Held,
}

/// Threads that run [`Job`]s. Shared by the executor and its threads.
///
/// A job is handed to one idle thread's own [`Slot`] and that thread is
/// unparked: no shared condvar, whose every notify is a system call and
/// whose woken waiter contends with the submitters for the pool's lock.
/// The thread that went idle last is picked first (its cache is warm), and
/// `Thread::unpark` enters the kernel only when that thread has really
/// parked. (Spinning before parking was measured too: on two cores it
/// burned what it saved.)
#[derive(Default)]
struct Pool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    /// Threads waiting for a job, the most recently idle last.
    idle: Vec<Arc<Slot>>,
    threads: usize,
}

/// Where one pool thread finds its next job.
struct Slot {
    job: Mutex<Option<Job>>,
    /// Set with the job, so the thread can look without the lock.
    ready: AtomicBool,
    thread: std::thread::Thread,
}

impl Pool {
    /// Hands `job` to an idle thread, or starts one when none is idle.
    /// Every busy or starting thread holds a permit, so this never starts
    /// more threads than there are permits.
    fn submit(pool: &Arc<Pool>, job: Job) -> std::io::Result<()> {
        let mut state = lock(&pool.state);
        if let Some(slot) = state.idle.pop() {
            drop(state);
            *lock(&slot.job) = Some(job);
            slot.ready.store(true, Ordering::Release);
            slot.thread.unpark();
            return Ok(());
        }
        state.threads += 1;
        drop(state);
        let worker = pool.clone();
        let held = job.held.clone();
        let spawned = std::thread::Builder::new()
            .name("warden-guard".into())
            .spawn(move || worker.work(job));
        if let Err(error) = spawned {
            lock(&pool.state).threads -= 1;
            held.release();
            return Err(error);
        }
        Ok(())
    }

    /// A pool thread: runs `job`, then each job handed to its slot, forever.
    fn work(&self, mut job: Job) {
        let slot = Arc::new(Slot {
            job: Mutex::new(None),
            ready: AtomicBool::new(false),
            thread: std::thread::current(),
        });
        loop {
            let Job { work, held } = job;
            // Guards' panics are caught per call; this keeps the thread
            // (and the pool's count of it) alive whatever the job does.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            // Idle before the permit is free: whoever takes the permit next
            // finds this thread instead of starting another.
            lock(&self.state).idle.push(slot.clone());
            held.release();
            job = slot.wait();
        }
    }
}

impl Slot {
    /// The next job handed to this thread, parked for.
    fn wait(&self) -> Job {
        loop {
            if self.ready.swap(false, Ordering::Acquire)
                && let Some(job) = lock(&self.job).take()
            {
                return job;
            }
            std::thread::park();
        }
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it:
/// every value behind these locks stays consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[tokio::test]
    async fn the_pool_never_has_more_threads_than_permits() {
        // Hung jobs hold every permit: further calls are busy, and no thread is added.
        let threads = GuardThreads::new(2, 1, Duration::from_millis(50));
        let (release, hung) = std::sync::mpsc::channel::<()>();
        let hung = Arc::new(Mutex::new(hung));
        let never = CancellationToken::new();
        let mut held = Vec::new();
        for _ in 0..3 {
            let permit = threads.acquire(None, &never).await.expect("a permit");
            let hung = hung.clone();
            threads
                .spawn(
                    permit.clone(),
                    Box::new(move || {
                        let _ = lock(&hung).recv();
                    }),
                )
                .expect("spawned");
            // The first overruns into the single overdue permit.
            permit.overrun();
            held.push(permit);
        }
        let refused = threads.acquire(None, &never).await.err().expect("busy");
        assert_eq!(refused.error.code, codes::SERVER_BUSY);
        assert!(
            refused.error.message.contains("all 2"),
            "{}",
            refused.error.message
        );
        assert_eq!(threads.pool_threads(), 3);
        for _ in 0..3 {
            release.send(()).expect("send");
        }
        // Returned functions free their permits; idle threads are reused.
        let start = std::time::Instant::now();
        while threads.running.available_permits() < 2 && start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (done, finished) = mpsc::channel();
        for _ in 0..2 {
            let permit = threads.acquire(None, &never).await.expect("free again");
            let done = done.clone();
            threads
                .spawn(permit, Box::new(move || done.send(()).expect("send")))
                .expect("spawned");
        }
        for _ in 0..2 {
            finished.recv().expect("ran");
        }
        assert_eq!(threads.pool_threads(), 3);
        drop(held);
    }

    #[tokio::test]
    async fn an_overrun_frees_running_capacity_while_overdue_permits_last() {
        // One overdue permit: the first hung call frees its running permit, the second keeps it.
        let threads = GuardThreads::new(1, 1, Duration::from_millis(20));
        let never = CancellationToken::new();
        let first = threads.acquire(None, &never).await.expect("permit");
        first.overrun();
        let second = threads.acquire(None, &never).await.expect("running permit freed");
        second.overrun();
        assert!(threads.acquire(None, &never).await.is_err());
        first.release();
        // Releasing the overdue permit does not give back a running one.
        assert!(threads.acquire(None, &never).await.is_err());
        second.release();
        assert!(threads.acquire(None, &never).await.is_ok());
    }
}
