//! The server's built-in tools: run_script and the artifact tools.
//!
//! Same shape as guards: a typed input (schema and description derived),
//! a structured result, errors as `isError` results with stable codes.
//! They call into [`crate::task`] and [`crate::artifacts`]; guard calls made
//! by scripts still go through the executor.

pub mod inputs;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{Tool, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::GuardError;
use crate::events::Origin;
use crate::limits::{DEFAULT_TASK_TIMEOUT, MAX_INLINE_RESULT_BYTES, MAX_READ_CHUNK_BYTES};
use crate::task::TaskRunner;
use inputs::*;

/// Names of the built-in tools served today.
pub const NAMES: &[&str] = &[
    "run_script",
    "list_tasks",
    "get_task_result",
    "list_artifacts",
    "read_artifact",
];

fn tool<T: schemars::JsonSchema>(name: &'static str, read_only: bool) -> Tool {
    let (schema, description) = crate::schema::input_schema::<T>();
    Tool::new(name, description, Arc::new(schema)).with_annotations(
        ToolAnnotations::new()
            .read_only(read_only)
            .destructive(false)
            .idempotent(read_only)
            .open_world(false),
    )
}

/// Tool definitions of the built-ins.
pub fn tools() -> Vec<Tool> {
    vec![
        tool::<RunScriptInput>("run_script", false),
        tool::<ListTasksInput>("list_tasks", true),
        tool::<GetTaskResultInput>("get_task_result", true),
        tool::<ListArtifactsInput>("list_artifacts", true),
        tool::<ReadArtifactInput>("read_artifact", true),
    ]
}

/// Which events mode a built-in records.
pub fn mode(name: &str) -> &'static str {
    if name == "run_script" {
        "script"
    } else {
        "artifact"
    }
}

fn decode<T: DeserializeOwned>(arguments: Value) -> Result<T, GuardError> {
    crate::schema::decode_arguments(arguments)
}

fn in_range(field: &str, value: u64, min: u64, max: u64) -> Result<u64, GuardError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(GuardError::invalid_input(
            field,
            format!("must be from {min} to {max}, got {value}"),
        ))
    }
}

/// Runs built-in `name`. `Ok` carries the structured result; the task
/// result of a failed script is still `Ok` (its `status` says how it ended).
pub async fn call(
    runner: &TaskRunner,
    name: &str,
    arguments: Value,
    origin: &mut Origin,
    cancel: CancellationToken,
) -> Result<Value, GuardError> {
    let store = &runner.store;
    match name {
        "run_script" => {
            let input: RunScriptInput = decode(arguments)?;
            let max = runner.executor.limits().max_timeout.as_secs();
            let seconds = match input.timeout_seconds {
                Some(s) => in_range("timeout_seconds", s, 1, max)?,
                None => DEFAULT_TASK_TIMEOUT.as_secs().min(max),
            };
            runner
                .run_script(&input.script, Duration::from_secs(seconds), origin, cancel)
                .await
        }
        "list_tasks" => {
            let input: ListTasksInput = decode(arguments)?;
            let limit = in_range("limit", input.limit, 1, 100)? as usize;
            let tasks: Vec<Value> = store
                .task_ids()
                .into_iter()
                .take(limit)
                .map(|id| {
                    let result = store
                        .read(&id, "result.json", 0, MAX_INLINE_RESULT_BYTES, Default::default())
                        .ok()
                        .and_then(|chunk| {
                            serde_json::from_str::<Value>(chunk["content"].as_str().unwrap_or("")).ok()
                        })
                        .unwrap_or(Value::Null);
                    json!({"task_id": id, "status": result.get("status").cloned().unwrap_or(json!("running")),
                           "task_type": result.get("task_type"), "summary": result.get("summary")})
                })
                .collect();
            Ok(json!({"tasks": tasks}))
        }
        "get_task_result" => {
            let input: GetTaskResultInput = decode(arguments)?;
            let dir = store.task_dir(&input.task_id)?;
            let chunk = store.read(
                &input.task_id,
                "result.json",
                0,
                MAX_INLINE_RESULT_BYTES,
                Default::default(),
            )?;
            let mut value = json!({"task_id": input.task_id, "task_dir": dir.display().to_string()});
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
        }
        "list_artifacts" => {
            let input: ListArtifactsInput = decode(arguments)?;
            let limit = in_range("limit", input.limit, 1, 500)? as usize;
            let files = store.files(&input.task_id)?;
            let offset = input.offset as usize;
            let page: Vec<Value> = files
                .iter()
                .skip(offset)
                .take(limit)
                .map(|(name, size)| json!({"filename": name, "size_bytes": size, "mime_type": crate::artifacts::mime_type(name)}))
                .collect();
            let next = (offset + page.len() < files.len()).then_some(offset + page.len());
            Ok(json!({"task_id": input.task_id, "files": page, "next_offset": next}))
        }
        "read_artifact" => {
            let input: ReadArtifactInput = decode(arguments)?;
            let max = in_range("max_bytes", input.max_bytes, 1, MAX_READ_CHUNK_BYTES as u64)? as usize;
            store.read(&input.task_id, &input.filename, input.offset, max, input.encoding)
        }
        other => Err(GuardError::new(
            "unknown_tool",
            format!("no built-in tool '{other}'"),
        )),
    }
}
