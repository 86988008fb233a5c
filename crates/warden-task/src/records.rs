//! The task runner's side of the task store: opening it, writing each
//! task's record as it starts, progresses and ends, answering who may see
//! a record, and removing what has expired.
//!
//! The store is opened once, lazily (commands that never run a task never
//! touch it) or in the background at server start ([`Records::open`]); a
//! store that cannot open is the error of each task tool, naming its path
//! and the fix, never a dead server. Opening also settles what a
//! dead server left: a running record whose server is gone ([`warden_calls::node`]) takes
//! the result its directory holds, or is ended `failed`/`interrupted`. A
//! new store imports the ended tasks of the directories already there, so
//! upgrading (or moving a damaged store aside) loses no history.
//!
//! MCP tasks go through a queue in the store: [`Records::submit`] writes a
//! `queued` record with the request to run; a server with a free task slot
//! [`Records::claim`]s the oldest, under a lease it renews while the task
//! runs ([`Records::heartbeat`]). A server that stops renewing loses its
//! tasks: any server's heartbeat ends them `interrupted`; none is run
//! twice.
//!
//! A store that cannot be written when the server starts (a read-only or
//! full artifacts directory) does not stop it: task calls are refused
//! with [`StoreError::Unwritable`] (naming the directory and
//! `WARDEN_ARTIFACTS_DIR`) and each one tries to open it again, so the
//! first call after it became writable opens it. Background chores (the
//! heartbeat, the sweep timer, the claimer) never open it themselves.
//!
//! An ending the store refuses (disk full, database gone) is not lost: it
//! is kept in memory ([`Records::end`]) and written again at every
//! heartbeat and before every read, with a `result.json` if the task
//! directory lacks one; reads show it meanwhile. So a finished task
//! reaches its terminal state as soon as the store takes writes again; if
//! the process dies first, the next start settles the record from its
//! directory (`interrupted`).
//!
//! Retention: a task is kept `ttl` after its creation (the client may ask
//! for less, never more than `WARDEN_TASKS_MAX_AGE_HOURS`); then its record
//! and its directory go together, record first. Expiry runs on access (at
//! most once per [`crate::limits::TASK_SWEEP_MIN_INTERVAL`]) and on a timer
//! while serving; directories removed by the artifact store's own budgets
//! lose their records at the next access.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::OnceCell;

use super::result::SavedHead;
use super::store::{
    Claimed, Ending, Enqueued, Lapsed, State, StoreError, StoreOpener, TaskRecord, TaskStore, now_ms,
};
use super::{TaskResult, TaskStatus};
use crate::limits::{MAX_RESULT_SIDE_EFFECTS, TASK_SWEEP_MIN_INTERVAL};
use warden_calls::artifacts::ArtifactStore;
use warden_calls::events::recovered;
use warden_calls::node;
use warden_calls::tenant::Principal;
use warden_core::error::{TaskError, TaskErrorKind};

/// The records of the tasks under one artifacts directory.
pub struct Records {
    artifacts: ArtifactStore,
    store: OnceCell<Arc<dyn TaskStore>>,
    /// Opens the shared store `WARDEN_DATABASE_URL` names; set by the app
    /// before the store is first opened ([`Records::with_opener`]), `None`
    /// in a build without one (the URL is then refused, see
    /// [`open_database`]).
    opener: Option<Arc<dyn StoreOpener>>,
    /// This server process, as records name it.
    node: String,
    /// Longest (and default) TTL.
    max_ttl: Duration,
    /// How long a claim holds without renewal.
    lease: Duration,
    /// Most tasks queued at once.
    queue: usize,
    last_sweep: Mutex<Option<Instant>>,
    last_renewal: Mutex<Option<Instant>>,
    /// Endings the store refused, by task id: inserted by [`Records::end`]
    /// when its write fails, removed once the record is ended and the
    /// task directory has its `result.json` ([`Records::flush_endings`]).
    /// Bounded by the tasks that end while the store is unwritable: no
    /// new task starts then (its record cannot be created), so at most
    /// the task slots' worth, each result capped at
    /// [`warden_calls::limits::MAX_INLINE_RESULT_BYTES`].
    pending: Mutex<HashMap<String, Pending>>,
}

