//! `list_guards`: the catalogue, one row per guard and script-only function.
//!
//! Read-only over the registry (see [`warden_core::catalogue`]); it runs nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Builtin, BuiltinTool, Call, Reply, decode, tool};
use warden_core::catalogue::{guard_entry, script_entry};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// List every guard with its category, a one-line summary, the data slots it needs, and how it runs.
///
/// Each row: name, category, summary (first line of the description), slots (required input fields),
/// optional_slots, mode (isolated | in_process | pure | script), callable ("json_and_script", or
/// "script_only" for functions that exist only inside run_script / coding-task scripts) and the reason.
/// Slots are the input field names shared across guards: see bundle_coverage. Call describe_guard for
/// one guard's schemas and conventions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListGuardsInput {
    /// Only rows of this category (e.g. "costs"); all rows when absent.
    #[serde(default)]
    pub category: Option<String>,
}

pub(super) struct ListGuards;

/// The catalogue (or one category of it).
#[derive(Serialize)]
struct Catalogue {
    count: usize,
    categories: Vec<String>,
    guards: Vec<Value>,
}

/// A catalogue row with the name and category it is sorted and filtered by.
struct Row<'a> {
    name: &'a str,
    category: &'a str,
    entry: Value,
}

impl Builtin for ListGuards {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::ListGuards
    }
    fn mode(&self) -> &'static str {
        "direct"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<ListGuardsInput>(self.name(), "List guards and script functions", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: ListGuardsInput = decode(call.arguments)?;
            // Only what this caller may call: a denied guard is not listed,
            // nor is a category only denied guards have.
            let registry = call.ctx.visible(call.origin);
            let mut rows: Vec<Row> = registry
                .iter()
                .map(|g| Row {
                    name: &g.name,
                    category: &g.category,
                    entry: guard_entry(g),
                })
                .collect();
            rows.extend(registry.script_functions().map(|f| Row {
                name: f.name,
                category: f.category,
                entry: script_entry(f),
            }));
            rows.sort_unstable_by(|a, b| a.name.cmp(b.name));
            let mut categories: Vec<&str> = rows.iter().map(|r| r.category).collect();
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
            rows.retain(|r| input.category.as_deref().is_none_or(|c| r.category == c));
            Reply::data(&Catalogue {
                count: rows.len(),
                categories,
                guards: rows.into_iter().map(|r| r.entry).collect(),
            })
        })
    }
}
