//! Retention of the task store: by count, total bytes and age, off the
//! request path.
//!
//! Deleting a deep or large task tree can take seconds; done when a task
//! starts, it froze every request for as long. Here a task start only
//! *asks* for a pass: one dedicated thread per store (started on the first
//! request) runs passes one at a time, at most one per
//! [`crate::limits::RETENTION_INTERVAL`] and resting
//! [`crate::limits::RETENTION_REST_FACTOR`] times a pass's own time after
//! it (a tenth of a CPU at most), and requests that arrive during a
//! pass or before the next may start coalesce into one more pass. A
//! directory to remove is first renamed to `.trash-<id>` (one syscall, so
//! it leaves every listing at once), then deleted. Running tasks — this server's, or any task without
//! `result.json` younger than [`RUNNING_GRACE`] — are never removed.
//! Besides the store's budgets, each bound principal (see
//! [`crate::tenant::limits::bound`]) has a byte budget of its own: past it,
//! that principal's oldest finished tasks go, never another's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use crate::tenant::Principal;

/// How long a task without `result.json` is assumed to be running: 1 h,
/// longer than any task may run.
pub const RUNNING_GRACE: Duration = Duration::from_secs(3600);

/// Prefix of a directory being deleted.
pub const TRASH_PREFIX: &str = ".trash-";

/// What a pass keeps.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub keep: usize,
    pub max_bytes: u64,
    pub max_age: Duration,
    /// Bytes of task directories one bound principal may keep.
    pub principal_max_bytes: u64,
}

/// One task directory as a pass sees it, newest first.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    pub age: Duration,
    pub finished: bool,
    pub running_here: bool,
    pub bytes: u64,
    /// Its owner; `None` when its record cannot be read.
    pub principal: Option<Principal>,
}

/// Which entries a pass removes: beyond `keep`, older than `max_age`, or
/// once the newer ones have used up `max_bytes` — or, for a bound
/// principal, once its newer tasks (starting from `principal_bytes`, what
/// its running tasks hold) have used up `principal_max_bytes` — never a
/// running one.
pub fn doomed(
    entries: &[Entry],
    policy: Policy,
    principal_bytes: &mut HashMap<Principal, u64>,
) -> Vec<String> {
    let mut total = 0u64;
    let mut kept = 0usize;
    let mut out = Vec::new();
    for entry in entries {
        let bound = entry
            .principal
            .as_ref()
            .filter(|p| crate::tenant::limits::bound(p));
        let running = entry.running_here || (!entry.finished && entry.age <= RUNNING_GRACE);
        if running {
            total += entry.bytes;
            kept += 1;
            if let Some(principal) = bound {
                *principal_bytes.entry(principal.clone()).or_default() += entry.bytes;
            }
            continue;
        }
        let held = bound.map_or(0, |p| principal_bytes.get(p).copied().unwrap_or(0));
        let over = kept >= policy.keep
            || entry.age > policy.max_age
            || total + entry.bytes > policy.max_bytes
            || (bound.is_some() && held + entry.bytes > policy.principal_max_bytes);
        if over {
            out.push(entry.id.clone());
        } else {
            total += entry.bytes;
            kept += 1;
            if let Some(principal) = bound {
                *principal_bytes.entry(principal.clone()).or_default() += entry.bytes;
            }
        }
    }
    out
}

/// Pending work of the retention thread.
#[derive(Default)]
struct State {
    pending: bool,
    started: bool,
    /// Passes completed, for tests and waiting callers.
    passes: u64,
}

/// The retention thread of one store.
#[derive(Default)]
pub struct Pruner {
    state: Mutex<State>,
    wake: Condvar,
    /// What a pass needs of each finished task directory (its size and
    /// owner), read once: a finished task no longer changes, so a pass
    /// costs one `stat` per finished task, not a walk and a read.
    finished: Mutex<HashMap<String, Finished>>,
    /// Ids of the directories removed since [`Pruner::take_removed`] last
    /// ran, so that their task records go too.
    removed: Mutex<Vec<String>>,
}

/// A finished task directory, as retention sees it.
#[derive(Debug, Clone)]
pub struct Finished {
    pub bytes: u64,
    pub principal: Option<Principal>,
    /// Its directory's modification time when first seen finished.
    pub modified: SystemTime,
}

/// One retention pass over a store, run on the retention thread.
pub trait Pass: Send + 'static {
    fn run(&self);
}

