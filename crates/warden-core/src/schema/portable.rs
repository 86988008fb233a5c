//! Tool schemas rewritten for the clients and model APIs that receive them.
//!
//! schemars writes JSON Schema 2020-12 with `$defs`/`$ref`, `oneOf` of
//! `const` for documented unit enums, Rust-flavoured `format`s (`double`,
//! `uint64`) and the prompt-only keys `x-required-when`/`x-hint`. Many
//! clients and model APIs reject or mishandle those, so every exported
//! schema goes through [`portable`] first:
//!
//! - references are inlined (our types are never recursive; a recursive
//!   schema is reported as [`PortableError::Recursive`] instead of looping);
//! - unit enums become `{"type": "string", "enum": [...]}` (the variants'
//!   docs move into the description);
//! - `x-required-when`/`x-hint` move into the property's description, where
//!   every model reads them, and the keys are dropped;
//! - only keywords and formats the [`Target`] accepts are kept; what is
//!   dropped and matters to a caller (a default) is said in the description.
//!
//! OpenAI strict mode additionally gets every property required (optional
//! ones nullable: the server treats `null` as "not given", see
//! `schema::decode_arguments`) and `additionalProperties: false`; Gemini gets
//! its OpenAPI 3.0 subset (`nullable` instead of `null` types). The guard's
//! own schema (read by the prompt builder) is never changed. The rules each
//! target must satisfy are checked by `warden_testing::schema_targets`.

use serde_json::{Map, Value, json};

/// Who receives the schema. Only MCP is served; the others are the CLI's
/// `tools --format` exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// MCP `tools/list` (`inputSchema`, `outputSchema`): JSON Schema 2020-12.
    Mcp,
    /// Anthropic Messages API `input_schema`.
    Anthropic,
    /// OpenAI function `parameters` with `strict: true`.
    OpenaiStrict,
    /// OpenAI Chat Completions function `parameters` (not strict).
    OpenaiChat,
    /// Gemini `functionDeclarations[].parameters` (OpenAPI 3.0 subset).
    Gemini,
}

/// Why a schema cannot be made portable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PortableError {
    #[error(
        "schema references '{0}' recursively: a self-contained schema cannot express it; break the cycle in the Rust type"
    )]
    Recursive(String),
    #[error("schema references '{0}', which is not in its $defs")]
    Missing(String),
}

