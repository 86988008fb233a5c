//! The task result as a Rust type: what `result.json` holds, what a task
//! record's ending is taken from, and what `run_script`, `run_coding_task`
//! and a batch run as a task return to the client.
//!
//! Built here and in [`super`] (which completes and caps it), never
//! patched as JSON. Its JSON is the shape clients have always read: every
//! optional field is absent, not `null`, when unset (`value` is the one
//! field that may be present and `null`). [`TaskResult::to_json`] goes
//! through [`Value`], whose maps keep keys sorted, so the bytes of
//! `result.json` are those the untyped result gave.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::TaskStatus;
use crate::batch::{BatchCounts, BatchResult};
use warden_calls::events::recovered::SideEffect;
use warden_core::error::{GuardError, TaskError, TaskErrorKind};
use warden_script::protocol::Layers;

/// One task result (see the module docs). Fields are grouped by who sets
/// them: the ending, the task's identity (set by
/// [`crate::Task::finish`]), its files, a script's value and
/// output, the coding agent's counts, a batch's calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub status: TaskStatus,
    /// `analysis`, `no_action`, `needs_input`, `unsupported` or `failed`
    /// (see [`super::contract`]); a batch has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumptions: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ResultError>,
    /// A task whose server died under it: every call of a destructive
    /// guard it started and how far each got, read back from its own
    /// events.jsonl (`warden_calls::events::recovered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<Vec<SideEffect>>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// See [`super::result_dir`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_calls: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Layers>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,

    /// The first files under outputs/ (see [`crate::Task::finish`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<ArtifactRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts_total: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts_note: Option<String>,

    /// A script's last value; present (maybe `null`) for every script
    /// that ran to its end.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_truncated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_note: Option<String>,

    /// Coding tasks: steps run and model calls made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<usize>,

    /// A `needs_input` answer's typed questions (see
    /// [`super::contract::Answer::missing`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<Map<String, Value>>,

    /// Coding tasks: the model's token usage (see [`TokenUsage`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,

    /// What the task ran and made, as hashes (a task that ran scripts;
    /// see [`crate::task_receipt`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::task_receipt::TaskReceipt>,

    /// A guard call run as an MCP task: the answer a plain call returns
    /// (MCP's `CallToolResult`, as the protocol layer wrote it), which
    /// `tasks/get` inlines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,

    /// A batch run as a task: its calls and counts, written beside the
    /// other fields. Read by [`TaskResult::from_json`], not by the derived
    /// `Deserialize`: a flattened field makes serde read the whole result
    /// through a buffer of every member, a reader (with `BatchCounts`'
    /// own inside it) that was 90 KB of every app.
    #[serde(flatten, skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub batch: Option<BatchCounts>,
}

impl TaskResult {
    /// A saved result (`result.json`) read back, its batch part included;
    /// the derived `Deserialize` leaves `batch` out (see the field). A
    /// result with a `calls` member whose batch part does not read as one
    /// reads without it, as a flattened optional field did.
    pub fn from_json(value: &Value) -> Result<Self, serde_json::Error> {
        let mut result = Self::deserialize(value)?;
        if value.get("calls").is_some() {
            result.batch = BatchCounts::deserialize(value).ok();
        }
        Ok(result)
    }
}

/// `Some` for a field that is present, even as `null`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// The tokens a coding task's model calls used, summed from each reply's
/// `usage`. A reply without one (or with one count only) is counted by
/// an estimate from its size and in `calls_without_usage`, never as zero
/// tokens, so a total is never silently low. Sums saturate at `u64::MAX`:
/// they never wrap to a small number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// The model asked (`WARDEN_MODEL_ID`).
    pub model: String,
    pub model_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// Calls whose reply did not report its usage (or only part of it):
    /// their tokens are estimated (the request's and reply's bytes / 4,
    /// rounded up) and included in the totals.
    pub calls_without_usage: u64,
}

impl TokenUsage {
    /// Counts one answered model call with its `input` and `output`
    /// tokens; `estimated` when the reply did not report them.
    pub fn add(&mut self, input: u64, output: u64, estimated: bool) {
        self.model_calls = self.model_calls.saturating_add(1);
        self.input_tokens = self.input_tokens.saturating_add(input);
        self.output_tokens = self.output_tokens.saturating_add(output);
        self.total_tokens = self.total_tokens.saturating_add(input.saturating_add(output));
        if estimated {
            self.calls_without_usage = self.calls_without_usage.saturating_add(1);
        }
    }
}

