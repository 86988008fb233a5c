//! The tool list and its contracts: which expected tools are missing, and
//! whether every listed schema and every `tool_contracts` entry holds.
//!
//! Called once per run by [`super::run`], after `initialize` and before any
//! case. Extra tools are allowed; a missing expected tool fails the run.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::assertions::{Mismatch, subset};
use super::report::{Schemas, Tools, Verdict};
use super::suite::{Suite, ToolContract};
use crate::schema_check::check_tool_schema;

/// Compares the listed tools with every suite's `expected_tools`.
pub(crate) fn tools(suites: &[Suite], listed: &[Value]) -> Tools {
    let actual: Vec<String> = listed
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    let any_expected = suites.iter().any(|s| s.expected_tools.is_some());
    let expected: BTreeSet<String> = suites
        .iter()
        .flat_map(|s| s.expected_tools.iter().flatten().cloned())
        .collect();
    let missing = expected.iter().filter(|n| !actual.contains(n)).cloned().collect();
    let unexpected = if any_expected {
        actual
            .iter()
            .filter(|n| !expected.contains(*n))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    Tools {
        expected: expected.into_iter().collect(),
        actual,
        missing,
        unexpected,
        error: None,
    }
}

/// Structural 2020-12 checks of every listed schema, then every contract.
pub(crate) fn schemas(suites: &[Suite], listed: &[Value]) -> Schemas {
    let mut failures = Vec::new();
    for tool in listed {
        let name = tool["name"].as_str().unwrap_or("(unnamed)");
        for (field, schema) in [
            ("inputSchema", tool.get("inputSchema")),
            ("outputSchema", tool.get("outputSchema")),
        ] {
            let Some(schema) = schema else {
                if field == "inputSchema" {
                    failures.push(Mismatch::new(
                        format!("tools.{name}.{field}"),
                        json!({"type": "object"}),
                        Value::Null,
                        "tool has no input schema",
                    ));
                }
                continue;
            };
            for problem in check_tool_schema(schema) {
                failures.push(Mismatch::new(
                    format!("tools.{name}.{field}"),
                    json!("a JSON Schema 2020-12 object schema"),
                    Value::Null,
                    problem,
                ));
            }
        }
    }
    for suite in suites {
        for (name, contract) in &suite.tool_contracts {
            match listed.iter().find(|t| t["name"] == name.as_str()) {
                Some(tool) => failures.extend(check_contract(name, contract, tool)),
                None => failures.push(Mismatch::new(
                    format!("tool_contracts.{name}"),
                    json!(name),
                    Value::Null,
                    format!(
                        "{} has a contract for a tool the server does not list",
                        suite.name
                    ),
                )),
            }
        }
    }
    let status = Verdict::of(&failures);
    let error = (!failures.is_empty()).then(|| super::report::describe_all(&failures));
    Schemas {
        status,
        error,
        failures,
    }
}

/// Checks one `tools/list` entry (MCP JSON form) against its contract.
pub(crate) fn check_contract(name: &str, contract: &ToolContract, tool: &Value) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let at = |field: &str| format!("tool_contracts.{name}.{field}");
    let schema = &tool["inputSchema"];
    if let Some(required) = &contract.required {
        let mut want: Vec<&str> = required.iter().map(String::as_str).collect();
        let mut have: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        want.sort_unstable();
        have.sort_unstable();
        if want != have {
            out.push(Mismatch::new(
                at("required"),
                json!(want),
                json!(have),
                "required set differs",
            ));
        }
    }
    match &contract.properties {
        Some(Value::Array(names)) => {
            for property in names.iter().filter_map(Value::as_str) {
                if schema["properties"].get(property).is_none() {
                    out.push(Mismatch::new(
                        at("properties"),
                        json!(property),
                        json!(property_names(schema)),
                        "input property missing",
                    ));
                }
            }
        }
        Some(expected) => subset(expected, &schema["properties"], &at("properties"), &mut out),
        None => {}
    }
    if let Some(needles) = &contract.description_contains {
        let description = tool["description"].as_str().unwrap_or_default();
        for needle in needles.items() {
            if !description.to_lowercase().contains(&needle.to_lowercase()) {
                out.push(Mismatch::new(
                    at("description_contains"),
                    json!(needle),
                    json!(description),
                    "description lacks this (case-insensitive)",
                ));
            }
        }
    }
    if let Some(read_only) = contract.read_only {
        let hint = tool["annotations"]["readOnlyHint"].as_bool().unwrap_or(false);
        if hint != read_only {
            out.push(Mismatch::new(
                at("read_only"),
                json!(read_only),
                json!(hint),
                "readOnlyHint differs",
            ));
        }
    }
    out
}

fn property_names(schema: &Value) -> Vec<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}
