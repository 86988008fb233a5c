//! The final-answer contract, checked before a task result is saved.
//!
//! Keys: `task_type`, `summary`, `metrics`, `assumptions` and nothing else.
//! `analysis` needs at least one successful function call (a guard, or a
//! script-only function such as the app's `assert_causal`, which the worker
//! records like an inline pure call) and is the only type
//! that carries metrics; `no_action` is refused once any call was made.
//! Status follows the type: analysis/no_action/needs_input → success,
//! unsupported/failed → failed.

use serde_json::{Map, Value};

/// Task types a final answer may declare.
pub const TASK_TYPES: &[&str] = &["analysis", "no_action", "needs_input", "unsupported", "failed"];

/// A final answer that passed the contract.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: super::TaskStatus,
    pub task_type: String,
    pub summary: String,
    pub metrics: Map<String, Value>,
    pub assumptions: Vec<Value>,
    /// A `needs_input` answer's typed questions: field → `{type,
    /// description?}` (string, number, integer or boolean). A coding task
    /// asks the person these when the client can be asked.
    pub missing: Map<String, Value>,
}

/// Fields a `needs_input` answer may ask for at most: 20.
pub const MAX_MISSING_FIELDS: usize = 20;

/// The rule a final answer broke. The text goes to the client (and to the
/// model, which answers again), so it names the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ContractError {
    #[error("final_answer takes an object map like #{{task_type: \"analysis\", summary: \"…\"}}")]
    NotAMap,
    #[error(
        "final_answer: unknown key '{0}'; allowed keys are task_type, summary, metrics, assumptions, missing"
    )]
    UnknownKey(String),
    #[error("final_answer: task_type must be one of {types}, got '{0}'", types = TASK_TYPES.join(", "))]
    TaskType(String),
    #[error("final_answer: summary must be a non-blank string")]
    BlankSummary,
    #[error("final_answer: metrics must be an object map")]
    MetricsNotAMap,
    #[error("final_answer: only task_type 'analysis' carries metrics, not '{0}'")]
    MetricsOutsideAnalysis(String),
    #[error(
        "final_answer: an 'analysis' needs at least one successful function call in this task: a call of a guard or of a script-only function that returned without error; {0} call(s) made, none succeeded. Call one, or answer 'needs_input' or 'unsupported'"
    )]
    AnalysisWithoutCalls(usize),
    #[error("final_answer: 'no_action' is refused after {0} guard call(s) were made")]
    NoActionAfterCalls(usize),
    #[error("final_answer: assumptions must be an array of strings")]
    AssumptionsNotAList,
    #[error("final_answer: only task_type 'needs_input' carries missing, not '{0}'")]
    MissingOutsideNeedsInput(String),
    #[error(
        "final_answer: missing must map each field to #{{type: \"string\"|\"number\"|\"integer\"|\"boolean\", description: \"…\", optional: true|false, or: [\"another field\"]}} (at most {MAX_MISSING_FIELDS} fields): {0}"
    )]
    BadMissing(String),
}

/// Checks `answer` given how many guard calls were made and succeeded.
pub fn check(answer: &Value, calls_made: usize, calls_ok: usize) -> Result<Answer, ContractError> {
    let Value::Object(map) = answer else {
        return Err(ContractError::NotAMap);
    };
    if let Some(unknown) = map
        .keys()
        .find(|k| !["task_type", "summary", "metrics", "assumptions", "missing"].contains(&k.as_str()))
    {
        return Err(ContractError::UnknownKey(unknown.clone()));
    }
    let task_type = map
        .get("task_type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !TASK_TYPES.contains(&task_type.as_str()) {
        return Err(ContractError::TaskType(task_type));
    }
    let summary = map
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    if summary.is_empty() {
        return Err(ContractError::BlankSummary);
    }
    let metrics = match map.get("metrics") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(metrics)) => metrics.clone(),
        Some(_) => return Err(ContractError::MetricsNotAMap),
    };
    if !metrics.is_empty() && task_type != "analysis" {
        return Err(ContractError::MetricsOutsideAnalysis(task_type));
    }
    if task_type == "analysis" && calls_ok == 0 {
        return Err(ContractError::AnalysisWithoutCalls(calls_made));
    }
    if task_type == "no_action" && calls_made > 0 {
        return Err(ContractError::NoActionAfterCalls(calls_made));
    }
    let assumptions = match map.get("assumptions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(ContractError::AssumptionsNotAList),
    };
    let missing = match map.get("missing") {
        None | Some(Value::Null) => Map::new(),
        Some(missing) if task_type == "needs_input" => questions(missing)?,
        Some(_) => return Err(ContractError::MissingOutsideNeedsInput(task_type)),
    };
    let status = if matches!(task_type.as_str(), "unsupported" | "failed") {
        super::TaskStatus::Failed
    } else {
        super::TaskStatus::Success
    };
    Ok(Answer {
        status,
        task_type,
        summary,
        metrics,
        assumptions,
        missing,
    })
}

