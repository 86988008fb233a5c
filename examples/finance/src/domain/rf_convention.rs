//! Risk-free-rate units: the `check_rf_convention` guard, plus the shared
//! validation of `rf` and `periods_per_year` that the return-based guards
//! reuse, so a percentage or an annual rate passed as per-period is caught
//! wherever an `rf` is accepted.

use schemars::JsonSchema;
use serde::Deserialize;

use super::error::DomainError;
use super::payload::{Evidence, F64OrInf, Table, fmt_num, fmt_pct};
use super::report::{Finding, GuardReport};

/// Above this compounded annual rate a per-period rf is taken to be an annual rate.
pub const MAX_PLAUSIBLE_ANNUAL_RF: f64 = 0.25;

/// Check that a risk-free rate is in the per-period decimal units the research guards expect.
///
/// `rf` is the risk-free return per period as a decimal (0.0002 per trading
/// day ≈ 5% a year), at the periodicity of the returns it goes with
/// (`periods_per_year`: 252 daily, 52 weekly, 12 monthly, 1 yearly). Fails
/// when rf >= 1 (a percentage such as 5 for 5%), or when, with more than one
/// period a year, rf compounds to more than 25% a year ((1 + rf)^P − 1):
/// an annual rate passed as a per-period one. The evidence gives the
/// verdict as fields — `units` ("decimal" or "percent") and `period`
/// ("per_period" or "annual": how rf reads; a percentage is read as an
/// annual rate when P > 1, as rates are quoted) — and the geometric
/// per-period rate (1 + R)^(1/P) − 1 of the annual rate R the caller
/// probably meant.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RfConventionInput {
    /// Risk-free return per period as a decimal (0.0002 per day ≈ 5% a year).
    pub rf: f64,
    /// Periods per year of the returns rf goes with (252 trading days, 52, 12, 1; at most 31,536,000). Default 252.
    #[serde(default = "default_periods_per_year")]
    pub periods_per_year: f64,
}

/// 252 trading days.
pub fn default_periods_per_year() -> f64 {
    252.0
}

/// Refuses a non-finite or non-positive `periods_per_year`, or one above [`MAX_PERIODS_PER_YEAR`].
pub(super) fn check_periods_per_year(p: f64) -> Result<f64, DomainError> {
    if p.is_finite() && p > 0.0 && p <= MAX_PERIODS_PER_YEAR {
        Ok(p)
    } else {
        Err(DomainError::field(
            "periods_per_year",
            format!(
                "must be a number > 0 and at most {MAX_PERIODS_PER_YEAR} (252 for daily, 12 for monthly, 98280 for one-minute bars), got {}",
                super::payload::show_f64(p)
            ),
        ))
    }
}

/// The most periods a year can hold: one a second, all year (31,536,000).
/// Past it the annualising factors (P, √P) only scale rounding noise into
/// a CAGR of infinity; a value that large is a count of something else.
pub(super) const MAX_PERIODS_PER_YEAR: f64 = 31_536_000.0;

/// Refuses a non-finite rf or one at or below −1 (−100% per period).
pub(super) fn check_rf(field: &str, rf: f64) -> Result<f64, DomainError> {
    if rf.is_finite() && rf > -1.0 {
        Ok(rf)
    } else {
        Err(DomainError::field(
            field,
            format!("must be a finite per-period decimal return > -1, got {rf}"),
        ))
    }
}

/// What a per-period rf implies, and what the caller probably meant.
#[derive(Debug, Clone)]
pub(super) struct RfDiagnosis {
    /// Error findings (empty when the units look right).
    pub errors: Vec<Finding>,
    /// (1 + rf)^P − 1.
    pub implied_annual: f64,
    /// The annual rate the caller probably meant, when the units look wrong.
    pub meant_annual: Option<f64>,
    /// (1 + meant)^(1/P) − 1, the per-period rf to pass instead.
    pub suggested_rf: Option<f64>,
    /// How rf reads: "decimal" or "percent" (rf >= 1).
    pub units: &'static str,
    /// How rf reads: "per_period" (as the guards expect) or "annual".
    pub period: &'static str,
}

