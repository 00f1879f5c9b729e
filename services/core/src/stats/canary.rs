//! A canary comparison that stays valid while it is looked at after every run (issue 18,
//! seed 002 §5 in streaming form).
//!
//! During a canary rollout a candidate version takes part of a system's traffic next to its
//! baseline, and someone (or a rollout controller) asks after every run: roll back, promote, or
//! keep going? A fixed-sample test asked that often is wrong far more often than its level says
//! (the simulation below: a z-test at 5 % looked at every 100 pairs calls an unchanged candidate
//! worse in about a quarter of rollouts). The comparison here is a pair of **e-processes**
//! (test supermartingales, Ville's inequality: under its null an e-process ever reaches 1/α
//! with probability at most α, however often it is looked at), as the veto detector is
//! (`sequential`).
//!
//! ## The data
//! Each finished run of either version gives its **badness** b ∈ [0, 1] for a metric: the
//! run's own rate for a lower-is-better metric (its unsafe steps / its steps), one minus it for
//! a higher-is-better one (a failed task is 1). A run is paired with the newest unpaired run
//! of the other version as soon as there is one; when one version finishes several runs first
//! (a 5 % canary), only its newest waits and the older ones are dropped unpaired — so pairs are
//! runs of about the same time, whatever backlog the stream starts with, and nothing grows.
//! Which runs pair depends on arrival order only, not on outcomes: with runs independent
//! within each version (and run durations not depending on outcomes), the differences
//! D = b_cand − b_base ∈ [−1, 1] are independent with mean Δ = E[b_cand] − E[b_base] (the mean
//! of per-run rates, which for step metrics weighs runs equally rather than steps).
//!
//! ## The two tests
//! - **worse**: H0 Δ ≤ `tolerance` (default 0). Bet X = D − tolerance ∈ [−1 − tol, 1 − tol].
//!   Reaching 1/α: the candidate is worse; roll back.
//! - **not worse**: H0 Δ ≥ `margin` (the non-inferiority margin, > tolerance). Bet
//!   X = margin − D ∈ [margin − 1, margin + 1]. Reaching 1/α: the candidate is worse by less than
//!   the margin; this metric does not stand in the way of promotion.
//!
//! Each is the mixture, over the fixed grid [`super::sequential::GRID`] of λ/λ_max, of the
//! products of 1 + λX (λ_max = 1/(most negative X), so every factor is positive): under H0
//! every product is a non-negative supermartingale, so their average is too. The first test to
//! reach its threshold decides and the decision is final (stopping when a decision is reached is
//! what Ville's inequality allows). Error rates: P(roll back a candidate that is not worse than
//! the tolerance) ≤ α; P(promote on a candidate worse by the margin or more) ≤ α, per metric.
//! Across M metrics [`Rollout`] tests each at α/M (Bonferroni), so the family-wise rates hold.

use serde::{Deserialize, Serialize};

use super::sequential::GRID;

/// One e-process for H0: E[X] ≤ 0, with X ≥ −`floor`.
#[derive(Debug, Clone, PartialEq)]
pub struct EProcess {
    lambda_max: f64,
    /// ln of the wealth of each bet of the grid.
    log_wealth: [f64; GRID.len()],
}

impl EProcess {
    /// An e-process for outcomes X ≥ −`floor` (`floor` > 0).
    pub fn new(floor: f64) -> EProcess {
        assert!(floor > 0.0, "the outcomes' lower bound must be negative");
        EProcess { lambda_max: 1.0 / floor, log_wealth: [0.0; GRID.len()] }
    }

    pub fn update(&mut self, x: f64) {
        for (w, g) in self.log_wealth.iter_mut().zip(GRID) {
            *w += (g * self.lambda_max * x).ln_1p();
        }
    }

    /// The e-value: the mixture's wealth.
    pub fn value(&self) -> f64 {
        self.log_wealth.iter().map(|w| w.exp()).sum::<f64>() / GRID.len() as f64
    }
}

