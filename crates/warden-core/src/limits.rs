//! Every limit Warden enforces, in one place.
//!
//! Each `DEFAULT_*` constant documents its value, its unit, what happens when
//! it is hit and what it does *not* cover. [`Limits`] carries the values a
//! running server uses; an application overrides them with
//! `App::limits` (in the `warden` facade) and an operator with the `WARDEN_*` environment
//! variables read by [`Limits::from_env`]. The limits table in
//! `docs/operating.md` mirrors this file (`tests/it/docs.rs` checks it).
//!
//! Which limits an operator can tune: budgets that trade capacity for
//! safety on a given machine or team (slots, waits, threads, memory, task
//! quotas, store retention, log sizes, message and argument caps) are
//! `Limits` fields with a `WARDEN_*` override. Bounds that are part of a
//! contract or a format (the 256 KiB inline task result, name and
//! depth limits of artifact paths, argument nesting depth, the string cut
//! in event records) are plain constants: raising them would break the
//! promise they keep, and lowering them buys nothing an operator needs.

use std::time::Duration;

/// Direct guard calls (and batches) running at once: 2, or the machine's
/// core count when that is larger ([`default_concurrent_calls`]). A call
/// beyond it waits in the admission queue ([`DEFAULT_ADMISSION_QUEUE`],
/// [`DEFAULT_ADMISSION_WAIT`]); when the queue is full or no slot frees in
/// time it is rejected with "Server busy; retry later" (`server_busy`) and a
/// `request_rejected` event. Does not count coding tasks or scripts, which
/// hold task slots ([`DEFAULT_MAX_CONCURRENT_TASKS`]).
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
/// diagnostics log (see [`DEFAULT_WORKER_FILE_SIZE`]).
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

/// Largest journal a detached task carries while it waits for the person:
/// 4 MiB of JSON (every guard call before the question, with its reply;
/// see `warden_script::host::journal`). It lives in the task's record (a
/// PostgreSQL row for a cluster), so it is bounded like one: a run whose
/// journal is larger cannot pause and fails naming this limit. No
/// override: return less from the calls before the question, or write
/// large data to artifacts.
pub const MAX_JOURNAL_BYTES: usize = 4 * 1024 * 1024;

/// Largest `arguments` object accepted for one call: 8,000,000 bytes of JSON.
/// Larger arguments are rejected with `arguments_too_large` before a worker
/// starts.
pub const DEFAULT_MAX_ARGUMENT_BYTES: usize = 8_000_000;

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

/// Guard workers one zygote forks before the server replaces it: 256.
/// Children of one zygote share its address-space layout (a fork keeps
/// ASLR's draw; an `exec` makes a new one), so a guard that learns the
/// layout learns it for at most this many calls. Each replacement costs
/// one `exec` (~4 ms), spread over 256 calls.
pub const ZYGOTE_MAX_CHILDREN: u32 = 256;

/// How long the server waits for the zygote to answer one order (fork a
/// worker, reap one): 5 s. A zygote that does not answer in time is killed
/// and replaced; the call it was serving fails with `worker_spawn_failed`.
pub const ZYGOTE_ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The values a running server enforces. Defaults are the `DEFAULT_*`
/// constants of this module.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// See [`DEFAULT_MAX_CONCURRENT_CALLS`].
    pub max_concurrent_calls: usize,
    /// See [`DEFAULT_MAX_CONCURRENT_TASKS`].
    pub max_concurrent_tasks: usize,
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
    /// See [`DEFAULT_WORKER_MEMORY`].
    pub worker_memory: u64,
    /// See [`DEFAULT_WORKER_OPEN_FILES`].
    pub worker_open_files: u64,
    /// See [`DEFAULT_WORKER_FILE_SIZE`].
    pub worker_file_size: u64,
    /// Whether `run_batch` may call guards annotated destructive
    /// ([`crate::Guard::destructive`]): default `false`, so a batch naming one
    /// is refused before anything runs and the guard must be called directly,
    /// one deliberate call at a time. Set with
    /// `App::allow_destructive_in_batch`. Does not affect direct
    /// calls or scripts.
    pub allow_destructive_in_batch: bool,
    /// See [`DEFAULT_TASKS_KEPT`].
    pub tasks_kept: usize,
    /// See [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
    /// See [`DEFAULT_MAX_PENDING_RESPONSES`].
    pub max_pending_responses: usize,
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
    /// See [`DEFAULT_TASKS_PER_PRINCIPAL`].
    pub tasks_per_principal: usize,
    /// See [`DEFAULT_TASKS_QUEUED_PER_PRINCIPAL`].
    pub tasks_queued_per_principal: usize,
    /// See [`DEFAULT_PRINCIPAL_CALL_SHARE_PERCENT`].
    pub principal_call_share_percent: usize,
    /// See [`DEFAULT_CALLS_PER_MINUTE`].
    pub calls_per_minute: u32,
    /// See [`DEFAULT_TASK_TOKENS`]; 0: no limit.
    pub task_tokens: u64,
    /// See [`DEFAULT_PRINCIPAL_DAILY_TOKENS`]; 0: no limit.
    pub principal_daily_tokens: u64,
    /// See [`DEFAULT_PRINCIPAL_ARTIFACT_BYTES`].
    pub principal_artifact_bytes: u64,
    /// See [`DEFAULT_HTTP_MAX_CONNECTIONS`].
    pub http_max_connections: usize,
    /// See [`DEFAULT_HTTP_MAX_SESSIONS`].
    pub http_max_sessions: usize,
    /// See [`DEFAULT_HTTP_SESSION_IDLE`].
    pub http_session_idle: Duration,
    /// See [`DEFAULT_DRAIN_GRACE`].
    pub drain_grace: Duration,
    /// See [`DEFAULT_HTTP_IDLE`].
    pub http_idle: Duration,
    /// See [`DEFAULT_TASK_LEASE`].
    pub task_lease: Duration,
    /// See [`DEFAULT_TASK_QUEUE`].
    pub task_queue: usize,
    /// See [`DEFAULT_HTTP_SESSIONS_PER_PRINCIPAL`].
    pub http_sessions_per_principal: usize,
    /// See [`DEFAULT_HTTP_REQUESTS_PER_PRINCIPAL`].
    pub http_requests_per_principal: usize,
    /// See [`DEFAULT_HTTP_HEADER_TIMEOUT`].
    pub http_header_timeout: Duration,
    /// See [`DEFAULT_HTTP_UNPROVEN_CONNECTIONS`].
    pub http_unproven_connections: usize,
    /// See [`DEFAULT_HTTP_BODY_MIN_RATE`].
    pub http_body_min_rate: u64,
    /// See [`DEFAULT_INPUT_STATE_TTL`].
    pub input_state_ttl: Duration,
    /// See [`DEFAULT_MAX_ANSWER_BYTES`].
    pub max_answer_bytes: usize,
}

