//! The benchmark data sets (deterministic): shared by the bootstrap benches.

use octant_core::stats::bootstrap::{cluster_hash, mix64, to_fixed};

/// `n` binary units, each its own cluster, about 20 % ones: (cluster, [y, 1]).
pub fn binary_units(n: u64) -> Vec<(u64, [i128; 2])> {
    (0..n)
        .map(|i| {
            let y = (mix64(i) % 100 < 20) as u8 as f64;
            (cluster_hash(&format!("run-{i}")), [to_fixed(y), to_fixed(1.0)])
        })
        .collect()
}

/// `n` clusters of a step metric, 1–20 steps each, about 10 % hits: (cluster, [hits, steps], steps).
pub fn step_clusters(n: u64) -> Vec<(u64, [i128; 2], u64)> {
    (0..n)
        .map(|i| {
            let steps = 1 + mix64(i) % 20;
            let hits = (0..steps).filter(|s| mix64(i * 31 + s) % 100 < 10).count() as f64;
            (cluster_hash(&format!("run-{i}")), [to_fixed(hits), to_fixed(steps as f64)], steps)
        })
        .collect()
}