/// JSON Schema 2020-12 formats (the "format-annotation" vocabulary).
const STANDARD_FORMATS: &[&str] = &[
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
/// Formats OpenAI strict mode supports.
const OPENAI_FORMATS: &[&str] = &[
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
/// Keywords OpenAI strict mode supports (everything else is dropped).
const OPENAI_STRICT_KEYS: &[&str] = &[
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
/// Keywords of Gemini's function-declaration schema (OpenAPI 3.0 subset).
const GEMINI_KEYS: &[&str] = &[
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
/// Keywords whose value is one subschema.
const ONE: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "contains",
    "if",
    "then",
    "else",
];
/// Keywords whose value is a list of subschemas.
const LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value is a map of subschemas.
const MAPS: &[&str] = &["properties", "patternProperties"];

/// The portable schema; the raw one if it cannot be made portable, which
/// the registry already refuses for guards (`SchemaNotPortable`) and the
/// MCP crate's export tests rule out for built-in tools.
pub fn portable_or_raw(schema: &Map<String, Value>, target: Target) -> Map<String, Value> {
    portable(schema, target).unwrap_or_else(|_| schema.clone())
}

/// `schema` (a tool's input or output schema) rewritten for `target`.
pub fn portable(schema: &Map<String, Value>, target: Target) -> Result<Map<String, Value>, PortableError> {
    let empty = Map::new();
    let defs = definitions(schema).unwrap_or(&empty);
    // The root without its definitions and dialect, cloned once: each
    // definition is cloned only where a reference inlines it.
    let mut value = Value::Object(
        root_entries(schema)
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    );
    inline(&mut value, defs, &mut Vec::new())?;
    Ok(rewrite(value, schema.get("$schema").cloned(), target))
}

/// [`portable_or_raw`] of a schema the caller gives away (`tools/list`'s,
/// built once per server): rewritten where it lies, not cloned first and
/// dropped after (the first `tools/list` after start took 1.87 → 1.72 ms,
/// docs/benchmarks.md).
pub fn into_portable_or_raw(mut schema: Map<String, Value>, target: Target) -> Map<String, Value> {
    let dialect = schema.remove("$schema");
    let taken: Vec<(String, Value)> = ["$defs", "definitions"]
        .into_iter()
        .filter_map(|key| schema.remove_entry(key))
        .collect();
    // As [`definitions`] picks them: `$defs` when present, else draft-07's.
    let empty = Map::new();
    let defs = taken
        .first()
        .and_then(|(_, defs)| defs.as_object())
        .unwrap_or(&empty);
    let mut value = Value::Object(schema);
    match inline(&mut value, defs, &mut Vec::new()) {
        Ok(()) => rewrite(value, dialect, target),
        Err(_) => {
            // What was inlined before the error is each reference's own
            // definition: with the definitions back it means what the raw
            // schema meant.
            let mut raw = match value {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            raw.extend(dialect.map(|dialect| ("$schema".to_string(), dialect)));
            raw.extend(taken);
            raw
        }
    }
}

/// The inlined schema `value` simplified for `target`, with the dialect
/// back where the target keeps it.
fn rewrite(mut value: Value, dialect: Option<Value>, target: Target) -> Map<String, Value> {
    simplify(&mut value, target);
    if target == Target::OpenaiStrict {
        strict(&mut value);
    }
    let mut map = match value {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    if target == Target::Mcp
        && let Some(dialect) = dialect
    {
        map.insert("$schema".into(), dialect);
    }
    map
}

/// Whether [`portable`] can rewrite `schema`: the same error it would
/// give (a recursive or missing `$ref`), found by walking the references
/// without building the rewritten schema. The registry checks every
/// guard's schemas at startup, before the first answer: building each one
/// there (clones of every inlined definition) was half of the server's
/// start-up CPU.
pub fn check(schema: &Map<String, Value>) -> Result<(), PortableError> {
    let mut walk = Walk {
        defs: definitions(schema),
        stack: Vec::new(),
        acyclic: std::collections::HashSet::new(),
    };
    walk.node(root_entries(schema))
}

/// The definitions a schema's `$ref`s name (`$defs`, or draft-07's
/// `definitions`).
fn definitions(schema: &Map<String, Value>) -> Option<&Map<String, Value>> {
    schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object)
}

/// The root schema's own keywords: all but its definitions and dialect.
fn root_entries(schema: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> + Clone {
    schema
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "$schema" | "$defs" | "definitions"))
}

/// [`check`]'s walk: the nodes [`inline`] would visit, in its order.
struct Walk<'a> {
    defs: Option<&'a Map<String, Value>>,
    /// The definitions being expanded (a name here again is a cycle).
    stack: Vec<&'a str>,
    /// Definitions already walked to the end: nothing below them refers
    /// back to one being expanded, so a second visit finds nothing new.
    acyclic: std::collections::HashSet<&'a str>,
}

impl<'a> Walk<'a> {
    fn value(&mut self, value: &'a Value) -> Result<(), PortableError> {
        match value {
            Value::Object(map) => self.node(map.iter()),
            _ => Ok(()),
        }
    }

    fn node(
        &mut self,
        entries: impl Iterator<Item = (&'a String, &'a Value)> + Clone,
    ) -> Result<(), PortableError> {
        let reference = entries
            .clone()
            .find_map(|(key, value)| match (key.as_str(), value) {
                ("$ref", Value::String(reference)) => Some(reference),
                _ => None,
            });
        if let Some(reference) = reference {
            let name = reference.rsplit('/').next().unwrap_or_default();
            if self.stack.contains(&name) {
                return Err(PortableError::Recursive(name.to_string()));
            }
            let target = self
                .defs
                .and_then(|defs| defs.get_key_value(name))
                .ok_or_else(|| PortableError::Missing(name.to_string()))?;
            let name = target.0.as_str();
            if !self.acyclic.contains(name) {
                self.stack.push(name);
                self.value(target.1)?;
                self.stack.pop();
                self.acyclic.insert(name);
            }
            // The referring site's other keywords are inlined as schemas.
            for (key, item) in entries {
                if key != "$ref" {
                    self.value(item)?;
                }
            }
            return Ok(());
        }
        for (key, item) in entries {
            let key = key.as_str();
            if ONE.contains(&key) && item.is_object() {
                self.value(item)?;
            } else if LISTS.contains(&key)
                && let Value::Array(items) = item
            {
                for entry in items {
                    self.value(entry)?;
                }
            } else if MAPS.contains(&key)
                && let Value::Object(members) = item
            {
                for entry in members.values() {
                    self.value(entry)?;
                }
            }
        }
        Ok(())
    }
}

/// Replaces every `$ref` in `value` by its definition; `stack` holds the
/// definitions being expanded, so a cycle is an error, not a hang. On an
/// error, each reference replaced so far holds its own definition.
fn inline(
    value: &mut Value,
    defs: &Map<String, Value>,
    stack: &mut Vec<String>,
) -> Result<(), PortableError> {
    let Value::Object(map) = value else {
        return Ok(());
    };
    if let Some(Value::String(reference)) = map.get("$ref") {
        let name = reference.rsplit('/').next().unwrap_or_default().to_string();
        if stack.contains(&name) {
            return Err(PortableError::Recursive(name));
        }
        let mut resolved = defs
            .get(&name)
            .cloned()
            .ok_or_else(|| PortableError::Missing(name.clone()))?;
        stack.push(name);
        inline(&mut resolved, defs, stack)?;
        stack.pop();
        // The referring site's other keywords are inlined as schemas.
        for (key, item) in map.iter_mut() {
            if key != "$ref" {
                inline(item, defs, stack)?;
            }
        }
        // The referring site's own keywords (its description) win.
        let mut merged = match resolved {
            Value::Object(resolved) => resolved,
            _ => Map::new(),
        };
        merged.remove("title");
        map.remove("$ref");
        merged.extend(std::mem::take(map));
        *map = merged;
        return Ok(());
    }
    for (key, item) in map.iter_mut() {
        let key = key.as_str();
        if ONE.contains(&key) && item.is_object() {
            inline(item, defs, stack)?;
        } else if LISTS.contains(&key)
            && let Value::Array(items) = item
        {
            for entry in items.iter_mut() {
                inline(entry, defs, stack)?;
            }
        } else if MAPS.contains(&key)
            && let Value::Object(members) = item
        {
            for entry in members.values_mut() {
                inline(entry, defs, stack)?;
            }
        }
    }
    Ok(())
}

/// Rewrites one (already inlined) schema node and its children for `target`.
fn simplify(value: &mut Value, target: Target) {
    let Value::Object(map) = value else { return };
    unit_enum(map);
    one_of_as_any_of(map);
    fold_extensions(map);
    single_all_of(map);
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for property in properties.values_mut() {
            simplify(property, target);
        }
    }
    for key in ONE {
        if let Some(item @ Value::Object(_)) = map.get_mut(*key) {
            simplify(item, target);
        }
    }
    for key in LISTS {
        if let Some(Value::Array(items)) = map.get_mut(*key) {
            items.iter_mut().for_each(|item| simplify(item, target));
        }
    }
    formats(map, target);
    match target {
        Target::Gemini => gemini(map),
        Target::OpenaiStrict => {
            fold_default(map);
            map.retain(|key, _| OPENAI_STRICT_KEYS.contains(&key.as_str()));
        }
        Target::Mcp | Target::Anthropic | Target::OpenaiChat => {}
    }
}

/// `oneOf`/`anyOf` of string `const`s (schemars' shape for documented unit
/// enum variants) → `{"type": "string", "enum": [...]}`; a lone string
/// `const` → a one-value enum.
fn unit_enum(map: &mut Map<String, Value>) {
    if let Some(Value::String(only)) = map.get("const").cloned() {
        map.remove("const");
        map.insert("type".into(), json!("string"));
        map.insert("enum".into(), json!([only]));
        return;
    }
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(branches)) = map.get(key) else {
            continue;
        };
        let mut values = Vec::new();
        let mut notes = Vec::new();
        for branch in branches {
            let constant = branch
                .get("const")
                .and_then(Value::as_str)
                .map(|c| vec![c.to_string()])
                .or_else(|| {
                    let list = branch.get("enum")?.as_array()?;
                    list.iter().map(|v| v.as_str().map(str::to_string)).collect()
                });
            let Some(constant) = constant else { return };
            if let Some(Value::String(doc)) = branch.get("description") {
                notes.push(format!(
                    "`{}`: {}",
                    constant.join("`, `"),
                    doc.trim_end_matches('.')
                ));
            }
            values.extend(constant);
        }
        map.remove(key);
        map.insert("type".into(), json!("string"));
        map.insert("enum".into(), json!(values));
        if !notes.is_empty() {
            append_description(map, &format!("{}.", notes.join("; ")));
        }
        return;
    }
}