/// Task directories kept under the artifacts root: 500. Creating a task
/// beyond it deletes the oldest task directories (by modification time),
/// so the store cannot fill the disk over weeks of use. Operators override
/// it with `WARDEN_TASKS_KEPT` (1–100,000). Does not cover events.jsonl.
pub const DEFAULT_TASKS_KEPT: usize = 500;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent_calls: default_concurrent_calls(),
            max_concurrent_tasks: DEFAULT_MAX_CONCURRENT_TASKS,
            max_overdue_in_process: DEFAULT_MAX_OVERDUE_IN_PROCESS,
            guard_timeout: DEFAULT_GUARD_TIMEOUT,
            max_timeout: DEFAULT_MAX_TIMEOUT,
            max_worker_response: DEFAULT_MAX_WORKER_RESPONSE,
            max_argument_bytes: DEFAULT_MAX_ARGUMENT_BYTES,
            worker_memory: DEFAULT_WORKER_MEMORY,
            worker_open_files: DEFAULT_WORKER_OPEN_FILES,
            worker_file_size: DEFAULT_WORKER_FILE_SIZE,
            allow_destructive_in_batch: false,
            tasks_kept: DEFAULT_TASKS_KEPT,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_pending_responses: DEFAULT_MAX_PENDING_RESPONSES,
            events_max_bytes: DEFAULT_EVENTS_MAX_BYTES,
            events_keep: DEFAULT_EVENTS_KEEP,
            admission_wait: DEFAULT_ADMISSION_WAIT,
            admission_queue: DEFAULT_ADMISSION_QUEUE,
            max_guard_threads: default_guard_threads(),
            task_max_files: DEFAULT_TASK_MAX_FILES,
            task_max_bytes: DEFAULT_TASK_MAX_BYTES,
            store_max_bytes: DEFAULT_STORE_MAX_BYTES,
            tasks_max_age: DEFAULT_TASKS_MAX_AGE,
            tasks_per_principal: DEFAULT_TASKS_PER_PRINCIPAL,
            tasks_queued_per_principal: DEFAULT_TASKS_QUEUED_PER_PRINCIPAL,
            principal_call_share_percent: DEFAULT_PRINCIPAL_CALL_SHARE_PERCENT,
            calls_per_minute: DEFAULT_CALLS_PER_MINUTE,
            task_tokens: DEFAULT_TASK_TOKENS,
            principal_daily_tokens: DEFAULT_PRINCIPAL_DAILY_TOKENS,
            principal_artifact_bytes: DEFAULT_PRINCIPAL_ARTIFACT_BYTES,
            http_max_connections: DEFAULT_HTTP_MAX_CONNECTIONS,
            http_max_sessions: DEFAULT_HTTP_MAX_SESSIONS,
            http_session_idle: DEFAULT_HTTP_SESSION_IDLE,
            drain_grace: DEFAULT_DRAIN_GRACE,
            http_idle: DEFAULT_HTTP_IDLE,
            task_lease: DEFAULT_TASK_LEASE,
            task_queue: DEFAULT_TASK_QUEUE,
            http_sessions_per_principal: DEFAULT_HTTP_SESSIONS_PER_PRINCIPAL,
            http_requests_per_principal: DEFAULT_HTTP_REQUESTS_PER_PRINCIPAL,
            http_header_timeout: DEFAULT_HTTP_HEADER_TIMEOUT,
            http_unproven_connections: DEFAULT_HTTP_UNPROVEN_CONNECTIONS,
            http_body_min_rate: DEFAULT_HTTP_BODY_MIN_RATE,
            input_state_ttl: DEFAULT_INPUT_STATE_TTL,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
        }
    }
}

/// An environment override that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{var}: expected an integer from {min} to {max}, got '{value}'")]
pub struct LimitError {
    var: &'static str,
    min: u64,
    max: u64,
    value: String,
}

impl Limits {
    /// Applies the operator overrides on top of `self`: one `WARDEN_*`
    /// variable per tunable limit, each with the range given here and in
    /// the limits table of `docs/operating.md`, read through [`crate::config`] (the
    /// environment, then `.env`). A value out of range is an error naming
    /// the variable and the range, never silently clamped.
    pub fn from_env(mut self) -> Result<Self, LimitError> {
        if let Some(n) = env_number("WARDEN_MAX_CONCURRENT_CALLS", 1, 64)? {
            self.max_concurrent_calls = n as usize;
        }
        if let Some(n) = env_number("WARDEN_MAX_CONCURRENT_TASKS", 1, 64)? {
            self.max_concurrent_tasks = n as usize;
        }
        if let Some(n) = env_number("WARDEN_MAX_TIMEOUT_SECONDS", 1, 3600)? {
            self.max_timeout = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_WORKER_MEMORY_MB", 64, 65536)? {
            self.worker_memory = n * 1024 * 1024;
        }
        if let Some(n) = env_number("WARDEN_TASKS_KEPT", 1, 100_000)? {
            self.tasks_kept = n as usize;
        }
        if let Some(n) = env_number("WARDEN_MAX_MESSAGE_BYTES", 65_536, 1 << 30)? {
            self.max_message_bytes = n as usize;
        }
        if let Some(n) = env_number("WARDEN_MAX_PENDING_RESPONSES", 1, 1024)? {
            self.max_pending_responses = n as usize;
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
        if let Some(n) = env_number("WARDEN_TASKS_PER_PRINCIPAL", 1, 100_000)? {
            self.tasks_per_principal = n as usize;
        }
        if let Some(n) = env_number("WARDEN_TASKS_QUEUED_PER_PRINCIPAL", 0, 100_000)? {
            self.tasks_queued_per_principal = n as usize;
        }
        if let Some(n) = env_number("WARDEN_PRINCIPAL_CALL_SHARE_PERCENT", 1, 100)? {
            self.principal_call_share_percent = n as usize;
        }
        if let Some(n) = env_number("WARDEN_CALLS_PER_MINUTE", 1, 1_000_000)? {
            self.calls_per_minute = n as u32;
        }
        if let Some(n) = env_number("WARDEN_TASK_TOKENS", 0, 1_000_000_000_000)? {
            self.task_tokens = n;
        }
        if let Some(n) = env_number("WARDEN_PRINCIPAL_DAILY_TOKENS", 0, 1_000_000_000_000)? {
            self.principal_daily_tokens = n;
        }
        if let Some(n) = env_number("WARDEN_PRINCIPAL_ARTIFACT_MB", 1, 1_048_576)? {
            self.principal_artifact_bytes = n * 1024 * 1024;
        }
        if let Some(n) = env_number("WARDEN_HTTP_MAX_CONNECTIONS", 1, 65_536)? {
            self.http_max_connections = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_MAX_SESSIONS", 1, 100_000)? {
            self.http_max_sessions = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_SESSION_IDLE_SECONDS", 10, 86_400)? {
            self.http_session_idle = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_DRAIN_SECONDS", 0, 3600)? {
            self.drain_grace = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_HTTP_IDLE_SECONDS", 1, 3600)? {
            self.http_idle = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_TASK_LEASE_SECONDS", 3, 3600)? {
            self.task_lease = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_TASK_QUEUE", 1, 1_000_000)? {
            self.task_queue = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_SESSIONS_PER_PRINCIPAL", 1, 100_000)? {
            self.http_sessions_per_principal = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_REQUESTS_PER_PRINCIPAL", 1, 65_536)? {
            self.http_requests_per_principal = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_HEADER_TIMEOUT_SECONDS", 1, 600)? {
            self.http_header_timeout = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_HTTP_UNPROVEN_CONNECTIONS", 1, 65_536)? {
            self.http_unproven_connections = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_BODY_MIN_RATE", 1, 1 << 30)? {
            self.http_body_min_rate = n;
        }
        if let Some(n) = env_number("WARDEN_INPUT_STATE_TTL_SECONDS", 1, 86_400)? {
            self.input_state_ttl = Duration::from_secs(n);
        }
        if let Some(n) = env_number(MAX_ANSWER_BYTES_ENV, MIN_ANSWER_BYTES, MAX_ANSWER_BYTES)? {
            self.max_answer_bytes = n as usize;
        }
        Ok(self)
    }

    /// Call slots one principal may hold at once: its share
    /// ([`DEFAULT_PRINCIPAL_CALL_SHARE_PERCENT`]) of `max_concurrent_calls`,
    /// rounded down, and at least 1.
    pub fn principal_call_slots(&self) -> usize {
        (self.max_concurrent_calls * self.principal_call_share_percent / 100).max(1)
    }

    /// The largest MCP message either transport reads (a stdio line, an
    /// HTTP request body): `max_message_bytes`, never below the argument
    /// cap plus [`MESSAGE_ENVELOPE_BYTES`], so a call the executor accepts
    /// is never refused by the transport.
    pub fn message_cap(&self) -> usize {
        self.max_message_bytes
            .max(self.max_argument_bytes.saturating_add(MESSAGE_ENVELOPE_BYTES))
    }

    /// The effective timeout for a guard: its own (or the default), never
    /// above the server maximum.
    pub fn guard_deadline(&self, own: Option<Duration>) -> Duration {
        own.unwrap_or(self.guard_timeout).min(self.max_timeout)
    }
}

fn env_number(var: &'static str, min: u64, max: u64) -> Result<Option<u64>, LimitError> {
    let Some(raw) = crate::config::var(var) else {
        return Ok(None);
    };
    match raw.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(LimitError {
            var,
            min,
            max,
            value: raw,
        }),
    }
}

