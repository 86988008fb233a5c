//! Tool definitions in the shapes different clients expect, all derived from
//! the same registry: MCP `tools/list`, Anthropic, OpenAI Responses and
//! OpenAI Chat Completions.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
#[cfg(feature = "cli")]
use serde_json::Value;
use serde_json::json;

use crate::guard::Guard;
use crate::registry::Registry;

#[cfg(feature = "cli")]
/// Output formats of `tools --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ToolFormat {
    /// MCP tools/list entries (`inputSchema`, `outputSchema`, `annotations`).
    Mcp,
    /// Anthropic Messages API tools (`name`, `description`, `input_schema`).
    Anthropic,
    /// OpenAI Responses API function tools (`type`, `name`, `parameters`).
    Openai,
    /// OpenAI Chat Completions tools (`{type: function, function: {...}}`).
    OpenaiChat,
}

/// The MCP tool for one guard. Execution details ride in `_meta` under the
/// `warden/` prefix so clients can show them without parsing descriptions.
pub fn mcp_tool(guard: &Guard, timeout_seconds: u64) -> Tool {
    let hints = guard.hints;
    let mut meta = JsonObject::new();
    meta.insert("warden/mode".into(), json!(guard.mode.as_str()));
    meta.insert("warden/timeout_seconds".into(), json!(timeout_seconds));
    let mut tool = Tool::new(
        guard.name.clone(),
        guard.description().to_string(),
        Arc::new(guard.input_schema().clone()),
    )
    .with_raw_output_schema(Arc::new(guard.output_schema().clone()))
    .with_annotations(
        ToolAnnotations::new()
            .read_only(hints.read_only)
            .destructive(hints.destructive)
            .idempotent(hints.idempotent)
            .open_world(hints.open_world),
    )
    .with_meta(rmcp::model::MetaObject(meta));
    tool.title = guard.title.clone();
    tool
}

#[cfg(feature = "cli")]
/// Every guard in `format`, in registry order.
pub fn export(registry: &Registry, tools: &[Tool], format: ToolFormat) -> Value {
    let entries: Vec<Value> = registry
        .iter()
        .zip(tools)
        .map(|(guard, tool)| entry(guard, tool, format))
        .collect();
    Value::Array(entries)
}

#[cfg(feature = "cli")]
fn entry(guard: &Guard, tool: &Tool, format: ToolFormat) -> Value {
    let parameters = Value::Object(guard.input_schema().clone());
    match format {
        ToolFormat::Mcp => serde_json::to_value(tool).unwrap_or(Value::Null),
        ToolFormat::Anthropic => json!({
            "name": guard.name, "description": guard.description(), "input_schema": parameters,
        }),
        ToolFormat::Openai => json!({
            "type": "function", "name": guard.name, "description": guard.description(),
            "parameters": parameters,
        }),
        ToolFormat::OpenaiChat => json!({
            "type": "function",
            "function": {"name": guard.name, "description": guard.description(), "parameters": parameters},
        }),
    }
}

/// Registry order tools, for `tools/list` and the exports.
pub fn mcp_tools(registry: &Registry, limits: &crate::limits::Limits) -> Vec<Tool> {
    registry
        .iter()
        .map(|guard| mcp_tool(guard, limits.guard_deadline(guard.timeout).as_secs()))
        .collect()
}
