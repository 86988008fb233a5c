//! Implied volatility: the `implied_volatility` guard, the inverse of
//! `price_option` in its volatility.
//!
//! A model that needs an implied volatility used to bisect with
//! `price_option_t` from a script, one guard call per step (42 calls for
//! one vol). Here the root is found in Rust: Brent's method (bisection
//! safeguarded inverse quadratic interpolation) on σ ↦ BSM(σ) − price,
//! which converges on every price strictly inside the no-arbitrage bounds
//! because the BSM price is continuous and strictly increasing in σ there.
//! A price outside the bounds has no volatility at all, and the error says
//! which bound it broke and by how much.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::DomainError;
use super::options::{Bsm, OptionType};
use super::payload::{show_f64, show_f64_to};

/// Largest volatility searched: 1,000% a year. A price that needs more is
/// within a rounding error of the upper bound.
const MAX_VOL: f64 = 10.0;

/// Iterations of Brent's method allowed (it needs ~10–40).
const MAX_ITERATIONS: u32 = 200;

/// Solve for the Black–Scholes–Merton volatility that reproduces an observed European option price.
///
/// Same units as price_option_t: prices per share, `time_to_expiry` in
/// years, `rate` and `dividend_yield` annualised continuously compounded
/// decimals. The price must lie strictly inside the no-arbitrage bounds:
/// call max(S·e^(−qT) − K·e^(−rT), 0) < price < S·e^(−qT); put
/// max(K·e^(−rT) − S·e^(−qT), 0) < price < K·e^(−rT). Returns the
/// annualised volatility as a decimal (0.235 = 23.5%).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImpliedVolInput {
    /// "call" or "put".
    pub option_type: OptionType,
    /// Observed option price per share (> 0).
    pub price: f64,
    /// Current price of the underlying, per share (> 0).
    pub spot: f64,
    /// Strike price, per share, same currency as spot (> 0).
    pub strike: f64,
    /// Time to expiry in years (> 0; 0.25 = three months).
    pub time_to_expiry: f64,
    /// Risk-free rate, annualised, continuously compounded, as a decimal (0.05 = 5%).
    pub rate: f64,
    /// Continuous dividend yield, annualised, as a decimal (default 0).
    #[serde(default)]
    pub dividend_yield: f64,
}

/// The solved volatility and how well it reprices.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ImpliedVol {
    /// Annualised volatility as a decimal (0.235 = 23.5%).
    pub volatility: f64,
    /// BSM price at that volatility minus the observed price (≈ 0).
    pub price_error: f64,
    /// Root-finding iterations used.
    pub iterations: u32,
}

/// Solves BSM(σ) = price for σ.
pub fn implied_volatility(input: ImpliedVolInput) -> Result<ImpliedVol, DomainError> {
    let at = |vol: f64| {
        Bsm::new(
            input.option_type,
            input.spot,
            input.strike,
            input.time_to_expiry,
            vol,
            input.rate,
            input.dividend_yield,
        )
    };
    let base = at(0.0)?;
    if !input.price.is_finite() || input.price <= 0.0 {
        return Err(DomainError::field(
            "price",
            format!(
                "must be a finite price per share > 0, got {}",
                show_f64(input.price)
            ),
        ));
    }
    if base.t <= 0.0 {
        return Err(DomainError::field(
            "time_to_expiry",
            format!(
                "must be > 0: at expiry the price is intrinsic value and says nothing about volatility, got {}",
                show_f64(base.t)
            ),
        ));
    }
    let fs = base.s * (-base.q * base.t).exp();
    let fk = base.k * (-base.r * base.t).exp();
    let (lower, upper) = match input.option_type {
        OptionType::Call => ((fs - fk).max(0.0), fs),
        OptionType::Put => ((fk - fs).max(0.0), fk),
    };
    if input.price <= lower || input.price >= upper {
        let (side, bound) = if input.price <= lower {
            ("at or below the lower", lower)
        } else {
            ("at or above the upper", upper)
        };
        return Err(DomainError::field(
            "price",
            format!(
                "{} is {side} no-arbitrage bound {} (bounds {} < price < {} for this \
option): no volatility reproduces it; check the price, the option type and the rate",
                show_f64(input.price),
                show_f64_to(bound, 6),
                show_f64_to(lower, 6),
                show_f64_to(upper, 6)
            ),
        ));
    }
    let f = |vol: f64| at(vol).map(|p| p.price() - input.price);
    brent(&f, 0.0, MAX_VOL).map(|(volatility, iterations)| ImpliedVol {
        volatility,
        price_error: f(volatility).unwrap_or(f64::NAN),
        iterations,
    })
}