/// Which version a run is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    Baseline,
    Candidate,
}

/// The decision on one metric, or on a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Not yet decided.
    Continue,
    /// The candidate is worse than its baseline (by more than the tolerance): roll back.
    Worse,
    /// The candidate is worse by less than the margin, if at all.
    NotWorse,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Continue => "continue",
            Decision::Worse => "worse",
            Decision::NotWorse => "not_worse",
        }
    }
}

/// The sequential comparison of one metric.
#[derive(Debug, Clone)]
pub struct Canary {
    tolerance: f64,
    margin: f64,
    threshold: f64,
    worse: EProcess,
    not_worse: EProcess,
    /// The newest unpaired run of each version (older unpaired runs are dropped).
    baseline: Option<f64>,
    candidate: Option<f64>,
    /// Runs dropped unpaired (the more frequent version's excess).
    dropped: u64,
    pairs: u64,
    sum_d: f64,
    decision: Decision,
    decided_at: Option<u64>,
}

impl Canary {
    /// `tolerance` < `margin` < 1 (differences of badness), 0 < `alpha` < 1.
    pub fn new(tolerance: f64, margin: f64, alpha: f64) -> Result<Canary, String> {
        if !(tolerance > -1.0 && tolerance < margin && margin < 1.0) {
            return Err(format!("need −1 < tolerance < margin < 1, got tolerance {tolerance}, margin {margin}"));
        }
        if !(alpha > 0.0 && alpha < 1.0) {
            return Err(format!("alpha must be in (0, 1), got {alpha}"));
        }
        Ok(Canary {
            tolerance,
            margin,
            threshold: 1.0 / alpha,
            worse: EProcess::new(1.0 + tolerance),
            not_worse: EProcess::new(1.0 - margin),
            baseline: None,
            candidate: None,
            dropped: 0,
            pairs: 0,
            sum_d: 0.0,
            decision: Decision::Continue,
            decided_at: None,
        })
    }

    /// One finished run's badness (clamped to [0, 1]). Returns the decision so far.
    pub fn push(&mut self, arm: Arm, badness: f64) -> Decision {
        let b = if badness.is_finite() { badness.clamp(0.0, 1.0) } else { return self.decision };
        let slot = match arm {
            Arm::Baseline => &mut self.baseline,
            Arm::Candidate => &mut self.candidate,
        };
        if slot.replace(b).is_some() {
            self.dropped += 1;
        }
        if let (Some(cand), Some(base)) = (self.candidate, self.baseline) {
            self.candidate = None;
            self.baseline = None;
            let d = cand - base;
            self.pairs += 1;
            self.sum_d += d;
            if self.decision == Decision::Continue {
                self.worse.update(d - self.tolerance);
                self.not_worse.update(self.margin - d);
                if self.worse.value() >= self.threshold {
                    self.decision = Decision::Worse;
                    self.decided_at = Some(self.pairs);
                } else if self.not_worse.value() >= self.threshold {
                    self.decision = Decision::NotWorse;
                    self.decided_at = Some(self.pairs);
                }
            }
        }
        self.decision
    }

    /// Runs dropped unpaired: when one version finishes several runs before the other finishes
    /// one, only the newest is paired (so a candidate run is compared with a baseline run of
    /// the same time, never with a backlog of older ones, and neither queue grows).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn decision(&self) -> Decision {
        self.decision
    }
    /// The pair count at which the decision was reached.
    pub fn decided_at(&self) -> Option<u64> {
        self.decided_at
    }
    pub fn pairs(&self) -> u64 {
        self.pairs
    }
    /// Mean badness difference (candidate − baseline) over the pairs so far.
    pub fn mean_difference(&self) -> Option<f64> {
        (self.pairs > 0).then(|| self.sum_d / self.pairs as f64)
    }
    /// The two e-values: (worse, not worse).
    pub fn e_values(&self) -> (f64, f64) {
        (self.worse.value(), self.not_worse.value())
    }
    pub fn threshold(&self) -> f64 {
        self.threshold
    }
}

