//! `run_coding_task`: the model writes Rhai that composes the guards.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Builtin, BuiltinTool, Call, Reply, Runtime, decode, task_timeout, tool};
use warden_agent::ModelConfig;
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// Ask the server's model to solve a task by writing Rhai scripts that call the registered guards.
///
/// The model works in steps (code, observation, repair) inside the same sandbox as run_script and
/// must end with a final answer that passes the contract. Use it for multi-scenario analyses and
/// reports; read the files it writes with read_artifact. Returns {request_id, task_id, task_dir,
/// status, task_type, summary, metrics, assumptions, artifacts, steps, model_calls}.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RunCodingTaskInput {
    /// What to do, in plain language (units and conventions help: "vol 25%", "rate 4%").
    pub prompt: String,
    /// Seconds for the whole task (default 300, at most the server maximum).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

pub(super) struct RunCodingTask;

/// The decoded input, its timeout and the model configuration, or the
/// error naming what to fix.
fn prepare(
    ctx: &Runtime,
    arguments: Value,
) -> Result<(RunCodingTaskInput, std::time::Duration, ModelConfig), GuardError> {
    let input: RunCodingTaskInput = decode(arguments)?;
    if input.prompt.trim().is_empty() {
        return Err(GuardError::invalid_input("prompt", "must not be blank"));
    }
    let timeout = task_timeout(ctx.limits(), input.timeout_seconds)?;
    let config = ModelConfig::from_env()
        .map_err(|e| GuardError::new(warden_core::error::codes::MODEL_NOT_CONFIGURED, e.to_string()))?;
    Ok((input, timeout, config))
}

impl Builtin for RunCodingTask {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::RunCodingTask
    }
    fn mode(&self) -> &'static str {
        "coding_agent"
    }
    fn runs_as_task(&self) -> bool {
        true
    }
    fn tool(&self) -> rmcp::model::Tool {
        // The task view (MCP Apps) shows its result.
        crate::view::link(tool::<RunCodingTaskInput>(
            self.name(),
            "Run a coding task with a model",
            false,
        ))
    }
    fn check(&self, ctx: &Runtime, arguments: &Value) -> Result<(), GuardError> {
        prepare(ctx, arguments.clone()).map(drop)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let (input, timeout, config) = prepare(call.ctx, call.arguments)?;
            warden_agent::run_coding_task(
                call.ctx.tasks(),
                &config,
                &input.prompt,
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
