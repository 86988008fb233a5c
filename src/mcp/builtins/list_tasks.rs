//! `list_tasks`: the caller's recent tasks, newest first.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BoxFuture, Builtin, Call, decode, in_range, tool};
use crate::error::GuardError;
use crate::limits::MAX_INLINE_RESULT_BYTES;

/// List your recent tasks (run_script and coding tasks), newest first, with status and summary.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTasksInput {
    /// How many tasks to return (1-100, default 20).
    #[serde(default = "default_task_limit")]
    pub limit: u64,
}

fn default_task_limit() -> u64 {
    20
}

pub struct ListTasks;

impl Builtin for ListTasks {
    fn name(&self) -> &'static str {
        "list_tasks"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<ListTasksInput>(self.name(), "List tasks", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, GuardError>> {
        Box::pin(async move {
            let input: ListTasksInput = decode(call.arguments)?;
            let limit = in_range("limit", input.limit, 1, 100)? as usize;
            // The caller's own tasks only: another principal's do not exist here.
            let store = call.tasks.store.view(&call.origin.principal);
            let tasks: Vec<Value> = store
                .task_ids()
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
        })
    }
}
