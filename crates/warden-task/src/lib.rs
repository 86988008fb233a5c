//! Warden's tasks: script runs with a task directory, events and a checked
//! result, their records and stores, and batches. Apps use the `warden`
//! facade.
//!
//! `run_script` and the coding agent both come here. A task holds a task
//! slot (separate from call slots), gets `<artifacts>/task_…/`, runs in a
//! sandboxed script worker (`warden_script::host::session`) and ends with `result.json`,
//! written by the server after the final answer passed [`contract`]: a
//! [`TaskResult`] ([`result`]), built and capped as a type.
//!
//! Records never lie: `result.json` is written atomically and durably, and
//! a failed write fails the task with the reason; a task whose request is
//! cancelled, or whose future is dropped, or that is still running when
//! the server shuts down ([`TaskRunner::shutdown`]) is recorded
//! `cancelled`. A result returned to the client stays under
//! [`MAX_INLINE_RESULT_BYTES`]: the artifact list, `value` and an oversized
//! final answer are capped, with pointers to where the rest is.
//!
//! Every task has a record in the task store ([`store`], through
//! [`records`]): a task a request waits for gets one when it begins; a
//! task asked for as an MCP task was queued with one and is claimed by a
//! server with a free slot (`service`: the queue, leases, the heartbeat,
//! draining). When there is an object store, a finished task's files are
//! copied there before its record ends, so any node can answer for it.

pub mod batch;
mod claimed_call;
pub mod contract;
mod kept;
pub mod limits;
pub mod records;
pub mod replay;
pub mod result;
pub mod running;
mod service;
pub mod store;
pub mod task_receipt;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::limits::{MAX_RESULT_ARTIFACTS, MAX_RESULT_VALUE_BYTES, TaskLimits};
use records::Records;
use running::Running;
use warden_core::error::{GuardError, TaskError, TaskErrorKind};
use warden_executor::artifacts::{ArtifactStore, OUTPUTS_DIR};
use warden_executor::events::{Events, Origin};
use warden_executor::executor::sandbox::Rlimits;
use warden_executor::executor::{Admitted, Executor, Slots};
use warden_executor::limits::MAX_INLINE_RESULT_BYTES;
use warden_script::host::progress::Progress;
use warden_script::host::session::{Budget, Context, RunEnd, Session, StartError};
use warden_script::limits::SCRIPT_MAX_OUTPUT_BYTES;
use warden_script::protocol::RunOutcome;

#[cfg(feature = "agent")]
pub use result::ModelFailure;
pub use result::{ArtifactRef, ResultError, TaskResult, TokenUsage};

pub use warden_script::host::calls::FUNCTION_CALLS_FILE;
pub use warden_script::host::session::WorkerFacts;

/// Runs tasks, and serves them (the queue, leases, cancellation: see
/// `service`). Built-ins reach it through
/// the MCP layer's `Runtime` (in the `warden` crate), not as their context.
pub struct TaskRunner {
    pub executor: Arc<Executor>,
    pub store: ArtifactStore,
    exe: std::path::PathBuf,
    /// Task slots: one permit per running task, taken (after a bounded
    /// wait, see [`warden_executor::executor::Slots`]) before its directory is
    /// created and released when the task's [`Task`] is dropped. A bound
    /// principal holds at most `tasks_per_principal` of them at once,
    /// direct tasks and tasks claimed from the queue alike (see
    /// [`TaskRunner::seat_claimed`]).
    task_slots: Slots,
    /// The cancellation tokens of the running tasks, so that
    /// [`TaskRunner::shutdown`] can cancel them and wait for their records.
    running: Arc<Running>,
    /// The task records (see [`records`]).
    pub records: Arc<Records>,
    /// Started by the first task (or by [`TaskRunner::start_records`]).
    heartbeat: std::sync::Once,
    /// Notified when a task is queued here, so the claimer looks at once.
    pub submitted: Arc<tokio::sync::Notify>,
    /// Set when the server drains: it claims no more queued tasks (they
    /// wait for another server, or for this one's restart).
    draining: std::sync::atomic::AtomicBool,
    /// The runner's part of the server's limits (see [`TaskRunner::limits`]).
    limits: TaskLimits,
}

