//! The two-tier gate and the Efficacy Index (design §1.5; the enterprise method's §6).
//!
//! Each gated metric has an outer threshold θout (minimum viable) and an inner one θin
//! (target). ν = (m − θout)/(θin − θout): 0 at θout, 1 at θin, negative on failure, capped at
//! ν_max. The sign σ = ±1 of the source falls out of the formula: for a lower-is-better metric
//! θin < θout and both numerator and denominator change sign. The gate is conjunctive on the
//! conservative bound (the interval end on the failing side): **fail** if any metric's bound
//! is below θout, **pass** if every bound reaches θin, **conditional** otherwise.
//! EI = Σ w·ν and EI_G = exp(Σ w·ln(1+ν)) − 1 (defined only when every ν > −1) rank
//! candidates and need declared weights; they never replace the gate.

use serde::{Deserialize, Serialize};

pub const DEFAULT_NU_MAX: f64 = 3.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    pub outer: f64,
    pub inner: f64,
    #[serde(default = "default_nu_max")]
    pub nu_max: f64,
}

fn default_nu_max() -> f64 {
    DEFAULT_NU_MAX
}

impl Thresholds {
    pub fn new(outer: f64, inner: f64) -> Thresholds {
        Thresholds { outer, inner, nu_max: DEFAULT_NU_MAX }
    }

    pub fn higher_is_better(&self) -> bool {
        self.inner > self.outer
    }

    /// ν of a value, capped at ν_max.
    pub fn normalise(&self, m: f64) -> f64 {
        ((m - self.outer) / (self.inner - self.outer)).min(self.nu_max)
    }

    /// The interval end on the failing side.
    pub fn conservative_bound(&self, lo: f64, hi: f64) -> f64 {
        if self.higher_is_better() { lo } else { hi }
    }

    /// δ = |θin − θout|: what the gate must tell apart.
    pub fn gap(&self) -> f64 {
        (self.inner - self.outer).abs()
    }
}

