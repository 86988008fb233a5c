//! Assertions: compare what the server (or a prompt adapter) answered with
//! what a suite expects, and say exactly what differed.
//!
//! Every failure is a [`Mismatch`] with a path (`structured_content.result`),
//! the expected value, the actual value and a sentence. Called by the runner
//! for each case and (the subset matcher) by the contract check; nothing
//! here does I/O.

use serde::Serialize;
use serde_json::{Value, json};

use super::suite::{Expect, PromptCase, REFUSE_OR_EXPLAIN};

/// Tolerance of `{"approximately": x}` when the suite gives none: 1e-9.
pub const DEFAULT_TOLERANCE: f64 = 1e-9;

/// Case-insensitive phrases that count as refusing or explaining a limit
/// under `response_policy: "refuse_or_explain"`.
pub const REFUSAL_MARKERS: &[&str] = &[
    "can't",
    "cannot",
    "can not",
    "unable",
    "not able",
    "won't",
    "will not",
    "refuse",
    "decline",
    "not possible",
    "not supported",
    "unsupported",
    "don't have",
    "do not have",
    "no tool",
    "not available",
    "outside",
    "sorry",
    "need more",
    "please provide",
    "not allowed",
    "not permitted",
];

/// One difference between expected and actual.
#[derive(Debug, Clone, Serialize)]
pub struct Mismatch {
    pub path: String,
    pub expected: Value,
    pub actual: Value,
    pub message: String,
}

impl Mismatch {
    pub fn new(path: impl Into<String>, expected: Value, actual: Value, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            expected,
            actual,
            message: message.into(),
        }
    }

    /// `path: message (expected X, actual Y)`, values shortened.
    pub fn describe(&self) -> String {
        format!(
            "{}: {} (expected {}, actual {})",
            self.path,
            self.message,
            short(&self.expected),
            short(&self.actual)
        )
    }
}

/// Longest value quoted in a one-line description: 160 characters.
const SHORT_VALUE: usize = 160;

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= SHORT_VALUE {
        return text;
    }
    let cut: String = text.chars().take(SHORT_VALUE).collect();
    format!("{cut}…")
}

/// Recursive subset match: every key of an expected object must match in
/// `actual`; arrays match element by element (same length); numbers compare
/// numerically; `{"approximately": x, "tolerance": t}` and `{"contains": v}`
/// are matchers, not literal objects.
pub fn subset(expected: &Value, actual: &Value, path: &str, out: &mut Vec<Mismatch>) {
    if let Some(map) = expected.as_object() {
        if let Some(target) = map.get("approximately")
            && map.keys().all(|k| k == "approximately" || k == "tolerance")
        {
            return approximately(target, map.get("tolerance"), expected, actual, path, out);
        }
        if let (Some(needle), 1) = (map.get("contains"), map.len()) {
            return contains(needle, expected, actual, path, out);
        }
    }
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, value) in want {
                let here = format!("{path}.{key}");
                match have.get(key) {
                    Some(found) => subset(value, found, &here, out),
                    None => out.push(Mismatch::new(here, value.clone(), Value::Null, "key missing")),
                }
            }
        }
        (Value::Array(want), Value::Array(have)) => {
            if want.len() != have.len() {
                out.push(Mismatch::new(
                    path,
                    json!(want.len()),
                    json!(have.len()),
                    "array length differs",
                ));
                return;
            }
            for (i, (w, h)) in want.iter().zip(have).enumerate() {
                subset(w, h, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(w), Value::Number(h)) if w.as_f64() == h.as_f64() => {}
        (w, h) if w == h => {}
        (w, h) => out.push(Mismatch::new(path, w.clone(), h.clone(), "value differs")),
    }
}

fn approximately(
    target: &Value,
    tolerance: Option<&Value>,
    expected: &Value,
    actual: &Value,
    path: &str,
    out: &mut Vec<Mismatch>,
) {
    let (Some(want), Some(tol)) = (
        target.as_f64(),
        tolerance.map_or(Some(DEFAULT_TOLERANCE), Value::as_f64),
    ) else {
        out.push(Mismatch::new(
            path,
            expected.clone(),
            actual.clone(),
            "approximately and tolerance must be numbers",
        ));
        return;
    };
    match actual.as_f64() {
        Some(have) if (have - want).abs() <= tol => {}
        Some(have) => out.push(Mismatch::new(
            path,
            expected.clone(),
            actual.clone(),
            format!(
                "off by {:.3e}, more than the tolerance {tol}",
                (have - want).abs()
            ),
        )),
        None => out.push(Mismatch::new(
            path,
            expected.clone(),
            actual.clone(),
            "not a number",
        )),
    }
}

