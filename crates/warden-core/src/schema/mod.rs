//! Schemas and argument decoding derived from the guard's Rust types.
//!
//! The input schema is JSON Schema 2020-12 with a root `"type": "object"`;
//! the input type's doc comment is lifted out of it to become the tool
//! description. A non-object output (a number, a list) is wrapped as
//! `{"result": value}` so structuredContent is always an object.

pub mod portable;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::error::{GuardError, codes};

/// Root schema of `T` as a JSON object, for deserialization or serialization.
fn root_schema<T: JsonSchema>(for_serialize: bool) -> Map<String, Value> {
    let mut settings = SchemaSettings::draft2020_12();
    if for_serialize {
        settings = settings.for_serialize();
    }
    let schema = settings.into_generator().into_root_schema_for::<T>();
    match schema.to_value() {
        Value::Object(map) => map,
        // `true`/`false` schemas: describe as "anything".
        _ => Map::new(),
    }
}

/// The input schema of `T` and its doc comment (the tool description).
pub fn input_schema<T: JsonSchema>() -> (Map<String, Value>, String) {
    let mut schema = root_schema::<T>(false);
    schema.remove("title");
    let description = match schema.remove("description") {
        Some(Value::String(text)) => text,
        _ => String::new(),
    };
    (schema, description)
}

/// The output schema of `T`, and whether results must be wrapped as
/// `{"result": value}` because `T` is not an object.
pub fn output_schema<T: JsonSchema>() -> (Map<String, Value>, bool) {
    let mut schema = root_schema::<T>(true);
    schema.remove("title");
    if schema.get("type") == Some(&json!("object")) {
        return (schema, false);
    }
    let dialect = schema.remove("$schema");
    let defs = schema.remove("$defs");
    let mut wrapped = Map::new();
    if let Some(dialect) = dialect {
        wrapped.insert("$schema".into(), dialect);
    }
    wrapped.insert("type".into(), json!("object"));
    wrapped.insert("properties".into(), json!({ "result": Value::Object(schema) }));
    wrapped.insert("required".into(), json!(["result"]));
    if let Some(defs) = defs {
        wrapped.insert("$defs".into(), defs);
    }
    (wrapped, true)
}

/// A guard's output as JSON, with no non-finite number silently turned
/// into `null` (serde_json's default). Where the output schema allows it
/// for that field, the payload convention applies: ±∞ become the strings
/// `"Infinity"` / `"-Infinity"` and NaN becomes `null`; anywhere else the
/// call fails with `non_finite_output` naming the field. `wraps` says the
/// value goes under `result` (see [`output_schema`]).
pub fn output_value<O: serde::Serialize>(
    output: &O,
    schema: &Map<String, Value>,
    wraps: bool,
) -> Result<Value, GuardError> {
    let mut value = serde_json::to_value(output).map_err(|e| {
        GuardError::new(
            crate::error::codes::BAD_OUTPUT,
            format!("guard result is not valid JSON: {e}"),
        )
    })?;
    // serde_json writes a non-finite number as null, so a result without
    // nulls has none: only results with nulls pay for the second look.
    if contains_null(&value) {
        let mut found = Vec::new();
        if let Ok(dynamic) = rhai::serde::to_dynamic(output) {
            non_finite(&dynamic, &mut Vec::new(), &mut found);
        }
        for (mut path, number) in found {
            if wraps {
                path.insert(0, Step::Key("result".into()));
            }
            let replacement = convention(number)
                .filter(|(_, kind)| allows(schema, schema, &path, kind))
                .map(|(value, _)| value)
                .ok_or_else(|| {
                    let field = path_text(&path);
                    GuardError::new(
                        codes::NON_FINITE_OUTPUT,
                        format!(
                            "{field}: the guard returned {number}, which JSON cannot carry, and the output schema allows no string or null there; return a finite number, or declare the field as a number-or-string (\"Infinity\"/\"-Infinity\", null for NaN)"
                        ),
                    )
                    .with_field(field)
                })?;
            set(&mut value, &path[usize::from(wraps)..], replacement);
        }
    }
    Ok(value)
}

/// One step of a path into a value.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn path_text(path: &[Step]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Key(key) if text.is_empty() => text.push_str(key),
            Step::Key(key) => {
                text.push('.');
                text.push_str(key);
            }
            Step::Index(n) => text.push_str(&format!("[{n}]")),
        }
    }
    if text.is_empty() { "result".into() } else { text }
}

