//! Black–Scholes–Merton sensitivities: the `calc_greeks` guard, its input
//! (the same fields as `PriceOptionInput`, with its own tool description) and
//! the `Greeks` it returns. Validation is shared with pricing via `Bsm`.

use std::f64::consts::PI;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::DomainError;
use super::options::{Bsm, OptionType};
use super::payload::{F64OrInf, f64_inf};
use super::stats::{norm_cdf, norm_pdf};

/// Black–Scholes–Merton greeks of a European option (continuous rate and dividend yield), per share.
///
/// Units: `spot` and `strike` are prices per share in the same currency;
/// `time_to_expiry` is in years; `volatility`, `rate` and `dividend_yield`
/// are annualised decimals (0.25 = 25%). Returned: delta (per 1 unit of
/// spot), gamma (per unit of spot, squared), vega and rho per 1.00 change in
/// volatility / rate (divide by 100 for per-percentage-point), theta per
/// calendar day (per-year theta / 365). Unbounded values (gamma at the money
/// at expiry) are reported as "Infinity".
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreeksInput {
    /// "call" or "put".
    pub option_type: OptionType,
    /// Current price of the underlying, per share (> 0).
    pub spot: f64,
    /// Strike price, per share, same currency as spot (> 0).
    pub strike: f64,
    /// Time to expiry in years (>= 0; 0.5 = six months, 30 days = 30/365).
    pub time_to_expiry: f64,
    /// Annualised volatility as a decimal (>= 0; 0.25 = 25%).
    pub volatility: f64,
    /// Risk-free rate, annualised, continuously compounded, as a decimal (0.05 = 5%; may be negative).
    pub rate: f64,
    /// Continuous dividend yield, annualised, as a decimal (0.02 = 2%; default 0).
    #[serde(default)]
    pub dividend_yield: f64,
}

/// Option sensitivities, per share.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Greeks {
    /// ∂price/∂spot: price change per 1 unit move in spot.
    #[serde(with = "f64_inf")]
    #[schemars(with = "F64OrInf")]
    pub delta: f64,
    /// ∂²price/∂spot²: delta change per 1 unit move in spot.
    #[serde(with = "f64_inf")]
    #[schemars(with = "F64OrInf")]
    pub gamma: f64,
    /// ∂price/∂volatility per 1.00 (100 percentage points) of volatility.
    #[serde(with = "f64_inf")]
    #[schemars(with = "F64OrInf")]
    pub vega: f64,
    /// Price change per calendar day that passes (per-year theta / 365).
    #[serde(with = "f64_inf")]
    #[schemars(with = "F64OrInf")]
    pub theta: f64,
    /// ∂price/∂rate per 1.00 (100 percentage points) of the rate.
    #[serde(with = "f64_inf")]
    #[schemars(with = "F64OrInf")]
    pub rho: f64,
}

fn greeks_of(p: &Bsm) -> Greeks {
    let w = p.sign();
    let dq = (-p.q * p.t).exp();
    let dr = (-p.r * p.t).exp();
    let sqrt_t = p.t.sqrt();
    let sd = p.vol * sqrt_t;
    let (delta, gamma, vega, theta_year, rho);
    if sd > 0.0 {
        let d1 = ((p.s / p.k).ln() + (p.r - p.q + 0.5 * p.vol * p.vol) * p.t) / sd;
        let d2 = d1 - sd;
        let pdf = norm_pdf(d1);
        let (n1, n2) = (norm_cdf(w * d1), norm_cdf(w * d2));
        delta = w * dq * n1;
        gamma = dq * pdf / (p.s * sd);
        vega = p.s * dq * pdf * sqrt_t;
        theta_year =
            -p.s * dq * pdf * p.vol / (2.0 * sqrt_t) - w * p.r * p.k * dr * n2 + w * p.q * p.s * dq * n1;
        rho = w * p.k * p.t * dr * n2;
    } else {
        // No randomness left (T = 0 or σ = 0): the payoff on the discounted
        // forward. Φ(±d) is 1, 0 or ½ (exactly at the money forward).
        let m = p.s * dq - p.k * dr;
        let n = match (w * m).partial_cmp(&0.0) {
            Some(std::cmp::Ordering::Greater) => 1.0,
            Some(std::cmp::Ordering::Less) => 0.0,
            _ => 0.5,
        };
        let atm = m == 0.0;
        delta = w * dq * n;
        gamma = if atm { f64::INFINITY } else { 0.0 };
        vega = if atm {
            p.s * dq * sqrt_t / (2.0 * PI).sqrt()
        } else {
            0.0
        };
        let decay = if atm && p.t == 0.0 && p.vol > 0.0 {
            f64::NEG_INFINITY
        } else {
            0.0
        };
        theta_year = decay - w * p.r * p.k * dr * n + w * p.q * p.s * dq * n;
        rho = w * p.k * p.t * dr * n;
    }
    Greeks {
        delta,
        gamma,
        vega,
        theta: theta_year / 365.0,
        rho,
    }
}