/// A file the task wrote, as its result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactRef {
    /// `outputs/<name>`, relative to the task directory.
    pub path: String,
    pub name: String,
}

/// The `error` of a task result. Most are a [`TaskError`]; a model call
/// that failed says which way ([`ModelFailure`]); a batch refused as a
/// task keeps the refusal's [`GuardError`]. Serialised untagged: each is
/// the JSON it always was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResultError {
    Model(ModelFailure),
    Task(TaskError),
    Guard(GuardError),
    /// An error in a saved result this version cannot read (kept as is).
    Other(Value),
}

impl ResultError {
    /// The task error kind, for events, spans and task states; a guard
    /// refusal has none.
    pub fn kind(&self) -> Option<TaskErrorKind> {
        match self {
            Self::Model(_) => Some(TaskErrorKind::Model),
            Self::Task(error) => Some(error.kind),
            Self::Guard(_) | Self::Other(_) => None,
        }
    }

    /// Its message (an error this version cannot read has none).
    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Model(error) => Some(&error.message),
            Self::Task(error) => Some(&error.message),
            Self::Guard(error) => Some(&error.message),
            Self::Other(_) => None,
        }
    }

    /// The error a task record keeps (stored as JSON by the store).
    pub fn from_stored(stored: &Value) -> Self {
        serde_json::from_value(stored.clone()).unwrap_or_else(|_| Self::Other(stored.clone()))
    }

    /// The error as the task record stores it.
    pub fn to_stored(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl From<TaskError> for ResultError {
    fn from(error: TaskError) -> Self {
        Self::Task(error)
    }
}

impl From<GuardError> for ResultError {
    fn from(error: GuardError) -> Self {
        Self::Guard(error)
    }
}

/// A failed model call's error: kind `model` and the model client's own
/// classification (`timeout`, `connection`, `http_status`, `bad_response`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFailure {
    pub kind: TaskErrorKind,
    pub model_error: String,
    pub message: String,
}

impl TaskResult {
    /// A result with `status` and nothing else set.
    pub fn bare(status: TaskStatus) -> Self {
        Self {
            status,
            task_type: None,
            summary: None,
            metrics: None,
            assumptions: None,
            error: None,
            side_effects: None,
            request_id: None,
            task_id: None,
            task_dir: None,
            function_calls: None,
            sandbox: None,
            duration_ms: None,
            artifacts: None,
            artifacts_total: None,
            artifacts_note: None,
            value: None,
            value_bytes: None,
            value_file: None,
            value_note: None,
            output: None,
            output_truncated: None,
            answer_file: None,
            answer_note: None,
            steps: None,
            model_calls: None,
            missing: None,
            usage: None,
            receipt: None,
            answer: None,
            batch: None,
        }
    }

    /// An ended task's head: status, type, summary, empty metrics and
    /// assumptions.
    pub fn ended(status: TaskStatus, task_type: &str, summary: impl Into<String>) -> Self {
        Self {
            task_type: Some(task_type.into()),
            summary: Some(summary.into()),
            metrics: Some(Map::new()),
            assumptions: Some(Vec::new()),
            ..Self::bare(status)
        }
    }

    /// A task result that is not a success (failed, timed out or
    /// cancelled): `summary` says why, and so does its `error`, of `kind`.
    /// Every such result carries an error, for the client that reads
    /// `error.kind`; [`TaskResult::with_error`] puts a fuller one in its
    /// place (a script's, with its line; a refused batch's guard error).
    pub fn failure(status: TaskStatus, kind: TaskErrorKind, summary: impl Into<String>) -> Self {
        let summary = summary.into();
        Self {
            error: Some(TaskError::new(kind, summary.clone()).into()),
            ..Self::ended(status, "failed", summary)
        }
    }