/// `oneOf` → `anyOf`. schemars writes `oneOf` for serde's untagged enums,
/// whose meaning is "the first branch that decodes": that is `anyOf`, which
/// OpenAI strict mode and Gemini accept and `oneOf` they do not.
fn one_of_as_any_of(map: &mut Map<String, Value>) {
    if !map.contains_key("anyOf")
        && let Some(branches) = map.remove("oneOf")
    {
        map.insert("anyOf".into(), branches);
    }
}

/// Whether `schema` has an object with free-form keys (a `{column: value}`
/// record, a map): OpenAI strict mode cannot express one (every object is
/// closed) and Gemini's OpenAPI subset needs named properties, so those
/// exports fall back to their JSON Schema forms (see `export`).
pub fn has_open_map(schema: &Map<String, Value>) -> bool {
    let open = match schema.get("additionalProperties") {
        Some(Value::Object(_)) | Some(Value::Bool(true)) => true,
        Some(_) => false,
        None => {
            schema.get("type") == Some(&json!("object"))
                && schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_none_or(Map::is_empty)
        }
    };
    open || schema.values().any(|value| match value {
        Value::Object(map) => has_open_map(map),
        Value::Array(items) => items.iter().filter_map(Value::as_object).any(has_open_map),
        _ => false,
    })
}

