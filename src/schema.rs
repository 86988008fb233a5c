//! Schemas and argument decoding derived from the guard's Rust types.
//!
//! The input schema is JSON Schema 2020-12 with a root `"type": "object"`;
//! the input type's doc comment is lifted out of it to become the tool
//! description. A non-object output (a number, a list) is wrapped as
//! `{"result": value}` so structuredContent is always an object.

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
pub(crate) fn input_schema<T: JsonSchema>() -> (Map<String, Value>, String) {
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
pub(crate) fn output_schema<T: JsonSchema>() -> (Map<String, Value>, bool) {
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

/// Decodes call arguments into `T`, naming the offending field on failure:
/// `spot: invalid type: string "abc", expected f64`.
pub(crate) fn decode_arguments<T: DeserializeOwned>(arguments: Value) -> Result<T, GuardError> {
    let arguments = if arguments.is_null() {
        Value::Object(Map::new())
    } else {
        arguments
    };
    // Fast path: valid arguments decode without path tracking; only a
    // failure pays for a second pass that names the field.
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
        GuardError {
            code: codes::INVALID_ARGUMENTS.into(),
            message: format!("invalid arguments: {message}"),
            field,
        }
    })
}

/// `missing field `strike`` → `strike`.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("missing field `")?;
    Some(rest.split('`').next()?.to_string())
}

/// The last path segment of a function's type name, or "" for closures.
pub(crate) fn function_name<F>() -> String {
    let full = std::any::type_name::<F>();
    if full.contains('{') || full.contains('<') {
        return String::new();
    }
    full.rsplit("::").next().unwrap_or_default().to_string()
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
}