/// Brent's method on [a, b] where f(a) < 0 < f(b) (Brent 1973, as in
/// Numerical Recipes' `zbrent`), to the last few ulps of σ.
fn brent(
    f: &dyn Fn(f64) -> Result<f64, DomainError>,
    mut a: f64,
    mut b: f64,
) -> Result<(f64, u32), DomainError> {
    let (mut fa, mut fb) = (f(a)?, f(b)?);
    if fa * fb > 0.0 {
        return Err(DomainError::field(
            "price",
            format!("no volatility up to {MAX_VOL} (1,000%) reproduces this price"),
        ));
    }
    let (mut c, mut fc) = (b, fb);
    let (mut d, mut e) = (b - a, b - a);
    for iteration in 1..=MAX_ITERATIONS {
        if (fb > 0.0) == (fc > 0.0) {
            c = a;
            fc = fa;
            d = b - a;
            e = d;
        }
        if fc.abs() < fb.abs() {
            a = b;
            b = c;
            c = a;
            fa = fb;
            fb = fc;
            fc = fa;
        }
        let tolerance = 2.0 * f64::EPSILON * b.abs() + 1e-15;
        let m = 0.5 * (c - b);
        if m.abs() <= tolerance || fb == 0.0 {
            return Ok((b, iteration));
        }
        if e.abs() >= tolerance && fa.abs() > fb.abs() {
            let s = fb / fa;
            let (mut p, mut q) = if a == c {
                (2.0 * m * s, 1.0 - s)
            } else {
                let q = fa / fc;
                let r = fb / fc;
                (
                    s * (2.0 * m * q * (q - r) - (b - a) * (r - 1.0)),
                    (q - 1.0) * (r - 1.0) * (s - 1.0),
                )
            };
            if p > 0.0 {
                q = -q;
            }
            p = p.abs();
            if 2.0 * p < (3.0 * m * q - (tolerance * q).abs()).min((e * q).abs()) {
                e = d;
                d = p / q;
            } else {
                d = m;
                e = d;
            }
        } else {
            d = m;
            e = d;
        }
        a = b;
        fa = fb;
        b += if d.abs() > tolerance {
            d
        } else {
            tolerance.copysign(m)
        };
        fb = f(b)?;
    }
    Ok((b, MAX_ITERATIONS))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::options::{price_option, tests::input};

    fn solve(
        kind: OptionType,
        price: f64,
        s: f64,
        k: f64,
        t: f64,
        r: f64,
    ) -> Result<ImpliedVol, DomainError> {
        implied_volatility(ImpliedVolInput {
            option_type: kind,
            price,
            spot: s,
            strike: k,
            time_to_expiry: t,
            rate: r,
            dividend_yield: 0.0,
        })
    }

    #[test]
    fn hulls_implied_volatility_example() {
        // Hull, Options, Futures, and Other Derivatives: a call worth 1.875 with S=21, K=20, r=0.1,
        // T=0.25 has an implied volatility of 0.235 (23.5%), to the three digits Hull gives.
        let iv = solve(OptionType::Call, 1.875, 21.0, 20.0, 0.25, 0.1).unwrap();
        assert!((iv.volatility - 0.235).abs() < 5e-4, "{iv:?}");
        assert!(iv.price_error.abs() < 1e-12, "{iv:?}");
    }

    #[test]
    fn recovers_the_volatility_a_price_was_made_with() {
        // Round trip over calls and puts, in and out of the money, short and long expiries, low and high vols.
        for &(kind, s, k, t, v, r) in &[
            (OptionType::Call, 100.0, 100.0, 1.0, 0.2, 0.05),
            (OptionType::Put, 100.0, 100.0, 1.0, 0.2, 0.05),
            (OptionType::Call, 42.0, 40.0, 0.5, 0.2, 0.1),
            (OptionType::Put, 50.0, 70.0, 2.0, 0.6, -0.01),
            (OptionType::Call, 100.0, 150.0, 0.1, 0.05, 0.02),
            (OptionType::Call, 100.0, 60.0, 3.0, 1.5, 0.03),
        ] {
            let price = price_option(input(kind, s, k, t, v, r)).unwrap();
            let iv = solve(kind, price, s, k, t, r).unwrap();
            assert!(
                (iv.volatility - v).abs() < 1e-8,
                "{kind:?} {s} {k} {t} {v}: {iv:?}"
            );
        }
    }

    #[test]
    fn prices_outside_the_no_arbitrage_bounds_name_the_bound() {
        // A call above the spot, or below its discounted intrinsic value, has no volatility.
        let above = solve(OptionType::Call, 25.0, 21.0, 20.0, 0.25, 0.1)
            .unwrap_err()
            .to_string();
        assert!(
            above.starts_with("price: 25 is at or above the upper no-arbitrage bound 21.000000"),
            "{above}"
        );
        let below = solve(OptionType::Call, 1.0, 21.0, 20.0, 0.25, 0.1)
            .unwrap_err()
            .to_string();
        assert!(
            below.contains("at or below the lower no-arbitrage bound 1.493"),
            "{below}"
        );
        let expired = solve(OptionType::Put, 1.0, 21.0, 20.0, 0.0, 0.1)
            .unwrap_err()
            .to_string();
        assert!(expired.starts_with("time_to_expiry: must be > 0"), "{expired}");
    }
}