/// A `needs_input` answer's `missing`, checked: each field's `type` one of
/// the form types, `description` a string when given, `optional` a
/// boolean when given (the person may leave it blank), `or` a list of the
/// other fields that can stand in for it (alternatives: "the volatility,
/// or an option price to imply it from"; the person gives at least one of
/// them), nothing else.
fn questions(missing: &Value) -> Result<Map<String, Value>, ContractError> {
    let bad = |why: String| ContractError::BadMissing(why);
    let Value::Object(fields) = missing else {
        return Err(bad("it is not a map".into()));
    };
    if fields.is_empty() || fields.len() > MAX_MISSING_FIELDS {
        return Err(bad(format!("it has {} fields", fields.len())));
    }
    for (name, field) in fields {
        let Value::Object(spec) = field else {
            return Err(bad(format!("'{name}' is not a map")));
        };
        let kind = spec.get("type").and_then(Value::as_str).unwrap_or_default();
        if !["string", "number", "integer", "boolean"].contains(&kind) {
            return Err(bad(format!("'{name}' has type '{kind}'")));
        }
        if spec.get("description").is_some_and(|d| !d.is_string()) {
            return Err(bad(format!("'{name}'.description is not a string")));
        }
        if spec.get("optional").is_some_and(|o| !o.is_boolean()) {
            return Err(bad(format!("'{name}'.optional is not true or false")));
        }
        if let Some(or) = spec.get("or") {
            let names = or.as_array().filter(|names| !names.is_empty()).ok_or_else(|| {
                bad(format!(
                    "'{name}'.or is not a non-empty list of the other fields it can stand in for"
                ))
            })?;
            for other in names {
                let other = other.as_str().unwrap_or_default();
                if other == name || !fields.contains_key(other) {
                    return Err(bad(format!(
                        "'{name}'.or names '{other}', which is not another field of missing"
                    )));
                }
            }
        }
        if let Some(other) = spec
            .keys()
            .find(|k| !["type", "description", "optional", "or"].contains(&k.as_str()))
        {
            return Err(bad(format!("'{name}' has the key '{other}'")));
        }
    }
    Ok(fields.clone())
}