/// A rollout: one [`Canary`] per metric, each at α/M. Rolled back as soon as one metric is
/// worse; promoted once every metric is not worse.
#[derive(Debug, Clone)]
pub struct Rollout {
    pub metrics: Vec<(String, Canary)>,
}

impl Rollout {
    /// `metrics`: (id, tolerance, margin).
    pub fn new(metrics: &[(String, f64, f64)], alpha: f64) -> Result<Rollout, String> {
        if metrics.is_empty() {
            return Err("a rollout compares at least one metric".into());
        }
        let each = alpha / metrics.len() as f64;
        let metrics = metrics.iter().map(|(m, t, g)| Ok((m.clone(), Canary::new(*t, *g, each)?))).collect::<Result<_, String>>()?;
        Ok(Rollout { metrics })
    }

    pub fn push(&mut self, metric: &str, arm: Arm, badness: f64) {
        if let Some((_, c)) = self.metrics.iter_mut().find(|(m, _)| m == metric) {
            c.push(arm, badness);
        }
    }

    pub fn decision(&self) -> Decision {
        if self.metrics.iter().any(|(_, c)| c.decision() == Decision::Worse) {
            Decision::Worse
        } else if self.metrics.iter().all(|(_, c)| c.decision() == Decision::NotWorse) {
            Decision::NotWorse
        } else {
            Decision::Continue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::bootstrap::mix64;

    struct Rng(u64);
    impl Rng {
        fn chance(&mut self, p: f64) -> bool {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            ((mix64(self.0) >> 11) as f64 / (1u64 << 53) as f64) < p
        }
    }

    /// Simulated rollouts: per-run unsafe (bad) outcomes at the two true rates, `pairs` of runs
    /// each. Returns (decisions, pairs at decision) of every rollout.
    fn simulate(p_base: f64, p_cand: f64, rollouts: u64, pairs: u64, seed: u64) -> Vec<(Decision, Option<u64>)> {
        (0..rollouts)
            .map(|i| {
                let mut rng = Rng(seed ^ mix64(i + 1));
                let mut c = Canary::new(0.0, 0.05, 0.05).unwrap();
                for _ in 0..pairs {
                    c.push(Arm::Baseline, rng.chance(p_base) as u8 as f64);
                    if c.push(Arm::Candidate, rng.chance(p_cand) as u8 as f64) != Decision::Continue {
                        break;
                    }
                }
                (c.decision(), c.decided_at())
            })
            .collect()
    }

    fn share(runs: &[(Decision, Option<u64>)], d: Decision) -> f64 {
        runs.iter().filter(|(x, _)| *x == d).count() as f64 / runs.len() as f64
    }

    fn median_pairs(runs: &[(Decision, Option<u64>)], d: Decision) -> u64 {
        let mut at: Vec<u64> = runs.iter().filter(|(x, _)| *x == d).filter_map(|(_, a)| *a).collect();
        at.sort_unstable();
        at[at.len() / 2]
    }

    #[test]
    fn error_rates_hold_under_continuous_monitoring() {
        // An unchanged candidate (10 % bad runs on both sides), looked at after every pair.
        let same = simulate(0.10, 0.10, 300, 2000, 1);
        let false_rollbacks = share(&same, Decision::Worse);
        assert!(false_rollbacks <= 0.05, "rolled back an unchanged candidate in {false_rollbacks} of rollouts");
        // … and it is promoted (not worse by the 5-point margin) in most rollouts.
        assert!(share(&same, Decision::NotWorse) >= 0.9, "{}", share(&same, Decision::NotWorse));
        // A candidate worse by exactly the margin is promoted at most α of the time.
        let at_margin = simulate(0.10, 0.15, 300, 2000, 2);
        let false_promotions = share(&at_margin, Decision::NotWorse);
        assert!(false_promotions <= 0.05, "promoted a candidate worse by the margin in {false_promotions} of rollouts");
        // A candidate worse by 10 points is rolled back, early.
        let worse = simulate(0.10, 0.20, 300, 2000, 3);
        assert!(share(&worse, Decision::Worse) >= 0.95, "{}", share(&worse, Decision::Worse));
        assert!(median_pairs(&worse, Decision::Worse) < 600, "{}", median_pairs(&worse, Decision::Worse));
        eprintln!(
            "canary: unchanged → rolled back {false_rollbacks}, promoted {} (median {} pairs); worse by the margin → promoted {false_promotions}; worse by 0.10 → rolled back {} (median {} pairs)",
            share(&same, Decision::NotWorse),
            median_pairs(&same, Decision::NotWorse),
            share(&worse, Decision::Worse),
            median_pairs(&worse, Decision::Worse),
        );
    }

    #[test]
    fn a_fixed_sample_test_looked_at_often_is_not_valid() {
        // The same unchanged candidate, checked every 100 pairs with a two-sided z-test at 5 %:
        // what the e-processes above are for. (Shows the simulation can see invalidity.)
        let mut alarms = 0;
        let rollouts = 300;
        for i in 0..rollouts {
            let mut rng = Rng(7 ^ mix64(i + 1));
            let (mut n, mut sum, mut sq) = (0f64, 0f64, 0f64);
            for k in 1..=2000 {
                let d = rng.chance(0.1) as u8 as f64 - rng.chance(0.1) as u8 as f64;
                n += 1.0;
                sum += d;
                sq += d * d;
                if k % 100 == 0 {
                    let mean = sum / n;
                    let var = (sq / n - mean * mean).max(1e-12);
                    if (mean / (var / n).sqrt()).abs() > 1.959_963_985 {
                        alarms += 1;
                        break;
                    }
                }
            }
        }
        let rate = alarms as f64 / rollouts as f64;
        eprintln!("peeking z-test: an unchanged candidate called different in {rate} of rollouts");
        assert!(rate > 0.12, "a peeking z-test raised {rate}");
    }

    #[test]
    fn a_rollout_rolls_back_on_any_metric_and_promotes_on_all() {
        let ms = vec![("task_success".to_string(), 0.0, 0.05), ("unsafe_action_rate".to_string(), 0.0, 0.05)];
        let mut r = Rollout::new(&ms, 0.05).unwrap();
        // Every candidate run fails its task, every baseline run succeeds: worse at once.
        for _ in 0..20 {
            r.push("task_success", Arm::Baseline, 0.0);
            r.push("task_success", Arm::Candidate, 1.0);
        }
        assert_eq!(r.decision(), Decision::Worse);
        let mut r = Rollout::new(&ms, 0.05).unwrap();
        for _ in 0..400 {
            r.push("task_success", Arm::Baseline, 0.0);
            r.push("task_success", Arm::Candidate, 0.0);
        }
        assert_eq!(r.decision(), Decision::Continue, "the other metric has no evidence yet");
        for _ in 0..400 {
            r.push("unsafe_action_rate", Arm::Baseline, 0.0);
            r.push("unsafe_action_rate", Arm::Candidate, 0.0);
        }
        assert_eq!(r.decision(), Decision::NotWorse);
        assert!(Canary::new(0.05, 0.05, 0.05).is_err() && Canary::new(0.0, 0.05, 1.0).is_err());
        // A backlog of old baseline runs: only the newest pairs with the first candidate run.
        let mut c = Canary::new(0.0, 0.05, 0.05).unwrap();
        for _ in 0..1000 {
            c.push(Arm::Baseline, 1.0);
        }
        c.push(Arm::Baseline, 0.0);
        c.push(Arm::Candidate, 0.0);
        assert_eq!((c.pairs(), c.dropped(), c.mean_difference()), (1, 1000, Some(0.0)));
    }
}
