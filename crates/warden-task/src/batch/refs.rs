//! References inside batch arguments: parsing, dotted paths, substitution.
//!
//! Any argument value that is an object with a `$result` key refers to an
//! earlier call's output (`{"$result": 0 | "r1", "path": "a.b.0"}`); one with
//! an `$artifact` key loads a CSV column (see [`super::artifact`]). This file
//! checks their shape when the batch is planned and, for `$result`, swaps in
//! the value just before the call runs. It never runs a guard and never reads
//! a file. Paths are checked against a result only at substitution time: a
//! result does not exist before its call has run.

use serde_json::{Map, Value};

use super::artifact::{ARTIFACT_KEY, ArtifactError};

/// Key that marks a reference to an earlier call's result.
pub(crate) const RESULT_KEY: &str = "$result";

/// The ref id of call `index`: "r1" for calls[0].
pub(crate) fn ref_id(index: usize) -> String {
    format!("r{}", index + 1)
}

/// A checked `$result` reference.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultRef {
    /// Index of the call whose output is used.
    pub call: usize,
    /// The dotted path as written ("" for the whole output).
    pub path: String,
}

/// Why a reference in a batch's arguments cannot be used: its shape when
/// the batch is planned, its path or what it names when the call is about
/// to run. The text is the message of the batch's `invalid_input` (or
/// `arguments_too_large`) error, so it names the fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RefError {
    #[error(
        "unknown key '{key}' in a $result reference; write {{\"$result\": <index or \"rN\">, \"path\": \"a.b.0\"}}"
    )]
    UnknownKey { key: String },
    #[error("$result must be a call index (0, 1, …) or a ref id (\"r1\", \"r2\", …), got {got}")]
    NotACall { got: Value },
    #[error("$result refers to {this} itself; a call can only use the results of calls before it")]
    Itself { this: String },
    #[error(
        "$result refers to calls[{target}], but the batch has only {count} calls (calls[0] to calls[{last}])"
    )]
    PastTheEnd {
        target: usize,
        count: usize,
        last: usize,
    },
    #[error(
        "$result is a forward reference to calls[{target}] ({id}), which comes after {this}; move that call before this one"
    )]
    Forward { target: usize, id: String, this: String },
    #[error("path must be a dotted string like \"a.b.0\", got {got}")]
    PathNotText { got: Value },
    #[error(
        "path '{path}' has an empty segment; separate fields with single dots, e.g. \"stats.mean\" or \"rows.0.value\""
    )]
    EmptySegment { path: String },
    #[error("no field '{segment}' at {at}; fields there: {fields}")]
    NoField {
        segment: String,
        at: String,
        fields: String,
    },
    #[error("{at} is an empty list; it has no item '{segment}'")]
    EmptyList { at: String, segment: String },
    #[error("'{segment}' is not an index of {at}, a list of {len} items; use 0 to {last}")]
    NotAnIndex {
        segment: String,
        at: String,
        len: usize,
        last: usize,
    },
    #[error("{at} is {kind}, not an object or a list, so it has no '{segment}'")]
    NotAContainer {
        at: String,
        kind: &'static str,
        segment: String,
    },
    /// The call it names did not produce a result (at substitution).
    #[error("the result of calls[{call}] is not available")]
    NotAvailable { call: usize },
    /// A path that does not fit the result it is applied to.
    #[error("path '{path}' into the result of calls[{call}] ({id}, {guard}): {error}")]
    PathInto {
        path: String,
        call: usize,
        id: String,
        guard: String,
        error: Box<RefError>,
    },
    /// A reference would take its call's arguments past the cap.
    #[error(
        "with this reference ({size} bytes) the arguments of calls[{index}] ({guard}) pass the {cap}-byte argument limit; reference less data"
    )]
    TooLarge {
        size: usize,
        index: usize,
        guard: String,
        cap: usize,
    },
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
}

/// Whether `map` is a reference object (of either kind).
pub(crate) fn is_reference(map: &Map<String, Value>) -> bool {
    map.contains_key(RESULT_KEY) || map.contains_key(ARTIFACT_KEY)
}

