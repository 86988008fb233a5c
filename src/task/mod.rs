//! Tasks: a script run with a task directory, events and a checked result.
//!
//! `run_script` (and, in time, the coding agent) come here. A task holds a
//! task slot (separate from call slots), gets `<artifacts>/task_…/`, runs in
//! a sandboxed script worker ([`session`]) and ends with `result.json`
//! written by the server after the final answer passed [`contract`].

pub mod contract;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::artifacts::{ArtifactStore, OUTPUTS_DIR};
use crate::error::{GuardError, codes};
use crate::events::Origin;
use crate::executor::Executor;
use crate::executor::sandbox::Rlimits;
use crate::limits::DEFAULT_SCRIPT_DOOR_CALLS;
use session::{Context, RunEnd, Session};

/// Runs tasks. Shared by the server's built-in tools.
pub struct TaskRunner {
    pub executor: Arc<Executor>,
    pub store: ArtifactStore,
    exe: std::path::PathBuf,
    /// Task slots: one permit per running task, taken before its directory is
    /// created and released when the task's future ends.
    task_slots: Arc<Semaphore>,
    max_tasks: usize,
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

    /// Runs a client-written script as a task and returns the task result.
    pub async fn run_script(
        &self,
        script: &str,
        timeout: Duration,
        origin: &mut Origin,
        cancel: CancellationToken,
    ) -> Result<Value, GuardError> {
        let Ok(_slot) = self.task_slots.clone().try_acquire_owned() else {
            return Err(GuardError::new(
                codes::SERVER_BUSY,
                format!(
                    "Server busy; retry later (all {} task slots in use)",
                    self.max_tasks
                ),
            ));
        };
        let started = std::time::Instant::now();
        let deadline = Instant::now() + timeout;
        let (task_id, task_dir) = self.store.create_task()?;
        origin.task_id = Some(task_id.clone());
        let events = self.executor.events().with_task_log(&task_dir);
        events.emit(origin, "task_created", json!({"task_id": task_id}));
        self.store
            .write_task_file(&task_id, "agent_actions/action_001.rhai", script.as_bytes())?;
        self.store.write_task_file(
            &task_id,
            "registry.json",
            registry_snapshot(&self.executor).to_string().as_bytes(),
        )?;
        let log = std::fs::File::create(task_dir.join("worker_stderr.log"))
            .map_err(|e| GuardError::failed(format!("cannot create the worker log: {e}")))?;
        let rlimits = Rlimits::for_call(self.executor.limits(), timeout.as_secs());
        let session = Session::start(&self.exe, log, rlimits, deadline).await;
        let (end, layers, calls, pid) = match session {
            Ok(mut session) => {
                events.emit(
                    origin,
                    "task_worker_started",
                    json!({"task_id": task_id, "pid": session.pid(), "sandbox": session.layers}),
                );
                let ctx = Context {
                    executor: &self.executor,
                    store: &self.store,
                    events: &events,
                    origin,
                    task_id: &task_id,
                    cancel: &cancel,
                };
                let end = session
                    .run(&ctx, script, deadline, DEFAULT_SCRIPT_DOOR_CALLS)
                    .await;
                let layers = session.layers.clone();
                let calls = std::mem::take(&mut session.calls);
                let pid = session.pid();
                if matches!(end, RunEnd::Finished(_)) {
                    session.finish().await;
                }
                (end, layers, calls, pid)
            }
            Err(reason) => (RunEnd::Crashed(reason), Default::default(), Vec::new(), 0),
        };
        let calls_ok = calls.iter().filter(|c| c.status == "success").count();
        let mut result = match end {
            RunEnd::Finished(outcome) => script_result(outcome, calls.len(), calls_ok),
            RunEnd::TimedOut => {
                let mut value = failure(
                    "timed_out",
                    format!(
                        "the script did not finish within {} s; its worker was killed",
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
            RunEnd::Crashed(reason) => failure("failed", format!("the script worker failed: {reason}")),
        };
        events.emit(
            origin,
            "task_worker_finished",
            json!({"task_id": task_id, "pid": pid, "status": result["status"]}),
        );
        let artifacts = self.outputs(&task_id);
        if let Value::Object(map) = &mut result {
            map.insert("request_id".into(), json!(origin.request_id));
            map.insert("task_id".into(), json!(task_id));
            map.insert("task_dir".into(), json!(task_dir.display().to_string()));
            map.insert("artifacts".into(), artifacts);
            map.insert("function_calls".into(), json!(calls.len()));
            map.insert("sandbox".into(), json!(layers));
            map.insert(
                "duration_ms".into(),
                json!(started.elapsed().as_secs_f64() * 1000.0),
            );
        }
        let _ = self.store.write_task_file(
            &task_id,
            "function_calls.json",
            serde_json::to_string_pretty(&calls)
                .unwrap_or_default()
                .as_bytes(),
        );
        let _ = self.store.write_task_file(
            &task_id,
            "result.json",
            serde_json::to_string_pretty(&result)
                .unwrap_or_default()
                .as_bytes(),
        );
        events.flush_task_log();
        Ok(result)
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

/// The task result of a script that ran to its end.
fn script_result(outcome: session_outcome::RunOutcome, calls: usize, calls_ok: usize) -> Value {
    let mut result = if let Some(error) = &outcome.error {
        let mut value = failure(
            if error.kind == "timeout" {
                "timed_out"
            } else {
                "failed"
            },
            format!("{} error: {}", error.kind, error.message),
        );
        value["error"] = json!(error);
        value
    } else if let Some(answer) = &outcome.final_answer {
        match contract::check(answer, calls, calls_ok) {
            Ok(answer) => json!({
                "status": answer.status, "task_type": answer.task_type, "summary": answer.summary,
                "metrics": answer.metrics, "assumptions": answer.assumptions,
            }),
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

mod session_outcome {
    pub use crate::script::protocol::RunOutcome;
}

fn failure(status: &str, summary: String) -> Value {
    json!({"status": status, "task_type": "failed", "summary": summary, "metrics": {}, "assumptions": []})
}

/// Names, modes and descriptions of the guards a task could call.
fn registry_snapshot(executor: &Executor) -> Value {
    Value::Array(
        executor
            .registry()
            .iter()
            .map(
                |g| json!({"name": g.tool_name(), "mode": g.mode().as_str(), "description": g.description()}),
            )
            .collect(),
    )
}
