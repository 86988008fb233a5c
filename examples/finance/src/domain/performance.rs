//! Headline performance figures with their conventions spelled out: the
//! `check_performance` guard (CAGR, volatility, Sharpe, Sortino with its
//! downside deviation, maximum drawdown) and the sanity findings that go
//! with them, including a flag on figures annualised from under a year.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::DomainError;
use super::metrics::{cagr, downside_deviation, max_drawdown, mean, sharpe, sortino, std_dev, total_return};
use super::payload::{Evidence, F64OrInf, Series, Table, fmt_num, fmt_pct, series};
use super::report::{Finding, GuardReport};
use super::rf_convention::{check_periods_per_year, check_rf, default_periods_per_year, diagnose_rf};

/// Compute headline performance figures from per-period returns, with the conventions stated: CAGR, volatility, Sharpe, Sortino and maximum drawdown.
///
/// Conventions: `returns` are simple returns per period as decimals (0.01 =
/// 1%), compounded from V₀ = 1. CAGR = V_n^(P/n) − 1; volatility =
/// std(ddof=1)·√P; Sharpe = √P·mean(r − rf)/std(r − rf, ddof=1); Sortino =
/// P·mean(r − MAR)/DD with DD = √(mean over all n of min(r − MAR, 0)²)·√P
/// ("Infinity" with no downside); max drawdown = min(V/running peak − 1)
/// with V₀ = 1 as the first peak. `rf` and `mar` are per period. DD is
/// reported as `downside_deviation` (annualised). With fewer than P periods
/// (under a year) the annualised figures are extrapolations:
/// `annualised_from_short_sample` is true, they are listed in
/// `extrapolated` and starred in the table. Fails only on impossible input
/// (a return at or below −100%, or rf in the wrong units).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerformanceInput {
    /// Simple returns per period, decimals (0.01 = 1%).
    #[schemars(with = "Series")]
    pub returns: Value,
    /// Periods per year for annualising (252 trading days, 52 weeks, 12 months; at most 31,536,000, one a second). Default 252.
    #[serde(default = "default_periods_per_year")]
    pub periods_per_year: f64,
    /// Risk-free return per period as a decimal, for the Sharpe ratio. Default 0.
    #[serde(default)]
    pub rf: f64,
    /// Minimum acceptable return per period as a decimal, for the Sortino ratio. Default 0.
    #[serde(default)]
    pub mar: f64,
}

/// The evidence of `check_performance` (schema only; see `report`).
#[derive(Debug, Clone, JsonSchema)]
pub struct PerformanceEvidence {
    /// Periods in the sample.
    pub n_periods: usize,
    /// Periods per year used to annualise.
    pub periods_per_year: f64,
    /// V_n − 1.
    pub total_return: F64OrInf,
    /// Geometric annual return V_n^(P/n) − 1.
    pub cagr: F64OrInf,
    /// std(ddof=1)·√P.
    pub volatility: F64OrInf,
    /// Annualised Sharpe ratio.
    pub sharpe: F64OrInf,
    /// Annualised Sortino ratio P·mean(r − MAR)/DD.
    pub sortino: F64OrInf,
    /// DD = √(mean over all n of min(r − MAR, 0)²)·√P, annualised.
    pub downside_deviation: F64OrInf,
    /// Worst fall from a running peak (<= 0).
    pub max_drawdown: F64OrInf,
    /// The peak before the worst trough: its index label, else its
    /// position `#k of n` counted from 1 (the equity after the k-th return);
    /// "start" = V₀, before any return.
    pub drawdown_peak: String,
    /// The worst trough, labelled as the peak; "none" without a drawdown.
    pub drawdown_trough: String,
    /// Arithmetic mean return per period.
    pub mean_return: F64OrInf,
    /// n / P.
    pub sample_years: f64,
    /// True when n < P: the annualised figures are extrapolations.
    pub annualised_from_short_sample: bool,
    /// The annualised keys that are extrapolated (empty for a year or more).
    pub extrapolated: Vec<String>,
    /// Paste-ready text table (extrapolated figures starred).
    pub table: String,
}

/// The evidence keys annualised with P, flagged when the sample is under a year.
const ANNUALISED: [&str; 5] = ["cagr", "volatility", "sharpe", "sortino", "downside_deviation"];

