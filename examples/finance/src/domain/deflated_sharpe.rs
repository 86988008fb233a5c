//! Selection bias in a reported Sharpe ratio: the `check_deflated_sharpe`
//! guard (Bailey & López de Prado 2014). It computes the probabilistic
//! Sharpe ratio against the Sharpe ratio expected from the best of N
//! unskilled trials (whose Sharpe ratios may have a non-zero mean), and
//! against an optional benchmark Sharpe ratio (Bailey & López de Prado
//! 2012, "The Sharpe Ratio Efficient Frontier"), each with its minimum
//! track record length.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::DomainError;
use super::metrics::{mean, moments, std_dev};
use super::payload::{Evidence, F64OrInf, Series, Table, fmt_num, series};
use super::report::{Finding, GuardReport};
use super::stats::{norm_cdf, norm_ppf};

/// The Euler–Mascheroni constant γ.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Check whether a Sharpe ratio survives the number of strategies tried: the deflated Sharpe ratio (Bailey & López de Prado, 2014).
///
/// Give either `returns` (the selected strategy's per-period returns; SR =
/// mean(returns − rf)/std(ddof=1), skewness and Pearson kurtosis from biased
/// moments; `returns` are taken as EXCESS returns unless `rf` is given) or
/// `sharpe` + `n_obs` (+ `skew`, `kurtosis`). Every Sharpe ratio here is per
/// observation, NOT annualised: divide an annual SR by √P and an annual
/// variance by P. PSR(SR*) = Φ[(SR − SR*)·√(T−1)/√(1 − γ₃·SR + (γ₄−1)/4·SR²)];
/// the expected maximum SR of N unskilled trials is SR₀ = M + √V·[(1−γ)·Φ⁻¹(1 −
/// 1/N) + γ·Φ⁻¹(1 − 1/(N·e))] (M = mean of the trials' SRs; SR₀ = M when
/// N = 1); DSR = PSR(SR₀). MinTRL(SR*) = 1 + (1 − γ₃·SR + (γ₄−1)/4·SR²)·(Φ⁻¹(threshold)/(SR − SR*))².
/// With `benchmark_sharpe` SR_b, PSR(SR_b) and MinTRL(SR_b) are reported too.
/// Fails when DSR < `threshold`, or PSR(SR_b) < `threshold` when a benchmark is given.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeflatedSharpeInput {
    /// Per-period returns of the selected strategy, decimals; give this or `sharpe` + `n_obs`. Excess returns (over the risk-free rate) unless `rf` is given.
    #[serde(default)]
    #[schemars(with = "Option<Series>")]
    pub returns: Option<Value>,
    /// Risk-free rate per period (decimal, e.g. 0.04/252 for 4% a year on daily returns), subtracted from each of `returns` before the Sharpe ratio. Default 0: `returns` are already excess returns. Only with `returns`; `sharpe` must already be of excess returns.
    #[serde(default)]
    pub rf: f64,
    /// Observed Sharpe ratio per observation (not annualised: annual / √P), when `returns` is not given.
    #[serde(default)]
    #[schemars(extend("x-required-when" = "returns is not given", "x-hint" = "annual SR / √P"))]
    pub sharpe: Option<f64>,
    /// Number of return observations T behind `sharpe` (>= 2).
    #[serde(default)]
    #[schemars(extend("x-required-when" = "returns is not given"))]
    pub n_obs: Option<u64>,
    /// Skewness γ₃ of the returns (default 0), with `sharpe`.
    #[serde(default)]
    pub skew: Option<f64>,
    /// Pearson kurtosis γ₄ of the returns (3 for a normal distribution, NOT excess; default 3), with `sharpe`.
    #[serde(default)]
    pub kurtosis: Option<f64>,
    /// Number of independent strategies / configurations tried, N >= 1.
    pub n_trials: u64,
    /// Variance V of the trials' Sharpe ratios, per observation (annualised variance / P); required when n_trials > 1.
    #[serde(default)]
    #[schemars(extend(
        "x-required-when" = "n_trials > 1",
        "x-hint" = "sample variance of the per-observation Sharpe ratios of all N trials; annual SR variance / P"
    ))]
    pub trials_sharpe_variance: Option<f64>,
    /// Mean M of the trials' Sharpe ratios, per observation (annual / √P). Default 0 (unskilled trials).
    #[serde(default)]
    pub trials_sharpe_mean: f64,
    /// Benchmark Sharpe ratio SR_b per observation (annual / √P): PSR and MinTRL are also computed against it, and the guard fails when PSR(SR_b) < threshold. Default none.
    #[serde(default)]
    pub benchmark_sharpe: Option<f64>,
    /// Pass level for the DSR, a probability in (0, 1). Default 0.95.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
}

