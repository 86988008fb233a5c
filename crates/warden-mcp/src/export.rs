//! Tool definitions in the shapes different clients expect, all derived from
//! the same registry: MCP `tools/list`, Anthropic, OpenAI Responses and
//! OpenAI Chat Completions, Gemini.
//!
//! Every schema leaves through [`warden_core::schema::portable`]: self-contained,
//! string enums, and only the keywords the receiving target accepts.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
#[cfg(feature = "cli")]
use serde_json::Value;
use serde_json::json;

use warden_core::guard::Guard;
use warden_core::registry::Registry;
#[cfg(feature = "cli")]
use warden_core::schema::portable::has_open_map;
#[cfg(feature = "cli")]
use warden_core::schema::portable::portable_or_raw;
use warden_core::schema::portable::{Target, into_portable_or_raw};

#[cfg(feature = "cli")]
/// Output formats of `tools --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ToolFormat {
    /// MCP tools/list entries (`inputSchema`, `outputSchema`, `annotations`).
    Mcp,
    /// Anthropic Messages API tools (`name`, `description`, `input_schema`).
    Anthropic,
    /// OpenAI Responses API function tools in strict mode (`type`, `name`,
    /// `parameters`, `strict: true`): every property required, optional ones
    /// nullable, every object closed.
    Openai,
    /// OpenAI Chat Completions tools (`{type: function, function: {...}}`).
    OpenaiChat,
    /// Gemini function declarations (`name`, `description`, `parameters` in
    /// its OpenAPI 3.0 subset).
    Gemini,
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
    );
    // Content blocks are not structuredContent: no schema describes them.
    if !guard.content_output {
        tool = tool.with_raw_output_schema(Arc::new(guard.output_schema().clone()));
    }
    let mut tool = tool
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
/// Every tool in `format`, in the order given. `tools` are the raw tools
/// (see [`all_tools`]); each schema is made portable for the target here.
pub fn export(tools: &[Tool], format: ToolFormat) -> Value {
    Value::Array(tools.iter().map(|tool| entry(tool, format)).collect())
}

#[cfg(feature = "cli")]
fn entry(tool: &Tool, format: ToolFormat) -> Value {
    let parameters = |target| Value::Object(portable_or_raw(&tool.input_schema, target));
    let (name, description) = (&tool.name, tool.description.as_deref().unwrap_or_default());
    match format {
        ToolFormat::Mcp => serde_json::to_value(for_mcp(tool.clone())).unwrap_or(Value::Null),
        ToolFormat::Anthropic => json!({
            "name": name, "description": description, "input_schema": parameters(Target::Anthropic),
        }),
        // A free-form map cannot be strict: that tool goes non-strict
        // (OpenAI allows mixing) with the chat form of its schema.
        ToolFormat::Openai if has_open_map(&tool.input_schema) => json!({
            "type": "function", "name": name, "description": description,
            "parameters": parameters(Target::OpenaiChat), "strict": false,
        }),
        ToolFormat::Openai => json!({
            "type": "function", "name": name, "description": description,
            "parameters": parameters(Target::OpenaiStrict), "strict": true,
        }),
        ToolFormat::OpenaiChat => json!({
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters(Target::OpenaiChat)},
        }),
        // Gemini's OpenAPI subset needs named properties; a free-form map
        // goes in `parametersJsonSchema` (JSON Schema) instead.
        ToolFormat::Gemini if has_open_map(&tool.input_schema) => json!({
            "name": name, "description": description, "parametersJsonSchema": parameters(Target::OpenaiChat),
        }),
        ToolFormat::Gemini => json!({
            "name": name, "description": description, "parameters": parameters(Target::Gemini),
        }),
    }
}

/// Registry order tools, for `tools/list` and the exports.
pub fn mcp_tools(registry: &Registry, limits: &warden_calls::limits::CallLimits) -> Vec<Tool> {
    registry
        .iter()
        .map(|guard| mcp_tool(guard, limits.guard_deadline(guard.timeout).as_secs()))
        .collect()
}