/// Parses a `$result` reference found in call `current` of a batch of
/// `count` calls. Forward and self references are refused here.
pub(crate) fn parse_result(
    map: &Map<String, Value>,
    current: usize,
    count: usize,
) -> Result<ResultRef, RefError> {
    if let Some(key) = map.keys().find(|k| *k != RESULT_KEY && *k != "path") {
        return Err(RefError::UnknownKey { key: key.clone() });
    }
    let target = match map.get(RESULT_KEY) {
        Some(Value::Number(n)) => n.as_u64().map(|n| n as usize),
        Some(Value::String(s)) => s
            .strip_prefix('r')
            .and_then(|digits| digits.parse::<usize>().ok())
            .filter(|n| *n >= 1)
            .map(|n| n - 1),
        _ => None,
    };
    let Some(target) = target else {
        return Err(RefError::NotACall {
            got: map.get(RESULT_KEY).cloned().unwrap_or(Value::Null),
        });
    };
    let this = format!("calls[{current}] ({})", ref_id(current));
    if target == current {
        return Err(RefError::Itself { this });
    }
    if target >= count {
        return Err(RefError::PastTheEnd {
            target,
            count,
            last: count - 1,
        });
    }
    if target > current {
        return Err(RefError::Forward {
            target,
            id: ref_id(target),
            this,
        });
    }
    let path = match map.get("path") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(path)) => path.clone(),
        Some(other) => return Err(RefError::PathNotText { got: other.clone() }),
    };
    check_path(&path)?;
    Ok(ResultRef { call: target, path })
}

/// Checks a dotted path's syntax: "" (everything) or non-empty segments.
pub(crate) fn check_path(path: &str) -> Result<(), RefError> {
    if !path.is_empty() && path.split('.').any(str::is_empty) {
        return Err(RefError::EmptySegment {
            path: path.to_string(),
        });
    }
    Ok(())
}

/// The value at a dotted `path` inside `root` ("" is `root` itself). Digits
/// index lists. The error says where the walk stopped and what exists there.
pub(crate) fn resolve<'a>(root: &'a Value, path: &str) -> Result<&'a Value, RefError> {
    if path.is_empty() {
        return Ok(root);
    }
    let mut here = root;
    let mut walked = String::new();
    for segment in path.split('.') {
        let at = if walked.is_empty() {
            "the top level".to_string()
        } else {
            format!("'{walked}'")
        };
        here = match here {
            Value::Object(map) => match map.get(segment) {
                Some(next) => next,
                None => {
                    let fields: Vec<&str> = map.keys().map(String::as_str).collect();
                    let fields = if fields.is_empty() {
                        "none (an empty object)".to_string()
                    } else {
                        fields.join(", ")
                    };
                    return Err(RefError::NoField {
                        segment: segment.to_string(),
                        at,
                        fields,
                    });
                }
            },
            Value::Array(items) => match segment.parse::<usize>() {
                Ok(i) if i < items.len() => &items[i],
                _ if items.is_empty() => {
                    return Err(RefError::EmptyList {
                        at,
                        segment: segment.to_string(),
                    });
                }
                _ => {
                    return Err(RefError::NotAnIndex {
                        segment: segment.to_string(),
                        at,
                        len: items.len(),
                        last: items.len() - 1,
                    });
                }
            },
            other => {
                return Err(RefError::NotAContainer {
                    at,
                    kind: kind(other),
                    segment: segment.to_string(),
                });
            }
        };
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(segment);
    }
    Ok(here)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Produces the value for one reference object found at a location, or
/// the reason it cannot.
pub(crate) type Replace<'a> = dyn FnMut(&str, Map<String, Value>) -> Result<Value, RefError> + 'a;

/// Rebuilds `value`, replacing every reference object with what `replace`
/// returns for it. `at` is the location of `value` for messages
/// (`calls[1].arguments.legs[0].spot`). Values `replace` returns are not
/// searched again, so a result that itself contains `$result` is data.
pub(crate) fn rewrite(
    value: Value,
    at: &str,
    replace: &mut Replace<'_>,
) -> Result<Value, (String, RefError)> {
    match value {
        Value::Object(map) if is_reference(&map) => replace(at, map).map_err(|e| (at.to_string(), e)),
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map {
                let value = rewrite(item, &format!("{at}.{key}"), replace)?;
                out.insert(key, value);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| rewrite(item, &format!("{at}[{i}]"), replace))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other),
    }
}

