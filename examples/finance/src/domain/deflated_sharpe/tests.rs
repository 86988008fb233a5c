//! Unit tests of `check_deflated_sharpe`: the published example and cases
//! recomputed by hand.

#![allow(clippy::unwrap_used)]

use super::*;

fn run(v: Value) -> Result<GuardReport, DomainError> {
    check_deflated_sharpe(serde_json::from_value(v).unwrap())
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
