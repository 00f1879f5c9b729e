//! Prediction-powered inference for a mean (Angelopoulos et al. 2023), as design §1.5 states
//! it: a judge scores all N runs, humans grade a random subset of n; the estimate is
//! mean(judge over N) + mean(human − judge over n), with the normal interval
//! θ ± z·sqrt(s²_judge/N + s²_rectifier/n) with population variances (ddof = 0), as the
//! reference implementation ppi-python does with λ = 1 (classic PPI). The labelled
//! runs are part of the N; their covariance with the first term is ignored, which is the
//! usual approximation for n ≪ N.

use super::proportion::z_for_level;

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PpiEstimate {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
    pub std_error: f64,
    /// mean(judge over N) alone, for comparison.
    pub judge_only: f64,
    /// mean(human − judge over n): the judge's measured bias.
    pub rectifier: f64,
}

fn mean_var(x: impl ExactSizeIterator<Item = f64> + Clone) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.clone().sum::<f64>() / n;
    let var = x.map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var)
}

/// `judge_all`: judge scores on all N runs; `labelled`: (human, judge) pairs on the n graded
/// runs. `None` unless N ≥ 2 and n ≥ 2.
pub fn ppi_mean(judge_all: &[f64], labelled: &[(f64, f64)], level: f64) -> Option<PpiEstimate> {
    if judge_all.len() < 2 || labelled.len() < 2 {
        return None;
    }
    let (judge_mean, judge_var) = mean_var(judge_all.iter().copied());
    let (rect_mean, rect_var) = mean_var(labelled.iter().map(|(h, j)| h - j));
    let se = (judge_var / judge_all.len() as f64 + rect_var / labelled.len() as f64).sqrt();
    let z = z_for_level(level);
    let estimate = judge_mean + rect_mean;
    Some(PpiEstimate {
        estimate,
        lo: estimate - z * se,
        hi: estimate + z * se,
        std_error: se,
        judge_only: judge_mean,
        rectifier: rect_mean,
    })
}