fn default_threshold() -> f64 {
    0.95
}

/// SR, T, skew, Pearson kurtosis from whichever input form was given.
fn observed(input: &DeflatedSharpeInput) -> Result<(f64, f64, f64, f64), DomainError> {
    let scalars =
        input.sharpe.is_some() || input.n_obs.is_some() || input.skew.is_some() || input.kurtosis.is_some();
    match (&input.returns, scalars) {
        (Some(_), true) => Err(DomainError::field(
            "returns",
            "give either returns or sharpe/n_obs/skew/kurtosis, not both",
        )),
        (Some(v), false) => {
            if !input.rf.is_finite() {
                return Err(DomainError::field(
                    "rf",
                    format!("must be a finite rate per period, got {}", input.rf),
                ));
            }
            let s: Series = series(v, "returns")?;
            let r = s.finite("returns")?;
            if r.len() < 3 {
                return Err(DomainError::field(
                    "returns",
                    format!("needs at least 3 periods, got {}", r.len()),
                ));
            }
            let sd = std_dev(r);
            if sd <= 0.0 {
                return Err(DomainError::field(
                    "returns",
                    "all values are equal; the Sharpe ratio is undefined",
                ));
            }
            // Subtracting a constant moves the mean only: sd, skewness
            // and kurtosis are those of the excess returns already.
            let (sk, ku) = moments(r);
            Ok(((mean(r) - input.rf) / sd, r.len() as f64, sk, ku))
        }
        (None, _) if input.rf != 0.0 => Err(DomainError::field(
            "rf",
            "applies to returns only: give sharpe of excess returns (mean(r − rf)/std) and leave rf at 0",
        )),
        (None, _) => {
            let (Some(sr), Some(t)) = (input.sharpe, input.n_obs) else {
                let missing = if input.sharpe.is_none() { "sharpe" } else { "n_obs" };
                return Err(DomainError::field(
                    missing,
                    "missing: give returns, or sharpe (per observation) together with n_obs",
                ));
            };
            if !sr.is_finite() {
                return Err(DomainError::field(
                    "sharpe",
                    format!("must be a finite number, got {sr}"),
                ));
            }
            if t < 2 {
                return Err(DomainError::field("n_obs", format!("must be >= 2, got {t}")));
            }
            let sk = input.skew.unwrap_or(0.0);
            let ku = input.kurtosis.unwrap_or(3.0);
            if !sk.is_finite() {
                return Err(DomainError::field(
                    "skew",
                    format!("must be a finite number, got {sk}"),
                ));
            }
            if !ku.is_finite() {
                return Err(DomainError::field(
                    "kurtosis",
                    format!("must be a finite number, got {ku}"),
                ));
            }
            if ku < 1.0 + sk * sk {
                return Err(DomainError::field(
                    "kurtosis",
                    format!(
                        "must be >= 1 + skew² = {} (Pearson kurtosis, 3 for a normal distribution), got {ku}; excess kurtosis? add 3",
                        fmt_num(1.0 + sk * sk, 4)
                    ),
                ));
            }
            Ok((sr, t as f64, sk, ku))
        }
    }
}

