//! `replay_task`: run a finished script task again and compare (see
//! `warden_task::replay`).

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Builtin, BuiltinTool, Call, Reply, decode, tool};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// Replay a finished run_script or run_coding_task task: its recorded script(s) run again in a fresh sandbox as a new task under the original task's limits (its timeout and call budgets; the model is never called), then the two are compared call by call (hashes of every guard call's arguments and output) and artifact by artifact. A script whose file no longer matches the receipt's SHA-256 is not run: the verdict is "script_differs".
///
/// Returns {verdict: "identical" | "different" | "script_differs", task_id, replay_task_id, replay_status,
/// limits: {timeout_ms, door_calls, inline_calls}, limits_from: "receipt" | "defaults", calls: {original, replay},
/// first_difference: {kind: "script" | "call" | "calls" | "artifact" | "value", ...both hashes or both values}, differences,
/// nondeterministic: [guards that read the outside world, whose differences may be the world's]}.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplayTaskInput {
    /// The task to replay, e.g. "task_…" (one of yours, ended).
    pub task_id: String,
}

pub(super) struct ReplayTask;

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
            let report = warden_task::replay::replay(
                call.ctx.tasks(),
                &input.task_id,
                call.origin,
                call.cancel,
                (call.claim.as_deref(), call.progress.as_deref()),
            )
            .await?;
            Reply::data(&report)
        })
    }
}
