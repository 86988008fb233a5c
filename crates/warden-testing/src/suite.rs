//! Scenario suites: `{"expected_tools", "tool_contracts", "cases"}` or a
//! bare list of cases, parsed into typed cases once, before the server starts.
//!
//! A case's `type` is `tool` (the default), `concurrent_tool` or `prompt`.
//! Unknown keys are refused with their path, so a misspelt assertion cannot
//! silently pass; `description` and `tags` are free-form and allowed
//! everywhere. A problem here is a setup error (exit 2).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::SetupError;
use super::config::BadSeconds;

/// One string or a list of strings (`"error_contains": "x"` or `["x", "y"]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn items(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(one) => vec![one.as_str()],
            OneOrMany::Many(many) => many.iter().map(String::as_str).collect(),
        }
    }
}

/// What a tool's `tools/list` entry must say.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolContract {
    /// Exactly these input properties are required (order ignored).
    pub required: Option<Vec<String>>,
    /// Names that must be input properties, or an object matched as a
    /// subset of `inputSchema.properties`.
    pub properties: Option<Value>,
    /// Case-insensitive substrings of the description.
    pub description_contains: Option<OneOrMany>,
    /// Must equal `annotations.readOnlyHint` (absent counts as false).
    pub read_only: Option<bool>,
    #[serde(default)]
    pub description: Option<String>,
}

/// Assertions about one tools/call outcome. With none of `not_error`,
/// `is_error`, `error_contains` and `expect_timeout`, `not_error` is implied.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Expect {
    pub not_error: Option<bool>,
    pub is_error: Option<bool>,
    /// Case-insensitive substrings of the error (text, structured content or protocol message).
    pub error_contains: Option<OneOrMany>,
    /// Case-sensitive substrings of the text content.
    pub text_contains: Option<OneOrMany>,
    /// Recursive subset of structuredContent (see `assertions`); for a
    /// guard's error result, of the error JSON in its text.
    pub structured_content: Option<Value>,
    /// The call must time out (client-side, or a `timed_out` error result).
    pub expect_timeout: Option<bool>,
}

/// `type: "tool"` (the default).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCase {
    pub id: Option<String>,
    pub tool: String,
    #[serde(default)]
    pub arguments: Map<String, Value>,
    pub timeout_seconds: Option<f64>,
    pub not_error: Option<bool>,
    pub is_error: Option<bool>,
    pub error_contains: Option<OneOrMany>,
    pub text_contains: Option<OneOrMany>,
    pub structured_content: Option<Value>,
    pub expect_timeout: Option<bool>,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tags: Option<Value>,
}

impl ToolCase {
    pub fn expect(&self) -> Expect {
        Expect {
            not_error: self.not_error,
            is_error: self.is_error,
            error_contains: self.error_contains.clone(),
            text_contains: self.text_contains.clone(),
            structured_content: self.structured_content.clone(),
            expect_timeout: self.expect_timeout,
        }
    }
}

/// One request of a concurrent case when `requests` is a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    pub tool: Option<String>,
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
}

/// `requests`: a count (the case's call repeated) or a list of calls.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Requests {
    Count(usize),
    List(Vec<RequestSpec>),
}

/// `type: "concurrent_tool"`: a tool case plus `requests` and
/// `max_concurrency`; its assertions apply to every request.
#[derive(Debug, Clone)]
pub struct ConcurrentCase {
    pub call: ToolCase,
    pub requests: Requests,
    /// Requests in flight at once; defaults to all of them.
    pub max_concurrency: Option<usize>,
}

/// A canned answer for a prompt case.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replay {
    pub response: String,
    #[serde(default)]
    pub tool_calls: Vec<Value>,
}

/// `type: "prompt"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptCase {
    pub id: Option<String>,
    pub prompt: String,
    pub replay: Option<Replay>,
    /// Names of the tools called, in order (exact sequence).
    pub expected_tool_calls: Option<Vec<String>>,
    pub response_contains_all: Option<OneOrMany>,
    pub response_contains_any: Option<OneOrMany>,
    pub response_not_contains: Option<OneOrMany>,
    /// Only `refuse_or_explain`.
    pub response_policy: Option<String>,
    pub timeout_seconds: Option<f64>,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tags: Option<Value>,
}

/// The one response policy supported.
pub const REFUSE_OR_EXPLAIN: &str = "refuse_or_explain";

