//! The task store: one record per task, the single source of truth for
//! what tasks exist, whose they are and how they ended.
//!
//! The task directory keeps the files (script, calls, outputs, the full
//! `result.json`); the record keeps what a client asks about without
//! reading them: owner, tool, status, times, the latest progress note,
//! the summary and the error, and where the files are. `list_tasks`,
//! `get_task_result`, `tasks/get` and the resource listing read records.
//!
//! [`TaskStore`] is the small seam between Warden and a database: the
//! embedded SQLite backend ([`sqlite`], a file in the artifacts directory)
//! is the default; a shared database (PostgreSQL, in `warden-cluster`)
//! implements the same trait and is opened through a [`StoreOpener`] the
//! app hands the runner, so this crate compiles no database driver.
//! Every write is one transaction: a crash
//! leaves a record as it was before or after the write, never half of it.
//! Schema changes are versioned steps ([`migrations`]) applied at startup.

#[doc(hidden)]
pub mod checks;
pub mod migrations;
pub mod sqlite;

use serde_json::Value;

pub use crate::TaskStatus;
use warden_calls::events::recovered::SideEffect;
use warden_calls::tenant::Principal;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Asked for as an MCP task and waiting for a server with a free task
    /// slot to claim it.
    Queued,
    /// Its worker is running (or its server died: see [`warden_calls::node`]).
    Running,
    /// It stopped on a question for the person (MCP `input_required`) and
    /// holds no server: [`TaskStore::answer`] queues it again.
    Waiting,
    /// It ended; `result.json` in its directory has the full result.
    Ended(TaskStatus),
}

impl State {
    /// The word stored and shown by `list_tasks`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Waiting => "input_required",
            Self::Ended(TaskStatus::Success) => "success",
            Self::Ended(TaskStatus::Failed) => "failed",
            Self::Ended(TaskStatus::TimedOut) => "timed_out",
            Self::Ended(TaskStatus::Cancelled) => "cancelled",
        }
    }

    /// The state a stored word names.
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "queued" => Self::Queued,
            "running" => Self::Running,
            "input_required" => Self::Waiting,
            "success" => Self::Ended(TaskStatus::Success),
            "failed" => Self::Ended(TaskStatus::Failed),
            "timed_out" => Self::Ended(TaskStatus::TimedOut),
            "cancelled" => Self::Ended(TaskStatus::Cancelled),
            _ => return None,
        })
    }
}

/// One task's record.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// `task_` + 32 hex digits, as the task directory is named.
    pub id: String,
    /// The principal that created it; nobody else sees it.
    pub owner: Principal,
    /// The tool that started it (`run_script`, `run_coding_task`, `run_batch`).
    pub tool: String,
    pub state: State,
    /// The result's summary, once it ended.
    pub summary: Option<String>,
    /// The latest progress note while running (MCP `statusMessage`).
    pub status_message: Option<String>,
    /// The result's `error` (`{kind, message, …}`) when it did not succeed.
    pub error: Option<Value>,
    /// Milliseconds since the Unix epoch.
    pub created_ms: i64,
    pub updated_ms: i64,
    /// How long after creation the record and its files are kept.
    pub ttl_ms: i64,
    /// Where the task's files are: its directory.
    pub location: String,
    /// Whether the client asked for it as an MCP task (it outlives the
    /// request that started it) rather than waiting for the result.
    pub detached: bool,
    /// The server process running it ([`warden_calls::node::Node`]), so that a task
    /// whose server died can be told from one still running (empty while
    /// queued).
    pub node: String,
    /// Until when that server holds it: it renews the lease while the task
    /// runs; a lease that runs out ends the task `interrupted`.
    pub lease_until_ms: i64,
}

impl TaskRecord {
    /// When the record and its files may be removed (if it has ended).
    pub fn expires_ms(&self) -> i64 {
        self.created_ms.saturating_add(self.ttl_ms)
    }
}

/// A running task whose lease ran out after it had put side effects on
/// record ([`TaskStore::put_side_effect`]): what
/// [`TaskStore::lapsed_with_side_effects`] read of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Lapsed {
    pub id: String,
    pub owner: Principal,
    /// The last side effects it started, oldest first (at most the limit
    /// asked for).
    pub side_effects: Vec<SideEffect>,
    /// Every side effect it started, counted by status (`unknown`,
    /// `success`, …).
    pub by_status: std::collections::BTreeMap<String, u64>,
}