/// Guards and built-in tools, in name order, with their schemas as derived
/// (not yet portable: see [`for_mcp`] and [`export`]).
pub fn all_tools(registry: &Registry, limits: &warden_calls::limits::CallLimits) -> Vec<Tool> {
    let mut tools = mcp_tools(registry, limits);
    tools.extend(crate::builtins::all().iter().map(|b| b.tool()));
    tools.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// `tool` as `tools/list` sends it: input and output schemas portable.
pub fn for_mcp(mut tool: Tool) -> Tool {
    // A tool fresh from [`all_tools`] holds the only reference to its
    // schemas: they are rewritten where they lie (a shared one is cloned).
    tool.input_schema = portable_for_mcp(tool.input_schema);
    tool.output_schema = tool.output_schema.map(portable_for_mcp);
    tool
}

fn portable_for_mcp(schema: Arc<JsonObject>) -> Arc<JsonObject> {
    Arc::new(into_portable_or_raw(Arc::unwrap_or_clone(schema), Target::Mcp))
}

#[cfg(all(test, feature = "cli"))]
mod tests {
    use super::*;
    use warden_testing::schema_targets::{SchemaTarget, check_schema};

    #[test]
    fn every_builtin_exports_a_schema_every_target_accepts() {
        // Built-ins are not in any app's registry: check them here for all five targets.
        let tools: Vec<Tool> = crate::builtins::all().iter().map(|b| b.tool()).collect();
        let mut problems = Vec::new();
        for tool in &tools {
            for schema in [Some(&tool.input_schema), tool.output_schema.as_ref()]
                .into_iter()
                .flatten()
            {
                assert!(
                    warden_core::schema::portable::portable(schema, Target::Mcp).is_ok(),
                    "{} is not portable",
                    tool.name
                );
            }
            let mcp = for_mcp(tool.clone());
            for schema in [Some(&mcp.input_schema), mcp.output_schema.as_ref()]
                .into_iter()
                .flatten()
            {
                let found = check_schema(SchemaTarget::Mcp, &Value::Object(schema.as_ref().clone()));
                problems.extend(found.iter().map(|v| format!("{} mcp {v}", tool.name)));
            }
        }
        for (format, target, pointer) in [
            (ToolFormat::Anthropic, SchemaTarget::Anthropic, "/input_schema"),
            (ToolFormat::Openai, SchemaTarget::OpenaiStrict, "/parameters"),
            (
                ToolFormat::OpenaiChat,
                SchemaTarget::OpenaiChat,
                "/function/parameters",
            ),
            (ToolFormat::Gemini, SchemaTarget::Gemini, "/parameters"),
        ] {
            for entry in export(&tools, format).as_array().into_iter().flatten() {
                let (target, schema) = fallback(target, entry, pointer);
                let found = check_schema(target, &schema);
                problems.extend(found.iter().map(|v| format!("{} {target:?} {v}", entry)));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// The schema to check in an export entry: a non-strict OpenAI entry or
    /// a Gemini `parametersJsonSchema` entry is checked as JSON Schema.
    fn fallback(target: SchemaTarget, entry: &Value, pointer: &str) -> (SchemaTarget, Value) {
        if entry["strict"] == false {
            return (SchemaTarget::OpenaiChat, entry["parameters"].clone());
        }
        if let Some(schema) = entry.get("parametersJsonSchema") {
            return (SchemaTarget::OpenaiChat, schema.clone());
        }
        (target, entry.pointer(pointer).cloned().unwrap_or_default())
    }

    #[test]
    fn open_maps_fall_back_to_json_schema_forms() {
        // A {column: value} record cannot be strict or Gemini-typed: those entries say so.
        let schema: JsonObject = serde_json::from_value(json!({"type": "object", "properties": {
            "rows": {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "number"}}}
        }}))
        .unwrap_or_default();
        let tool = Tool::new("t", "T.", Arc::new(schema));
        let openai = export(std::slice::from_ref(&tool), ToolFormat::Openai);
        assert_eq!(openai[0]["strict"], false);
        let gemini = export(std::slice::from_ref(&tool), ToolFormat::Gemini);
        assert!(gemini[0].get("parameters").is_none() && gemini[0].get("parametersJsonSchema").is_some());
    }
}
