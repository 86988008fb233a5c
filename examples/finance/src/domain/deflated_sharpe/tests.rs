//! Unit tests of `check_deflated_sharpe`: the published example and cases
//! recomputed by hand.

#![allow(clippy::unwrap_used)]

use super::*;

fn run(v: Value) -> Result<GuardReport<DeflatedSharpeEvidence>, DomainError> {
    let r = check_deflated_sharpe(serde_json::from_value(v).unwrap());
    if let Ok(r) = &r {
        super::super::report::assert_evidence_matches(r);
    }
    r
}

#[test]
fn bailey_lopez_de_prado_published_example() {
    // Pins the published example: annual SR 2.5 over T = 1250 daily obs, N = 100, annual
    // variance 0.5, skew −3, kurtosis 10 → SR₀ ≈ 0.1132, DSR ≈ 0.9004 (fails at 0.95).
    let r = run(json!({
        "sharpe": 2.5 / 250f64.sqrt(), "n_obs": 1250, "skew": -3.0, "kurtosis": 10.0,
        "n_trials": 100, "trials_sharpe_variance": 0.5 / 250.0
    }))
    .unwrap();
    let f = |k: &str| r.evidence[k].as_f64().unwrap();
    assert!(
        (f("expected_max_sharpe") - 0.1132).abs() < 5e-5,
        "{}",
        f("expected_max_sharpe")
    );
    assert!((f("dsr") - 0.9004).abs() < 5e-5, "{}", f("dsr"));
    assert!(!r.passed);
    // MinTRL = 1 + den·(Φ⁻¹(0.95)/(SR − SR₀))² ≈ 2051.27 (same formula in double precision by hand).
    assert!((f("min_track_record_length") - 2051.27).abs() < 0.05);
}

#[test]
fn single_trial_is_the_probabilistic_sharpe_ratio() {
    // Pins N = 1 → SR₀ = 0 and DSR = Φ(SR·√(T−1)) for normal moments: Φ(0.1·√99) = Φ(0.99499).
    let r = run(json!({"sharpe": 0.1, "n_obs": 100, "n_trials": 1})).unwrap();
    let want = norm_cdf(0.1 * 99f64.sqrt() / (1.0f64 + 0.5 * 0.01).sqrt());
    assert!((r.evidence["dsr"].as_f64().unwrap() - want).abs() < 1e-14);
    assert_eq!(r.evidence["expected_max_sharpe"].as_f64().unwrap(), 0.0);
}