/// How a running task ended, for [`TaskStore::end`].
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    pub status: TaskStatus,
    pub summary: String,
    pub error: Option<Value>,
    pub at_ms: i64,
}

/// Model tokens one task used on one UTC day, added to its running total
/// by [`TaskStore::add_usage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageEntry {
    pub task_id: String,
    pub owner: Principal,
    /// `YYYY-MM-DD`, UTC ([`utc_day`]).
    pub day: String,
    pub model: String,
    pub model_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Calls whose reply did not report its usage (their tokens are an
    /// estimate, included above).
    pub calls_without_usage: u64,
}

/// The largest value a usage column holds: `i64::MAX`. A count is stored
/// clamped to it ([`usage_column`]), and the stores' `add_usage` and
/// `usage` saturate at it rather than overflow (an overflowing SQL sum
/// would fail the `usage` report and the daily limit's check for every
/// principal).
pub const USAGE_COLUMN_MAX: i64 = i64::MAX;

/// A count as a usage column's value, clamped to [`USAGE_COLUMN_MAX`].
pub fn usage_column(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(USAGE_COLUMN_MAX)
}

/// Model tokens of one principal on one UTC day, summed over its tasks.
/// Kept apart from task records: a task's record and files expire, what
/// it cost does not.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UsageRow {
    pub principal: String,
    pub day: String,
    pub tasks: u64,
    pub model_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub calls_without_usage: u64,
}

impl UsageRow {
    /// A row from a `usage` query's columns: principal, day, then the
    /// sums `[tasks, model_calls, input_tokens, output_tokens,
    /// calls_without_usage]` as the database returns them (a negative
    /// sum, which no write makes, reads as 0).
    pub fn from_sums(principal: String, day: String, sums: [i64; 5]) -> Self {
        let [
            tasks,
            model_calls,
            input_tokens,
            output_tokens,
            calls_without_usage,
        ] = sums.map(|n| u64::try_from(n).unwrap_or(0));
        Self {
            principal,
            day,
            tasks,
            model_calls,
            input_tokens,
            output_tokens,
            total_tokens: input_tokens.saturating_add(output_tokens),
            calls_without_usage,
        }
    }
}

/// The UTC day of `ms` (milliseconds since the Unix epoch): `YYYY-MM-DD`.
pub fn utc_day(ms: i64) -> String {
    iso8601(ms)[..10].to_string()
}

/// What [`TaskStore::enqueue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Accepted,
    /// The owner already has its limit of queued and running tasks.
    OwnerAtLimit,
    /// The queue is full.
    QueueFull,
}

/// A queued task a server claimed: its record (now running there) and the
/// request it carries (`{tool, arguments, traceparent}`).
#[derive(Debug, Clone)]
pub struct Claimed {
    pub record: TaskRecord,
    pub request: Value,
}

/// A task store failure, saying what it was doing and where.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be opened or checked at startup.
    #[error("task store {location}: {reason}")]
    Open { location: String, reason: String },
    /// A read or write failed.
    #[error("task store: {0}")]
    Query(String),
    /// The store's directory or file cannot be written now (read-only,
    /// permission denied, no space): not damage. The server keeps serving
    /// and opens the store at the next task call once it can be written.
    #[error(
        "task store {location} cannot be written ({reason}): make the directory {dir} writable for this \
         server (or free space there), or set WARDEN_ARTIFACTS_DIR to a writable directory; task tools \
         work again as soon as it is, without a restart"
    )]
    Unwritable {
        location: String,
        dir: String,
        reason: String,
    },
}

impl StoreError {
    /// Whether an operating-system error means "cannot write here now"
    /// (read-only file system, permission, no space or quota) rather than
    /// a damaged store.
    pub fn is_unwritable_errno(errno: i32) -> bool {
        use nix::libc::{EACCES, EDQUOT, ENOSPC, EPERM, EROFS};
        [EACCES, EROFS, EPERM, ENOSPC, EDQUOT].contains(&errno)
    }

