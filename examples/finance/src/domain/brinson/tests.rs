//! Unit tests of `check_brinson`, against a two-segment example worked by hand.

#![allow(clippy::unwrap_used)]

use super::*;

/// Equities: w_p 0.6, w_b 0.5, r_p 0.10, r_b 0.08; bonds: w_p 0.4, w_b 0.5, r_p 0.03, r_b 0.04.
fn two_segments() -> Value {
    json!([
        {"segment": "equity", "portfolio_weight": 0.6, "benchmark_weight": 0.5, "portfolio_return": 0.10, "benchmark_return": 0.08},
        {"segment": "bonds", "portfolio_weight": 0.4, "benchmark_weight": 0.5, "portfolio_return": 0.03, "benchmark_return": 0.04}
    ])
}

fn run(segments: Value, method: &str) -> GuardReport<BrinsonEvidence> {
    let r = check_brinson(serde_json::from_value(json!({"segments": segments, "method": method})).unwrap())
        .unwrap();
    super::super::report::assert_evidence_matches(&r);
    r
}

#[test]
fn brinson_fachler_by_hand() {
    // Pins the hand calculation: R_p = 0.072, R_b = 0.06, active 0.012;
    // allocation = 0.1·(0.08 − 0.06) + (−0.1)·(0.04 − 0.06) = 0.004;
    // selection = 0.5·0.02 + 0.5·(−0.01) = 0.005; interaction = 0.1·0.02 + (−0.1)·(−0.01) = 0.003.
    let r = run(two_segments(), "brinson_fachler");
    let f = |k: &str| r.evidence[k].as_f64().unwrap();
    assert!(r.passed, "{:?}", r.findings);
    assert!((f("portfolio_return") - 0.072).abs() < 1e-15);
    assert!((f("benchmark_return") - 0.06).abs() < 1e-15);
    assert!((f("allocation") - 0.004).abs() < 1e-15);
    assert!((f("selection") - 0.005).abs() < 1e-15);
    assert!((f("interaction") - 0.003).abs() < 1e-15);
    assert!(f("residual").abs() < 1e-15);
    assert!(r.evidence["table"].as_str().unwrap().contains("| TOTAL"));
}

#[test]
fn brinson_hood_beebower_by_hand() {
    // Pins BHB allocation = 0.1·0.08 + (−0.1)·0.04 = 0.004 (equal to BF here because weights
    // sum to 1 in both books), per segment: equity 0.008 vs BF 0.002.
    let r = run(two_segments(), "brinson_hood_beebower");
    assert!((r.evidence["allocation"].as_f64().unwrap() - 0.004).abs() < 1e-15);
    assert!((r.evidence["segments"][0]["allocation"].as_f64().unwrap() - 0.008).abs() < 1e-15);
    let bf = run(two_segments(), "brinson_fachler");
    assert!((bf.evidence["segments"][0]["allocation"].as_f64().unwrap() - 0.002).abs() < 1e-15);
}

#[test]
fn weights_off_one_fail_and_bf_stops_reconciling() {
    // Pins a missing 10% cash line: the weight-sum error, and the BF residual worked by hand.
    let segs = json!([
        {"segment": "equity", "portfolio_weight": 0.5, "benchmark_weight": 0.5, "portfolio_return": 0.10, "benchmark_return": 0.08},
        {"segment": "bonds", "portfolio_weight": 0.4, "benchmark_weight": 0.5, "portfolio_return": 0.03, "benchmark_return": 0.04}
    ]);
    let r = run(segs.clone(), "brinson_fachler");
    assert!(!r.passed);
    assert!(
        r.findings
            .iter()
            .any(|f| f.location == "segments.portfolio_weight" && f.message.contains("sums to 0.9"))
    );
    // By hand: R_p = 0.062, R_b = 0.06, active = 0.002; allocation = (−0.1)(0.04 − 0.06) = 0.002,
    // selection = 0.005, interaction = (−0.1)(−0.01) = 0.001; residual = 0.002 − 0.008 = −0.006.
    assert!((r.evidence["residual"].as_f64().unwrap() + 0.006).abs() < 1e-12);
    assert!(
        r.findings
            .iter()
            .any(|f| f.message.contains("does not reconcile"))
    );
    // BHB always reconciles, so only the weight finding remains.
    let r = run(segs, "brinson_hood_beebower");
    assert_eq!(r.n_errors, 1);
}

#[test]
fn null_return_at_zero_weight_is_neutral() {
    // Pins an unheld segment (w_p 0, r_p null): selection and interaction 0, totals still reconcile.
    let segs = json!([
        {"segment": "a", "portfolio_weight": 1.0, "benchmark_weight": 0.7, "portfolio_return": 0.05, "benchmark_return": 0.04},
        {"segment": "b", "portfolio_weight": 0.0, "benchmark_weight": 0.3, "portfolio_return": null, "benchmark_return": 0.02}
    ]);
    let r = run(segs, "brinson_fachler");
    assert!(r.passed, "{:?}", r.findings);
    assert_eq!(r.evidence["segments"][1]["selection"].as_f64().unwrap(), 0.0);
    assert!(r.evidence["residual"].as_f64().unwrap().abs() < 1e-15);
}

#[test]
fn refusals_and_duplicates() {
    // Pins a null return at non-zero weight refused, a typo'd column named, a repeated segment flagged.
    let bad = |v: Value| {
        check_brinson(serde_json::from_value(json!({"segments": v})).unwrap())
            .unwrap_err()
            .to_string()
    };
    let e = bad(
        json!([{"segment": "a", "portfolio_weight": 1.0, "benchmark_weight": 1.0, "portfolio_return": null, "benchmark_return": 0.0}]),
    );
    assert!(
        e.contains("records[0].portfolio_return is null but portfolio_weight is 1"),
        "{e}"
    );
    let e = bad(json!([{"segment": "a", "portfolio_wieght": 1.0}]));
    assert!(
        e.contains("column 'portfolio_wieght' looks like a mistyped 'portfolio_weight'"),
        "{e}"
    );
    let mut segs = two_segments();
    segs.as_array_mut().unwrap()[1]["segment"] = json!("equity");
    assert!(
        run(segs, "brinson_fachler")
            .findings
            .iter()
            .any(|f| f.message.contains("more than once"))
    );
}
