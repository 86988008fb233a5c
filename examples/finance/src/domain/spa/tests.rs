//! Unit tests of `check_spa` on synthetic data with known answers.

#![allow(clippy::unwrap_used)]

use super::super::bootstrap::SplitMix64;
use super::*;

/// Standard normal draws by Box–Muller from the crate's generator.
fn normals(g: &mut SplitMix64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let (u, v) = (1.0 - g.next_f64(), g.next_f64());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        })
        .collect()
}

/// models = benchmark + edge_k + noise (σ = 0.01), as a frame of records.
fn data(edges: &[f64], n: usize, seed: u64) -> (Value, Value) {
    let mut g = SplitMix64::new(seed);
    let bench: Vec<f64> = normals(&mut g, n).iter().map(|z| 0.01 * z).collect();
    let noise: Vec<Vec<f64>> = edges.iter().map(|_| normals(&mut g, n)).collect();
    let records: Vec<Value> = (0..n)
        .map(|t| {
            let mut o = serde_json::Map::new();
            for (k, e) in edges.iter().enumerate() {
                o.insert(format!("m{k}"), json!(bench[t] + e + 0.01 * noise[k][t]));
            }
            Value::Object(o)
        })
        .collect();
    (json!(records), json!(bench))
}

fn run(models: Value, bench: Value, seed: u64) -> GuardReport<SpaEvidence> {
    let r = check_spa(
        serde_json::from_value(
            json!({"models": models, "benchmark": bench, "seed": seed, "n_bootstrap": 300}),
        )
        .unwrap(),
    )
    .unwrap();
    super::super::report::assert_evidence_matches(&r);
    r
}

#[test]
fn clear_winner_passes() {
    // Pins a strategy with a 0.5σ-per-period edge over 250 periods: p ≈ 0, passes.
    let (m, b) = data(&[0.0, 0.005, -0.002], 250, 11);
    let r = run(m, b, 1);
    assert!(r.passed, "{:?}", r.findings);
    assert_eq!(r.evidence["best_model"], "m1");
    assert!(r.evidence["p_values"]["consistent"].as_f64().unwrap() < 0.01);
}

#[test]
fn losing_models_fail() {
    // Pins 10 models each 0.2σ per period worse than the benchmark: no superior model.
    let (m, b) = data(&[-0.002; 10], 250, 12);
    let r = run(m, b, 2);
    assert!(!r.passed);
    // Every model trails, so T = 0 and every replication ties or exceeds it: p = 1.
    assert_eq!(r.evidence["statistic"].as_f64().unwrap(), 0.0);
    assert_eq!(r.evidence["p_values"]["consistent"].as_f64().unwrap(), 1.0);
}

#[test]
fn null_rejection_rate_is_near_nominal() {
    // Pins calibration: 40 datasets of 20 zero-edge models (n = 250, 200 reps) reject at
    // most 8 times at 5%. Measured in a release run over 400 datasets: 5.5% with block 1,
    // 10.5% with block 10 (the noisy kernel ω̂ at small n), 7.5% at n = 1000.
    let mut rejected = 0;
    for s in 0..40 {
        let (m, b) = data(&[0.0; 20], 250, 500 + s);
        let input = json!({"models": m, "benchmark": b, "seed": s, "n_bootstrap": 200});
        rejected += usize::from(check_spa(serde_json::from_value(input).unwrap()).unwrap().passed);
    }
    assert!(rejected <= 8, "{rejected} of 40");
}

#[test]
fn p_values_are_ordered_and_deterministic() {
    // Pins p_lower <= p_consistent <= p_upper, and the same seed giving the same report.
    let (m, b) = data(&[0.0, -0.003, 0.001, -0.01], 200, 13);
    let r1 = run(m.clone(), b.clone(), 5);
    let r2 = run(m, b, 5);
    assert_eq!(r1.evidence, r2.evidence);
    let p = &r1.evidence["p_values"];
    let (l, c, u) = (
        p["lower"].as_f64().unwrap(),
        p["consistent"].as_f64().unwrap(),
        p["upper"].as_f64().unwrap(),
    );
    assert!(l <= c && c <= u, "{l} {c} {u}");
}

#[test]
fn statistic_matches_a_hand_recomputation() {
    // Pins stat = max(√n·d̄/ω̂, 0) with ω̂ recomputed from the full Politis–Romano sum.
    let (m, b) = data(&[0.001], 40, 14);
    let r = run(m.clone(), b.clone(), 0);
    let bench: Vec<f64> = serde_json::from_value(b).unwrap();
    let d: Vec<f64> = m
        .as_array()
        .unwrap()
        .iter()
        .zip(&bench)
        .map(|(o, b)| o["m0"].as_f64().unwrap() - b)
        .collect();
    let n = d.len();
    let mean = d.iter().sum::<f64>() / n as f64;
    let mut var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    for i in 1..n {
        let g: f64 = (0..n - i).map(|t| (d[t] - mean) * (d[t + i] - mean)).sum::<f64>() / n as f64;
        let w = i as f64 / n as f64;
        var += 2.0 * ((1.0 - w) * 0.9f64.powi(i as i32) + w * 0.9f64.powi((n - i) as i32)) * g;
    }
    let want = ((n as f64).sqrt() * mean / var.sqrt()).max(0.0);
    assert!((r.evidence["statistic"].as_f64().unwrap() - want).abs() < 1e-10);
}

