//! A structural check of JSON Schema 2020-12 documents, without a validator
//! crate: every keyword Warden's schemas (and clients) rely on must have the
//! shape the 2020-12 dialect gives it, `$ref`s must resolve inside the
//! document, and a tool schema's root must be `"type": "object"`.
//!
//! Used by preflight's registration check and by the scenario runner's
//! schema check. It never validates *data* against a schema; unknown
//! keywords are annotations and pass.
//!
//! Decision (issue 11): kept instead of the `jsonschema` crate. Checking a
//! schema against the 2020-12 meta-schema with it would replace ~200 lines
//! here but add its regex and format-validation stack to every build of the
//! scenario runner and of `--check`, for a check that only needs shapes and
//! local `$ref`s. Revisit if data validation (instances against schemas) is
//! ever needed: then the crate is the right tool.

use serde_json::{Map, Value};

/// The only `$schema` value accepted when one is given.
pub const DIALECT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Deepest subschema nesting examined: 64. Deeper documents are reported
/// rather than walked (a guard schema is never that deep).
const MAX_DEPTH: usize = 64;

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];
/// Keywords whose value is one subschema.
const ONE_SCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "contentSchema",
];
/// Keywords whose value is a non-empty array of subschemas.
const SCHEMA_LISTS: &[&str] = &["prefixItems", "allOf", "anyOf", "oneOf"];
/// Keywords whose value is an object of subschemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
const NUMBERS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];
const COUNTS: &[&str] = &[
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
];
const STRINGS: &[&str] = &[
    "title",
    "description",
    "pattern",
    "format",
    "$id",
    "$anchor",
    "$comment",
];

/// Problems with a tool schema (input or output): empty when it is a
/// well-formed 2020-12 schema whose root is an object schema. Each problem
/// names its location as a JSON pointer (`#/properties/spot/type`).
pub fn check_tool_schema(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Value::Object(root) = schema else {
        problems.push("#: the schema must be a JSON object".to_string());
        return problems;
    };
    if root.get("type") != Some(&Value::String("object".into())) {
        problems.push(format!(
            "#/type: a tool schema's root must be \"type\": \"object\", found {}",
            root.get("type")
                .map(Value::to_string)
                .unwrap_or_else(|| "nothing".into())
        ));
    }
    if let Some(dialect) = root.get("$schema")
        && dialect.as_str() != Some(DIALECT_2020_12)
    {
        problems.push(format!(
            "#/$schema: expected \"{DIALECT_2020_12}\", found {dialect}"
        ));
    }
    walk(schema, root, "#", 0, &mut problems);
    problems
}

fn walk(node: &Value, root: &Map<String, Value>, at: &str, depth: usize, out: &mut Vec<String>) {
    let map = match node {
        Value::Bool(_) => return,
        Value::Object(map) => map,
        other => {
            out.push(format!(
                "{at}: a schema must be an object or a boolean, found {other}"
            ));
            return;
        }
    };
    if depth > MAX_DEPTH {
        out.push(format!(
            "{at}: nested deeper than {MAX_DEPTH} levels; not examined further"
        ));
        return;
    }
    for (key, value) in map {
        let here = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
        check_keyword(key, value, root, &here, depth, out);
    }
}

