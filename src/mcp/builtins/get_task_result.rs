//! `get_task_result`: a task's saved result.json, for a task its record
//! says the caller owns.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BoxFuture, Builtin, Call, decode, tool};
use crate::error::GuardError;
use crate::limits::MAX_INLINE_RESULT_BYTES;

/// Get a task's saved result.json (inline up to 256 KiB; larger results are read with read_artifact).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetTaskResultInput {
    /// The task id, e.g. "task_0123…" as returned by run_script.
    pub task_id: String,
}

pub struct GetTaskResult;

impl Builtin for GetTaskResult {
    fn name(&self) -> &'static str {
        "get_task_result"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<GetTaskResultInput>(self.name(), "Get a task's result", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, GuardError>> {
        Box::pin(async move {
            let input: GetTaskResultInput = decode(call.arguments)?;
            let principal = &call.origin.principal;
            // The record decides whether the task exists for this caller.
            let Some(record) = call.tasks.records.get(principal, &input.task_id).await? else {
                return Err(crate::artifacts::no_task(&input.task_id));
            };
            if !matches!(record.state, crate::task::store::State::Ended(_)) {
                return Ok(json!({"task_id": input.task_id, "status": record.state.as_str(),
                                 "status_message": record.status_message, "result": null,
                                 "note": "the task has not ended: ask again, or use tasks/get"}));
            }
            let store = call.tasks.store.view(principal);
            // Answers not_found for a task whose directory is gone, except a
            // cancelled one: a task cancelled before it started never had one.
            if let Err(error) = store.task_dir(&input.task_id) {
                if record.state == crate::task::store::State::Ended(crate::task::TaskStatus::Cancelled) {
                    return Ok(json!({"task_id": input.task_id, "status": record.state.as_str(),
                                     "summary": record.summary, "result": null,
                                     "note": "the task was cancelled and has no directory: it never started (or its files were removed)"}));
                }
                return Err(error);
            }
            let chunk = store.read(
                &input.task_id,
                "result.json",
                0,
                MAX_INLINE_RESULT_BYTES,
                Default::default(),
            )?;
            let mut value =
                json!({"task_id": input.task_id, "task_dir": crate::task::result_dir(&input.task_id)});
            if chunk["next_offset"].is_null() {
                let result: Value =
                    serde_json::from_str(chunk["content"].as_str().unwrap_or("")).unwrap_or(Value::Null);
                value["request_id"] = result.get("request_id").cloned().unwrap_or(Value::Null);
                value["result"] = result;
            } else {
                value["result"] = Value::Null;
                value["note"] =
                    json!("result.json is larger than 256 KiB: read it with read_artifact in chunks");
                value["size_bytes"] = chunk["size_bytes"].clone();
            }
            Ok(value)
        })
    }
}
