//! The limits the sandbox enforces: a worker process's rlimits.
//!
//! [`WorkerLimits`] is the part of the server's limits that confines every
//! worker (`Rlimits::for_call` reads it); the executor holds it in its own
//! part (`warden_calls::limits::CallLimits::worker`). The rule of every
//! crate's `limits` module is in [`warden_core::limits`].

use std::time::Duration;

use warden_core::limits::{LimitError, env_number};

/// The rlimits a running server gives every worker process. Defaults are
/// the `DEFAULT_WORKER_*` constants of this module.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerLimits {
    /// See [`DEFAULT_WORKER_MEMORY`].
    pub worker_memory: u64,
    /// See [`DEFAULT_WORKER_OPEN_FILES`].
    pub worker_open_files: u64,
    /// See [`DEFAULT_WORKER_FILE_SIZE`].
    pub worker_file_size: u64,
}

impl Default for WorkerLimits {
    fn default() -> Self {
        Self {
            worker_memory: DEFAULT_WORKER_MEMORY,
            worker_open_files: DEFAULT_WORKER_OPEN_FILES,
            worker_file_size: DEFAULT_WORKER_FILE_SIZE,
        }
    }
}

impl WorkerLimits {
    /// Applies the operator overrides of these fields on top of `self`
    /// (see [`warden_core::limits::env_number`]).
    pub fn from_env(mut self) -> Result<Self, LimitError> {
        if let Some(n) = env_number("WARDEN_WORKER_MEMORY_MB", 64, 65536)? {
            self.worker_memory = n * 1024 * 1024;
        }
        Ok(self)
    }
}

/// Worker address-space limit (RLIMIT_AS): 1 GiB. An allocation past it fails
/// and the worker aborts; the call fails with `worker_out_of_memory`.
/// Virtual, not resident, memory: a worker that maps much but touches little
/// still counts it all.
pub const DEFAULT_WORKER_MEMORY: u64 = 1024 * 1024 * 1024;

/// Worker open files (RLIMIT_NOFILE): 64 descriptors, pipes included.
pub const DEFAULT_WORKER_OPEN_FILES: u64 = 64;

/// Largest file a worker may write (RLIMIT_FSIZE): 16 MiB; beyond it the
/// worker gets SIGXFSZ. This also caps its diagnostics log.
pub const DEFAULT_WORKER_FILE_SIZE: u64 = 16 * 1024 * 1024;

/// Seconds of CPU a worker may burn beyond its wall-clock timeout
/// (RLIMIT_CPU = timeout + this): 1 s. The wall-clock deadline normally fires
/// first; this is the backstop if the server itself is stalled.
pub const DEFAULT_WORKER_CPU_GRACE_SECS: u64 = 1;

/// Workers one zygote forks before the server replaces it (guard workers,
/// or script workers, one per task): 256. Children of one zygote share its
/// address-space layout (a fork keeps ASLR's draw; an `exec` makes a new
/// one), so a guard or a script that learns the layout learns it for at
/// most this many calls or tasks. Each replacement costs one `exec` (~4 ms;
/// a script zygote also builds the engine again), spread over 256.
pub const ZYGOTE_MAX_CHILDREN: u32 = 256;

/// How long the server waits for the zygote to answer one order (fork a
/// worker, reap one): 5 s. A zygote that does not answer in time is killed
/// and replaced; the call it was serving fails with `worker_spawn_failed`.
pub const ZYGOTE_ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
