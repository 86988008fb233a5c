//! How tasks end, in words every layer reads: [`TaskStatus`], the result
//! of a run that did not finish ([`abnormal_end`]), and where a task's
//! files are named.

use std::time::Duration;

use crate::TaskResult;
use warden_core::error::{TaskError, TaskErrorKind};
use warden_script::host::session::RunEnd;

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
            TaskErrorKind::Timeout,
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
            TaskErrorKind::Cancelled,
            "the request was cancelled; the script worker was killed",
        ),
        RunEnd::Crashed(reason) => {
            let kind = if reason.starts_with("out of memory") {
                TaskErrorKind::Memory
            } else {
                TaskErrorKind::Worker
            };
            TaskResult::failure(
                TaskStatus::Failed,
                kind,
                format!("the script worker failed: {reason}"),
            )
            .with_error(TaskError::new(kind, reason))
        }
        RunEnd::Paused => TaskResult::failure(
            TaskStatus::Failed,
            TaskErrorKind::Worker,
            "the run stopped on a question for the person, and this kind of task cannot wait for the answer",
        )
        .with_error(TaskError::new(
            TaskErrorKind::Worker,
            "only a detached run_script task waits for the person's answer",
        )),
        RunEnd::Finished(_) => TaskResult::failure(
            TaskStatus::Failed,
            TaskErrorKind::Worker,
            "internal: finished run passed as abnormal",
        ),
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
