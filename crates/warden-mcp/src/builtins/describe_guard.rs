//! `describe_guard`: everything the registry knows about one guard.
//!
//! Read-only over the registry (see [`warden_core::catalogue`]); it runs nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Builtin, BuiltinTool, Call, Reply, decode, tool};
use warden_core::catalogue::{guard_entry, script_entry};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// Describe one guard: input and output schema, slots, execution mode, timeout, annotations, and its full description with the units and conventions it expects.
///
/// Script-only functions (listed by list_guards with callable "script_only") are described too: their
/// signature, semantics and why they cannot be called with JSON.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DescribeGuardInput {
    /// The guard's name, as list_guards shows it (list_guards gives every name).
    pub name: String,
}

pub(super) struct DescribeGuard;

/// A guard's description: its `list_guards` row and what only a full
/// description carries.
#[derive(Serialize)]
struct GuardDescription {
    #[serde(flatten)]
    row: Value,
    description: String,
    timeout_seconds: u64,
    annotations: Annotations,
    /// The schemas exactly as tools/list sends them (portable).
    input_schema: Map<String, Value>,
    /// A content guard answers with content blocks: no schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<Map<String, Value>>,
}

#[derive(Serialize)]
struct Annotations {
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
}

/// A script-only function's description: its row and full description.
#[derive(Serialize)]
struct FunctionDescription {
    #[serde(flatten)]
    row: Value,
    description: &'static str,
}

impl Builtin for DescribeGuard {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::DescribeGuard
    }
    fn mode(&self) -> &'static str {
        "direct"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<DescribeGuardInput>(self.name(), "Describe a guard", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: DescribeGuardInput = decode(call.arguments)?;
            // A denied guard is described exactly as a name never registered.
            let registry = call.ctx.visible(call.origin);
            if let Some(guard) = registry.get(&input.name) {
                let hints = guard.hints;
                let mcp = |schema: &Map<String, Value>| {
                    warden_core::schema::portable::portable_or_raw(
                        schema,
                        warden_core::schema::portable::Target::Mcp,
                    )
                };
                return Reply::data(&GuardDescription {
                    row: guard_entry(guard),
                    description: guard.description().to_string(),
                    timeout_seconds: call.ctx.limits().guard_deadline(guard.timeout).as_secs(),
                    annotations: Annotations {
                        read_only: hints.read_only,
                        destructive: hints.destructive,
                        idempotent: hints.idempotent,
                        open_world: hints.open_world,
                    },
                    input_schema: mcp(guard.input_schema()),
                    output_schema: (!guard.content_output).then(|| mcp(guard.output_schema())),
                });
            }
            if let Some(function) = registry.script_function(&input.name) {
                return Reply::data(&FunctionDescription {
                    row: script_entry(function),
                    description: function.description,
                });
            }
            let mut known: Vec<&str> = registry.names();
            known.extend(registry.script_functions().map(|f| f.name));
            known.sort_unstable();
            Err(GuardError::new(
                warden_core::error::codes::UNKNOWN_GUARD,
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
