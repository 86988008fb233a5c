//! European option pricing with Black–Scholes–Merton: the `OptionType`, the
//! `price_option` guard and its input, and the validated parameter set
//! (`Bsm`) that `greeks.rs` shares so both guards reject the same inputs with
//! the same messages.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::DomainError;
use super::payload::show_f64;
use super::stats::norm_cdf;

/// Which right the option gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OptionType {
    /// The right to buy at the strike.
    Call,
    /// The right to sell at the strike.
    Put,
}

/// Price a European option with Black–Scholes–Merton (continuous rate and dividend yield). Returns the price per share.
///
/// Units: `spot` and `strike` are prices per share in the same currency;
/// `time_to_expiry` is in years (0.5 = six months); `volatility`, `rate` and
/// `dividend_yield` are annualised decimals (0.25 = 25%), the rate and yield
/// continuously compounded. At expiry (time_to_expiry = 0) the price is the
/// intrinsic value; with zero volatility it is the discounted forward
/// intrinsic value.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceOptionInput {
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

/// Validated Black–Scholes–Merton parameters, shared by price and greeks.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bsm {
    pub kind: OptionType,
    pub s: f64,
    pub k: f64,
    pub t: f64,
    pub vol: f64,
    pub r: f64,
    pub q: f64,
}

/// The largest |rate × time_to_expiry| (and |dividend_yield ×
/// time_to_expiry|) priced: e^±700 is within a double (whose limit is
/// e^709.8), with room left for the price per share it multiplies. A
/// real rate of 20% over 30 years is 6.
const MAX_DISCOUNT_EXPONENT: f64 = 700.0;

fn finite(field: &str, x: f64) -> Result<f64, DomainError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(DomainError::field(
            field,
            format!("must be a finite number, got {}", show_f64(x)),
        ))
    }
}

impl Bsm {
    /// Checks every field: all finite, spot and strike > 0, time and
    /// volatility >= 0. The messages name the field and its units.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kind: OptionType,
        spot: f64,
        strike: f64,
        time_to_expiry: f64,
        volatility: f64,
        rate: f64,
        dividend_yield: f64,
    ) -> Result<Self, DomainError> {
        let s = finite("spot", spot)?;
        let k = finite("strike", strike)?;
        let t = finite("time_to_expiry", time_to_expiry)?;
        let vol = finite("volatility", volatility)?;
        let r = finite("rate", rate)?;
        let q = finite("dividend_yield", dividend_yield)?;
        if s <= 0.0 {
            return Err(DomainError::field(
                "spot",
                format!("must be > 0 (price per share), got {}", show_f64(s)),
            ));
        }
        if k <= 0.0 {
            return Err(DomainError::field(
                "strike",
                format!("must be > 0 (price per share), got {}", show_f64(k)),
            ));
        }
        if t < 0.0 {
            return Err(DomainError::field(
                "time_to_expiry",
                format!("must be >= 0 (years: 0.5 = six months), got {}", show_f64(t)),
            ));
        }
        if vol < 0.0 {
            return Err(DomainError::field(
                "volatility",
                format!("must be >= 0 (a decimal: 0.25 = 25%), got {}", show_f64(vol)),
            ));
        }
        // The model discounts the strike by e^(−rT) and the spot by
        // e^(−qT); past what a double holds either is 0 or infinite and
        // the price is not a number (a rate given in percent, or a time in
        // days, is the usual cause). Refused here, naming the input, rather
        // than answered with a price that is not one.
        for (field, yearly) in [("rate", r), ("dividend_yield", q)] {
            if (yearly * t).abs() > MAX_DISCOUNT_EXPONENT {
                return Err(DomainError::field(
                    field,
                    format!(
                        "{field} × time_to_expiry = {} is beyond ±{MAX_DISCOUNT_EXPONENT}: e^(−{field}·T) overflows; give an annualised decimal (0.05 = 5%) and the time in years",
                        show_f64(yearly * t)
                    ),
                ));
            }
        }
        for (field, value, exponent) in [("spot", s, -q * t), ("strike", k, -r * t)] {
            let discounted = value * exponent.exp();
            if !discounted.is_normal() {
                return Err(DomainError::field(
                    field,
                    format!(
                        "{} discounted over time_to_expiry is {}, beyond what the model can price; give a price per share",
                        show_f64(value),
                        show_f64(discounted)
                    ),
                ));
            }
        }
        Ok(Self {
            kind,
            s,
            k,
            t,
            vol,
            r,
            q,
        })
    }

    /// +1 for a call, -1 for a put.
    pub fn sign(&self) -> f64 {
        match self.kind {
            OptionType::Call => 1.0,
            OptionType::Put => -1.0,
        }
    }

    /// The Black–Scholes–Merton price per share.
    pub fn price(&self) -> f64 {
        let w = self.sign();
        if self.t == 0.0 {
            return (w * (self.s - self.k)).max(0.0);
        }
        let fs = self.s * (-self.q * self.t).exp();
        let fk = self.k * (-self.r * self.t).exp();
        let sd = self.vol * self.t.sqrt();
        if sd == 0.0 {
            return (w * (fs - fk)).max(0.0);
        }
        let d1 = ((self.s / self.k).ln() + (self.r - self.q + 0.5 * self.vol * self.vol) * self.t) / sd;
        let d2 = d1 - sd;
        (w * (fs * norm_cdf(w * d1) - fk * norm_cdf(w * d2))).max(0.0)
    }
}

