//! One checker per client a tool schema is exported to, each encoding the
//! schema subset that client documents. A checker returns every violation
//! with its JSON Pointer path; an empty list means the target accepts the
//! schema. They look at schemas only, never at data.
//!
//! Sources (read when writing them):
//! - MCP: `inputSchema`/`outputSchema` are JSON Schema objects with
//!   `"type": "object"` at the root (MCP spec, Tool); Warden additionally
//!   requires them self-contained (no `$ref`), with 2020-12 vocabulary only
//!   and 2020-12 formats, because clients forward them to model APIs.
//! - Anthropic: `input_schema` is a JSON Schema object; the API refuses
//!   `oneOf`/`allOf`/`anyOf` at the top level.
//! - OpenAI (Chat Completions, not strict): `parameters` must be
//!   `"type": "object"` with no `oneOf`/`anyOf`/`allOf`/`enum`/`not` at the
//!   root, and an array needs `items`.
//! - OpenAI strict (Structured Outputs, "Supported schemas"): every object
//!   has `additionalProperties: false` and lists every property in
//!   `required` (optional = nullable); supported keywords are type,
//!   properties, required, additionalProperties, items, enum, const, anyOf,
//!   description, title, `$ref`/`$defs`, pattern, format (date-time, time,
//!   date, duration, email, hostname, ipv4, ipv6, uuid), minimum, maximum,
//!   exclusiveMinimum, exclusiveMaximum, multipleOf, minItems, maxItems;
//!   no allOf/not/if/then/else/dependentSchemas/patternProperties; at most
//!   10 levels of object nesting and 5000 properties; the root is not anyOf.
//! - Gemini (function declarations, `Schema`: "a select subset of an
//!   OpenAPI 3.0 schema object"): fields type (one of string, number,
//!   integer, boolean, array, object — no `null`, no type lists), format
//!   (number: float, double; integer: int32, int64; string: enum,
//!   date-time), description, nullable, enum (strings), properties,
//!   required, items, minItems, maxItems, minimum, maximum, anyOf; no
//!   `$ref`, `additionalProperties`, `oneOf`, `allOf`, `const`, `default`;
//!   an object needs named `properties` ("should be non-empty for OBJECT
//!   type"). A schema outside the subset goes in the declaration's
//!   `parametersJsonSchema` (JSON Schema) instead.

use serde_json::{Map, Value};

/// Where a tool schema goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaTarget {
    Mcp,
    Anthropic,
    OpenaiStrict,
    OpenaiChat,
    Gemini,
}

impl SchemaTarget {
    /// Every target, for tests that check them all.
    pub const ALL: [SchemaTarget; 5] = [
        SchemaTarget::Mcp,
        SchemaTarget::Anthropic,
        SchemaTarget::OpenaiStrict,
        SchemaTarget::OpenaiChat,
        SchemaTarget::Gemini,
    ];
}

/// One rule a schema breaks, at `path` (a JSON Pointer, "" for the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub rule: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}",
            if self.path.is_empty() { "/" } else { &self.path },
            self.rule
        )
    }
}

/// Every keyword of JSON Schema 2020-12 (core, applicator, validation,
/// format-annotation, content and meta-data vocabularies).
const JSON_SCHEMA_KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$comment",
    "$ref",
    "$dynamicRef",
    "$defs",
    "$vocabulary",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "prefixItems",
    "items",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
];
const JSON_SCHEMA_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];
const OPENAI_STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "description",
    "title",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];
const OPENAI_STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
/// Deepest object nesting OpenAI strict mode accepts.
const OPENAI_MAX_NESTING: usize = 10;
/// Most properties (over the whole schema) OpenAI strict mode accepts.
const OPENAI_MAX_PROPERTIES: usize = 5000;
const GEMINI_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
];
const GEMINI_TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object"];

/// Everything `schema` does that `target` does not accept.
pub fn check_schema(target: SchemaTarget, schema: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(root) = schema.as_object() else {
        push(&mut out, "", "a tool schema must be a JSON object");
        return out;
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        push(&mut out, "", "the root must be \"type\": \"object\"");
    }
    let banned_at_root: &[&str] = match target {
        SchemaTarget::Mcp => &[],
        SchemaTarget::Anthropic => &["oneOf", "allOf", "anyOf"],
        SchemaTarget::OpenaiChat | SchemaTarget::OpenaiStrict => &["oneOf", "anyOf", "allOf", "enum", "not"],
        SchemaTarget::Gemini => &["anyOf"],
    };
    for key in banned_at_root {
        if root.contains_key(*key) {
            push(&mut out, "", &format!("'{key}' is not accepted at the top level"));
        }
    }
    let mut properties = 0;
    walk(target, root, "", 0, &mut properties, &mut out);
    if target == SchemaTarget::OpenaiStrict && properties > OPENAI_MAX_PROPERTIES {
        push(
            &mut out,
            "",
            &format!("{properties} properties; strict mode accepts at most {OPENAI_MAX_PROPERTIES}"),
        );
    }
    out
}

