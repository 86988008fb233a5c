//! The limits the executor enforces: every guard call's slots, waits,
//! threads, timeouts and argument caps, the guard worker, the artifact
//! store's quotas and retention, the event log, and the per-principal call
//! share and rate.
//!
//! [`CallLimits`] is the executor's part of the server's limits: the
//! executor is built with it and every layer above reads it through
//! `Executor::limits`. The rule of every crate's `limits` module is in
//! [`warden_core::limits`].

use std::time::Duration;

use warden_core::limits::{LimitError, env_number};
use warden_sandbox::limits::WorkerLimits;

/// The values the executor enforces. Defaults are the `DEFAULT_*`
/// constants of this module (and of `warden_sandbox::limits` for
/// [`CallLimits::worker`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallLimits {
    /// See [`DEFAULT_MAX_CONCURRENT_CALLS`].
    pub max_concurrent_calls: usize,
    /// See [`DEFAULT_MAX_OVERDUE_IN_PROCESS`].
    pub max_overdue_in_process: usize,
    /// See [`DEFAULT_GUARD_TIMEOUT`].
    pub guard_timeout: Duration,
    /// See [`DEFAULT_MAX_TIMEOUT`].
    pub max_timeout: Duration,
    /// See [`DEFAULT_MAX_WORKER_RESPONSE`].
    pub max_worker_response: usize,
    /// See [`DEFAULT_MAX_ARGUMENT_BYTES`].
    pub max_argument_bytes: usize,
    /// The rlimits of every worker process the executor starts (see
    /// [`WorkerLimits`]).
    pub worker: WorkerLimits,
    /// See [`DEFAULT_TASKS_KEPT`].
    pub tasks_kept: usize,
    /// See [`DEFAULT_EVENTS_MAX_BYTES`].
    pub events_max_bytes: u64,
    /// See [`DEFAULT_EVENTS_KEEP`].
    pub events_keep: usize,
    /// See [`DEFAULT_ADMISSION_WAIT`].
    pub admission_wait: Duration,
    /// See [`DEFAULT_ADMISSION_QUEUE`].
    pub admission_queue: usize,
    /// See [`DEFAULT_MAX_GUARD_THREADS`].
    pub max_guard_threads: usize,
    /// See [`DEFAULT_TASK_MAX_FILES`].
    pub task_max_files: usize,
    /// See [`DEFAULT_TASK_MAX_BYTES`].
    pub task_max_bytes: u64,
    /// See [`DEFAULT_STORE_MAX_BYTES`].
    pub store_max_bytes: u64,
    /// See [`DEFAULT_TASKS_MAX_AGE`].
    pub tasks_max_age: Duration,
    /// See [`DEFAULT_PRINCIPAL_CALL_SHARE_PERCENT`].
    pub principal_call_share_percent: usize,
    /// See [`DEFAULT_CALLS_PER_MINUTE`].
    pub calls_per_minute: u32,
    /// See [`DEFAULT_PRINCIPAL_ARTIFACT_BYTES`].
    pub principal_artifact_bytes: u64,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            max_concurrent_calls: default_concurrent_calls(),
            max_overdue_in_process: DEFAULT_MAX_OVERDUE_IN_PROCESS,
            guard_timeout: DEFAULT_GUARD_TIMEOUT,
            max_timeout: DEFAULT_MAX_TIMEOUT,
            max_worker_response: DEFAULT_MAX_WORKER_RESPONSE,
            max_argument_bytes: DEFAULT_MAX_ARGUMENT_BYTES,
            worker: WorkerLimits::default(),
            tasks_kept: DEFAULT_TASKS_KEPT,
            events_max_bytes: DEFAULT_EVENTS_MAX_BYTES,
            events_keep: DEFAULT_EVENTS_KEEP,
            admission_wait: DEFAULT_ADMISSION_WAIT,
            admission_queue: DEFAULT_ADMISSION_QUEUE,
            max_guard_threads: default_guard_threads(),
            task_max_files: DEFAULT_TASK_MAX_FILES,
            task_max_bytes: DEFAULT_TASK_MAX_BYTES,
            store_max_bytes: DEFAULT_STORE_MAX_BYTES,
            tasks_max_age: DEFAULT_TASKS_MAX_AGE,
            principal_call_share_percent: DEFAULT_PRINCIPAL_CALL_SHARE_PERCENT,
            calls_per_minute: DEFAULT_CALLS_PER_MINUTE,
            principal_artifact_bytes: DEFAULT_PRINCIPAL_ARTIFACT_BYTES,
        }
    }
}

