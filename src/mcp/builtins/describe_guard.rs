//! `describe_guard`: everything the registry knows about one guard.
//!
//! Read-only over the registry (see [`crate::catalogue`]); it runs nothing.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BoxFuture, Builtin, Call, decode, tool};
use crate::catalogue::{guard_entry, script_entry};
use crate::error::GuardError;

/// Describe one guard: input and output schema, slots, execution mode, timeout, annotations, and its full description with the units and conventions it expects.
///
/// Script-only functions (listed by list_guards with callable "script_only") are described too: their
/// signature, semantics and why they cannot be called with JSON.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescribeGuardInput {
    /// The guard's name, as list_guards shows it (e.g. "check_cost_curve").
    pub name: String,
}

pub struct DescribeGuard;

impl Builtin for DescribeGuard {
    fn name(&self) -> &'static str {
        "describe_guard"
    }
    fn mode(&self) -> &'static str {
        "direct"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<DescribeGuardInput>(self.name(), "Describe a guard", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, GuardError>> {
        Box::pin(async move {
            let input: DescribeGuardInput = decode(call.arguments)?;
            let executor = &call.tasks.executor;
            let registry = executor.registry();
            // The list_guards row, plus what only a full description carries.
            if let Some(guard) = registry.get(&input.name) {
                let hints = guard.hints;
                let mut entry = guard_entry(guard);
                entry["description"] = json!(guard.description());
                entry["timeout_seconds"] = json!(executor.limits().guard_deadline(guard.timeout).as_secs());
                entry["annotations"] = json!({
                    "read_only": hints.read_only,
                    "destructive": hints.destructive,
                    "idempotent": hints.idempotent,
                    "open_world": hints.open_world,
                });
                // The schemas exactly as tools/list sends them (portable).
                let mcp = |schema| {
                    crate::mcp::export::portable_or_raw(schema, crate::schema::portable::Target::Mcp)
                };
                entry["input_schema"] = Value::Object(mcp(guard.input_schema()));
                // A content guard answers with content blocks: no schema.
                if !guard.content_output {
                    entry["output_schema"] = Value::Object(mcp(guard.output_schema()));
                }
                return Ok(entry);
            }
            if let Some(function) = registry.script_function(&input.name) {
                let mut entry = script_entry(function);
                entry["description"] = json!(function.description);
                return Ok(entry);
            }
            let mut known: Vec<&str> = registry.names();
            known.extend(registry.script_functions().map(|f| f.name));
            known.sort_unstable();
            Err(GuardError::new(
                crate::error::codes::UNKNOWN_GUARD,
                format!(
                    "name: no guard named '{}'; use one list_guards shows: {}",
                    input.name,
                    known.join(", ")
                ),
            )
            .with_field("name"))
        })
    }
}
