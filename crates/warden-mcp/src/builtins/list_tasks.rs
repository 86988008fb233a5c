//! `list_tasks`: the caller's recent tasks, newest first, from the task store.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, BuiltinTool, Call, Reply, decode, in_range, tool};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;
use warden_task::ResultError;
use warden_task::store::iso8601;

/// List your recent tasks (run_script, coding tasks and batches run as tasks), newest first, with tool, status, summary and creation time.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListTasksInput {
    /// How many tasks to return (1-100, default 20).
    #[serde(default = "default_task_limit")]
    pub limit: u64,
}

fn default_task_limit() -> u64 {
    20
}

pub(super) struct ListTasks;

#[derive(Serialize)]
struct Tasks<'a> {
    tasks: Vec<Row<'a>>,
}

/// One task as `list_tasks` shows it.
#[derive(Serialize)]
struct Row<'a> {
    task_id: &'a str,
    tool: &'a str,
    status: &'static str,
    /// Its summary once ended, its latest note before.
    summary: Option<&'a String>,
    /// The error's kind, if it ended with one.
    error: Option<&'static str>,
    created_at: String,
    updated_at: String,
}

impl Builtin for ListTasks {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::ListTasks
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<ListTasksInput>(self.name(), "List tasks", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: ListTasksInput = decode(call.arguments)?;
            let limit = in_range("limit", input.limit, 1, 100)? as usize;
            // The caller's own tasks only: another principal's do not exist here.
            let records = call.ctx.records().list(&call.origin.principal, limit).await?;
            let tasks: Vec<Row> = records
                .iter()
                .map(|r| Row {
                    task_id: &r.id,
                    tool: &r.tool,
                    status: r.state.as_str(),
                    summary: r.summary.as_ref().or(r.status_message.as_ref()),
                    error: r
                        .error
                        .as_ref()
                        .map(ResultError::from_stored)
                        .and_then(|e| e.kind())
                        .map(|kind| kind.as_str()),
                    created_at: iso8601(r.created_ms),
                    updated_at: iso8601(r.updated_ms),
                })
                .collect();
            Reply::data(&Tasks { tasks })
        })
    }
}
