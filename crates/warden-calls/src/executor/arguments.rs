//! Checks on a call's arguments that hold for every path (direct, batch,
//! script door) before anything runs: nesting depth, then size.
//!
//! Depth comes first and is measured without recursion, so that a value
//! built deep by a batch substitution cannot overflow the stack here; once
//! it is within [`MAX_ARGUMENT_DEPTH`], serialising it to count its bytes
//! is safe. Counting writes nothing: the bytes are never buffered.

use serde_json::Value;

use super::{Failure, Status};
use crate::limits::MAX_ARGUMENT_DEPTH;
use warden_core::error::{GuardError, codes};

/// Refuses arguments nested deeper than [`MAX_ARGUMENT_DEPTH`]
/// (`invalid_arguments`) or larger than `max_bytes` of JSON
/// (`arguments_too_large`).
pub(super) fn check(arguments: &Value, max_bytes: usize) -> Result<(), Failure> {
    let depth = depth(arguments);
    if depth > MAX_ARGUMENT_DEPTH {
        return Err(too_deep(depth));
    }
    let size = json_size(arguments);
    if size > max_bytes {
        return Err(Failure::new(
            Status::Failed,
            GuardError::new(
                codes::ARGUMENTS_TOO_LARGE,
                format!(
                    "arguments are {size} bytes; the limit is {max_bytes} bytes: send less data or reference a stored artifact"
                ),
            ),
        ));
    }
    Ok(())
}

/// The `invalid_arguments` failure for arguments `depth` levels deep.
pub fn too_deep(depth: usize) -> Failure {
    Failure::new(
        Status::Failed,
        GuardError::new(
            codes::INVALID_ARGUMENTS,
            format!(
                "arguments are nested {depth} levels deep; the limit is {MAX_ARGUMENT_DEPTH} levels: \
pass flatter data (e.g. a list of flat objects)"
            ),
        )
        .with_field("arguments"),
    )
}

/// Levels of objects and lists in `value`: 0 for a scalar, 1 for `{}`.
pub(crate) fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Value::Object(map) => {
                deepest = deepest.max(level);
                stack.extend(map.values().map(|v| (v, level + 1)));
            }
            Value::Array(items) => {
                deepest = deepest.max(level);
                stack.extend(items.iter().map(|v| (v, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Bytes of `value` as compact JSON, counted without buffering them.
pub fn json_size(value: &Value) -> usize {
    let mut counter = Counter(0);
    // Writing to a counter cannot fail; a failure would only undercount.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Levels of objects and lists in raw JSON text, counted without parsing
/// (so without serde_json's 128-level recursion limit). For a line that
/// did not parse; assumes well-formed strings.
pub fn text_depth(text: &[u8]) -> usize {
    let (mut level, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                level += 1;
                deepest = deepest.max(level);
            }
            b'}' | b']' => level = level.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nested(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!({ "a": value });
        }
        value
    }

    #[test]
    fn depth_counts_levels_of_objects_and_lists() {
        // A scalar is 0 levels, {} is 1, {"a": [1]} is 2; text and values agree.
        assert_eq!(depth(&json!(3)), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1], "b": {"c": "[{"}})), 2);
        assert_eq!(text_depth(br#"{"a": [1], "b": {"c": "[{\"\\"}}"#), 2);
        for levels in [1, 64, 65, 500] {
            let value = nested(levels);
            assert_eq!(depth(&value), levels);
            assert_eq!(text_depth(value.to_string().as_bytes()), levels);
        }
    }

    #[test]
    fn arguments_over_the_depth_or_size_limit_are_refused() {
        // 64 levels pass; 65 are invalid_arguments naming both numbers; size is checked after.
        assert!(check(&nested(MAX_ARGUMENT_DEPTH), 1_000).is_ok());
        let deep = check(&nested(MAX_ARGUMENT_DEPTH + 1), 1_000).unwrap_err();
        assert_eq!(deep.error.code, codes::INVALID_ARGUMENTS);
        assert!(
            deep.error.message.contains("65 levels deep; the limit is 64"),
            "{}",
            deep.error.message
        );
        let large = check(&json!({"a": "x".repeat(100)}), 50).unwrap_err();
        assert_eq!(large.error.code, codes::ARGUMENTS_TOO_LARGE);
        assert_eq!(json_size(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#.len());
    }
}