/// A task in progress: its slot, directory and event log.
pub struct Task {
    _slot: Admitted,
    /// Whether `result.json` was written; if not when the task is dropped
    /// (its request future was dropped), a `cancelled` record is written.
    recorded: bool,
    store: ArtifactStore,
    running: Arc<Running>,
    records: Arc<Records>,
    /// Whether the client asked for it as an MCP task: it outlives its
    /// request, and a server stopping under it ends it `interrupted`.
    detached: bool,
    /// The `task.worker` span; ended by [`TaskRunner::finish`].
    pub trace: opentelemetry::Context,
    pub id: String,
    pub dir: std::path::PathBuf,
    pub events: Events,
    pub deadline: Instant,
    pub timeout: Duration,
    /// The model writing its scripts (a coding task), for its receipt.
    pub model: Option<String>,
    /// The limits its scripts run under, for its receipt (a replay runs
    /// under them): `run_script`'s unless the runner sets others.
    pub limits: task_receipt::RunLimits,
    started: std::time::Instant,
}

impl Drop for Task {
    fn drop(&mut self) {
        self.store.end_task(&self.id);
        if self.recorded {
            self.running.remove(&self.id);
            return;
        }
        let result = TaskResult::failure(
            TaskStatus::Cancelled,
            "the request ended before the task finished; the task was cancelled",
        )
        .with_task_id(&self.id)
        .with_error(TaskError::new(
            TaskErrorKind::Cancelled,
            "the task's request went away",
        ));
        let bytes = result.to_bytes();
        let _ = self.store.write_result(&self.id, &bytes);
        // The record is written before the task leaves the running set,
        // so a shutdown waiting for that set waits for the record too.
        let (records, running, id) = (self.records.clone(), self.running.clone(), self.id.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let _ = records.end(&id, &result).await;
                    running.remove(&id);
                });
            }
            Err(_) => running.remove(&id),
        }
    }
}

impl Task {
    /// Records the task `failed` because its directory could not be set
    /// up, then lets it go (its slot and registration end on drop).
    pub async fn abandon(mut self, error: &GuardError) {
        let result = TaskResult::failure(
            TaskStatus::Failed,
            format!("the task could not be set up: {}", error.message),
        )
        .with_task_id(&self.id)
        .with_error(TaskError::new(TaskErrorKind::Storage, error.message.as_str()));
        let bytes = result.to_bytes();
        let _ = self.store.write_result(&self.id, &bytes);
        let _ = self.records.end(&self.id, &result).await;
        self.recorded = true;
        warden_executor::telemetry::end(&self.trace, "failed", Some("storage"));
    }

    /// `origin` with this task's span as the parent of what happens next.
    pub fn origin_under(&self, origin: &Origin) -> Origin {
        let mut child = origin.clone();
        child.trace = self.trace.clone();
        child
    }
}

impl TaskRunner {
    pub fn new(
        executor: Arc<Executor>,
        store: ArtifactStore,
        exe: std::path::PathBuf,
        limits: TaskLimits,
    ) -> Self {
        let store = store.with_limits(executor.limits());
        let calls = executor.limits();
        let records = Arc::new(Records::new(store.clone(), calls.tasks_max_age, &limits));
        let task_slots = Slots::new(
            "task",
            limits.max_concurrent_tasks,
            calls.admission_queue,
            calls.admission_wait,
        )
        .per_principal(
            limits.tasks_per_principal,
            "its task limit (WARDEN_TASKS_PER_PRINCIPAL)".into(),
        );
        Self {
            executor,
            store,
            exe,
            task_slots,
            running: Arc::default(),
            records,
            heartbeat: std::sync::Once::new(),
            submitted: Arc::default(),
            draining: std::sync::atomic::AtomicBool::new(false),
            limits,
        }
    }

    /// The limits the runner enforces (its part of the server's limits;
    /// the executor's are [`Executor::limits`]).
    pub fn limits(&self) -> &TaskLimits {
        &self.limits
    }

    /// Opens the shared task store (`WARDEN_DATABASE_URL`) with `opener`
    /// (the app's, e.g. `warden_cluster::postgres::Opener`). Called before
    /// the runner is shared: it replaces the records, which nothing else
    /// holds yet.
    pub fn with_store_opener(mut self, opener: Arc<dyn store::StoreOpener>) -> Self {
        let max_ttl = self.executor.limits().tasks_max_age;
        self.records = Arc::new(Records::new(self.store.clone(), max_ttl, &self.limits).with_opener(opener));
        self
    }

