//! The limits the task runner enforces: task slots and their per-principal
//! share, the task queue and leases, task records' TTLs and sweeps, the
//! default task timeout and door budgets, batches, inline results, the
//! wait for an answer to a question, and the model-token budgets the task
//! store sums.
//!
//! [`TaskLimits`] is the task runner's part of the server's limits: the
//! runner is built with it (`TaskRunner::new`) and the layers above read it
//! through `TaskRunner::limits`. The token budgets live here rather than
//! in `warden_agent`, which checks them through the runner, because the
//! task store sums the tokens and the agent is an optional feature: the
//! variables are validated at start whether or not it is built. The rule
//! of every crate's `limits` module is in [`warden_core::limits`].

use std::time::Duration;

use warden_core::limits::{LimitError, env_number};

/// The values the task runner enforces. Defaults are the `DEFAULT_*`
/// constants of this module.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskLimits {
    /// See [`DEFAULT_MAX_CONCURRENT_TASKS`].
    pub max_concurrent_tasks: usize,
    /// Whether `run_batch` may call guards annotated destructive
    /// ([`warden_core::Guard::destructive`]): default `false`, so a batch naming one
    /// is refused before anything runs and the guard must be called directly,
    /// one deliberate call at a time. Set with
    /// `App::allow_destructive_in_batch`. Does not affect direct
    /// calls or scripts.
    pub allow_destructive_in_batch: bool,
    /// See [`DEFAULT_TASKS_PER_PRINCIPAL`].
    pub tasks_per_principal: usize,
    /// See [`DEFAULT_TASK_TOKENS`]; 0: no limit.
    pub task_tokens: u64,
    /// See [`DEFAULT_PRINCIPAL_DAILY_TOKENS`]; 0: no limit.
    pub principal_daily_tokens: u64,
    /// See [`DEFAULT_TASK_LEASE`].
    pub task_lease: Duration,
    /// See [`DEFAULT_TASK_QUEUE`].
    pub task_queue: usize,
    /// See [`DEFAULT_INPUT_STATE_TTL`].
    pub input_state_ttl: Duration,
}

impl Default for TaskLimits {
    fn default() -> Self {
        Self {
            max_concurrent_tasks: DEFAULT_MAX_CONCURRENT_TASKS,
            allow_destructive_in_batch: false,
            tasks_per_principal: DEFAULT_TASKS_PER_PRINCIPAL,
            task_tokens: DEFAULT_TASK_TOKENS,
            principal_daily_tokens: DEFAULT_PRINCIPAL_DAILY_TOKENS,
            task_lease: DEFAULT_TASK_LEASE,
            task_queue: DEFAULT_TASK_QUEUE,
            input_state_ttl: DEFAULT_INPUT_STATE_TTL,
        }
    }
}

impl TaskLimits {
    /// Applies the operator overrides of these fields on top of `self`
    /// (see [`warden_core::limits::env_number`]).
    pub fn from_env(mut self) -> Result<Self, LimitError> {
        if let Some(n) = env_number("WARDEN_MAX_CONCURRENT_TASKS", 1, 64)? {
            self.max_concurrent_tasks = n as usize;
        }
        if let Some(n) = env_number("WARDEN_TASKS_PER_PRINCIPAL", 1, 100_000)? {
            self.tasks_per_principal = n as usize;
        }
        if let Some(n) = env_number("WARDEN_TASK_TOKENS", 0, 1_000_000_000_000)? {
            self.task_tokens = n;
        }
        if let Some(n) = env_number("WARDEN_PRINCIPAL_DAILY_TOKENS", 0, 1_000_000_000_000)? {
            self.principal_daily_tokens = n;
        }
        if let Some(n) = env_number("WARDEN_TASK_LEASE_SECONDS", 3, 3600)? {
            self.task_lease = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_TASK_QUEUE", 1, 1_000_000)? {
            self.task_queue = n as usize;
        }
        if let Some(n) = env_number("WARDEN_INPUT_STATE_TTL_SECONDS", 1, 86_400)? {
            self.input_state_ttl = Duration::from_secs(n);
        }
        Ok(self)
    }
}