impl Pruner {
    /// Asks for a pass; returns at once. Starts the thread on first use.
    pub fn request<P: Pass>(self: &Arc<Self>, pass: impl FnOnce() -> P) {
        let mut state = lock(&self.state);
        state.pending = true;
        if !state.started {
            state.started = true;
            let pruner = self.clone();
            let pass = pass();
            let spawned = std::thread::Builder::new()
                .name("warden-retention".into())
                .spawn(move || pruner.serve(pass));
            if spawned.is_err() {
                // No thread: retention waits for the next request.
                state.started = false;
            }
        }
        self.wake.notify_one();
    }

    fn serve<P: Pass>(&self, pass: P) {
        let mut due: Option<std::time::Instant> = None;
        loop {
            {
                let mut state = lock(&self.state);
                while !state.pending {
                    state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                }
            }
            if let Some(due) = due {
                std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
            }
            // Requests made while it waited are served by this pass.
            lock(&self.state).pending = false;
            let started = std::time::Instant::now();
            pass.run();
            let ended = std::time::Instant::now();
            let rest = (ended - started) * crate::limits::RETENTION_REST_FACTOR;
            due = Some((started + crate::limits::RETENTION_INTERVAL).max(ended + rest));
            lock(&self.state).passes += 1;
            self.wake.notify_all();
        }
    }

    /// What a pass knows of a finished task directory, if it has seen it
    /// finished before.
    pub fn finished(&self, id: &str) -> Option<Finished> {
        lock(&self.finished).get(id).cloned()
    }

    /// The size of finished task directory `dir`, measured now and kept
    /// with its `principal` for later passes.
    pub fn measure_finished(
        &self,
        id: &str,
        dir: &Path,
        modified: SystemTime,
        principal: Option<Principal>,
    ) -> Finished {
        let facts = Finished {
            bytes: disk_usage(dir, 0),
            principal,
            modified,
        };
        lock(&self.finished).insert(id.to_string(), facts.clone());
        facts
    }

    /// Forgets what was kept of task `id` (it runs again: a resumed task
    /// writes over its directory).
    pub fn forget(&self, id: &str) {
        lock(&self.finished).remove(id);
    }

    /// Renames `root/id` out of sight and deletes it.
    pub fn remove(&self, root: &Path, id: &str) {
        lock(&self.finished).remove(id);
        let trash: PathBuf = root.join(format!("{TRASH_PREFIX}{id}"));
        if std::fs::rename(root.join(id), &trash).is_ok() {
            lock(&self.removed).push(id.to_string());
            let _ = std::fs::remove_dir_all(trash);
        }
    }

    /// The ids removed since the last call.
    pub fn take_removed(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.removed))
    }
}

/// Bytes under `dir`, not following links, at most 64 levels down.
fn disk_usage(dir: &Path, depth: usize) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if meta.is_dir() && depth < 64 {
            total += disk_usage(&entry.path(), depth + 1);
        } else {
            total += meta.len();
        }
    }
    total
}

/// The age of a path by its modification time.
pub fn age(meta: &std::fs::Metadata) -> Duration {
    meta.modified().map(age_since).unwrap_or_default()
}

