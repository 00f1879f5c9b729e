//! Sequential evidence for a veto: when is a rate *confirmed* past its threshold, although the
//! windows it is read on overlap and are looked at every slide?
//!
//! A 95 % interval controls the error of one look. A sliding window is looked at every slide
//! (1 440 times a day at the default 1-min slide) over heavily overlapping data, and a window
//! that must hold an hour of mostly older runs before its interval clears the threshold reacts
//! slowly to a change. "Confirmed" therefore rests on an **e-detector** (Shin, Ramdas &
//! Rinaldo, *E-detectors: a nonparametric framework for sequential change detection*, 2023),
//! whose false-alarm rate is controlled across every look.
//!
//! ## The test
//! The null hypothesis is that the rate is on the safe side of the threshold θ. The evidence
//! comes in **run chunks** — the steps of one run (cluster) inside one pane — each with its
//! own rate Y ∈ [0, 1]. A chunk is one bet: its e-factor is `1 + λ·d(Y)` with
//! d(Y) = Y − θ for "≥ θ is unsafe" rules and θ − Y for "< θ is unsafe" rules, and
//! 0 < λ < λ_max = 1/θ (resp. 1/(1 − θ)), so the factor is positive. Under the null the
//! expected factor of a chunk, given everything before it, is at most 1: products of factors
//! are non-negative supermartingales, and a mixture over a fixed grid of λ
//! ([`GRID`] × λ_max) is one too. Betting per run chunk rather than per step keeps steps of one
//! run (which are not independent) inside one bet; runs are the independent units, as in the
//! cluster bootstrap.
//!
//! The detector at a window end t is the largest, over start panes s inside the window, of the
//! mixture of products of the chunk factors of panes s..t — the CUSUM e-detector restricted to
//! the window. The state is **confirmed** when it reaches 1/α. Under the null the
//! Shiryaev–Roberts e-detector (the *sum* over starts) has an average run length to a false
//! alarm of at least 1/α looks (Shin et al.: it minus the look count is a supermartingale);
//! the CUSUM e-detector (the *max* over starts) is never larger, and restricting the starts to
//! the window can only lower it further, so neither alarms earlier. At the default α = 10⁻³ and
//! 1-min slides, a system whose rate is anywhere on the safe side raises a false *confirmed*
//! no more often than once in 1 000 minutes (≈ 17 h) on average — that bound is reached only at
//! the threshold itself; a little further from it false confirmations vanish (VALIDITY.md:
//! none in 300 simulated system-days at 0.18). α = 10⁻⁴ gives ≈ 7 days at the threshold and
//! confirms a jump to 0.25 about 40 runs later (VALIDITY.md compares both). The detector depends only on the panes of the
//! window: it is deterministic, replays identically, and streaming windows and batch profiles
//! agree (a profile is one pane: a single-look e-value test at level α).
//!
//! Sums of logarithms are fixed point (10⁻¹² per nat, `i128`), so the result does not depend on
//! the order chunks are visited in.

use crate::veto::{Direction, VetoRule};

/// The betting fractions λ / λ_max of the mixture: from small edges (rates just past the
/// threshold, many runs) to large ones (a sudden jump).
pub const GRID: [f64; 7] = [1.0 / 32.0, 1.0 / 16.0, 1.0 / 8.0, 1.0 / 4.0, 1.0 / 2.0, 3.0 / 4.0, 0.9];

/// Default α: the detector confirms at an e-value of 1/α = 1 000 (chosen by simulation,
/// VALIDITY.md: a jump to 0.25 is confirmed within 300 runs in 9 of 10 cases).
pub const DEFAULT_ALPHA: f64 = 1e-3;

/// Fixed-point scale of summed log factors (per nat).
const LOG_SCALE: f64 = 1e12;

/// The summed log factors of one pane, per λ of the grid (fixed point).
pub type PaneLogs = [i128; GRID.len()];

/// The evidence of a window.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Evidence {
    /// ln of the detector's e-value (0 when nothing favours the alternative).
    pub log_e: f64,
    /// Index (into the panes given to [`detector`]) of the first pane of the segment where the
    /// e-value is largest.
    pub since: usize,
}

impl Evidence {
    /// True when the e-value reaches 1/α.
    pub fn confirms(&self, alpha: f64) -> bool {
        self.log_e >= (1.0 / alpha).ln()
    }
}

fn lambda_max(rule: &VetoRule) -> f64 {
    match rule.direction {
        Direction::AtLeast => 1.0 / rule.threshold,
        Direction::Below => 1.0 / (1.0 - rule.threshold),
    }
}

