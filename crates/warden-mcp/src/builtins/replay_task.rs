//! `replay_task`: run a finished script task again and compare (see
//! `warden_task::replay`).

use schemars::JsonSchema;
use serde::Deserialize;

use super::{BoxFuture, Builtin, BuiltinTool, Call, Reply, decode, tool};
use crate::error::GuardError;

/// Replay a finished run_script or run_coding_task task: its recorded script(s) run again in a fresh sandbox as a new task (the model is never called), then the two are compared call by call (hashes of every guard call's arguments and output) and artifact by artifact.
///
/// Returns {verdict: "identical" | "different", task_id, replay_task_id, replay_status, calls: {original, replay},
/// first_difference: {kind: "call" | "calls" | "artifact" | "value", ...both hashes or both values}, differences,
/// nondeterministic: [guards that read the outside world, whose differences may be the world's]}.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayTaskInput {
    /// The task to replay, e.g. "task_…" (one of yours, ended).
    pub task_id: String,
}

pub struct ReplayTask;

impl Builtin for ReplayTask {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::ReplayTask
    }
    fn mode(&self) -> &'static str {
        "script"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<ReplayTaskInput>(self.name(), "Replay a task and compare", false)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: ReplayTaskInput = decode(call.arguments)?;
            let report = crate::task::replay::replay(
                call.ctx.tasks(),
                &input.task_id,
                call.origin,
                call.cancel,
                call.progress.as_deref(),
            )
            .await?;
            Reply::data(&report)
        })
    }
}