/// How long ago `modified` was (zero for a time in the future).
pub fn age_since(modified: SystemTime) -> Duration {
    SystemTime::now().duration_since(modified).unwrap_or_default()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, hours: u64, finished: bool, bytes: u64) -> Entry {
        Entry {
            id: id.into(),
            age: Duration::from_secs(hours * 3600),
            finished,
            running_here: false,
            bytes,
            principal: Some(Principal::local()),
        }
    }

    fn owned(id: &str, hours: u64, bytes: u64, who: &str) -> Entry {
        Entry {
            principal: Principal::new(who).ok(),
            ..entry(id, hours, true, bytes)
        }
    }

    #[test]
    fn a_principal_over_its_budget_loses_its_own_oldest_tasks_only() {
        // Alice's 3 × 40 bytes pass her 100-byte budget: her oldest go (two when
        // her running tasks hold 30 more); Bob's and local's (not bound) stay.
        let policy = Policy {
            keep: 100,
            max_bytes: u64::MAX,
            max_age: Duration::from_secs(48 * 3600),
            principal_max_bytes: 100,
        };
        let entries = vec![
            owned("a1", 0, 40, "alice"),
            owned("b1", 1, 90, "bob"),
            owned("a2", 2, 40, "alice"),
            owned("a3", 3, 40, "alice"),
            entry("l1", 4, true, 500),
        ];
        let mut held = HashMap::from([(Principal::new("alice").expect("name"), 30)]);
        assert_eq!(doomed(&entries, policy, &mut held), vec!["a2", "a3"]);
        assert_eq!(doomed(&entries, policy, &mut HashMap::new()), vec!["a3"]);
    }

    #[test]
    fn count_bytes_and_age_each_remove_old_finished_tasks_only() {
        // Newest first: count, byte budget and age each doom old finished tasks; running ones stay.
        let policy = Policy {
            keep: 3,
            max_bytes: 100,
            max_age: Duration::from_secs(48 * 3600),
            principal_max_bytes: 1,
        };
        let entries = vec![
            entry("a", 0, true, 40),
            entry("b", 0, false, 500),
            entry("c", 1, true, 50),
            entry("d", 2, true, 20),
            entry("e", 3, true, 1),
            entry("f", 100, true, 1),
        ];
        // b is running: kept, and its 500 bytes count, so every older finished
        // task is over the 100-byte budget.
        assert_eq!(
            doomed(&entries, policy, &mut HashMap::new()),
            vec!["c", "d", "e", "f"]
        );
        let roomy = Policy {
            max_bytes: u64::MAX,
            ..policy
        };
        // Count: a, b, c kept; d, e beyond 3; f also too old.
        assert_eq!(doomed(&entries, roomy, &mut HashMap::new()), vec!["d", "e", "f"]);
        let many = Policy {
            keep: 100,
            max_bytes: u64::MAX,
            ..policy
        };
        assert_eq!(doomed(&entries, many, &mut HashMap::new()), vec!["f"]);
    }

    /// Waits until `pruner` has completed `passes` passes.
    fn wait_for_passes(pruner: &Pruner, passes: u64) {
        let mut state = lock(&pruner.state);
        while state.passes < passes {
            state = pruner.wake.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Passes start at least [`crate::limits::RETENTION_INTERVAL`] apart,
    /// and requests made meanwhile coalesce into one pass.
    #[test]
    fn passes_start_an_interval_apart_and_requests_meanwhile_coalesce() {
        struct Starts(Arc<Mutex<Vec<std::time::Instant>>>);
        impl Pass for Starts {
            fn run(&self) {
                lock(&self.0).push(std::time::Instant::now());
            }
        }
        let starts = Arc::new(Mutex::new(Vec::new()));
        let pruner = Arc::new(Pruner::default());
        let wait_for = |passes: u64| wait_for_passes(&pruner, passes);
        pruner.request(|| Starts(starts.clone()));
        wait_for(1);
        for _ in 0..20 {
            pruner.request(|| Starts(starts.clone()));
        }
        wait_for(2);
        std::thread::sleep(crate::limits::RETENTION_INTERVAL);
        let starts = lock(&starts).clone();
        assert_eq!(
            starts.len(),
            2,
            "twenty requests after the first pass made one more"
        );
        assert!(
            starts[1] - starts[0] >= crate::limits::RETENTION_INTERVAL,
            "{:?} apart",
            starts[1] - starts[0]
        );
    }

    /// A slow pass (a large store) rests [`crate::limits::RETENTION_REST_FACTOR`]
    /// times its own time before the next: the thread's share of a CPU is
    /// bounded whatever the store holds.
    #[test]
    fn a_slow_pass_rests_nine_times_its_length_before_the_next() {
        const PASS: Duration = Duration::from_millis(60);
        struct Slow(Arc<Mutex<Vec<(std::time::Instant, std::time::Instant)>>>);
        impl Pass for Slow {
            fn run(&self) {
                let started = std::time::Instant::now();
                std::thread::sleep(PASS);
                lock(&self.0).push((started, std::time::Instant::now()));
            }
        }
        let runs = Arc::new(Mutex::new(Vec::new()));
        let pruner = Arc::new(Pruner::default());
        let wait_for = |passes: u64| wait_for_passes(&pruner, passes);
        pruner.request(|| Slow(runs.clone()));
        wait_for(1);
        pruner.request(|| Slow(runs.clone()));
        wait_for(2);
        let runs = lock(&runs).clone();
        let rest = runs[1].0 - runs[0].1;
        let ran = runs[0].1 - runs[0].0;
        assert!(
            rest >= ran * crate::limits::RETENTION_REST_FACTOR,
            "rested {rest:?} after a {ran:?} pass"
        );
        assert!(rest > crate::limits::RETENTION_INTERVAL, "{rest:?}");
    }
}