fn push(out: &mut Vec<Violation>, path: &str, rule: &str) {
    out.push(Violation {
        path: path.to_string(),
        rule: rule.to_string(),
    });
}

fn walk(
    target: SchemaTarget,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
    properties: &mut usize,
    out: &mut Vec<Violation>,
) {
    keywords(target, node, path, out);
    formats(target, node, path, out);
    if node.contains_key("$ref") || node.contains_key("$defs") || node.contains_key("definitions") {
        push(
            out,
            path,
            "references ($ref/$defs) must be inlined: the schema must be self-contained",
        );
    }
    if is_const_union(node) {
        push(
            out,
            path,
            "a unit enum must be {\"type\": \"string\", \"enum\": [...]}, not oneOf/anyOf of const",
        );
    }
    let kind = node.get("type");
    let is_object = kind == Some(&Value::from("object"));
    if kind.and_then(Value::as_str) == Some("array") && !node.contains_key("items") {
        push(out, path, "an array schema needs 'items'");
    }
    match target {
        SchemaTarget::OpenaiStrict => strict_rules(node, path, depth, is_object, out),
        SchemaTarget::Gemini => gemini_rules(node, path, out),
        _ => {}
    }
    if let Some(Value::Array(required)) = node.get("required") {
        let declared = node.get("properties").and_then(Value::as_object);
        for name in required.iter().filter_map(Value::as_str) {
            if !declared.is_some_and(|p| p.contains_key(name)) {
                push(out, path, &format!("'{name}' is required but not a property"));
            }
        }
    }
    let depth = depth + usize::from(is_object);
    if let Some(Value::Object(members)) = node.get("properties") {
        *properties += members.len();
        for (name, member) in members {
            child(
                target,
                member,
                &format!("{path}/properties/{name}"),
                depth,
                properties,
                out,
            );
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "contains",
        "if",
        "then",
        "else",
    ] {
        if let Some(sub @ Value::Object(_)) = node.get(key) {
            child(target, sub, &format!("{path}/{key}"), depth, properties, out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(branches)) = node.get(key) {
            for (n, branch) in branches.iter().enumerate() {
                child(
                    target,
                    branch,
                    &format!("{path}/{key}/{n}"),
                    depth,
                    properties,
                    out,
                );
            }
        }
    }
}

fn child(
    target: SchemaTarget,
    value: &Value,
    path: &str,
    depth: usize,
    properties: &mut usize,
    out: &mut Vec<Violation>,
) {
    match value.as_object() {
        Some(node) => walk(target, node, path, depth, properties, out),
        None if target == SchemaTarget::Mcp || target == SchemaTarget::Anthropic => {}
        None => push(
            out,
            path,
            "a subschema must be an object (boolean schemas are not accepted)",
        ),
    }
}

/// Keywords outside the target's vocabulary.
fn keywords(target: SchemaTarget, node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let known: &[&str] = match target {
        SchemaTarget::Mcp | SchemaTarget::Anthropic | SchemaTarget::OpenaiChat => JSON_SCHEMA_KEYWORDS,
        SchemaTarget::OpenaiStrict => OPENAI_STRICT_KEYWORDS,
        SchemaTarget::Gemini => GEMINI_KEYWORDS,
    };
    for key in node.keys() {
        if !known.contains(&key.as_str()) {
            push(
                out,
                path,
                &format!("keyword '{key}' is not accepted by this target"),
            );
        }
    }
    // A dialect line belongs to documents, not to function parameters
    // (strict and Gemini already report it as an unknown keyword).
    if matches!(target, SchemaTarget::Anthropic | SchemaTarget::OpenaiChat) && node.contains_key("$schema") {
        push(
            out,
            path,
            "'$schema' belongs to documents, not to function parameters",
        );
    }
}

fn formats(target: SchemaTarget, node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let Some(format) = node.get("format").and_then(Value::as_str) else {
        return;
    };
    let ok = match target {
        SchemaTarget::Mcp | SchemaTarget::Anthropic | SchemaTarget::OpenaiChat => {
            JSON_SCHEMA_FORMATS.contains(&format)
        }
        SchemaTarget::OpenaiStrict => OPENAI_STRICT_FORMATS.contains(&format),
        SchemaTarget::Gemini => match node.get("type").and_then(Value::as_str) {
            Some("number") => ["float", "double"].contains(&format),
            Some("integer") => ["int32", "int64"].contains(&format),
            Some("string") => ["enum", "date-time"].contains(&format),
            _ => false,
        },
    };
    if !ok {
        push(out, path, &format!("format '{format}' is not accepted here"));
    }
}

/// `oneOf`/`anyOf` whose every branch is a `const`.
fn is_const_union(node: &Map<String, Value>) -> bool {
    ["oneOf", "anyOf"].iter().any(|key| {
        node.get(*key)
            .and_then(Value::as_array)
            .is_some_and(|branches| !branches.is_empty() && branches.iter().all(|b| b.get("const").is_some()))
    })
}

fn strict_rules(
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
    is_object: bool,
    out: &mut Vec<Violation>,
) {
    if !["type", "anyOf", "enum", "const", "$ref"]
        .iter()
        .any(|key| node.contains_key(*key))
    {
        push(out, path, "every schema needs a 'type' (or anyOf/enum/const)");
    }
    if !is_object {
        return;
    }
    if depth + 1 > OPENAI_MAX_NESTING {
        push(
            out,
            path,
            &format!("objects nest deeper than {OPENAI_MAX_NESTING} levels"),
        );
    }
    if node.get("additionalProperties") != Some(&Value::Bool(false)) {
        push(out, path, "every object needs \"additionalProperties\": false");
    }
    let required: Vec<&str> = node
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(Value::Object(members)) = node.get("properties") {
        for name in members.keys() {
            if !required.contains(&name.as_str()) {
                push(
                    out,
                    path,
                    &format!("property '{name}' must be listed in 'required' (make it nullable if optional)"),
                );
            }
        }
    }
}

fn gemini_rules(node: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    match node.get("type") {
        Some(Value::String(kind)) if GEMINI_TYPES.contains(&kind.to_ascii_lowercase().as_str()) => {}
        Some(Value::String(kind)) => push(
            out,
            path,
            &format!("type '{kind}' is not a Gemini type (use nullable for null)"),
        ),
        Some(_) => push(
            out,
            path,
            "type must be one string (use nullable instead of a type list)",
        ),
        None if node.contains_key("anyOf") => {}
        None => push(out, path, "a Gemini schema needs a 'type'"),
    }
    if let Some(values) = node.get("enum").and_then(Value::as_array)
        && (values.iter().any(|v| !v.is_string())
            || node.get("type").and_then(Value::as_str) != Some("string"))
    {
        push(out, path, "enum is for strings only, with \"type\": \"string\"");
    }
    if node.get("type").and_then(Value::as_str) == Some("object")
        && node
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        push(
            out,
            path,
            "an object needs non-empty 'properties' (Gemini has no free-form maps)",
        );
    }
    if node.get("nullable").is_some_and(|n| !n.is_boolean()) {
        push(out, path, "nullable must be a boolean");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A schema every target accepts (closed for OpenAI strict, which
    /// requires it; Gemini has no `additionalProperties`).
    fn good(target: SchemaTarget) -> Value {
        let mut schema = json!({"type": "object", "required": ["a", "b"], "properties": {
            "a": {"type": "number", "description": "A."},
            "b": {"type": "string", "enum": ["x", "y"]}
        }});
        if target == SchemaTarget::OpenaiStrict {
            schema["additionalProperties"] = json!(false);
        }
        schema
    }

    fn rules(target: SchemaTarget, schema: &Value) -> Vec<String> {
        check_schema(target, schema)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_plain_closed_schema_passes_every_target() {
        // The checkers are not so strict that nothing passes.
        for target in SchemaTarget::ALL {
            assert_eq!(rules(target, &good(target)), Vec::<String>::new(), "{target:?}");
        }
    }

    #[test]
    fn every_target_rejects_refs_const_unions_unknown_keywords_and_non_object_roots() {
        // What schemars emits by default fails everywhere, with the path named.
        let raw = json!({"type": "object", "properties": {
            "side": {"$ref": "#/$defs/Side"},
            "kind": {"oneOf": [{"const": "a"}, {"const": "b"}]},
            "v": {"type": "number", "x-hint": "h"}
        }, "$defs": {"Side": {"type": "string"}}});
        for target in SchemaTarget::ALL {
            let found = rules(target, &raw);
            assert!(
                found
                    .iter()
                    .any(|r| r.starts_with("/properties/side:") && r.contains("$ref")),
                "{target:?} {found:?}"
            );
            assert!(
                found
                    .iter()
                    .any(|r| r.starts_with("/properties/kind:") && r.contains("unit enum")),
                "{target:?} {found:?}"
            );
            assert!(
                found
                    .iter()
                    .any(|r| r.starts_with("/properties/v:") && r.contains("x-hint")),
                "{target:?} {found:?}"
            );
            assert!(
                !rules(target, &json!({"type": "string"})).is_empty(),
                "{target:?}"
            );
        }
    }

    #[test]
    fn mcp_and_anthropic_reject_rust_formats_and_anthropic_top_level_unions() {
        // format "double" is not a JSON Schema format; Anthropic refuses root anyOf.
        let double = json!({"type": "object", "properties": {"a": {"type": "number", "format": "double"}}});
        assert!(
            rules(SchemaTarget::Mcp, &double)
                .iter()
                .any(|r| r.contains("double"))
        );
        let union = json!({"type": "object", "anyOf": [{"type": "object", "required": ["a"], "properties": {"a": {"type": "number"}}}], "properties": {"a": {"type": "number"}}});
        assert!(rules(SchemaTarget::Mcp, &union).is_empty());
        assert!(
            rules(SchemaTarget::Anthropic, &union)
                .iter()
                .any(|r| r.contains("top level"))
        );
    }

    #[test]
    fn openai_chat_rejects_arrays_without_items() {
        // "array schema missing items" is an OpenAI error.
        let schema = json!({"type": "object", "properties": {"a": {"type": "array"}}});
        assert!(
            rules(SchemaTarget::OpenaiChat, &schema)
                .iter()
                .any(|r| r.starts_with("/properties/a:") && r.contains("items"))
        );
    }

    #[test]
    fn openai_strict_rejects_open_objects_optional_properties_defaults_and_deep_nesting() {
        // Strict mode's own rules, on top of the chat rules.
        let schema = json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": "number", "default": 1},
            "b": {"type": "string", "format": "uri"}
        }});
        let found = rules(SchemaTarget::OpenaiStrict, &schema);
        assert!(
            found
                .iter()
                .any(|r| r == "/: every object needs \"additionalProperties\": false"),
            "{found:?}"
        );
        assert!(
            found.iter().any(|r| r.contains("property 'b' must be listed")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|r| r.starts_with("/properties/a:") && r.contains("'default'")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|r| r.starts_with("/properties/b:") && r.contains("uri")),
            "{found:?}"
        );
        let mut deep =
            json!({"type": "object", "additionalProperties": false, "required": [], "properties": {}});
        for _ in 0..OPENAI_MAX_NESTING {
            deep = json!({"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": deep}});
        }
        assert!(
            rules(SchemaTarget::OpenaiStrict, &deep)
                .iter()
                .any(|r| r.contains("nest deeper"))
        );
        let untyped = json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"description": "A."}}});
        assert!(
            rules(SchemaTarget::OpenaiStrict, &untyped)
                .iter()
                .any(|r| r.starts_with("/properties/a:") && r.contains("'type'"))
        );
        // The chat target accepts what strict refuses for strictness alone.
        assert!(
            rules(SchemaTarget::OpenaiChat, &schema)
                .iter()
                .all(|r| r.contains("uri")),
            "{:?}",
            rules(SchemaTarget::OpenaiChat, &schema)
        );
    }

    #[test]
    fn gemini_rejects_type_lists_additional_properties_and_foreign_formats() {
        // Gemini's OpenAPI subset: one type + nullable, no additionalProperties, its formats only.
        let schema = json!({"type": "object", "additionalProperties": false, "properties": {
            "a": {"type": ["number", "null"]},
            "b": {"type": "integer", "format": "uint64"},
            "c": {"type": "null"},
            "d": {"type": "number", "format": "double", "nullable": true},
            "e": {"type": "object"}
        }});
        let found = rules(SchemaTarget::Gemini, &schema);
        assert!(
            found
                .iter()
                .any(|r| r.starts_with("/:") && r.contains("additionalProperties")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|r| r.starts_with("/properties/a:") && r.contains("type list")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|r| r.starts_with("/properties/b:") && r.contains("uint64")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|r| r.starts_with("/properties/c:") && r.contains("nullable")),
            "{found:?}"
        );
        assert!(!found.iter().any(|r| r.starts_with("/properties/d")), "{found:?}");
        assert!(
            found
                .iter()
                .any(|r| r.starts_with("/properties/e:") && r.contains("non-empty")),
            "{found:?}"
        );
    }
}
