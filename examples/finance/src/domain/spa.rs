//! Data snooping across many strategies: the `check_spa` guard, Hansen's
//! (2005) Superior Predictive Ability test of K strategies' returns against
//! a benchmark, with a seeded stationary bootstrap (see `bootstrap.rs`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::bootstrap::{SplitMix64, stationary_indices, stationary_variance};
use super::error::DomainError;
use super::payload::{Evidence, F64OrInf, Frame, Series, Table, fmt_num, frame, num, series};
use super::report::{Finding, GuardReport};

/// Most bootstrap replications.
pub const MAX_BOOTSTRAP: u32 = 10_000;
/// Most bootstrap work, replications x periods x models (about seconds of CPU).
pub const MAX_SPA_WORK: u128 = 2_000_000_000;
/// Below this many periods the p-values are flagged as optimistic (measured:
/// 20 null models, n = 250, block 10 reject about 10% of the time at 5%).
pub const SHORT_SAMPLE: usize = 500;
/// Fewest periods the test accepts.
pub const MIN_SPA_PERIODS: usize = 10;

/// Test whether any of K strategies truly beats a benchmark once the search over all K is accounted for: Hansen's Superior Predictive Ability (SPA) test.
///
/// `models` holds per-period returns of the K candidate strategies (one
/// column per strategy, one record per period); `benchmark` the benchmark's
/// returns over the same periods, decimals. With d_k = model_k − benchmark,
/// the statistic is max(maxₖ √n·d̄ₖ/ω̂ₖ, 0), ω̂ₖ² the stationary-bootstrap
/// variance; p-values (lower, consistent, upper) come from a Politis–Romano
/// stationary bootstrap with mean block `block_length`, seeded: the same
/// seed gives the same p-values. A p-value counts replications with
/// T* > T, as arch's SPA and Hansen (2005) do; only when T = 0 (no model
/// ahead of the benchmark) every replication counts, so p = 1. Per-model
/// rows (`models` in the evidence) follow the input's column order. Fails
/// (no superior model) when the consistent p-value is at or above `alpha`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpaInput {
    /// Per-period returns of the candidate strategies: one column per strategy, one record per period (dates in the frame's index). Results follow `columns` when given (record keys otherwise, which JSON objects and script maps sort by name).
    #[schemars(with = "Frame")]
    pub models: Value,
    /// Per-period returns of the benchmark, aligned with the models' records.
    #[schemars(with = "Series")]
    pub benchmark: Value,
    /// Bootstrap replications, 1..=10000. Default 1000.
    #[serde(default = "default_reps")]
    pub n_bootstrap: u32,
    /// Mean block length of the stationary bootstrap, in periods (>= 1). Default 10.
    #[serde(default = "default_block")]
    pub block_length: f64,
    /// Seed of the bootstrap's random numbers. Default 0.
    #[serde(default)]
    pub seed: u64,
    /// Significance level for the consistent p-value. Default 0.05.
    #[serde(default = "default_alpha")]
    pub alpha: f64,
}

fn default_reps() -> u32 {
    1000
}
fn default_block() -> f64 {
    10.0
}
fn default_alpha() -> f64 {
    0.05
}

/// The SPA statistic and its three p-values.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SpaOutcome {
    pub stat: f64,
    pub p_lower: f64,
    pub p_consistent: f64,
    pub p_upper: f64,
}

/// The evidence of `check_spa` (schema only; see `report`).
#[derive(Debug, Clone, JsonSchema)]
pub struct SpaEvidence {
    /// T = max(maxₖ √n·d̄ₖ/ω̂ₖ, 0).
    pub statistic: f64,
    /// The three bootstrap p-values.
    pub p_values: SpaPValues,
    /// Significance level.
    pub alpha: f64,
    /// Model with the highest t-statistic.
    pub best_model: String,
    /// Models K.
    pub n_models: usize,
    /// Periods n.
    pub n_periods: usize,
    /// Bootstrap replications.
    pub n_bootstrap: u32,
    /// Mean block length.
    pub block_length: f64,
    /// Bootstrap seed.
    pub seed: u64,
    /// One row per model, in input column order.
    pub models: Vec<SpaModelRow>,
    /// Paste-ready text table.
    pub table: String,
}

/// Hansen's three SPA p-values.
#[derive(Debug, Clone, JsonSchema)]
pub struct SpaPValues {
    /// Lower (liberal) p-value.
    pub lower: f64,
    /// Consistent p-value, the verdict's.
    pub consistent: f64,
    /// Upper (conservative) p-value.
    pub upper: f64,
}

/// One model's differential against the benchmark.
#[derive(Debug, Clone, JsonSchema)]
pub struct SpaModelRow {
    /// Column name.
    pub model: String,
    /// d̄ = mean(model − benchmark).
    pub mean_diff: F64OrInf,
    /// ω̂, the stationary-bootstrap standard deviation of √n·d̄.
    pub omega: F64OrInf,
    /// √n·d̄/ω̂.
    pub t_stat: F64OrInf,
    /// 1 = highest t-statistic.
    pub rank: usize,
    /// False when the differential never varies (left out of the test).
    pub in_test: bool,
}

