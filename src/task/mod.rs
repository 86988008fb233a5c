//! Tasks: script runs with a task directory, events and a checked result.
//!
//! `run_script` and the coding agent both come here. A task holds a task
//! slot (separate from call slots), gets `<artifacts>/task_…/`, runs in a
//! sandboxed script worker ([`session`]) and ends with `result.json`,
//! written by the server after the final answer passed [`contract`].

pub mod calls;
pub mod contract;
pub(crate) mod door;
pub mod progress;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::artifacts::{ArtifactStore, OUTPUTS_DIR};
use crate::error::{GuardError, codes};
use crate::events::{Events, Origin};
use crate::executor::Executor;
use crate::executor::sandbox::Rlimits;
use crate::limits::DEFAULT_SCRIPT_DOOR_CALLS;
use crate::script::protocol::{Layers, RunOutcome};
use calls::CallCounts;
use progress::Progress;
use session::{Budget, Context, RunEnd, Session};

/// Every guard call of a task, in its directory (see [`calls`]).
pub const FUNCTION_CALLS_FILE: &str = "function_calls.json";

/// Runs tasks. Shared by the server's built-in tools.
pub struct TaskRunner {
    pub executor: Arc<Executor>,
    pub store: ArtifactStore,
    exe: std::path::PathBuf,
    /// Task slots: one permit per running task, taken before its directory
    /// is created and released when the task's [`Task`] is dropped.
    task_slots: Arc<Semaphore>,
    max_tasks: usize,
}

/// A task in progress: its slot, directory and event log.
pub struct Task {
    _slot: OwnedSemaphorePermit,
    /// The `task.worker` span; ended by [`TaskRunner::finish`].
    pub trace: opentelemetry::Context,
    pub id: String,
    pub dir: std::path::PathBuf,
    pub events: Events,
    pub deadline: Instant,
    pub timeout: Duration,
    started: std::time::Instant,
}

/// What the worker side of a task produced, for the result.
#[derive(Default)]
pub struct WorkerFacts {
    pub layers: Layers,
    pub calls: CallCounts,
    pub pid: u32,
    /// How the worker process ended ("exited with exit status: 0", "killed by SIGKILL").
    pub exit_status: Option<String>,
}

impl Task {
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
        max_tasks: usize,
    ) -> Self {
        Self {
            executor,
            store,
            exe,
            task_slots: Arc::new(Semaphore::new(max_tasks)),
            max_tasks,
        }
    }

    /// Takes a task slot and creates the task directory.
    pub fn begin(&self, origin: &mut Origin, timeout: Duration) -> Result<Task, GuardError> {
        let Ok(slot) = self.task_slots.clone().try_acquire_owned() else {
            return Err(GuardError::new(
                codes::SERVER_BUSY,
                format!(
                    "Server busy; retry later (all {} task slots in use)",
                    self.max_tasks
                ),
            ));
        };
        let started = std::time::Instant::now();
        let (id, dir) = self.store.create_task()?;
        origin.task_id = Some(id.clone());
        let events = self.executor.events().with_task_log(&dir);
        events.emit(origin, "task_created", json!({"task_id": id}));
        self.store.write_task_file(
            &id,
            "registry.json",
            registry_snapshot(&self.executor).to_string().as_bytes(),
        )?;
        let trace = crate::telemetry::start(
            "task.worker",
            opentelemetry::trace::SpanKind::Internal,
            &origin.trace,
            vec![opentelemetry::KeyValue::new("warden.task_id", id.clone())],
        );
        Ok(Task {
            trace,
            _slot: slot,
            id,
            dir,
            events,
            deadline: Instant::now() + timeout,
            timeout,
            started,
        })
    }

    /// Starts the task's script worker. A sandbox layer it lacks is a
    /// `sandbox_degraded` event and a `tracing` warning at every start;
    /// under `WARDEN_SANDBOX=strict` it is an error (the worker is killed).
    pub async fn start_worker(&self, task: &Task, origin: &Origin) -> Result<Session, String> {
        let mode = crate::script::layers::mode()?;
        let rlimits = Rlimits::for_call(self.executor.limits(), task.timeout.as_secs());
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
                json!({"task_id": task.id, "missing": missing, "strict": mode == crate::script::layers::Mode::Strict}),
            );
        }
        match crate::script::layers::refusal(mode, &session.layers) {
            Some(reason) => Err(reason),
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
    pub fn finish(&self, task: Task, origin: &Origin, mut result: Value, facts: WorkerFacts) -> Value {
        task.events.emit(
            origin,
            "task_worker_finished",
            json!({"task_id": task.id, "pid": facts.pid, "status": result["status"],
                   "exit_status": facts.exit_status}),
        );
        if let Value::Object(map) = &mut result {
            map.insert("request_id".into(), json!(origin.request_id));
            map.insert("task_id".into(), json!(task.id));
            map.insert("task_dir".into(), json!(task.dir.display().to_string()));
            map.insert("artifacts".into(), self.outputs(&task.id));
            map.insert("function_calls".into(), json!(facts.calls.made));
            map.insert("sandbox".into(), json!(facts.layers));
            map.insert(
                "duration_ms".into(),
                json!(task.started.elapsed().as_secs_f64() * 1000.0),
            );
        }
        // The session streamed the calls; a task whose worker never
        // started still gets its (empty) list.
        if !task.dir.join(FUNCTION_CALLS_FILE).exists() {
            let _ = self.store.write_task_file(&task.id, FUNCTION_CALLS_FILE, b"[]\n");
        }
        let status = result["status"].as_str().unwrap_or("failed").to_string();
        let kind = result["error"]["kind"].as_str().map(str::to_string);
        crate::telemetry::end(&task.trace, &status, kind.as_deref());
        let saved = serde_json::to_string_pretty(&result).unwrap_or_default();
        let _ = self
            .store
            .write_task_file(&task.id, "result.json", saved.as_bytes());
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
    ) -> Result<Value, GuardError> {
        let task = self.begin(origin, timeout)?;
        self.store
            .write_task_file(&task.id, "agent_actions/action_001.rhai", script.as_bytes())?;
        let origin: &Origin = origin;
        let mut facts = WorkerFacts::default();
        let end = match self.start_worker(&task, origin).await {
            Ok(mut session) => {
                let under_task = task.origin_under(origin);
                let ctx = self.context(&task, &under_task, &cancel, progress);
                let budget = Budget {
                    calls_left: DEFAULT_SCRIPT_DOOR_CALLS,
                    count_pure: false,
                };
                let end = session.run(&ctx, script, task.deadline, budget).await;
                facts = session.take_facts();
                facts.exit_status = Some(session.finish().await);
                end
            }
            Err(reason) => RunEnd::Crashed(reason),
        };
        let result = match end {
            RunEnd::Finished(outcome) => script_result(outcome, facts.calls.made, facts.calls.ok),
            other => abnormal_end(other, task.timeout),
        };
        Ok(self.finish(task, origin, result, facts))
    }

    /// `[{name, path}]` of the files under outputs/.
    fn outputs(&self, task_id: &str) -> Value {
        let files = self.store.files(task_id).unwrap_or_default();
        let prefix = format!("{OUTPUTS_DIR}/");
        Value::Array(
            files
                .into_iter()
                .filter_map(|(name, _)| {
                    name.strip_prefix(&prefix)
                        .map(|n| json!({"name": n, "path": name}))
                })
                .collect(),
        )
    }
}