/// `x-required-when` and `x-hint` become a sentence of the description.
fn fold_extensions(map: &mut Map<String, Value>) {
    let when = map.remove("x-required-when");
    let hint = map.remove("x-hint");
    if let Some(Value::String(when)) = when {
        append_description(map, &format!("Required when {when}."));
    }
    if let Some(Value::String(hint)) = hint {
        append_description(map, &format!("Hint: {hint}."));
    }
    map.retain(|key, _| !key.starts_with("x-"));
}

/// `allOf: [X]` (one branch) is X.
fn single_all_of(map: &mut Map<String, Value>) {
    let single = matches!(map.get("allOf"), Some(Value::Array(items)) if items.len() == 1);
    if !single {
        return;
    }
    if let Some(Value::Array(mut items)) = map.remove("allOf")
        && let Some(Value::Object(inner)) = items.pop()
    {
        for (key, value) in inner {
            map.entry(key).or_insert(value);
        }
    }
}

/// Drops `format`s the target does not know (schemars' `double`, `uint64`…).
fn formats(map: &mut Map<String, Value>, target: Target) {
    let Some(Value::String(format)) = map.get("format") else {
        return;
    };
    let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
    let keep = match target {
        Target::Mcp | Target::Anthropic | Target::OpenaiChat => STANDARD_FORMATS.contains(&format.as_str()),
        Target::OpenaiStrict => OPENAI_FORMATS.contains(&format.as_str()),
        Target::Gemini => match kind {
            "number" => ["float", "double"].contains(&format.as_str()),
            "integer" => ["int32", "int64"].contains(&format.as_str()),
            "string" => ["enum", "date-time"].contains(&format.as_str()),
            _ => false,
        },
    };
    if !keep {
        map.remove("format");
    }
}

