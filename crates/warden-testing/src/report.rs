//! The scenario report: the contract's
//! `{ok, startup, tools, schemas, cases[{id, type, status, result|results, error, duration_ms}]}`
//! plus `failures` (path, expected, actual) wherever something differed.
//!
//! Filled in by [`super::run`] and the runner; written as JSON to
//! `--output` and summarised for people on stdout.

use serde::Serialize;
use serde_json::Value;

use super::assertions::Mismatch;

/// `passed`, `failed` or `skipped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Passed,
    Failed,
    Skipped,
}

impl Verdict {
    pub fn of(failures: &[Mismatch]) -> Self {
        if failures.is_empty() {
            Verdict::Passed
        } else {
            Verdict::Failed
        }
    }
    fn label(self) -> &'static str {
        match self {
            Verdict::Passed => "PASS",
            Verdict::Failed => "FAIL",
            Verdict::Skipped => "SKIP",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Startup {
    pub status: Verdict,
    pub duration_ms: f64,
    /// The command line started.
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Tools {
    pub expected: Vec<String>,
    pub actual: Vec<String>,
    /// Expected but not listed: fails the run.
    pub missing: Vec<String>,
    /// Listed but not expected: informational (extra tools are allowed).
    pub unexpected: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Schemas {
    pub status: Verdict,
    pub error: Option<String>,
    pub failures: Vec<Mismatch>,
}

/// One request of a concurrent case.
#[derive(Debug, Clone, Serialize)]
pub struct RequestReport {
    pub index: usize,
    pub tool: String,
    pub status: Verdict,
    pub result: Value,
    pub error: Option<String>,
    pub failures: Vec<Mismatch>,
    pub duration_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    pub id: String,
    pub suite: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub status: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<RequestReport>>,
    pub error: Option<String>,
    pub failures: Vec<Mismatch>,
    pub duration_ms: f64,
}

impl CaseReport {
    /// Sets status and error from the failures found.
    pub fn judge(&mut self, failures: Vec<Mismatch>) {
        self.status = Verdict::of(&failures);
        if !failures.is_empty() {
            self.error = Some(describe_all(&failures));
        }
        self.failures = failures;
    }
}

/// All mismatches on one line each, joined with "; ".
pub fn describe_all(failures: &[Mismatch]) -> String {
    failures
        .iter()
        .map(Mismatch::describe)
        .collect::<Vec<_>>()
        .join("; ")
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ok: bool,
    pub startup: Startup,
    pub tools: Tools,
    pub schemas: Schemas,
    pub cases: Vec<CaseReport>,
    /// The suite files run, in order.
    pub suites: Vec<String>,
}

impl Report {
    /// `ok` is true when the server started, no expected tool is missing,
    /// schemas and contracts hold, and no case failed.
    pub fn settle(&mut self) {
        self.ok = self.startup.status == Verdict::Passed
            && self.tools.missing.is_empty()
            && self.tools.error.is_none()
            && self.schemas.status != Verdict::Failed
            && self.cases.iter().all(|c| c.status != Verdict::Failed);
    }

    /// The human summary printed on stdout.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let startup = match &self.startup.error {
            None => format!("started in {:.0} ms", self.startup.duration_ms),
            Some(error) => format!("FAILED: {error}"),
        };
        out.push_str(&format!("server   {}: {startup}\n", self.startup.command));
        if let Some(error) = &self.tools.error {
            out.push_str(&format!("tools    FAILED: {error}\n"));
        } else if self.startup.status == Verdict::Passed {
            out.push_str(&format!(
                "tools    {} listed; missing: {}; unexpected (allowed): {}\n",
                self.tools.actual.len(),
                list_or_none(&self.tools.missing),
                list_or_none(&self.tools.unexpected),
            ));
        }
        match (&self.schemas.status, &self.schemas.error) {
            (Verdict::Failed, _) => {
                out.push_str("schemas  FAILED\n");
                for failure in &self.schemas.failures {
                    out.push_str(&format!("         {}\n", failure.describe()));
                }
            }
            (Verdict::Passed, _) => out.push_str("schemas  passed (2020-12 structure and tool contracts)\n"),
            (Verdict::Skipped, error) => {
                out.push_str(&format!("schemas  skipped: {}\n", error.as_deref().unwrap_or("")))
            }
        }
        for case in &self.cases {
            out.push_str(&format!(
                "{}  {}/{} ({}, {:.0} ms)\n",
                case.status.label(),
                case.suite,
                case.id,
                case.kind,
                case.duration_ms
            ));
            for failure in &case.failures {
                out.push_str(&format!("      {}\n", failure.describe()));
            }
            if case.failures.is_empty()
                && let Some(error) = &case.error
            {
                out.push_str(&format!("      {error}\n"));
            }
            for request in case.results.iter().flatten() {
                for failure in &request.failures {
                    out.push_str(&format!(
                        "      request[{}]: {}\n",
                        request.index,
                        failure.describe()
                    ));
                }
            }
        }
        let count = |v: Verdict| self.cases.iter().filter(|c| c.status == v).count();
        out.push_str(&format!(
            "result: {} ({} passed, {} failed, {} skipped)\n",
            if self.ok { "ok" } else { "FAILED" },
            count(Verdict::Passed),
            count(Verdict::Failed),
            count(Verdict::Skipped),
        ));
        out
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}