#[test]
fn refusals() {
    // Pins refusals: rep cap, short sample, misaligned benchmark, text column.
    let (m, b) = data(&[0.0], 20, 15);
    let bad = |v: Value| {
        check_spa(serde_json::from_value(v).unwrap())
            .unwrap_err()
            .to_string()
    };
    assert!(
        bad(json!({"models": m, "benchmark": b, "n_bootstrap": 10_001}))
            .starts_with("n_bootstrap: must be 1..=10000")
    );
    let (m5, b5) = data(&[0.0], 5, 15);
    assert!(bad(json!({"models": m5, "benchmark": b5})).contains("at least 10 periods"));
    assert!(bad(json!({"models": m, "benchmark": [0.0, 1.0]})).starts_with("benchmark: has 2 values"));
    let text = json!([{"date": "2024-01-01", "m": 0.1}]);
    assert!(bad(json!({"models": text, "benchmark": [0.0]})).contains("records[0].date must be a number"));
}

/// The deterministic two-model panel of the arch reference below.
fn arch_panel() -> (Vec<f64>, [Vec<f64>; 2]) {
    let t: Vec<f64> = (0..40).map(f64::from).collect();
    let bench = t.iter().map(|t| 0.005 * (0.3 * t).sin()).collect();
    let m0 = t.iter().map(|t| 0.01 * (1.3 * t).sin() + 0.002).collect();
    let m1 = t.iter().map(|t| 0.01 * (0.7 * t).cos() - 0.001).collect();
    (bench, [m0, m1])
}

#[test]
fn omega_and_statistic_match_arch() {
    // Pins ω̂², the consistent-threshold validity and T against arch 8.0's SPA (Hansen 2005), on
    // deterministic data so no bootstrap draw is involved (our RNG differs from arch's):
    //   import numpy as np; from arch.bootstrap import SPA
    //   t = np.arange(40); bench = 0.005*np.sin(0.3*t)
    //   models = np.column_stack([0.01*np.sin(1.3*t) + 0.002, 0.01*np.cos(0.7*t) - 0.001])
    //   spa = SPA(-bench, -models, block_size=10, reps=100, seed=0)   # losses = −returns
    //   spa._compute_variance(); spa._loss_diff_var
    //   → [3.7301131497571215e-05, 6.960089945414707e-05]; spa._check_column_validity() → [True, True]
    //   d = models - bench[:, None]; max(0, max(np.sqrt(40)*d.mean(0)/np.sqrt(var))) → 2.0398099199167445
    let (bench, [m0, m1]) = arch_panel();
    let records: Vec<Value> = (0..40).map(|t| json!({"m0": m0[t], "m1": m1[t]})).collect();
    let r = run(json!(records), json!(bench), 0);
    let rows = r.evidence["models"].as_array().unwrap();
    let omega2 = |i: usize| rows[i]["omega"].as_f64().unwrap().powi(2);
    assert!(
        (omega2(0) / 3.730_113_149_757_121_5e-5 - 1.0).abs() < 1e-10,
        "{}",
        omega2(0)
    );
    assert!(
        (omega2(1) / 6.960_089_945_414_707e-5 - 1.0).abs() < 1e-10,
        "{}",
        omega2(1)
    );
    assert!((r.evidence["statistic"].as_f64().unwrap() - 2.039_809_919_916_744_5).abs() < 1e-10);
    assert!(rows.iter().all(|row| row["in_test"] == json!(true)));
}

#[test]
fn ties_count_strictly_except_at_zero() {
    // Pins the tie rule: T* > T for T > 0 (arch: `(max_simulated_vals > max_loss_diff).mean()`),
    // every replication at T = 0 (our floor at 0; see `exceeds`).
    assert!(!exceeds(1.5, 1.5));
    assert!(exceeds(1.5000001, 1.5));
    assert!(!exceeds(1.0, 1.5));
    assert!(exceeds(0.0, 0.0));
}

#[test]
fn per_model_rows_follow_the_declared_column_order() {
    // Pins input order: columns ["zeta", "alpha"] come back in that order, ranked by t-statistic.
    let (bench, [m0, m1]) = arch_panel();
    let records: Vec<Value> = (0..40).map(|t| json!({"zeta": m1[t], "alpha": m0[t]})).collect();
    let models = json!({"columns": ["zeta", "alpha"], "records": records});
    let r = run(models, json!(bench), 0);
    let rows = r.evidence["models"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|row| row["model"].as_str().unwrap()).collect();
    assert_eq!(names, ["zeta", "alpha"]);
    // alpha (m0, mean diff > 0) has the higher t-statistic: rank 1, and is the best model.
    assert_eq!(
        (rows[0]["rank"].clone(), rows[1]["rank"].clone()),
        (json!(2), json!(1))
    );
    assert_eq!(r.evidence["best_model"], "alpha");
}
