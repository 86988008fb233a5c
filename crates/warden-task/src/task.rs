//! A task in progress ([`Task`]) and its verbs: write its files, start its
//! script worker, give a run its context, wait for the person, finish.
//! Dropped unfinished (its request went away), it records itself
//! `cancelled`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::limits::{MAX_RESULT_ARTIFACTS, MAX_RESULT_VALUE_BYTES};
use crate::phases::Phase;
use crate::records::Records;
use crate::running::Running;
use crate::{
    ANSWER_FILE, ArtifactRef, FUNCTION_CALLS_FILE, TaskResult, TaskStatus, VALUE_FILE, result_dir,
    task_receipt,
};
use warden_calls::artifacts::{ArtifactStore, OUTPUTS_DIR};
use warden_calls::events::{Events, Origin};
use warden_calls::executor::{Admitted, Executor};
use warden_calls::limits::MAX_INLINE_RESULT_BYTES;
use warden_core::error::{GuardError, TaskError, TaskErrorKind};
use warden_core::future::BoxFuture;
use warden_sandbox::process::Rlimits;
use warden_script::host::progress::Progress;
use warden_script::host::session::{Context, Session, StartError, WorkerFacts};
use warden_script::limits::SCRIPT_MAX_OUTPUT_BYTES;

/// A task in progress: its slot, directory and event log.
pub struct Task {
    pub(crate) _slot: Admitted,
    pub(crate) executor: Arc<Executor>,
    /// Forks the task's script worker.
    pub(crate) script_workers: warden_sandbox::zygote::Zygote,
    /// How long a stateless request's question can be answered
    /// (`TaskLimits::input_state_ttl`): a task it started waits no longer.
    pub(crate) input_state_ttl: Duration,
    /// Whether `result.json` was written; if not when the task is dropped
    /// (its request future was dropped), a `cancelled` record is written.
    pub(crate) recorded: bool,
    pub(crate) store: ArtifactStore,
    pub(crate) running: Arc<Running>,
    pub(crate) records: Arc<Records>,
    /// Whether the client asked for it as an MCP task: it outlives its
    /// request, and a server stopping under it ends it `interrupted`.
    pub(crate) detached: bool,
    /// The `task.worker` span; ended by [`Task::finish`].
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
    pub(crate) started: std::time::Instant,
    /// Where its time went, for its `task_finished` event.
    pub(crate) phases: crate::phases::Phases,
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
            TaskErrorKind::Cancelled,
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
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn abandon<'a>(mut self, error: &'a GuardError) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let result = TaskResult::failure(
                TaskStatus::Failed,
                TaskErrorKind::Storage,
                format!("the task could not be set up: {}", error.message),
            )
            .with_task_id(&self.id)
            .with_error(TaskError::new(TaskErrorKind::Storage, error.message.as_str()));
            let bytes = result.to_bytes();
            let _ = self.store.write_result(&self.id, &bytes);
            let _ = self.records.end(&self.id, &result).await;
            self.recorded = true;
            warden_calls::telemetry::end(&self.trace, "failed", Some("storage"));
        })
    }

    /// `origin` with this task's span as the parent of what happens next.
    pub fn origin_under(&self, origin: &Origin) -> Origin {
        let mut child = origin.clone();
        child.trace = self.trace.clone();
        child
    }

    /// Writes `path` (relative to the task directory) whole, as every
    /// task file is written (see `ArtifactStore::write_task_file`).
    pub fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), GuardError> {
        self.store.write_task_file(&self.id, path, bytes)
    }

    /// Starts the task's script worker, running `meanwhile` while it
    /// confines itself (see [`Session::start`]). A sandbox layer it lacks
    /// is a `sandbox_degraded` event and a `tracing` warning at every
    /// start; under `WARDEN_SANDBOX=strict` it is an error (the worker is
    /// killed).
    pub async fn start_worker<R>(
        &self,
        origin: &Origin,
        meanwhile: impl FnOnce() -> R,
    ) -> Result<(Session, R), StartError> {
        let mode = warden_sandbox::policy::mode()?;
        let rlimits = Rlimits::for_call(&self.executor.limits().worker, self.timeout.as_secs());
        let (session, meanwhile) = Session::start(
            self.executor.clone(),
            &self.script_workers,
            &self.dir,
            rlimits,
            self.deadline,
            meanwhile,
        )
        .await?;
        self.phases.mark(Phase::WorkerStart);
        self.events.emit(
            origin,
            "task_worker_started",
            json!({"task_id": self.id, "pid": session.pid(), "sandbox": session.layers}),
        );
        let missing = session.layers.missing();
        if !missing.is_empty() {
            tracing::warn!(task_id = %self.id, missing = %missing.join(", "), "script sandbox degraded");
            self.events.emit(
                origin,
                "sandbox_degraded",
                json!({"task_id": self.id, "missing": missing, "strict": mode == warden_sandbox::policy::Mode::Strict}),
            );
        }
        match warden_sandbox::policy::refusal(mode, &session.layers) {
            Some(reason) => Err(StartError::Refused(reason)),
            None => Ok((session, meanwhile)),
        }
    }

    /// The session context for this task's worker runs.
    pub fn context<'a>(
        &'a self,
        origin: &'a Origin,
        cancel: &'a CancellationToken,
        progress: Option<&'a Progress>,
    ) -> Context<'a> {
        Context {
            executor: &self.executor,
            store: &self.store,
            events: &self.events,
            origin,
            task_id: &self.id,
            cancel,
            progress,
        }
    }

    /// Completes `result` with the task's common fields, saves
    /// function_calls.json and result.json, and records the worker's end.
    /// The result is capped to [`MAX_INLINE_RESULT_BYTES`]; if result.json
    /// cannot be saved, the task fails with the reason.
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn finish<'a>(
        mut self,
        origin: &'a Origin,
        mut result: TaskResult,
        mut facts: WorkerFacts,
    ) -> BoxFuture<'a, TaskResult> {
        Box::pin(async move {
            self.phases.mark(Phase::Run);
            if self.detached && self.running.stopping() && result.status == TaskStatus::Cancelled {
                // Nobody cancelled it: the server stopped under it.
                let summary = "interrupted: the server stopped before the task finished";
                result.status = TaskStatus::Failed;
                result.task_type = Some("failed".into());
                result.summary = Some(summary.into());
                result.error = Some(TaskError::new(TaskErrorKind::Interrupted, summary).into());
            }
            result.request_id = Some(origin.request_id.clone());
            result.task_id = Some(self.id.clone());
            result.task_dir = Some(result_dir(&self.id));
            result.function_calls = Some(facts.calls.made);
            result.sandbox = Some(facts.layers);
            result.duration_ms = Some(self.started.elapsed().as_secs_f64() * 1000.0);
            let id = self.id.clone();
            self.list_outputs(&id, &mut result);
            if let Some(calls_sha256) = facts.calls_sha256 {
                result.receipt = Some(task_receipt::build(
                    &self.dir,
                    self.executor.registry().provenance(),
                    self.model.clone(),
                    self.limits,
                    facts.calls.made,
                    calls_sha256,
                    std::mem::take(&mut facts.approvals),
                ));
            }
            self.cap_result(&id, &mut result);
            // The session streamed the calls; a task whose worker never
            // started still gets its (empty) list.
            if !self.dir.join(FUNCTION_CALLS_FILE).exists() {
                let _ = self.store.write_task_file(&self.id, FUNCTION_CALLS_FILE, b"[]\n");
            }
            let saved = result.to_bytes();
            // Saved here, then copied to the object store when there is one:
            // either failing fails the task with the reason, so no record
            // claims a result other nodes cannot read.
            let stored = self
                .store
                .write_result(&self.id, &saved)
                .map_err(|e| format!("the task ran but its record could not be saved: {}", e.message))
                .and_then(|()| {
                    self.store.upload_task(&self.id).map_err(|e| {
                        format!(
                            "the task ran but its files could not be copied to the object store: {}",
                            e.message
                        )
                    })
                });
            if let Err(summary) = stored {
                let failed = TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Storage, summary);
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
                let _ = self.store.write_result(&self.id, &result.to_bytes());
            }
            // The worker exited while the files were written (see
            // `WorkerExit`); its record says how.
            let exit_status = match facts.exit.take() {
                Some(exit) => Some(exit.wait().await),
                None => None,
            };
            self.events.emit(
                origin,
                "task_worker_finished",
                json!({"task_id": self.id, "pid": facts.pid, "status": result.status,
                       "exit_status": exit_status}),
            );
            self.phases.mark(Phase::Files);
            if let Err(error) = self.records.end(&self.id, &result).await {
                tracing::warn!(task_id = %self.id, %error, "the task's record could not be ended; result.json has its result");
            }
            self.recorded = true;
            self.phases.mark(Phase::Record);
            self.events.emit(
                origin,
                "task_finished",
                json!({"task_id": self.id, "status": result.status, "phases_ms": self.phases.to_json()}),
            );
            let kind = result.error_kind().map(TaskErrorKind::as_str);
            warden_calls::telemetry::end(&self.trace, result.status.as_str(), kind);
            self.events.flush_task_log();
            result
        })
    }

    /// Stops `task` on the question its `book` holds: keeps what resumes it
    /// (`journal`, the answers so far, the question) in its record, which
    /// waits `input_required` holding no server and no slot, and in its
    /// directory (`waiting.json`, to read); returns the answer for the
    /// request that ran it. `Err` with the reason when it cannot wait (the
    /// journal is over its limit, the record cannot be written): the task
    /// then fails with it.
    pub(crate) async fn pause(
        &mut self,
        origin: &Origin,
        book: &warden_core::approval::Book,
        journal: Result<Vec<Value>, warden_script::host::journal::JournalError>,
    ) -> Result<GuardError, PauseError> {
        let carried = book.carry(journal?);
        let Some(pending) = carried.pending.clone() else {
            return Err(PauseError::NoQuestion);
        };
        let resume = serde_json::to_value(&carried).map_err(|e| PauseError::Unkept(e.to_string()))?;
        let _ = self.store.commit_task_file(
            &self.id,
            warden_calls::artifacts::WAITING_FILE,
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
        self.events.emit(
            origin,
            "task_waiting",
            json!({"task_id": self.id, "key": pending.key, "guard": pending.guard,
                   "arguments_sha256": pending.arguments_sha256, "plan": pending.plan,
                   "journaled_calls": carried.journal.len()}),
        );
        // A task that was not queued (a stateless request's) waits only as
        // long as its requestState can be answered.
        let wait = book.request().map(|_| self.input_state_ttl);
        let request = book.request().cloned().unwrap_or_else(|| json!({}));
        match self
            .records
            .pause(&self.id, &request, &resume, &message, wait)
            .await
        {
            Ok(true) => {}
            Ok(false) => return Err(PauseError::NotHere),
            Err(error) => return Err(PauseError::Store(error.to_string())),
        }
        // Its record waits: nothing to end when the task is dropped.
        self.recorded = true;
        warden_calls::telemetry::end(&self.trace, "input_required", None);
        self.events.flush_task_log();
        Ok(GuardError::new(
            warden_core::error::codes::INPUT_REQUIRED,
            message,
        ))
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
