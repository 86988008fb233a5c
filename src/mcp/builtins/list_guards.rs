//! `list_guards`: the catalogue, one row per guard and script-only function.
//!
//! Read-only over the registry (see [`crate::catalogue`]); it runs nothing.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BoxFuture, Builtin, Call, decode, tool};
use crate::catalogue::{guard_entry, script_entry};
use crate::error::GuardError;

/// List every guard with its category, a one-line summary, the data slots it needs, and how it runs.
///
/// Each row: name, category, summary (first line of the description), slots (required input fields),
/// optional_slots, mode (isolated | in_process | pure | script), callable ("json_and_script", or
/// "script_only" for functions that exist only inside run_script / coding-task scripts) and the reason.
/// Slots are the input field names shared across guards: see bundle_coverage. Call describe_guard for
/// one guard's schemas and conventions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListGuardsInput {
    /// Only rows of this category (e.g. "costs"); all rows when absent.
    #[serde(default)]
    pub category: Option<String>,
}

pub struct ListGuards;

impl Builtin for ListGuards {
    fn name(&self) -> &'static str {
        "list_guards"
    }
    fn mode(&self) -> &'static str {
        "direct"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<ListGuardsInput>(self.name(), "List guards and script functions", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, GuardError>> {
        Box::pin(async move {
            let input: ListGuardsInput = decode(call.arguments)?;
            let registry = call.tasks.executor.registry();
            let mut rows: Vec<Value> = registry.iter().map(guard_entry).collect();
            rows.extend(registry.script_functions().map(script_entry));
            rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            let mut categories: Vec<&str> = rows.iter().filter_map(|r| r["category"].as_str()).collect();
            categories.sort_unstable();
            categories.dedup();
            if let Some(wanted) = &input.category
                && !categories.contains(&wanted.as_str())
            {
                return Err(GuardError::invalid_input(
                    "category",
                    format!(
                        "no guard has category '{wanted}'; use one of: {}",
                        categories.join(", ")
                    ),
                ));
            }
            let categories: Vec<String> = categories.into_iter().map(String::from).collect();
            rows.retain(|r| input.category.as_deref().is_none_or(|c| r["category"] == c));
            Ok(json!({"count": rows.len(), "categories": categories, "guards": rows}))
        })
    }
}