/// The sample-size rule of the enterprise method (§5): a proportion near `p` needs
/// n ≈ z² p(1 − p) / δ² units for its interval (two-sided, `level`) to have half-width `delta`
/// — with δ a gated rate's gap between inner and outer thresholds, the units it needs before
/// the gate can resolve them. The method's example: δ = 0.05, p̂ ≈ 0.85, 95 % → 196. Rounded
/// up; `None` unless 0 ≤ p ≤ 1, δ > 0 and 0 < level < 1. (For p near 0 or 1 it is a floor:
/// clustered units need more, which the bootstrap interval then shows.)
pub fn units_to_resolve(p: f64, delta: f64, level: f64) -> Option<u64> {
    if !(0.0..=1.0).contains(&p) || delta <= 0.0 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let z = crate::stats::proportion::z_for_level(level);
    Some((z * z * p * (1.0 - p) / (delta * delta) - 1e-9).ceil().max(1.0) as u64)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateOutcome {
    Fail,
    Conditional,
    Pass,
}

/// One gated metric: thresholds, estimate and interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatedMetric {
    pub thresholds: Thresholds,
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

impl GatedMetric {
    pub fn nu(&self) -> f64 {
        self.thresholds.normalise(self.estimate)
    }

    pub fn nu_conservative(&self) -> f64 {
        self.thresholds.normalise(self.thresholds.conservative_bound(self.lo, self.hi))
    }

    pub fn outcome(&self) -> GateOutcome {
        let nu = self.nu_conservative();
        if nu < 0.0 {
            GateOutcome::Fail
        } else if nu >= 1.0 {
            GateOutcome::Pass
        } else {
            GateOutcome::Conditional
        }
    }
}

/// The conjunctive gate: the worst outcome of its metrics. `None` for no metrics.
pub fn gate(metrics: &[GatedMetric]) -> Option<GateOutcome> {
    metrics.iter().map(GatedMetric::outcome).min()
}

/// EI = Σ w·ν over point estimates. `None` unless one weight per metric.
pub fn efficacy_index(metrics: &[GatedMetric], weights: &[f64]) -> Option<f64> {
    (metrics.len() == weights.len() && !metrics.is_empty()).then(|| metrics.iter().zip(weights).map(|(m, w)| w * m.nu()).sum())
}

/// EI_G = exp(Σ w·ln(1+ν)) − 1. `None` unless one weight per metric and every ν > −1.
pub fn efficacy_index_geometric(metrics: &[GatedMetric], weights: &[f64]) -> Option<f64> {
    if metrics.len() != weights.len() || metrics.is_empty() || metrics.iter().any(|m| m.nu() <= -1.0) {
        return None;
    }
    Some(metrics.iter().zip(weights).map(|(m, w)| w * m.nu().ln_1p()).sum::<f64>().exp() - 1.0)
}

#[cfg(test)]
mod tests {

    /// The method's worked example (δ 5 points, p̂ ≈ 0.85, 95 %: n ≈ 196), and the formula's
    /// shape: worst at p = 0.5, a quarter of the units for twice the gap. Reference values from
    /// Python's `statistics.NormalDist().inv_cdf(0.975)`: 195.914, 96.036, 384.146 before
    /// rounding up (`python3 -c "from statistics import NormalDist as N; z=N().inv_cdf(0.975);
    /// print([z*z*p*(1-p)/d/d for p, d in [(.85, .05), (.5, .1), (.5, .05)]])"`).
    #[test]
    fn sample_size_rule() {
        assert_eq!(units_to_resolve(0.85, 0.05, 0.95), Some(196));
        assert_eq!(units_to_resolve(0.5, 0.10, 0.95), Some(97));
        assert_eq!(units_to_resolve(0.5, 0.05, 0.95), Some(385));
        assert!(units_to_resolve(0.5, 0.05, 0.95) > units_to_resolve(0.85, 0.05, 0.95));
        assert_eq!(units_to_resolve(0.0, 0.05, 0.95), Some(1));
        assert_eq!(units_to_resolve(1.2, 0.05, 0.95), None);
        assert_eq!(units_to_resolve(0.5, 0.0, 0.95), None);
        assert_eq!(Thresholds::new(0.70, 0.85).gap(), Thresholds::new(0.85, 0.70).gap());
    }

    use super::*;

    fn m(outer: f64, inner: f64, est: f64, lo: f64, hi: f64) -> GatedMetric {
        GatedMetric { thresholds: Thresholds::new(outer, inner), estimate: est, lo, hi }
    }

    #[test]
    fn normalisation_in_both_directions() {
        let up = Thresholds::new(0.8, 0.9);
        assert!((up.normalise(0.8)).abs() < 1e-12);
        assert!((up.normalise(0.9) - 1.0).abs() < 1e-12);
        assert_eq!(up.normalise(5.0), 3.0, "capped");
        let down = Thresholds::new(0.05, 0.02); // hallucination: lower is better
        assert!((down.normalise(0.02) - 1.0).abs() < 1e-12);
        assert!(down.normalise(0.08) < 0.0);
        assert_eq!(down.conservative_bound(0.01, 0.04), 0.04);
    }

    #[test]
    fn gate_is_conjunctive_on_the_conservative_bound() {
        let pass = m(0.8, 0.9, 0.95, 0.92, 0.97);
        let cond = m(0.8, 0.9, 0.93, 0.85, 0.97); // point passes, bound only conditional
        let fail = m(0.8, 0.9, 0.85, 0.78, 0.90); // point conditional, bound fails
        assert_eq!(gate(&[pass]), Some(GateOutcome::Pass));
        assert_eq!(gate(&[pass, cond]), Some(GateOutcome::Conditional));
        assert_eq!(gate(&[pass, cond, fail]), Some(GateOutcome::Fail));
        assert_eq!(gate(&[]), None);
    }

    #[test]
    fn efficacy_indices() {
        let a = m(0.8, 0.9, 0.9, 0.9, 0.9); // ν = 1
        let b = m(0.8, 0.9, 0.8, 0.8, 0.8); // ν = 0
        assert!((efficacy_index(&[a, b], &[0.5, 0.5]).unwrap() - 0.5).abs() < 1e-9);
        // EI_G = exp(0.5 ln 2 + 0.5 ln 1) − 1 = √2 − 1
        assert!((efficacy_index_geometric(&[a, b], &[0.5, 0.5]).unwrap() - (2f64.sqrt() - 1.0)).abs() < 1e-9);
        assert!((efficacy_index_geometric(&[b, b], &[0.5, 0.5]).unwrap()).abs() < 1e-12, "zero at θout");
        let bad = m(0.8, 0.9, 0.6, 0.6, 0.6); // ν = −2
        assert_eq!(efficacy_index_geometric(&[a, bad], &[0.5, 0.5]), None);
        assert_eq!(efficacy_index(&[a], &[0.5, 0.5]), None, "weights must be declared per metric");
    }
}
