//! Cohen's κ for two raters (judge–human, rater–rater): κ = (p_o − p_e) / (1 − p_e).

use std::collections::HashMap;
use std::hash::Hash;

/// κ over paired labels. `None` when empty, lengths differ, or p_e = 1 (a single label used
/// by both raters: κ is undefined).
pub fn cohen_kappa<T: Eq + Hash>(a: &[T], b: &[T]) -> Option<f64> {
    if a.is_empty() || a.len() != b.len() {
        return None;
    }
    let n = a.len() as f64;
    let agree = a.iter().zip(b).filter(|(x, y)| x == y).count() as f64;
    let mut ca: HashMap<&T, f64> = HashMap::new();
    let mut cb: HashMap<&T, f64> = HashMap::new();
    for (x, y) in a.iter().zip(b) {
        *ca.entry(x).or_default() += 1.0;
        *cb.entry(y).or_default() += 1.0;
    }
    let p_o = agree / n;
    let p_e: f64 = ca.iter().map(|(k, na)| na * cb.get(k).copied().unwrap_or(0.0)).sum::<f64>() / (n * n);
    if (1.0 - p_e).abs() < 1e-15 {
        return None;
    }
    Some((p_o - p_e) / (1.0 - p_e))
}