    /// [`StoreError::Unwritable`] for the store file `location` in `dir`.
    pub fn unwritable(location: &std::path::Path, reason: impl std::fmt::Display) -> Self {
        let dir = location.parent().unwrap_or(location);
        Self::Unwritable {
            location: location.display().to_string(),
            dir: dir.display().to_string(),
            reason: reason.to_string(),
        }
    }
}

impl From<StoreError> for warden_core::error::GuardError {
    fn from(error: StoreError) -> Self {
        warden_core::error::GuardError::failed(error.to_string())
    }
}

/// Opens the shared task store `WARDEN_DATABASE_URL` names (PostgreSQL:
/// `warden_cluster::postgres::Opener`). The app hands one to the runner
/// (`TaskRunner::with_store_opener`); without one a `postgres://` URL is
/// refused naming the missing `postgres` feature
/// ([`crate::records::open_database`]).
#[async_trait::async_trait]
pub trait StoreOpener: Send + Sync + std::fmt::Debug {
    /// Connects to the store at `url` (a `postgres://` or `postgresql://`
    /// URL) and brings its schema up to date. Errors name the URL without
    /// its password.
    async fn open(&self, url: &str) -> Result<std::sync::Arc<dyn TaskStore>, StoreError>;
}

/// The records of every task, in a database.
///
/// Implementations keep each method one transaction, and never let
/// [`TaskStore::end`] or [`TaskStore::note`] change a record that has
/// already ended: the first ending wins.
#[async_trait::async_trait]
pub trait TaskStore: Send + Sync + std::fmt::Debug {
    /// Adds a new running record.
    async fn create(&self, record: &TaskRecord) -> Result<(), StoreError>;

    /// Sets a running task's latest progress note.
    async fn note(&self, id: &str, message: &str, at_ms: i64) -> Result<(), StoreError>;

    /// Ends a running task; `false` if it was not running (unknown, or
    /// already ended: its first ending stands).
    async fn end(&self, id: &str, ending: &Ending) -> Result<bool, StoreError>;

    /// The record of `id`, whoever owns it.
    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError>;

    /// `owner`'s newest `limit` records, newest first.
    async fn list(&self, owner: &Principal, limit: usize) -> Result<Vec<TaskRecord>, StoreError>;

    /// Cancels a queued task (no server took it yet) or one waiting for
    /// the person; `false` if it was neither.
    async fn cancel_queued(&self, id: &str, ending: &Ending) -> Result<bool, StoreError>;

    /// Stops a task running on `node` on a question for the person: it
    /// leaves the server (no node, no lease, no slot) and waits, with
    /// `resume` (what its resumption carries, the question included) under
    /// its request's `resume` key and `message` as its status; `false` if
    /// it was not running on `node`. A task that was not queued has no
    /// request: `request` is kept as its request then. With `until_ms`
    /// (when its question can no longer be answered: a stateless request's
    /// `requestState` expires) the task expires then, so an abandoned
    /// question does not hold its owner's task limit.
    #[allow(clippy::too_many_arguments)]
    async fn pause(
        &self,
        id: &str,
        node: &str,
        request: &Value,
        resume: &Value,
        message: &str,
        at_ms: i64,
        until_ms: Option<i64>,
    ) -> Result<bool, StoreError>;

    /// The request a waiting task keeps, and when it started waiting
    /// (its `updated_ms`); `None` unless it waits.
    async fn waiting(&self, id: &str) -> Result<Option<(Value, i64)>, StoreError>;

    /// Answers a waiting task, provided it still waits since `since_ms`
    /// (so of two answers to one question, the first wins); `false`
    /// otherwise. `resume` goes under its request's `resume` key; with
    /// `queue` the task is queued again, without it (a partial answer:
    /// other questions stay open) it keeps waiting, its `updated_ms` now
    /// `at_ms`.
    async fn answer(
        &self,
        id: &str,
        since_ms: i64,
        resume: &Value,
        at_ms: i64,
        queue: bool,
    ) -> Result<bool, StoreError>;

    /// Every running record (to find those whose server died).
    async fn running(&self) -> Result<Vec<TaskRecord>, StoreError>;

    /// Adds a queued task with the request to run, unless its owner
    /// already has `owner_limit` queued, running or waiting tasks (a task
    /// waiting for the person's answer counts: it may resume any time;
    /// `None`: no limit) or `queue_limit` tasks are queued; the check and the insert
    /// are one transaction.
    async fn enqueue(
        &self,
        record: &TaskRecord,
        request: &Value,
        owner_limit: Option<u64>,
        queue_limit: u64,
    ) -> Result<Enqueued, StoreError>;