/// Visits every reference object in `value` with its location, collecting
/// what `visit` reports (used to check a whole batch before it runs).
pub(crate) fn visit(value: &Value, at: &str, visit_ref: &mut dyn FnMut(&str, &Map<String, Value>)) {
    match value {
        Value::Object(map) if is_reference(map) => visit_ref(at, map),
        Value::Object(map) => {
            for (key, item) in map {
                visit(item, &format!("{at}.{key}"), visit_ref);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                visit(item, &format!("{at}[{i}]"), visit_ref);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value, current: usize, count: usize) -> Result<ResultRef, RefError> {
        parse_result(value.as_object().unwrap(), current, count)
    }

    /// The refusal's text.
    fn refusal(value: Value, current: usize, count: usize) -> String {
        parse(value, current, count).unwrap_err().to_string()
    }

    #[test]
    fn indices_and_ref_ids_name_the_same_call() {
        // {"$result": 0} and {"$result": "r1"} both mean calls[0].
        let a = parse(json!({"$result": 0, "path": "a.b"}), 2, 3).unwrap();
        let b = parse(json!({"$result": "r1", "path": "a.b"}), 2, 3).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.call, 0);
    }

    #[test]
    fn self_forward_and_malformed_references_are_refused() {
        // Each refusal says what is wrong and how to fix it.
        assert!(refusal(json!({"$result": 1}), 1, 3).contains("itself"));
        assert!(refusal(json!({"$result": "r3"}), 0, 3).contains("forward reference"));
        assert!(refusal(json!({"$result": 7}), 0, 3).contains("only 3 calls"));
        assert!(refusal(json!({"$result": "x"}), 1, 3).contains("ref id"));
        assert!(refusal(json!({"$result": 0, "paht": "a"}), 1, 3).contains("'paht'"));
        assert!(refusal(json!({"$result": 0, "path": "a..b"}), 1, 3).contains("empty segment"));
        // Whole texts, as clients see them.
        assert_eq!(
            refusal(json!({"$result": 7}), 0, 3),
            "$result refers to calls[7], but the batch has only 3 calls (calls[0] to calls[2])"
        );
        assert_eq!(
            refusal(json!({"$result": "r3"}), 0, 3),
            "$result is a forward reference to calls[2] (r3), which comes after calls[0] (r1); move that call before this one"
        );
        assert_eq!(
            refusal(json!({"$result": 0, "paht": "a"}), 1, 3),
            "unknown key 'paht' in a $result reference; write {\"$result\": <index or \"rN\">, \"path\": \"a.b.0\"}"
        );
    }

    #[test]
    fn paths_walk_objects_and_lists_and_list_what_exists() {
        // A bad path stops where the walk did and lists the fields there.
        let root = json!({"evidence": {"sharpe": 1.5, "rows": [{"p": 1}, {"p": 2}]}});
        assert_eq!(resolve(&root, "evidence.rows.1.p").unwrap(), &json!(2));
        assert_eq!(resolve(&root, "").unwrap(), &root);
        let err = resolve(&root, "evidence.sharp").unwrap_err().to_string();
        assert!(err.contains("no field 'sharp' at 'evidence'"), "{err}");
        assert!(err.contains("rows, sharpe"), "{err}");
        let err = resolve(&root, "evidence.rows.5").unwrap_err().to_string();
        assert!(err.contains("use 0 to 1"), "{err}");
        let err = resolve(&root, "evidence.sharpe.x").unwrap_err().to_string();
        assert!(err.contains("is a number"), "{err}");
    }

    #[test]
    fn rewrite_replaces_nested_references_only() {
        // References inside lists and objects are replaced; other values stay.
        let args = json!({"a": 1, "b": [{"$result": 0}], "c": {"d": {"$result": "r1"}}});
        let out = rewrite(args, "calls[1].arguments", &mut |_, _| Ok(json!(9))).unwrap();
        assert_eq!(out, json!({"a": 1, "b": [9], "c": {"d": 9}}));
        let err = rewrite(json!({"x": [{"$result": 0}]}), "args", &mut |_, _| {
            Err(RefError::NotAvailable { call: 0 })
        })
        .unwrap_err();
        assert_eq!(err.0, "args.x[0]");
        assert_eq!(err.1.to_string(), "the result of calls[0] is not available");
    }
}
