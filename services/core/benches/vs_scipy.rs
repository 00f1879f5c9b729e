//! Octant's bootstrap interval against `scipy.stats.bootstrap` on the same data in the same
//! run, printed as a table (figures go to BENCHMARKS.md).
//!
//! `cargo bench -p octant-core --bench vs_scipy` (needs SciPy: `scripts/bench-python.sh`
//! installs it into `.octant/bench-python`; the bench fails with that hint when it is missing)
//!
//! Data: the bootstrap bench's (1 M binary units; 100 k clusters of a step metric), B = 1000,
//! 95 % percentile intervals. Octant: Poisson(1) cluster weights, replicate sums on one thread
//! and on every core (`ReplicateSums::add_clusters_on`, bit-identical), on the scalar reference
//! path and on every vector path this CPU has (identical sums, asserted). SciPy: `bootstrap(…,
//! vectorized=True, method="percentile", n_resamples=1000)` (multinomial resampling; for the
//! clusters, `paired=True` with the ratio of sums), batched to bound its memory. The two
//! resampling schemes differ, so endpoints agree to Monte Carlo error, not bit for bit: the
//! table shows the difference in units of the interval's width.

use std::io::Write;
use std::time::Instant;

use octant_core::stats::bootstrap::{BootstrapSpec, Estimate, Path, ReplicateSums, from_fixed, ratio};

mod common;
use common::{binary_units, step_clusters};

/// Best of `runs` timings (seconds) and the last result.
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        out = Some(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, out.expect("at least one run"))
}

fn octant(data: &[(u64, [i128; 2], u64)], path: Path, threads: usize) -> (Estimate, ReplicateSums) {
    let spec = BootstrapSpec::default();
    let mut st = ReplicateSums::new(&spec, 2);
    let refs: Vec<(u64, &[i128], u64)> = data.iter().map(|(c, s, n)| (*c, s.as_slice(), *n)).collect();
    st.add_clusters_on(path, &refs, threads);
    (st.estimate(spec.level, ratio).expect("defined"), st)
}

fn write_f64(path: &std::path::Path, values: impl Iterator<Item = f64>) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("write bench data"));
    for v in values {
        f.write_all(&v.to_le_bytes()).expect("write bench data");
    }
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python_path = root.join(".octant/bench-python");
    assert!(
        python_path.join("scipy").is_dir(),
        "SciPy is not installed for the benches: run scripts/bench-python.sh (installs into {})",
        python_path.display()
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir = std::env::temp_dir().join(format!("octant-vs-scipy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let units: Vec<(u64, [i128; 2], u64)> = binary_units(1_000_000).into_iter().map(|(c, s)| (c, s, 1)).collect();
    let clusters = step_clusters(100_000);
    write_f64(&dir.join("units_y.f64"), units.iter().map(|(_, s, _)| from_fixed(s[0])));
    write_f64(&dir.join("clusters_hits.f64"), clusters.iter().map(|(_, s, _)| from_fixed(s[0])));
    write_f64(&dir.join("clusters_steps.f64"), clusters.iter().map(|(_, s, _)| from_fixed(s[1])));

    // The scalar reference and every vector path this CPU has, in the same run.
    let paths = Path::supported_paths();
    let mut rows = Vec::new();
    for (key, name, data) in
        [("units", "1,000,000 binary units", &units), ("clusters", "100,000 clusters of a step metric (paired ratio of sums)", &clusters)]
    {
        let mut reference: Option<ReplicateSums> = None;
        for path in &paths {
            let (t1, (e1, s1)) = time(3, || octant(data, *path, 1));
            let (tn, (en, sn)) = time(3, || octant(data, *path, cores));
            assert!(s1 == sn, "one thread and {cores} give the same replicate sums");
            assert_eq!((e1.lo, e1.hi), (en.lo, en.hi), "one thread and {cores} give the same interval");
            let r = reference.get_or_insert_with(|| s1.clone());
            assert!(*r == s1, "the {} path gives the scalar path's replicate sums", path.name());
            rows.push((key, name, path.name(), t1, tn, e1));
        }
    }

    let out = std::process::Command::new("python3")
        .arg(root.join("scripts/bench_scipy.py"))
        .arg(&dir)
        .env("PYTHONPATH", &python_path)
        .output()
        .expect("run python3");
    assert!(out.status.success(), "scripts/bench_scipy.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let scipy: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "\nB = 1000, 95 % percentile intervals; Octant best of 3, SciPy best of {} ({}), this machine: {cores} cores",
        scipy["runs"], scipy["versions"]
    );
    println!();
    println!(
        "| data | path | Octant, 1 thread | Octant, {cores} threads | SciPy | SciPy ÷ Octant (1 thread) | SciPy ÷ Octant ({cores} threads) | Octant interval | SciPy interval | endpoint difference (÷ width) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (key, name, path, t1, tn, e) in &rows {
        let s = &scipy[*key];
        let (slo, shi, ts) = (s["lo"].as_f64().unwrap(), s["hi"].as_f64().unwrap(), s["seconds"].as_f64().unwrap());
        let width = e.hi - e.lo;
        println!(
            "| {name} | {path} | {t1:.3} s | {tn:.3} s | {ts:.2} s | {:.1}× | {:.1}× | {:.5} [{:.5}, {:.5}] | {:.5} [{slo:.5}, {shi:.5}] | {:.2} / {:.2} |",
            ts / t1,
            ts / tn,
            e.point,
            e.lo,
            e.hi,
            s["point"].as_f64().unwrap(),
            (slo - e.lo).abs() / width,
            (shi - e.hi).abs() / width,
        );
    }
}
