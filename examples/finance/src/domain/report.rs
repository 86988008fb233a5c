//! The result shape every research guard returns: `GuardReport` with its
//! `Finding`s and `Severity`, plus `GUARD_CATEGORIES`, the guard → category
//! map a catalogue can be built from.
//!
//! A report's `evidence` is built with the capped `Evidence` builder and
//! travels as JSON; its *schema* comes from the guard's evidence type `E`
//! (schema-only, never constructed), so `tools/list` and the coding-task
//! prompt show typed evidence instead of `any`. `assert_evidence_matches`
//! (tests) pins that what a guard emits is what `E` declares.

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::payload::MAX_LIST_ITEMS;

/// Guard name → category, for every research guard.
pub const GUARD_CATEGORIES: &[(&str, &str)] = &[
    ("check_cost_curve", "costs"),
    ("check_rf_convention", "conventions"),
    ("check_performance", "performance"),
    ("check_deflated_sharpe", "overfitting"),
    ("check_spa", "overfitting"),
    ("check_brinson", "attribution"),
    ("check_pit_universe", "data-integrity"),
    ("check_survivorship", "data-integrity"),
];

/// How serious a finding is; only errors fail a guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The check failed: the result should not be trusted as is.
    Error,
    /// Suspicious; worth a look, does not fail the guard.
    Warning,
    /// Context for reading the evidence.
    Info,
}

/// One observation of a guard.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Finding {
    /// "error", "warning" or "info".
    pub severity: Severity,
    /// Where it applies: an input field, optionally with a row, column or label.
    #[serde(rename = "where")]
    pub location: String,
    /// What was found, with the numbers that matter.
    pub message: String,
}

impl Finding {
    /// An error finding (fails the guard).
    pub fn error(location: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(Severity::Error, location, message)
    }

    /// A warning finding.
    pub fn warning(location: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(Severity::Warning, location, message)
    }

    /// An info finding.
    pub fn info(location: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(Severity::Info, location, message)
    }

    fn of(severity: Severity, location: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity,
            location: location.into(),
            message: message.into(),
        }
    }
}

/// What a research guard returns; `E` is the schema of its evidence.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GuardReport<E = Value> {
    /// The guard's name, e.g. "check_cost_curve".
    pub guard: String,
    /// True when there is no error finding.
    pub passed: bool,
    /// Errors, warnings and notes (at most 500; a last info finding says how many were left out).
    pub findings: Vec<Finding>,
    /// Number of error findings (all of them, including any left out).
    pub n_errors: usize,
    /// The numbers behind the verdict; `table` is a paste-ready text table, `truncated` (present only when something was cut) says what was cut.
    #[schemars(with = "E")]
    pub evidence: Value,
    /// Ties the report to its evidence schema; carries no data.
    #[serde(skip)]
    #[schemars(skip)]
    shape: PhantomData<fn() -> E>,
}

impl<E> GuardReport<E> {
    /// Assembles a report: `passed` and `n_errors` follow from the findings.
    pub fn new(guard: &str, mut findings: Vec<Finding>, evidence: Value) -> Self {
        let n_errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
        if findings.len() > MAX_LIST_ITEMS {
            let left = findings.len() - (MAX_LIST_ITEMS - 1);
            findings.truncate(MAX_LIST_ITEMS - 1);
            findings.push(Finding::info(
                "findings",
                format!("{left} more findings not shown"),
            ));
        }
        Self {
            guard: guard.to_owned(),
            passed: n_errors == 0,
            findings,
            n_errors,
            evidence,
            shape: PhantomData,
        }
    }
}

/// Pins that a report's evidence keys are the ones its schema type `E`
/// declares (plus `truncated`), and that every required one is present.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) fn assert_evidence_matches<E: JsonSchema>(r: &GuardReport<E>) {
    let schema = serde_json::to_value(schemars::schema_for!(E)).unwrap();
    let declared = schema["properties"].as_object().unwrap();
    let got = r.evidence.as_object().unwrap();
    for key in got.keys() {
        assert!(
            key == "truncated" || declared.contains_key(key),
            "{}: evidence key '{key}' is not declared by {}",
            r.guard,
            E::schema_name()
        );
    }
    for key in schema["required"].as_array().into_iter().flatten() {
        let key = key.as_str().unwrap();
        assert!(
            got.contains_key(key),
            "{}: evidence lacks required '{key}'",
            r.guard
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn passed_follows_errors_only() {
        // Pins that warnings do not fail a guard and errors do.
        let r: GuardReport = GuardReport::new("g", vec![Finding::warning("x", "hmm")], json!({}));
        assert!(r.passed);
        let r: GuardReport = GuardReport::new("g", vec![Finding::error("x", "bad")], json!({}));
        assert!(!r.passed);
        assert_eq!(r.n_errors, 1);
    }

    #[test]
    fn wire_shape() {
        // Pins the JSON keys: severity lowercase, `where`, n_errors.
        let r: GuardReport = GuardReport::new("g", vec![Finding::error("returns", "bad")], json!({"a": 1}));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            json!({"guard": "g", "passed": false, "n_errors": 1, "evidence": {"a": 1},
                   "findings": [{"severity": "error", "where": "returns", "message": "bad"}]})
        );
    }

    #[test]
    fn findings_are_capped_but_all_errors_counted() {
        // Pins the 500-finding cap with an info note, and n_errors counting every error.
        let f: Vec<Finding> = (0..600).map(|i| Finding::error("x", i.to_string())).collect();
        let r: GuardReport = GuardReport::new("g", f, json!({}));
        assert_eq!(r.findings.len(), 500);
        assert_eq!(r.n_errors, 600);
        assert_eq!(r.findings[499].message, "101 more findings not shown");
    }

    #[test]
    fn categories_cover_each_guard_once() {
        // Pins eight distinct guards, each with a category from the fixed set.
        let allowed = [
            "costs",
            "conventions",
            "performance",
            "overfitting",
            "attribution",
            "data-integrity",
        ];
        assert_eq!(GUARD_CATEGORIES.len(), 8);
        for (i, (g, c)) in GUARD_CATEGORIES.iter().enumerate() {
            assert!(allowed.contains(c));
            assert!(!GUARD_CATEGORIES[..i].iter().any(|(h, _)| h == g));
        }
    }
}
