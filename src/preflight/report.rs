//! The preflight report: one [`Check`] per thing verified, printed for people
//! (one line per check, a fix under each failure) or as one JSON object.
//!
//! Built by `check_app` (`--check`) and `main` (`preflight`) in [`super`]; printed by the `--check` flag of every app
//! and by `warden preflight`. The JSON shape is the contract's
//! `{ok, server, checks:[{name, status, message, fix}], diagnostics_dir}`.

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

/// How one check came out. Serialized as the same upper-case word that is
/// printed (`"PASS"`, `"WARN"`, `"FAIL"`, `"SKIP"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CheckStatus {
    /// Verified.
    Pass,
    /// Works, but something is missing or degraded; does not fail the run.
    Warn,
    /// Broken: the run exits 1.
    Fail,
    /// Not checked, with the reason in the message.
    Skip,
}

impl CheckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Pass => "PASS",
            CheckStatus::Warn => "WARN",
            CheckStatus::Fail => "FAIL",
            CheckStatus::Skip => "SKIP",
        }
    }
}

/// One verified fact about the server or this machine.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable dotted name, e.g. `mcp.stdout`.
    pub name: String,
    pub status: CheckStatus,
    /// One line saying what was found.
    pub message: String,
    /// One line saying what to do; present for WARN and FAIL.
    pub fix: Option<String>,
}

impl Check {
    pub fn pass(name: &str, message: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Pass, message, None)
    }
    pub fn skip(name: &str, message: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Skip, message, None)
    }
    pub fn warn(name: &str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Warn, message, Some(fix.into()))
    }
    pub fn fail(name: &str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Fail, message, Some(fix.into()))
    }
    /// FAIL when `strict`, else WARN.
    pub fn warn_or_fail(
        strict: bool,
        name: &str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        let status = if strict {
            CheckStatus::Fail
        } else {
            CheckStatus::Warn
        };
        Self::new(name, status, message, Some(fix.into()))
    }
    fn new(name: &str, status: CheckStatus, message: impl Into<String>, fix: Option<String>) -> Self {
        Self {
            name: name.to_string(),
            status,
            message: message.into(),
            fix,
        }
    }
}

/// What preflight learned about the server it started.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerSummary {
    /// The command started for the MCP check, program first.
    pub command: Vec<String>,
    /// `serverInfo.name` from initialize, when it answered.
    pub name: Option<String>,
    /// `serverInfo.version` from initialize, when it answered.
    pub version: Option<String>,
    /// The negotiated protocol version, when it answered.
    pub protocol_version: Option<String>,
}

impl ServerSummary {
    /// Takes the server's name, version and protocol from an `initialize` result.
    pub(crate) fn read_initialize(&mut self, result: &serde_json::Value) {
        let info = &result["serverInfo"];
        self.name = info["name"].as_str().map(str::to_string);
        self.version = info["version"].as_str().map(str::to_string);
        self.protocol_version = result["protocolVersion"].as_str().map(str::to_string);
    }
}

/// The whole preflight result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// True when no check failed (warnings allowed).
    pub ok: bool,
    pub server: ServerSummary,
    pub checks: Vec<Check>,
    /// Private (0700) directory holding the server's stderr, the MCP
    /// transcript and a copy of this report.
    pub diagnostics_dir: PathBuf,
}

impl Report {
    pub fn new(server: ServerSummary, checks: Vec<Check>, diagnostics_dir: PathBuf) -> Self {
        let ok = !checks.iter().any(|c| c.status == CheckStatus::Fail);
        Self {
            ok,
            server,
            checks,
            diagnostics_dir,
        }
    }

    /// 0 when nothing failed, 1 otherwise.
    pub fn exit_code(&self) -> ExitCode {
        if self.ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }

    fn count(&self, status: CheckStatus) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// The human form: one line per check, its fix indented below it.
    pub fn render_text(&self, title: &str) -> String {
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        let mut out = format!("{title}\n");
        for check in &self.checks {
            out.push_str(&format!(
                "{:<4}  {:<width$}  {}\n",
                check.status.as_str(),
                check.name,
                check.message
            ));
            if let Some(fix) = &check.fix {
                out.push_str(&format!("      {:<width$}  fix: {fix}\n", ""));
            }
        }
        out.push_str(&format!("diagnostics: {}\n", self.diagnostics_dir.display()));
        out.push_str(&format!(
            "result: {} ({} passed, {} warned, {} failed, {} skipped)\n",
            if self.ok { "ok" } else { "FAILED" },
            self.count(CheckStatus::Pass),
            self.count(CheckStatus::Warn),
            self.count(CheckStatus::Fail),
            self.count(CheckStatus::Skip),
        ));
        out
    }
}
