//! Performance arithmetic shared by the research guards, on simple per-period
//! returns as decimals: mean, sample standard deviation (ddof = 1), annualised
//! Sharpe and Sortino ratios, compounding (equity starts at V₀ = 1 and is
//! floored at 0: a return of -100% or worse wipes the account out), CAGR,
//! maximum drawdown, and biased sample moments (skewness, Pearson kurtosis).

/// Arithmetic mean; NaN for an empty slice. Summed as offsets from the
/// first value (shifted data), so a constant series averages to its value
/// exactly: ten 0.01s summed plainly average 0.009999999999999998.
pub fn mean(x: &[f64]) -> f64 {
    let Some(&origin) = x.first() else {
        return f64::NAN;
    };
    origin + x.iter().map(|v| v - origin).sum::<f64>() / x.len() as f64
}

/// Sample standard deviation with ddof = 1; NaN below two values. Taken
/// about the shifted mean ([`mean`]), so a series that does not vary has a
/// deviation of exactly 0 — not rounding noise of 1e-17 that would make
/// its Sharpe ratio 1e16 instead of ±∞.
pub fn std_dev(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return f64::NAN;
    }
    let origin = x[0];
    let m = x.iter().map(|v| v - origin).sum::<f64>() / x.len() as f64;
    (x.iter().map(|v| (v - origin - m) * (v - origin - m)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
}

/// `num / den` where a zero denominator gives ±∞ by the numerator's sign (0 for 0/0).
fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else if num > 0.0 {
        f64::INFINITY
    } else if num < 0.0 {
        f64::NEG_INFINITY
    } else {
        0.0
    }
}

/// Annualised Sharpe ratio √P·mean(x − rf)/std(x − rf, ddof = 1); NaN below
/// two values, ±∞ when the excess returns do not vary but are not zero.
pub fn sharpe(x: &[f64], rf: f64, periods_per_year: f64) -> f64 {
    if x.len() < 2 {
        return f64::NAN;
    }
    let ex: Vec<f64> = x.iter().map(|v| v - rf).collect();
    periods_per_year.sqrt() * ratio(mean(&ex), std_dev(&ex))
}

/// Annualised Sortino ratio P·mean(r − MAR)/DD with downside deviation
/// DD = √(mean over all n of min(r − MAR, 0)²)·√P; +∞ with no downside and
/// a positive mean.
pub fn sortino(r: &[f64], mar: f64, periods_per_year: f64) -> f64 {
    let ex: Vec<f64> = r.iter().map(|v| v - mar).collect();
    ratio(
        periods_per_year * mean(&ex),
        downside_deviation(r, mar, periods_per_year),
    )
}

/// Annualised downside deviation √(mean over all n of min(r − MAR, 0)²)·√P,
/// the Sortino denominator (periods above MAR count as zeros, not dropped).
pub fn downside_deviation(r: &[f64], mar: f64, periods_per_year: f64) -> f64 {
    (r.iter().map(|v| (v - mar).min(0.0).powi(2)).sum::<f64>() / r.len() as f64).sqrt()
        * periods_per_year.sqrt()
}

/// Equity after each period, V₀ = 1, floored at 0 once wiped out.
pub fn equity(r: &[f64]) -> Vec<f64> {
    let mut v = 1.0;
    r.iter()
        .map(|x| {
            v = (v * (1.0 + x)).max(0.0);
            v
        })
        .collect()
}

/// Compounded total return V_n − 1.
pub fn total_return(r: &[f64]) -> f64 {
    equity(r).last().copied().unwrap_or(1.0) - 1.0
}

/// Compound annual growth rate V_n^(P/n) − 1 (−1 once wiped out).
pub fn cagr(r: &[f64], periods_per_year: f64) -> f64 {
    let v = 1.0 + total_return(r);
    if v <= 0.0 {
        -1.0
    } else {
        v.powf(periods_per_year / r.len() as f64) - 1.0
    }
}

/// The worst peak-to-trough fall of the equity curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drawdown {
    /// min over t of V_t / running peak − 1 (0 when equity never falls).
    pub max_drawdown: f64,
    /// Period of the peak before the worst trough; `None` = the start (V₀ = 1).
    pub peak: Option<usize>,
    /// Period of the worst trough; `None` when there is no drawdown.
    pub trough: Option<usize>,
}

/// Maximum drawdown with V₀ = 1 as the first peak.
pub fn max_drawdown(r: &[f64]) -> Drawdown {
    let mut best = Drawdown {
        max_drawdown: 0.0,
        peak: None,
        trough: None,
    };
    let (mut peak_v, mut peak_at) = (1.0, None);
    for (t, v) in equity(r).into_iter().enumerate() {
        if v > peak_v {
            peak_v = v;
            peak_at = Some(t);
        }
        let dd = v / peak_v - 1.0;
        if dd < best.max_drawdown {
            best = Drawdown {
                max_drawdown: dd,
                peak: peak_at,
                trough: Some(t),
            };
        }
    }
    best
}

