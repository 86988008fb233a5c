//! `run_script`: a client-written Rhai script run as a task, no model needed.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Builtin, BuiltinTool, Call, Reply, Runtime, decode, task_timeout, tool};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// Run a Rhai script that composes the registered guards, in the sandbox, as a task (no model involved).
///
/// Every guard is a function taking an object map, e.g. `my_guard(#{x: 1.0, label: "a"})` (list_guards names them),
/// returning a map. Helpers: `write_artifact(filename, content[, "utf-8"|"base64"])` writes outputs/<filename>
/// (1 MiB max), `read_written_artifact(filename)`, `to_csv(rows[, columns])`, `print(..)`, charts
/// `line_chart|bar_chart|scatter_chart(rows, #{x, y, title})` and `heatmap(rows, #{x, y, z, title})`
/// written with `write_artifact("name.png"|"name.svg", chart)` (PNGs also come back as image content),
/// `report(#{title, answer, sections: [#{heading, text|table|chart}]})` → report.html, and
/// `final_answer(#{task_type: "analysis"|"no_action"|"needs_input"|"unsupported"|"failed", summary, metrics, assumptions})`.
/// Guard errors are catchable: `try { … } catch (e) { e.code; e.message }`. No files, network or eval.
/// Returns {request_id, task_id, task_dir, status, task_type, summary, metrics, assumptions, artifacts, value, output}.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RunScriptInput {
    /// The Rhai source code.
    pub script: String,
    /// Seconds before the script worker is killed (default 300, at most the server maximum).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

pub(super) struct RunScript;

impl Builtin for RunScript {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::RunScript
    }
    fn mode(&self) -> &'static str {
        "script"
    }
    fn runs_as_task(&self) -> bool {
        true
    }
    fn tool(&self) -> rmcp::model::Tool {
        // The task view (MCP Apps) shows its result.
        crate::view::link(tool::<RunScriptInput>(self.name(), "Run a Rhai script", false))
    }
    fn check(&self, ctx: &Runtime, arguments: &Value) -> Result<(), GuardError> {
        let input: RunScriptInput = decode(arguments.clone())?;
        task_timeout(ctx.limits(), input.timeout_seconds).map(drop)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: RunScriptInput = decode(call.arguments)?;
            let timeout = task_timeout(call.ctx.limits(), input.timeout_seconds)?;
            call.ctx
                .tasks()
                .run_script(
                    &input.script,
                    timeout,
                    call.origin,
                    call.cancel,
                    (call.claim.as_deref(), call.progress.as_deref()),
                )
                .await
                .map(Reply::from)
        })
    }
}