/// Prices a European option per share with Black–Scholes–Merton.
pub fn price_option(input: PriceOptionInput) -> Result<f64, DomainError> {
    let p = Bsm::new(
        input.option_type,
        input.spot,
        input.strike,
        input.time_to_expiry,
        input.volatility,
        input.rate,
        input.dividend_yield,
    )?;
    Ok(p.price())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) mod tests {
    use super::*;

    pub fn input(kind: OptionType, s: f64, k: f64, t: f64, v: f64, r: f64) -> PriceOptionInput {
        PriceOptionInput {
            option_type: kind,
            spot: s,
            strike: k,
            time_to_expiry: t,
            volatility: v,
            rate: r,
            dividend_yield: 0.0,
        }
    }

    fn price(kind: OptionType, s: f64, k: f64, t: f64, v: f64, r: f64) -> f64 {
        price_option(input(kind, s, k, t, v, r)).unwrap()
    }

    #[test]
    fn textbook_at_the_money_values() {
        // Pins the published S=K=100, T=1, σ=0.2, r=0.05 prices: call 10.4506, put 5.5735.
        let c = price(OptionType::Call, 100.0, 100.0, 1.0, 0.2, 0.05);
        let p = price(OptionType::Put, 100.0, 100.0, 1.0, 0.2, 0.05);
        assert!((c - 10.4506).abs() < 5e-5, "{c}");
        assert!((p - 5.5735).abs() < 5e-5, "{p}");
    }

    #[test]
    fn hull_example_values() {
        // Pins Hull's example S=42, K=40, r=0.10, σ=0.20, T=0.5: call 4.7594, put 0.8086.
        let c = price(OptionType::Call, 42.0, 40.0, 0.5, 0.2, 0.1);
        let p = price(OptionType::Put, 42.0, 40.0, 0.5, 0.2, 0.1);
        assert!((c - 4.7594).abs() < 5e-5, "{c}");
        assert!((p - 0.8086).abs() < 5e-5, "{p}");
    }

    #[test]
    fn put_call_parity_with_dividends() {
        // Pins C - P = S·e^(-qT) - K·e^(-rT) over a grid of inputs.
        for &(s, k, t, v, r, q) in &[
            (100.0, 90.0, 0.25, 0.3, 0.03, 0.01),
            (50.0, 70.0, 2.0, 0.6, -0.01, 0.04),
            (10.0, 10.0, 5.0, 0.1, 0.08, 0.0),
        ] {
            let mut i = input(OptionType::Call, s, k, t, v, r);
            i.dividend_yield = q;
            let c = price_option(i.clone()).unwrap();
            i.option_type = OptionType::Put;
            let p = price_option(i).unwrap();
            let want = s * (-q * t).exp() - k * (-r * t).exp();
            assert!((c - p - want).abs() < 1e-10, "{c} - {p} vs {want}");
        }
    }

    #[test]
    fn dividend_yield_equals_discounted_spot() {
        // Pins the Merton identity: a yield q prices like spot S·e^(-qT) with no yield.
        let mut i = input(OptionType::Call, 100.0, 95.0, 1.5, 0.25, 0.04);
        i.dividend_yield = 0.03;
        let with_q = price_option(i).unwrap();
        let s_adj = 100.0 * (-0.03f64 * 1.5).exp();
        let without = price(OptionType::Call, s_adj, 95.0, 1.5, 0.25, 0.04);
        assert!((with_q - without).abs() < 1e-10);
    }

    #[test]
    fn expiry_gives_intrinsic_value() {
        // Pins T = 0 → max(S - K, 0) for a call and max(K - S, 0) for a put.
        assert_eq!(price(OptionType::Call, 110.0, 100.0, 0.0, 0.3, 0.05), 10.0);
        assert_eq!(price(OptionType::Put, 110.0, 100.0, 0.0, 0.3, 0.05), 0.0);
        assert_eq!(price(OptionType::Put, 90.0, 100.0, 0.0, 0.3, 0.05), 10.0);
    }

    #[test]
    fn zero_volatility_gives_discounted_forward_intrinsic() {
        // Pins σ = 0 → max(S - K·e^(-rT), 0), computed by hand: 100 - 100·e^(-0.05).
        let c = price(OptionType::Call, 100.0, 100.0, 1.0, 0.0, 0.05);
        assert!((c - (100.0 - 100.0 * (-0.05f64).exp())).abs() < 1e-12);
        assert_eq!(price(OptionType::Put, 100.0, 100.0, 1.0, 0.0, 0.05), 0.0);
    }

    #[test]
    fn validation_names_the_field_and_units() {
        // Pins each rejection: the field, what was expected and what was got.
        let bad = |f: &dyn Fn(&mut PriceOptionInput)| {
            let mut i = input(OptionType::Call, 100.0, 100.0, 1.0, 0.2, 0.05);
            f(&mut i);
            price_option(i).unwrap_err().to_string()
        };
        assert_eq!(
            bad(&|i| i.volatility = -0.2),
            "volatility: must be >= 0 (a decimal: 0.25 = 25%), got -0.2"
        );
        assert_eq!(
            bad(&|i| i.spot = 0.0),
            "spot: must be > 0 (price per share), got 0"
        );
        assert!(bad(&|i| i.strike = -5.0).starts_with("strike: must be > 0"));
        assert!(bad(&|i| i.time_to_expiry = -1.0).starts_with("time_to_expiry: must be >= 0"));
        assert_eq!(
            bad(&|i| i.rate = f64::NAN),
            "rate: must be a finite number, got NaN"
        );
        assert_eq!(
            bad(&|i| i.dividend_yield = f64::INFINITY),
            "dividend_yield: must be a finite number, got inf"
        );
        // Finite inputs whose discounting a double cannot hold: refused,
        // naming the input, never priced as inf or NaN.
        assert!(bad(&|i| i.rate = 1e300).starts_with("rate: rate × time_to_expiry = 1e300 is beyond ±700"));
        assert!(
            bad(&|i| {
                i.dividend_yield = -0.5;
                i.time_to_expiry = 2_000.0;
            })
            .starts_with("dividend_yield: dividend_yield × time_to_expiry = -1000 is beyond ±700")
        );
        assert!(
            bad(&|i| {
                i.spot = 1e300;
                i.dividend_yield = -1.0;
                i.time_to_expiry = 100.0;
            })
            .starts_with("spot: 1e300 discounted over time_to_expiry is inf")
        );
        assert!(bad(&|i| i.strike = 1e-310).starts_with("strike: 1e-310 discounted"));
        // Extreme but real inputs still price.
        let hyperinflation = input(OptionType::Call, 100.0, 100.0, 2.0, 0.8, 1.5);
        assert!(price_option(hyperinflation).unwrap().is_finite());
    }

    #[test]
    fn input_json_shape() {
        // Pins the wire form: lowercase option_type, defaulted dividend_yield, unknown keys refused.
        let i: PriceOptionInput = serde_json::from_value(serde_json::json!({
            "option_type": "put", "spot": 1.0, "strike": 1.0,
            "time_to_expiry": 1.0, "volatility": 0.1, "rate": 0.0
        }))
        .unwrap();
        assert_eq!(i.option_type, OptionType::Put);
        assert_eq!(i.dividend_yield, 0.0);
        let e = serde_json::from_value::<PriceOptionInput>(serde_json::json!({
            "option_type": "call", "spot": 1.0, "strike": 1.0,
            "time_to_expiry": 1.0, "volatility": 0.1, "rate": 0.0, "vol": 0.2
        }));
        assert!(e.is_err());
    }
}
