//! `describe_guard`: everything the registry knows about one guard.
//!
//! Read-only over the registry (see [`crate::catalogue`]); it runs nothing.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BoxFuture, Builtin, Call, decode, tool};
use crate::catalogue::{GUARD_REASON, SCRIPT_MODE, Slots, slots, summary};
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
        tool::<DescribeGuardInput>(self.name(), true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, GuardError>> {
        Box::pin(async move {
            let input: DescribeGuardInput = decode(call.arguments)?;
            let executor = &call.tasks.executor;
            let registry = executor.registry();
            if let Some(guard) = registry.get(&input.name) {
                let Slots { required, optional } = slots(guard);
                let hints = guard.hints;
                return Ok(json!({
                    "name": guard.name,
                    "category": guard.category,
                    "summary": summary(guard.description()),
                    "description": guard.description(),
                    "slots": required,
                    "optional_slots": optional,
                    "mode": guard.mode.as_str(),
                    "timeout_seconds": executor.limits().guard_deadline(guard.timeout).as_secs(),
                    "annotations": {
                        "read_only": hints.read_only,
                        "destructive": hints.destructive,
                        "idempotent": hints.idempotent,
                        "open_world": hints.open_world,
                    },
                    "callable": "json_and_script",
                    "reason": GUARD_REASON,
                    "input_schema": guard.input_schema(),
                    "output_schema": guard.output_schema(),
                }));
            }
            if let Some(function) = registry.script_function(&input.name) {
                return Ok(json!({
                    "name": function.name,
                    "category": function.category,
                    "summary": summary(function.description),
                    "description": function.description,
                    "signature": function.signature,
                    "slots": [],
                    "optional_slots": [],
                    "mode": SCRIPT_MODE,
                    "callable": "script_only",
                    "reason": function.reason,
                }));
            }
            let mut known: Vec<&str> = registry.names();
            known.extend(registry.script_functions().map(|f| f.name));
            known.sort_unstable();
            Err(GuardError {
                code: "unknown_guard".into(),
                message: format!(
                    "name: no guard named '{}'; use one list_guards shows: {}",
                    input.name,
                    known.join(", ")
                ),
                field: Some("name".into()),
            })
        })
    }
}