    /// Takes a request of the principal's rate and a task slot (within
    /// its task limit), and creates the task directory, owned by
    /// `origin.principal`, and its record; `cancel` is the request's
    /// token, cancelled by [`TaskRunner::shutdown`] too. A detached task
    /// (`progress` says so) tells its id through `progress` once its
    /// record exists.
    pub async fn begin(
        &self,
        origin: &mut Origin,
        timeout: Duration,
        cancel: &CancellationToken,
        progress: Option<&Progress>,
    ) -> Result<Task, GuardError> {
        self.start_heartbeat();
        // Its receipt names the build: hashed while the task runs.
        warden_core::receipt::prefetch_build_id();
        // A claimed MCP task: its id, record (running here) and slot exist
        // already; its rate was counted when it was queued.
        let claim = progress.and_then(Progress::take_claim);
        let detached = claim.is_some();
        let (slot, id, dir) = match claim {
            Some((id, slot)) => match self.store.create_task_with_id(&origin.principal, &id) {
                Ok(dir) => (slot, id, dir),
                Err(error) => {
                    let result = TaskResult::failure(
                        TaskStatus::Failed,
                        format!("the task could not be set up: {}", error.message),
                    )
                    .with_error(TaskError::new(TaskErrorKind::Storage, error.message.as_str()));
                    let _ = self.records.end(&id, &result).await;
                    return Err(error);
                }
            },
            None => {
                self.executor.take_rate(&origin.principal).map_err(|f| f.error)?;
                let slot = self
                    .task_slots
                    .admit(&origin.principal, cancel)
                    .await
                    .map_err(|f| f.error)?;
                let (id, dir) = self.store.create_task(&origin.principal)?;
                (slot, id, dir)
            }
        };
        let started = std::time::Instant::now();
        origin.task_id = Some(id.clone());
        let events = self.executor.events().with_task_log(&dir);
        events.emit(
            origin,
            "task_created",
            json!({"task_id": id, "detached": detached}),
        );
        let registry = registry_snapshot(&self.executor, origin).to_string();
        let trace = warden_executor::telemetry::start(
            "task.worker",
            opentelemetry::trace::SpanKind::Internal,
            &origin.trace,
            vec![
                opentelemetry::KeyValue::new("warden.task_id", id.clone()),
                opentelemetry::KeyValue::new("warden.node", warden_executor::node::name()),
            ],
        );
        let task = Task {
            trace,
            _slot: slot,
            recorded: false,
            store: self.store.clone(),
            running: self.running.clone(),
            records: self.records.clone(),
            detached,
            id,
            dir,
            events,
            deadline: Instant::now() + timeout,
            timeout,
            model: None,
            limits: task_receipt::RunLimits::script(timeout),
            started,
        };
        // A claimed task's record exists; a task a request waits for gets one now.
        let created = if detached {
            Ok(())
        } else {
            let ttl_ms = self.records.ttl_ms(None);
            self.records
                .create(
                    &task.id,
                    &origin.principal,
                    &origin.tool,
                    &task.dir,
                    ttl_ms,
                    false,
                )
                .await
        };
        if let Err(error) = created {
            // No record: the directory alone would be a task nobody can see.
            let error = GuardError::from(error);
            let mut task = task;
            task.recorded = true;
            let id = task.id.clone();
            drop(task);
            self.store.remove_task(&id);
            return Err(error);
        }
        // Running here from now on: its record exists, so the heartbeat
        // renews its lease (a task it cannot find in the store is taken
        // for lost and cancelled).
        self.running.insert(&task.id, cancel, detached);
        if let Err(error) = self
            .store
            .write_task_file(&task.id, "registry.json", registry.as_bytes())
        {
            task.abandon(&error).await;
            return Err(error);
        }
        Ok(task)
    }

    /// Starts the task's script worker. A sandbox layer it lacks is a
    /// `sandbox_degraded` event and a `tracing` warning at every start;
    /// under `WARDEN_SANDBOX=strict` it is an error (the worker is killed).
    pub async fn start_worker(&self, task: &Task, origin: &Origin) -> Result<Session, StartError> {
        let mode = warden_sandbox::policy::mode()?;
        let rlimits = Rlimits::for_call(&self.executor.limits().worker, task.timeout.as_secs());
        let session = Session::start(
            self.executor.clone(),
            &self.exe,
            &task.dir,
            rlimits,
            task.deadline,
        )
        .await?;
        task.events.emit(
            origin,
            "task_worker_started",
            json!({"task_id": task.id, "pid": session.pid(), "sandbox": session.layers}),
        );
        let missing = session.layers.missing();
        if !missing.is_empty() {
            tracing::warn!(task_id = %task.id, missing = %missing.join(", "), "script sandbox degraded");
            task.events.emit(
                origin,
                "sandbox_degraded",
                json!({"task_id": task.id, "missing": missing, "strict": mode == warden_sandbox::policy::Mode::Strict}),
            );
        }
        match warden_sandbox::policy::refusal(mode, &session.layers) {
            Some(reason) => Err(StartError::Refused(reason)),
            None => Ok(session),
        }
    }

