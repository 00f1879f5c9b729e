//! Unbiased pass@k and pass^k over tasks attempted n ≥ k times (Chen et al. 2021; Yao et al.
//! 2024): with c successes in n attempts, pass@k = 1 − C(n−c, k)/C(n, k) and
//! pass^k = C(c, k)/C(n, k). Products of ratios avoid overflowing binomials.

/// Per-task unbiased pass@k; `None` when n < k or k = 0.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || n < k || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let miss: f64 = (0..k).map(|i| (n - c - i) as f64 / (n - i) as f64).product();
    Some(1.0 - miss)
}

/// Per-task unbiased pass^k (all k attempts succeed); `None` when n < k or k = 0.
pub fn pass_hat_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || n < k || c > n {
        return None;
    }
    if c < k {
        return Some(0.0);
    }
    Some((0..k).map(|i| (c - i) as f64 / (n - i) as f64).product())
}

/// Sample variance of success across a task's attempts, c(n − c)/(n(n − 1)) (the n − 1
/// variance of n outcomes of which c are 1, as test–retest stability's): the unit value of
/// `outcome_consistency` (seed 000 Table VIII, variance across runs, C(0.10)). `None` under
/// two attempts: one run has no variance to measure, never a variance of 0.
pub fn success_variance(n: u64, c: u64) -> Option<f64> {
    if n < 2 || c > n {
        return None;
    }
    Some((c * (n - c)) as f64 / (n * (n - 1)) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Consistency's unit value: a task tried once has none (three single tries and one task
    /// with 1 success in 2 would read 0.0625 with population variances of 0 for the single
    /// tries; the seed's variance across runs is of the task with two runs alone, 0.5).
    #[test]
    fn consistency_needs_two_attempts() {
        assert_eq!(success_variance(1, 1), None);
        assert_eq!(success_variance(0, 0), None);
        assert_eq!(success_variance(2, 1), Some(0.5));
        assert_eq!(success_variance(4, 2), Some(1.0 / 3.0)); // statistics.variance([1, 1, 0, 0])
        assert_eq!(success_variance(5, 5), Some(0.0));
    }
}