/// The summed log e-factors of one pane's run chunks, given as their rates (clamped to [0, 1]).
/// `None` for a rule whose threshold leaves no room to bet (θ ∉ (0, 1)).
pub fn pane_logs(rule: &VetoRule, rates: impl IntoIterator<Item = f64>) -> Option<PaneLogs> {
    if !(rule.threshold > 0.0 && rule.threshold < 1.0) {
        return None;
    }
    let lmax = lambda_max(rule);
    let mut out = [0i128; GRID.len()];
    for y in rates {
        let y = if y.is_nan() { continue } else { y.clamp(0.0, 1.0) };
        let d = match rule.direction {
            Direction::AtLeast => y - rule.threshold,
            Direction::Below => rule.threshold - y,
        };
        for (slot, f) in out.iter_mut().zip(GRID) {
            *slot += ((f * lmax * d).ln_1p() * LOG_SCALE).round() as i128;
        }
    }
    Some(out)
}

/// The e-detector over consecutive panes (oldest first): the largest mixture e-value of a
/// segment ending at the last pane. `None` without panes.
pub fn detector(panes: &[PaneLogs]) -> Option<Evidence> {
    let mut suffix = [0i128; GRID.len()];
    let mut best: Option<Evidence> = None;
    for (i, p) in panes.iter().enumerate().rev() {
        for (s, x) in suffix.iter_mut().zip(p) {
            *s += x;
        }
        let logs: Vec<f64> = suffix.iter().map(|&s| s as f64 / LOG_SCALE).collect();
        let m = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let log_e = m + (logs.iter().map(|l| (l - m).exp()).sum::<f64>() / GRID.len() as f64).ln();
        // Ties keep the later start (the shorter segment).
        if best.is_none_or(|b| log_e > b.log_e) {
            best = Some(Evidence { log_e, since: i });
        }
    }
    best.map(|b| Evidence { log_e: b.log_e.max(0.0), ..b })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logs(rule: &VetoRule, ones: usize, zeros: usize) -> PaneLogs {
        pane_logs(rule, std::iter::repeat_n(1.0, ones).chain(std::iter::repeat_n(0.0, zeros))).unwrap()
    }

    #[test]
    fn a_pane_of_chunks_bets_each_lambda() {
        let r = VetoRule::UNSAFE_ACTION;
        let p = logs(&r, 1, 1);
        for (k, f) in GRID.iter().enumerate() {
            let l = f / 0.2;
            let want = (1.0 + l * 0.8).ln() + (1.0 - l * 0.2).ln();
            assert!((p[k] as f64 / 1e12 - want).abs() < 1e-9, "λ = {l}");
        }
        assert_eq!(pane_logs(&VetoRule { threshold: 1.0, ..r }, [0.5]), None);
    }

    #[test]
    fn safe_data_gives_no_evidence_and_unsafe_data_confirms() {
        let r = VetoRule::UNSAFE_ACTION;
        // 60 panes of 20 runs at 5 % unsafe: nothing.
        let safe: Vec<PaneLogs> = (0..60).map(|_| logs(&r, 1, 19)).collect();
        let e = detector(&safe).unwrap();
        assert!(e.log_e < 1.0, "{e:?}");
        assert!(!e.confirms(DEFAULT_ALPHA));
        // The same, then 10 panes at 50 %: confirmed, and the segment starts at the change.
        let mut changed = safe.clone();
        changed.extend((0..10).map(|_| logs(&r, 10, 10)));
        let e = detector(&changed).unwrap();
        assert!(e.confirms(DEFAULT_ALPHA), "{e:?}");
        assert!((58..=61).contains(&e.since), "segment from pane {}", e.since);
    }

    #[test]
    fn gating_bets_on_the_low_side() {
        let r = VetoRule::CONFIRMATION_GATING;
        // 60 % of high-impact actions confirmed, 30 panes of 10 runs: confirmed below 0.80.
        let low: Vec<PaneLogs> = (0..30).map(|_| logs(&r, 6, 4)).collect();
        assert!(detector(&low).unwrap().confirms(DEFAULT_ALPHA));
        let high: Vec<PaneLogs> = (0..30).map(|_| logs(&r, 19, 1)).collect();
        assert!(!detector(&high).unwrap().confirms(DEFAULT_ALPHA));
    }

    #[test]
    fn the_order_of_chunks_does_not_matter() {
        let r = VetoRule::UNSAFE_ACTION;
        let rates: Vec<f64> = (0..500).map(|i| ((i * 7919) % 101) as f64 / 100.0).collect();
        let mut rev = rates.clone();
        rev.reverse();
        assert_eq!(pane_logs(&r, rates), pane_logs(&r, rev));
    }
}