    /// The session context for `task`.
    pub fn context<'a>(
        &'a self,
        task: &'a Task,
        origin: &'a Origin,
        cancel: &'a CancellationToken,
        progress: Option<&'a Progress>,
    ) -> Context<'a> {
        Context {
            executor: &self.executor,
            store: &self.store,
            events: &task.events,
            origin,
            task_id: &task.id,
            cancel,
            progress,
        }
    }

    /// Completes `result` with the task's common fields, saves
    /// function_calls.json and result.json, and records the worker's end.
    /// The result is capped to [`MAX_INLINE_RESULT_BYTES`]; if result.json
    /// cannot be saved, the task fails with the reason.
    pub async fn finish(
        &self,
        mut task: Task,
        origin: &Origin,
        mut result: TaskResult,
        mut facts: WorkerFacts,
    ) -> TaskResult {
        if task.detached && self.running.stopping() && result.status == TaskStatus::Cancelled {
            // Nobody cancelled it: the server stopped under it.
            let summary = "interrupted: the server stopped before the task finished";
            result.status = TaskStatus::Failed;
            result.task_type = Some("failed".into());
            result.summary = Some(summary.into());
            result.error = Some(TaskError::new(TaskErrorKind::Interrupted, summary).into());
        }
        task.events.emit(
            origin,
            "task_worker_finished",
            json!({"task_id": task.id, "pid": facts.pid, "status": result.status,
                   "exit_status": facts.exit_status}),
        );
        result.request_id = Some(origin.request_id.clone());
        result.task_id = Some(task.id.clone());
        result.task_dir = Some(result_dir(&task.id));
        result.function_calls = Some(facts.calls.made);
        result.sandbox = Some(facts.layers);
        result.duration_ms = Some(task.started.elapsed().as_secs_f64() * 1000.0);
        self.list_outputs(&task.id, &mut result);
        if let Some(calls_sha256) = facts.calls_sha256 {
            result.receipt = Some(task_receipt::build(
                &task.dir,
                self.executor.registry().provenance(),
                task.model.clone(),
                task.limits,
                facts.calls.made,
                calls_sha256,
                std::mem::take(&mut facts.approvals),
            ));
        }
        self.cap_result(&task.id, &mut result);
        // The session streamed the calls; a task whose worker never
        // started still gets its (empty) list.
        if !task.dir.join(FUNCTION_CALLS_FILE).exists() {
            let _ = self.store.write_task_file(&task.id, FUNCTION_CALLS_FILE, b"[]\n");
        }
        let saved = result.to_bytes();
        // Saved here, then copied to the object store when there is one:
        // either failing fails the task with the reason, so no record
        // claims a result other nodes cannot read.
        let stored = self
            .store
            .write_result(&task.id, &saved)
            .map_err(|e| format!("the task ran but its record could not be saved: {}", e.message))
            .and_then(|()| {
                self.store.upload_task(&task.id).map_err(|e| {
                    format!(
                        "the task ran but its files could not be copied to the object store: {}",
                        e.message
                    )
                })
            });
        if let Err(summary) = stored {
            let failed = TaskResult::failure(TaskStatus::Failed, summary.clone())
                .with_error(TaskError::new(TaskErrorKind::Storage, summary));
            result = TaskResult {
                request_id: result.request_id,
                task_id: result.task_id,
                task_dir: result.task_dir,
                function_calls: result.function_calls,
                sandbox: result.sandbox,
                duration_ms: result.duration_ms,
                ..failed
            };
            // A smaller record may still fit where the whole one did not.
            let _ = self.store.write_result(&task.id, &result.to_bytes());
        }
        if let Err(error) = self.records.end(&task.id, &result).await {
            tracing::warn!(task_id = %task.id, %error, "the task's record could not be ended; result.json has its result");
        }
        task.recorded = true;
        let kind = result.error_kind().map(TaskErrorKind::as_str);
        warden_executor::telemetry::end(&task.trace, result.status.as_str(), kind);
        task.events.flush_task_log();
        result
    }

    /// Runs a client-written script as a task and returns the task result.
    pub async fn run_script(
        &self,
        script: &str,
        timeout: Duration,
        origin: &mut Origin,
        cancel: CancellationToken,
        progress: Option<&Progress>,
    ) -> Result<TaskResult, GuardError> {
        let limits = task_receipt::RunLimits::script(timeout);
        self.run_scripts(&[script], limits, origin, cancel, progress)
            .await
    }

    /// Runs `scripts` one after another in one worker session (one
    /// persistent scope, as a coding task's blocks run) as one task, each
    /// saved as `agent_actions/action_NNN.rhai`, under `limits`: the
    /// task's deadline, and call budgets the scripts spend between them
    /// (as a coding task's blocks do). Stops after a run that did not
    /// finish or that gave a final answer; the last run's outcome is the
    /// result. One script is `run_script`; several are a replay.
    pub async fn run_scripts(
        &self,
        scripts: &[&str],
        limits: task_receipt::RunLimits,
        origin: &mut Origin,
        cancel: CancellationToken,
        progress: Option<&Progress>,
    ) -> Result<TaskResult, GuardError> {
        let mut task = self.begin(origin, limits.timeout(), &cancel, progress).await?;
        task.limits = limits;
        // A resumed task runs again: it no longer waits.
        let _ = std::fs::remove_file(task.dir.join(warden_executor::artifacts::WAITING_FILE));
        for (i, script) in scripts.iter().enumerate() {
            let path = format!("{}/action_{:03}.rhai", task_receipt::SCRIPTS_DIR, i + 1);
            if let Err(error) = self.store.write_task_file(&task.id, &path, script.as_bytes()) {
                task.abandon(&error).await;
                return Err(error);
            }
        }
        let origin: &Origin = origin;
        let mut facts = WorkerFacts::default();
        // What a run that stopped on a question carries (its journal).
        let mut paused = None;
        let end = match self.start_worker(&task, origin).await {
            Ok(mut session) => {
                let under_task = task.origin_under(origin);
                let ctx = self.context(&task, &under_task, &cancel, progress);
                let (mut door_calls, mut inline_calls) = (0u64, 0u64);
                let mut end = RunEnd::Crashed("no script to run".into());
                for script in scripts {
                    let budget = Budget {
                        calls_left: limits.door_calls.saturating_sub(door_calls),
                        count_pure: limits.inline_calls.is_some(),
                    };
                    if let Some(inline) = limits.inline_calls {
                        session.inline_calls_left = inline.saturating_sub(inline_calls);
                    }
                    end = session.run(&ctx, script, task.deadline, budget).await;
                    let go_on = match &end {
                        RunEnd::Finished(outcome) => {
                            door_calls = door_calls.saturating_add(outcome.door_calls);
                            inline_calls = inline_calls.saturating_add(outcome.inline_calls);
                            outcome.final_answer.is_none()
                        }
                        _ => false,
                    };
                    if !go_on {
                        break;
                    }
                }
                if matches!(end, RunEnd::Paused) {
                    paused = Some(session.carry());
                }
                facts = session.take_facts();
                facts.exit_status = Some(session.finish().await);
                end
            }
            Err(reason) => RunEnd::Crashed(reason.to_string()),
        };
        if let (Some(journal), Some(book)) = (paused, warden_core::ask::Reach::here().book().cloned()) {
            match self.pause(&mut task, origin, &book, journal).await {
                Ok(waiting) => return Err(waiting),
                Err(reason) => {
                    let reason = reason.to_string();
                    let result = TaskResult::failure(TaskStatus::Failed, reason.clone())
                        .with_error(TaskError::new(TaskErrorKind::Worker, reason));
                    return Ok(self.finish(task, origin, result, facts).await);
                }
            }
        }
        let result = match end {
            RunEnd::Finished(outcome) => {
                script_result(outcome, facts.calls.made, facts.calls.ok, task.deadline)
            }
            other => abnormal_end(other, task.timeout),
        };
        Ok(self.finish(task, origin, result, facts).await)
    }

    /// Stops `task` on the question its `book` holds: keeps what resumes it
    /// (`journal`, the answers so far, the question) in its record, which
    /// waits `input_required` holding no server and no slot, and in its
    /// directory (`waiting.json`, to read); returns the answer for the
    /// request that ran it. `Err` with the reason when it cannot wait (the
    /// journal is over its limit, the record cannot be written): the task
    /// then fails with it.
    async fn pause(
        &self,
        task: &mut Task,
        origin: &Origin,
        book: &warden_core::approval::Book,
        journal: Result<Vec<Value>, warden_script::host::journal::JournalError>,
    ) -> Result<GuardError, PauseError> {
        let carried = book.carry(journal?);
        let Some(pending) = carried.pending.clone() else {
            return Err(PauseError::NoQuestion);
        };
        let resume = serde_json::to_value(&carried).map_err(|e| PauseError::Unkept(e.to_string()))?;
        let _ = self.store.write_task_file(
            &task.id,
            warden_executor::artifacts::WAITING_FILE,
            &serde_json::to_vec_pretty(&resume).unwrap_or_default(),
        );
        let message = if pending.guard.is_empty() {
            format!(
                "input_required: waiting for the person to approve the plan ({})",
                pending.key
            )
        } else {
            format!(
                "input_required: waiting for the person to approve '{}' with arguments {} ({})",
                pending.guard,
                pending.arguments_sha256.as_deref().unwrap_or("?"),
                pending.key
            )
        };
        task.events.emit(
            origin,
            "task_waiting",
            json!({"task_id": task.id, "key": pending.key, "guard": pending.guard,
                   "arguments_sha256": pending.arguments_sha256, "plan": pending.plan,
                   "journaled_calls": carried.journal.len()}),
        );
        // A task that was not queued (a stateless request's) waits only as
        // long as its requestState can be answered.
        let wait = book.request().map(|_| self.limits.input_state_ttl);
        let request = book.request().cloned().unwrap_or_else(|| json!({}));
        match self
            .records
            .pause(&task.id, &request, &resume, &message, wait)
            .await
        {
            Ok(true) => {}
            Ok(false) => return Err(PauseError::NotHere),
            Err(error) => return Err(PauseError::Store(error.to_string())),
        }
        // Its record waits: nothing to end when the task is dropped.
        task.recorded = true;
        warden_executor::telemetry::end(&task.trace, "input_required", None);
        task.events.flush_task_log();
        Ok(GuardError::new(
            warden_core::error::codes::INPUT_REQUIRED,
            message,
        ))
    }

    /// Runs a batch as a detached task: the same batch as `run_batch`,
    /// with a task directory holding its result, for a client that asked
    /// for an MCP task. The task's timeout is the server maximum; each
    /// call keeps its own deadline.
    pub async fn run_batch_task(
        &self,
        input: crate::batch::RunBatchInput,
        origin: &mut Origin,
        cancel: CancellationToken,
        progress: Option<&Progress>,
    ) -> Result<TaskResult, GuardError> {
        let timeout = self.executor.limits().max_timeout;
        let mut task = self.begin(origin, timeout, &cancel, progress).await?;
        let under_task = task.origin_under(origin);
        let outcome = crate::batch::run(
            &self.executor,
            &self.store,
            &self.limits,
            input,
            &under_task,
            cancel,
        )
        .await;
        // A batch that stopped on its plan's question waits for the answer
        // (nothing ran); the resumed batch runs under the answer.
        if let Some(book) = warden_core::ask::Reach::here().book().cloned()
            && book.paused()
            && outcome.is_err()
        {
            let origin: &Origin = origin;
            match self.pause(&mut task, origin, &book, Ok(Vec::new())).await {
                Ok(waiting) => return Err(waiting),
                Err(reason) => {
                    let reason = reason.to_string();
                    let result = TaskResult::failure(TaskStatus::Failed, reason.clone())
                        .with_error(TaskError::new(TaskErrorKind::Worker, reason));
                    return Ok(self.finish(task, origin, result, WorkerFacts::default()).await);
                }
            }
        }
        let approvals = warden_core::ask::Reach::here()
            .book()
            .map(|book| book.answers())
            .unwrap_or_default();
        let result = match outcome {
            Ok(batch) => {
                let summary = format!(
                    "batch: {} succeeded, {} failed, {} skipped",
                    batch.counts.succeeded, batch.counts.failed, batch.counts.skipped
                );
                TaskResult {
                    summary: Some(summary),
                    ..TaskResult::batch(batch)
                }
            }
            Err(error) => TaskResult::failure(
                TaskStatus::Failed,
                format!("the batch was refused: {}", error.message),
            )
            .with_error(error),
        };
        let facts = WorkerFacts {
            approvals,
            ..WorkerFacts::default()
        };
        Ok(self.finish(task, origin, result, facts).await)
    }

    /// Sets `artifacts` to `[{name, path}]` of the first
    /// [`MAX_RESULT_ARTIFACTS`] files under outputs/ (from the store's
    /// memory of what the task wrote: no tree walk), with `artifacts_total`
    /// and, when cut, a note pointing to `list_artifacts`.
    fn list_outputs(&self, task_id: &str, result: &mut TaskResult) {
        let files = self.store.written(task_id).unwrap_or_default();
        let total = files.len();
        let listed: Vec<ArtifactRef> = files
            .into_iter()
            .take(MAX_RESULT_ARTIFACTS)
            .map(|(name, _)| ArtifactRef {
                path: format!("{OUTPUTS_DIR}/{name}"),
                name,
            })
            .collect();
        result.artifacts = Some(listed);
        result.artifacts_total = Some(total);
        if total > MAX_RESULT_ARTIFACTS {
            result.artifacts_note = Some(format!(
                "the first {MAX_RESULT_ARTIFACTS} of {total} artifacts are listed; call list_artifacts with this task_id for all of them"
            ));
        }
    }

    /// Keeps the result small: a `value` over [`MAX_RESULT_VALUE_BYTES`]
    /// moves to `value.json`, `output` is cut to [`SCRIPT_MAX_OUTPUT_BYTES`],
    /// and if the whole result is still over [`MAX_INLINE_RESULT_BYTES`]
    /// the final answer's summary, metrics and assumptions move to
    /// `answer.json`.
    fn cap_result(&self, task_id: &str, result: &mut TaskResult) {
        let value_bytes = serde_json::to_vec(&result.value).map(|v| v.len()).unwrap_or(0);
        if value_bytes > MAX_RESULT_VALUE_BYTES {
            let bytes = serde_json::to_vec_pretty(&result.value).unwrap_or_default();
            let saved = self.store.write_task_file(task_id, VALUE_FILE, &bytes);
            result.value = Some(Value::Null);
            result.value_bytes = Some(value_bytes);
            result.value_file = Some(match saved {
                Ok(()) => VALUE_FILE.to_string(),
                Err(error) => format!("not saved: {}", error.message),
            });
            result.value_note = Some(format!(
                "value is {value_bytes} bytes, over the {MAX_RESULT_VALUE_BYTES}-byte inline limit; read {VALUE_FILE} with read_artifact"
            ));
        }
        if let Some(output) = &mut result.output
            && output.len() > SCRIPT_MAX_OUTPUT_BYTES
        {
            output.truncate(char_floor(output, SCRIPT_MAX_OUTPUT_BYTES));
            result.output_truncated = Some(true);
        }
        let size = result.size();
        if size > MAX_INLINE_RESULT_BYTES {
            let answer = json!({"summary": result.summary, "metrics": result.metrics,
                                "assumptions": result.assumptions});
            let bytes = serde_json::to_vec_pretty(&answer).unwrap_or_default();
            let saved = self.store.write_task_file(task_id, ANSWER_FILE, &bytes);
            let mut summary = result.summary.take().unwrap_or_default();
            summary.truncate(char_floor(&summary, 4096));
            result.summary = Some(summary);
            result.metrics = Some(Default::default());
            result.assumptions = Some(Vec::new());
            result.answer_file = Some(match saved {
                Ok(()) => ANSWER_FILE.to_string(),
                Err(error) => format!("not saved: {}", error.message),
            });
            result.answer_note = Some(format!(
                "the final answer made the result {size} bytes, over {MAX_INLINE_RESULT_BYTES}; its full summary, metrics and assumptions are in {ANSWER_FILE}"
            ));
        }
        // Long artifact names and a full output can still add up: list
        // fewer artifacts (list_artifacts has them all), then cut output.
        while result.size() > MAX_INLINE_RESULT_BYTES {
            let listed = result.artifacts.as_ref().map(Vec::len).unwrap_or(0);
            if listed > 0 {
                if let Some(list) = &mut result.artifacts {
                    list.truncate(listed / 2);
                }
                let total = result
                    .artifacts_total
                    .map_or_else(|| "null".to_string(), |t| t.to_string());
                result.artifacts_note = Some(format!(
                    "the first {} of {total} artifacts are listed; call list_artifacts with this task_id for all of them",
                    listed / 2,
                ));
                continue;
            }
            let Some(output) = result.output.as_mut().filter(|o| !o.is_empty()) else {
                break;
            };
            output.truncate(char_floor(output, output.len() / 2));
            result.output_truncated = Some(true);
        }
    }
}