/// An ending the store has not taken yet, and the result it came from
/// (for a `result.json` the task directory may lack).
#[derive(Debug, Clone)]
struct Pending {
    ending: Ending,
    result: TaskResult,
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records").field("node", &self.node).finish()
    }
}

impl Records {
    /// Records of tasks in `artifacts`, kept at most `max_ttl` (the
    /// executor's `tasks_max_age`), with the lease and queue of `limits`.
    pub fn new(
        artifacts: ArtifactStore,
        max_ttl: std::time::Duration,
        limits: &crate::limits::TaskLimits,
    ) -> Self {
        Self {
            artifacts,
            store: OnceCell::new(),
            opener: None,
            node: node::Node::this().name(),
            max_ttl,
            lease: limits.task_lease,
            queue: limits.task_queue,
            last_sweep: Mutex::new(None),
            last_renewal: Mutex::new(None),
            pending: Mutex::default(),
        }
    }

    /// Opens the shared store (`WARDEN_DATABASE_URL`) with `opener`.
    pub fn with_opener(mut self, opener: Arc<dyn StoreOpener>) -> Self {
        self.opener = Some(opener);
        self
    }

    /// A hint that the shared store changed (a task queued, a cancel
    /// asked) on another node; `None` for a store without one.
    pub fn wake(&self) -> Option<Arc<tokio::sync::Notify>> {
        self.opened().and_then(|store| store.wake())
    }

    /// The store if it is open; never opens it (for background chores,
    /// which must not retry an unwritable store on a timer).
    pub fn opened(&self) -> Option<&Arc<dyn TaskStore>> {
        self.store.get()
    }