    /// The result fields of an accepted final answer.
    pub fn answer(answer: &super::contract::Answer) -> Self {
        Self {
            metrics: Some(answer.metrics.clone()),
            assumptions: Some(answer.assumptions.clone()),
            missing: (!answer.missing.is_empty()).then(|| answer.missing.clone()),
            ..Self::ended(answer.status, &answer.task_type, answer.summary.clone())
        }
    }

    /// A batch's result as a task's (its summary is set by the caller).
    pub fn batch(batch: BatchResult) -> Self {
        Self {
            request_id: Some(batch.request_id),
            duration_ms: Some(batch.duration_ms),
            batch: Some(batch.counts),
            ..Self::bare(batch.status)
        }
    }

    /// This result with `error`.
    pub fn with_error(mut self, error: impl Into<ResultError>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// This result naming its task.
    pub fn with_task_id(mut self, id: &str) -> Self {
        self.task_id = Some(id.to_string());
        self
    }

    /// The error kind, if the result has an error that has one.
    pub fn error_kind(&self) -> Option<TaskErrorKind> {
        self.error.as_ref().and_then(ResultError::kind)
    }

    /// The result as JSON, keys sorted as they always were.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// `result.json`'s bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&self.to_json()).unwrap_or_default()
    }

    /// The compact JSON size, which the inline cap counts.
    pub fn size(&self) -> usize {
        serde_json::to_vec(self).map(|v| v.len()).unwrap_or(0)
    }

    /// This result as an answer carries it, with what it leaves out: the
    /// receipt's artifact hashes cut to the first
    /// [`MAX_RESULT_ARTIFACTS`](crate::limits::MAX_RESULT_ARTIFACTS), as
    /// `artifacts` lists the first files, so a task that wrote a thousand
    /// files answers in kilobytes. `result.json` keeps every hash (a
    /// replay compares them all); the answer's marker points there.
    pub fn into_answer(mut self) -> (Value, Vec<warden_core::answer::Cut>) {
        let mut cuts = Vec::new();
        let listed = crate::limits::MAX_RESULT_ARTIFACTS;
        if let Some(receipt) = &mut self.receipt
            && receipt.artifacts.len() > listed
        {
            let total = receipt.artifacts.len();
            receipt.artifacts.truncate(listed);
            cuts.push(warden_core::answer::Cut::items(
                "/receipt/artifacts",
                listed,
                total,
            ));
        }
        (self.to_json(), cuts)
    }
}

/// A task's `result.json` as its owner reads it back, up to `MAX_INLINE_RESULT_BYTES`.
pub enum Saved {
    /// The whole file's text.
    Whole(String),
    /// Too large to inline: its size.
    TooLarge { size_bytes: u64 },
}

/// Reads task `task_id`'s `result.json` through the owner's `view`.
pub fn read_saved(
    view: warden_calls::artifacts::View<'_>,
    task_id: &str,
) -> Result<Saved, warden_core::error::GuardError> {
    let chunk = view.read(
        task_id,
        warden_calls::artifacts::RESULT_FILE,
        0,
        warden_calls::limits::MAX_INLINE_RESULT_BYTES,
        Default::default(),
    )?;
    Ok(match chunk.next_offset {
        None => Saved::Whole(chunk.content),
        Some(_) => Saved::TooLarge {
            size_bytes: chunk.size_bytes,
        },
    })
}

/// What a task record's ending needs from a saved `result.json` (read back
/// from a task directory, perhaps written by another version): lenient,
/// so a result this version cannot fully read still ends its record.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SavedHead {
    #[serde(default)]
    pub status: Option<Value>,
    #[serde(default)]
    pub summary: Option<Value>,
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(default)]
    pub request_id: Option<Value>,
}

impl SavedHead {
    /// The head of `saved` (a result.json's JSON).
    pub fn of(saved: &Value) -> Self {
        Self::deserialize(saved).unwrap_or_default()
    }

    /// Whether it reads as a success: its status is `success`, or it has
    /// no status string at all (how clients have always been told).
    pub fn succeeded(&self) -> bool {
        match &self.status {
            Some(Value::String(status)) => status == TaskStatus::Success.as_str(),
            _ => true,
        }
    }

    /// Its status; `failed` when it has none this version knows.
    pub fn status(&self) -> TaskStatus {
        self.status
            .clone()
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or(TaskStatus::Failed)
    }