/// Computes Black–Scholes–Merton greeks per share.
pub fn calc_greeks(input: GreeksInput) -> Result<Greeks, DomainError> {
    let p = Bsm::new(
        input.option_type,
        input.spot,
        input.strike,
        input.time_to_expiry,
        input.volatility,
        input.rate,
        input.dividend_yield,
    )?;
    Ok(greeks_of(&p))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::options::{PriceOptionInput, price_option};
    use super::*;

    /// Price through the public pricing guard, for finite differences.
    fn price(k: OptionType, s: f64, x: f64, t: f64, v: f64, r: f64, q: f64) -> f64 {
        price_option(PriceOptionInput {
            option_type: k,
            spot: s,
            strike: x,
            time_to_expiry: t,
            volatility: v,
            rate: r,
            dividend_yield: q,
        })
        .unwrap()
    }

    fn g(k: OptionType, s: f64, x: f64, t: f64, v: f64, r: f64, q: f64) -> Greeks {
        calc_greeks(GreeksInput {
            option_type: k,
            spot: s,
            strike: x,
            time_to_expiry: t,
            volatility: v,
            rate: r,
            dividend_yield: q,
        })
        .unwrap()
    }

    #[test]
    fn greeks_match_finite_differences_of_price() {
        // Pins every greek against central differences of price_option (h = 1e-4..1e-3).
        for kind in [OptionType::Call, OptionType::Put] {
            for &(s, x, t, v, r, q) in &[
                (100.0, 100.0, 1.0, 0.2, 0.05, 0.0),
                (42.0, 40.0, 0.5, 0.2, 0.1, 0.02),
                (80.0, 100.0, 2.0, 0.35, 0.01, 0.03),
            ] {
                let gr = g(kind, s, x, t, v, r, q);
                let p = |s: f64, t: f64, v: f64, r: f64| price(kind, s, x, t, v, r, q);
                let h = 1e-3;
                let delta = (p(s + h, t, v, r) - p(s - h, t, v, r)) / (2.0 * h);
                let gamma = (p(s + h, t, v, r) - 2.0 * p(s, t, v, r) + p(s - h, t, v, r)) / (h * h);
                let e = 1e-4;
                let vega = (p(s, t, v + e, r) - p(s, t, v - e, r)) / (2.0 * e);
                let rho = (p(s, t, v, r + e) - p(s, t, v, r - e)) / (2.0 * e);
                let theta = -(p(s, t + e, v, r) - p(s, t - e, v, r)) / (2.0 * e) / 365.0;
                assert!((gr.delta - delta).abs() < 1e-6, "delta {kind:?} {}", gr.delta);
                assert!((gr.gamma - gamma).abs() < 1e-4, "gamma {kind:?} {}", gr.gamma);
                assert!((gr.vega - vega).abs() < 1e-5, "vega {kind:?} {}", gr.vega);
                assert!((gr.rho - rho).abs() < 1e-5, "rho {kind:?} {}", gr.rho);
                assert!((gr.theta - theta).abs() < 1e-7, "theta {kind:?} {}", gr.theta);
            }
        }
    }

    #[test]
    fn textbook_at_the_money_greeks() {
        // Pins S=K=100, T=1, σ=0.2, r=0.05 call greeks by hand: d1 = 0.35,
        // delta = Φ(0.35) = 0.636831, vega = 100·φ(0.35) = 37.5240, gamma = φ(0.35)/20 = 0.018762.
        let gr = g(OptionType::Call, 100.0, 100.0, 1.0, 0.2, 0.05, 0.0);
        assert!((gr.delta - 0.636_831).abs() < 1e-6);
        assert!((gr.vega - 37.524_0).abs() < 1e-4);
        assert!((gr.gamma - 0.018_762).abs() < 1e-6);
        // theta per year = -100·φ(.35)·0.2/2 - 5·e^-0.05·Φ(0.15) = -6.41403; per day /365.
        assert!((gr.theta - (-6.414_03 / 365.0)).abs() < 1e-6);
    }

    #[test]
    fn expiry_greeks_are_the_payoff_slopes() {
        // Pins T = 0: ITM call delta 1, OTM 0, put delta -1, gamma 0, ATM gamma unbounded.
        let itm = g(OptionType::Call, 110.0, 100.0, 0.0, 0.2, 0.05, 0.0);
        assert_eq!((itm.delta, itm.gamma, itm.vega, itm.rho), (1.0, 0.0, 0.0, 0.0));
        assert_eq!(g(OptionType::Call, 90.0, 100.0, 0.0, 0.2, 0.05, 0.0).delta, 0.0);
        assert_eq!(g(OptionType::Put, 90.0, 100.0, 0.0, 0.2, 0.05, 0.0).delta, -1.0);
        let atm = g(OptionType::Call, 100.0, 100.0, 0.0, 0.2, 0.05, 0.0);
        assert_eq!(atm.delta, 0.5);
        assert_eq!(atm.gamma, f64::INFINITY);
        let v = serde_json::to_value(&atm).unwrap();
        assert_eq!(v["gamma"], "Infinity");
        assert_eq!(v["theta"], "-Infinity");
    }

    #[test]
    fn zero_vol_greeks_follow_the_forward_payoff() {
        // Pins σ = 0, ITM forward call: delta e^(-qT), rho K·T·e^(-rT), theta = (-rK e^(-rT) + qS e^(-qT))/365.
        let gr = g(OptionType::Call, 100.0, 90.0, 1.0, 0.0, 0.05, 0.02);
        assert!((gr.delta - (-0.02f64).exp()).abs() < 1e-15);
        assert!((gr.rho - 90.0 * (-0.05f64).exp()).abs() < 1e-12);
        let th = (-0.05 * 90.0 * (-0.05f64).exp() + 0.02 * 100.0 * (-0.02f64).exp()) / 365.0;
        assert!((gr.theta - th).abs() < 1e-15);
        assert_eq!(gr.gamma, 0.0);
    }

    #[test]
    fn greeks_share_price_validation() {
        // Pins that the greeks guard rejects what the pricer rejects, with the same message.
        let e = calc_greeks(GreeksInput {
            option_type: OptionType::Put,
            spot: 100.0,
            strike: 100.0,
            time_to_expiry: 1.0,
            volatility: -0.2,
            rate: 0.05,
            dividend_yield: 0.0,
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "volatility: must be >= 0 (a decimal: 0.25 = 25%), got -0.2"
        );
    }
}
