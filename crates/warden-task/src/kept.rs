//! Answers too large to send whole, kept as tasks of their own.
//!
//! When the MCP layer cuts an answer to the answer bound
//! (`warden_mcp::limits::DEFAULT_MAX_ANSWER_BYTES`) and the whole value is not
//! already some task's `result.json`, it keeps the whole value here: a new
//! task directory of the caller holding [`VALUE_FILE`] (the value's compact
//! JSON) and a `result.json` saying what it is, with a task record whose
//! tool is the tool that answered. So `list_tasks`, `get_task_result`,
//! `read_artifact` and `resources/read` find it as they find any task of
//! the caller (and no other principal can), and it is removed as any task
//! is: by retention (`WARDEN_TASKS_KEPT`, `WARDEN_TASKS_MAX_AGE_HOURS`,
//! `WARDEN_STORE_MAX_MB`, `WARDEN_PRINCIPAL_ARTIFACT_MB`) and when its
//! record expires. Keeping takes no task slot and runs nothing.

use serde_json::Value;

use crate::{TaskResult, TaskRunner, TaskStatus, VALUE_FILE, result_dir};
use warden_calls::events::Origin;
use warden_core::error::{GuardError, TaskErrorKind};
use warden_core::future::BoxFuture;

impl TaskRunner {
    /// Keeps `whole`, the value of an answer `origin`'s request got cut,
    /// as a new task of its principal (see the module docs); returns the
    /// task's id. The value is [`VALUE_FILE`] of that task. `status` is
    /// how the answered call ended (the kept task's record shows it).
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn keep_answer<'a>(
        &'a self,
        origin: &'a Origin,
        status: TaskStatus,
        whole: &'a Value,
    ) -> BoxFuture<'a, Result<String, GuardError>> {
        Box::pin(async move {
            let bytes = serde_json::to_vec(whole)
                .map_err(|e| GuardError::failed(format!("the answer is not valid JSON: {e}")))?;
            let principal = &origin.principal;
            let (id, dir) = self.store.create_task(principal)?;
            let ttl_ms = self.records.ttl_ms(None);
            let created = self
                .records
                .create(&id, principal, &origin.tool, &dir, ttl_ms, false)
                .await;
            if let Err(error) = created {
                // No record: the directory alone would be a task nobody can see.
                self.store.end_task(&id);
                self.store.remove_task(&id);
                return Err(GuardError::from(error));
            }
            let summary = format!(
                "the whole answer of {} (request {}): {} bytes, over the answer limit; read {VALUE_FILE} with read_artifact",
                origin.tool,
                origin.request_id,
                bytes.len()
            );
            let mut result = TaskResult::bare(status).with_task_id(&id);
            result.summary = Some(summary);
            result.request_id = Some(origin.request_id.clone());
            result.task_dir = Some(result_dir(&id));
            result.value_bytes = Some(bytes.len());
            result.value_file = Some(VALUE_FILE.to_string());
            let saved = self
                .store
                .write_task_file(&id, VALUE_FILE, &bytes)
                .and_then(|()| self.store.write_result(&id, &result.to_bytes()))
                .and_then(|()| self.store.upload_task(&id));
            if let Err(error) = saved {
                let failed = TaskResult::failure(
                    TaskStatus::Failed,
                    TaskErrorKind::Storage,
                    format!("the answer could not be kept: {}", error.message),
                )
                .with_task_id(&id);
                let _ = self.store.write_result(&id, &failed.to_bytes());
                let _ = self.records.end(&id, &failed).await;
                self.store.end_task(&id);
                return Err(error);
            }
            if let Err(error) = self.records.end(&id, &result).await {
                tracing::warn!(task_id = %id, %error, "the kept answer's record could not be ended; result.json has it");
            }
            self.store.end_task(&id);
            Ok(id)
        })
    }
}