fn check_keyword(
    key: &str,
    value: &Value,
    root: &Map<String, Value>,
    here: &str,
    depth: usize,
    out: &mut Vec<String>,
) {
    match key {
        "type" => check_type(value, here, out),
        "required" => check_string_set(value, here, out),
        "enum" if !value.is_array() => out.push(format!("{here}: must be an array")),
        "$ref" => check_ref(value, root, here, out),
        "items" if value.is_array() => out.push(format!(
            "{here}: an array of schemas is the pre-2020-12 tuple form; use prefixItems"
        )),
        "dependentRequired" => match value {
            Value::Object(map) => {
                for (name, list) in map {
                    check_string_set(list, &format!("{here}/{name}"), out);
                }
            }
            _ => out.push(format!("{here}: must be an object of string arrays")),
        },
        k if ONE_SCHEMA.contains(&k) => walk(value, root, here, depth + 1, out),
        k if SCHEMA_LISTS.contains(&k) => match value {
            Value::Array(items) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, root, &format!("{here}/{i}"), depth + 1, out);
                }
            }
            _ => out.push(format!("{here}: must be a non-empty array of schemas")),
        },
        k if SCHEMA_MAPS.contains(&k) => match value {
            Value::Object(map) => {
                for (name, sub) in map {
                    walk(sub, root, &format!("{here}/{name}"), depth + 1, out);
                }
            }
            _ => out.push(format!("{here}: must be an object of schemas")),
        },
        k if NUMBERS.contains(&k) => {
            if !value.is_number() {
                out.push(format!("{here}: must be a number, found {value}"));
            } else if k == "multipleOf" && value.as_f64().is_some_and(|n| n <= 0.0) {
                out.push(format!("{here}: must be greater than 0"));
            }
        }
        k if COUNTS.contains(&k) && !value.is_u64() => {
            out.push(format!("{here}: must be a non-negative integer, found {value}"));
        }
        k if STRINGS.contains(&k) && !value.is_string() => {
            out.push(format!("{here}: must be a string, found {value}"));
        }
        _ => {}
    }
}

fn check_type(value: &Value, here: &str, out: &mut Vec<String>) {
    let names: Vec<&Value> = match value {
        Value::Array(list) if !list.is_empty() => list.iter().collect(),
        Value::String(_) => vec![value],
        _ => {
            out.push(format!(
                "{here}: must be a type name or a non-empty array of them"
            ));
            return;
        }
    };
    for name in &names {
        if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
            out.push(format!(
                "{here}: unknown type {name}; expected one of {}",
                TYPES.join(", ")
            ));
        }
    }
    check_unique(&names, here, out);
}

fn check_string_set(value: &Value, here: &str, out: &mut Vec<String>) {
    let Value::Array(list) = value else {
        out.push(format!("{here}: must be an array of strings"));
        return;
    };
    if list.iter().any(|v| !v.is_string()) {
        out.push(format!("{here}: must contain only strings"));
    }
    check_unique(&list.iter().collect::<Vec<_>>(), here, out);
}

fn check_unique(items: &[&Value], here: &str, out: &mut Vec<String>) {
    for (i, item) in items.iter().enumerate() {
        if items[..i].contains(item) {
            out.push(format!("{here}: {item} appears twice"));
        }
    }
}

/// A local `$ref` (`#/...`) must point at something in this document.
fn check_ref(value: &Value, root: &Map<String, Value>, here: &str, out: &mut Vec<String>) {
    let Some(target) = value.as_str() else {
        out.push(format!("{here}: must be a string"));
        return;
    };
    let Some(pointer) = target.strip_prefix('#') else {
        // Remote references cannot be checked offline; clients rarely follow them.
        return;
    };
    let document = Value::Object(root.clone());
    if !pointer.is_empty() && document.pointer(pointer).is_none() {
        out.push(format!(
            "{here}: \"{target}\" does not resolve inside this schema"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn derived_shapes_pass_and_broken_ones_are_located() {
        // A schemars-style schema passes; each malformed keyword is reported with its pointer.
        let good = json!({
            "$schema": DIALECT_2020_12, "type": "object", "required": ["kind"],
            "properties": {"kind": {"$ref": "#/$defs/Kind"}, "n": {"type": ["number", "null"], "minimum": 0}},
            "$defs": {"Kind": {"type": "string", "enum": ["call", "put"]}}
        });
        assert!(
            check_tool_schema(&good).is_empty(),
            "{:?}",
            check_tool_schema(&good)
        );
        let bad = json!({
            "type": "array", "required": "kind",
            "properties": {"a": {"type": "float"}, "b": {"$ref": "#/$defs/Missing"}, "c": {"items": [{}]}},
            "minLength": -1
        });
        let problems = check_tool_schema(&bad).join("\n");
        for needle in [
            "#/type: a tool schema's root",
            "#/required: must be an array",
            "#/properties/a/type: unknown type",
            "#/properties/b/$ref",
            "#/properties/c/items",
            "#/minLength",
        ] {
            assert!(problems.contains(needle), "{needle} missing from:\n{problems}");
        }
    }
}
