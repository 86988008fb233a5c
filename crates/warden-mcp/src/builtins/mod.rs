//! The server's built-in tools, one file each, all the same shape.
//!
//! Like guards, each has a typed input (its schema and description are
//! derived) and returns a typed [`Reply`] or a [`GuardError`]. They reach
//! the world through one context, [`Runtime`] (registry, executor, store,
//! records, the task runner); guard calls they cause still go through the
//! executor. To add one, add its variant to [`BuiltinTool`] (the one list
//! of built-ins, which the registry also reads to reserve the names), write
//! a file with a type implementing [`Builtin`], and return it from
//! `builtin`; the `match` there has no wildcard, so a variant without an
//! impl does not compile.

mod bundle_coverage;
mod check_backtest;
mod context;
mod describe_guard;
mod get_task_result;
mod list_artifacts;
mod list_guards;
mod list_tasks;
mod read_artifact;
mod replay_task;
mod reply;
pub(crate) mod run_batch;
#[cfg(feature = "agent")]
mod run_coding_task;
mod run_script;
mod search_guards;
mod verify_receipt;

pub use context::Runtime;
pub use reply::Reply;

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use warden_calls::events::Origin;
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;
use warden_core::registry::BuiltinTool;

/// One invocation of a built-in tool.
pub struct Call<'a> {
    /// What the tool may use.
    pub ctx: &'a Runtime,
    pub arguments: Value,
    /// The request's origin; a tool that creates a task sets `task_id`.
    pub origin: &'a mut Origin,
    /// Fired when the client cancels the request.
    pub cancel: CancellationToken,
    /// Progress sink when the client sent a progressToken, or the record
    /// of a task this server claimed.
    pub progress: Option<Arc<warden_script::host::progress::Progress>>,
    /// The queued task this server claimed and runs with this call (a
    /// client asked for an MCP task), taken by the task when it begins.
    pub claim: Option<Arc<warden_task::Claim>>,
}

/// A tool the server provides itself.
pub trait Builtin: Send + Sync {
    /// Which built-in this is; its name comes from here, so each tool name
    /// is written once, in [`BuiltinTool::name`].
    fn kind(&self) -> BuiltinTool;
    /// The MCP tool name.
    fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// The `mode` its events record.
    fn mode(&self) -> &'static str {
        "artifact"
    }
    fn tool(&self) -> Tool;
    /// Whether it runs as an MCP task for a client that takes tasks
    /// (long work: see `crate::tasks`).
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

/// Every built-in tool this build serves, in tools/list order
/// ([`BuiltinTool::ALL`]).
pub fn all() -> Vec<Box<dyn Builtin>> {
    BuiltinTool::ALL
        .iter()
        .filter_map(|tool| builtin(*tool))
        .collect()
}

/// The implementation of `tool`, or `None` when this build leaves it out
/// (`run_coding_task` without the `agent` feature: its name stays
/// reserved). No wildcard arm: one list of built-ins ([`BuiltinTool`]),
/// so a new variant fails to compile until it has an impl here.
fn builtin(tool: BuiltinTool) -> Option<Box<dyn Builtin>> {
    Some(match tool {
        #[cfg(feature = "agent")]
        BuiltinTool::RunCodingTask => Box::new(run_coding_task::RunCodingTask),
        #[cfg(not(feature = "agent"))]
        BuiltinTool::RunCodingTask => return None,
        BuiltinTool::RunScript => Box::new(run_script::RunScript),
        BuiltinTool::RunBatch => Box::new(run_batch::RunBatch),
        BuiltinTool::ListTasks => Box::new(list_tasks::ListTasks),
        BuiltinTool::GetTaskResult => Box::new(get_task_result::GetTaskResult),
        BuiltinTool::ListArtifacts => Box::new(list_artifacts::ListArtifacts),
        BuiltinTool::ReadArtifact => Box::new(read_artifact::ReadArtifact),
        BuiltinTool::ListGuards => Box::new(list_guards::ListGuards),
        BuiltinTool::SearchGuards => Box::new(search_guards::SearchGuards),
        BuiltinTool::DescribeGuard => Box::new(describe_guard::DescribeGuard),
        BuiltinTool::BundleCoverage => Box::new(bundle_coverage::BundleCoverage),
        BuiltinTool::CheckBacktest => Box::new(check_backtest::CheckBacktest),
        BuiltinTool::VerifyReceipt => Box::new(verify_receipt::VerifyReceipt),
        BuiltinTool::ReplayTask => Box::new(replay_task::ReplayTask),
    })
}

/// The MCP tool for a built-in with input type `T`; `title` is the human
/// name clients show.
pub(crate) fn tool<T: schemars::JsonSchema>(name: &'static str, title: &str, read_only: bool) -> Tool {
    let (schema, description) = warden_core::schema::input_schema::<T>();
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
    warden_core::schema::decode_arguments(arguments)
}

/// A task's timeout: `timeout_seconds` (1 to the server maximum) or the
/// default task timeout, clamped to that maximum.
pub fn task_timeout(
    limits: &warden_calls::limits::CallLimits,
    seconds: Option<u64>,
) -> Result<std::time::Duration, GuardError> {
    let max = limits.max_timeout.as_secs();
    let seconds = match seconds {
        Some(s) => in_range("timeout_seconds", s, 1, max)?,
        None => warden_task::limits::DEFAULT_TASK_TIMEOUT.as_secs().min(max),
    };
    Ok(std::time::Duration::from_secs(seconds))
}

pub(crate) use warden_core::schema::in_range;

/// `error`, or, when it is "no task" for a task of the caller that has
/// not ended and runs on another node (its files reach the object store
/// when it ends), an error saying so.
pub(crate) async fn explain_missing(
    records: &warden_task::records::Records,
    principal: &warden_calls::tenant::Principal,
    task_id: &str,
    error: GuardError,
) -> GuardError {
    if error.code != warden_core::error::codes::NOT_FOUND {
        return error;
    }
    match records.get(principal, task_id).await {
        Ok(Some(record))
            if !matches!(record.state, warden_task::store::State::Ended(_))
                && record.node != records.node() =>
        {
            GuardError::new(
                warden_core::error::codes::NOT_FOUND,
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
    use super::{BuiltinTool, all, builtin};

    #[test]
    fn each_builtin_answers_to_its_own_variant() {
        // builtin(t) is the impl of t (not of another tool), and all() serves
        // every built-in this build has, in BuiltinTool::ALL order.
        for tool in BuiltinTool::ALL {
            match builtin(*tool) {
                Some(imp) => assert_eq!(imp.kind(), *tool),
                None => assert!(*tool == BuiltinTool::RunCodingTask && !cfg!(feature = "agent")),
            }
        }
        let served: Vec<&str> = all().iter().map(|b| b.name()).collect();
        let expected: Vec<&str> = BuiltinTool::ALL
            .iter()
            .filter(|t| cfg!(feature = "agent") || **t != BuiltinTool::RunCodingTask)
            .map(|t| t.name())
            .collect();
        assert_eq!(served, expected);
    }
}
