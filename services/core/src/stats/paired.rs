//! Paired tests for version-against-version comparisons on the same tasks (seed 002 §5):
//! McNemar for paired success, the Wilcoxon signed-rank test for paired continuous scores, and
//! Holm's step-down correction across the metrics compared. Checked against statsmodels and
//! scipy (`tests/fixtures/make_reference.py`, section `paired`).

use statrs::distribution::{Binomial, ChiSquared, ContinuousCDF, DiscreteCDF, Normal};

/// A test's statistic and two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestResult {
    pub statistic: f64,
    pub p_value: f64,
}

/// McNemar's test on the discordant pairs: `b` tasks the baseline passed and the candidate
/// failed, `c` the other way round. Exact: binomial, two-sided (twice the smaller tail, capped
/// at one), statistic min(b, c). Otherwise the χ² approximation with continuity correction.
/// Both as statsmodels' `mcnemar(exact=…, correction=True)`. No discordant pair: p = 1.
pub fn mcnemar(b: u64, c: u64, exact: bool) -> TestResult {
    let n = b + c;
    if n == 0 {
        return TestResult { statistic: 0.0, p_value: 1.0 };
    }
    if exact {
        let k = b.min(c);
        let tail = Binomial::new(0.5, n).expect("p = 0.5 is valid").cdf(k);
        return TestResult { statistic: k as f64, p_value: (2.0 * tail).min(1.0) };
    }
    // Edwards' correction, as statsmodels writes it: (|b − c| − 1)² / (b + c), not clamped at 0.
    let statistic = ((b as f64 - c as f64).abs() - 1.0).powi(2) / n as f64;
    TestResult { statistic, p_value: ChiSquared::new(1.0).expect("1 df").sf(statistic) }
}

/// How the Wilcoxon p-value is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WilcoxonMethod {
    /// The exact null distribution of the rank sum (no ties, no zeros; small n).
    Exact,
    /// The normal approximation with the tie correction of the variance, no continuity
    /// correction (scipy's `method="approx"`, `correction=False`).
    Approx,
    /// Exact when n ≤ 50 without ties, the approximation otherwise.
    Auto,
}

/// The Wilcoxon signed-rank test on paired differences (candidate − baseline), two-sided,
/// zeros dropped (scipy's `zero_method="wilcox"`). The statistic is min(W+, W−), ranks averaged
/// over ties. `None` with no non-zero difference.
pub fn wilcoxon(differences: &[f64], method: WilcoxonMethod) -> Option<TestResult> {
    let SignedRanks { n, w_plus, ties, tie_term } = signed_ranks(differences)?;
    let total = (n * (n + 1)) as f64 / 2.0;
    let statistic = w_plus.min(total - w_plus);
    let exact = match method {
        WilcoxonMethod::Exact => !ties,
        WilcoxonMethod::Approx => false,
        WilcoxonMethod::Auto => n <= 50 && !ties,
    };
    let p_value = if exact {
        // Number of subsets of {1..n} with each rank sum: P(T ≤ statistic), doubled.
        let max = n * (n + 1) / 2;
        let mut counts = vec![0f64; max + 1];
        counts[0] = 1.0;
        for k in 1..=n {
            for s in (k..=max).rev() {
                counts[s] += counts[s - k];
            }
        }
        let all: f64 = counts.iter().sum();
        let below: f64 = counts[..=(statistic.floor() as usize)].iter().sum();
        (2.0 * below / all).min(1.0)
    } else {
        let mean = total / 2.0;
        let var = (n * (n + 1) * (2 * n + 1)) as f64 / 24.0 - tie_term / 48.0;
        let z = (statistic - mean) / var.sqrt();
        (2.0 * Normal::standard().cdf(-z.abs())).min(1.0)
    };
    Some(TestResult { statistic, p_value })
}

/// The rank sums of the non-zero differences.
struct SignedRanks {
    n: usize,
    w_plus: f64,
    ties: bool,
    tie_term: f64,
}

fn signed_ranks(differences: &[f64]) -> Option<SignedRanks> {
    let mut d: Vec<f64> = differences.iter().copied().filter(|x| *x != 0.0 && x.is_finite()).collect();
    let n = d.len();
    if n == 0 {
        return None;
    }
    d.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    // Average ranks of |d| over ties, and Σ (t³ − t) of the tie groups.
    let mut ranks = vec![0.0; n];
    let mut tie_term = 0.0;
    let mut ties = false;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && d[j].abs() == d[i].abs() {
            j += 1;
        }
        let avg = (i + 1 + j) as f64 / 2.0;
        ranks[i..j].iter_mut().for_each(|r| *r = avg);
        let t = (j - i) as f64;
        if j - i > 1 {
            ties = true;
            tie_term += t * t * t - t;
        }
        i = j;
    }
    let w_plus: f64 = d.iter().zip(&ranks).filter(|(x, _)| **x > 0.0).map(|(_, r)| r).sum();
    Some(SignedRanks { n, w_plus, ties, tie_term })
}

/// The matched-pairs rank-biserial correlation (W+ − W−)/(W+ + W−) of paired differences
/// (candidate − baseline), zeros dropped: the Wilcoxon test's effect size, in [−1, 1]; +1 when
/// every non-zero difference is positive. `None` with no non-zero difference.
pub fn rank_biserial(differences: &[f64]) -> Option<f64> {
    let r = signed_ranks(differences)?;
    let total = (r.n * (r.n + 1)) as f64 / 2.0;
    Some((2.0 * r.w_plus - total) / total)
}

/// Holm's step-down adjusted p-values (family-wise error across the metrics compared), in the
/// input order: the i-th smallest p is multiplied by (m − i), made monotone, capped at 1.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| p_values[*a].total_cmp(&p_values[*b]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (i, idx) in order.iter().enumerate() {
        running = running.max(((m - i) as f64 * p_values[*idx]).min(1.0));
        adjusted[*idx] = running;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_cases_by_hand() {
        // 0 vs 6 discordant pairs: exact p = 2 · 0.5⁶ = 0.03125.
        assert!((mcnemar(0, 6, true).p_value - 0.03125).abs() < 1e-12);
        assert_eq!(mcnemar(3, 3, true).p_value, 1.0);
        assert_eq!(mcnemar(0, 0, false).p_value, 1.0);
        // Differences 1..=5 all positive: W− = 0, exact P(T ≤ 0) = 1/32, doubled.
        let w = wilcoxon(&[1.0, 2.0, 3.0, 4.0, 5.0], WilcoxonMethod::Exact).unwrap();
        assert_eq!(w.statistic, 0.0);
        assert!((w.p_value - 2.0 / 32.0).abs() < 1e-12);
        assert_eq!(wilcoxon(&[0.0, 0.0], WilcoxonMethod::Auto), None);
        assert_eq!(holm(&[0.01, 0.04, 0.03]), vec![0.03, 0.06, 0.06]);
        assert_eq!(rank_biserial(&[1.0, 2.0, 3.0, 0.0]), Some(1.0));
        // Ranks 1, 2, 3 with the largest negative: (1 + 2 − 3)/6 = 0.
        assert_eq!(rank_biserial(&[0.1, 0.2, -0.3]), Some(0.0));
    }
}