impl CallLimits {
    /// Applies the operator overrides of these fields (the worker's
    /// included) on top of `self`: one `WARDEN_*` variable per tunable
    /// limit, each with the range given here and in the limits table of
    /// `docs/operating.md` (see [`warden_core::limits::env_number`]).
    pub fn from_env(mut self) -> Result<Self, LimitError> {
        if let Some(n) = env_number("WARDEN_MAX_CONCURRENT_CALLS", 1, 64)? {
            self.max_concurrent_calls = n as usize;
        }
        if let Some(n) = env_number("WARDEN_MAX_TIMEOUT_SECONDS", 1, 3600)? {
            self.max_timeout = Duration::from_secs(n);
        }
        self.worker = self.worker.from_env()?;
        if let Some(n) = env_number("WARDEN_TASKS_KEPT", 1, 100_000)? {
            self.tasks_kept = n as usize;
        }
        if let Some(n) = env_number("WARDEN_EVENTS_MAX_BYTES", 4096, 1 << 40)? {
            self.events_max_bytes = n;
        }
        if let Some(n) = env_number("WARDEN_EVENTS_KEEP", 1, 100)? {
            self.events_keep = n as usize;
        }
        if let Some(n) = env_number("WARDEN_ADMISSION_WAIT_MS", 0, 60_000)? {
            self.admission_wait = Duration::from_millis(n);
        }
        if let Some(n) = env_number("WARDEN_ADMISSION_QUEUE", 0, 4096)? {
            self.admission_queue = n as usize;
        }
        if let Some(n) = env_number("WARDEN_MAX_GUARD_THREADS", 1, 1024)? {
            self.max_guard_threads = n as usize;
        }
        if let Some(n) = env_number("WARDEN_MAX_OVERDUE_IN_PROCESS", 0, 256)? {
            self.max_overdue_in_process = n as usize;
        }
        if let Some(n) = env_number(MAX_ARGUMENT_BYTES_ENV, MIN_ARGUMENT_BYTES, MAX_ARGUMENT_BYTES)? {
            self.max_argument_bytes = n as usize;
        }
        if let Some(n) = env_number("WARDEN_TASK_MAX_FILES", 1, 100_000)? {
            self.task_max_files = n as usize;
        }
        if let Some(n) = env_number("WARDEN_TASK_MAX_MB", 1, 16_384)? {
            self.task_max_bytes = n * 1024 * 1024;
        }
        if let Some(n) = env_number("WARDEN_STORE_MAX_MB", 1, 1_048_576)? {
            self.store_max_bytes = n * 1024 * 1024;
        }
        if let Some(n) = env_number("WARDEN_TASKS_MAX_AGE_HOURS", 1, 87_600)? {
            self.tasks_max_age = Duration::from_secs(n * 3600);
        }
        if let Some(n) = env_number("WARDEN_PRINCIPAL_CALL_SHARE_PERCENT", 1, 100)? {
            self.principal_call_share_percent = n as usize;
        }
        if let Some(n) = env_number("WARDEN_CALLS_PER_MINUTE", 1, 1_000_000)? {
            self.calls_per_minute = n as u32;
        }
        if let Some(n) = env_number("WARDEN_PRINCIPAL_ARTIFACT_MB", 1, 1_048_576)? {
            self.principal_artifact_bytes = n * 1024 * 1024;
        }
        Ok(self)
    }

    /// Call slots one principal may hold at once: its share
    /// ([`DEFAULT_PRINCIPAL_CALL_SHARE_PERCENT`]) of `max_concurrent_calls`,
    /// rounded down, and at least 1.
    pub fn principal_call_slots(&self) -> usize {
        (self.max_concurrent_calls * self.principal_call_share_percent / 100).max(1)
    }

    /// The effective timeout for a guard: its own (or the default), never
    /// above the server maximum.
    pub fn guard_deadline(&self, own: Option<Duration>) -> Duration {
        own.unwrap_or(self.guard_timeout).min(self.max_timeout)
    }
}

/// Direct guard calls (and batches) running at once: 2, or the machine's
/// core count when that is larger ([`default_concurrent_calls`]). A call
/// beyond it waits in the admission queue ([`DEFAULT_ADMISSION_QUEUE`],
/// [`DEFAULT_ADMISSION_WAIT`]); when the queue is full or no slot frees in
/// time it is rejected with "Server busy; retry later" (`server_busy`) and a
/// `request_rejected` event. Does not count coding tasks or scripts, which
/// hold task slots (`warden_task::limits::DEFAULT_MAX_CONCURRENT_TASKS`).
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 2;