    /// Takes the oldest queued task: it becomes running on `node` under a
    /// lease until `lease_until_ms`. No two servers ever claim one task.
    async fn claim(
        &self,
        node: &str,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> Result<Option<Claimed>, StoreError>;

    /// Extends the leases of the tasks `ids` that `node` runs to
    /// `lease_until_ms`; returns the ids it still holds (a task missing
    /// from them was ended elsewhere, and its server stops it). A task
    /// recorded on `node` but not among `ids` (a claim whose answer was
    /// lost) is not renewed: its lease lapses.
    async fn renew(&self, node: &str, ids: &[String], lease_until_ms: i64)
    -> Result<Vec<String>, StoreError>;

    /// Ends the running tasks whose lease ran out before `now_ms` and that
    /// put no side effect on record with `ending` (`interrupted`); returns
    /// their ids.
    async fn expire_leases(&self, now_ms: i64, ending: &Ending) -> Result<Vec<String>, StoreError>;

    /// Records a destructive call of task `id` (see
    /// `warden_calls::events::ledger`): its start, status `unknown`, or —
    /// for a `call_id` already recorded — how it settled. Durable when it
    /// returns. A store whose tasks' directories can always be read by
    /// whoever ends them (the embedded one) keeps none.
    async fn put_side_effect(
        &self,
        _id: &str,
        _call_id: &str,
        _side_effect: &SideEffect,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// The running tasks whose lease ran out before `now_ms` and that put
    /// side effects on record (none on a store that keeps none), each with
    /// the last `limit` of them and the counts of all: each is then ended
    /// with [`TaskStore::end_lapsed`].
    async fn lapsed_with_side_effects(&self, _now_ms: i64, _limit: usize) -> Result<Vec<Lapsed>, StoreError> {
        Ok(Vec::new())
    }

    /// Ends task `id` with `ending` if it still runs under a lease that
    /// ran out before `now_ms`; `false` if it does not (renewed, or ended
    /// first by another server).
    async fn end_lapsed(&self, id: &str, now_ms: i64, ending: &Ending) -> Result<bool, StoreError>;

    /// How many tasks are queued.
    async fn queued(&self) -> Result<u64, StoreError>;

    /// Asks the server running task `id` to cancel it (`tasks/cancel` sent
    /// to another server process); `false` if it is not running.
    async fn request_cancel(&self, id: &str) -> Result<bool, StoreError>;

    /// The ids of the running tasks of server `node` whose cancellation
    /// was asked for.
    async fn cancels_for(&self, node: &str) -> Result<Vec<String>, StoreError>;

    /// Removes the ended records whose TTL ran out by `now_ms`; returns
    /// their ids and locations so their files can go too.
    async fn take_expired(&self, now_ms: i64) -> Result<Vec<(String, String)>, StoreError>;

    /// Removes one record (its files were removed by retention).
    async fn delete(&self, id: &str) -> Result<(), StoreError>;

    /// How many records there are.
    async fn count(&self) -> Result<u64, StoreError>;
    /// Adds `entry` to its task's total for its day (one row per task and
    /// day; calls add up, never overwrite).
    async fn add_usage(&self, entry: &UsageEntry) -> Result<(), StoreError>;
    /// Tokens per principal and day from `from_day` (`YYYY-MM-DD`) on, of
    /// `owner` only when given; ordered by day, then principal.
    async fn usage(&self, owner: Option<&Principal>, from_day: &str) -> Result<Vec<UsageRow>, StoreError>;

    /// Whether the store answers now (`/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Woken (`notify_waiters`) when another server may have queued a task
    /// or asked for a cancellation, so claimers and the heartbeat need not
    /// wait for their next poll; `None` when the store has no such signal
    /// (SQLite: poll). A hint only: wake-ups can be lost (a reconnecting
    /// listener), so callers keep polling too.
    fn wake(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        None
    }

    /// Closes the store at shutdown (SQLite folds its journal back into
    /// the database file). Later calls fail.
    async fn close(&self) {}
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// `ms` since the epoch as an ISO 8601 UTC timestamp (MCP `createdAt`).
pub fn iso8601(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}