/// Whether a bootstrap replication's T* counts against the observed T.
///
/// Ties: arch's SPA (`(max_simulated > max_loss_diff).mean()`) and Hansen
/// (2005) count T* > T strictly, and so does this for T > 0, where a tie
/// has probability zero with continuous returns. The one exception is
/// T = 0: T and every T* are floored at 0 here (Hansen's max(·, 0)), so a
/// strict count would give p = share of T* > 0, which is small when every
/// model trails and would declare a trailing model superior. Counting all
/// replications there gives p = 1. Effect against arch, which does not
/// floor: identical counts for T > 0; for T = 0, p = 1 here where arch
/// reports a large p below 1 — neither rejects.
pub(super) fn exceeds(t_star: f64, t: f64) -> bool {
    if t > 0.0 { t_star > t } else { true }
}

/// Hansen's SPA on row-major differentials `d` (n rows x k columns) with
/// per-model mean `dbar` and ω̂ `omega` (all > 0); ties as in [`exceeds`].
pub(super) fn spa_test(
    d: &[f64],
    n: usize,
    dbar: &[f64],
    omega: &[f64],
    reps: u32,
    p: f64,
    seed: u64,
) -> SpaOutcome {
    let k = dbar.len();
    let sn = (n as f64).sqrt();
    let stat = (0..k).map(|j| sn * dbar[j] / omega[j]).fold(0.0, f64::max);
    let thr = (2.0 * (n as f64).ln().ln()).sqrt() / sn;
    let g_l: Vec<f64> = dbar.iter().map(|x| x.max(0.0)).collect();
    let g_c: Vec<f64> = (0..k)
        .map(|j| if dbar[j] >= -omega[j] * thr { dbar[j] } else { 0.0 })
        .collect();
    let mut rng = SplitMix64::new(seed);
    let (mut idx, mut sums) = (Vec::with_capacity(n), vec![0.0; k]);
    let mut exceed = [0u32; 3];
    for _ in 0..reps {
        stationary_indices(&mut rng, n, p, &mut idx);
        sums.iter_mut().for_each(|s| *s = 0.0);
        for &t in &idx {
            for (s, x) in sums.iter_mut().zip(&d[t * k..(t + 1) * k]) {
                *s += x;
            }
        }
        let mut best = [0.0f64; 3];
        for j in 0..k {
            let m = sums[j] / n as f64;
            for (b, g) in best.iter_mut().zip([g_l[j], g_c[j], dbar[j]]) {
                *b = b.max(sn * (m - g) / omega[j]);
            }
        }
        for (e, b) in exceed.iter_mut().zip(best) {
            *e += u32::from(exceeds(b, stat));
        }
    }
    let r = f64::from(reps);
    SpaOutcome {
        stat,
        p_lower: f64::from(exceed[0]) / r,
        p_consistent: f64::from(exceed[1]) / r,
        p_upper: f64::from(exceed[2]) / r,
    }
}

fn validate(input: &SpaInput) -> Result<(u32, f64, f64), DomainError> {
    let reps = input.n_bootstrap;
    if !(1..=MAX_BOOTSTRAP).contains(&reps) {
        return Err(DomainError::field(
            "n_bootstrap",
            format!("must be 1..={MAX_BOOTSTRAP}, got {reps}"),
        ));
    }
    let b = input.block_length;
    if !(b.is_finite() && b >= 1.0) {
        return Err(DomainError::field(
            "block_length",
            format!("must be a finite number >= 1 (periods), got {b}"),
        ));
    }
    let a = input.alpha;
    if !(a > 0.0 && a < 1.0) {
        return Err(DomainError::field(
            "alpha",
            format!("must be a probability in (0, 1), got {a}"),
        ));
    }
    Ok((reps, b, a))
}

/// Decoded, aligned inputs: model names and row-major differentials.
fn differentials(models: &Frame, bench: &Series) -> Result<(Vec<String>, Vec<f64>), DomainError> {
    let b = bench.finite("benchmark")?;
    let n = models.len();
    if b.len() != n {
        return Err(DomainError::field(
            "benchmark",
            format!(
                "has {} values but models has {n} records; they must be aligned period by period",
                b.len()
            ),
        ));
    }
    if let (Some(a), Some(c)) = (&models.index, &bench.index)
        && let Some(i) = (0..n).find(|&i| a[i] != c[i])
    {
        return Err(DomainError::field(
            "benchmark",
            format!(
                "index[{i}] is '{}' but models has '{}' there; align them first",
                c[i], a[i]
            ),
        ));
    }
    let k = models.columns.len();
    let mut d = vec![0.0; n * k];
    for (j, name) in models.columns.iter().enumerate() {
        let col = models.numbers(name, "models")?;
        for (t, x) in col.iter().enumerate() {
            if !x.is_finite() {
                return Err(DomainError::field(
                    "models",
                    format!("records[{t}].{name} is {}; every return must be finite", num(*x)),
                ));
            }
            d[t * k + j] = x - b[t];
        }
    }
    Ok((models.columns.clone(), d))
}

