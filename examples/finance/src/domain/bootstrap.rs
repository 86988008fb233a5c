//! Deterministic resampling for the SPA test: the SplitMix64 generator
//! (Steele, Lea & Flood 2014; no `rand` crate, same seed → same numbers on
//! every platform), the Politis–Romano stationary bootstrap's index stream,
//! and its closed-form variance of √n times the mean (the kernel Hansen's
//! SPA test uses for ω̂²).

use super::metrics::mean;

/// SplitMix64: a 64-bit generator with a Weyl-sequence state.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in [0, n) by multiply-shift (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// Fills `out` with one stationary-bootstrap resample of positions 0..n:
/// a uniform start, then with probability `p` (= 1/mean block length) a new
/// uniform start, otherwise the next position, wrapping around the end.
pub fn stationary_indices(rng: &mut SplitMix64, n: usize, p: f64, out: &mut Vec<usize>) {
    out.clear();
    let mut at = rng.below(n);
    out.push(at);
    for _ in 1..n {
        at = if rng.next_f64() < p {
            rng.below(n)
        } else {
            (at + 1) % n
        };
        out.push(at);
    }
}

/// Var*(√n·x̄*) under the stationary bootstrap with restart probability
/// `p`, in closed form (Politis & Romano 1994): γ̂(0) + 2Σᵢ κ(n, i)·γ̂(i) with
/// κ(n, i) = (1 − i/n)(1 − p)^i + (i/n)(1 − p)^(n−i) and γ̂(i) the biased
/// autocovariance. Lags whose weight is below e^-37 (≈ 1e-16) are skipped,
/// which makes it O(n/p) instead of O(n²).
pub fn stationary_variance(x: &[f64], p: f64) -> f64 {
    let n = x.len();
    let nf = n as f64;
    let m = mean(x);
    let dm: Vec<f64> = x.iter().map(|v| v - m).collect();
    let gamma = |i: usize| dm[..n - i].iter().zip(&dm[i..]).map(|(a, b)| a * b).sum::<f64>() / nf;
    let q = 1.0 - p;
    let cut = if q <= 0.0 {
        0
    } else {
        (-37.0 / q.ln()).ceil().min(nf) as usize
    };
    let mut var = gamma(0);
    for i in (1..n).filter(|&i| i <= cut || n - i <= cut) {
        let w = i as f64 / nf;
        let kappa = (1.0 - w) * q.powi(i as i32) + w * q.powi((n - i) as i32);
        var += 2.0 * kappa * gamma(i);
    }
    var.max(0.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_outputs() {
        // Pins the first outputs for seeds 0 and 42, from an independent Python implementation.
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(g.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(g.next_u64(), 0x06c4_5d18_8009_454f);
        let mut g = SplitMix64::new(42);
        assert_eq!(g.next_u64(), 0xbdd7_3226_2feb_6e95);
    }

    #[test]
    fn uniforms_stay_in_range() {
        // Pins next_f64 in [0, 1) and below(n) in [0, n) with every value reached.
        let mut g = SplitMix64::new(7);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let u = g.next_f64();
            assert!((0.0..1.0).contains(&u));
            seen[g.below(7)] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn mean_block_length_is_one_over_p() {
        // Pins the restart rate: breaks in the index stream occur at rate ≈ p (+1/n by chance).
        let mut g = SplitMix64::new(1);
        let (n, p) = (1000, 0.1);
        let mut idx = Vec::new();
        let mut breaks = 0usize;
        for _ in 0..200 {
            stationary_indices(&mut g, n, p, &mut idx);
            breaks += idx.windows(2).filter(|w| w[1] != (w[0] + 1) % n).count();
        }
        let rate = breaks as f64 / (200.0 * 999.0);
        assert!((rate - p).abs() < 0.005, "{rate}");
    }

    /// The full O(n²) Politis–Romano sum over every lag, for comparison.
    fn naive_variance(x: &[f64], p: f64) -> f64 {
        let n = x.len();
        let m = x.iter().sum::<f64>() / n as f64;
        let mut var = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64;
        for i in 1..n {
            let g: f64 = (0..n - i).map(|t| (x[t] - m) * (x[t + i] - m)).sum::<f64>() / n as f64;
            let w = i as f64 / n as f64;
            var += 2.0 * ((1.0 - w) * (1.0 - p).powf(i as f64) + w * (1.0 - p).powf((n - i) as f64)) * g;
        }
        var
    }

    #[test]
    fn truncated_kernel_equals_full_sum() {
        // Pins the lag truncation against the naive full sum (n = 60 and n = 1500, p = 0.1 and 0.5).
        let mut g = SplitMix64::new(3);
        for n in [60, 1500] {
            let mut x = vec![0.0; n];
            for t in 1..n {
                x[t] = 0.5 * x[t - 1] + g.next_f64() - 0.5;
            }
            for p in [0.1, 0.5] {
                let (a, b) = (stationary_variance(&x, p), naive_variance(&x, p));
                assert!(((a - b) / b).abs() < 1e-12, "n={n} p={p}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn block_length_one_is_the_iid_variance() {
        // Pins p = 1 → γ̂(0), the biased variance: for [1, 2, 3, 4] that is 1.25 by hand.
        assert!((stationary_variance(&[1.0, 2.0, 3.0, 4.0], 1.0) - 1.25).abs() < 1e-15);
    }
}