/// The largest char boundary of `text` at or below `at` (`at` may be past its end).
fn char_floor(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// Why a task that stopped on a question cannot wait for the person: the
/// task then fails with this reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PauseError {
    /// Its journal cannot be kept (over `MAX_JOURNAL_BYTES`, or unwritable).
    #[error(transparent)]
    Journal(#[from] warden_script::host::journal::JournalError),
    #[error("internal: the run paused with no question")]
    NoQuestion,
    #[error("the task's journal cannot be kept: {0}")]
    Unkept(String),
    #[error("the task could not wait for the person: its record is no longer running here")]
    NotHere,
    #[error("the task could not wait for the person: {0}")]
    Store(String),
}

/// The task directory as results name it (`task_dir`): relative to the
/// artifacts root (`WARDEN_ARTIFACTS_DIR`), where it is `<task_id>/`.
/// Never the server's absolute path: a remote client cannot use it (it
/// reads files with `read_artifact` or the `warden://artifacts/<task_id>/…`
/// resources) and should not learn the server's file layout from it.
pub fn result_dir(task_id: &str) -> String {
    task_id.to_string()
}

/// Where a `value` too large for the result is saved, in the task directory.
pub const VALUE_FILE: &str = "value.json";
/// Where a final answer too large for the result is saved.
pub const ANSWER_FILE: &str = "answer.json";

/// The result of a run that did not finish: deadline, cancellation, crash.
pub fn abnormal_end(end: RunEnd, timeout: Duration) -> TaskResult {
    match end {
        RunEnd::TimedOut => TaskResult::failure(
            TaskStatus::TimedOut,
            format!(
                "the task did not finish within {} s; its worker was killed",
                timeout.as_secs()
            ),
        )
        .with_error(TaskError::new(
            TaskErrorKind::Timeout,
            "the task deadline passed; the worker did not stop by itself and was killed",
        )),
        RunEnd::Cancelled => TaskResult::failure(
            TaskStatus::Cancelled,
            "the request was cancelled; the script worker was killed",
        ),
        RunEnd::Crashed(reason) => {
            let kind = if reason.starts_with("out of memory") {
                TaskErrorKind::Memory
            } else {
                TaskErrorKind::Worker
            };
            TaskResult::failure(TaskStatus::Failed, format!("the script worker failed: {reason}"))
                .with_error(TaskError::new(kind, reason))
        }
        RunEnd::Paused => TaskResult::failure(
            TaskStatus::Failed,
            "the run stopped on a question for the person, and this kind of task cannot wait for the answer",
        )
        .with_error(TaskError::new(
            TaskErrorKind::Worker,
            "only a detached run_script task waits for the person's answer",
        )),
        RunEnd::Finished(_) => {
            TaskResult::failure(TaskStatus::Failed, "internal: finished run passed as abnormal")
        }
    }
}

/// The task result of a script that ran to its end. A script stopped by
/// an error after the task `deadline` passed (a guard call cut short by
/// it) ended because of the deadline: `timed_out`, not `failed`.
fn script_result(outcome: RunOutcome, calls: usize, calls_ok: usize, deadline: Instant) -> TaskResult {
    let result = if let Some(error) = outcome.error {
        let status = if error.kind == TaskErrorKind::Timeout || Instant::now() >= deadline {
            TaskStatus::TimedOut
        } else {
            TaskStatus::Failed
        };
        TaskResult::failure(status, format!("{} error: {}", error.kind, error.message)).with_error(error)
    } else if let Some(answer) = &outcome.final_answer {
        match contract::check(answer, calls, calls_ok) {
            Ok(answer) => TaskResult::answer(&answer),
            Err(reason) => TaskResult::failure(
                TaskStatus::Failed,
                format!("the final answer broke the contract: {reason}"),
            ),
        }
    } else {
        let task_type = if calls_ok > 0 { "analysis" } else { "no_action" };
        TaskResult::ended(
            TaskStatus::Success,
            task_type,
            "script finished without calling final_answer; see value and output",
        )
    };
    TaskResult {
        value: Some(outcome.value),
        output: Some(outcome.output),
        output_truncated: Some(outcome.output_truncated),
        ..result
    }
}

/// How a task ended, as recorded in `result.json` (`status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Success,
    Failed,
    TimedOut,
    Cancelled,
}

impl TaskStatus {
    /// The word results, events and spans use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Names, modes and descriptions of the guards a task could call: those
/// its caller may call (the file is the caller's to read; a guard the
/// policy denies it is not named there either).
fn registry_snapshot(executor: &Executor, origin: &Origin) -> Value {
    let registry = executor.visible_to(origin);
    let guards = registry
        .iter()
        .map(|g| json!({"name": g.tool_name(), "mode": g.mode().as_str(), "description": g.description()}));
    let script_only = registry.script_functions().map(|f| {
        json!({"name": f.name, "mode": "script_only", "signature": f.signature, "description": f.description})
    });
    Value::Array(guards.chain(script_only).collect())
}