fn contains_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(contains_null),
        Value::Object(map) => map.values().any(contains_null),
        _ => false,
    }
}

/// Paths of the non-finite floats in `value`.
fn non_finite(value: &rhai::Dynamic, path: &mut Vec<Step>, found: &mut Vec<(Vec<Step>, f64)>) {
    if let Ok(number) = value.as_float()
        && !number.is_finite()
    {
        found.push((path.clone(), number));
    } else if let Some(items) = value.read_lock::<rhai::Array>() {
        for (n, item) in items.iter().enumerate() {
            path.push(Step::Index(n));
            non_finite(item, path, found);
            path.pop();
        }
    } else if let Some(map) = value.read_lock::<rhai::Map>() {
        for (key, item) in map.iter() {
            path.push(Step::Key(key.to_string()));
            non_finite(item, path, found);
            path.pop();
        }
    }
}

/// The payload convention for `number` and the JSON type it needs.
fn convention(number: f64) -> Option<(Value, &'static str)> {
    if number.is_nan() {
        Some((Value::Null, "null"))
    } else if number > 0.0 {
        Some((Value::from("Infinity"), "string"))
    } else {
        Some((Value::from("-Infinity"), "string"))
    }
}

/// Whether the schema at `path` accepts a value of JSON type `kind`.
fn allows(root: &Map<String, Value>, schema: &Map<String, Value>, path: &[Step], kind: &str) -> bool {
    if let Some(Value::String(reference)) = schema.get("$ref") {
        let name = reference.rsplit('/').next().unwrap_or_default();
        let target = ["$defs", "definitions"]
            .iter()
            .find_map(|defs| root.get(*defs)?.get(name)?.as_object());
        return target.is_some_and(|target| allows(root, target, path, kind));
    }
    for combinator in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(combinator) {
            return branches
                .iter()
                .filter_map(Value::as_object)
                .any(|branch| allows(root, branch, path, kind));
        }
    }
    let Some((step, rest)) = path.split_first() else {
        return match schema.get("type") {
            Some(Value::String(t)) => t == kind,
            Some(Value::Array(types)) => types.iter().any(|t| t == kind),
            _ => kind == "null" && schema.get("const").is_some_and(Value::is_null),
        };
    };
    let next = match step {
        Step::Key(key) => schema
            .get("properties")
            .and_then(|p| p.get(key))
            .or_else(|| schema.get("additionalProperties")),
        Step::Index(_) => schema.get("items"),
    };
    next.and_then(Value::as_object)
        .is_some_and(|next| allows(root, next, rest, kind))
}

/// Puts `replacement` at `path` inside `value`.
fn set(value: &mut Value, path: &[Step], replacement: Value) {
    let mut at = value;
    for step in path {
        let next = match step {
            Step::Key(key) => at.get_mut(key.as_str()),
            Step::Index(n) => at.get_mut(*n),
        };
        match next {
            Some(next) => at = next,
            None => return,
        }
    }
    *at = replacement;
}

/// Decodes call arguments into `T`, naming the offending field on failure:
/// `spot: invalid type: string "abc", expected f64`.
///
/// A member whose value is `null` where `T` takes no `null` counts as not
/// given, so an optional argument with a default accepts `null` too:
/// OpenAI strict mode makes every property required and sends `null` for
/// the ones the model omits (see `schema::portable`). Where `T` takes a
/// `null` (an `Option`, or free-form JSON such as a table's records) it is
/// data and stays: a column that is `null` in every record is still a
/// column. Only the members `T` refuses are dropped, one at a time, where
/// the decoder says it failed; arguments without such a member decode in
/// one pass.
pub fn decode_arguments<T: DeserializeOwned>(arguments: Value) -> Result<T, GuardError> {
    let mut arguments = if arguments.is_null() {
        Value::Object(Map::new())
    } else {
        arguments
    };
    // Fast path: valid arguments decode without path tracking; only a
    // failure pays for the passes that find a refused `null` or name the
    // field.
    if let Ok(decoded) = T::deserialize(&arguments) {
        return Ok(decoded);
    }
    let mut nulls = count_null_members(&arguments);
    while nulls > 0 {
        let refused = match serde_path_to_error::deserialize::<_, T>(&arguments) {
            Ok(decoded) => return Ok(decoded),
            Err(error) => error.path().clone(),
        };
        if !remove_null_member(&mut arguments, &refused) {
            break;
        }
        nulls -= 1;
    }
    // A `null` the decoder could not place (inside an untagged enum, say)
    // still counts as not given.
    drop_null_members(&mut arguments);
    if let Ok(decoded) = T::deserialize(&arguments) {
        return Ok(decoded);
    }
    serde_path_to_error::deserialize::<_, T>(arguments).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        let field = if path == "." {
            missing_field(&inner)
        } else {
            Some(path)
        };
        let message = match &field {
            Some(field) if !inner.contains(&format!("`{field}`")) => format!("{field}: {inner}"),
            _ => inner,
        };
        let error = GuardError::new(codes::INVALID_ARGUMENTS, format!("invalid arguments: {message}"));
        match field {
            Some(field) => error.with_field(field),
            None => error,
        }
    })
}