/// Skewness m₃/m₂^1.5 and Pearson kurtosis m₄/m₂² from biased central
/// moments m_k = mean((x − x̄)^k); NaN when the values do not vary.
pub fn moments(x: &[f64]) -> (f64, f64) {
    let m = mean(x);
    let n = x.len() as f64;
    let m2 = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n;
    let m3 = x.iter().map(|v| (v - m).powi(3)).sum::<f64>() / n;
    let m4 = x.iter().map(|v| (v - m).powi(4)).sum::<f64>() / n;
    if m2 > 0.0 {
        (m3 / m2.powf(1.5), m4 / (m2 * m2))
    } else {
        (f64::NAN, f64::NAN)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const R: [f64; 5] = [0.10, -0.05, 0.02, -0.10, 0.08];

    #[test]
    fn mean_and_std_by_hand() {
        // Pins mean = 0.05/5 = 0.01 and std² = Σ(r−0.01)²/4 = 0.0288/4 (hand sum).
        assert!((mean(&R) - 0.01).abs() < 1e-15);
        assert!((std_dev(&R) - (0.0288f64 / 4.0).sqrt()).abs() < 1e-15);
        assert!(std_dev(&[1.0]).is_nan());
    }

    #[test]
    fn sharpe_by_hand() {
        // Pins Sharpe = √252·0.01/√(0.0288/4) and the rf shift (hand calculation).
        let want = 252f64.sqrt() * 0.01 / (0.0288f64 / 4.0).sqrt();
        assert!((sharpe(&R, 0.0, 252.0) - want).abs() < 1e-12);
        let want_rf = 252f64.sqrt() * 0.005 / (0.0288f64 / 4.0).sqrt();
        assert!((sharpe(&R, 0.005, 252.0) - want_rf).abs() < 1e-12);
        assert_eq!(sharpe(&[0.01, 0.01], 0.0, 252.0), f64::INFINITY);
    }

    #[test]
    fn sortino_by_hand() {
        // Pins DD = √((0.05² + 0.10²)/5)·√12 and Sortino = 12·0.01/DD (hand calculation).
        let dd = ((0.0025f64 + 0.01) / 5.0).sqrt() * 12f64.sqrt();
        assert!((sortino(&R, 0.0, 12.0) - 12.0 * 0.01 / dd).abs() < 1e-12);
        assert_eq!(sortino(&[0.01, 0.02], 0.0, 12.0), f64::INFINITY);
    }

    #[test]
    fn compounding_cagr_and_drawdown_by_hand() {
        // Pins V = 1.1·0.95·1.02·0.9·1.08 = 1.0362069 (hand product), its CAGR, and the
        // drawdown from the 1.1 peak to the trough 1.1·0.95·1.02·0.9 = 0.959310 (−12.79%).
        let v = 1.1 * 0.95 * 1.02 * 0.9 * 1.08;
        assert!((total_return(&R) - (v - 1.0)).abs() < 1e-15);
        assert!((cagr(&R, 5.0) - (v - 1.0)).abs() < 1e-15);
        assert!((cagr(&R, 10.0) - (v * v - 1.0)).abs() < 1e-14);
        let dd = max_drawdown(&R);
        assert!((dd.max_drawdown - (0.95 * 1.02 * 0.9 - 1.0)).abs() < 1e-15);
        assert_eq!((dd.peak, dd.trough), (Some(0), Some(3)));
    }

    #[test]
    fn first_peak_is_the_starting_equity() {
        // Pins V₀ = 1 as the first peak: an immediate −10% is a −10% drawdown from the start.
        let dd = max_drawdown(&[-0.1, 0.05]);
        assert!((dd.max_drawdown + 0.1).abs() < 1e-15);
        assert_eq!((dd.peak, dd.trough), (None, Some(0)));
        assert_eq!(max_drawdown(&[0.01, 0.02]).max_drawdown, 0.0);
    }

    #[test]
    fn wipeout_floors_equity_at_zero() {
        // Pins that −100% ends the account: total −1, CAGR −1, drawdown −1.
        let r = [0.5, -1.2, 0.3];
        assert_eq!(total_return(&r), -1.0);
        assert_eq!(cagr(&r, 252.0), -1.0);
        assert_eq!(max_drawdown(&r).max_drawdown, -1.0);
    }

    #[test]
    fn a_series_that_does_not_vary_has_no_deviation() {
        // Ten 0.01s: summed plainly they average 0.009999999999999998 and
        // "deviate" by 3e-17, a Sharpe ratio of 8.7e16; shifted, exactly 0.
        let flat = [0.01; 10];
        assert_eq!(mean(&flat), 0.01);
        assert_eq!(std_dev(&flat), 0.0);
        assert_eq!(sharpe(&flat, 0.0, 252.0), f64::INFINITY);
        assert!(moments(&flat).0.is_nan());
        // Shifting changes nothing else.
        assert!((mean(&R) - 0.01).abs() < 1e-17);
    }

    #[test]
    fn moments_by_hand() {
        // Pins x = [0, 0, 0, 1]: mean ¼, m₂ = 3/16, m₃ = 3/32, m₄ = 21/256 (hand sums)
        // → skew = (3/32)/(3/16)^1.5, kurtosis = (21/256)/(9/256) = 7/3.
        let (s, k) = moments(&[0.0, 0.0, 0.0, 1.0]);
        assert!((s - (3.0 / 32.0) / (3.0f64 / 16.0).powf(1.5)).abs() < 1e-14);
        assert!((k - 7.0 / 3.0).abs() < 1e-14);
    }
}
