//! What a built-in returns, typed, and its one conversion to an MCP
//! answer ([`Reply::into_answer`], which the answer bound then cuts).
//!
//! A task's result and a batch's keep their types up to here, so the
//! server reads how a call ended (status, task type, error kind) from
//! them ([`Reply::status`] and friends) rather than from JSON. Every other
//! tool's answer is its own serde type, serialised once by [`Reply::data`].

use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::Value;

use crate::bound::{Answer, Whole};
use crate::status::RequestStatus;
use warden_core::error::{GuardError, TaskErrorKind};
use warden_task::batch::BatchResult;
use warden_task::store::State;
use warden_task::{TaskResult, TaskStatus};

/// A built-in's structured answer (see the module docs).
#[derive(Debug, Clone)]
pub enum Reply {
    /// A task's result: `run_script`, `run_coding_task`, a batch run as a task.
    Task(Box<TaskResult>),
    /// A batch run within its request.
    Batch(Box<BatchResult>),
    /// Any other answer, with the status it reports (`None`: success),
    /// and the task file that holds its whole value, if one does (see
    /// [`Reply::kept_in`]).
    Data {
        status: Option<State>,
        body: Value,
        kept: Option<Whole>,
    },
}

impl Reply {
    /// A successful answer with `body`'s JSON.
    pub fn data(body: &impl Serialize) -> Result<Self, GuardError> {
        Ok(Self::Data {
            status: None,
            body: to_json(body)?,
            kept: None,
        })
    }

    /// An answer about a task that has not ended, in `status` (it shows
    /// as an error: there is no result yet).
    pub fn with_status(status: State, body: &impl Serialize) -> Result<Self, GuardError> {
        Ok(Self::Data {
            status: Some(status),
            body: to_json(body)?,
            kept: None,
        })
    }

    /// This answer, whose whole value `file` of task `task_id` holds
    /// already (`get_task_result`'s is that task's `result.json`): cut to
    /// the answer bound, it points there instead of keeping a copy.
    pub fn kept_in(mut self, task_id: &str, file: &str) -> Self {
        if let Self::Data { kept, .. } = &mut self {
            *kept = Some(Whole {
                task_id: task_id.to_string(),
                filename: file.to_string(),
            });
        }
        self
    }

    /// How the call ended, as request events and spans say it.
    pub fn status(&self) -> RequestStatus {
        match self {
            Self::Task(result) => RequestStatus::Task(result.status),
            Self::Batch(batch) => RequestStatus::Task(batch.status),
            Self::Data { status: None, .. } => RequestStatus::Task(TaskStatus::Success),
            Self::Data {
                status: Some(state), ..
            } => RequestStatus::Pending(*state),
        }
    }

    /// A task's type (`analysis`, `failed`, …); other answers have none.
    pub fn task_type(&self) -> Option<&str> {
        match self {
            Self::Task(result) => result.task_type.as_deref(),
            _ => None,
        }
    }

    /// A task's error kind; other answers have none.
    pub fn error_kind(&self) -> Option<TaskErrorKind> {
        match self {
            Self::Task(result) => result.error_kind(),
            _ => None,
        }
    }

    /// The MCP answer, for the answer bound (`crate::bound`): structured
    /// (an error unless its status is success); a task's with its PNG
    /// charts inline and a link per artifact (see `tasks::task_answer`),
    /// its receipt hashes cut as [`TaskResult::into_answer`] cuts them,
    /// and its `result.json` as where the whole value is.
    pub fn into_answer(self, store: warden_calls::artifacts::View<'_>, limit: usize) -> Answer {
        let success = self.status().is_success();
        match self {
            Self::Task(result) => crate::tasks::task_answer(store, None, *result, success, limit),
            Self::Batch(batch) => {
                let status = batch.status;
                let mut answer = Answer::plain(structured(batch.to_json(), success));
                answer.status = status;
                answer
            }
            Self::Data { body, kept, .. } => {
                let mut answer = Answer::plain(structured(body, success));
                answer.whole = kept;
                answer
            }
        }
    }
}

/// A structured result, an error unless `success`.
fn structured(body: Value, success: bool) -> CallToolResult {
    if success {
        CallToolResult::structured(body)
    } else {
        CallToolResult::structured_error(body)
    }
}

impl From<TaskResult> for Reply {
    fn from(result: TaskResult) -> Self {
        Self::Task(Box::new(result))
    }
}

impl From<BatchResult> for Reply {
    fn from(batch: BatchResult) -> Self {
        Self::Batch(Box::new(batch))
    }
}

fn to_json(body: &impl Serialize) -> Result<Value, GuardError> {
    serde_json::to_value(body)
        .map_err(|e| GuardError::failed(format!("the tool's answer is not valid JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_core::error::TaskError;

    #[test]
    fn the_request_events_read_how_a_call_ended_from_the_typed_reply() {
        // A task's status, type and error kind; a data answer's own status, else success.
        let timed_out = Reply::from(
            TaskResult::failure(TaskStatus::TimedOut, TaskErrorKind::Timeout, "late")
                .with_error(TaskError::new(TaskErrorKind::Timeout, "deadline")),
        );
        assert_eq!(
            (
                timed_out.status().as_str(),
                timed_out.task_type(),
                timed_out.error_kind()
            ),
            ("timed_out", Some("failed"), Some(TaskErrorKind::Timeout))
        );
        let listing = Reply::data(&serde_json::json!({"tasks": []})).unwrap();
        assert_eq!(
            (
                listing.status().as_str(),
                listing.task_type(),
                listing.error_kind()
            ),
            ("success", None, None)
        );
        let running = Reply::with_status(State::Running, &serde_json::json!({"result": null})).unwrap();
        assert_eq!(running.status().as_str(), "running");
    }
}