/// Coding tasks and scripts running at once: 2 task slots, separate from the
/// call slots, so a long task never starves direct calls. A task beyond it
/// is rejected with `server_busy`. Operators override it with
/// `WARDEN_MAX_CONCURRENT_TASKS` (1–64); each task holds one script worker.
pub const DEFAULT_MAX_CONCURRENT_TASKS: usize = 2;

/// The `pollIntervalMs` a task-augmented call suggests to its client: 500 ms.
/// `tasks/get` reads one record, so polling at this rate costs little.
pub const TASK_POLL_INTERVAL_MS: u64 = 500;

/// Shortest TTL a client may ask for a task (`_meta` `warden/taskTtlMs`):
/// 1 s. The longest, and the default, is `tasks_max_age`
/// (`WARDEN_TASKS_MAX_AGE_HOURS`).
pub const MIN_TASK_TTL_MS: i64 = 1_000;

/// How often a serving process removes expired tasks (record and
/// directory) on its own: every 30 s. Reads of task records also trigger
/// it, at most once per [`TASK_SWEEP_MIN_INTERVAL`].
pub const TASK_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a server holds a running task without renewing its lease: 30 s
/// (`WARDEN_TASK_LEASE_SECONDS`, 3–3,600). The server renews every third
/// of it while the task runs; a server that stops renewing (it died, or
/// lost the database) loses the task, which every server then ends
/// `failed` / `interrupted` — within the lease and one
/// [`TASK_HEARTBEAT`]. A task is never run twice.
pub const DEFAULT_TASK_LEASE: Duration = Duration::from_secs(30);

/// Tasks asked for as MCP tasks that may wait in the queue for a task
/// slot: 1,000 (`WARDEN_TASK_QUEUE`, 1–1,000,000). Beyond it a new one is
/// refused `server_busy`.
pub const DEFAULT_TASK_QUEUE: usize = 1_000;

/// The beat of a server's task-store chores: every 1 s it claims queued
/// tasks while it has free task slots, renews its leases when a third of
/// the lease has passed, ends tasks whose lease ran out, and looks for
/// cancels of its tasks asked through another server.
pub const TASK_HEARTBEAT: Duration = Duration::from_secs(1);

