//! The script-only math prelude: `erf`, `erfc`, `norm_pdf`, `norm_cdf`,
//! `norm_inv`, and `fmt` / `fmt_pct` for numbers people read.
//!
//! Rhai's standard package has `exp`, `ln`, `sqrt` and friends but no
//! normal distribution, so a model pricing an option in a script would
//! hand-roll an erf approximation (and get 1e-7 where it needs 1e-12), or
//! spend guard calls on arithmetic. These are engine functions, not guards:
//! no call is recorded or budgeted. `erf` / `erfc` are the `libm` crate's
//! (a port of FreeBSD's msun, about 1 ulp); `norm_cdf` goes through `erfc`
//! so the tails keep their relative accuracy; `norm_inv` is Acklam's
//! rational approximation (relative error 1.15e-9) refined by one Halley
//! step on `norm_cdf`, which brings it to a few ulp.

use rhai::{Engine, EvalAltResult, Position};

use warden_core::error::GuardError;

/// The names this module registers: a guard may not take one of these
/// (`warden_core::registry::RESERVED_SCRIPT_NAMES`, whose test reads this).
#[cfg(test)]
pub(crate) const PRELUDE: [&str; 7] = [
    "erf", "erfc", "norm_pdf", "norm_cdf", "norm_inv", "fmt", "fmt_pct",
];

/// Most digits `fmt` / `fmt_pct` print after the point: past 12 a float's
/// noise shows (`55.00000000000001`), which is what they exist to hide.
pub const MAX_FMT_DIGITS: i64 = 12;

/// The error function.
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

/// The complementary error function, 1 − erf(x), accurate for large x.
pub fn erfc(x: f64) -> f64 {
    libm::erfc(x)
}

/// The standard normal density.
pub fn norm_pdf(x: f64) -> f64 {
    const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
    INV_SQRT_2PI * (-0.5 * x * x).exp()
}

/// The standard normal distribution function, Φ(x) = erfc(−x/√2)/2.
pub fn norm_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// The standard normal quantile, Φ⁻¹(p), for 0 < p < 1; `None` outside.
pub fn norm_inv(p: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0) {
        return None;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.024_25;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    };
    // One Halley step on Φ(x) − p. In the upper tail the error is taken
    // on the complement, which erfc gives without cancellation.
    let e = if p > 0.5 {
        (1.0 - p) - 0.5 * erfc(x / std::f64::consts::SQRT_2)
    } else {
        norm_cdf(x) - p
    };
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (0.5 * x * x).exp();
    Some(x - u / (1.0 + 0.5 * x * u))
}

/// Registers the prelude on a script engine, each for floats and integers.
pub fn register(engine: &mut Engine) {
    engine.register_fn("erf", erf);
    engine.register_fn("erf", |x: i64| erf(x as f64));
    engine.register_fn("erfc", erfc);
    engine.register_fn("erfc", |x: i64| erfc(x as f64));
    engine.register_fn("norm_pdf", norm_pdf);
    engine.register_fn("norm_pdf", |x: i64| norm_pdf(x as f64));
    engine.register_fn("norm_cdf", norm_cdf);
    engine.register_fn("norm_cdf", |x: i64| norm_cdf(x as f64));
    engine.register_fn("norm_inv", checked_inv);
    engine.register_fn("fmt", |x: f64, digits: i64| fixed(x, digits, 1.0, ""));
    engine.register_fn("fmt", |x: i64, digits: i64| fixed(x as f64, digits, 1.0, ""));
    engine.register_fn("fmt_pct", |x: f64, digits: i64| fixed(x, digits, 100.0, "%"));
    engine.register_fn("fmt_pct", |x: i64, digits: i64| {
        fixed(x as f64, digits, 100.0, "%")
    });
}

/// `x × scale` with `digits` after the point, then `suffix`: `fmt(x, d)`
/// is `fixed(x, d, 1, "")`, `fmt_pct(0.55, 1)` is `"55.0%"`. Digits
/// outside 0 to [`MAX_FMT_DIGITS`] are a catchable `invalid_input`.
fn fixed(x: f64, digits: i64, scale: f64, suffix: &str) -> Result<String, Box<EvalAltResult>> {
    let Some(digits) = usize::try_from(digits)
        .ok()
        .filter(|d| *d as i64 <= MAX_FMT_DIGITS)
    else {
        let error = GuardError::invalid_input(
            "digits",
            format!("fmt and fmt_pct take 0 to {MAX_FMT_DIGITS} digits after the point, got {digits}"),
        );
        return Err(super::bindings::thrown(error, Position::NONE));
    };
    let text = format!("{:.*}{suffix}", digits, x * scale);
    // "-0.00" reads as a sign the number does not have.
    Ok(match text.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| matches!(c, '0' | '.' | '%')) => rest.to_string(),
        _ => text,
    })
}

