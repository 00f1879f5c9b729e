//! Profile of a lake with 10 M observations: DataFusion (the profiler) against DuckDB running
//! the equivalent SQL on the same files, in one run. Prints a table.
//!
//! `cargo bench -p octant-report --bench lake` (DuckDB from `scripts/setup.sh`).
//! `OCTANT_BENCH_OBSERVATIONS` changes the size (default 10,000,000); the generated lake is
//! kept under the temp directory and reused by later runs of the same size.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use arrow::json::ReaderBuilder;
use octant_contracts::{Observation, Source};
use octant_lake::lake::{FileSpec, Lake, writer_properties};
use octant_lake::reader as lakedb;
use octant_lake::schema::{arrow_schema, table};
use octant_report::{Period, ReportConfig, profile as build};
use serde_json::Value;

/// 2025-11-28T00:00:00Z: the data spans two days (two `date` partitions).
const T0: i64 = 1_764_288_000_000;
const SPAN: i64 = 2 * 86_400_000;
const SYSTEMS: usize = 20;
const PARTITIONS: usize = 4;
/// Per run: 1 task success, 1 cost, 4 steps × (unsafe action, tool error) = 10 observations.
const PER_RUN: usize = 10;

fn rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        / 1024.0
}

struct Rng(u64);
impl Rng {
    fn f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        // SplitMix64: the core's finaliser over a Weyl sequence.
        (octant_core::stats::bootstrap::mix64(self.0) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A run's id as agents send them (a UUID, an OpenTelemetry trace id): 32 hex digits of 106
/// random bits (two 53-bit halves), so min/max statistics cannot narrow a lookup by id (the
/// bloom filters must).
fn run_id(system: usize, run: usize) -> String {
    let mut r = Rng(((system as u64) << 32) ^ run as u64);
    let mut half = || (r.f64() * (1u64 << 53) as f64) as u64;
    format!("{:016x}{:016x}", half(), half())
}

fn observations_of_run(system: usize, run: usize, rng: &mut Rng) -> Vec<Observation> {
    let sys = format!("sys-{system:02}");
    let run_id = run_id(system, run);
    let t = T0 + (run as i64 * 3_456) % SPAN;
    let unsafe_p = 0.02 + 0.01 * system as f64;
    let base = |metric: &str, step: Option<i64>, value: f64, dt: i64| Observation {
        observation_id: format!("{run_id}/{metric}/{}", step.unwrap_or(-1)),
        metric: metric.into(),
        system_id: sys.clone(),
        system_version: "1.0.0".into(),
        source: Source::Production,
        agent_id: Some("agent".into()),
        run_id: run_id.clone(),
        task_id: None,
        attempt: None,
        groups: vec![if run.is_multiple_of(2) { "en".into() } else { "fr".into() }],
        benchmark: None,
        task_family: None,
        cluster_id: run_id.clone(),
        step,
        event_time: t + dt,
        value,
        weight: 1.0,
        confidence: None,
        provenance: None,
        rerun_of: None,
    };
    let mut out = Vec::with_capacity(PER_RUN);
    for s in 0..4 {
        out.push(base("unsafe_action_rate", Some(s), (rng.f64() < unsafe_p) as u8 as f64, 100 * s));
        out.push(base("tool_error_rate", Some(s), (rng.f64() < 0.05) as u8 as f64, 100 * s));
    }
    out.push(base("task_success", None, (rng.f64() < 0.8) as u8 as f64, 500));
    out.push(base("cost_per_run", None, 0.01 + 0.02 * rng.f64(), 500));
    out
}

/// Writes the lake as the lake writer would: units per partition, one file per date sorted by system.
fn generate(lake: &Path, n: usize) {
    let runs = n / PER_RUN;
    let l = Lake::new(lake);
    let schema = arrow_schema(table("observations").unwrap());
    let props = writer_properties();
    let unit = 250_000;
    let mut rng = Rng(7);
    let mut offsets = [0i64; PARTITIONS];
    let mut buffers: Vec<Vec<(String, String, Value)>> = vec![Vec::new(); PARTITIONS];
    let flush = |p: usize, rows: &mut Vec<(String, String, Value)>, offsets: &mut [i64; PARTITIONS]| {
        if rows.is_empty() {
            return;
        }
        let first = offsets[p];
        let last = first + rows.len() as i64 - 1;
        let mut groups: std::collections::BTreeMap<(String, String), Vec<Value>> = Default::default();
        for (i, (sys, date, mut v)) in rows.drain(..).enumerate() {
            let o = v.as_object_mut().unwrap();
            o.insert("kafka_topic".into(), "octant.observations".into());
            o.insert("kafka_partition".into(), (p as i64).into());
            o.insert("kafka_offset".into(), (first + i as i64).into());
            groups.entry((sys, date)).or_default().push(v);
        }
        // One file per date, sorted by system (as the lake writer writes them).
        let mut by_date: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
        for ((_, date), rows) in groups {
            by_date.entry(date).or_default().extend(rows);
        }
        let mut specs = Vec::new();
        for (date, rows) in by_date {
            let mut d = ReaderBuilder::new(schema.clone()).with_batch_size(rows.len()).build_decoder().unwrap();
            d.serialize(&rows).unwrap();
            specs.push(("observations", FileSpec { date, batch: d.flush().unwrap().unwrap() }));
        }
        l.append("octant.observations", p as i32, first, last, specs, &props).unwrap();
        offsets[p] = last + 1;
    };
    for run in 0..runs {
        let system = run % SYSTEMS;
        let p = system % PARTITIONS;
        for o in observations_of_run(system, run / SYSTEMS, &mut rng) {
            let date = octant_lake::date_of(o.event_time);
            let sys = o.system_id.clone();
            buffers[p].push((sys, date, serde_json::to_value(&o).unwrap()));
        }
        if buffers[p].len() >= unit {
            let mut b = std::mem::take(&mut buffers[p]);
            flush(p, &mut b, &mut offsets);
        }
    }
    for (p, b) in buffers.iter_mut().enumerate() {
        flush(p, b, &mut offsets);
    }
}

/// The equivalent SQL both engines run (standard SQL; the same text in both).
fn queries() -> Vec<(&'static str, String)> {
    let period = "event_time >= TIMESTAMP '2025-11-27 00:00:00' AND event_time < TIMESTAMP '2025-12-01 00:00:00'";
    vec![
        (
            "point estimates per series (the profile's SELECT, aggregated)",
            format!(
                "SELECT system_id, system_version, source, metric, benchmark, count(*) AS units, count(DISTINCT cluster_id) AS clusters, \
                 sum(value * weight) / sum(weight) AS estimate FROM observations WHERE {period} GROUP BY 1, 2, 3, 4, 5"
            ),
        ),
        (
            "cluster sums (the bootstrap's input: one row per run and metric)",
            format!(
                "SELECT count(*) FROM (SELECT system_id, metric, cluster_id, sum(value * weight) AS s, sum(weight) AS w FROM observations WHERE {period} GROUP BY 1, 2, 3) AS c"
            ),
        ),
        (
            "exactly-once check (no offset twice)",
            "SELECT kafka_topic, kafka_partition, kafka_offset, count(*) AS n FROM observations GROUP BY 1, 2, 3 HAVING count(*) > 1"
                .to_string(),
        ),
        ("row count", "SELECT count(*) FROM observations".to_string()),
        (
            "one run's observations (the run page's lookup by run id)",
            format!(
                "SELECT observation_id, metric, step, value, weight FROM observations WHERE run_id = '{}' ORDER BY metric, step",
                run_id(7, 31_337)
            ),
        ),
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn duckdb(lake: &Path, queries: &[(&str, String)], runs: usize) -> Vec<(f64, usize)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.octant/python");
    assert!(root.join("duckdb").exists(), "DuckDB not found in {} (run scripts/setup.sh)", root.display());
    let script = r#"
import duckdb, json, sys, time
lake, runs = sys.argv[1], int(sys.argv[2])
qs = json.loads(sys.stdin.read())
con = duckdb.connect()
con.execute("SET threads = 2")
con.execute("SET enable_progress_bar = false")
con.execute("SET TimeZone = 'UTC'")
con.execute(f"CREATE VIEW observations AS SELECT * FROM read_parquet('{lake}/observations/*/*.parquet', hive_partitioning = true)")
out = []
for q in qs:
    rows = len(con.execute(q).fetchall())  # warm-up
    ts = []
    for _ in range(runs):
        t = time.perf_counter(); con.execute(q).fetchall(); ts.append(time.perf_counter() - t)
    out.append([sorted(ts)[len(ts) // 2], rows])
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .env("PYTHONPATH", &root)
        .arg("-c")
        .arg(script)
        .arg(lake)
        .arg(runs.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let qs: Vec<&String> = queries.iter().map(|q| &q.1).collect();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), serde_json::to_string(&qs).unwrap().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "DuckDB failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().rev().find(|l| l.starts_with("[[")).unwrap_or_else(|| panic!("no answer from DuckDB: {text}"));
    serde_json::from_str(last).expect("DuckDB's answer parses")
}

fn main() {
    let n: usize = std::env::var("OCTANT_BENCH_OBSERVATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000_000);
    let lake: PathBuf = std::env::temp_dir().join(format!("octant-bench-lake-{n}"));
    let done = lake.join("_bench_complete");
    let gen_started = Instant::now();
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&lake);
        generate(&lake, n);
        std::fs::write(&done, b"").unwrap();
        eprintln!("generated {n} observations in {:.1} s at {}", gen_started.elapsed().as_secs_f64(), lake.display());
    }
    let bytes: u64 = walk(&lake.join("observations")).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    let files = walk(&lake.join("observations")).len();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let runs = 3;
    let qs = queries();
    let (df, profile) = rt.block_on(async {
        let ctx = lakedb::open(&lake).await.unwrap();
        let mut out = Vec::new();
        for (_, q) in &qs {
            let rows: usize = ctx.sql(q).await.unwrap().collect().await.unwrap().iter().map(|b| b.num_rows()).sum();
            let mut ts = Vec::new();
            for _ in 0..runs {
                let t = Instant::now();
                ctx.sql(q).await.unwrap().collect().await.unwrap();
                ts.push(t.elapsed().as_secs_f64());
            }
            out.push((median(ts), rows));
        }
        // The whole profile: the SELECT streamed through the aggregator's window code (B = 1000).
        let cfg = ReportConfig { lake: lake.clone(), ..Default::default() };
        let period = Period { name: "bench".into(), start: T0 - 86_400_000, end: T0 + 3 * 86_400_000 };
        let mut profile = Vec::new();
        for _ in 0..2 {
            let t = Instant::now();
            let built = build::build(&ctx, &cfg, &period, None, 0).await.unwrap();
            profile.push((t.elapsed(), built.len(), built.iter().map(|b| b.observations.rows).sum::<u64>()));
        }
        // The same profile with the pane-sum store (issue 16): the first run reads the
        // observations and stores every settled hour, the second reads the hours back.
        let _ = std::fs::remove_dir_all(lake.join("_pane_sums"));
        let now = period.end + 86_400_000;
        let first = build::build(&ctx, &cfg, &period, None, now).await.unwrap();
        for _ in 0..2 {
            let t = Instant::now();
            let built = build::build(&ctx, &cfg, &period, None, now).await.unwrap();
            assert!(built.iter().all(|b| b.hours_from_store == 96), "every hour from the store");
            for (a, b) in first.iter().zip(&built) {
                assert_eq!((&a.windows, &a.record), (&b.windows, &b.record), "from the store, the same profile");
            }
            profile.push((t.elapsed(), built.len(), built.iter().map(|b| b.observations.rows).sum::<u64>()));
        }
        (out, profile)
    });
    for ((name, _), (t, rows)) in qs.iter().zip(&df) {
        eprintln!("DataFusion: {name}: {t:.3} s, {rows} rows");
    }
    let duck = duckdb(&lake, &qs, runs);
    println!(
        "\nlake: {n} observations, {files} Parquet files, {:.0} MiB (zstd), {SYSTEMS} systems, 2 date partitions, {PARTITIONS} Kafka partitions\n",
        bytes as f64 / 1048576.0
    );
    println!("| query | rows | DataFusion 55 (median of {runs}) | DuckDB 1.1.3 (median of {runs}) | DataFusion / DuckDB |");
    println!("|---|---|---|---|---|");
    for (((name, _), (dt, dr)), (kt, kr)) in qs.iter().zip(&df).zip(&duck) {
        assert_eq!(dr, kr, "{name}: both engines return the same number of rows");
        assert!(name.starts_with("exactly-once") || *dr > 0, "{name}: returns rows");
        println!("| {name} | {dr} | {:.3} s | {:.3} s | {:.2}× |", dt, kt, dt / kt);
    }
    let (t, profiles, rows) = profile[1];
    println!(
        "\nfull profile (DataFusion scan + aggregator window code, B = 1000, {profiles} profiles from {rows} observations): {:.2} s (first run {:.2} s), {:.0} observations/s; peak RSS {:.0} MiB",
        t.as_secs_f64(),
        profile[0].0.as_secs_f64(),
        rows as f64 / t.as_secs_f64(),
        rss_mib()
    );
    let stored: u64 = walk(&lake.join("_pane_sums")).iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum();
    println!(
        "the same profile from the pane-sum store (96 hours stored by the run before): {:.2} s (median of 2: {:.2} s, {:.2} s), identical; store {:.1} MiB",
        (profile[2].0 + profile[3].0).as_secs_f64() / 2.0,
        profile[2].0.as_secs_f64(),
        profile[3].0.as_secs_f64(),
        stored as f64 / 1048576.0
    );
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
    out
}
