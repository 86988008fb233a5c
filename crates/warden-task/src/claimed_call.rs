//! A guard call run as an MCP task (`warden::Guard::task_support`): the
//! record-keeping around it. The MCP layer runs the call itself (through
//! the executor, like any direct call) and hands its answer here.
//!
//! The task holds its record (claimed from the queue, so it exists and
//! runs here) while the call runs, registered as running under the call's
//! cancellation token, so `tasks/cancel`, a lost lease and a shutdown stop
//! it as they stop a script task. It ends one of two ways: with an answer
//! ([`TaskRunner::end_claimed`]: a task directory holding `result.json`,
//! copied to the object store when there is one, then the record), or
//! waiting for the person ([`TaskRunner::pause_claimed`]: its questions and
//! answers so far in the record, no slot). A destructive guard's task has
//! its directory from before the call (the MCP layer makes it, so that the
//! call's start is written through to the task's own log); any other has
//! none until it ends.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{TaskResult, TaskRunner, TaskStatus, result_dir};
use warden_calls::tenant::Principal;
use warden_core::error::TaskErrorKind;
use warden_core::future::BoxFuture;

impl TaskRunner {
    /// Registers claimed task `id` as running here under `cancel`: its
    /// lease is renewed, and `tasks/cancel` or a shutdown fires `cancel`.
    pub fn hold_claimed(&self, id: &str, cancel: &CancellationToken) {
        self.start_heartbeat();
        self.running.insert(id, cancel, true);
    }

    /// Ends claimed task `id` of `principal` with `result`: its directory
    /// with `result.json` (and its copy in the object store), then its
    /// record; the task stops running here. A result that cannot be saved
    /// ends the task failed, naming why, so no record claims a result no
    /// node can read. Returns the result as recorded.
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn end_claimed<'a>(
        &'a self,
        principal: &'a Principal,
        id: &'a str,
        result: TaskResult,
    ) -> BoxFuture<'a, TaskResult> {
        Box::pin(async move {
            let mut result = result.with_task_id(id);
            if self.running.stopping() && result.status == TaskStatus::Cancelled {
                result = crate::records::interrupted().with_task_id(id);
            }
            result.task_dir = Some(result_dir(id));
            let saved = self
                .store
                .create_task_with_id(principal, id)
                .and_then(|_| self.store.write_result(id, &result.to_bytes()))
                .and_then(|()| self.store.upload_task(id));
            if let Err(error) = saved {
                let summary = format!(
                    "the call ran but its result could not be saved: {}",
                    error.message
                );
                result =
                    TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Storage, summary).with_task_id(id);
                let _ = self.store.write_result(id, &result.to_bytes());
            }
            if let Err(error) = self.records.end(id, &result).await {
                tracing::warn!(task_id = %id, %error, "the task's record could not be ended; result.json has its result");
            }
            self.store.end_task(id);
            self.running.remove(id);
            result
        })
    }

    /// Stops claimed task `id` on questions for the person: its record
    /// waits (`input_required`) with `resume` (what answers them) and
    /// `message`, holding no slot; the task stops running here. `false`
    /// when its record no longer runs here (cancelled or lost meanwhile).
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn pause_claimed<'a>(
        &'a self,
        id: &'a str,
        resume: &'a Value,
        message: &'a str,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let paused = self
                .records
                .pause(id, &serde_json::json!({}), resume, message, None)
                .await;
            self.running.remove(id);
            match paused {
                Ok(paused) => paused,
                Err(error) => {
                    tracing::warn!(task_id = %id, %error, "the task could not wait for the person");
                    false
                }
            }
        })
    }
}
