//! Closed-form intervals for a binomial proportion (Brown, Cai & DasGupta 2001), for rates
//! on binary run outcomes near 0 and 1 where percentile intervals are ragged.
//!
//! [`jeffreys`] takes real-valued counts, so it also serves at an *effective* sample size
//! (the rate intervals of [`crate::stats::bootstrap::rate_interval`]).

use statrs::distribution::{Beta, ContinuousCDF, Normal};

/// Two-sided standard normal quantile for `level` (1.959964… at 95 %).
pub fn z_for_level(level: f64) -> f64 {
    Normal::standard().inverse_cdf(0.5 + level / 2.0)
}

/// Wilson score interval for `successes` out of `n`. `None` for n = 0.
pub fn wilson(successes: u64, n: u64, level: f64) -> Option<(f64, f64)> {
    if n == 0 || successes > n {
        return None;
    }
    let (x, n) = (successes as f64, n as f64);
    let z = z_for_level(level);
    let p = x / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// Agresti–Coull interval, clipped to [0, 1] (as statsmodels does). `None` for n = 0.
pub fn agresti_coull(successes: u64, n: u64, level: f64) -> Option<(f64, f64)> {
    if n == 0 || successes > n {
        return None;
    }
    let z = z_for_level(level);
    let n_c = n as f64 + z * z;
    let p_c = (successes as f64 + z * z / 2.0) / n_c;
    let half = z * (p_c * (1.0 - p_c) / n_c).sqrt();
    Some(((p_c - half).clamp(0.0, 1.0), (p_c + half).clamp(0.0, 1.0)))
}

/// The most trials [`jeffreys`] computes an interval at: above it, the interval at this many
/// trials and the same rate (wider than the exact one, never narrower). statrs' Beta quantile
/// (AS 109) does not return for rare events in many trials (x = 10 of n = 10⁷ loops forever:
/// its Newton step overflows), which would stall a window or a profile; at and below 10⁶ it
/// returned on every case tried (a grid of x near 0, n/2 and n, and 400 random cases), and an
/// interval narrower than a million trials' (±0.001 at a rate of ½) changes no band.
pub const MAX_TRIALS: f64 = 1e6;

/// Jeffreys interval for `x` successes out of `n` (both may be fractional, 0 ≤ x ≤ n, n > 0):
/// the `(1 ∓ level)/2` quantiles of Beta(x + ½, n − x + ½), as statsmodels'
/// `proportion_confint(method="jeffreys")` computes it (no special case at x = 0 or x = n).
/// Above [`MAX_TRIALS`] trials, the interval at `MAX_TRIALS` and the same rate.
pub fn jeffreys(x: f64, n: f64, level: f64) -> Option<(f64, f64)> {
    if n.is_nan() || n <= 0.0 || !(0.0..=n).contains(&x) || !x.is_finite() || !n.is_finite() {
        return None;
    }
    let (x, n) = if n > MAX_TRIALS { ((x / n * MAX_TRIALS).min(MAX_TRIALS), MAX_TRIALS) } else { (x, n) };
    let beta = Beta::new(x + 0.5, n - x + 0.5).ok()?;
    let alpha = 1.0 - level;
    Some((beta.inverse_cdf(alpha / 2.0), beta.inverse_cdf(1.0 - alpha / 2.0)))
}