    /// This server process, as records name it.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// When a lease taken or renewed now runs out.
    fn lease_until(&self) -> i64 {
        now_ms().saturating_add(i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX))
    }

    /// The store, opened (and settled, see the module docs) on first use.
    pub async fn open(&self) -> Result<&Arc<dyn TaskStore>, StoreError> {
        self.store
            .get_or_try_init(|| async {
                let (store, import) = match database_url() {
                    Some(url) => (open_database(&url, self.opener.as_deref()).await?, false),
                    None => {
                        // Creates the artifacts directory (0700) too.
                        let path = self.artifacts.root().join(super::store::sqlite::FILE_NAME);
                        let (sqlite, created) = super::store::sqlite::SqliteStore::open(&path).await?;
                        (Arc::new(sqlite) as Arc<dyn TaskStore>, created)
                    }
                };
                // Directories a dead server left without result.json get an
                // `interrupted` one; records follow their directories.
                for id in self.artifacts.dead_tasks() {
                    self.end_dead(&id);
                }
                self.artifacts.request_prune();
                // A new embedded store takes in the directories already
                // here; a shared database does not (a node's directory is
                // its scratch space).
                if import {
                    self.import(store.as_ref()).await?;
                }
                for record in store.running().await? {
                    self.settle(store.as_ref(), &record).await?;
                }
                Ok(store)
            })
            .await
    }

    /// The TTL of a new task: `requested_ms` within 1 s and the maximum,
    /// or the maximum.
    pub fn ttl_ms(&self, requested_ms: Option<u64>) -> i64 {
        let max = i64::try_from(self.max_ttl.as_millis()).unwrap_or(i64::MAX);
        requested_ms
            .map(|ms| {
                i64::try_from(ms)
                    .unwrap_or(i64::MAX)
                    .clamp(crate::limits::MIN_TASK_TTL_MS, max)
            })
            .unwrap_or(max)
    }

    /// Writes the record of a task that just started.
    #[allow(clippy::too_many_arguments)]
    pub async fn create(
        &self,
        id: &str,
        owner: &Principal,
        tool: &str,
        location: &std::path::Path,
        ttl_ms: i64,
        detached: bool,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let record = TaskRecord {
            id: id.to_string(),
            owner: owner.clone(),
            tool: tool.to_string(),
            state: State::Running,
            summary: None,
            status_message: None,
            error: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms,
            location: location.display().to_string(),
            detached,
            node: self.node.clone(),
            lease_until_ms: self.lease_until(),
        };
        self.open().await?.create(&record).await
    }

    /// Queues task `id` for `owner`, asked for as an MCP task: `request`
    /// (`{tool, arguments, traceparent}`) is what the claiming server runs.
    /// Refused when the owner already has `owner_limit` tasks queued or
    /// running anywhere, or the queue is full.
    pub async fn submit(
        &self,
        id: &str,
        owner: &Principal,
        tool: &str,
        ttl_ms: i64,
        request: &Value,
        owner_limit: Option<u64>,
    ) -> Result<Enqueued, StoreError> {
        let now = now_ms();
        let record = TaskRecord {
            id: id.to_string(),
            owner: owner.clone(),
            tool: tool.to_string(),
            state: State::Queued,
            summary: None,
            status_message: Some("queued".into()),
            error: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms,
            location: self.artifacts.root().join(id).display().to_string(),
            detached: true,
            node: String::new(),
            lease_until_ms: 0,
        };
        let queue = u64::try_from(self.queue).unwrap_or(u64::MAX);
        self.open()
            .await?
            .enqueue(&record, request, owner_limit, queue)
            .await
    }

    /// Takes the oldest queued task, if any, to run here under a lease.
    /// Never opens the store: the claimer polls, and an unwritable
    /// store is opened by the next task call instead.
    pub async fn claim(&self) -> Result<Option<Claimed>, StoreError> {
        let Some(store) = self.opened() else {
            return Ok(None);
        };
        store.claim(&self.node, now_ms(), self.lease_until()).await
    }

    /// Stops task `id`, running here, on a question for the person (see
    /// [`crate::store::TaskStore::pause`]), for at most `wait` when given;
    /// `false` if it was not running here.
    pub async fn pause(
        &self,
        id: &str,
        request: &Value,
        resume: &Value,
        message: &str,
        wait: Option<std::time::Duration>,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let until = wait.map(|wait| now.saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX)));
        self.open()
            .await?
            .pause(id, &self.node, request, resume, message, now, until)
            .await
    }

    /// The request a waiting task keeps, and since when it waits.
    pub async fn waiting(&self, id: &str) -> Result<Option<(Value, i64)>, StoreError> {
        self.open().await?.waiting(id).await
    }

    /// Answers a waiting task with its answered `resume`, if it still
    /// waits since `since_ms`: queued again when `queue`, else (a partial
    /// answer) still waiting (see [`crate::store::TaskStore::answer`]).
    pub async fn answer(
        &self,
        id: &str,
        since_ms: i64,
        resume: &Value,
        queue: bool,
    ) -> Result<bool, StoreError> {
        self.open()
            .await?
            .answer(id, since_ms, resume, now_ms(), queue)
            .await
    }

    /// Ends a queued task `cancelled` before any server took it, or one
    /// waiting for the person; `false` if it was neither.
    pub async fn cancel_queued(&self, id: &str) -> Result<bool, StoreError> {
        let ending = Ending {
            status: TaskStatus::Cancelled,
            summary: "cancelled before it started, or while it waited for the person's answer".into(),
            error: None,
            at_ms: now_ms(),
        };
        self.open().await?.cancel_queued(id, &ending).await
    }

    /// One beat of the store chores (see [`crate::limits::TASK_HEARTBEAT`]):
    /// renews this server's leases when a third of the lease has passed
    /// (returning the tasks it no longer holds, to be stopped), ends the
    /// tasks whose lease ran out anywhere, and returns the tasks here
    /// whose cancellation another server asked for.
    /// Writes the endings the store refused first. Never opens the store.
    pub async fn heartbeat(&self, running_here: &[String]) -> Beat {
        let mut beat = Beat::default();
        let Some(store) = self.opened() else {
            return beat;
        };
        self.flush_endings(store.as_ref()).await;
        if !running_here.is_empty() {
            let due = {
                let mut last = self.last_renewal.lock().unwrap_or_else(|p| p.into_inner());
                let due = last.is_none_or(|at| at.elapsed() >= self.lease / 3);
                if due {
                    *last = Some(Instant::now());
                }
                due
            };
            if due && let Ok(held) = store.renew(&self.node, running_here, self.lease_until()).await {
                beat.lost = running_here
                    .iter()
                    .filter(|id| !held.contains(id))
                    .cloned()
                    .collect();
            }
            beat.cancels = store.cancels_for(&self.node).await.unwrap_or_default();
        }
        let lapsed = Ending {
            at_ms: now_ms(),
            ..ending_of(&lease_lapsed())
        };
        let _ = store.expire_leases(now_ms(), &lapsed).await;
        let now = now_ms();
        if let Ok(found) = store.lapsed_with_side_effects(now, MAX_RESULT_SIDE_EFFECTS).await {
            for lapsed in found {
                self.end_lapsed(store.as_ref(), lapsed, now).await;
            }
        }
        beat
    }

    /// Ends a task whose lease ran out after it put side effects on record
    /// (the dead node's directory is out of reach): `interrupted`, naming
    /// them. As when a task ends, its files come first: a `result.json`
    /// (and a `function_calls.json` of the side effects) in a directory of
    /// its own here and, with a remote copy attached, there too, so that a
    /// failed `tasks/get` on any node carries them in
    /// `error.data.side_effects`, as after a restart on one machine; then
    /// the record. A directory this server already has for it (the dead
    /// server used the same one) gets only a `result.json` it lacks. A
    /// task whose lease was renewed or that another server ended first
    /// meanwhile keeps its record, and the directory made here goes; the
    /// copy in the bucket stays (the same files from the server that ended
    /// it, or replaced by the task's own when it ends). Files
    /// that cannot be written are logged; the record still names the side
    /// effects in its summary and error.
    async fn end_lapsed(&self, store: &dyn TaskStore, lapsed: Lapsed, now: i64) {
        let result = lapsed_with_side_effects(&lapsed);
        let artifacts = self.artifacts.clone();
        let (id, bytes) = (lapsed.id.clone(), result.to_bytes());
        let kept = tokio::task::spawn_blocking(move || {
            let made = artifacts.create_task_with_id(&lapsed.owner, &lapsed.id).is_ok();
            let written = (|| {
                if made {
                    let calls = warden_script::host::calls::recovered(None, &lapsed.side_effects, false);
                    artifacts.write_task_file(
                        &lapsed.id,
                        warden_script::host::calls::FUNCTION_CALLS_FILE,
                        &calls,
                    )?;
                }
                artifacts.ensure_result(&lapsed.id, &bytes)?;
                artifacts.upload_task(&lapsed.id)
            })();
            (made, written)
        })
        .await;
        let made = match kept {
            Ok((made, Err(error))) => {
                tracing::warn!(
                    task_id = %id,
                    "the result of a task whose lease ran out was not kept as a file: {}",
                    error.message
                );
                made
            }
            Ok((made, Ok(()))) => made,
            Err(_) => false,
        };
        let ended = store.end_lapsed(&id, now, &ending_of(&result)).await;
        if made && !matches!(ended, Ok(true)) {
            let artifacts = self.artifacts.clone();
            let _ = tokio::task::spawn_blocking(move || artifacts.remove_directory(&id)).await;
        }
    }

    /// Ends a task's record from its result (`status`, `summary`, `error`),
    /// retrying a failed write for a few seconds (a database restarting)
    /// so that a finished task's result is not lost to a blip.
    ///
    /// An ending still refused after that is kept (see the module docs)
    /// and the error returned: the record ends when the store takes
    /// writes again, and reads show the ending meanwhile.
    pub async fn end(&self, id: &str, result: &TaskResult) -> Result<bool, StoreError> {
        let ending = ending_of(result);
        let ended = match self.open().await {
            Ok(store) => {
                // Each attempt may wait for a connection (a shared store's
                // acquire timeout): the window bounds them all.
                let until = tokio::time::Instant::now() + END_RETRY_WINDOW;
                let mut pause = Duration::from_millis(200);
                loop {
                    let attempt = tokio::time::timeout_at(until, store.end(id, &ending)).await;
                    match attempt.unwrap_or_else(|_| {
                        Err(StoreError::Query(format!(
                            "the task store did not take the ending within {} s",
                            END_RETRY_WINDOW.as_secs()
                        )))
                    }) {
                        Err(StoreError::Query(_)) if tokio::time::Instant::now() + pause < until => {
                            tokio::time::sleep(pause).await;
                            pause *= 2;
                        }
                        other => break other,
                    }
                }
            }
            Err(error) => Err(error),
        };
        if ended.is_err() {
            let pending = Pending {
                ending,
                result: result.clone(),
            };
            lock(&self.pending).insert(id.to_string(), pending);
        }
        ended
    }

    /// Writes the endings the store refused earlier, each with a
    /// `result.json` if its task directory has none (the task's own write
    /// failed too); an ending stays until both are written.
    async fn flush_endings(&self, store: &dyn TaskStore) {
        let pending: Vec<(String, Pending)> = lock(&self.pending)
            .iter()
            .map(|(id, p)| (id.clone(), p.clone()))
            .collect();
        for (id, pending) in pending {
            let mut result = pending.result.clone();
            if result.task_id.is_none() {
                result.task_id = Some(id.clone());
            }
            let bytes = result.to_bytes();
            let file_done = self.artifacts.ensure_result(&id, &bytes).is_ok();
            let record_done = store.end(&id, &pending.ending).await.is_ok();
            if file_done && record_done {
                lock(&self.pending).remove(&id);
            }
        }
    }

    /// `record` as it stands once its refused ending is written (the
    /// truth, while the store cannot take it).
    fn with_pending(&self, mut record: TaskRecord) -> TaskRecord {
        if record.state != State::Running {
            return record;
        }
        if let Some(pending) = lock(&self.pending).get(&record.id) {
            record.state = State::Ended(pending.ending.status);
            record.summary = Some(pending.ending.summary.clone());
            record.error = pending.ending.error.clone();
            record.updated_ms = pending.ending.at_ms;
        }
        record
    }

    /// `owner`'s record of `id`: `None` when there is none, or it is
    /// another principal's (the same answer, so nobody learns whether
    /// someone else's task exists), or it expired.
    pub async fn get(&self, owner: &Principal, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let store = self.open().await?;
        self.flush_endings(store.as_ref()).await;
        self.sweep().await;
        let Some(mut record) = store.get(id).await? else {
            return Ok(None);
        };
        if &record.owner != owner {
            return Ok(None);
        }
        if record.state != State::Running && record.expires_ms() <= now_ms() {
            return Ok(None);
        }
        if record.state == State::Running && self.settle(store.as_ref(), &record).await? {
            record = store.get(id).await?.unwrap_or(record);
        }
        Ok(Some(self.with_pending(record)))
    }

    /// Adds a model call's tokens to its task's usage (see
    /// [`crate::store::TaskStore::add_usage`]).
    pub async fn add_usage(&self, entry: &crate::store::UsageEntry) -> Result<(), StoreError> {
        self.open().await?.add_usage(entry).await
    }

    /// Tokens per principal and day from `from_day` on (`owner`'s only
    /// when given).
    pub async fn usage(
        &self,
        owner: Option<&Principal>,
        from_day: &str,
    ) -> Result<Vec<crate::store::UsageRow>, StoreError> {
        self.open().await?.usage(owner, from_day).await
    }

    /// Asks the server process running task `id` to cancel it; `false`
    /// if it is not running.
    pub async fn request_cancel(&self, id: &str) -> Result<bool, StoreError> {
        self.open().await?.request_cancel(id).await
    }

    /// `owner`'s newest `limit` records.
    pub async fn list(&self, owner: &Principal, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        let store = self.open().await?;
        self.flush_endings(store.as_ref()).await;
        self.sweep().await;
        let records = store.list(owner, limit).await?;
        Ok(records.into_iter().map(|r| self.with_pending(r)).collect())
    }

    /// Removes expired records with their directories (at most once per
    /// [`TASK_SWEEP_MIN_INTERVAL`]) and the records of directories
    /// retention removed (always). Best effort: a failure waits for the
    /// next sweep.
    /// Never opens the store.
    pub async fn sweep(&self) {
        let Some(store) = self.opened() else {
            return;
        };
        for id in self.artifacts.take_pruned() {
            let _ = store.delete(&id).await;
        }
        {
            let mut last = self.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < TASK_SWEEP_MIN_INTERVAL) {
                return;
            }
            *last = Some(Instant::now());
        }
        if let Ok(expired) = store.take_expired(now_ms()).await {
            for (id, _location) in expired {
                self.artifacts.remove_task(&id);
            }
        }
    }

    /// Ends `record` if its server is gone: with the result its directory
    /// holds, or `failed`/`interrupted`. `true` if it was ended. Only for
    /// the embedded store: the process check means something on
    /// one machine only. On a shared database two nodes could carry the
    /// same host name (a duplicated `WARDEN_NODE_ID`, containers sharing a
    /// hostname), so there leases alone decide.
    async fn settle(&self, store: &dyn TaskStore, record: &TaskRecord) -> Result<bool, StoreError> {
        let shared = database_url().is_some();
        if shared || record.node == self.node || node::alive(&record.node) {
            return Ok(false);
        }
        let ending = match self.artifacts.task_facts(&record.id).1 {
            Some(saved) => ending_of_saved(saved),
            None => ending_of(&self.end_dead(&record.id)),
        };
        store.end(&record.id, &ending).await
    }

    /// Ends the directory of task `id`, whose server died under it:
    /// `interrupted`, naming every side effect it started (read back from
    /// its events.jsonl, see [`warden_calls::events::recovered`]), which its
    /// `function_calls.json` lists too; then its `result.json`, the commit.
    /// A task without a log of its own (a guard call run as an MCP task
    /// keeps one only when the guard is destructive) gets the plain
    /// `interrupted` result.
    fn end_dead(&self, id: &str) -> TaskResult {
        let mut result = interrupted().with_task_id(id);
        let Ok(log) = self.artifacts.open_task_file(id, "events.jsonl") else {
            let _ = self.artifacts.write_result(id, &result.to_bytes());
            return result;
        };
        let mut recovered = recovered::side_effects(log);
        let started = format!(
            "{} (side_effects lists the last {MAX_RESULT_SIDE_EFFECTS}, function_calls.json every one)",
            started_side_effects(&recovered.side_effects, &by_status(&recovered.side_effects))
        );
        let cut = if recovered.cut {
            "; its events.jsonl reached its cap, so calls after that are in the server's events.jsonl only"
        } else {
            ""
        };
        result.summary = Some(format!(
            "interrupted: the server running this task stopped before it finished; {started}{cut}"
        ));
        result.error = Some(
            TaskError::new(
                TaskErrorKind::Interrupted,
                format!(
                    "the server process that ran this task is gone; {started} (each is written to the task's events.jsonl before it runs and as it ends: status unknown means it started and may have taken effect){cut}; its other guard calls since it last paused may be missing from its files: the server's events.jsonl records each one (function_call_finished with this task_id)"
                ),
            )
            .into(),
        );
        if !recovered.side_effects.is_empty() {
            let calls = warden_script::host::calls::FUNCTION_CALLS_FILE;
            // A list too large to read whole is left as it is (the result
            // still names the side effects): never replaced by a shorter one.
            let existing = match self.artifacts.open_task_file(id, calls) {
                Ok(file) if file.metadata().is_ok_and(|m| m.len() > MAX_RECOVERED_CALLS_BYTES) => None,
                Ok(file) => {
                    let mut bytes = Vec::new();
                    file.take(MAX_RECOVERED_CALLS_BYTES)
                        .read_to_end(&mut bytes)
                        .ok()
                        .map(|_| Some(bytes))
                }
                Err(_) => Some(None),
            };
            if let Some(existing) = existing {
                let rewritten = warden_script::host::calls::recovered(
                    existing.as_deref(),
                    &recovered.side_effects,
                    recovered.cut,
                );
                let _ = self.artifacts.write_task_file(id, calls, &rewritten);
            }
            let listed = &mut recovered.side_effects;
            listed.drain(..listed.len().saturating_sub(MAX_RESULT_SIDE_EFFECTS));
            result.side_effects = Some(recovered.side_effects);
        }
        let _ = self.artifacts.write_result(id, &result.to_bytes());
        result
    }

    /// Records the ended tasks of the directories a new store finds.
    async fn import(&self, store: &dyn TaskStore) -> Result<(), StoreError> {
        for id in self.artifacts.task_ids() {
            let (Some(owner), Some(result)) = self.artifacts.task_facts(&id) else {
                continue;
            };
            let location = self.artifacts.root().join(&id);
            let created_ms = std::fs::symlink_metadata(&location)
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or_else(now_ms, |d| i64::try_from(d.as_millis()).unwrap_or(0));
            let ending = ending_of_saved(result);
            let record = TaskRecord {
                id: id.clone(),
                owner,
                tool: "unknown".into(),
                state: State::Running,
                summary: None,
                status_message: None,
                error: None,
                created_ms,
                updated_ms: created_ms,
                ttl_ms: self.ttl_ms(None),
                location: location.display().to_string(),
                detached: false,
                node: self.node.clone(),
                lease_until_ms: self.lease_until(),
            };
            store.create(&record).await?;
            store
                .end(
                    &id,
                    &Ending {
                        at_ms: created_ms,
                        ..ending
                    },
                )
                .await?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl warden_script::host::progress::TaskNotes for Records {
    /// Sets a running task's status message; best effort.
    async fn note(&self, id: &str, message: &str) {
        if let Ok(store) = self.open().await {
            let _ = store.note(id, message, now_ms()).await;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// `WARDEN_DATABASE_URL`, when set to something.
pub fn database_url() -> Option<String> {
    warden_core::config::var("WARDEN_DATABASE_URL").filter(|url| !url.trim().is_empty())
}

/// The shared task store `url` names (PostgreSQL), opened by `opener`;
/// without one (a build without the `postgres` feature) a `postgres://`
/// URL is an error naming that feature.
pub async fn open_database(
    url: &str,
    opener: Option<&dyn StoreOpener>,
) -> Result<Arc<dyn TaskStore>, StoreError> {
    let postgres = url.starts_with("postgres://") || url.starts_with("postgresql://");
    if postgres && let Some(opener) = opener {
        return opener.open(url).await;
    }
    Err(StoreError::Open {
        location: "WARDEN_DATABASE_URL".into(),
        reason: if postgres {
            "this build has no PostgreSQL support (cargo feature `postgres`)".into()
        } else {
            "not a postgres:// URL; write postgres://USER:PASSWORD@HOST:PORT/DATABASE, or unset it for the \
             embedded store in the artifacts directory"
                .into()
        },
    })
}

/// What a dead task's summary says of its side effects: how many, by
/// status, and the first few by name (the list itself is in its result
/// and its `function_calls.json`).
fn started_side_effects(side_effects: &[recovered::SideEffect], by_status: &BTreeMap<String, u64>) -> String {
    /// Side effects a summary names.
    const NAMED: usize = 5;
    let total: u64 = by_status.values().sum();
    if total == 0 {
        return "it had started no call of a destructive guard".into();
    }
    let counts: Vec<String> = by_status
        .iter()
        .map(|(status, n)| format!("{n} {status}"))
        .collect();
    let mut named: Vec<String> = side_effects
        .iter()
        .take(NAMED)
        .map(|s| format!("{} ({})", s.function, s.status))
        .collect();
    let listed = u64::try_from(named.len()).unwrap_or(u64::MAX);
    if total > listed {
        named.push(format!("… {} more", total - listed));
    }
    format!(
        "it had started {total} call(s) of destructive guards, {}: {}",
        counts.join(", "),
        named.join(", ")
    )
}

/// Side effects counted by status.
fn by_status(side_effects: &[recovered::SideEffect]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for side_effect in side_effects {
        *counts.entry(side_effect.status.clone()).or_default() += 1;
    }
    counts
}

/// Bytes of a dead task's `function_calls.json` read to append its side
/// effects: 16 MiB, far above what [`warden_script::limits::DEFAULT_CALLS_RECORDED`]
/// records take; a longer file is left as it is (its records are never
/// replaced by fewer), and only the result names the side effects.
const MAX_RECOVERED_CALLS_BYTES: u64 = 16 * 1024 * 1024;

/// How long a task's ending is tried before its answer goes out without
/// it (kept, and written by a later heartbeat): 6 s, the attempts 0.2 s,
/// 0.4 s, … apart. A bound on time, not on attempts: each attempt on a
/// shared store that is down waits for a connection (its acquire timeout,
/// 5 s), so five attempts held a task's answer for half a minute.
const END_RETRY_WINDOW: Duration = Duration::from_secs(6);

/// What one heartbeat found for this server.
#[derive(Debug, Default)]
pub struct Beat {
    /// Tasks running here whose lease was lost (ended elsewhere): stop them.
    pub lost: Vec<String>,
    /// Tasks running here whose cancellation another server asked for.
    pub cancels: Vec<String>,
}

/// The result of a task whose server stopped renewing its lease.
fn lease_lapsed() -> TaskResult {
    TaskResult::failure(
        TaskStatus::Failed,
        TaskErrorKind::Interrupted,
        "interrupted: the server running this task stopped renewing its lease (it died or lost the task store)",
    )
    .with_error(TaskError::interrupted(
        "the server running this task stopped renewing its lease",
    ))
}

/// The result of a task whose lease ran out after it put side effects on
/// record in the shared store: `interrupted`, naming them as
/// [`Records::end_dead`] names those it reads from a directory (the dead
/// node's is out of reach here).
fn lapsed_with_side_effects(lapsed: &Lapsed) -> TaskResult {
    let started = started_side_effects(&lapsed.side_effects, &lapsed.by_status);
    let mut result = lease_lapsed().with_task_id(&lapsed.id);
    result.summary = Some(format!(
        "interrupted: the server running this task stopped renewing its lease (it died or lost the task store); {started} (side_effects lists the last {MAX_RESULT_SIDE_EFFECTS})"
    ));
    result.error = Some(
        TaskError::new(
            TaskErrorKind::Interrupted,
            format!(
                "the server running this task stopped renewing its lease; {started} (each was recorded in the shared task store before it ran and as it ended: status unknown means it started and may have taken effect); its other records are in that server's artifacts directory"
            ),
        )
        .into(),
    );
    result.side_effects = Some(lapsed.side_effects.clone());
    result
}

/// The result of a task whose server died before it finished.
pub fn interrupted() -> TaskResult {
    TaskResult::failure(
        TaskStatus::Failed,
        TaskErrorKind::Interrupted,
        "interrupted: the server running this task stopped before it finished",
    )
    .with_error(TaskError::interrupted(
        "the server process that ran this task is gone",
    ))
}

/// A record's ending from a task result.
fn ending_of(result: &TaskResult) -> Ending {
    Ending {
        status: result.status,
        summary: result.summary.clone().unwrap_or_default(),
        error: result.error.as_ref().map(super::ResultError::to_stored),
        at_ms: now_ms(),
    }
}

/// A record's ending from a `result.json` read back from a task
/// directory (see [`SavedHead`]).
fn ending_of_saved(saved: Value) -> Ending {
    let head = SavedHead::of(&saved);
    Ending {
        status: head.status(),
        summary: head.summary(),
        error: head.error(),
        at_ms: now_ms(),
    }
}

#[cfg(test)]
mod tests;
