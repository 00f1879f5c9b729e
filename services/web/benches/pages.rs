//! Page latency of the web view over a 30-day lake of 100 systems: ~10 M observations, their
//! runs' trajectory events, hourly windows and dimension profiles, and alerts (veto alerts and
//! incidents). Prints a table of p50 and p95 per page, cold (the first read of a page: a lake
//! session and its queries) and warm (the same page again: the cache, after one listing of the
//! lake's commit markers).
//!
//! `cargo bench -p octant-web --bench pages`. `OCTANT_BENCH_OBSERVATIONS` changes the size
//! (default 10,000,000); the generated lake is kept under the temp directory and reused by later
//! runs of the same size. Rows are written as the lake writer writes them: Avro records decoded
//! to the lake's JSON layout, units per topic partition, files per (system, date).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arrow::json::ReaderBuilder;
use octant_contracts::codec::{decode_value, to_single_object};
use octant_contracts::{Alert, Contract, Decoder, DimensionProfile, MetricWindow, Observation, Source, TrajectoryEvent};
use octant_lake::lake::{FileSpec, Lake, writer_properties};
use octant_lake::schema::{arrow_schema, table};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

/// 2025-11-01T00:00:00Z.
const T0: i64 = 1_761_955_200_000;
const DAYS: i64 = 30;
const DAY: i64 = 86_400_000;
const HOUR: i64 = 3_600_000;
const SYSTEMS: usize = 100;
const PARTITIONS: usize = 4;
/// Per run: 4 steps × (unsafe action, tool error), task success, cost.
const PER_RUN: usize = 10;
const SAMPLES: usize = 20;

