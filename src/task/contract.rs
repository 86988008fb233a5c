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
}

/// Checks `answer` given how many guard calls were made and succeeded.
pub fn check(answer: &Value, calls_made: usize, calls_ok: usize) -> Result<Answer, String> {
    let Value::Object(map) = answer else {
        return Err(
            "final_answer takes an object map like #{task_type: \"analysis\", summary: \"…\"}".into(),
        );
    };
    if let Some(unknown) = map
        .keys()
        .find(|k| !["task_type", "summary", "metrics", "assumptions"].contains(&k.as_str()))
    {
        return Err(format!(
            "final_answer: unknown key '{unknown}'; allowed keys are task_type, summary, metrics, assumptions"
        ));
    }
    let task_type = map
        .get("task_type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !TASK_TYPES.contains(&task_type.as_str()) {
        return Err(format!(
            "final_answer: task_type must be one of {}, got '{task_type}'",
            TASK_TYPES.join(", ")
        ));
    }
    let summary = map
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    if summary.is_empty() {
        return Err("final_answer: summary must be a non-blank string".into());
    }
    let metrics = match map.get("metrics") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(metrics)) => metrics.clone(),
        Some(_) => return Err("final_answer: metrics must be an object map".into()),
    };
    if !metrics.is_empty() && task_type != "analysis" {
        return Err(format!(
            "final_answer: only task_type 'analysis' carries metrics, not '{task_type}'"
        ));
    }
    if task_type == "analysis" && calls_ok == 0 {
        return Err(format!(
            "final_answer: an 'analysis' needs at least one successful function call in this task: a call of a guard or of a script-only function that returned without error; {calls_made} call(s) made, none succeeded. Call one, or answer 'needs_input' or 'unsupported'"
        ));
    }
    if task_type == "no_action" && calls_made > 0 {
        return Err(format!(
            "final_answer: 'no_action' is refused after {calls_made} guard call(s) were made"
        ));
    }
    let assumptions = match map.get("assumptions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err("final_answer: assumptions must be an array of strings".into()),
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let refusal = check(&json!({"task_type": "analysis", "summary": "x"}), 1, 0).unwrap_err();
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
        assert_eq!(
            check(&json!({"task_type": "unsupported", "summary": "x"}), 0, 0)
                .unwrap()
                .status,
            super::super::TaskStatus::Failed
        );
    }
}