fn contains(needle: &Value, expected: &Value, actual: &Value, path: &str, out: &mut Vec<Mismatch>) {
    let found = match (actual, needle) {
        (Value::String(text), Value::String(part)) => text.contains(part.as_str()),
        (Value::Array(items), _) => items.iter().any(|item| {
            let mut scratch = Vec::new();
            subset(needle, item, path, &mut scratch);
            scratch.is_empty()
        }),
        _ => false,
    };
    if !found {
        let message = match actual {
            Value::String(_) => "substring not found",
            Value::Array(_) => "no list member matches",
            _ => "contains needs a string or a list",
        };
        out.push(Mismatch::new(path, expected.clone(), actual.clone(), message));
    }
}

/// How one tools/call ended, as the assertions see it.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The server answered with a CallToolResult (its MCP JSON form).
    Result(Value),
    /// A JSON-RPC error (e.g. -32602 for an unknown tool).
    ProtocolError { code: i32, message: String },
    /// No answer within the client-side timeout (the request was cancelled).
    TimedOut { seconds: f64 },
    /// The connection failed (server died, transport closed).
    Transport(String),
}

impl Outcome {
    pub fn is_error(&self) -> bool {
        match self {
            Outcome::Result(result) => result["isError"] == true,
            _ => true,
        }
    }