/// Coding tasks and scripts running at once: 2 task slots, separate from the
/// call slots, so a long task never starves direct calls. A task beyond it
/// is rejected with `server_busy`. Operators override it with
/// `WARDEN_MAX_CONCURRENT_TASKS` (1–64); each task holds one script worker.
pub const DEFAULT_MAX_CONCURRENT_TASKS: usize = 2;

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
/// [`DEFAULT_MAX_TIMEOUT`](warden_calls::limits::DEFAULT_MAX_TIMEOUT)). At the deadline the script worker's process
/// group is killed and the task ends `timed_out`.
pub const DEFAULT_TASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Guard calls a script may send through the worker door (isolated and
/// in-process guards, failed calls included): 10,000 per `run_script`.
/// Inline `pure` calls are bounded by the operation limit and deadline instead.
pub const DEFAULT_SCRIPT_DOOR_CALLS: u64 = 10_000;

/// Calls in one `run_batch` request: 1 to 25. A batch outside that range is
/// refused before anything runs (`invalid_input` on `calls`). However many
/// calls it has, a batch holds one call slot and runs at most
/// `max_concurrent_calls` of its calls at once.
pub const MAX_BATCH_CALLS: usize = 25;

/// Largest chunk `read_artifact` returns: 262,144 bytes (default 65,536).
pub const MAX_READ_CHUNK_BYTES: usize = 256 * 1024;

/// Guard calls through the door per coding task (isolated and in-process
/// guards, failed ones included; a `map_call` counts once): 100. Further
/// calls fail with a catchable `budget_exhausted` error. Inline calls
/// (pure guards, script-only functions) have their own, larger budget,
/// [`AGENT_MAX_INLINE_CALLS`].
pub const AGENT_MAX_GUARD_CALLS: u64 = 100;

// ---- tenants ----
// Per-principal limits (see `warden_calls::tenant::limits`). They bind every
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
/// the admission wait ([`DEFAULT_ADMISSION_WAIT`](warden_calls::limits::DEFAULT_ADMISSION_WAIT)) for one of its
/// principal's tasks to end, then is refused `principal_busy` with
/// `retry_after_seconds`; a claimed MCP task beyond it gives its slot back
/// to other principals' tasks and waits (see
/// `warden_mcp::limits::DEFAULT_TASKS_QUEUED_PER_PRINCIPAL`). Does not count the guard calls
/// a task makes (its task slot bounds those).
pub const DEFAULT_TASKS_PER_PRINCIPAL: usize = 1;

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

/// Artifacts listed inline in a task result: the first 100 (by name);
/// the result also says how many there are and to call `list_artifacts`
/// for the rest. Keeps a result under [`MAX_INLINE_RESULT_BYTES`](warden_calls::limits::MAX_INLINE_RESULT_BYTES).
pub const MAX_RESULT_ARTIFACTS: usize = 100;

/// Side effects listed in an interrupted task's result (`side_effects`):
/// the last 100 it started (the one the server died in is last). Its
/// summary counts every one by status, and its `function_calls.json`
/// lists every one. A plan can approve a loop of destructive calls up to
/// the door's call budget, so the list needs a bound of its own.
pub const MAX_RESULT_SIDE_EFFECTS: usize = 100;

/// Largest `value` returned inline in a task result: 64 KiB of JSON. A
/// larger value is saved as `value.json` in the task directory and the
/// result says where (`value_file`, `value_bytes`).
pub const MAX_RESULT_VALUE_BYTES: usize = 64 * 1024;

/// How long a stateless call's `requestState` stays valid: 600 s (10 min)
/// from the `InputRequiredResult` that carried it
/// (`WARDEN_INPUT_STATE_TTL_SECONDS`, 1–86,400). A retry after it is
/// refused as an invalid-params error naming `requestState` (call again
/// without it); the person has this long to answer each question. Does
/// not bound a question asked on a session, which waits for the call's
/// deadline.
pub const DEFAULT_INPUT_STATE_TTL: Duration = Duration::from_secs(600);

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
