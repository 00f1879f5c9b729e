//! Expected calibration error over 10 equal-width confidence bins.
//!
//! Bin i holds confidences in [i/10, (i+1)/10); the last bin is closed at 1. ECE =
//! Σ_bins (n_bin / N) · |accuracy_bin − mean confidence_bin|. The bootstrap works on 30
//! components per cluster: for each bin, count, Σ confidence and Σ correct (fixed point).

use super::bootstrap::{SCALE, to_fixed};

pub const BINS: usize = 10;
/// Width of the component vector of [`statistic`].
pub const DIMS: usize = 3 * BINS;

/// The bin of a confidence in [0, 1].
pub fn bin_of(confidence: f64) -> usize {
    ((confidence * BINS as f64).floor() as usize).min(BINS - 1)
}

/// Adds one (confidence, correct) pair into a component vector of width [`DIMS`].
pub fn add_pair(components: &mut [i128], confidence: f64, correct: bool) {
    let b = bin_of(confidence);
    components[3 * b] += SCALE;
    components[3 * b + 1] += to_fixed(confidence);
    components[3 * b + 2] += if correct { SCALE } else { 0 };
}

/// ECE from (weighted) component sums; `None` when there are no pairs.
pub fn statistic(components: &[i128]) -> Option<f64> {
    let total: i128 = (0..BINS).map(|b| components[3 * b]).sum();
    if total == 0 {
        return None;
    }
    let mut ece = 0.0;
    for b in 0..BINS {
        let n = components[3 * b];
        if n == 0 {
            continue;
        }
        let conf = components[3 * b + 1] as f64 / n as f64;
        let acc = components[3 * b + 2] as f64 / n as f64;
        ece += n as f64 / total as f64 * (acc - conf).abs();
    }
    Some(ece)
}

/// ECE of a plain list of pairs.
pub fn ece(pairs: &[(f64, bool)]) -> Option<f64> {
    let mut c = [0i128; DIMS];
    for &(conf, ok) in pairs {
        add_pair(&mut c, conf, ok);
    }
    statistic(&c)
}