    /// Concatenated text content of a result.
    pub fn text(&self) -> String {
        let Outcome::Result(result) = self else {
            return String::new();
        };
        result["content"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|c| c["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }

    /// Everything an error says: text, structured content or the protocol message.
    pub fn error_text(&self) -> String {
        match self {
            Outcome::Result(result) => format!("{}\n{}", self.text(), result["structuredContent"]),
            Outcome::ProtocolError { code, message } => format!("{message} (json-rpc error {code})"),
            Outcome::TimedOut { seconds } => format!("timed out: no answer within {seconds} s (client side)"),
            Outcome::Transport(message) => format!("transport failed: {message}"),
        }
    }

    /// Client-side timeout, or the server's own `timed_out` error result.
    pub fn timed_out(&self) -> bool {
        match self {
            Outcome::TimedOut { .. } => true,
            Outcome::Result(result) => {
                let content = &content_json(result);
                result["isError"] == true
                    && (content["status"] == "timed_out" || content["error"]["code"] == "timed_out")
            }
            _ => false,
        }
    }

    /// The JSON recorded in the report.
    pub fn to_report(&self) -> Value {
        match self {
            Outcome::Result(result) => result.clone(),
            Outcome::ProtocolError { code, message } => {
                json!({"protocol_error": {"code": code, "message": message}})
            }
            Outcome::TimedOut { seconds } => json!({"timed_out_after_seconds": seconds}),
            Outcome::Transport(message) => json!({"transport_error": message}),
        }
    }
}

/// Checks one tools/call outcome against a case's assertions.
pub fn check_call(expect: &Expect, outcome: &Outcome) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let actual_error = json!(outcome.is_error());
    let implied_ok = expect.not_error.is_none()
        && expect.is_error.is_none()
        && expect.error_contains.is_none()
        && expect.expect_timeout != Some(true);
    if expect.expect_timeout == Some(true) {
        if !outcome.timed_out() {
            out.push(Mismatch::new(
                "timeout",
                json!(true),
                outcome.to_report(),
                "expected the call to time out",
            ));
        }
    } else if matches!(outcome, Outcome::TimedOut { .. } | Outcome::Transport(_)) {
        out.push(Mismatch::new(
            "call",
            Value::Null,
            outcome.to_report(),
            outcome.error_text(),
        ));
        return out;
    }
    let want_ok = expect.not_error == Some(true) || expect.is_error == Some(false) || implied_ok;
    if want_ok && outcome.is_error() {
        out.push(Mismatch::new(
            "is_error",
            json!(false),
            actual_error.clone(),
            outcome.error_text(),
        ));
    }
    if (expect.is_error == Some(true) || expect.not_error == Some(false)) && !outcome.is_error() {
        out.push(Mismatch::new(
            "is_error",
            json!(true),
            actual_error,
            "expected an error result",
        ));
    }
    if let Some(needles) = &expect.error_contains {
        let haystack = outcome.error_text().to_lowercase();
        for needle in needles.items() {
            if !outcome.is_error() || !haystack.contains(&needle.to_lowercase()) {
                out.push(Mismatch::new(
                    "error_contains",
                    json!(needle),
                    json!(outcome.error_text()),
                    "error text lacks this (case-insensitive)",
                ));
            }
        }
    }
    if let Some(needles) = &expect.text_contains {
        let text = outcome.text();
        for needle in needles.items().into_iter().filter(|n| !text.contains(*n)) {
            out.push(Mismatch::new(
                "text_contains",
                json!(needle),
                json!(text),
                "text lacks this (case-sensitive)",
            ));
        }
    }
    if let Some(expected) = &expect.structured_content {
        let actual = match outcome {
            Outcome::Result(result) => content_json(result),
            _ => Value::Null,
        };
        subset(expected, &actual, "structured_content", &mut out);
    }
    out
}

/// A prompt case's answer: the final response and the tools it called.
#[derive(Debug, Clone, Serialize)]
pub struct PromptAnswer {
    pub response: String,
    pub tool_calls: Vec<Value>,
}

impl PromptAnswer {
    /// Names of the calls: a string entry is a name; an object has `name` (or `tool`).
    pub fn call_names(&self) -> Vec<String> {
        self.tool_calls
            .iter()
            .map(|call| match call {
                Value::String(name) => name.clone(),
                other => other["name"]
                    .as_str()
                    .or_else(|| other["tool"].as_str())
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect()
    }
}

/// Checks a prompt answer; `listed` are the server's tool names.
pub fn check_prompt(case: &PromptCase, answer: &PromptAnswer, listed: &[String]) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let names = answer.call_names();
    for (i, name) in names.iter().enumerate() {
        if !listed.contains(name) {
            out.push(Mismatch::new(
                format!("tool_calls[{i}].name"),
                json!(listed),
                json!(name),
                "called a tool the server does not list",
            ));
        }
    }
    if let Some(expected) = &case.expected_tool_calls
        && expected != &names
    {
        out.push(Mismatch::new(
            "tool_calls",
            json!(expected),
            json!(names),
            "tool calls differ (ordered names)",
        ));
    }
    let response = answer.response.to_lowercase();
    let has = |needle: &str| response.contains(&needle.to_lowercase());
    if let Some(all) = &case.response_contains_all {
        for needle in all.items().into_iter().filter(|n| !has(n)) {
            out.push(Mismatch::new(
                "response",
                json!({"contains": needle}),
                json!(answer.response),
                "response lacks this (case-insensitive)",
            ));
        }
    }
    if let Some(any) = &case.response_contains_any
        && !any.items().into_iter().any(has)
    {
        out.push(Mismatch::new(
            "response",
            json!({"contains_any": any.items()}),
            json!(answer.response),
            "response contains none of these (case-insensitive)",
        ));
    }
    if let Some(banned) = &case.response_not_contains {
        for needle in banned.items().into_iter().filter(|n| has(n)) {
            out.push(Mismatch::new(
                "response",
                json!({"not_contains": needle}),
                json!(answer.response),
                "response contains a forbidden phrase",
            ));
        }
    }
    if case.response_policy.as_deref() == Some(REFUSE_OR_EXPLAIN)
        && (answer.response.trim().is_empty() || !REFUSAL_MARKERS.iter().any(|m| has(m)))
    {
        out.push(Mismatch::new(
            "response_policy",
            json!(REFUSE_OR_EXPLAIN),
            json!(answer.response),
            "response neither refuses nor explains a limitation (no refusal phrase found)",
        ));
    }
    out
}

/// The JSON of a result: its structuredContent, or — for a guard's error,
/// which carries its JSON only as text (see `crate::mcp::server`) — the first
/// text block parsed. Suites' `structured_content` is checked against this,
/// so one expectation covers guard errors and built-in errors alike.
fn content_json(result: &Value) -> Value {
    if let Some(content) = result.get("structuredContent").filter(|c| !c.is_null()) {
        return content.clone();
    }
    result["content"][0]["text"]
        .as_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_matchers_report_path_expected_and_actual() {
        // approximately/contains/nesting pass when they should and name the path when not.
        let actual =
            json!({"result": 10.45058, "tags": ["a", "b"], "error": {"code": "x", "message": "Bad strike"}});
        let mut out = Vec::new();
        let ok = json!({"result": {"approximately": 10.4506, "tolerance": 1e-4}, "tags": {"contains": "b"},
                        "error": {"message": {"contains": "strike"}}});
        subset(&ok, &actual, "structured_content", &mut out);
        assert!(out.is_empty(), "{out:?}");
        let bad = json!({"result": {"approximately": 5.0, "tolerance": 1e-4}, "error": {"code": "y"}, "missing": 1});
        subset(&bad, &actual, "structured_content", &mut out);
        out.sort_by(|a, b| a.path.cmp(&b.path));
        let paths: Vec<&str> = out.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "structured_content.error.code",
                "structured_content.missing",
                "structured_content.result"
            ]
        );
        let text = out[2].describe();
        assert!(text.contains("10.45058") && text.contains("5.0"), "{text}");
        assert!(out.iter().all(|m| !m.message.is_empty()));
    }

    #[test]
    fn default_expectation_is_not_error_and_timeouts_count_both_ways() {
        // No assertion means "must succeed"; a server-side timed_out result satisfies expect_timeout.
        let failed = Outcome::Result(json!({"isError": true, "content": [],
            "structuredContent": {"status": "timed_out", "error": {"code": "timed_out"}}}));
        assert_eq!(check_call(&Expect::default(), &failed).len(), 1);
        let expect = Expect {
            expect_timeout: Some(true),
            ..Expect::default()
        };
        assert!(check_call(&expect, &failed).is_empty());
        assert!(check_call(&expect, &Outcome::TimedOut { seconds: 1.0 }).is_empty());
    }
}