/// How many object members inside `value` are `null`.
fn count_null_members(value: &Value) -> usize {
    match value {
        Value::Object(map) => map
            .values()
            .map(|member| usize::from(member.is_null()) + count_null_members(member))
            .sum(),
        Value::Array(items) => items.iter().map(count_null_members).sum(),
        _ => 0,
    }
}

/// Removes the member at `path` when it is a `null` member of an object;
/// false (nothing removed) for any other place.
fn remove_null_member(value: &mut Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((Segment::Map { key }, parents)) = segments.split_last() else {
        return false;
    };
    let mut at = value;
    for segment in parents {
        let next = match segment {
            Segment::Map { key } => at.get_mut(key.as_str()),
            Segment::Seq { index } => at.get_mut(*index),
            Segment::Enum { .. } | Segment::Unknown => None,
        };
        match next {
            Some(next) => at = next,
            None => return false,
        }
    }
    match at {
        Value::Object(map) if map.get(key.as_str()).is_some_and(Value::is_null) => {
            map.remove(key.as_str()).is_some()
        }
        _ => false,
    }
}

/// Removes `null`-valued members from every object inside `value`.
fn drop_null_members(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, member| !member.is_null());
            map.values_mut().for_each(drop_null_members);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_members),
        _ => {}
    }
}

/// `missing field `strike`` → `strike`.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("missing field `")?;
    Some(rest.split('`').next()?.to_string())
}

/// The last path segment of a function's type name, or "" for closures.
pub fn function_name<F>() -> String {
    let full = std::any::type_name::<F>();
    if full.contains('{') || full.contains('<') {
        return String::new();
    }
    full.rsplit("::").next().unwrap_or_default().to_string()
}