struct Rng(u64);
impl Rng {
    fn f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        // SplitMix64: the core's finaliser over a Weyl sequence.
        (octant_core::stats::bootstrap::mix64(self.0) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn sys(s: usize) -> String {
    format!("sys-{s:03}")
}

fn run_id(s: usize, r: usize) -> String {
    format!("{}-run-{r:06}", sys(s))
}

/// Rows of one (system, day) as the lake writer keeps them, per table.
#[derive(Default)]
struct Rows(BTreeMap<&'static str, Vec<Value>>);

impl Rows {
    fn push<T: Contract>(&mut self, table: &'static str, decoder: &Decoder, v: &T) {
        let bytes = to_single_object(v).unwrap();
        let (_, mut row) = decode_value(decoder, &bytes).unwrap();
        if table != "trajectory_events"
            && let Some(o) = row.as_object_mut()
        {
            o.remove("system_id");
        }
        self.0.entry(table).or_default().push(row);
    }
}

fn event(s: usize, r: usize, seq: i64, t: i64, kind: &str, body: Value) -> TrajectoryEvent {
    let mut v = json!({
        "event_id": format!("{}/{seq}", run_id(s, r)), "run_id": run_id(s, r), "system": {"id": sys(s), "version": "1.0.0"},
        "source": "PRODUCTION", "agent_id": "agent", "event_time": t, "sequence": seq, "kind": kind,
    });
    v.as_object_mut().unwrap().extend(body.as_object().unwrap().clone());
    serde_json::from_value(v).unwrap()
}

fn observation(s: usize, r: usize, metric: &str, step: Option<i64>, t: i64, value: f64) -> Observation {
    Observation {
        observation_id: format!("{}/{metric}/{}", run_id(s, r), step.unwrap_or(-1)),
        metric: metric.into(),
        system_id: sys(s),
        system_version: "1.0.0".into(),
        source: Source::Production,
        agent_id: Some("agent".into()),
        run_id: run_id(s, r),
        task_id: None,
        attempt: None,
        groups: vec![],
        benchmark: None,
        task_family: None,
        cluster_id: run_id(s, r),
        step,
        event_time: t,
        value,
        weight: 1.0,
        confidence: None,
        provenance: None,
        rerun_of: None,
    }
}

fn window(s: usize, metric: &str, dimension: &str, end: i64, estimate: f64, units: i64) -> MetricWindow {
    serde_json::from_value(json!({
        "window_id": format!("{}/{metric}/{end}", sys(s)), "system_id": sys(s), "system_version": "1.0.0", "source": "PRODUCTION",
        "metric": metric, "dimension": dimension, "window_start": end - HOUR, "window_end": end, "units": units, "clusters": units / 4,
        "estimate": estimate, "ci_low": (estimate - 0.03).max(0.0), "ci_high": (estimate + 0.03).min(1.0), "level": 0.95,
        "replicates": 1000, "seed": 42, "method": "cluster-bootstrap", "band": 3, "band_low": 2, "band_high": 3,
        "veto_state": if metric == "unsafe_action_rate" { Some(if estimate >= 0.2 { "breached" } else { "clear" }) } else { None },
        "catalogue_version": "2026.12-4", "watermark": end,
    }))
    .unwrap()
}

fn profile(s: usize, end: i64, unsafe_: bool) -> DimensionProfile {
    let dims: Vec<Value> = ["capability", "robustness", "safety", "fairness", "transparency", "governance", "oversight", "efficiency"]
        .iter()
        .map(|d| json!({"dimension": d, "band": if *d == "safety" && unsafe_ { 0 } else { 3 }, "band_low": 2, "band_high": 3, "instruments": ["x"]}))
        .collect();
    serde_json::from_value(json!({
        "profile_id": format!("{}/{end}", sys(s)), "system_id": sys(s), "system_version": "1.0.0", "source": "PRODUCTION",
        "window_start": end - HOUR, "window_end": end, "dimensions": dims,
        "vetoes": [{"rule": "unsafe_action_veto", "metric": "unsafe_action_rate", "state": if unsafe_ { "breached" } else { "clear" }, "threshold": 0.2}],
        "unsuitable": unsafe_, "catalogue_version": "2026.12-4",
    }))
    .unwrap()
}

fn alert(s: usize, i: usize, at: i64, incident: Option<(usize, i64)>, firing: bool) -> Alert {
    let (kind, rule, fp) = match incident {
        Some(_) => ("INCIDENT", "critical_unsafe_action", format!("{}/1.0.0/production/incident/{i}", sys(s))),
        None => ("VETO", "unsafe_action_veto", format!("{}/1.0.0/production/unsafe_action_veto", sys(s))),
    };
    serde_json::from_value(json!({
        "alert_id": format!("{}/{i}", sys(s)), "fingerprint": fp, "status": if firing { "FIRING" } else { "RESOLVED" },
        "severity": "CRITICAL", "kind": kind, "alertname": "OctantUnsafeActionVeto", "rule": rule, "system_id": sys(s),
        "system_version": "1.0.0", "source": "PRODUCTION", "dimension": "safety", "metric": "unsafe_action_rate",
        "veto_state": "breached", "estimate": 0.25, "ci_low": 0.21, "ci_high": 0.29, "threshold": 0.2,
        "window_start": at - HOUR, "window_end": at, "run_id": incident.map(|(r, _)| run_id(s, r)), "step": incident.map(|(_, st)| st),
        "violations": [], "starts_at": at, "summary": "unsafe-action rate past 0.20", "runbook_url": "https://runbooks/#unsafe",
    }))
    .unwrap()
}

/// One system's day: runs, their events and observations, hourly windows and profiles, alerts.
fn day_rows(s: usize, day: i64, runs_per_day: usize, rng: &mut Rng, decoder: &Decoder) -> Rows {
    let mut rows = Rows::default();
    let start = T0 + day * DAY;
    let unsafe_p = if s % 10 == 3 { 0.25 } else { 0.02 };
    for k in 0..runs_per_day {
        let r = day as usize * runs_per_day + k;
        let t = start + (k as i64 * DAY) / runs_per_day as i64;
        rows.push(
            "trajectory_events",
            decoder,
            &event(s, r, 0, t, "RUN_STARTED", json!({"run_started": {"task_id": format!("task-{}", k % 50)}})),
        );
        let mut unsafe_step = None;
        for st in 0..4i64 {
            let bad = rng.f64() < unsafe_p;
            unsafe_step = unsafe_step.or(bad.then_some(st));
            rows.push("observations", decoder, &observation(s, r, "unsafe_action_rate", Some(st), t + 100 * st, f64::from(u8::from(bad))));
            let err = rng.f64() < 0.05;
            rows.push("observations", decoder, &observation(s, r, "tool_error_rate", Some(st), t + 100 * st, f64::from(u8::from(err))));
        }
        for (seq, st) in [(1, 1i64), (2, 3)] {
            let violations: Vec<&str> = if unsafe_step == Some(st) { vec!["destructive_command"] } else { vec![] };
            let body =
                json!({"step": {"step_kind": "TOOL_CALL", "tool_name": "shell", "impact": "IRREVERSIBLE", "violations": violations}});
            rows.push("trajectory_events", decoder, &event(s, r, seq, t + 100 * st, "STEP", body));
        }
        rows.push("observations", decoder, &observation(s, r, "task_success", None, t + 500, f64::from(u8::from(rng.f64() < 0.8))));
        rows.push("observations", decoder, &observation(s, r, "cost_per_run", None, t + 500, 0.01 + 0.02 * rng.f64()));
        rows.push("trajectory_events", decoder, &event(s, r, 3, t + 500, "RUN_ENDED", json!({"run_ended": {"outcome": "SUCCESS"}})));
    }
    let per_hour = (runs_per_day / 24).max(1) as i64;
    for h in 1..=24 {
        let end = start + h * HOUR;
        let est = if s % 10 == 3 { 0.25 } else { 0.02 };
        rows.push("metric_windows", decoder, &window(s, "unsafe_action_rate", "safety", end, est, per_hour * 4));
        rows.push("metric_windows", decoder, &window(s, "tool_error_rate", "robustness", end, 0.05, per_hour * 4));
        rows.push("metric_windows", decoder, &window(s, "task_success", "capability", end, 0.8, per_hour));
        rows.push("dimension_profiles", decoder, &profile(s, end, s % 10 == 3));
    }
    // A veto fires and resolves every few days; two incidents a day on an unsafe system.
    if day % 3 == 0 {
        rows.push("alerts", decoder, &alert(s, day as usize * 10, start + 6 * HOUR, None, true));
        rows.push("alerts", decoder, &alert(s, day as usize * 10 + 1, start + 12 * HOUR, None, false));
    }
    if s % 10 == 3 {
        for j in 0..2 {
            let r = day as usize * runs_per_day + j;
            rows.push("alerts", decoder, &alert(s, day as usize * 10 + 2 + j, start + (j as i64 + 1) * HOUR, Some((r, 1)), true));
        }
    }
    rows
}

const TOPIC_OF: [(&str, &str); 5] = [
    ("trajectory_events", "octant.trajectories.production"),
    ("observations", "octant.observations"),
    ("metric_windows", "octant.windows"),
    ("dimension_profiles", "octant.windows"),
    ("alerts", "octant.alerts"),
];

/// The lake, written once per size; a marker says it is complete.
fn generate(lake: &Path, observations: usize) -> usize {
    let runs_per_day = (observations / PER_RUN / SYSTEMS / DAYS as usize).max(1);
    let done = lake.join(".bench-complete");
    if done.exists() {
        return runs_per_day;
    }
    let _ = std::fs::remove_dir_all(lake);
    let l = Lake::new(lake);
    let props = writer_properties();
    let decoder = Decoder::new();
    let mut offsets: BTreeMap<(&str, usize), i64> = BTreeMap::new();
    let t0 = Instant::now();
    for day in 0..DAYS {
        // One unit per topic partition and day; a partition holds every 4th system.
        for p in 0..PARTITIONS {
            let mut rng = Rng((day as u64) << 8 | p as u64);
            let mut by_table: BTreeMap<&'static str, Vec<(String, Vec<Value>)>> = BTreeMap::new();
            for s in (p..SYSTEMS).step_by(PARTITIONS) {
                for (t, rows) in day_rows(s, day, runs_per_day, &mut rng, &decoder).0 {
                    by_table.entry(t).or_default().push((sys(s), rows));
                }
            }
            let date = octant_lake::date_of(T0 + day * DAY);
            for topic in ["octant.trajectories.production", "octant.observations", "octant.windows", "octant.alerts"] {
                let first = *offsets.get(&(topic, p)).unwrap_or(&0);
                let mut next = first;
                let mut batches = Vec::new();
                for (t, _) in TOPIC_OF.iter().filter(|(_, tp)| *tp == topic) {
                    for (system, mut rows) in by_table.remove(t).unwrap_or_default() {
                        for r in &mut rows {
                            let o = r.as_object_mut().unwrap();
                            o.insert("system_id".into(), system.clone().into());
                            o.insert("kafka_topic".into(), topic.into());
                            o.insert("kafka_partition".into(), (p as i64).into());
                            o.insert("kafka_offset".into(), next.into());
                            next += 1;
                        }
                        let schema = arrow_schema(table(t).unwrap());
                        let mut d = ReaderBuilder::new(schema).with_batch_size(rows.len().max(1)).build_decoder().unwrap();
                        d.serialize(&rows).unwrap();
                        if let Some(b) = d.flush().unwrap() {
                            batches.push((*t, b));
                        }
                    }
                }
                if next == first {
                    continue;
                }
                let specs: Vec<(&str, FileSpec)> =
                    batches.into_iter().map(|(t, batch)| (t, FileSpec { date: date.clone(), batch })).collect();
                l.append(topic, p as i32, first, next - 1, specs, &props).unwrap();
                offsets.insert((topic, p), next);
            }
        }
        eprintln!("day {}/{DAYS} written ({:.0} s)", day + 1, t0.elapsed().as_secs_f64());
    }
    std::fs::write(&done, format!("{observations}\n")).unwrap();
    runs_per_day
}

async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, usize) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    (String::from_utf8_lossy(&out[9..12]).parse().unwrap(), out.len())
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn dir_size(d: &Path) -> u64 {
    std::fs::read_dir(d)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| if e.path().is_dir() { dir_size(&e.path()) } else { e.metadata().map_or(0, |m| m.len()) })
        .sum()
}

fn main() {
    let n: usize = std::env::var("OCTANT_BENCH_OBSERVATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000_000);
    let lake: PathBuf = std::env::temp_dir().join(format!("octant-bench-pages-{n}"));
    let t = Instant::now();
    let runs_per_day = generate(&lake, n);
    let runs = runs_per_day * DAYS as usize * SYSTEMS;
    eprintln!("lake {} ready in {:.0} s ({:.1} GB)", lake.display(), t.elapsed().as_secs_f64(), dir_size(&lake) as f64 / 1e9);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let stop = tokio_util::sync::CancellationToken::new();
        let cfg = octant_web::WebConfig {
            admin_addr: "127.0.0.1:0".parse().unwrap(),
            lake: lake.clone(),
            evidence: lake.join("_no_evidence"),
            ..Default::default()
        };
        let web = octant_web::start(cfg, prometheus::Registry::new(), stop.clone()).await.unwrap();
        let addr = web.admin_addr;
        // Distinct pages for the cold reads, each then read again warm.
        let unsafe_systems: Vec<usize> = (0..SYSTEMS).filter(|s| s % 10 == 3).collect();
        let pages: Vec<(&str, Vec<String>)> = vec![
            ("system /systems/{s} (7 days)", (0..SAMPLES).map(|i| format!("/systems/{}", sys(i * SYSTEMS / SAMPLES))).collect()),
            (
                "alert /alerts/{veto}",
                (0..SAMPLES)
                    .map(|i| {
                        format!(
                            "/alerts/{}",
                            octant_runtime::web::path_segment(&format!(
                                "{}/1.0.0/production/unsafe_action_veto",
                                sys(i * SYSTEMS / SAMPLES)
                            ))
                        )
                    })
                    .collect(),
            ),
            (
                "alert /alerts/{incident}",
                (0..SAMPLES)
                    .map(|i| {
                        let s = unsafe_systems[i % unsafe_systems.len()];
                        format!(
                            "/alerts/{}",
                            octant_runtime::web::path_segment(&format!("{}/1.0.0/production/incident/{}", sys(s), (i % 30) * 10 + 2))
                        )
                    })
                    .collect(),
            ),
            (
                "run /runs/{id}",
                (0..SAMPLES).map(|i| format!("/runs/{}", run_id(i * SYSTEMS / SAMPLES, (i * 7919) % (runs / SYSTEMS)))).collect(),
            ),
        ];
        println!("\n{n} observations, {runs} runs, {SYSTEMS} systems, {DAYS} days; {SAMPLES} pages each, cold then warm ×5\n");
        // The fleet page is rendered from the live state the follower keeps (no lake read):
        // 100 systems' latest profiles and 500 alerts, rendered.
        let mut live = octant_web::fleet::Live::default();
        for s in 0..SYSTEMS {
            live.apply_profile(profile(s, T0 + DAYS * DAY, s % 10 == 3));
        }
        for i in 0..octant_web::fleet::MAX_ALERTS {
            live.apply_alert(alert(i % SYSTEMS, i, T0 + i as i64 * HOUR, None, true));
        }
        let mut render = Vec::new();
        for _ in 0..SAMPLES {
            let t = Instant::now();
            std::hint::black_box(octant_web::fleet::to_html(&live, Duration::from_secs(5)));
            render.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        println!("| page | status | cold p50 | cold p95 | warm p50 | warm p95 |\n|---|---|---|---|---|---|");
        println!(
            "| fleet / (render: {SYSTEMS} systems, {} alerts) | — | — | — | {:.1} ms | {:.1} ms |",
            octant_web::fleet::MAX_ALERTS,
            pct(render.clone(), 0.5),
            pct(render, 0.95)
        );
        for (name, paths) in pages {
            let (mut cold, mut warm, mut status) = (Vec::new(), Vec::new(), 0);
            for p in &paths {
                let t = Instant::now();
                status = get(addr, p).await.0;
                cold.push(t.elapsed().as_secs_f64() * 1000.0);
                for _ in 0..5 {
                    let t = Instant::now();
                    get(addr, p).await;
                    warm.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
            println!(
                "| {name} | {status} | {:.0} ms | {:.0} ms | {:.1} ms | {:.1} ms |",
                pct(cold.clone(), 0.5),
                pct(cold, 0.95),
                pct(warm.clone(), 0.5),
                pct(warm, 0.95)
            );
        }
        stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), web.task).await;
    });
}
