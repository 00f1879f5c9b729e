//! Fairness gap: the largest difference in task success rate between declared groups.
//!
//! Components are `[successes_g, runs_g]` for each group g in a fixed order (fixed point).
//! A run declaring several groups counts in each. Groups with no runs (in the data or in a
//! replicate) are left out; fewer than two groups leave the gap undefined.

/// Gap from (weighted) component sums of width 2·groups.
pub fn statistic(components: &[i128]) -> Option<f64> {
    let rates: Vec<f64> = components.chunks_exact(2).filter(|g| g[1] > 0).map(|g| g[0] as f64 / g[1] as f64).collect();
    if rates.len() < 2 {
        return None;
    }
    let max = rates.iter().copied().fold(f64::MIN, f64::max);
    let min = rates.iter().copied().fold(f64::MAX, f64::min);
    Some(max - min)
}
