//! Process confinement applied to every worker between fork and exec.
//!
//! Each worker gets its own session and process group (so one `killpg` kills
//! it and anything it started), dies with the server (PDEATHSIG), and runs
//! under rlimits. Only async-signal-safe calls happen here: the closure runs
//! in the forked child before `exec`.

use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;

use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::limits::{DEFAULT_WORKER_CPU_GRACE_SECS, Limits};

/// What a worker receives when the server dies without killing it (a
/// SIGKILL of the server): SIGTERM, not SIGKILL, because a guard worker
/// turns it into a SIGKILL of its whole process group
/// ([`crate::worker::kill_group_on_parent_death`]), so processes a guard
/// started die with the server too. A worker that has not set that up yet,
/// and every script worker, dies by SIGTERM's default action.
pub(crate) const PARENT_DEATH_SIGNAL: Signal = Signal::SIGTERM;

/// The rlimits for one worker, fixed before the fork.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rlimits {
    pub memory: u64,
    pub cpu_seconds: u64,
    pub open_files: u64,
    pub file_size: u64,
}

impl Rlimits {
    /// Limits for a worker whose wall-clock budget is `timeout_secs`.
    pub fn for_call(limits: &Limits, timeout_secs: u64) -> Self {
        Self {
            memory: limits.worker_memory,
            cpu_seconds: timeout_secs.max(1) + DEFAULT_WORKER_CPU_GRACE_SECS,
            open_files: limits.worker_open_files,
            file_size: limits.worker_file_size,
        }
    }
}

/// Arranges for `command`'s child to start in a new session, die with this
/// process, and run under `rlimits`.
#[allow(unsafe_code)]
pub(crate) fn confine(command: &mut tokio::process::Command, rlimits: Rlimits) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure only makes async-signal-safe system calls (setsid,
    // prctl, getppid, setrlimit) and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid().map_err(io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(PARENT_DEATH_SIGNAL).map_err(io::Error::from)?;
            // The server may have died between fork and prctl: then no
            // signal would ever come, so refuse to start.
            if nix::unistd::getppid() != parent {
                return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            setrlimit(Resource::RLIMIT_AS, rlimits.memory, rlimits.memory).map_err(io::Error::from)?;
            setrlimit(Resource::RLIMIT_CPU, rlimits.cpu_seconds, rlimits.cpu_seconds + 1)
                .map_err(io::Error::from)?;
            setrlimit(Resource::RLIMIT_NOFILE, rlimits.open_files, rlimits.open_files)
                .map_err(io::Error::from)?;
            setrlimit(Resource::RLIMIT_FSIZE, rlimits.file_size, rlimits.file_size)
                .map_err(io::Error::from)?;
            setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(io::Error::from)?;
            Ok(())
        });
    }
}

/// Process groups of workers that are running now. Shutdown kills them all
/// explicitly rather than trusting every future to be dropped in time.
static LIVE_GROUPS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Records a started worker's process group.
pub(crate) fn track_group(pgid: u32) {
    if let Ok(mut groups) = LIVE_GROUPS.lock() {
        groups.insert(pgid);
    }
}

/// Kills a worker's whole process group. Harmless if it is already gone.
pub(crate) fn kill_group(pgid: u32) {
    if let Ok(pid) = i32::try_from(pgid) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// Kills a tracked group and forgets it (the worker is being reaped).
pub(crate) fn release_group(pgid: u32) {
    kill_group(pgid);
    if let Ok(mut groups) = LIVE_GROUPS.lock() {
        groups.remove(&pgid);
    }
}

/// Kills every worker group still running; called on shutdown.
pub fn kill_all_workers() {
    let groups = LIVE_GROUPS
        .lock()
        .map(|mut g| std::mem::take(&mut *g))
        .unwrap_or_default();
    for pgid in groups {
        kill_group(pgid);
    }
}