    /// Its summary; empty when it is not a string.
    pub fn summary(&self) -> String {
        match &self.summary {
            Some(Value::String(summary)) => summary.clone(),
            _ => String::new(),
        }
    }

    /// Its error, unless absent or `null`.
    pub fn error(&self) -> Option<Value> {
        self.error.clone().filter(|e| !e.is_null())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_that_is_not_a_success_always_says_why_in_its_error() {
        let cancelled = TaskResult::failure(
            TaskStatus::Cancelled,
            TaskErrorKind::Cancelled,
            "the client went away",
        );
        assert_eq!(cancelled.error_kind(), Some(TaskErrorKind::Cancelled));
        let json = cancelled.to_json();
        assert_eq!(json["error"]["kind"], "cancelled");
        assert_eq!(json["error"]["message"], json["summary"]);
        // A fuller error takes its place.
        let refused = cancelled.with_error(GuardError::invalid_input("x", "bad"));
        assert_eq!(refused.to_json()["error"]["code"], "invalid_input");
    }

    #[test]
    fn a_result_serialises_as_the_json_clients_read() {
        // The shapes the untyped result had: absent fields absent, a null value present.
        let mut result = TaskResult::failure(TaskStatus::TimedOut, TaskErrorKind::Timeout, "late")
            .with_error(TaskError::new(TaskErrorKind::Timeout, "deadline"))
            .with_task_id("task_1");
        result.value = Some(Value::Null);
        assert_eq!(
            result.to_json(),
            json!({"status": "timed_out", "task_type": "failed", "summary": "late", "metrics": {},
                   "assumptions": [], "task_id": "task_1", "value": null,
                   "error": {"kind": "timeout", "message": "deadline", "line": null, "column": null}})
        );
        let model = TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Model, "m").with_error(
            ResultError::Model(ModelFailure {
                kind: TaskErrorKind::Model,
                model_error: "timeout".into(),
                message: "slow".into(),
            }),
        );
        assert_eq!(
            model.to_json()["error"],
            json!({"kind": "model", "model_error": "timeout", "message": "slow"})
        );
        let refused = TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Guard, "r")
            .with_error(GuardError::invalid_input("x", "bad"));
        assert_eq!(refused.error_kind(), None);
        assert_eq!(refused.to_json()["error"]["code"], "invalid_input");
    }

    #[test]
    fn a_saved_result_reads_back_as_it_was_written() {
        // result.json round-trips through the type, error variants included.
        for result in [
            TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Storage, "disk"),
            TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Guard, "x")
                .with_error(GuardError::invalid_input("f", "bad")),
            TaskResult::ended(TaskStatus::Success, "analysis", "ok"),
            TaskResult::batch(BatchResult {
                request_id: "req-1".into(),
                status: TaskStatus::Failed,
                counts: BatchCounts {
                    calls: vec![crate::batch::CallResult {
                        index: 0,
                        reference: "r1".into(),
                        name: "get_quote".into(),
                        depends_on: vec![],
                        status: crate::batch::CallStatus::Failed,
                        duration_ms: 1.5,
                        output: None,
                        select_missing: None,
                        error: Some(GuardError::invalid_input("symbol", "unknown")),
                        reason: None,
                        receipt: None,
                    }],
                    succeeded: 0,
                    failed: 1,
                    skipped: 0,
                },
                duration_ms: 2.0,
            }),
        ] {
            let back = TaskResult::from_json(&result.to_json()).unwrap();
            assert_eq!(back, result);
        }
        // The batch part sits beside the other members, as it always has.
        let batch = TaskResult::from_json(&json!({"status": "success", "calls": [], "succeeded": 0,
            "failed": 0, "skipped": 0}))
        .unwrap();
        assert_eq!(batch.batch.map(|b| b.calls.len()), Some(0));
        // A `calls` member that is no batch's reads without one.
        let odd = TaskResult::from_json(&json!({"status": "success", "calls": 3})).unwrap();
        assert_eq!((odd.status, odd.batch), (TaskStatus::Success, None));
        let head = SavedHead::of(&json!({"status": "weird", "summary": 3, "error": null}));
        assert_eq!(
            (head.status(), head.summary(), head.error()),
            (TaskStatus::Failed, String::new(), None)
        );
    }
}