/// Runs Hansen's SPA test.
pub fn check_spa(input: SpaInput) -> Result<GuardReport<SpaEvidence>, DomainError> {
    let (reps, block, alpha) = validate(&input)?;
    let models = frame(&input.models, "models")?;
    let bench = series(&input.benchmark, "benchmark")?;
    let (names, d) = differentials(&models, &bench)?;
    let (n, k) = (models.len(), names.len());
    if k == 0 {
        return Err(DomainError::field(
            "models",
            "has no columns; give one column of returns per strategy",
        ));
    }
    if n < MIN_SPA_PERIODS {
        return Err(DomainError::field(
            "models",
            format!("needs at least {MIN_SPA_PERIODS} periods, got {n}"),
        ));
    }
    let work = u128::from(reps) * n as u128 * k as u128;
    if work > MAX_SPA_WORK {
        return Err(DomainError::field(
            "n_bootstrap",
            format!(
                "{reps} replications x {n} periods x {k} models = {work} exceeds the work cap {MAX_SPA_WORK}; lower n_bootstrap"
            ),
        ));
    }
    let p = 1.0 / block;
    let mut findings = Vec::new();
    let mut kept = Vec::new();
    let (mut dbar, mut omega) = (Vec::new(), Vec::new());
    let mut rows = Vec::new();
    for j in 0..k {
        let col: Vec<f64> = (0..n).map(|t| d[t * k + j]).collect();
        let m = col.iter().sum::<f64>() / n as f64;
        let w = stationary_variance(&col, p).sqrt();
        let t_stat = (n as f64).sqrt() * m / w;
        rows.push((names[j].clone(), m, w, t_stat, w > 0.0));
        if w > 0.0 {
            kept.push(j);
            dbar.push(m);
            omega.push(w);
        } else {
            findings.push(Finding::warning(
                format!("models.{}", names[j]),
                "differential against the benchmark never varies; left out of the test",
            ));
        }
    }
    if kept.is_empty() {
        return Err(DomainError::field(
            "models",
            "no model's returns differ from the benchmark by a varying amount",
        ));
    }
    let dk: Vec<f64> = (0..n)
        .flat_map(|t| kept.iter().map(move |&j| (t, j)))
        .map(|(t, j)| d[t * k + j])
        .collect();
    let out = spa_test(&dk, n, &dbar, &omega, reps, p, input.seed);
    // Rows stay in input order; `rank` 1 is the highest t-statistic.
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| rows[b].3.total_cmp(&rows[a].3));
    let mut rank = vec![0usize; k];
    for (r, &j) in order.iter().enumerate() {
        rank[j] = r + 1;
    }
    let best = rows[order[0]].clone();
    let ps = format!(
        "consistent p = {} (lower {}, upper {})",
        fmt_num(out.p_consistent, 4),
        fmt_num(out.p_lower, 4),
        fmt_num(out.p_upper, 4)
    );
    if out.p_consistent < alpha {
        findings.push(Finding::info(
            "models",
            format!(
                "'{}' beats the benchmark after accounting for {k} models: {ps} < alpha {alpha}",
                best.0
            ),
        ));
    } else {
        findings.push(Finding::error(
            "models",
            format!("no model beats the benchmark once the search over {k} models is accounted for: {ps} >= alpha {alpha}"),
        ));
        if best.3 > 1.645 {
            findings.push(Finding::warning(
                format!("models.{}", best.0),
                format!(
                    "looks significant on its own (t = {}) but not after the search: data snooping",
                    fmt_num(best.3, 2)
                ),
            ));
        }
    }

    if n < SHORT_SAMPLE {
        findings.push(Finding::warning(
            "models",
            format!("{n} periods is short: the bootstrap variance ω̂ is noisy and the p-values tend to be optimistic (over-reject)"),
        ));
    }

    let mut ev = Evidence::new();
    ev.number("statistic", out.stat);
    ev.put(
        "p_values",
        json!({"lower": out.p_lower, "consistent": out.p_consistent, "upper": out.p_upper}),
    );
    ev.number("alpha", alpha);
    ev.text("best_model", &best.0);
    ev.put("n_models", json!(k));
    ev.put("n_periods", json!(n));
    ev.put("n_bootstrap", json!(reps));
    ev.number("block_length", block);
    ev.put("seed", json!(input.seed));
    let mut table = Table::new(&["model", "mean_diff", "omega", "t_stat", "rank"]);
    let mut list = Vec::new();
    for (j, (name, m, w, t, in_test)) in rows.iter().enumerate() {
        table.row(vec![
            name.clone(),
            fmt_num(*m, 6),
            fmt_num(*w, 6),
            fmt_num(*t, 3),
            rank[j].to_string(),
        ]);
        list.push(
            json!({"model": name, "mean_diff": num(*m), "omega": num(*w), "t_stat": num(*t),
                         "rank": rank[j], "in_test": in_test}),
        );
    }
    ev.rows("models", list);
    ev.table(&table);
    Ok(GuardReport::new("check_spa", findings, ev.into_value()))
}

#[cfg(test)]
mod tests;
