//! The server's built-in tools, one file each, all the same shape.
//!
//! Like guards, each has a typed input (its schema and description are
//! derived) and returns a typed [`Reply`] or a [`GuardError`]. They reach
//! the world through one context, [`Runtime`] (registry, executor, store,
//! records, the task runner); guard calls they cause still go through the
//! executor. To add one, write a file with a type implementing [`Builtin`]
//! and list it in [`all`].

mod bundle_coverage;
mod check_backtest;
mod context;
mod describe_guard;
mod get_task_result;
mod list_artifacts;
mod list_guards;
mod list_tasks;
mod read_artifact;
mod reply;
pub(crate) mod run_batch;
#[cfg(feature = "agent")]
mod run_coding_task;
mod run_script;

pub use context::Runtime;
pub use reply::Reply;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::GuardError;
use crate::events::Origin;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One invocation of a built-in tool.
pub struct Call<'a> {
    /// What the tool may use.
    pub ctx: &'a Runtime,
    pub arguments: Value,
    /// The request's origin; a tool that creates a task sets `task_id`.
    pub origin: &'a mut Origin,
    /// Fired when the client cancels the request.
    pub cancel: CancellationToken,
    /// Progress sink when the client sent a progressToken.
    pub progress: Option<Arc<crate::script::host::progress::Progress>>,
}

/// A tool the server provides itself.
pub trait Builtin: Send + Sync {
    fn name(&self) -> &'static str;
    /// The `mode` its events record.
    fn mode(&self) -> &'static str {
        "artifact"
    }
    fn tool(&self) -> Tool;
    /// Whether it runs as an MCP task for a client that takes tasks
    /// (long work: see [`crate::mcp::tasks`]).
    fn runs_as_task(&self) -> bool {
        false
    }
    /// Checks `arguments` without running anything: a task queued for
    /// later is refused now if it could only fail (bad arguments, a
    /// missing model), rather than failing as a task.
    fn check(&self, ctx: &Runtime, arguments: &Value) -> Result<(), GuardError> {
        let _ = (ctx, arguments);
        Ok(())
    }
    /// `Ok` carries the typed result. A task whose script failed is
    /// still `Ok`: its `status` says how it ended.
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>>;
}

/// Every built-in tool, in tools/list order.
pub fn all() -> Vec<Box<dyn Builtin>> {
    vec![
        #[cfg(feature = "agent")]
        Box::new(run_coding_task::RunCodingTask),
        Box::new(run_script::RunScript),
        Box::new(run_batch::RunBatch),
        Box::new(list_tasks::ListTasks),
        Box::new(get_task_result::GetTaskResult),
        Box::new(list_artifacts::ListArtifacts),
        Box::new(read_artifact::ReadArtifact),
        Box::new(list_guards::ListGuards),
        Box::new(describe_guard::DescribeGuard),
        Box::new(bundle_coverage::BundleCoverage),
        Box::new(check_backtest::CheckBacktest),
    ]
}

/// The MCP tool for a built-in with input type `T`; `title` is the human
/// name clients show.
pub(crate) fn tool<T: schemars::JsonSchema>(name: &'static str, title: &str, read_only: bool) -> Tool {
    let (schema, description) = crate::schema::input_schema::<T>();
    let mut tool = Tool::new(name, description, Arc::new(schema));
    tool.title = Some(title.into());
    tool.with_annotations(
        ToolAnnotations::new()
            .read_only(read_only)
            .destructive(false)
            .idempotent(read_only)
            .open_world(false),
    )
}

pub(crate) fn decode<T: DeserializeOwned>(arguments: Value) -> Result<T, GuardError> {
    crate::schema::decode_arguments(arguments)
}

/// A task's timeout: `timeout_seconds` (1 to the server maximum) or the
/// default task timeout, clamped to that maximum.
pub(crate) fn task_timeout(
    limits: &crate::limits::Limits,
    seconds: Option<u64>,
) -> Result<std::time::Duration, GuardError> {
    let max = limits.max_timeout.as_secs();
    let seconds = match seconds {
        Some(s) => in_range("timeout_seconds", s, 1, max)?,
        None => crate::limits::DEFAULT_TASK_TIMEOUT.as_secs().min(max),
    };
    Ok(std::time::Duration::from_secs(seconds))
}

pub(crate) use crate::schema::in_range;

/// `error`, or, when it is "no task" for a task of the caller that has
/// not ended and runs on another node (its files reach the object store
/// when it ends), an error saying so.
pub(crate) async fn explain_missing(
    records: &crate::task::records::Records,
    principal: &crate::tenant::Principal,
    task_id: &str,
    error: GuardError,
) -> GuardError {
    if error.code != crate::error::codes::NOT_FOUND {
        return error;
    }
    match records.get(principal, task_id).await {
        Ok(Some(record))
            if !matches!(record.state, crate::task::store::State::Ended(_))
                && record.node != records.node() =>
        {
            GuardError::new(
                crate::error::codes::NOT_FOUND,
                format!(
                    "task_id: task '{task_id}' has not ended; it runs on node {}, and its files reach the other nodes when it ends: read them there, or after it ends (tasks/get says when)",
                    record.node
                ),
            )
        }
        _ => error,
    }
}

#[cfg(test)]
mod tests {
    /// The registry reserves the built-ins' names for guards
    /// (`registry::BUILTIN_TOOLS`, below the MCP layer, so it cannot ask
    /// this module); the two lists must name the same tools, or a guard
    /// could shadow a built-in (or a name would be reserved for nothing).
    #[test]
    fn the_registry_reserves_exactly_the_builtin_names() {
        let mut served: Vec<&str> = super::all().iter().map(|builtin| builtin.name()).collect();
        if !cfg!(feature = "agent") {
            served.push("run_coding_task");
        }
        served.sort_unstable();
        let mut reserved = crate::registry::BUILTIN_TOOLS.to_vec();
        reserved.sort_unstable();
        assert_eq!(served, reserved);
    }
}