/// The form that asks a `needs_input` answer's `missing` fields: its
/// message (the summary, and each group of alternatives) and its schema
/// (the fields with their type and description; required unless optional
/// or one of alternatives, which the form cannot express and the message
/// states).
pub fn missing_form(summary: &str, missing: &Map<String, Value>) -> (String, Value) {
    let mut properties = Map::new();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for (name, spec) in missing {
        let mut field = Map::new();
        for key in ["type", "description"] {
            if let Some(value) = spec.get(key) {
                field.insert(key.into(), value.clone());
            }
        }
        properties.insert(name.clone(), Value::Object(field));
        let alternatives: Vec<String> = spec
            .get("or")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if !alternatives.is_empty() {
            let mut group = alternatives;
            group.push(name.clone());
            group.sort_unstable();
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
    }
    // Required: neither optional nor one of alternatives (on either side).
    let required: Vec<Value> = missing
        .iter()
        .filter(|(name, spec)| {
            spec.get("optional") != Some(&Value::Bool(true)) && !groups.iter().any(|g| g.contains(name))
        })
        .map(|(name, _)| Value::from(name.as_str()))
        .collect();
    let mut message = format!("The coding task needs more input: {summary}");
    for group in &groups {
        let quoted: Vec<String> = group.iter().map(|g| format!("'{g}'")).collect();
        message.push_str(&format!("\nGive at least one of {}.", quoted.join(" or ")));
    }
    let schema = serde_json::json!({"type": "object", "properties": properties, "required": required});
    (message, schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_fields_may_be_optional_or_alternatives_and_the_form_says_so() {
        let asks = json!({"task_type": "needs_input", "summary": "which volatility?",
                          "missing": {"volatility": {"type": "number", "or": ["option_price"]},
                                      "option_price": {"type": "number", "description": "a quoted price to imply it from"},
                                      "note": {"type": "string", "optional": true},
                                      "strike": {"type": "number"}}});
        let answer = check(&asks, 0, 0).expect("valid");
        let (message, schema) = missing_form(&answer.summary, &answer.missing);
        assert_eq!(schema["required"], json!(["strike"]));
        assert!(
            message.contains("Give at least one of 'option_price' or 'volatility'."),
            "{message}"
        );
        assert!(schema["properties"]["volatility"].get("or").is_none(), "{schema}");
        for bad in [
            json!({"a": {"type": "number", "or": ["b"]}}),
            json!({"a": {"type": "number", "or": ["a"]}}),
            json!({"a": {"type": "number", "optional": "yes"}}),
            json!({"a": {"type": "number", "or": []}}),
        ] {
            let answer = json!({"task_type": "needs_input", "summary": "x", "missing": bad});
            assert!(check(&answer, 0, 0).is_err(), "{answer}");
        }
    }

    #[test]
    fn only_needs_input_carries_typed_missing_fields() {
        let asks = json!({"task_type": "needs_input", "summary": "which strike?",
                          "missing": {"strike": {"type": "number", "description": "strike price"}}});
        let answer = check(&asks, 0, 0).expect("a typed question");
        assert_eq!(answer.missing["strike"]["type"], "number");
        let elsewhere = json!({"task_type": "failed", "summary": "x", "missing": {"a": {"type": "string"}}});
        assert_eq!(
            check(&elsewhere, 0, 0).unwrap_err(),
            ContractError::MissingOutsideNeedsInput("failed".into())
        );
        for bad in [
            json!({"strike": {"type": "object"}}),
            json!({"strike": "number"}),
            json!({"strike": {"type": "number", "default": 1}}),
            json!({}),
        ] {
            let answer = json!({"task_type": "needs_input", "summary": "x", "missing": bad});
            assert!(
                matches!(check(&answer, 0, 0), Err(ContractError::BadMissing(_))),
                "{answer}"
            );
        }
    }

    #[test]
    fn the_contract_rules_each_refuse_their_case() {
        // Unknown keys, blank summary, analysis without calls, no_action after calls, metrics outside analysis.
        assert!(
            check(
                &json!({"task_type": "analysis", "summary": "x", "extra": 1}),
                1,
                1
            )
            .is_err()
        );
        assert!(check(&json!({"task_type": "analysis", "summary": "  "}), 1, 1).is_err());
        let refusal = check(&json!({"task_type": "analysis", "summary": "x"}), 1, 0)
            .unwrap_err()
            .to_string();
        assert!(
            refusal.contains("a guard or of a script-only function that returned without error"),
            "{refusal}"
        );
        assert!(check(&json!({"task_type": "no_action", "summary": "x"}), 1, 1).is_err());
        assert!(
            check(
                &json!({"task_type": "needs_input", "summary": "x", "metrics": {"a": 1}}),
                0,
                0
            )
            .is_err()
        );
        assert!(check(&json!({"task_type": "bogus", "summary": "x"}), 0, 0).is_err());
        let ok = check(
            &json!({"task_type": "analysis", "summary": "x", "metrics": {"a": 1}}),
            2,
            1,
        )
        .unwrap();
        assert_eq!(
            (ok.status, ok.task_type.as_str()),
            (super::super::TaskStatus::Success, "analysis")
        );
        // The refusals read as before the typed error (clients and the model see them).
        assert_eq!(
            check(&json!([1]), 0, 0).unwrap_err().to_string(),
            "final_answer takes an object map like #{task_type: \"analysis\", summary: \"…\"}"
        );
        assert_eq!(
            check(&json!({"task_type": "x", "summary": "s"}), 0, 0)
                .unwrap_err()
                .to_string(),
            "final_answer: task_type must be one of analysis, no_action, needs_input, unsupported, failed, got 'x'"
        );
        assert_eq!(
            check(&json!({"task_type": "analysis", "summary": "x"}), 0, 0)
                .unwrap_err()
                .to_string(),
            check(&json!({"task_type": "analysis", "summary": "x"}), 1, 0)
                .unwrap_err()
                .to_string()
                .replace("1 call(s)", "0 call(s)")
        );
        assert_eq!(
            check(&json!({"task_type": "unsupported", "summary": "x"}), 0, 0)
                .unwrap()
                .status,
            super::super::TaskStatus::Failed
        );
    }
}
