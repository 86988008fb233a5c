//! What a batch returns, as types: one [`CallResult`] per call and the
//! counts, built by [`super::run`] and serialised as the JSON `run_batch`
//! has always returned (a field that does not apply is absent).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::TaskStatus;
use warden_calls::executor::Status;
use warden_core::error::GuardError;

/// A batch's result: how it went as a whole, and every call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchResult {
    pub request_id: String,
    /// `success` when every call succeeded; `cancelled` when the client
    /// gave up; `failed` otherwise.
    pub status: TaskStatus,
    #[serde(flatten)]
    pub counts: BatchCounts,
    pub duration_ms: f64,
}

/// The calls of a batch and how many ended which way (also the batch
/// part of a batch run as a task).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchCounts {
    pub calls: Vec<CallResult>,
    pub succeeded: usize,
    pub failed: usize,
    pub skipped: usize,
}

/// One call of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallResult {
    pub index: usize,
    /// `r1`, `r2`, …: how other calls refer to it.
    #[serde(rename = "ref")]
    pub reference: String,
    pub name: String,
    pub depends_on: Vec<usize>,
    pub status: CallStatus,
    pub duration_ms: f64,
    /// Its output, when the return mode keeps it (shaped by `select` and `digits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// `select` paths its output lacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_missing: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<GuardError>,
    /// Why it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its receipt (`receipt: true`, a successful call): hashes of the
    /// full output, before `select` and `digits` shaped what is returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<warden_core::receipt::CallReceipt>,
}

/// How one call of a batch ended: a call's [`Status`], or skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Success,
    Failed,
    TimedOut,
    Cancelled,
    Rejected,
    /// It never ran: a call it depends on did not succeed.
    Skipped,
}

impl From<Status> for CallStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::Success => Self::Success,
            Status::Failed => Self::Failed,
            Status::TimedOut => Self::TimedOut,
            Status::Cancelled => Self::Cancelled,
            Status::Rejected => Self::Rejected,
            // A batch has nobody to ask (`cannot_ask`): never reached.
            Status::InputRequired => Self::Failed,
        }
    }
}

impl BatchResult {
    /// The result as JSON (keys sorted, as they always were).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