#[test]
fn returns_form_uses_per_observation_moments() {
    // Pins the returns path against SR/skew/kurtosis recomputed naively from the same data.
    let x = [0.01, -0.02, 0.03, 0.005, -0.01, 0.02, 0.0, 0.015];
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let sd = (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let m2 = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n;
    let m3 = x.iter().map(|v| (v - m).powi(3)).sum::<f64>() / n;
    let m4 = x.iter().map(|v| (v - m).powi(4)).sum::<f64>() / n;
    let r = run(json!({"returns": x, "n_trials": 10, "trials_sharpe_variance": 0.01})).unwrap();
    let f = |k: &str| r.evidence[k].as_f64().unwrap();
    assert!((f("sharpe") - m / sd).abs() < 1e-14);
    assert!((f("skew") - m3 / m2.powf(1.5)).abs() < 1e-12);
    assert!((f("kurtosis") - m4 / (m2 * m2)).abs() < 1e-12);
    assert_eq!(f("n_obs"), 8.0);
}

#[test]
fn strong_track_record_passes() {
    // Pins a pass: SR 0.2 per day over 2,000 obs vs 10 trials of variance 0.0005.
    let r =
        run(json!({"sharpe": 0.2, "n_obs": 2000, "n_trials": 10, "trials_sharpe_variance": 0.0005})).unwrap();
    assert!(r.passed);
}

#[test]
fn annualised_sharpe_draws_a_warning() {
    // Pins the units warning for a per-observation SR above 1.
    let r = run(json!({"sharpe": 2.5, "n_obs": 1250, "n_trials": 1})).unwrap();
    assert!(
        r.findings
            .iter()
            .any(|f| f.severity == super::super::report::Severity::Warning)
    );
}

#[test]
fn refusals() {
    // Pins refusals: both forms, neither, excess kurtosis, missing variance, zero trials, bad threshold.
    let e = |v: Value| run(v).unwrap_err().to_string();
    assert!(e(json!({"returns": [0.1, 0.2, 0.0], "sharpe": 0.1, "n_trials": 1})).contains("not both"));
    assert!(e(json!({"n_trials": 1})).contains("give returns"));
    assert!(
        e(json!({"sharpe": 0.1, "n_obs": 100, "kurtosis": 0.5, "n_trials": 1}))
            .starts_with("kurtosis: must be >= 1 + skew²")
    );
    assert!(
        e(json!({"sharpe": 0.1, "n_obs": 100, "n_trials": 5}))
            .starts_with("trials_sharpe_variance: is required")
    );
    assert!(e(json!({"sharpe": 0.1, "n_obs": 100, "n_trials": 0})).starts_with("n_trials"));
    assert!(e(json!({"sharpe": 0.1, "n_obs": 100, "n_trials": 1, "threshold": 95})).starts_with("threshold"));
    assert!(e(json!({"returns": {"values": [1, 1, 1]}, "n_trials": 1})).contains("all values are equal"));
}

#[test]
fn every_refusal_names_the_field_to_fix() {
    // An input refusal without a field would reach the caller as
    // `guard_failed`, as if the guard had broken: each names one.
    let field = |v: Value| run(v).unwrap_err().field;
    let named = |f: &str| Some(f.to_string());
    assert_eq!(
        field(json!({"returns": [0.1, 0.2, 0.0], "sharpe": 0.1, "n_trials": 1})),
        named("returns")
    );
    assert_eq!(field(json!({"n_trials": 1})), named("sharpe"));
    assert_eq!(field(json!({"sharpe": 0.1, "n_trials": 1})), named("n_obs"));
    assert_eq!(field(json!({"n_obs": 100, "n_trials": 1})), named("sharpe"));
    // Pearson kurtosis 1 + skew², skew·SR = 2: the one point where the
    // variance term is zero.
    assert_eq!(
        field(json!({"sharpe": 1.0, "n_obs": 100, "skew": 2.0, "kurtosis": 5.0, "n_trials": 1})),
        named("kurtosis")
    );
}

#[test]
fn trials_mean_and_benchmark_match_an_independent_scipy_computation() {
    // Pins SR₀ = M + √V·z(N), DSR, PSR(SR_b) and both MinTRLs against scipy 1.17 (Bailey &
    // López de Prado 2012 eq. for PSR/MinTRL, 2014 for SR₀), computed independently:
    //   from scipy.stats import norm; import numpy as np; g = np.euler_gamma
    //   sr, T, sk, ku, N, V, mu, srb, th = 0.15, 500, -0.5, 4.0, 20, 0.002, 0.02, 0.05, 0.95
    //   den = 1 - sk*sr + (ku-1)/4*sr**2
    //   sr0 = mu + np.sqrt(V)*((1-g)*norm.ppf(1-1/N) + g*norm.ppf(1-1/(N*np.e)))
    //   psr = lambda s: norm.cdf((sr-s)*np.sqrt(T-1)/np.sqrt(den))
    //   mintrl = lambda s: 1 + den*(norm.ppf(th)/(sr-s))**2
    //   → sr0 0.10500224368431026, psr(sr0) 0.8319638481246562, psr(srb) 0.9837328587757146,
    //     mintrl(srb) 296.41152589404294, mintrl(sr0) 1459.967833722076
    let r = run(json!({
        "sharpe": 0.15, "n_obs": 500, "skew": -0.5, "kurtosis": 4.0, "n_trials": 20,
        "trials_sharpe_variance": 0.002, "trials_sharpe_mean": 0.02, "benchmark_sharpe": 0.05
    }))
    .unwrap();
    let f = |k: &str| r.evidence[k].as_f64().unwrap();
    assert!((f("expected_max_sharpe") - 0.105_002_243_684_310_26).abs() < 1e-12);
    assert!((f("dsr") - 0.831_963_848_124_656_2).abs() < 1e-9, "{}", f("dsr"));
    assert!((f("psr_benchmark") - 0.983_732_858_775_714_6).abs() < 1e-9);
    assert!((f("min_track_record_length_benchmark") - 296.411_525_894_042_94).abs() < 1e-6);
    assert!((f("min_track_record_length") - 1_459.967_833_722_076).abs() < 1e-5);
    assert_eq!(f("trials_sharpe_mean"), 0.02);
    // DSR 0.83 < 0.95 fails; the benchmark test alone passes (info, not error).
    assert!(!r.passed);
    assert_eq!(r.n_errors, 1);
    assert!(
        r.findings
            .iter()
            .any(|x| x.location == "benchmark_sharpe" && x.severity == super::super::report::Severity::Info)
    );
}

#[test]
fn benchmark_alone_can_fail_the_guard() {
    // Pins the benchmark verdict: one trial, SR 0.05 vs SR_b 0.04 over 250 obs gives PSR(SR_b)
    // = Φ(0.01·√249/√(1 + 0.5·0.0025)) ≈ 0.58 < 0.95 → error at benchmark_sharpe.
    let r = run(json!({"sharpe": 0.05, "n_obs": 250, "n_trials": 1, "benchmark_sharpe": 0.04})).unwrap();
    let want = norm_cdf(0.01 * 249f64.sqrt() / (1.0f64 + 0.5 * 0.0025).sqrt());
    assert!((r.evidence["psr_benchmark"].as_f64().unwrap() - want).abs() < 1e-14);
    assert!(
        r.findings
            .iter()
            .any(|x| x.location == "benchmark_sharpe" && x.severity == super::super::report::Severity::Error)
    );
    // Without a benchmark the benchmark fields are null (NaN), as before.
    let r = run(json!({"sharpe": 0.05, "n_obs": 250, "n_trials": 1})).unwrap();
    assert!(r.evidence["psr_benchmark"].is_null());
}

#[test]
fn one_trial_hurdle_is_the_trials_mean() {
    // Pins N = 1 → SR₀ = M (the expected maximum of one draw is its mean).
    let r = run(json!({"sharpe": 0.1, "n_obs": 100, "n_trials": 1, "trials_sharpe_mean": 0.03})).unwrap();
    assert_eq!(r.evidence["expected_max_sharpe"].as_f64().unwrap(), 0.03);
}

#[test]
fn rf_turns_total_returns_into_excess_returns() {
    // Pins the excess-return convention: returns with rf give the SR of (returns − rf), the same
    // answer as passing the excess returns themselves; rf with a bare sharpe is refused.
    let total = [0.011, -0.019, 0.031, 0.006, -0.009, 0.021, 0.001, 0.016];
    let rf = 0.001;
    let excess: Vec<f64> = total.iter().map(|r| r - rf).collect();
    let with_rf =
        run(json!({"returns": total, "rf": rf, "n_trials": 10, "trials_sharpe_variance": 0.01})).unwrap();
    let given = run(json!({"returns": excess, "n_trials": 10, "trials_sharpe_variance": 0.01})).unwrap();
    for key in ["sharpe", "dsr", "skew", "kurtosis"] {
        let (a, b) = (
            with_rf.evidence[key].as_f64().unwrap(),
            given.evidence[key].as_f64().unwrap(),
        );
        assert!((a - b).abs() < 1e-12, "{key}: {a} vs {b}");
    }
    let n = total.len() as f64;
    let m = excess.iter().sum::<f64>() / n;
    let sd = (excess.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    assert!((with_rf.evidence["sharpe"].as_f64().unwrap() - m / sd).abs() < 1e-14);
    let refused = run(json!({"sharpe": 0.1, "n_obs": 100, "n_trials": 1, "rf": 0.001})).unwrap_err();
    assert!(
        refused.to_string().starts_with("rf: applies to returns only"),
        "{refused}"
    );
}
