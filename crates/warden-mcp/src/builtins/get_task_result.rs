//! `get_task_result`: a task's saved result.json, for a task its record
//! says the caller owns.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Builtin, BuiltinTool, Call, Reply, decode, tool};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;
use warden_task::result::{Saved as SavedFile, SavedHead, read_saved};

/// Get a task's saved result.json (inline up to 256 KiB; larger results are read with read_artifact).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetTaskResultInput {
    /// The task id, e.g. "task_0123…" as returned by run_script.
    pub task_id: String,
}

pub(super) struct GetTaskResult;

/// The answer for a task with no result to give (yet): its status says why.
#[derive(Serialize)]
struct NoResult<'a> {
    task_id: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_message: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<Option<&'a str>>,
    /// Always `null`.
    result: Option<Value>,
    note: &'static str,
}

/// The answer for an ended task: its result.json, or where to read it.
#[derive(Serialize)]
struct Saved<'a> {
    task_id: &'a str,
    task_dir: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<Value>,
    /// The saved result; `null` when it is too large to inline.
    result: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size_bytes: Option<u64>,
}

impl Builtin for GetTaskResult {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::GetTaskResult
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<GetTaskResultInput>(self.name(), "Get a task's result", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: GetTaskResultInput = decode(call.arguments)?;
            let principal = &call.origin.principal;
            // The record decides whether the task exists for this caller.
            let Some(record) = call.ctx.records().get(principal, &input.task_id).await? else {
                return Err(warden_calls::artifacts::no_task(&input.task_id));
            };
            let state = record.state;
            let status = state.as_str();
            if !matches!(record.state, warden_task::store::State::Ended(_)) {
                return Reply::with_status(
                    state,
                    &NoResult {
                        task_id: &input.task_id,
                        status,
                        status_message: Some(record.status_message.as_deref()),
                        summary: None,
                        result: None,
                        note: "the task has not ended: ask again, or use tasks/get",
                    },
                );
            }
            let store = call.ctx.store().view(principal);
            // Answers not_found for a task whose directory is gone, except a
            // cancelled one: a task cancelled before it started never had one.
            if let Err(error) = store.task_dir(&input.task_id) {
                if record.state == warden_task::store::State::Ended(warden_task::TaskStatus::Cancelled) {
                    return Reply::with_status(
                        state,
                        &NoResult {
                            task_id: &input.task_id,
                            status,
                            status_message: None,
                            summary: Some(record.summary.as_deref()),
                            result: None,
                            note: "the task was cancelled and has no directory: it never started (or its files were removed)",
                        },
                    );
                }
                return Err(error);
            }
            let task_dir = warden_task::result_dir(&input.task_id);
            let mut whole_inline = false;
            let answer = match read_saved(store, &input.task_id)? {
                SavedFile::Whole(text) => {
                    let result: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    let head = SavedHead::of(&result);
                    whole_inline = true;
                    Saved {
                        task_id: &input.task_id,
                        task_dir,
                        request_id: Some(head.request_id.unwrap_or(Value::Null)),
                        result,
                        note: None,
                        size_bytes: None,
                    }
                }
                SavedFile::TooLarge { size_bytes } => Saved {
                    task_id: &input.task_id,
                    task_dir,
                    request_id: None,
                    result: Value::Null,
                    note: Some("result.json is larger than 256 KiB: read it with read_artifact in chunks"),
                    size_bytes: Some(size_bytes),
                },
            };
            let reply = Reply::data(&answer)?;
            // Cut to the answer bound, it points at the file it came from.
            Ok(match whole_inline {
                true => reply.kept_in(&input.task_id, warden_calls::artifacts::RESULT_FILE),
                false => reply,
            })
        })
    }
}