/// Runs the performance check.
pub fn check_performance(input: PerformanceInput) -> Result<GuardReport<PerformanceEvidence>, DomainError> {
    let p = check_periods_per_year(input.periods_per_year)?;
    let rf = check_rf("rf", input.rf)?;
    let mar = check_rf("mar", input.mar)?;
    let s = series(&input.returns, "returns")?;
    let r = s.finite("returns")?;
    if r.len() < 2 {
        return Err(DomainError::field(
            "returns",
            format!("needs at least 2 periods, got {}", r.len()),
        ));
    }
    let mut findings = diagnose_rf("rf", rf, p).errors;
    findings.extend(diagnose_rf("mar", mar, p).errors);
    if let Some(i) = r.iter().position(|x| *x <= -1.0) {
        findings.push(Finding::error(
            "returns",
            format!(
                "value at {} is {}: a loss of 100% or more wipes the account out (equity is floored at 0 from there)",
                s.label(i),
                r[i]
            ),
        ));
    }
    if let Some(i) = r.iter().position(|x| x.abs() > 1.0 && *x > -1.0) {
        findings.push(Finding::warning(
            "returns",
            format!(
                "value at {} is {}, a move over 100% in one period; are returns in percent?",
                s.label(i),
                r[i]
            ),
        ));
    }
    let years = r.len() as f64 / p;
    let short = years < 1.0;
    if short {
        findings.push(Finding::warning(
            "returns",
            format!(
                "{} periods is less than one year ({} years at {} periods per year): {} are annualised by extrapolation",
                r.len(),
                fmt_num(years, 2),
                fmt_num(p, 0),
                ANNUALISED.join(", ")
            ),
        ));
    }

    let (tot, cg, vol) = (total_return(r), cagr(r, p), std_dev(r) * p.sqrt());
    let (sr, so, dd_down) = (
        sharpe(r, rf, p),
        sortino(r, mar, p),
        downside_deviation(r, mar, p),
    );
    let dd = max_drawdown(r);
    let label = |i: Option<usize>, start: &str| i.map_or_else(|| start.to_owned(), |i| s.label(i));
    let peak = label(dd.peak, "start");
    let trough = label(dd.trough, "none");

    let mut ev = Evidence::new();
    ev.put("n_periods", json!(r.len()));
    ev.number("periods_per_year", p);
    ev.number("total_return", tot);
    ev.number("cagr", cg);
    ev.number("volatility", vol);
    ev.number("sharpe", sr);
    ev.number("sortino", so);
    ev.number("downside_deviation", dd_down);
    ev.number("max_drawdown", dd.max_drawdown);
    ev.text("drawdown_peak", &peak);
    ev.text("drawdown_trough", &trough);
    ev.number("mean_return", mean(r));
    ev.number("sample_years", years);
    ev.put("annualised_from_short_sample", json!(short));
    let extrapolated: Vec<Value> = if short {
        ANNUALISED.iter().map(|k| json!(k)).collect()
    } else {
        Vec::new()
    };
    ev.list("extrapolated", extrapolated);
    let star = |name: &str| {
        if short {
            format!("{name} *")
        } else {
            name.to_owned()
        }
    };
    let mut t = Table::new(&["metric", "value", "convention"]);
    t.row(vec![
        "total return".into(),
        fmt_pct(tot, 2),
        "V_n − 1, V₀ = 1".into(),
    ]);
    t.row(vec![star("CAGR"), fmt_pct(cg, 2), "V_n^(P/n) − 1".into()]);
    t.row(vec![star("volatility"), fmt_pct(vol, 2), "std(ddof=1)·√P".into()]);
    t.row(vec![
        star("Sharpe"),
        fmt_num(sr, 3),
        "√P·mean(r−rf)/std(r−rf)".into(),
    ]);
    t.row(vec![star("Sortino"), fmt_num(so, 3), "P·mean(r−MAR)/DD".into()]);
    t.row(vec![
        star("downside deviation DD"),
        fmt_pct(dd_down, 2),
        "√(mean min(r−MAR, 0)²)·√P".into(),
    ]);
    t.row(vec![
        "max drawdown".into(),
        fmt_pct(dd.max_drawdown, 2),
        format!("peak {peak} → trough {trough}"),
    ]);
    if short {
        t.row(vec![
            "* annualised from a short sample".into(),
            format!("{} years", fmt_num(years, 2)),
            "extrapolated: read with care".into(),
        ]);
    }
    ev.table(&t);
    Ok(GuardReport::new("check_performance", findings, ev.into_value()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(v: Value) -> GuardReport<PerformanceEvidence> {
        let r = check_performance(serde_json::from_value(v).unwrap()).unwrap();
        super::super::report::assert_evidence_matches(&r);
        r
    }

    #[test]
    fn figures_match_hand_calculation() {
        // Pins the five figures on r = [0.10, −0.05, 0.02, −0.10, 0.08], P = 12, worked by hand:
        // V = 1.0362069 → CAGR = V^(12/5) − 1; vol = √(0.0288/4)·√12; Sharpe = √12·0.01/√(0.0288/4);
        // DD = √((0.05² + 0.10²)/5)·√12, Sortino = 12·0.01/DD; drawdown 0.95·1.02·0.9 − 1.
        let r = run(
            json!({"returns": {"index": ["m1", "m2", "m3", "m4", "m5"], "values": [0.10, -0.05, 0.02, -0.10, 0.08]}, "periods_per_year": 12}),
        );
        let e = &r.evidence;
        let f = |k: &str| e[k].as_f64().unwrap();
        let v: f64 = 1.1 * 0.95 * 1.02 * 0.9 * 1.08;
        assert!((f("cagr") - (v.powf(12.0 / 5.0) - 1.0)).abs() < 1e-12);
        let sd = (0.0288f64 / 4.0).sqrt();
        assert!((f("volatility") - sd * 12f64.sqrt()).abs() < 1e-12);
        assert!((f("sharpe") - 12f64.sqrt() * 0.01 / sd).abs() < 1e-12);
        let dd = ((0.0025f64 + 0.01) / 5.0).sqrt() * 12f64.sqrt();
        assert!((f("sortino") - 0.12 / dd).abs() < 1e-12);
        assert!((f("max_drawdown") - (0.95 * 1.02 * 0.9 - 1.0)).abs() < 1e-12);
        assert_eq!(e["drawdown_peak"], "m1");
        assert_eq!(e["drawdown_trough"], "m4");
        assert!(r.passed);
        // 5 months < 12: the extrapolation warning.
        assert!(
            r.findings
                .iter()
                .any(|f| f.message.contains("less than one year"))
        );
    }

    #[test]
    fn downside_deviation_matches_numpy_and_short_samples_are_flagged() {
        // Pins DD against numpy 2.4 (independent computation):
        //   r = np.array([0.10, -0.05, 0.02, -0.10, 0.08]); mar = 0.001
        //   np.sqrt(np.mean(np.minimum(r - mar, 0)**2)) * np.sqrt(12) = 0.17528491093074727
        // and the short-sample flag: 5 months = 0.4167 years → every annualised figure listed.
        let r =
            run(json!({"returns": [0.10, -0.05, 0.02, -0.10, 0.08], "periods_per_year": 12, "mar": 0.001}));
        let e = &r.evidence;
        assert!((e["downside_deviation"].as_f64().unwrap() - 0.175_284_910_930_747_27).abs() < 1e-15);
        // Sortino = P·mean(r − MAR)/DD with the same DD.
        let so = 12.0 * (0.01 - 0.001) / 0.175_284_910_930_747_27;
        assert!((e["sortino"].as_f64().unwrap() - so).abs() < 1e-12);
        assert_eq!(e["annualised_from_short_sample"], json!(true));
        assert!((e["sample_years"].as_f64().unwrap() - 5.0 / 12.0).abs() < 1e-15);
        assert_eq!(
            e["extrapolated"],
            json!(["cagr", "volatility", "sharpe", "sortino", "downside_deviation"])
        );
        assert!(e["table"].as_str().unwrap().contains("CAGR *"));
        // A full year is not flagged.
        let r = run(json!({"returns": vec![0.01; 12], "periods_per_year": 12}));
        assert_eq!(r.evidence["annualised_from_short_sample"], json!(false));
        assert_eq!(r.evidence["extrapolated"], json!([]));
    }

    #[test]
    fn no_downside_gives_infinite_sortino() {
        // Pins Sortino = "Infinity" when no return is below MAR.
        let r = run(json!({"returns": [0.01, 0.02, 0.0], "periods_per_year": 252}));
        assert_eq!(r.evidence["sortino"], json!("Infinity"));
        assert_eq!(r.evidence["max_drawdown"].as_f64().unwrap(), 0.0);
        assert_eq!(r.evidence["drawdown_trough"], "none");
    }

    #[test]
    fn wipeout_fails() {
        // Pins the error on a return of −100% and the floored equity.
        let r = run(json!({"returns": [0.1, -1.0, 0.5]}));
        assert!(!r.passed);
        assert_eq!(r.evidence["max_drawdown"].as_f64().unwrap(), -1.0);
        assert_eq!(r.evidence["cagr"].as_f64().unwrap(), -1.0);
    }

    #[test]
    fn annual_rf_fails() {
        // Pins the shared rf-units check: 0.03 per day is an annual rate passed per period.
        let r = run(json!({"returns": [0.01, 0.02, 0.0], "rf": 0.03}));
        assert!(!r.passed);
        assert_eq!(r.findings[0].location, "rf");
    }

    #[test]
    fn refusals() {
        // Pins refusals: one period, infinity in returns, unknown input key.
        let e = check_performance(serde_json::from_value(json!({"returns": [0.01]})).unwrap()).unwrap_err();
        assert!(e.to_string().contains("at least 2 periods"));
        let e = check_performance(serde_json::from_value(json!({"returns": [0.01, "Infinity"]})).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("is Infinity"), "{e}");
        assert!(serde_json::from_value::<PerformanceInput>(json!({"returns": [], "ppy": 12})).is_err());
    }
}