/// A dropped `default` is still worth telling the model.
fn fold_default(map: &mut Map<String, Value>) {
    if let Some(default) = map.remove("default") {
        append_description(map, &format!("Default: {default}."));
    }
}

fn append_description(map: &mut Map<String, Value>, text: &str) {
    let joined = match map.get("description").and_then(Value::as_str) {
        Some(existing) if !existing.is_empty() => format!("{existing} {text}"),
        _ => text.to_string(),
    };
    map.insert("description".into(), Value::String(joined));
}

/// Gemini's subset: one `type` plus `nullable`, no `null` branches, only
/// its keywords; integer bounds and defaults survive in the description.
fn gemini(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get("type").cloned() {
        let real: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if real.len() < types.len() {
            map.insert("nullable".into(), json!(true));
        }
        match real.as_slice() {
            [one] => {
                map.insert("type".into(), (*one).clone());
            }
            _ => {
                // Several real types: one branch each.
                let branches: Vec<Value> = real.iter().map(|t| json!({"type": t})).collect();
                map.remove("type");
                map.insert("anyOf".into(), json!(branches));
            }
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = map.remove(key) else {
            continue;
        };
        let (nulls, real): (Vec<Value>, Vec<Value>) = branches
            .into_iter()
            .partition(|b| b.get("type") == Some(&json!("null")));
        if !nulls.is_empty() {
            map.insert("nullable".into(), json!(true));
        }
        match <[Value; 1]>::try_from(real) {
            Ok([Value::Object(inner)]) => {
                for (key, value) in inner {
                    if key == "description" && map.contains_key("description") {
                        continue;
                    }
                    map.entry(key).or_insert(value);
                }
            }
            Ok([other]) => {
                map.insert("anyOf".into(), json!([other]));
            }
            Err(real) if !real.is_empty() => {
                map.insert("anyOf".into(), Value::Array(real));
            }
            Err(_) => {}
        }
    }
    if let Some(Value::Array(values)) = map.get("enum")
        && values.iter().any(|v| !v.is_string())
    {
        map.remove("enum");
    }
    if map.contains_key("enum") {
        map.insert("type".into(), json!("string"));
    }
    fold_default(map);
    if let Some(bound) = map.remove("exclusiveMinimum") {
        append_description(map, &format!("Must be greater than {bound}."));
    }
    if let Some(bound) = map.remove("exclusiveMaximum") {
        append_description(map, &format!("Must be less than {bound}."));
    }
    map.retain(|key, _| GEMINI_KEYS.contains(&key.as_str()));
}

/// OpenAI strict mode: every object closed and every property required,
/// the optional ones (not in the original `required`) made nullable.
fn strict(value: &mut Value) {
    let Value::Object(map) = value else { return };
    let is_object = map.get("type") == Some(&json!("object")) || map.contains_key("properties");
    if is_object {
        let required: Vec<String> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let mut all = Vec::new();
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                if !required.contains(name) {
                    nullable(property);
                }
                all.push(Value::String(name.clone()));
            }
        }
        map.entry("properties").or_insert_with(|| json!({}));
        map.insert("required".into(), Value::Array(all));
        map.insert("additionalProperties".into(), json!(false));
    }
    if let Some(Value::Object(members)) = map.get_mut("properties") {
        members.values_mut().for_each(strict);
    }
    if let Some(items @ Value::Object(_)) = map.get_mut("items") {
        strict(items);
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.iter_mut().for_each(strict);
    }
}

