//! How a request ended, as its events, span and answers name it: a
//! call's status, a task's, or the state of the task a reply reads (a
//! `get_task_result` of a task still running). A type, so no event can
//! carry a word no reader knows.

use warden_calls::executor::Status;
use warden_task::TaskStatus;
use warden_task::store::State;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStatus {
    Call(Status),
    Task(TaskStatus),
    Pending(State),
}

impl RequestStatus {
    /// The word events, spans and results use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Call(status) => status.as_str(),
            Self::Task(status) => status.as_str(),
            Self::Pending(state) => state.as_str(),
        }
    }

    pub fn is_success(self) -> bool {
        matches!(
            self,
            Self::Call(Status::Success) | Self::Task(TaskStatus::Success)
        )
    }

    /// Refused: nothing ran.
    pub fn is_rejected(self) -> bool {
        matches!(self, Self::Call(Status::Rejected))
    }
}