/// `value` if it lies in `min..=max`, else an `invalid_input` error naming
/// `field` and the range.
pub fn in_range(field: &str, value: u64, min: u64, max: u64) -> Result<u64, GuardError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(GuardError::invalid_input(
            field,
            format!("must be from {min} to {max}, got {value}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// Adds two numbers.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Add {
        /// Left operand.
        a: f64,
        b: f64,
    }

    #[test]
    fn input_doc_comment_becomes_the_description() {
        // The type's doc comment is the tool description, not part of the schema.
        let (schema, description) = input_schema::<Add>();
        assert_eq!(description, "Adds two numbers.");
        assert_eq!(schema["type"], "object");
        assert!(schema.get("description").is_none());
        assert_eq!(schema["properties"]["a"]["description"], "Left operand.");
    }

    #[test]
    fn scalar_outputs_are_wrapped_in_result() {
        // f64 output is advertised as {"result": number}.
        let (schema, wraps) = output_schema::<f64>();
        assert!(wraps);
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["result"]));
    }

    #[test]
    fn decode_errors_name_the_field() {
        // A wrong type and a missing field both name the field.
        let err = decode_arguments::<Add>(json!({"a": "x", "b": 1})).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("a"));
        assert!(
            err.message.starts_with("invalid arguments: a: invalid type"),
            "{}",
            err.message
        );
        let err = decode_arguments::<Add>(json!({"a": 1})).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("b"));
        assert!(err.message.contains("missing field `b`"), "{}", err.message);
    }

    #[test]
    fn null_members_count_as_not_given() {
        // OpenAI strict clients send null for omitted optionals; defaults apply.
        #[derive(Debug, Deserialize)]
        struct WithDefault {
            a: f64,
            #[serde(default)]
            b: f64,
            c: Option<f64>,
        }
        let decoded: WithDefault = decode_arguments(json!({"a": 1, "b": null, "c": null})).unwrap();
        assert_eq!((decoded.a, decoded.b, decoded.c), (1.0, 0.0, None));
        // Nested, and in a list of structs, the same.
        #[derive(Debug, Deserialize)]
        struct Outer {
            inner: WithDefault,
            rows: Vec<WithDefault>,
            #[serde(default)]
            tags: Vec<String>,
        }
        let decoded: Outer = decode_arguments(json!({
            "inner": {"a": 2, "b": null, "c": null},
            "rows": [{"a": 3, "b": null}, {"a": 4, "b": 5, "c": null}],
            "tags": null}))
        .unwrap();
        assert_eq!((decoded.inner.a, decoded.inner.b), (2.0, 0.0));
        assert_eq!((decoded.rows[0].b, decoded.rows[1].b), (0.0, 5.0));
        assert!(decoded.tags.is_empty());
    }

    #[test]
    fn a_null_the_type_takes_is_data_and_stays() {
        // Free-form records keep a column that is null in every row, even beside a refused null.
        #[derive(Debug, Deserialize)]
        struct Table {
            records: Value,
            #[serde(default)]
            scale: f64,
        }
        let arguments = json!({"records": [{"symbol": "AAA", "end": null}], "scale": null});
        let decoded: Table = decode_arguments(arguments).unwrap();
        assert_eq!(decoded.records, json!([{"symbol": "AAA", "end": null}]));
        assert_eq!(decoded.scale, 0.0);
        // A refused null that is not a member (an array item) is still named.
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Numbers {
            values: Vec<f64>,
        }
        let err = decode_arguments::<Numbers>(json!({"values": [1, null]})).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("values[1]"), "{}", err.message);
    }

    fn sample_fn() {}

    #[test]
    fn function_names_are_the_last_path_segment() {
        // Guards are named after their function unless renamed.
        fn name_of<F>(_: F) -> String {
            function_name::<F>()
        }
        assert_eq!(name_of(sample_fn), "sample_fn");
        assert_eq!(name_of(|| ()), "");
    }

    #[derive(serde::Serialize, JsonSchema)]
    struct Sum {
        sum: f64,
        parts: Vec<f64>,
    }

    #[derive(serde::Serialize, JsonSchema)]
    struct Loose {
        #[schemars(with = "Option<NumberOrString>")]
        value: f64,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    #[serde(untagged)]
    enum NumberOrString {
        Number(f64),
        Text(String),
    }

    #[test]
    fn non_finite_output_fails_naming_the_field() {
        // NaN or infinity where the schema allows only numbers fails the call, never a silent null.
        let (schema, wraps) = output_schema::<Sum>();
        let error = output_value(
            &Sum {
                sum: f64::INFINITY,
                parts: vec![],
            },
            &schema,
            wraps,
        )
        .unwrap_err();
        assert_eq!(error.code, codes::NON_FINITE_OUTPUT);
        assert_eq!(error.field.as_deref(), Some("sum"));
        let error = output_value(
            &Sum {
                sum: 1.0,
                parts: vec![1.0, f64::NAN],
            },
            &schema,
            wraps,
        )
        .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("parts[1]"));
        let (schema, wraps) = output_schema::<f64>();
        let error = output_value(&f64::NEG_INFINITY, &schema, wraps).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("result"));
        let fine = output_value(
            &Sum {
                sum: 2.0,
                parts: vec![1.0],
            },
            &output_schema::<Sum>().0,
            false,
        )
        .unwrap();
        assert_eq!(fine, json!({"sum": 2.0, "parts": [1.0]}));
    }

    #[test]
    fn non_finite_output_follows_the_payload_convention_where_allowed() {
        // Where the schema allows strings/null, ±∞ become "Infinity"/"-Infinity" and NaN null.
        let (schema, wraps) = output_schema::<Loose>();
        let value = output_value(&Loose { value: f64::INFINITY }, &schema, wraps).unwrap();
        assert_eq!(value, json!({"value": "Infinity"}));
        let value = output_value(&Loose { value: f64::NAN }, &schema, wraps).unwrap();
        assert_eq!(value, json!({"value": null}));
    }
}