/// `norm_inv` for scripts: outside (0, 1) a catchable `invalid_input`.
fn checked_inv(p: f64) -> Result<f64, Box<EvalAltResult>> {
    norm_inv(p).ok_or_else(|| {
        let error = GuardError::invalid_input(
            "p",
            format!("norm_inv needs a probability strictly between 0 and 1, got {p}"),
        );
        super::bindings::thrown(error, Position::NONE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// |got − want| within 1e-12 relative (absolute near zero).
    fn close(got: f64, want: f64) {
        let scale = want.abs().max(1e-300);
        let error = if want == 0.0 {
            got.abs()
        } else {
            (got - want).abs() / scale
        };
        assert!(
            error <= 1e-12,
            "got {got:e}, want {want:e} (relative error {error:e})"
        );
    }

    #[test]
    fn fmt_prints_numbers_for_people_and_bounds_its_digits() {
        // Through the engine, as a script calls them: float noise gone, a percent form, no "-0.00".
        let mut engine = Engine::new();
        register(&mut engine);
        let eval = |code: &str| engine.eval::<String>(code);
        assert_eq!(eval("fmt(55.00000000000001, 2)").unwrap(), "55.00");
        assert_eq!(eval("fmt(3, 1)").unwrap(), "3.0");
        assert_eq!(eval("fmt(2.5, 0)").unwrap(), "2");
        assert_eq!(eval("fmt_pct(0.5500000000000001, 1)").unwrap(), "55.0%");
        assert_eq!(eval("fmt(-0.0001, 2)").unwrap(), "0.00");
        assert_eq!(eval("fmt(-1.5, 1)").unwrap(), "-1.5");
        for bad in ["fmt(1.0, -1)", "fmt(1.0, 13)", "fmt_pct(1, 99)"] {
            let error = eval(bad).expect_err(bad).to_string();
            assert!(error.contains("0 to 12 digits"), "{bad}: {error}");
        }
        assert_eq!(eval("fmt(1.0, 12)").unwrap(), "1.000000000000");
    }

    #[test]
    fn erf_matches_reference_values() {
        // erf against reference values (CPython's math.erf / statistics.NormalDist, to 16 digits).
        for (x, want) in [
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (-1.0, -0.842_700_792_949_714_9),
            (3.5, 0.999_999_256_901_627_6),
        ] {
            close(erf(x), want);
        }
        close(erfc(3.5), 7.430_983_723_414_128e-7);
    }

    #[test]
    fn norm_cdf_and_pdf_match_reference_values_including_the_far_tail() {
        // Φ(1.96) = 0.975002…, Φ(−10) = 7.6198530241605e-24 (relative, not absolute, accuracy).
        for (x, want) in [
            (0.0, 0.5),
            (1.96, 0.975_002_104_851_779_5),
            (-1.0, 0.158_655_253_931_457_07),
            (3.0, 0.998_650_101_968_369_9),
            (-5.0, 2.866_515_718_791_946e-7),
            (-10.0, 7.619_853_024_160_593e-24),
        ] {
            close(norm_cdf(x), want);
        }
        close(norm_pdf(0.0), 0.398_942_280_401_432_7);
        close(norm_pdf(1.0), 0.241_970_724_519_143_37);
        close(norm_pdf(-2.5), 0.017_528_300_493_568_54);
    }

    #[test]
    fn norm_inv_matches_reference_quantiles_and_inverts_norm_cdf() {
        // Φ⁻¹(0.975) = 1.959963984540054, Φ⁻¹(0.01) = −2.326347874040841, deep tails too.
        for (p, want) in [
            (0.975, 1.959_963_984_540_053_6),
            (0.95, 1.644_853_626_951_471_5),
            (0.01, -2.326_347_874_040_840_8),
            (1e-10, -6.361_340_902_404_056),
            (0.999_999, 4.753_424_308_817_089),
            (1e-300, -37.047_096_299_361_2),
        ] {
            close(norm_inv(p).expect("in range"), want);
        }
        assert_eq!(norm_inv(0.5), Some(0.0));
        for p in [0.001, 0.1, 0.3, 0.7, 0.9, 0.999] {
            close(norm_cdf(norm_inv(p).expect("in range")), p);
        }
        for p in [0.0, 1.0, -0.1, f64::NAN] {
            assert_eq!(norm_inv(p), None, "{p}");
        }
    }
}