/// Lets `schema` also accept `null`.
fn nullable(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    match map.get_mut("type") {
        Some(Value::String(kind)) => {
            let kind = kind.clone();
            if kind != "null" {
                map.insert("type".into(), json!([kind, "null"]));
            }
            if let Some(Value::Array(values)) = map.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
        }
        Some(Value::Array(types)) => {
            if !types.contains(&json!("null")) {
                types.push(json!("null"));
            }
        }
        _ => {
            if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
                if !branches.iter().any(|b| b.get("type") == Some(&json!("null"))) {
                    branches.push(json!({"type": "null"}));
                }
            } else {
                let inner = std::mem::take(map);
                let description = inner.get("description").cloned();
                map.insert("anyOf".into(), json!([Value::Object(inner), {"type": "null"}]));
                if let Some(description) = description {
                    map.insert("description".into(), description);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn references_are_inlined_and_cycles_are_errors() {
        // $ref is replaced by its definition; a self-reference is reported, not expanded forever.
        let schema = object(json!({
            "type": "object",
            "properties": {"side": {"$ref": "#/$defs/Side", "description": "which side"}},
            "$defs": {"Side": {"type": "string", "enum": ["buy", "sell"]}}
        }));
        let out = portable(&schema, Target::Mcp).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"type": "object", "properties": {"side": {"type": "string", "enum": ["buy", "sell"], "description": "which side"}}})
        );
        let cyclic = object(json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}
        }));
        assert_eq!(
            portable(&cyclic, Target::Mcp),
            Err(PortableError::Recursive("Node".into()))
        );
    }

    #[test]
    fn a_schema_given_away_is_rewritten_as_a_borrowed_one_and_kept_raw_when_it_cannot_be() {
        // tools/list's path (into_portable_or_raw) must give exactly what portable gives.
        let defs = json!({
            "Side": {"title": "Side", "oneOf": [{"const": "buy", "description": "to buy"}, {"const": "sell"}]},
            "Leg": {"type": "object", "properties": {"side": {"$ref": "#/$defs/Side"}, "qty": {"type": "integer", "format": "uint32"}}}
        });
        let schema = object(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "legs": {"type": "array", "items": {"$ref": "#/$defs/Leg"}},
                "hedge": {"$ref": "#/$defs/Leg", "description": "optional hedge", "x-hint": "same side"}
            },
            "required": ["legs"],
            "$defs": defs
        }));
        for target in [
            Target::Mcp,
            Target::Anthropic,
            Target::OpenaiStrict,
            Target::OpenaiChat,
            Target::Gemini,
        ] {
            assert_eq!(
                into_portable_or_raw(schema.clone(), target),
                portable(&schema, target).unwrap(),
                "{target:?}"
            );
        }
        let draft07 = object(json!({
            "type": "object",
            "properties": {"p": {"$ref": "#/definitions/Side"}},
            "definitions": {"Side": {"type": "string"}}
        }));
        assert_eq!(
            into_portable_or_raw(draft07.clone(), Target::Mcp),
            portable(&draft07, Target::Mcp).unwrap()
        );
        // A cycle: the raw schema back, its definitions and dialect included
        // (a reference inlined before the error means what it meant).
        let cyclic = object(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/Leaf"}, "node": {"$ref": "#/$defs/Node"}},
            "$defs": {"Leaf": {"type": "number"}, "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}
        }));
        let raw = into_portable_or_raw(cyclic.clone(), Target::Mcp);
        assert_eq!(raw["$defs"], cyclic["$defs"]);
        assert_eq!(raw["$schema"], cyclic["$schema"]);
        assert_eq!(raw["properties"]["node"], cyclic["properties"]["node"]);
        assert!(
            raw["properties"]["a"] == json!({"type": "number"})
                || raw["properties"]["a"] == cyclic["properties"]["a"],
            "{raw:?}"
        );
    }

    #[test]
    fn check_gives_the_error_portable_gives() {
        // The registry's start-up check walks references without building: the same verdicts.
        let defs = json!({
            "Leaf": {"type": "number"},
            "Pair": {"type": "object", "properties": {"a": {"$ref": "#/$defs/Leaf"}, "b": {"$ref": "#/$defs/Leaf"}}},
            "Loop": {"type": "array", "items": {"$ref": "#/$defs/Back"}},
            "Back": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Loop"}]},
            "Self": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Self"}}
        });
        for properties in [
            json!({"p": {"$ref": "#/$defs/Pair"}, "q": {"$ref": "#/$defs/Pair", "description": "again"}}),
            json!({"l": {"$ref": "#/$defs/Loop"}}),
            json!({"s": {"items": {"$ref": "#/$defs/Self"}}}),
            json!({"m": {"$ref": "#/$defs/Nowhere"}}),
            json!({"x": {"type": "string"}}),
        ] {
            let schema = object(json!({"type": "object", "properties": properties, "$defs": defs}));
            assert_eq!(
                check(&schema),
                portable(&schema, Target::Mcp).map(drop),
                "{properties}"
            );
        }
        let root_ref = object(json!({"$ref": "#/$defs/Self", "$defs": defs}));
        assert_eq!(check(&root_ref), Err(PortableError::Recursive("Self".into())));
    }

    #[test]
    fn documented_unit_enums_become_string_enums() {
        // oneOf of const (schemars' shape when variants have docs) → type string + enum, docs kept.
        let schema = object(json!({"type": "object", "properties": {"kind": {"oneOf": [
            {"type": "string", "const": "call", "description": "A call."},
            {"type": "string", "const": "put"}
        ]}}}));
        let out = portable(&schema, Target::Mcp).unwrap();
        let kind = &out["properties"]["kind"];
        assert_eq!(kind["type"], "string");
        assert_eq!(kind["enum"], json!(["call", "put"]));
        assert_eq!(kind["description"], "`call`: A call.");
        assert!(kind.get("oneOf").is_none());
    }

    #[test]
    fn extensions_fold_into_descriptions_and_formats_are_filtered() {
        // x-required-when / x-hint become text; format double survives only for Gemini.
        let schema = object(json!({"type": "object", "properties": {"v": {
            "type": "number", "format": "double", "description": "Variance.",
            "x-required-when": "n > 1", "x-hint": "sample variance"
        }}}));
        let mcp = portable(&schema, Target::Mcp).unwrap();
        assert_eq!(
            mcp["properties"]["v"],
            json!({"type": "number", "description": "Variance. Required when n > 1. Hint: sample variance."})
        );
        let gemini = portable(&schema, Target::Gemini).unwrap();
        assert_eq!(gemini["properties"]["v"]["format"], "double");
    }

    #[test]
    fn strict_requires_everything_and_makes_optionals_nullable() {
        // OpenAI strict: all properties required, optional ones accept null, objects closed.
        let schema = object(json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": "number"},
            "b": {"type": "integer", "default": 3, "minimum": 0},
            "c": {"type": "object", "properties": {"d": {"type": "string"}}}
        }}));
        let out = Value::Object(portable(&schema, Target::OpenaiStrict).unwrap());
        assert_eq!(out["required"], json!(["a", "b", "c"]));
        assert_eq!(out["additionalProperties"], false);
        assert_eq!(out["properties"]["b"]["type"], json!(["integer", "null"]));
        assert_eq!(out["properties"]["b"]["description"], "Default: 3.");
        assert_eq!(out["properties"]["c"]["additionalProperties"], false);
        assert_eq!(out["properties"]["c"]["required"], json!(["d"]));
    }

    #[test]
    fn gemini_gets_nullable_instead_of_null_types() {
        // ["number","null"] and anyOf [X, null] become X + nullable: true.
        let schema = object(json!({"type": "object", "properties": {
            "a": {"type": ["number", "null"]},
            "b": {"anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "null"}], "description": "B."}
        }, "additionalProperties": false}));
        let out = Value::Object(portable(&schema, Target::Gemini).unwrap());
        assert_eq!(
            out["properties"]["a"],
            json!({"type": "number", "nullable": true})
        );
        assert_eq!(
            out["properties"]["b"],
            json!({"type": "array", "items": {"type": "number"}, "nullable": true, "description": "B."})
        );
        assert!(out.get("additionalProperties").is_none());
    }
}