/// The result of a run that did not finish: deadline, cancellation, crash.
pub fn abnormal_end(end: RunEnd, timeout: Duration) -> Value {
    match end {
        RunEnd::TimedOut => {
            let mut value = failure(
                "timed_out",
                format!(
                    "the task did not finish within {} s; its worker was killed",
                    timeout.as_secs()
                ),
            );
            value["error"] = json!({"kind": "timeout", "line": null, "column": null,
                "message": "the task deadline passed; the worker did not stop by itself and was killed"});
            value
        }
        RunEnd::Cancelled => failure(
            "cancelled",
            "the request was cancelled; the script worker was killed".into(),
        ),
        RunEnd::Crashed(reason) => {
            let kind = if reason.starts_with("out of memory") {
                "memory"
            } else {
                "worker"
            };
            let mut value = failure("failed", format!("the script worker failed: {reason}"));
            value["error"] = json!({"kind": kind, "message": reason, "line": null, "column": null});
            value
        }
        RunEnd::Finished(_) => failure("failed", "internal: finished run passed as abnormal".into()),
    }
}

/// The task result of a script that ran to its end.
fn script_result(outcome: RunOutcome, calls: usize, calls_ok: usize) -> Value {
    let mut result = if let Some(error) = &outcome.error {
        let status = if error.kind == "timeout" {
            "timed_out"
        } else {
            "failed"
        };
        let mut value = failure(status, format!("{} error: {}", error.kind, error.message));
        value["error"] = json!(error);
        value
    } else if let Some(answer) = &outcome.final_answer {
        match contract::check(answer, calls, calls_ok) {
            Ok(answer) => answer_json(&answer),
            Err(reason) => failure("failed", format!("the final answer broke the contract: {reason}")),
        }
    } else {
        let task_type = if calls_ok > 0 { "analysis" } else { "no_action" };
        json!({
            "status": "success", "task_type": task_type,
            "summary": "script finished without calling final_answer; see value and output",
            "metrics": {}, "assumptions": [],
        })
    };
    result["value"] = outcome.value;
    result["output"] = json!(outcome.output);
    result["output_truncated"] = json!(outcome.output_truncated);
    result
}

/// The result fields of an accepted final answer.
pub fn answer_json(answer: &contract::Answer) -> Value {
    json!({
        "status": answer.status, "task_type": answer.task_type, "summary": answer.summary,
        "metrics": answer.metrics, "assumptions": answer.assumptions,
    })
}

/// A failed task result with `summary` saying why.
pub fn failure(status: &str, summary: String) -> Value {
    json!({"status": status, "task_type": "failed", "summary": summary, "metrics": {}, "assumptions": []})
}

/// Names, modes and descriptions of the guards a task could call.
fn registry_snapshot(executor: &Executor) -> Value {
    let registry = executor.registry();
    let guards = registry
        .iter()
        .map(|g| json!({"name": g.tool_name(), "mode": g.mode().as_str(), "description": g.description()}));
    let script_only = registry.script_functions().map(|f| {
        json!({"name": f.name, "mode": "script_only", "signature": f.signature, "description": f.description})
    });
    Value::Array(guards.chain(script_only).collect())
}