#[derive(Debug, Clone)]
pub enum CaseKind {
    Tool(ToolCase),
    Concurrent(ConcurrentCase),
    Prompt(PromptCase),
}

/// A case with its final id and its raw JSON (sent to prompt adapters).
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub suite: String,
    pub kind: CaseKind,
    pub raw: Value,
}

impl Case {
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            CaseKind::Tool(_) => "tool",
            CaseKind::Concurrent(_) => "concurrent_tool",
            CaseKind::Prompt(_) => "prompt",
        }
    }
}

/// One suite file.
#[derive(Debug, Clone)]
pub struct Suite {
    pub path: PathBuf,
    pub name: String,
    pub expected_tools: Option<Vec<String>>,
    pub tool_contracts: BTreeMap<String, ToolContract>,
    pub cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    #[serde(default)]
    expected_tools: Option<Vec<String>>,
    #[serde(default)]
    tool_contracts: BTreeMap<String, Value>,
    #[serde(default)]
    cases: Vec<Value>,
    #[serde(default)]
    description: Option<String>,
}

impl Suite {
    /// Reads and validates one suite file.
    pub fn load(path: &Path) -> Result<Self, SetupError> {
        let text = std::fs::read_to_string(path).map_err(|source| SetupError::Unreadable {
            what: "suite",
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |detail: String| SetupError::Invalid {
            what: "suite",
            path: path.to_path_buf(),
            detail,
        };
        let value: Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let file = match value {
            Value::Array(cases) => SuiteFile {
                expected_tools: None,
                tool_contracts: BTreeMap::new(),
                cases,
                description: None,
            },
            object => typed::<SuiteFile>(object, "").map_err(|e| invalid(e.to_string()))?,
        };
        let _ = file.description;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "suite".into());
        let mut tool_contracts = BTreeMap::new();
        for (tool, contract) in file.tool_contracts {
            let parsed = typed::<ToolContract>(contract, &format!("tool_contracts.{tool}"))
                .map_err(|e| invalid(e.to_string()))?;
            tool_contracts.insert(tool, parsed);
        }
        let mut cases = Vec::new();
        let mut ids = BTreeSet::new();
        for (index, raw) in file.cases.into_iter().enumerate() {
            let case = parse_case(raw, index, &name).map_err(|e| invalid(e.to_string()))?;
            if !ids.insert(case.id.clone()) {
                return Err(invalid(format!(
                    "case id '{}' appears twice; ids must be unique",
                    case.id
                )));
            }
            cases.push(case);
        }
        Ok(Self {
            path: path.to_path_buf(),
            name,
            expected_tools: file.expected_tools,
            tool_contracts,
            cases,
        })
    }
}

/// What is wrong in a suite file, at the path it names; the detail of
/// [`SetupError::Invalid`].
#[derive(Debug, thiserror::Error)]
enum SuiteError {
    #[error("{at}: a case must be a JSON object")]
    NotAnObject { at: String },
    #[error("{at}.requests: missing; give a count or a list of {{tool, arguments}}")]
    NoRequests { at: String },
    #[error("{0}; expected a count (e.g. 8) or a list of {{\"tool\", \"arguments\"}} objects")]
    Requests(Box<SuiteError>),
    #[error("{at}: requests and max_concurrency must be at least 1")]
    NoneToSend { at: String },
    #[error("{at}.response_policy: unknown policy '{policy}'; the only policy is '{only}'", only = REFUSE_OR_EXPLAIN)]
    UnknownPolicy { at: String, policy: String },
    #[error("{at}.type: unknown case type '{kind}'; expected tool, concurrent_tool or prompt")]
    UnknownType { at: String, kind: String },
    #[error("{at}.timeout_seconds {error}")]
    Timeout { at: String, error: BadSeconds },
    /// A value of the wrong shape, at its full path.
    #[error("{path}: {error}")]
    Shape { path: String, error: serde_json::Error },
}

fn parse_case(raw: Value, index: usize, suite: &str) -> Result<Case, SuiteError> {
    let at = format!("cases[{index}]");
    if !raw.is_object() {
        return Err(SuiteError::NotAnObject { at });
    }
    let kind_name = raw
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("tool")
        .to_string();
    let (id, kind) = match kind_name.as_str() {
        "tool" => {
            let case: ToolCase = typed(raw.clone(), &at)?;
            check_timeout(case.timeout_seconds, &at)?;
            (case.id.clone(), CaseKind::Tool(case))
        }
        "concurrent_tool" => {
            let mut rest = raw.clone();
            let object = rest
                .as_object_mut()
                .ok_or_else(|| SuiteError::NotAnObject { at: at.clone() })?;
            let requests = object
                .remove("requests")
                .ok_or_else(|| SuiteError::NoRequests { at: at.clone() })?;
            let max_concurrency = object.remove("max_concurrency").unwrap_or(Value::Null);
            let case = ConcurrentCase {
                call: typed(rest, &at)?,
                requests: typed(requests, &format!("{at}.requests"))
                    .map_err(|e| SuiteError::Requests(Box::new(e)))?,
                max_concurrency: typed(max_concurrency, &format!("{at}.max_concurrency"))?,
            };
            check_timeout(case.call.timeout_seconds, &at)?;
            let count = match &case.requests {
                Requests::Count(n) => *n,
                Requests::List(list) => list.len(),
            };
            if count == 0 || case.max_concurrency == Some(0) {
                return Err(SuiteError::NoneToSend { at });
            }
            (case.call.id.clone(), CaseKind::Concurrent(case))
        }
        "prompt" => {
            let case: PromptCase = typed(raw.clone(), &at)?;
            check_timeout(case.timeout_seconds, &at)?;
            if let Some(policy) = &case.response_policy
                && policy != REFUSE_OR_EXPLAIN
            {
                return Err(SuiteError::UnknownPolicy {
                    at,
                    policy: policy.clone(),
                });
            }
            (case.id.clone(), CaseKind::Prompt(case))
        }
        other => {
            return Err(SuiteError::UnknownType {
                at,
                kind: other.to_string(),
            });
        }
    };
    Ok(Case {
        id: id.unwrap_or_else(|| format!("{suite}#{index}")),
        suite: suite.to_string(),
        kind,
        raw,
    })
}

fn check_timeout(value: Option<f64>, at: &str) -> Result<(), SuiteError> {
    super::config::seconds(value, super::config::DEFAULT_CALL_TIMEOUT)
        .map(|_| ())
        .map_err(|error| SuiteError::Timeout {
            at: at.to_string(),
            error,
        })
}

/// Deserializes `value` into `T`, naming the failing path under `at`.
fn typed<T: DeserializeOwned>(value: Value, at: &str) -> Result<T, SuiteError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = match (at.is_empty(), inner == ".") {
            (true, _) => inner,
            (false, true) => at.to_string(),
            (false, false) => format!("{at}.{inner}"),
        };
        SuiteError::Shape {
            path,
            error: e.into_inner(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(raw: Value) -> String {
        parse_case(raw, 2, "s").map(drop).unwrap_err().to_string()
    }

    #[test]
    fn bad_cases_are_refused_at_their_path_with_the_fix() {
        // Each refusal names the case's path and what is expected there.
        assert_eq!(refusal(json!(1)), "cases[2]: a case must be a JSON object");
        assert_eq!(
            refusal(json!({"type": "x"})),
            "cases[2].type: unknown case type 'x'; expected tool, concurrent_tool or prompt"
        );
        assert_eq!(
            refusal(json!({"type": "concurrent_tool", "tool": "t"})),
            "cases[2].requests: missing; give a count or a list of {tool, arguments}"
        );
        assert_eq!(
            refusal(json!({"type": "concurrent_tool", "tool": "t", "requests": 0})),
            "cases[2]: requests and max_concurrency must be at least 1"
        );
        assert_eq!(
            refusal(json!({"tool": "t", "timeout_seconds": 0})),
            "cases[2].timeout_seconds must be greater than 0 and at most 3600, got 0"
        );
        assert_eq!(
            refusal(json!({"type": "prompt", "prompt": "p", "response_policy": "y"})),
            "cases[2].response_policy: unknown policy 'y'; the only policy is 'refuse_or_explain'"
        );
        let requests = refusal(json!({"type": "concurrent_tool", "tool": "t", "requests": "x"}));
        assert!(
            requests.starts_with("cases[2].requests: ")
                && requests
                    .ends_with("; expected a count (e.g. 8) or a list of {\"tool\", \"arguments\"} objects"),
            "{requests}"
        );
    }
}
