//! The system prompt, generated from the registry.
//!
//! Each guard appears with its Rhai call signature (named arguments in an
//! object map, optional ones marked `?`, enums spelled out), its output
//! shape and its doc text; then the helpers and the final-answer contract.
//! Nothing here is written by hand per guard.

use serde_json::{Map, Value};

use crate::guard::Guard;
use crate::registry::Registry;

const RULES: &str = r#"You are a careful quantitative analyst. You answer by writing Rhai scripts that call the
functions below, which run in a sandbox. Reply with exactly ONE fenced code block per message:

```rhai
// your code
```

Rules:
- Each function takes ONE object map of named arguments: f(#{name: value, ...}) and returns a map.
  Use floats for numbers (100.0, not 100) where the type is number.
- Variables and functions you define persist between your messages; the last expression's value,
  printed output (print(...)) and any error come back to you as the observation.
- Errors are catchable: try { ... } catch (e) { print(e.code + ": " + e.message); }
  (try is a statement, not an expression). A failed call still counts against the call budget.
- Helpers:
  write_artifact(filename, content)          // writes outputs/<filename>, 1 MiB max; content is a string
  write_artifact(filename, content, "base64")
  read_written_artifact(filename)            // reads back a file you wrote
  to_csv(rows, ["col1", "col2"])             // rows: array of maps -> CSV text
  print(value)
- There is no file system, network, eval or import.
- Finish by calling final_answer(#{task_type: ..., summary: "...", metrics: #{...}, assumptions: [...]}):
  task_type "analysis" (you called functions and report results; only analysis carries metrics),
  "no_action" (nothing needed calling: only valid if you made no calls), "needs_input" (the request
  lacks something: say what in summary), "unsupported" (the functions cannot do it), or "failed".
  summary must be non-blank; no other keys are allowed; numbers must be finite.
"#;

/// The whole system prompt for `registry`.
pub fn system_prompt(registry: &Registry) -> String {
    let mut text = String::from(RULES);
    text.push_str("\nFunctions:\n");
    for guard in registry.iter() {
        text.push_str(&describe(guard));
        text.push('\n');
    }
    let mut script_only = registry.script_functions().peekable();
    if script_only.peek().is_some() {
        text.push_str("\nScript-only functions (not guards over JSON; call them directly):\n");
        for function in script_only {
            let doc: String = function
                .description
                .lines()
                .map(|l| format!("    {l}\n"))
                .collect();
            text.push_str(&format!("- {}\n{doc}\n", function.signature));
        }
    }
    text
}

fn describe(guard: &Guard) -> String {
    let input = guard.input_schema();
    let output = guard.output_schema();
    let defs = input
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = input
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments = Vec::new();
    if let Some(properties) = input.get("properties").and_then(Value::as_object) {
        for (name, schema) in properties {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            arguments.push(format!("{name}{optional}: {}", type_of(schema, &defs)));
        }
    }
    let out_defs = output
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let returns = match output.get("properties").and_then(Value::as_object) {
        Some(properties) => {
            let fields: Vec<String> = properties
                .iter()
                .map(|(k, v)| format!("{k}: {}", type_of(v, &out_defs)))
                .collect();
            format!("#{{{}}}", fields.join(", "))
        }
        None => "map".into(),
    };
    let doc: String = guard
        .description()
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    format!(
        "- {}(#{{{}}}) -> {returns}\n{doc}",
        guard.tool_name(),
        arguments.join(", ")
    )
}

/// A short type for a schema: `number`, `"call"|"put"`, `array of number`…
fn type_of(schema: &Value, defs: &Map<String, Value>) -> String {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or_default();
        return match defs.get(name) {
            Some(def) => type_of(def, defs),
            None => name.to_string(),
        };
    }
    if let Some(constant) = schema.get("const") {
        return constant.to_string();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values.iter().map(Value::to_string).collect::<Vec<_>>().join("|");
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let mut kinds: Vec<String> = options.iter().map(|o| type_of(o, defs)).collect();
            kinds.dedup();
            let all_constants = options
                .iter()
                .all(|o| o.get("const").is_some() || o.get("enum").is_some());
            return kinds.join(if all_constants { "|" } else { " or " });
        }
    }
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "array" => {
            let item = schema
                .get("items")
                .map(|i| type_of(i, defs))
                .unwrap_or_else(|| "any".into());
            format!("array of {item}")
        }
        Some(Value::String(kind)) if kind == "object" => "map".into(),
        Some(Value::String(kind)) if kind == "integer" => "integer".into(),
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .filter(|k| *k != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    }
}
