//! Unit tests of `check_cost_curve`, with expected values worked out by hand.

#![allow(clippy::unwrap_used)]

use super::*;

fn input(returns: Value, turnover: Value, cost: f64) -> CostCurveInput {
    serde_json::from_value(json!({"returns": returns, "turnover": turnover, "cost_bps": cost})).unwrap()
}

#[test]
fn breakeven_by_hand() {
    // Pins breakeven = 1e4·mean(gross)/mean(turnover) = 1e4·0.001/0.5 = 20 bps (hand calculation).
    let r = check_cost_curve(input(
        json!([0.002, 0.0, 0.001, 0.001]),
        json!([0.5, 0.5, 0.5, 0.5]),
        5.0,
    ))
    .unwrap();
    assert!(r.passed);
    assert!((r.evidence["breakeven_bps"].as_f64().unwrap() - 20.0).abs() < 1e-9);
    assert_eq!(r.evidence["avg_turnover"].as_f64().unwrap(), 0.5);
    // A cost of 25 bps, above the 20 bps breakeven, fails.
    let r = check_cost_curve(input(
        json!([0.002, 0.0, 0.001, 0.001]),
        json!([0.5, 0.5, 0.5, 0.5]),
        25.0,
    ))
    .unwrap();
    assert!(!r.passed);
    assert!(
        r.findings
            .iter()
            .any(|f| f.message.contains("at or below your cost"))
    );
}

#[test]
fn net_sharpe_matches_a_naive_recomputation() {
    // Pins sharpe_at_cost against net returns built by hand: net = g − t·10/1e4.
    let g = [0.01, -0.004, 0.006, 0.002, -0.001];
    let t = [1.0, 0.2, 0.6, 0.0, 2.0];
    let net: Vec<f64> = g.iter().zip(&t).map(|(g, t)| g - t * 0.001).collect();
    let m = net.iter().sum::<f64>() / 5.0;
    let sd = (net.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 4.0).sqrt();
    let want = 252f64.sqrt() * m / sd;
    let r = check_cost_curve(input(json!(g), json!(t), 10.0)).unwrap();
    assert!((r.evidence["sharpe_at_cost"].as_f64().unwrap() - want).abs() < 1e-12);
    // The curve has the default grid plus nothing new (10 is in it): 5 rows.
    assert_eq!(r.evidence["curve"].as_array().unwrap().len(), 5);
    assert!(r.evidence["table"].as_str().unwrap().contains("10.0 (your cost)"));
}

#[test]
fn zero_turnover_gives_infinite_breakeven_not_null() {
    // Pins breakeven = +∞ serialized as "Infinity" when nothing trades and the edge is positive.
    let r = check_cost_curve(input(json!([0.01, 0.0, 0.02]), json!([0, 0, 0]), 10.0)).unwrap();
    super::super::report::assert_evidence_matches(&r);
    assert!(r.passed);
    assert_eq!(r.evidence["breakeven_bps"], json!("Infinity"));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["evidence"]["breakeven_bps"], json!("Infinity"));
    let r = check_cost_curve(input(json!([-0.01, 0.0, -0.02]), json!([0, 0, 0]), 0.0)).unwrap();
    assert_eq!(r.evidence["breakeven_bps"], json!("-Infinity"));
    assert!(!r.passed);
}

#[test]
fn rf_is_subtracted_and_its_units_checked() {
    // Pins breakeven with rf: 1e4·(0.001 − 0.0004)/0.5 = 12 bps; and an annual rf flagged.
    let mut i = input(
        json!([0.002, 0.0, 0.001, 0.001]),
        json!([0.5, 0.5, 0.5, 0.5]),
        5.0,
    );
    i.rf = 0.0004;
    let r = check_cost_curve(i.clone()).unwrap();
    assert!((r.evidence["breakeven_bps"].as_f64().unwrap() - 12.0).abs() < 1e-9);
    i.rf = 0.04;
    let r = check_cost_curve(i).unwrap();
    assert!(
        r.findings
            .iter()
            .any(|f| f.location == "rf" && f.message.contains("annual rate"))
    );
}

#[test]
fn payload_problems_are_refused_by_field() {
    // Pins misaligned series, null values, negative turnover and near-miss keys.
    let e = check_cost_curve(input(json!([0.01, 0.02]), json!([0.1]), 1.0)).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("turnover"));
    let e = check_cost_curve(input(json!([0.01, null]), json!([0.1, 0.1]), 1.0)).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("returns: value at #2 of 2 is null (missing)")
    );
    let e = check_cost_curve(input(json!([0.01, 0.0]), json!([0.1, -0.1]), 1.0)).unwrap_err();
    assert!(e.to_string().contains("cannot be negative"));
    let e = check_cost_curve(input(json!({"vals": [0.1]}), json!([0.1]), 1.0)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "returns: key 'vals' looks like a mistyped 'values'"
    );
    let mut i = input(json!([0.01, 0.0]), json!([0.1, 0.1]), 1.0);
    i.grid = vec![-1.0];
    assert_eq!(check_cost_curve(i).unwrap_err().field.as_deref(), Some("grid[0]"));
}

#[test]
fn percent_units_draw_warnings() {
    // Pins the percent-units warnings on returns above 100% and turnover above 10.
    let r = check_cost_curve(input(json!([5.0, -2.0, 1.0]), json!([50.0, 0.0, 0.0]), 1.0)).unwrap();
    assert!(
        r.findings
            .iter()
            .any(|f| f.location == "returns" && f.message.contains("percent"))
    );
    assert!(
        r.findings
            .iter()
            .any(|f| f.location == "turnover" && f.message.contains("percent"))
    );
}

#[test]
fn arithmetic_and_geometric_annual_returns_match_numpy() {
    // Pins both annual returns at 10 bps against numpy 2.4 (independent computation):
    //   g = np.array([0.01, -0.004, 0.006, 0.002, -0.001]); t = np.array([1.0, 0.2, 0.6, 0.0, 2.0])
    //   net = g - t*10/1e4
    //   252*net.mean() = 0.46368000000000004; np.prod(1+net)**(252/5) - 1 = 0.5843038045648725
    let g = [0.01, -0.004, 0.006, 0.002, -0.001];
    let t = [1.0, 0.2, 0.6, 0.0, 2.0];
    let r = check_cost_curve(input(json!(g), json!(t), 10.0)).unwrap();
    let e = &r.evidence;
    super::super::report::assert_evidence_matches(&r);
    assert!((e["annual_return_arithmetic_at_cost"].as_f64().unwrap() - 0.463_68).abs() < 1e-12);
    assert!((e["annual_return_geometric_at_cost"].as_f64().unwrap() - 0.584_303_804_564_872_5).abs() < 1e-12);
    let row = e["curve"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["cost_bps"] == json!(10.0))
        .unwrap();
    assert!((row["annual_return_arithmetic"].as_f64().unwrap() - 0.463_68).abs() < 1e-12);
    assert!((row["annual_return_geometric"].as_f64().unwrap() - 0.584_303_804_564_872_5).abs() < 1e-12);
    // The older name stays, equal to the geometric figure.
    assert_eq!(row["annualised_return"], row["annual_return_geometric"]);
    assert!(e["table"].as_str().unwrap().contains("annual geometric (CAGR)"));
}