/// Diagnoses the units of a per-period rf (validated) at `field`.
pub(super) fn diagnose_rf(field: &str, rf: f64, p: f64) -> RfDiagnosis {
    let implied_annual = (1.0 + rf).powf(p) - 1.0;
    let per_period = |annual: f64| (1.0 + annual).powf(1.0 / p) - 1.0;
    let advice = |annual: f64| {
        format!(
            "if you meant {} a year, pass {field} = {} ((1 + {})^(1/{}) − 1)",
            fmt_pct(annual, 4),
            fmt_num(per_period(annual), 9),
            fmt_num(annual, 6),
            fmt_num(p, 0)
        )
    };
    let (meant, message) = if rf >= 1.0 {
        let meant = rf / 100.0;
        let msg = format!(
            "{field} = {rf} looks like a percentage: {field} is a per-period decimal return (0.0002 = 0.02% per period); {}",
            advice(meant)
        );
        (Some(meant), Some(msg))
    } else if p > 1.0 && implied_annual > MAX_PLAUSIBLE_ANNUAL_RF {
        let msg = format!(
            "{field} = {rf} per period compounds to {} a year over {} periods ((1 + {field})^P − 1), above the plausible {}: an annual rate passed as per-period? {}",
            fmt_pct(implied_annual, 2),
            fmt_num(p, 0),
            fmt_pct(MAX_PLAUSIBLE_ANNUAL_RF, 0),
            advice(rf)
        );
        (Some(rf), Some(msg))
    } else {
        (None, None)
    };
    let units = if rf >= 1.0 { "percent" } else { "decimal" };
    // A percentage is read as an annual rate (P > 1), as in `advice` above;
    // with P = 1 the per-period rate is the annual one.
    let period = if meant.is_some() && p > 1.0 {
        "annual"
    } else {
        "per_period"
    };
    RfDiagnosis {
        units,
        period,
        errors: message.map(|m| Finding::error(field, m)).into_iter().collect(),
        implied_annual,
        meant_annual: meant,
        suggested_rf: meant.map(per_period),
    }
}

/// The evidence of `check_rf_convention` (schema only; see `report`).
#[derive(Debug, Clone, JsonSchema)]
pub struct RfConventionEvidence {
    /// rf as given.
    pub rf: f64,
    /// Periods per year.
    pub periods_per_year: f64,
    /// How rf reads: "decimal", or "percent" (rf >= 1).
    pub units: RfUnits,
    /// How rf reads: "per_period" (what the guards expect) or "annual".
    pub period: RfPeriod,
    /// (1 + rf)^P − 1.
    pub implied_annual_rate: F64OrInf,
    /// The annual rate probably meant; null when rf looks right.
    pub probable_annual_rate: F64OrInf,
    /// The per-period decimal rf to pass instead; null when rf looks right.
    pub suggested_rf_per_period: F64OrInf,
    /// Paste-ready text table.
    pub table: String,
}

/// Units a risk-free rate reads in.
#[derive(Debug, Clone, Copy, JsonSchema)]
#[schemars(rename_all = "snake_case")]
pub enum RfUnits {
    Decimal,
    Percent,
}

/// Period a risk-free rate reads as.
#[derive(Debug, Clone, Copy, JsonSchema)]
#[schemars(rename_all = "snake_case")]
pub enum RfPeriod {
    PerPeriod,
    Annual,
}