/// In-process guard threads that may keep running after their call's
/// deadline: 4 "overdue" permits. A thread cannot be killed, so a timed-out
/// `in_process`/`pure` call (direct, batch, `check_backtest` or script door
/// alike) is answered `timed_out` while the function runs on; at that moment
/// its thread swaps its guard-thread permit ([`DEFAULT_MAX_GUARD_THREADS`])
/// for one of these, so the running capacity is free again at once. When all
/// are taken, the thread keeps its guard-thread permit instead: hung guards
/// show up as fewer threads for new in-process calls (which then get
/// `server_busy`), never as more threads. Operators override it with
/// `WARDEN_MAX_OVERDUE_IN_PROCESS` (0–256).
pub const DEFAULT_MAX_OVERDUE_IN_PROCESS: usize = 4;

/// Per-guard timeout when the guard sets none: 60 s. At the deadline an
/// isolated worker's process group is killed; an in-process call is answered
/// `timed_out` (see [`DEFAULT_MAX_OVERDUE_IN_PROCESS`]).
pub const DEFAULT_GUARD_TIMEOUT: Duration = Duration::from_secs(60);

/// Upper bound on any guard timeout or task timeout: 300 s. A guard
/// registered with a longer timeout is clamped to this.
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(300);

/// Largest JSON line a worker may send back: 1 MiB (1,048,576 bytes).
/// A larger response kills the worker and fails the call with
/// `response_too_large`. Does not limit what the worker writes to its
/// diagnostics log (see [`DEFAULT_WORKER_FILE_SIZE`](warden_sandbox::limits::DEFAULT_WORKER_FILE_SIZE)).
pub const DEFAULT_MAX_WORKER_RESPONSE: usize = 1024 * 1024;

/// Largest arguments a destructive call's confirmation form shows: 4,096
/// bytes, as the form lays them out (one `"key": value` line each, JSON
/// escapes, invisible characters escaped). The person must see every
/// argument they approve, so a call whose arguments are larger is refused
/// `forbidden` without asking, naming this limit (and recorded as a
/// `destructive_call_confirmed` event with action `not_asked_too_large`).
/// A contract with the person, not a budget: no override. Does not limit
/// direct calls of destructive guards, which the client's host confirms.
pub const CONFIRMED_ARGUMENTS_MAX_BYTES: usize = 4_096;

/// Largest `arguments` object accepted for one call: 8,000,000 bytes of JSON.
/// Larger arguments are rejected with `arguments_too_large` before a worker
/// starts.
pub const DEFAULT_MAX_ARGUMENT_BYTES: usize = 8_000_000;

/// Task directories kept under the artifacts root: 500. Creating a task
/// beyond it deletes the oldest task directories (by modification time),
/// so the store cannot fill the disk over weeks of use. Operators override
/// it with `WARDEN_TASKS_KEPT` (1–100,000). Does not cover events.jsonl.
pub const DEFAULT_TASKS_KEPT: usize = 500;

/// Largest result.json `get_task_result` returns inline: 256 KiB; larger
/// ones are read with `read_artifact` in chunks.
pub const MAX_INLINE_RESULT_BYTES: usize = 256 * 1024;

