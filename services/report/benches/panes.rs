//! A 7-day profile of 1,000 series from the pane-sum store: its time does not depend on how
//! many observations the period holds. Prints a table.
//!
//! `cargo bench -p octant-report --bench panes` (`-- 10000000 100000000` for other sizes;
//! default: both of these).
//!
//! The store is written the way the profiler writes it (`octant_report::pane_store::Store`):
//! 1,000 series (50 systems × 4 rate metrics × 5 versions) × 168 hourly panes. Each pane
//! carries its share of the observations as units and its runs (10 observations per run) as
//! cluster hashes; its B = 1000 replicate sums come from 8 clusters that hold those units
//! (what a pane's replicate sums hold does not change what merging them costs). The profile
//! is then `octant_report::profile::build` over the 168 hours, every hour from the store
//! (an empty lake: no observation is read), on every core.

use std::collections::BTreeMap;
use std::time::Instant;

use octant_contracts::Source;
use octant_core::stats::bootstrap::{BootstrapSpec, ReplicateSums, cluster_hash, mix64, to_fixed};
use octant_engine::panes::PaneSums;
use octant_engine::window::SeriesKey;
use octant_report::pane_store::{GroupMeta, HOUR_MS, Store, SystemHour};
use octant_report::{Period, ReportConfig, profile as build};

/// 2025-11-24T00:00:00Z.
const T0: i64 = 1_763_942_400_000;
const HOURS: i64 = 168;
const SYSTEMS: usize = 50;
const METRICS: [&str; 4] = ["unsafe_action_rate", "tool_error_rate", "task_success", "confirmation_gating"];
const VERSIONS: usize = 5;
const PER_RUN: u64 = 10;

fn rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        / 1024.0
}

fn dir_bytes(d: &std::path::Path) -> u64 {
    std::fs::read_dir(d)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| if e.path().is_dir() { dir_bytes(&e.path()) } else { e.metadata().map_or(0, |m| m.len()) })
        .sum()
}

/// Writes the store for `observations` in all; returns (seconds, bytes).
fn fill(store: &Store, dir: &std::path::Path, observations: u64, boot: &BootstrapSpec) -> (f64, u64) {
    let started = Instant::now();
    let series = (SYSTEMS * METRICS.len() * VERSIONS) as u64;
    let per_pane = observations / (series * HOURS as u64);
    let runs = (per_pane / PER_RUN).max(1);
    let mut seq = 0u64;
    for h in 0..HOURS {
        let hour = T0 + h * HOUR_MS;
        let mut systems = BTreeMap::new();
        for s in 0..SYSTEMS {
            let system = format!("sys-{s:02}");
            let mut sh = SystemHour::default();
            for v in 0..VERSIONS {
                for (m, metric) in METRICS.iter().enumerate() {
                    let mut sums = ReplicateSums::new(boot, 2);
                    let rate = 0.02 + 0.03 * m as f64 + 0.001 * s as f64;
                    for c in 0..8u64 {
                        let units = per_pane / 8 + u64::from(c < per_pane % 8);
                        let hits = (units as f64 * rate).round();
                        sums.add_cluster(
                            cluster_hash(&format!("{system}/{v}/{hour}/{c}")),
                            &[to_fixed(hits), to_fixed(units as f64)],
                            units,
                        );
                    }
                    let clusters: Vec<u64> = {
                        let mut c: Vec<u64> = (0..runs)
                            .map(|_| {
                                seq += 1;
                                mix64(seq)
                            })
                            .collect();
                        c.sort_unstable();
                        c
                    };
                    let key = SeriesKey {
                        system_id: system.clone(),
                        system_version: format!("1.{v}.0"),
                        source: Source::Production,
                        metric: octant_core::catalogue::spec(metric).expect("catalogue metric").id,
                        benchmark: None,
                        slice: None,
                    };
                    sh.series
                        .push((key, PaneSums::Linear { units: per_pane, weightless: 0, sums, clusters, logs: None, groups: Vec::new() }));
                }
                sh.groups.push(GroupMeta {
                    version: format!("1.{v}.0"),
                    source: "production".into(),
                    offsets: vec![("octant.observations".into(), s as i32 % 4, 0, per_pane as i64, per_pane * 4)],
                    ..Default::default()
                });
            }
            systems.insert(system, sh);
        }
        assert!(store.write_hour(hour, &systems, BTreeMap::new()).expect("store written"), "sums fit");
    }
    (started.elapsed().as_secs_f64(), dir_bytes(dir))
}

fn main() {
    let sizes: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.replace('_', "").parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![10_000_000, 100_000_000] } else { sizes };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let mut rows = Vec::new();
    for n in sizes {
        let root = std::env::temp_dir().join(format!("octant-bench-panes-{n}"));
        let _ = std::fs::remove_dir_all(&root);
        let (lake, store_dir) = (root.join("lake"), root.join("store"));
        std::fs::create_dir_all(&lake).unwrap();
        let mut cfg = ReportConfig { lake: lake.clone(), ..Default::default() };
        cfg.pane_sums = Some(store_dir.clone());
        let boot = cfg.bootstrap_spec();
        let store = Store::new(&store_dir, &cfg.evaluation);
        let (fill_s, bytes) = fill(&store, &store_dir, n, &boot);
        eprintln!("{n} observations: store written in {fill_s:.1} s, {:.0} MB", bytes as f64 / 1e6);
        let period = Period { name: "7d".into(), start: T0, end: T0 + HOURS * HOUR_MS };
        let now = period.end + 86_400_000;
        let mut times = Vec::new();
        let mut profiles = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let built = rt.block_on(async {
                let ctx = octant_lake::reader::open(&lake).await.unwrap();
                build::build(&ctx, &cfg, &period, None, now).await.unwrap()
            });
            times.push(t.elapsed().as_secs_f64());
            assert!(built.iter().all(|b| b.hours_from_store == HOURS as usize), "every hour from the store");
            profiles = built.len();
            let windows: usize = built.iter().map(|b| b.windows.len()).sum();
            assert_eq!(windows, SYSTEMS * METRICS.len() * VERSIONS, "one window per series");
        }
        times.sort_by(f64::total_cmp);
        rows.push((n, bytes, times[1], profiles, rss_mib()));
        let _ = std::fs::remove_dir_all(&root);
    }
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!("\n7-day profile of 1,000 series × 168 hourly panes from the pane-sum store (B = 1000, {cores} cores; median of 3)\n");
    println!("| observations in the period | store on disk | profile time | profiles (system × version) | peak RSS |");
    println!("|---|---|---|---|---|");
    for (n, bytes, t, p, rss) in rows {
        println!("| {n} | {:.0} MB | {t:.2} s | {p} | {rss:.0} MiB |", bytes as f64 / 1e6);
    }
}