/// Checks the units of a per-period risk-free rate.
pub fn check_rf_convention(
    input: RfConventionInput,
) -> Result<GuardReport<RfConventionEvidence>, DomainError> {
    let p = check_periods_per_year(input.periods_per_year)?;
    let rf = check_rf("rf", input.rf)?;
    let d = diagnose_rf("rf", rf, p);
    let mut findings = d.errors.clone();
    if findings.is_empty() {
        findings.push(Finding::info(
            "rf",
            format!(
                "rf = {rf} per period compounds to {} a year over {} periods",
                fmt_pct(d.implied_annual, 4),
                fmt_num(p, 0)
            ),
        ));
        if rf < 0.0 {
            findings.push(Finding::info("rf", "rf is negative (negative rates are allowed)"));
        }
    }
    let mut ev = Evidence::new();
    ev.number("rf", rf);
    ev.number("periods_per_year", p);
    ev.text("units", d.units);
    ev.text("period", d.period);
    ev.number("implied_annual_rate", d.implied_annual);
    ev.number("probable_annual_rate", d.meant_annual.unwrap_or(f64::NAN));
    ev.number("suggested_rf_per_period", d.suggested_rf.unwrap_or(f64::NAN));
    let mut t = Table::new(&["quantity", "value"]);
    t.row(vec!["rf as given (per period)".into(), rf.to_string()]);
    t.row(vec!["reads as".into(), format!("{} {}", d.units, d.period)]);
    t.row(vec![
        "implied annual (1+rf)^P − 1".into(),
        fmt_pct(d.implied_annual, 4),
    ]);
    if let (Some(m), Some(s)) = (d.meant_annual, d.suggested_rf) {
        t.row(vec!["probable annual rate meant".into(), fmt_pct(m, 4)]);
        t.row(vec![
            "per-period rf to pass (1+R)^(1/P) − 1".into(),
            fmt_num(s, 9),
        ]);
    }
    ev.table(&t);
    Ok(GuardReport::new("check_rf_convention", findings, ev.into_value()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(rf: f64, p: f64) -> GuardReport<RfConventionEvidence> {
        let r = check_rf_convention(RfConventionInput {
            rf,
            periods_per_year: p,
        })
        .unwrap();
        super::super::report::assert_evidence_matches(&r);
        r
    }

    #[test]
    fn daily_per_period_rate_passes() {
        // Pins a sane daily rf: 1.0002^252 − 1 = 5.1674% (computed by hand with logs).
        let r = run(0.0002, 252.0);
        assert!(r.passed);
        let implied = r.evidence["implied_annual_rate"].as_f64().unwrap();
        assert!((implied - (252.0 * 0.0002f64.ln_1p()).exp_m1()).abs() < 1e-12);
        assert!(r.evidence["suggested_rf_per_period"].is_null());
    }

    #[test]
    fn percentage_is_an_error_with_the_conversion() {
        // Pins rf = 5 → percent; suggested (1.05)^(1/252) − 1 = exp(ln 1.05/252) − 1.
        let r = run(5.0, 252.0);
        assert!(!r.passed);
        assert!(r.findings[0].message.contains("looks like a percentage"));
        let s = r.evidence["suggested_rf_per_period"].as_f64().unwrap();
        assert!((s - (1.05f64.ln() / 252.0).exp_m1()).abs() < 1e-15);
        assert_eq!(r.evidence["probable_annual_rate"].as_f64().unwrap(), 0.05);
    }

    #[test]
    fn annual_rate_passed_per_period_is_an_error() {
        // Pins rf = 0.05 daily (compounds to > 25%) → error, meant 5% a year.
        let r = run(0.05, 252.0);
        assert!(!r.passed);
        assert!(
            r.findings[0]
                .message
                .contains("an annual rate passed as per-period")
        );
        let s = r.evidence["suggested_rf_per_period"].as_f64().unwrap();
        assert!((s - (1.05f64.ln() / 252.0).exp_m1()).abs() < 1e-15);
    }

    #[test]
    fn yearly_periods_do_not_apply_the_annual_test() {
        // Pins P = 1: rf = 0.3 is a (high) annual rate, not a units error.
        assert!(run(0.3, 1.0).passed);
        // ...and monthly 0.004 (≈ 4.9% a year) passes while monthly 0.05 (≈ 79.6%) fails.
        assert!(run(0.004, 12.0).passed);
        assert!(!run(0.05, 12.0).passed);
    }

    #[test]
    fn structured_verdict_names_units_and_period() {
        // Pins units/period per case, with the conversions computed independently in Python 3.11:
        //   1.02**(1/12)-1 = 0.0016515813019202241; 1.05**(1/252)-1 = 0.00019363050654397362;
        //   1.003**12-1 = 0.03659998028813005 (0.3% a month is a plausible per-period rf).
        let verdict = |r: &GuardReport<RfConventionEvidence>| {
            (
                r.evidence["units"].as_str().unwrap().to_owned(),
                r.evidence["period"].as_str().unwrap().to_owned(),
            )
        };
        let r = run(2.0, 12.0);
        assert_eq!(verdict(&r), ("percent".into(), "annual".into()));
        let s = r.evidence["suggested_rf_per_period"].as_f64().unwrap();
        assert!((s - 0.001_651_581_301_920_224_1).abs() < 1e-15);
        let r = run(0.05, 252.0);
        assert_eq!(verdict(&r), ("decimal".into(), "annual".into()));
        let s = r.evidence["suggested_rf_per_period"].as_f64().unwrap();
        assert!((s - 0.000_193_630_506_543_973_62).abs() < 1e-15);
        let r = run(0.003, 12.0);
        assert_eq!(verdict(&r), ("decimal".into(), "per_period".into()));
        let implied = r.evidence["implied_annual_rate"].as_f64().unwrap();
        assert!((implied - 0.036_599_980_288_130_05).abs() < 1e-15);
        // P = 1: a percentage per year is still a percentage, the period is right.
        assert_eq!(verdict(&run(5.0, 1.0)), ("percent".into(), "per_period".into()));
    }

    #[test]
    fn invalid_inputs_are_refused() {
        // Pins refusals of rf <= −1 and a non-positive periods_per_year.
        let e = check_rf_convention(RfConventionInput {
            rf: -1.0,
            periods_per_year: 252.0,
        })
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("rf"));
        let e = check_rf_convention(RfConventionInput {
            rf: 0.0,
            periods_per_year: 0.0,
        })
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("periods_per_year"));
        // More periods than seconds in a year: a count of something else,
        // which would only annualise rounding noise into infinities.
        let e = check_periods_per_year(1e300).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("periods_per_year"));
        assert!(e.message.ends_with("got 1e300"), "{e}");
        assert!(check_periods_per_year(MAX_PERIODS_PER_YEAR).is_ok());
        assert!(check_periods_per_year(MAX_PERIODS_PER_YEAR * 1.0001).is_err());
    }
}