/// Least time between two expiry passes triggered by reads: 1 s.
pub const TASK_SWEEP_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Default timeout of `run_script` / `run_coding_task`: 300 s (clamped to
/// [`DEFAULT_MAX_TIMEOUT`]). At the deadline the script worker's process
/// group is killed and the task ends `timed_out`.
pub const DEFAULT_TASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Guard calls a script may send through the worker door (isolated and
/// in-process guards, failed calls included): 10,000 per `run_script`.
/// Inline `pure` calls are bounded by the operation limit and deadline instead.
pub const DEFAULT_SCRIPT_DOOR_CALLS: u64 = 10_000;

/// Rhai operations per script run: 500,000,000. Hitting it ends the script
/// with a `limit` error. Not a time bound: the deadline is enforced separately.
pub const SCRIPT_MAX_OPERATIONS: u64 = 500_000_000;

/// Nested function calls in a script: 64 (`limit` error: stack overflow).
pub const SCRIPT_MAX_CALL_LEVELS: usize = 64;

/// Expression nesting: 64 at top level, 32 inside functions (parse error).
pub const SCRIPT_MAX_EXPR_DEPTHS: (usize, usize) = (64, 32);

/// Longest string a script may build: 4 MiB (`limit` error). Per string,
/// not total: total memory is bounded by the worker's RLIMIT_AS.
pub const SCRIPT_MAX_STRING_BYTES: usize = 4 * 1024 * 1024;

/// Largest array: 200,000 items; largest object map: 10,000 keys.
/// Rhai re-measures a container on every insert, so growth is quadratic:
/// keep tables to tens of thousands of rows (aggregate in guards instead).
pub const SCRIPT_MAX_ARRAY_ITEMS: usize = 200_000;
/// See [`SCRIPT_MAX_ARRAY_ITEMS`].
pub const SCRIPT_MAX_MAP_KEYS: usize = 10_000;

/// Variables alive at once in a script scope: 10,000.
pub const SCRIPT_MAX_VARIABLES: usize = 10_000;

/// Printed output kept per script run: 64 KiB; the rest is dropped and the
/// result says `output_truncated: true`.
pub const SCRIPT_MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// Largest file `write_artifact` accepts: 1 MiB decoded (`artifact_too_large`).
pub const DEFAULT_MAX_ARTIFACT_BYTES: usize = 1024 * 1024;

/// Calls in one `run_batch` request: 1 to 25. A batch outside that range is
/// refused before anything runs (`invalid_input` on `calls`). However many
/// calls it has, a batch holds one call slot and runs at most
/// `max_concurrent_calls` of its calls at once.
pub const MAX_BATCH_CALLS: usize = 25;

/// Largest chunk `read_artifact` returns: 262,144 bytes (default 65,536).
pub const MAX_READ_CHUNK_BYTES: usize = 256 * 1024;

/// Largest result.json `get_task_result` returns inline: 256 KiB; larger
/// ones are read with `read_artifact` in chunks.
pub const MAX_INLINE_RESULT_BYTES: usize = 256 * 1024;

/// Inline pure calls per task recorded one by one in events.jsonl: 1,000
/// (a `function_call_started` and a `function_call_finished` each, like
/// any call). Beyond it, each batch of up to 1,024 calls the script worker
/// reports becomes one `pure_calls_summarized` record — calls, failed,
/// counts per function and per error type, total duration — in both event
/// logs. function_calls.json and, when tracing, spans still keep every
/// call. Why: two ~390-byte records per call let one 100,000-call loop add
/// 78 MB to each event log and cost the
/// server more than the calls themselves cost the worker.
pub const DEFAULT_PURE_CALLS_DETAILED: usize = 1_000;

/// How long after a task's deadline the server waits for the script worker
/// to stop itself (with a classified `timeout` error) before killing its
/// process group: 50 ms. The task never answers later than deadline + this.
pub const SCRIPT_KILL_GRACE: std::time::Duration = std::time::Duration::from_millis(50);

/// Per model call timeout (`WARDEN_MODEL_TIMEOUT_SECONDS`): 120 s, never
/// beyond the task deadline. A slow model fails the task with a `timeout`
/// model error.
pub const DEFAULT_MODEL_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Largest accepted `WARDEN_MODEL_TIMEOUT_SECONDS`: 600 s.
pub const MAX_MODEL_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Code actions a coding task may run: 12. Then the task fails saying the
/// model never finished.
pub const AGENT_MAX_STEPS: usize = 12;

/// Model calls per coding task: 16 (replies without code use a call but
/// not a step).
pub const AGENT_MAX_MODEL_CALLS: usize = 16;

/// Guard calls through the door per coding task (isolated and in-process
/// guards, failed ones included; a `map_call` counts once): 100. Further
/// calls fail with a catchable `budget_exhausted` error. Inline calls
/// (pure guards, script-only functions) have their own, larger budget,
/// [`AGENT_MAX_INLINE_CALLS`].
pub const AGENT_MAX_GUARD_CALLS: u64 = 100;

/// Every this many steps the model is asked to restate its plan: 3.
pub const AGENT_PLANNING_INTERVAL: usize = 3;

/// Observation text sent back to the model per step: 8 KiB (the rest is
/// cut with a note).
pub const AGENT_MAX_OBSERVATION_BYTES: usize = 8 * 1024;

/// The coding task's system prompt: at most 12,000 bytes. It is sent with
/// every model call, so its size is paid on every step. The rules, the
/// guard index by category and the script-only functions always fit; the
/// full signatures of the guards the task's request most likely needs
/// (`warden_core::search` over the request) fill the rest, and the model
/// finds any other with `search_guards`. A registry whose fixed part alone
/// is larger sends that part, over the bound, and no signatures.
pub const AGENT_MAX_PROMPT_BYTES: usize = 12_000;

// ---- transport ----

/// Largest JSON-RPC message (one stdin line) the server reads: 9,048,576
/// bytes, a megabyte above [`DEFAULT_MAX_ARGUMENT_BYTES`] for the envelope.
/// A longer line is streamed past without being buffered (only its first
/// 4 KiB are kept, to find its id) and answered with a `-32600` error;
/// the server keeps serving. The effective cap is never below the argument
/// cap plus that megabyte. Operators override it with
/// `WARDEN_MAX_MESSAGE_BYTES` (65,536 – 1,073,741,824). Does not bound
/// what the server writes.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = DEFAULT_MAX_ARGUMENT_BYTES + MESSAGE_ENVELOPE_BYTES;

/// Room for the JSON-RPC envelope above the argument cap: 1 MiB. The
/// effective message cap is at least `max_argument_bytes` plus this.
pub const MESSAGE_ENVELOPE_BYTES: usize = 1024 * 1024;

/// Requests read from the client and not yet answered: 32. With that many
/// answers unwritten (running, or waiting for a client that stopped
/// reading stdout), the server reads no further requests until one is
/// written or cancelled, so its memory holds at most this many requests
/// and answers. Progress notifications are bounded by it too: each running
/// request waits for its notification to be written before sending the
/// next. Operators override it with `WARDEN_MAX_PENDING_RESPONSES`
/// (1–1024). Does not bound the size of one answer (see
/// [`MAX_INLINE_RESULT_BYTES`] and [`DEFAULT_MAX_WORKER_RESPONSE`]).
pub const DEFAULT_MAX_PENDING_RESPONSES: usize = 32;

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

/// Room for a script worker's message around its payload: 64 KiB (message
/// type, guard name, artifact filename and encoding).
pub const WORKER_LINE_ENVELOPE_BYTES: usize = 64 * 1024;

/// Longest line the server reads from a script worker, for a server whose
/// argument cap is `max_argument_bytes`: what the largest legitimate message
/// needs, plus [`WORKER_LINE_ENVELOPE_BYTES`]. That is a guard call with
/// arguments at the cap, or a `write_artifact` of
/// [`DEFAULT_MAX_ARTIFACT_BYTES`] in the worst JSON escaping (6 bytes per
/// byte, `\u0001`; base64 needs only 4 per 3), whichever is larger: 8,065,536
/// bytes with the defaults. A longer line is read no further than this:
/// the rest is skipped, and a guard call or artifact write gets a catchable
/// `arguments_too_large` / `artifact_too_large` reply; any other message
/// ends the run with the reason. Does not cap what the server sends back.
pub fn worker_line_cap(max_argument_bytes: usize) -> usize {
    max_argument_bytes.max(6 * DEFAULT_MAX_ARTIFACT_BYTES) + WORKER_LINE_ENVELOPE_BYTES
}

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

/// Task slots one principal may hold at once on a server: 1
/// (`WARDEN_TASKS_PER_PRINCIPAL`, 1–100,000), whichever path took them: a
/// direct `run_script` / `run_coding_task`, or an MCP task (of any of the
/// three task tools) claimed from the queue. With the default 2 task slots,
/// two team members can each run a task and none can hold both slots;
/// raise both together on a larger machine. A direct task beyond it waits
/// the admission wait ([`DEFAULT_ADMISSION_WAIT`]) for one of its
/// principal's tasks to end, then is refused `principal_busy` with
/// `retry_after_seconds`; a claimed MCP task beyond it gives its slot back
/// to other principals' tasks and waits (see
/// [`DEFAULT_TASKS_QUEUED_PER_PRINCIPAL`]). Does not count the guard calls
/// a task makes (its task slot bounds those).
pub const DEFAULT_TASKS_PER_PRINCIPAL: usize = 1;

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

/// Model tokens (input + output, from the replies' `usage`, or estimated
/// from their sizes when a reply has none) one coding task may use: 0, no
/// limit (`WARDEN_TASK_TOKENS`, 0–1,000,000,000,000). The size of a call
/// is known only from its reply, so the limit is checked
/// before each model call: once the task's total has reached it, the next
/// call is not made and the task ends `failed` (error kind `limit`),
/// saying the total and the limit. One call may take a task past it.
pub const DEFAULT_TASK_TOKENS: u64 = 0;

/// Model tokens one principal's coding tasks may use per UTC day, summed in
/// the task store over all its tasks and every node sharing the store: 0,
/// no limit (`WARDEN_PRINCIPAL_DAILY_TOKENS`, 0–1,000,000,000,000). Checked,
/// like [`DEFAULT_TASK_TOKENS`], before each model call: once the day's
/// total has reached it, the call is not made and the task ends `failed`
/// (error kind `limit`), naming the total and the limit; the next day
/// starts at 0. It binds `local` too: it is a cost, not a share. A store
/// that cannot answer fails the call rather than spend unchecked.
pub const DEFAULT_PRINCIPAL_DAILY_TOKENS: u64 = 0;

/// Model tokens one reply may report on either side (`usage`'s input or
/// output count): 10,000,000, ten times the largest context windows
/// offered today. A reply reporting more, a negative or a fractional
/// count is the endpoint's error: the model call fails naming the field
/// and is counted by its size estimate instead, so a wild count can
/// neither wrap a sum to zero (disabling [`DEFAULT_TASK_TOKENS`] and
/// [`DEFAULT_PRINCIPAL_DAILY_TOKENS`]) nor overflow the task store's sums.
pub const MAX_MODEL_TOKENS_PER_RESPONSE: u64 = 10_000_000;

/// Bytes of task directories one principal keeps in the store: 1 GiB
/// (`WARDEN_PRINCIPAL_ARTIFACT_MB`, 1–1,048,576). A quarter of the store
/// budget ([`DEFAULT_STORE_MAX_BYTES`]), so one principal's volume cannot
/// push everyone else's tasks out of the store: past it, the retention
/// thread deletes that principal's oldest finished tasks (at the next task
/// start), never another's. A `write_artifact` that would take the
/// principal's running tasks' outputs past it is refused with a catchable
/// `quota_exceeded`. Does not cover events.jsonl.
pub const DEFAULT_PRINCIPAL_ARTIFACT_BYTES: u64 = 1024 * 1024 * 1024;

// ---- sandbox ----

/// Operator override of [`Limits::max_argument_bytes`] (default
/// [`DEFAULT_MAX_ARGUMENT_BYTES`]): `WARDEN_MAX_ARGUMENT_BYTES`, from
/// [`MIN_ARGUMENT_BYTES`] to [`MAX_ARGUMENT_BYTES`]. An isolated guard
/// worker is told the value and reads requests up to it (plus
/// [`WORKER_REQUEST_ENVELOPE_BYTES`]), so raising it works for every mode.
/// Does not raise the worker's memory limit ([`DEFAULT_WORKER_MEMORY`]):
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

/// Guard calls recorded one by one in a task's `function_calls.json`:
/// 10,000 (about 1.2 MB). Later calls are counted into one closing
/// `{"summarized": …}` record (calls, failed, per function, per error type,
/// total duration), so the file stays valid JSON and its counts stay right
/// however long a script loops. Does not limit the calls themselves.
pub const DEFAULT_CALLS_RECORDED: usize = 10_000;

/// Bytes the whole task store may hold: 4 GiB (`WARDEN_STORE_MAX_MB`,
/// 1–1,048,576). When a task starts beyond it, the oldest finished task
/// directories are removed (on a background thread) until the store fits.
/// Running tasks are never removed; does not cover events.jsonl.
pub const DEFAULT_STORE_MAX_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Age after which a finished task directory is removed: 30 days
/// (`WARDEN_TASKS_MAX_AGE_HOURS`, 1–87,600), by its modification time, at
/// the next task start. Running tasks are never removed.
pub const DEFAULT_TASKS_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Artifacts listed inline in a task result: the first 100 (by name);
/// the result also says how many there are and to call `list_artifacts`
/// for the rest. Keeps a result under [`MAX_INLINE_RESULT_BYTES`].
pub const MAX_RESULT_ARTIFACTS: usize = 100;

/// Progress and log messages ([`crate::notify`]) one direct guard call may
/// have waiting for the client: 64. A guard that sends faster than the
/// client reads loses the excess (messages are best effort; the call is
/// unaffected). Does not bound how many a call sends in all.
pub const MAX_QUEUED_NOTICES: usize = 64;

/// Largest `value` returned inline in a task result: 64 KiB of JSON. A
/// larger value is saved as `value.json` in the task directory and the
/// result says where (`value_file`, `value_bytes`).
pub const MAX_RESULT_VALUE_BYTES: usize = 64 * 1024;

/// How long the stdio server, when its client goes away or it is stopped,
/// waits for running tasks to record themselves `cancelled`: 2 s. Tasks
/// not done by then are marked `interrupted` at the next start.
pub const TASK_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

// ---- HTTP transport ----
// `serve --http`: the bounds that keep one client from filling the server
// through the transport itself (before any call is admitted).

/// HTTP connections open at once: 1,024. At the cap the server stops
/// accepting until one closes: new clients wait in the kernel's listen
/// backlog, connections already open keep being served. Each connection
/// costs a file descriptor and a few KiB. Operators override it with
/// `WARDEN_HTTP_MAX_CONNECTIONS` (1–65,536).
pub const DEFAULT_HTTP_MAX_CONNECTIONS: usize = 1024;

/// A connection without a request in progress for this long is closed:
/// 60 s, counted from its accept or its last answer, however many bytes
/// trickled in meanwhile (the next request's headers must arrive within
/// it). Without it, a client could hold every connection permit
/// ([`DEFAULT_HTTP_MAX_CONNECTIONS`]) with sockets that send nothing or
/// trickle headers. A request in progress (a long call, an SSE stream)
/// keeps its connection however quiet it is. A client between requests
/// reconnects. Operators override it with
/// `WARDEN_HTTP_IDLE_SECONDS` (1–3,600).
pub const DEFAULT_HTTP_IDLE: Duration = Duration::from_secs(60);

/// MCP sessions (protocol revisions before 2026-07-28) held at once:
/// 4,096. Every `initialize` opens one, whatever revision its headers
/// name; the one past the cap is answered 503 with `Retry-After`
/// (`too_many_sessions`). Stateless 2026-07-28 requests open none and are
/// not refused. Each principal holds at most
/// [`DEFAULT_HTTP_SESSIONS_PER_PRINCIPAL`] of them. An idle session costs about 28 KiB of server
/// memory (the `http_bench` figure). Operators override it with
/// `WARDEN_HTTP_MAX_SESSIONS` (1–100,000).
pub const DEFAULT_HTTP_MAX_SESSIONS: usize = 4096;

/// MCP sessions one authenticated principal may hold at once: 256
/// (`WARDEN_HTTP_SESSIONS_PER_PRINCIPAL`, 1–100,000). Every `initialize`
/// opens a session whatever protocol revision its headers name, and each
/// counts here and against [`DEFAULT_HTTP_MAX_SESSIONS`]. Past it the
/// `initialize` is answered 503 `too_many_sessions` with `Retry-After`,
/// naming the variable; the principal's other sessions keep working. So one
/// token cannot fill the server-wide cap (256 idle sessions are about
/// 7 MiB), while a team that shares one token still gets a session per
/// client. `local` (the operator of an unauthenticated loopback server) is
/// bound by the server-wide cap alone.
pub const DEFAULT_HTTP_SESSIONS_PER_PRINCIPAL: usize = 256;

/// HTTP requests one authenticated principal may have in progress at once,
/// open SSE streams (a session's GET stream, a resumed stream, a call's
/// answer stream) included: 64 (`WARDEN_HTTP_REQUESTS_PER_PRINCIPAL`,
/// 1–65,536). A request in progress holds its connection, so this is also
/// the connections one principal can keep busy: 64 of the default 1,024.
/// The request past it is answered 429 `too_many_requests` with
/// `Retry-After`, naming the variable; it holds nothing. `local` is bound
/// by the connection cap alone.
pub const DEFAULT_HTTP_REQUESTS_PER_PRINCIPAL: usize = 64;

/// How long a connection that has not yet carried an authenticated request
/// may take to deliver a request's headers: 10 s, from its accept or its
/// last answer (`WARDEN_HTTP_HEADER_TIMEOUT_SECONDS`, 1–600). Then it is
/// closed. A connection whose request reached `/mcp` through
/// authentication gets [`DEFAULT_HTTP_IDLE`] instead. It is also the grace
/// a request body gets before [`DEFAULT_HTTP_BODY_MIN_RATE`] applies.
pub const DEFAULT_HTTP_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections open at once that have not yet carried an authenticated
/// request: 256 (`WARDEN_HTTP_UNPROVEN_CONNECTIONS`, 1–65,536, at most
/// [`DEFAULT_HTTP_MAX_CONNECTIONS`]). Past it the server accepts nothing
/// until one is proven or closed (each lasts at most
/// [`DEFAULT_HTTP_HEADER_TIMEOUT`] between requests), so silent or
/// unauthenticated sockets never hold more than a quarter of the
/// connection permits, and the rest stay with authenticated clients.
pub const DEFAULT_HTTP_UNPROVEN_CONNECTIONS: usize = 256;

/// The slowest request body the server reads: 16 KiB/s on average after a
/// grace of [`DEFAULT_HTTP_HEADER_TIMEOUT`] (`WARDEN_HTTP_BODY_MIN_RATE`,
/// bytes per second, 1–1 GiB). A body of `n` bytes must be complete within
/// grace + `n` / rate from the request's start (10.5 s for an 8 KiB
/// call, about 9 min for the largest message); a body that falls behind is
/// answered 408 `body_too_slow` and its connection closed, so a client
/// trickling bytes cannot hold a connection and its request for long.
pub const DEFAULT_HTTP_BODY_MIN_RATE: u64 = 16 * 1024;

/// How long a stateless call's `requestState` stays valid: 600 s (10 min)
/// from the `InputRequiredResult` that carried it
/// (`WARDEN_INPUT_STATE_TTL_SECONDS`, 1–86,400). A retry after it is
/// refused as an invalid-params error naming `requestState` (call again
/// without it); the person has this long to answer each question. Does
/// not bound a question asked on a session, which waits for the call's
/// deadline.
pub const DEFAULT_INPUT_STATE_TTL: Duration = Duration::from_secs(600);

/// Questions one guard may ask in one stateless call (multi-round-trip
/// input, SEP-2322): 8, one round trip each. The ninth question fails in
/// the guard with `cannot_ask` naming this limit, so a guard that asks in
/// a loop cannot keep a client retrying forever (rmcp's client gives up
/// after 10 rounds). Does not bound questions on a session.
pub const MAX_INPUT_QUESTIONS: usize = 8;

/// The largest `requestState` the server issues or accepts: 65,536 bytes
/// (64 KiB). It carries the answers given so far (signed, not encrypted),
/// so answers larger than this together end the call with `cannot_ask`
/// naming this limit instead of another round; a longer `requestState`
/// from a client is refused before it is verified.
pub const MAX_INPUT_STATE_BYTES: usize = 64 * 1024;

/// A session with no request for this long is closed: 300 s (rmcp's own
/// default). Its client must initialize again. Operators override it with
/// `WARDEN_HTTP_SESSION_IDLE_SECONDS` (10–86,400).
pub const DEFAULT_HTTP_SESSION_IDLE: Duration = Duration::from_secs(300);

/// SSE events one MCP session stream buffers for a client and keeps for a
/// `Last-Event-ID` resume: 16 (rmcp's own default). A client that stops
/// reading a stream holds its session's messages until it reads again or
/// goes away; one that resumes after more than this many events were sent
/// gets an empty stream (the events are gone).
pub const SESSION_STREAM_EVENTS: usize = 16;

/// Quiet extra GET streams one MCP session keeps (a client's competing
/// reconnects, kept alive but given no notifications): 32; the oldest is
/// closed first.
pub const MAX_SESSION_SHADOW_STREAMS: usize = 32;

/// How long a session request's SSE stream stays resumable when its
/// answer found no client listening: 60 s (rmcp's own default), so a
/// client that lost the stream mid-call gets the answer with
/// `Last-Event-ID`. An answer delivered to a listening client is dropped
/// at once.
pub const SESSION_RESUME_WINDOW: Duration = Duration::from_secs(60);

/// Answered-while-away streams one MCP session keeps for a resume: 64. A
/// client that sends requests and hangs up in a loop would otherwise make
/// the session hold every answer for [`SESSION_RESUME_WINDOW`]; past this
/// many, the oldest is dropped (its resume gets an empty stream).
pub const MAX_SESSION_RESUMABLE_STREAMS: usize = 64;

/// How long SIGTERM waits for running calls and tasks to finish before it
/// cancels them: 30 s. The listener stays open for it: `/readyz`
/// answers 503; after the grace, running tasks are cancelled and recorded
/// `cancelled` (waiting up to [`TASK_SHUTDOWN_GRACE`] for their records)
/// and workers are killed. Operators override it with
/// `WARDEN_DRAIN_SECONDS` (0–3,600).
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(30);

/// How long a `/readyz` answer is reused: 5 s. The probe starts a worker
/// process, so a client polling `/readyz` in a loop costs at most one
/// worker start per period.
pub const READY_CACHE: Duration = Duration::from_secs(5);

// ---- object store ----
// The S3 copy of task files (`WARDEN_ARTIFACT_STORE`, see
// `warden_cluster::s3`). A request that runs out of these fails the
// lookup or the upload with "object store s3://… unreachable"; nothing is
// answered from a partial read.

/// Connecting to the object store: 5 s per attempt. Does not bound the
/// request once connected (see [`OBJECT_STORE_REQUEST_TIMEOUT`]).
pub const OBJECT_STORE_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One object-store request, body included: 30 s; also the longest time
/// spent retrying it ([`OBJECT_STORE_RETRIES`]). Does not bound a whole
/// upload or listing, which are many requests.
pub const OBJECT_STORE_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Retries of a failed object-store request (a refused or dropped
/// connection, a 5xx answer): 2, after 100 ms then 200 ms. Kept small so
/// that a store that is down answers a client in well under a second
/// instead of the object_store crate's default of ten retries over minutes.
pub const OBJECT_STORE_RETRIES: usize = 2;

/// Files one task upload sends at once: 8. Bounds the memory an upload
/// holds (at most this many files in memory) and its connections; does not
/// bound how many tasks upload at once (one per finishing task).
pub const OBJECT_STORE_UPLOADS: usize = 8;

// ---- charts ----
// Script charts (`line_chart`, `bar_chart`, `scatter_chart`, `heatmap`,
// rendered by `crate::script::worker::charts` inside the script worker). A chart
// that breaks one of these is refused with a catchable script error
// (`chart_too_large`, naming the option or `rows`) before anything is
// drawn. A written chart or report is one file like any write_artifact:
// it counts against DEFAULT_MAX_ARTIFACT_BYTES, DEFAULT_TASK_MAX_FILES and
// DEFAULT_TASK_MAX_BYTES; none of the constants below bound those.

/// Default chart size when `width`/`height` are not given: 800 × 500 pixels.
pub const CHART_DEFAULT_WIDTH: u32 = 800;
/// See [`CHART_DEFAULT_WIDTH`].
pub const CHART_DEFAULT_HEIGHT: u32 = 500;

/// Smallest `width`/`height`: 200 × 150 pixels. Below it axes and title do
/// not fit; a smaller value is refused (`invalid_input`), not enlarged.
pub const CHART_MIN_WIDTH: u32 = 200;
/// See [`CHART_MIN_WIDTH`].
pub const CHART_MIN_HEIGHT: u32 = 150;

/// Largest `width`/`height`: 2,400 pixels each (a 2,400 × 2,400 RGB canvas
/// is 17 MB of worker memory while it is drawn). Larger is refused with
/// `chart_too_large`. Does not bound the encoded file, which is capped by
/// the artifact size limit (a noisy full-size PNG can exceed it:
/// write_artifact then fails with `artifact_too_large`).
pub const CHART_MAX_SIDE_PX: u32 = 2_400;

/// Points per chart, all series together (line and scatter points, bars):
/// 20,000. More is refused with `chart_too_large` on `rows`; aggregate or
/// sample first. Rows without a value are not points and do not count.
pub const CHART_MAX_POINTS: usize = 20_000;

/// Cells of a heatmap (distinct x values × distinct y values): 10,000
/// (e.g. 100 × 100). More is refused with `chart_too_large` on `rows`.
/// Empty cells of the grid count too: it is the grid that is drawn.
pub const CHART_MAX_HEATMAP_CELLS: usize = 10_000;

/// Series in one chart (y columns × `series` groups): 12. Beyond it the
/// colours repeat and the legend hides the plot, so it is refused
/// (`chart_too_large` on `series` or `y`).
pub const CHART_MAX_SERIES: usize = 12;

/// Characters in a title or axis label: 200 (`invalid_input`). Category
/// labels of a bar chart are cut to 40 characters instead, with "…".
pub const CHART_MAX_LABEL_CHARS: usize = 200;

/// Sections in one `report(...)`: 100; rows shown per table section: 500
/// (the rest is left out with a note saying how many). The page is one
/// artifact, so it is also bounded by the artifact size limit.
pub const REPORT_MAX_SECTIONS: usize = 100;
/// See [`REPORT_MAX_SECTIONS`].
pub const REPORT_MAX_TABLE_ROWS: usize = 500;

// ---- the answer bound (issue 38) ----
// What one `tools/call` (or `tasks/get`) answer may weigh on the wire. The
// MCP layer bounds every answer in one place (`warden_mcp::bound`); the
// typed builders cut their own long parts first (a task's receipt hashes,
// a page of files, a chunk of a file).

/// The largest answer a client receives for one tool call or `tasks/get`:
/// 100,000 bytes of JSON-RPC response on the wire, structuredContent, text
/// content and `_meta` together (`WARDEN_MAX_ANSWER_BYTES`, bytes,
/// 8,192–67,108,864). Why: clients refuse large tool results (Claude Code
/// refuses one over 25,000 tokens by default), and an answer listing a
/// thousand artifacts or six thousand metrics is read by nobody whole.
/// At the limit the answer is cut, never refused: its text stops repeating
/// structuredContent (it becomes a short JSON summary), images and links
/// beyond a share are dropped, then the value itself keeps its leading
/// items within the budget; the cut answer says `truncated: true` with a
/// `truncation` object (the limit, the whole answer's size, each cut with
/// its kept and total counts) and points at the whole value, kept as an
/// artifact: a task's `result.json`, or for any other tool a new task
/// directory of the caller holding `value.json` (a task record of its own,
/// kept like any task), with a `resource_link` to it. A guard whose output
/// schema leaves no room for the marker answers `isError` with
/// `answer_too_large`, its status `success`, and the same pointer. Does
/// not bound `resources/read`, `read_artifact`'s own chunk limit, or
/// protocol errors.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 100_000;

/// The variable that overrides [`DEFAULT_MAX_ANSWER_BYTES`].
pub const MAX_ANSWER_BYTES_ENV: &str = "WARDEN_MAX_ANSWER_BYTES";

/// Smallest answer bound an operator may set: 8,192 bytes, room for the
/// JSON-RPC envelope, the `truncation` marker with its pointer and a few
/// KiB of the value. A smaller `WARDEN_MAX_ANSWER_BYTES` is a start-up error.
pub const MIN_ANSWER_BYTES: u64 = 8_192;

/// Largest answer bound an operator may set: 64 MiB (67,108,864 bytes). A
/// larger `WARDEN_MAX_ANSWER_BYTES` is a start-up error.
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;

/// Bytes of the answer bound kept for the JSON-RPC envelope around the
/// result (`jsonrpc`, the request id, a task's fields in `tasks/get`): 1,024.
/// The result itself is cut to the bound minus this; a client-chosen request
/// id longer than this can take the response past the bound.
pub const ANSWER_ENVELOPE_BYTES: usize = 1_024;

/// Cuts a `truncation` marker lists one by one: 8 (`cut`); more are
/// counted in `cut_more`. Keeps the marker itself small however many
/// parts were cut.
pub const ANSWER_CUTS_LISTED: usize = 8;

/// PNG artifacts a `run_script`/`run_coding_task` result carries as MCP
/// image content, so a client shows them without another call: at most 8,
/// in the order of the result's artifact list, and only while the whole
/// tool result (its JSON twice — structuredContent and the text mirror —
/// plus the base64 of the images) stays within [`MAX_INLINE_RESULT_BYTES`]
/// and the answer bound ([`DEFAULT_MAX_ANSWER_BYTES`]), whichever is smaller.
/// A PNG that does not fit is still a `resource_link` (every artifact is),
/// to read with `resources/read` or `read_artifact`.
pub const MAX_RESULT_IMAGES: usize = 8;

// ---- http authentication ----
// The bearer-token checks of `serve --http`
// (`crate::mcp::transport::http::auth`). Contract bounds, not tunables: an
// operator who needs larger tokens or a slower issuer has a misconfigured
// issuer, not a capacity problem.

/// Longest `Authorization` header accepted: 8 KiB (8,192 bytes, scheme
/// included). A longer one is answered 400 `malformed_authorization`
/// before anything is hashed or decoded. Room for a JWT with many claims;
/// does not bound other headers (the HTTP server's own limits do).
pub const MAX_AUTHORIZATION_BYTES: usize = 8 * 1024;

/// How long one fetch of the issuer's JWKS (`WARDEN_OAUTH_JWKS` as a URL)
/// may take, connect to last byte: 5 s. At startup a slower issuer is a
/// startup error; later the server keeps the keys it has and a token
/// signed by an unknown key is answered 401 `invalid_token`.
pub const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest JWKS document read: 256 KiB (262,144 bytes), from a URL or a
/// file. A larger one is refused like an unreachable one (above). Real key
/// sets are a few KiB.
pub const JWKS_MAX_BYTES: usize = 256 * 1024;

/// Least time between two JWKS loads: 60 s. A token naming an unknown `kid`
/// triggers a reload only when the last one is older than this, and
/// concurrent requests share one reload, so a flood of made-up key ids
/// costs the issuer at most one request a minute. The cost: a key the
/// issuer publishes right after a reload is accepted up to 60 s later.
pub const JWKS_MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(60);

/// Age after which the JWKS is reloaded in the background even when every
/// token's `kid` is known: 15 min (900 s), so a key the issuer withdrew
/// stops being accepted within this long. Requests never wait for it.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// Clock skew allowed on a JWT's `exp` and `nbf`: 30 s. A token expired
/// 31 s ago, or valid only 31 s from now, is answered 401 `invalid_token`.
pub const JWT_LEEWAY: Duration = Duration::from_secs(30);

// ---- tasks per principal (issue 24) ----
// How far one principal's MCP tasks may run ahead of its task slots. See
// `crate::task::service` (claims) and `crate::mcp::server` (submission).

/// MCP tasks one principal may have waiting beyond the tasks it runs: 4
/// (`WARDEN_TASKS_QUEUED_PER_PRINCIPAL`, 0–100,000). Waiting means queued
/// in the task store, or claimed by a server and waiting there for one of
/// its principal's running tasks to end (its task slot goes to other
/// principals' tasks meanwhile). A new MCP task is accepted while the
/// principal has fewer than [`DEFAULT_TASKS_PER_PRINCIPAL`] plus this many
/// tasks queued or running over all servers; beyond it, it is refused at
/// once `principal_busy`, naming both variables, with
/// `retry_after_seconds`: retry when one of them ends. So one principal
/// holds at most 5 (1 + 4, with the defaults) of the [`DEFAULT_TASK_QUEUE`]
/// places of the queue, however many it sends; 0 makes queued tasks count
/// against its task limit alone (the behaviour before this limit). Never
/// binds `local` (the operator). Does not bound direct calls, which never
/// queue.
pub const DEFAULT_TASKS_QUEUED_PER_PRINCIPAL: usize = 4;

// ---- Storage faults (issue 24) ----

/// Least time between two attempts to open the global `events.jsonl` when
/// it could not be opened (a read-only or missing artifacts directory at
/// start, a rotation that could not create the new file): 5 s. Attempts
/// happen only when there are records to write, so an idle server never
/// retries; records that come while the file is closed are dropped (the
/// server keeps serving). Not an operator setting: it bounds the cost of
/// the retries, not anything a deployment tunes.
pub const EVENTS_REOPEN_INTERVAL: Duration = Duration::from_secs(5);

// ---- coding agent: inline calls and map_call (issue 25) ----

/// Inline calls per coding task: pure guards (run inside the script
/// worker) and the app's script-only functions, failed ones included:
/// 100,000 (`WARDEN_AGENT_MAX_INLINE_CALLS`, 1–10,000,000, read when a
/// coding task starts). Counted apart from [`AGENT_MAX_GUARD_CALLS`]: an
/// inline call costs microseconds and no round trip, so a bisection or a
/// grid of pure computations must not spend the small door budget. Past
/// it a call fails with a catchable `budget_exhausted`. Does not count the
/// script prelude (`norm_cdf`, `erf`, …), which is engine arithmetic;
/// `run_script` bounds inline calls by operations and the deadline only.
pub const AGENT_MAX_INLINE_CALLS: u64 = 100_000;

/// Items in one `map_call(name, items)`: 1,000. The items of a guard that
/// is not pure travel in one door message and count once against the door
/// budget; each is still a full guard call (validation, events,
/// function_calls.json, its own timeout). A longer list is refused with a
/// catchable `invalid_input` on `items` before any item runs: split it.
/// Does not bound the message size (the worker line cap does).
pub const MAX_MAP_CALL_ITEMS: usize = 1_000;

/// `WARDEN_AGENT_MAX_INLINE_CALLS`, or [`AGENT_MAX_INLINE_CALLS`] when
/// unset; a value outside 1–10,000,000 is an error naming the variable
/// and the range.
pub fn agent_inline_calls() -> Result<u64, LimitError> {
    Ok(env_number("WARDEN_AGENT_MAX_INLINE_CALLS", 1, 10_000_000)?.unwrap_or(AGENT_MAX_INLINE_CALLS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_timeouts_are_clamped_to_the_server_maximum() {
        // A guard asking for an hour gets the server maximum, not an hour.
        let limits = Limits::default();
        assert_eq!(limits.guard_deadline(None), DEFAULT_GUARD_TIMEOUT);
        assert_eq!(
            limits.guard_deadline(Some(Duration::from_secs(3600))),
            DEFAULT_MAX_TIMEOUT
        );
    }
}
