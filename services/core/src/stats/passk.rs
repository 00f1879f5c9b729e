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

/// Population variance of success across a task's attempts, p(1 − p) with p = c/n: the unit
/// value of `outcome_consistency`.
pub fn success_variance(n: u64, c: u64) -> Option<f64> {
    if n == 0 || c > n {
        return None;
    }
    let p = c as f64 / n as f64;
    Some(p * (1.0 - p))
}