/// The evidence of `check_deflated_sharpe` (schema only; see `report`). All Sharpe ratios per observation.
#[derive(Debug, Clone, JsonSchema)]
pub struct DeflatedSharpeEvidence {
    /// Observed SR.
    pub sharpe: f64,
    /// Skewness γ₃.
    pub skew: f64,
    /// Pearson kurtosis γ₄.
    pub kurtosis: f64,
    /// Variance V of the trials' SRs.
    pub trials_sharpe_variance: f64,
    /// Mean M of the trials' SRs.
    pub trials_sharpe_mean: f64,
    /// Observations T.
    pub n_obs: f64,
    /// Trials N.
    pub n_trials: u64,
    /// SR₀ = E[max SR of N trials] ("Infinity" when N is too large for Φ⁻¹(1 − 1/N) in double precision).
    pub expected_max_sharpe: F64OrInf,
    /// PSR(0).
    pub psr_zero: f64,
    /// Deflated Sharpe ratio PSR(SR₀), the verdict's probability.
    pub dsr: f64,
    /// Pass level.
    pub threshold: f64,
    /// Observations needed for PSR(SR₀) >= threshold: measured against
    /// SR₀, the selection-adjusted benchmark (the expected best of the
    /// trials), not against 0.
    pub min_track_record_length: F64OrInf,
    /// SR_b as given; null without a benchmark.
    pub benchmark_sharpe: F64OrInf,
    /// PSR(SR_b); null without a benchmark.
    pub psr_benchmark: F64OrInf,
    /// Observations needed for PSR(SR_b) >= threshold; null without a benchmark.
    pub min_track_record_length_benchmark: F64OrInf,
    /// Paste-ready text table.
    pub table: String,
}

/// Refuses a non-finite optional Sharpe input.
fn finite(field: &str, x: f64) -> Result<f64, DomainError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(DomainError::field(
            field,
            format!("must be a finite Sharpe ratio per observation, got {x}"),
        ))
    }
}

/// E[max SR] of `n` trials whose SRs have mean `mu` and variance `v`
/// (Bailey & López de Prado 2014, eq. for SR₀); `mu` itself for one trial,
/// where the extreme-value approximation (Φ⁻¹(0) = −∞) does not apply.
fn expected_max_sharpe(n: u64, mu: f64, v: f64) -> f64 {
    if n == 1 {
        return mu;
    }
    let nf = n as f64;
    mu + v.sqrt()
        * ((1.0 - EULER_GAMMA) * norm_ppf(1.0 - 1.0 / nf)
            + EULER_GAMMA * norm_ppf(1.0 - 1.0 / (nf * std::f64::consts::E)))
}