/// Size at which the global `events.jsonl` is rotated: 64 MiB
/// (67,108,864 bytes). The full file becomes `events.jsonl.1`, older ones
/// shift up to `.N` ([`DEFAULT_EVENTS_KEEP`]) and the oldest is deleted, so
/// the event log never holds more than (N + 1) × this on disk. Operators
/// override it with `WARDEN_EVENTS_MAX_BYTES` (4,096 – 2^40). Records are
/// never split across files. Does not cover the per-task events.jsonl
/// (see [`DEFAULT_TASK_EVENTS_MAX_BYTES`]).
pub const DEFAULT_EVENTS_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Rotated event logs kept besides `events.jsonl`: 4 (`events.jsonl.1` …
/// `.4`). Operators override it with `WARDEN_EVENTS_KEEP` (1–100).
pub const DEFAULT_EVENTS_KEEP: usize = 4;

/// Bytes of records one task's own `events.jsonl` may hold: 16 MiB. The
/// record that would cross it is replaced by one `task_events_truncated`
/// record, and the task's later records go to the global log only. The
/// task directory is bounded by the task quotas; this keeps a task making
/// 100,000 door calls (two records each) from spending them on its log.
pub const DEFAULT_TASK_EVENTS_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Longest string value written into an event record: 1,024 bytes. A
/// longer value (a tool or function name, a filename, an error message or
/// type, a reason) is cut at a character boundary and ends with
/// `…[truncated N bytes]`. Applies to every string in a record, however
/// deeply nested; keys are fixed by the code. Does not bound how many
/// values a record has: records are built by the server from fixed fields.
pub const MAX_EVENT_STRING_BYTES: usize = 1024;

// ---- executor ----

/// How long a direct call (or a batch, or `check_backtest`) waits for a call
/// slot when all are taken: 1 s. Slots of in-process and isolated calls turn
/// over in milliseconds, so a burst of callers is absorbed instead of being
/// refused; a call still waiting at the end gets `server_busy`. The same
/// wait bounds how long any in-process call waits for a guard thread
/// ([`DEFAULT_MAX_GUARD_THREADS`]). The guard's own timeout starts after
/// admission. Operators override it with `WARDEN_ADMISSION_WAIT_MS`
/// (0–60,000; 0 refuses at once). Does not apply to task slots.
pub const DEFAULT_ADMISSION_WAIT: Duration = Duration::from_secs(1);

/// Calls that may wait for a call slot at once: 64. One more is refused
/// `server_busy` at once, so a flood of requests costs a bounded number of
/// waiting futures, not an unbounded queue. Tokio's semaphore serves
/// waiters in arrival order. Operators override it with
/// `WARDEN_ADMISSION_QUEUE` (0–4096; 0 means no queue). Does not bound
/// requests that need no slot (`ping`, `tools/list`, task lookups).
pub const DEFAULT_ADMISSION_QUEUE: usize = 64;

/// Threads that may run in-process guard code at once, on time: 16, or
/// twice the core count when that is larger ([`default_guard_threads`]).
/// EVERY in-process or direct `pure` execution — a direct call, a call of a
/// batch or `check_backtest`, a script's call through the worker door —
/// takes one of these permits before its function starts, and the thread
/// running it holds the permit until the function really returns (or swaps
/// it for an overdue permit at its deadline, see
/// [`DEFAULT_MAX_OVERDUE_IN_PROCESS`]). So at most this many plus the
/// overdue permits run guard code at any time, whatever clients and
/// scripts do. Guards run on Warden's own bounded thread pool, never on
/// tokio's blocking pool, which the stdio transport needs to read stdin. A
/// call that finds no permit waits up to [`DEFAULT_ADMISSION_WAIT`], then
/// fails `server_busy` (catchable in scripts); nothing else is spawned.
/// Isolated guards need no permit: they run in worker processes. Operators
/// override it with `WARDEN_MAX_GUARD_THREADS` (1–1024).
pub const DEFAULT_MAX_GUARD_THREADS: usize = 16;

/// Deepest nesting of a call's `arguments`: 64 levels of objects and lists
/// (`{"a": [1]}` is 2 levels). Deeper arguments are refused with
/// `invalid_arguments` naming the depth, before anything runs, on every
/// path: direct calls, batch calls (after `$result` substitution) and
/// script calls through the worker door, where the error is catchable.
/// Why 64: guard inputs are typed structs a few levels deep, and every
/// recursive walk of a value (serialising, dropping, a guard worker's
/// parse with serde_json's 128-level recursion limit, envelope included)
/// stays far from the stack's end. serde_json's own limit also means a
/// JSON-RPC message nested deeper than 128 levels is refused by the
/// transport before it reaches the executor.
pub const MAX_ARGUMENT_DEPTH: usize = 64;

/// The default number of call slots: [`DEFAULT_MAX_CONCURRENT_CALLS`] or
/// the core count (`std::thread::available_parallelism`), whichever is
/// larger, and at most 64 (the largest `WARDEN_MAX_CONCURRENT_CALLS`).
pub fn default_concurrent_calls() -> usize {
    cores().clamp(DEFAULT_MAX_CONCURRENT_CALLS, 64)
}

/// The default number of guard threads: [`DEFAULT_MAX_GUARD_THREADS`] or
/// twice the core count, whichever is larger, and at most 1024.
pub fn default_guard_threads() -> usize {
    (2 * cores()).clamp(DEFAULT_MAX_GUARD_THREADS, 1024)
}

/// Asked of the system once: each answer reads `/proc/self/cgroup` and the
/// cgroup's CPU quota files, and the limits need it more than once at start.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

// ---- tenants ----
// Per-principal limits (see `crate::tenant::limits`). They bind every
// authenticated principal. `local` — the stdio client, or every caller of
// an HTTP server without authentication, which listens on loopback only —
// is the operator of the server and is bound by the server-wide limits
// alone, exactly as before principals existed: these defaults are chosen
// for a team sharing one server and would only idle a single user's
// capacity. A refusal is a normal tool result with a stable code
// (`principal_busy`, `rate_limited`, `quota_exceeded`) whose message names
// the limit and its `WARDEN_*` variable.

/// Share of the call slots ([`DEFAULT_MAX_CONCURRENT_CALLS`]) one
/// principal may hold at once: 50 %, rounded down and at least 1
/// (`WARDEN_PRINCIPAL_CALL_SHARE_PERCENT`, 1–100; 100 turns the share off).
/// So one principal flooding the server leaves at least half the slots to
/// the others, whatever its calls cost. A call beyond its share waits for
/// one of its own calls to end (within the same admission wait, and never
/// in the server's queue, so its flood cannot fill that queue either), then
/// is refused `principal_busy`. A batch or `check_backtest` holds one slot
/// like a direct call. Does not count task slots.
pub const DEFAULT_PRINCIPAL_CALL_SHARE_PERCENT: usize = 50;

/// Requests that run guards — direct guard calls, `run_batch`,
/// `check_backtest`, `run_script`, `run_coding_task` — one principal may
/// start per minute: 600 (`WARDEN_CALLS_PER_MINUTE`, 1–1,000,000). A token
/// bucket: up to 600 at once, refilled at 10 per second. The request past
/// it is refused `rate_limited` with `retry_after_seconds`, when the next
/// one is allowed. 600 is far above what an interactive client or a model
/// sends and stops a runaway loop. Lookups (`list_*`, `get_task_result`,
/// `read_artifact`, `describe_guard`, `resources/read`) are not counted; the
/// calls a script or batch makes count once, as their request.
pub const DEFAULT_CALLS_PER_MINUTE: u32 = 600;

/// Bytes of task directories one principal keeps in the store: 1 GiB
/// (`WARDEN_PRINCIPAL_ARTIFACT_MB`, 1–1,048,576). A quarter of the store
/// budget ([`DEFAULT_STORE_MAX_BYTES`]), so one principal's volume cannot
/// push everyone else's tasks out of the store: past it, the retention
/// thread deletes that principal's oldest finished tasks (at the next task
/// start), never another's. A `write_artifact` that would take the
/// principal's running tasks' outputs past it is refused with a catchable
/// `quota_exceeded`. Does not cover events.jsonl.
pub const DEFAULT_PRINCIPAL_ARTIFACT_BYTES: u64 = 1024 * 1024 * 1024;

// ---- arguments (the guard worker reads them too) ----

/// Operator override of [`CallLimits::max_argument_bytes`] (default
/// [`DEFAULT_MAX_ARGUMENT_BYTES`]): `WARDEN_MAX_ARGUMENT_BYTES`, from
/// [`MIN_ARGUMENT_BYTES`] to [`MAX_ARGUMENT_BYTES`]. An isolated guard
/// worker is told the value and reads requests up to it (plus
/// [`WORKER_REQUEST_ENVELOPE_BYTES`]), so raising it works for every mode.
/// Does not raise the worker's memory limit ([`DEFAULT_WORKER_MEMORY`](warden_sandbox::limits::DEFAULT_WORKER_MEMORY)):
/// arguments near 1 GiB also need `WARDEN_WORKER_MEMORY_MB`.
pub const MAX_ARGUMENT_BYTES_ENV: &str = "WARDEN_MAX_ARGUMENT_BYTES";

/// Smallest accepted `WARDEN_MAX_ARGUMENT_BYTES`: 1,024 bytes.
pub const MIN_ARGUMENT_BYTES: u64 = 1024;

/// Largest accepted `WARDEN_MAX_ARGUMENT_BYTES`: 1 GiB (1,073,741,824 bytes).
pub const MAX_ARGUMENT_BYTES: u64 = 1024 * 1024 * 1024;

/// Room a guard worker allows around the arguments in its one request line
/// (the JSON envelope: guard name, trace context): 64 KiB. A request line
/// longer than `max_argument_bytes` + this is cut off and the worker
/// exits with a protocol error; the server never sends one, since it
/// refuses larger arguments with `arguments_too_large` first.
pub const WORKER_REQUEST_ENVELOPE_BYTES: usize = 64 * 1024;

// ---- storage ----

/// Files and directories a task may create under `outputs/`: 1,000 entries
/// (`WARDEN_TASK_MAX_FILES`, 1–100,000). The next new name fails
/// `write_artifact` with a catchable `quota_exceeded`; overwriting an
/// existing file still works. Why: every entry costs an inode, a line in
/// `list_artifacts` and a step when the store is pruned. Does not count the
/// server's own files (result.json, logs).
pub const DEFAULT_TASK_MAX_FILES: usize = 1_000;

/// Bytes a task may keep under `outputs/`: 64 MiB (`WARDEN_TASK_MAX_MB`,
/// 1–16,384). A write that would take the task past it fails with a
/// catchable `quota_exceeded` and writes nothing; an overwrite counts the
/// new size, not both. Does not cover the server's own files, which are
/// bounded by their own limits.
pub const DEFAULT_TASK_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Components in an artifact name: 8 (`a/b/c/d/e/f/g/h.csv` at most).
/// Deeper names fail with a catchable `quota_exceeded`. Why: deep trees cost
/// a descriptor per level to walk and delete, for no reporting value.
pub const MAX_ARTIFACT_DEPTH: usize = 8;

/// Longest component of an artifact name: 255 bytes (the Linux `NAME_MAX`);
/// longer ones fail with a catchable `quota_exceeded`.
pub const MAX_ARTIFACT_NAME_BYTES: usize = 255;

/// Longest whole artifact name: 1,024 bytes; longer ones fail with a
/// catchable `quota_exceeded`. Keeps every path the server builds and lists
/// far below `PATH_MAX`.
pub const MAX_ARTIFACT_PATH_BYTES: usize = 1_024;

/// Bytes the whole task store may hold: 4 GiB (`WARDEN_STORE_MAX_MB`,
/// 1–1,048,576). When a task starts beyond it, the oldest finished task
/// directories are removed (on a background thread) until the store fits.
/// Running tasks are never removed; does not cover events.jsonl.
pub const DEFAULT_STORE_MAX_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Age after which a finished task directory is removed: 30 days
/// (`WARDEN_TASKS_MAX_AGE_HOURS`, 1–87,600), by its modification time, at
/// the next task start. Running tasks are never removed.
pub const DEFAULT_TASKS_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Shortest time from one retention pass's start to the next's: 200 ms.
/// A pass lists every task directory (and `stat`s those it has not seen
/// finished), and every task start asks for one: in a loop of trivial tasks over 150 directories that was a
/// fifth of the server's CPU, growing with the store. Requests meanwhile
/// coalesce into the next pass; the store can hold what 200 ms of tasks
/// wrote beyond its budgets until then, as it could already hold what a
/// pass in progress had not seen.
pub const RETENTION_INTERVAL: Duration = Duration::from_millis(200);

/// How long the retention thread rests after a pass, as a multiple of the
/// pass's own time: 9, so it uses at most a tenth of a CPU however large
/// the store (a pass lists the root; over 20,000 finished tasks that took
/// about 35 ms, and a steady stream of tasks asked for five a second,
/// 18% of a CPU). The next pass starts [`RETENTION_INTERVAL`] after the
/// last one started or this long after it ended, whichever is later; the
/// store can hold what was written meanwhile beyond its budgets.
pub const RETENTION_REST_FACTOR: u32 = 9;

// ---- Storage faults (issue 24) ----

/// Least time between two attempts to open the global `events.jsonl` when
/// it could not be opened (a read-only or missing artifacts directory at
/// start, a rotation that could not create the new file): 5 s. Attempts
/// happen only when there are records to write, so an idle server never
/// retries; records that come while the file is closed are dropped (the
/// server keeps serving). Not an operator setting: it bounds the cost of
/// the retries, not anything a deployment tunes.
pub const EVENTS_REOPEN_INTERVAL: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_timeouts_are_clamped_to_the_server_maximum() {
        // A guard asking for an hour gets the server maximum, not an hour.
        let limits = CallLimits::default();
        assert_eq!(limits.guard_deadline(None), DEFAULT_GUARD_TIMEOUT);
        assert_eq!(
            limits.guard_deadline(Some(Duration::from_secs(3600))),
            DEFAULT_MAX_TIMEOUT
        );
    }
}
