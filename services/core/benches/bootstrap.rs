//! Bootstrap throughput: the design's targets are an interval over 1 M binary units and over
//! 100 k clusters of a step metric, both at B = 1000. Run with
//! `cargo bench -p octant-core --bench bootstrap`; figures go in BENCHMARKS.md.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use octant_core::stats::bootstrap::{BootstrapSpec, ReplicateSums, ratio};
use std::hint::black_box;

mod common;
use common::{binary_units, step_clusters};

fn bench(c: &mut Criterion) {
    let spec = BootstrapSpec::default();
    let mut g = c.benchmark_group("bootstrap_B1000");
    g.sample_size(10);

    let units = binary_units(1_000_000);
    g.throughput(Throughput::Elements(units.len() as u64));
    g.bench_function(BenchmarkId::new("binary_units", units.len()), |b| {
        b.iter(|| {
            let mut st = ReplicateSums::new(&spec, 2);
            for (c, s) in &units {
                st.add_cluster(*c, s, 1);
            }
            black_box(st.estimate(spec.level, ratio))
        })
    });

    let clusters = step_clusters(100_000);
    g.throughput(Throughput::Elements(clusters.len() as u64));
    g.bench_function(BenchmarkId::new("step_clusters", clusters.len()), |b| {
        b.iter(|| {
            let mut st = ReplicateSums::new(&spec, 2);
            for (c, s, n) in &clusters {
                st.add_cluster(*c, s, *n);
            }
            black_box(st.estimate(spec.level, ratio))
        })
    });

    // Merging two panes and reading an interval: what a sliding window does every slide.
    let mut a = ReplicateSums::new(&spec, 2);
    let mut b_ = ReplicateSums::new(&spec, 2);
    for (i, (c, s, n)) in clusters.iter().take(2000).enumerate() {
        if i % 2 == 0 { a.add_cluster(*c, s, *n) } else { b_.add_cluster(*c, s, *n) }
    }
    g.throughput(Throughput::Elements(1));
    g.bench_function("merge_two_panes_and_interval", |bch| {
        bch.iter(|| {
            let mut w = a.clone();
            w.merge(&b_).unwrap();
            black_box(w.estimate(spec.level, ratio))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