/// Runs the deflated-Sharpe check.
pub fn check_deflated_sharpe(
    input: DeflatedSharpeInput,
) -> Result<GuardReport<DeflatedSharpeEvidence>, DomainError> {
    let th = input.threshold;
    if !(th > 0.0 && th < 1.0) {
        return Err(DomainError::field(
            "threshold",
            format!("must be a probability in (0, 1), got {th}"),
        ));
    }
    let n = input.n_trials;
    if n == 0 {
        return Err(DomainError::field(
            "n_trials",
            "must be >= 1 (the selected strategy counts), got 0",
        ));
    }
    let v = match (n, input.trials_sharpe_variance) {
        (1, v) => v.unwrap_or(0.0),
        (_, None) => {
            return Err(DomainError::field(
                "trials_sharpe_variance",
                format!(
                    "is required when n_trials > 1 (got n_trials = {n}): the variance of the trials' per-observation Sharpe ratios"
                ),
            ));
        }
        (_, Some(v)) => v,
    };
    if !(v.is_finite() && v >= 0.0) {
        return Err(DomainError::field(
            "trials_sharpe_variance",
            format!("must be a finite number >= 0, got {v}"),
        ));
    }
    let mu = finite("trials_sharpe_mean", input.trials_sharpe_mean)?;
    let bench = input
        .benchmark_sharpe
        .map(|b| finite("benchmark_sharpe", b))
        .transpose()?;
    let (sr, t, sk, ku) = observed(&input)?;
    let den = 1.0 - sk * sr + (ku - 1.0) / 4.0 * sr * sr;
    if den <= 0.0 {
        // The three together are impossible; kurtosis is the one to look
        // at first (an excess kurtosis given as Pearson's is the usual slip).
        return Err(DomainError::field(
            "kurtosis",
            format!(
                "1 − skew·SR + (kurtosis − 1)/4·SR² = {} is not positive; check sharpe, skew and kurtosis",
                fmt_num(den, 6)
            ),
        ));
    }
    let nf = n as f64;
    let sr0 = expected_max_sharpe(n, mu, v);
    let psr = |star: f64| norm_cdf((sr - star) * (t - 1.0).sqrt() / den.sqrt());
    let min_trl_against = |star: f64| {
        if sr > star {
            1.0 + den * (norm_ppf(th) / (sr - star)).powi(2)
        } else {
            f64::INFINITY
        }
    };
    let dsr = psr(sr0);
    let min_trl = min_trl_against(sr0);

    let mut findings = Vec::new();
    if dsr < th {
        findings.push(Finding::error(
            "sharpe",
            format!(
                "deflated Sharpe ratio {} is below {}: SR {} per observation does not clear SR₀ = {} expected from the best of {n} unskilled trials (needs {} observations, has {})",
                fmt_num(dsr, 4), fmt_num(th, 2), fmt_num(sr, 4), fmt_num(sr0, 4), fmt_num(min_trl.ceil(), 0), t
            ),
        ));
    } else {
        findings.push(Finding::info(
            "sharpe",
            format!(
                "deflated Sharpe ratio {} >= {}: the Sharpe ratio survives {n} trials",
                fmt_num(dsr, 4),
                fmt_num(th, 2)
            ),
        ));
    }
    if let Some(b) = bench {
        let (p, need) = (psr(b), min_trl_against(b));
        let head = format!(
            "PSR against the benchmark SR_b = {} per observation is {}",
            fmt_num(b, 4),
            fmt_num(p, 4)
        );
        let tail = format!("needs {} observations, has {t}", fmt_num(need.ceil(), 0));
        findings.push(if p < th {
            Finding::error(
                "benchmark_sharpe",
                format!("{head}, below {} ({tail})", fmt_num(th, 2)),
            )
        } else {
            Finding::info(
                "benchmark_sharpe",
                format!("{head} >= {} ({tail})", fmt_num(th, 2)),
            )
        });
    }
    if input.returns.is_none() && sr.abs() > 1.0 {
        findings.push(Finding::warning(
            "sharpe",
            format!("a Sharpe ratio of {sr} per observation is implausible; was an annualised ratio passed? divide by √P"),
        ));
    }
    if n == 1 {
        findings.push(Finding::info(
            "n_trials",
            "one trial: no selection to deflate for, SR₀ = trials_sharpe_mean (DSR = PSR(M), PSR(0) by default)",
        ));
    }

    let mut ev = Evidence::new();
    for (k, x) in [
        ("sharpe", sr),
        ("skew", sk),
        ("kurtosis", ku),
        ("trials_sharpe_variance", v),
    ] {
        ev.number(k, x);
    }
    ev.put("n_obs", json!(t));
    ev.put("n_trials", json!(n));
    ev.number("trials_sharpe_mean", mu);
    ev.number("expected_max_sharpe", sr0);
    ev.number("psr_zero", psr(0.0));
    ev.number("dsr", dsr);
    ev.number("threshold", th);
    ev.number("min_track_record_length", min_trl);
    ev.number("benchmark_sharpe", bench.unwrap_or(f64::NAN));
    ev.number("psr_benchmark", bench.map_or(f64::NAN, psr));
    ev.number(
        "min_track_record_length_benchmark",
        bench.map_or(f64::NAN, min_trl_against),
    );
    let mut tb = Table::new(&["quantity", "value"]);
    for (k, x, dp) in [
        ("SR per observation", sr, 4),
        ("observations T", t, 0),
        ("skew γ₃", sk, 3),
        ("Pearson kurtosis γ₄", ku, 3),
        ("trials N", nf, 0),
        ("expected max SR₀", sr0, 4),
        ("PSR(0)", psr(0.0), 4),
        ("DSR = PSR(SR₀)", dsr, 4),
        ("min track record vs SR₀ (obs)", min_trl.ceil(), 0),
        ("min track record vs 0 (obs)", min_trl_against(0.0).ceil(), 0),
    ] {
        tb.row(vec![k.to_owned(), fmt_num(x, dp)]);
    }
    if let Some(b) = bench {
        tb.row(vec!["benchmark SR_b".into(), fmt_num(b, 4)]);
        tb.row(vec!["PSR(SR_b)".into(), fmt_num(psr(b), 4)]);
        tb.row(vec![
            "min track record vs SR_b (obs)".into(),
            fmt_num(min_trl_against(b).ceil(), 0),
        ]);
    }
    ev.table(&tb);
    Ok(GuardReport::new(
        "check_deflated_sharpe",
        findings,
        ev.into_value(),
    ))
}

#[cfg(test)]
mod tests;
