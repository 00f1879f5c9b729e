//! Aggregator window throughput and memory, printed as a table (figures go to BENCHMARKS.md).
//!
//! `cargo bench -p octant-engine --bench windows -- [SYSTEMS] [MINUTES] [--slices]` (default 100
//! systems, 120 minutes; `-- 1000 70` gives 10,000 series with a full 1 h window, the memory
//! figure; `--slices` declares every system multi-agent with three agents taking turns and two
//! task families, under the default `SliceSpec`: the cost of the diagnostic slices)
//!
//! Workload: 1,000 series (100 systems × 10 step/run ratio metrics), default geometry (1 h
//! windows sliding every minute, 2 min lateness), B = 1000 replicates. Each system runs ~10
//! runs a minute of ~8 steps, so each series gets ~80 observations a minute; 2 h of event time
//! are fed in event-time order with one upstream watermark per observation (what the
//! aggregator sees). Every minute closes 1,000 series windows (bootstrap interval each).
//! Measured on one core (the benchmark is single-threaded, like one aggregator partition).

use std::alloc::GlobalAlloc;
use std::time::Instant;

use octant_contracts::{Observation, Source};
use octant_core::stats::bootstrap::BootstrapSpec;
use octant_engine::window::{WindowSpec, Windows};

const MIN: i64 = 60_000;
const T0: i64 = 1_764_489_600_000;
const METRICS: [&str; 10] = [
    "unsafe_action_rate",
    "confirmation_gating",
    "tool_error_rate",
    "audit_completeness",
    "deferral_on_uncertainty",
    "task_success",
    "subgoal_progress",
    "step_efficiency",
    "help_seeking",
    "error_recovery",
];

/// Counts the bytes live on the heap: the state's own size, whatever the allocator keeps. The
/// allocator under it is the aggregator's (`octant_runtime::Allocator`, mimalloc), so the
/// resident figures are the ones the service would show.
struct Counting;

static INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;

static LIVE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        unsafe { INNER.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        unsafe { INNER.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        unsafe { INNER.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live_bytes() -> i64 {
    LIVE.load(std::sync::atomic::Ordering::Relaxed)
}

// mimalloc's own entry point (in the library the `mimalloc` crate links).
unsafe extern "C" {
    fn mi_collect(force: bool);
}

/// The resident set after the allocator returned the pages it holds free: the input of a
/// slot (a quarter of a GiB at 10,000 systems) is freed just before, and mimalloc returns
/// such pages by itself only after its purge delay, on a later allocation.
fn rss_bytes() -> u64 {
    // SAFETY: a plain call into the allocator in use; it takes no pointers.
    unsafe { mi_collect(true) };
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4096
}

/// The observations of run slot `r` of minute `m` (every system's `r`-th run of the minute),
/// in event-time order. Slots do not overlap in time, so slot after slot is the minute in
/// event-time order; made a slot at a time so the input of 10,000 systems is not held at once.
/// A system's step `k` is at `k·500 ms + (system mod 100) ms` into the slot: made in that order
/// (steps, then the offset, then systems, then metrics: what a stable sort by event time of
/// systems, steps and metrics gives), with the values drawn in system, step, metric order.
fn slot(m: i64, r: i64, systems: usize, x: &mut u64, sliced: bool) -> Vec<Observation> {
    let mut next = || {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    };
    let values: Vec<bool> = (0..systems * 8 * METRICS.len()).map(|_| next() % 100 < 20).collect();
    let runs: Vec<String> = (0..systems).map(|s| format!("sys-{s}-run-{m}-{r}")).collect();
    let ids: Vec<String> = (0..systems).map(|s| format!("sys-{s}")).collect();
    let mut out = Vec::with_capacity(values.len());
    for step in 0..8i64 {
        for offset in 0..100.min(systems) {
            for s in (offset..systems).step_by(100) {
                let run = &runs[s];
                let t = T0 + m * MIN + r * 6_000 + step * 500 + offset as i64;
                for (k, metric) in METRICS.iter().enumerate() {
                    out.push(Observation {
                        observation_id: format!("{run}/{metric}/{step}"),
                        metric: metric.to_string(),
                        system_id: ids[s].clone(),
                        system_version: "1".into(),
                        source: Source::Production,
                        agent_id: sliced.then(|| format!("agent-{}", step % 3)),
                        run_id: run.clone(),
                        task_id: None,
                        attempt: None,
                        groups: vec![],
                        benchmark: None,
                        task_family: sliced.then(|| format!("family-{}", r % 2)),
                        cluster_id: run.clone(),
                        step: Some(step),
                        event_time: t,
                        value: values[(s * 8 + step as usize) * METRICS.len() + k] as u8 as f64,
                        weight: 1.0,
                        confidence: None,
                        provenance: None,
                        rerun_of: None,
                    });
                }
            }
        }
    }
    debug_assert!(out.is_sorted_by_key(|o| o.event_time));
    out
}

fn main() {
    let spec = WindowSpec { length_ms: 60 * MIN, slide_ms: MIN, lateness_ms: 2 * MIN };
    let boot = BootstrapSpec { replicates: 1000, seed: 42, level: 0.95 };
    let mut args =
        std::env::args().skip(1).filter(|a| !a.starts_with('-')).map(|a| a.parse::<usize>().expect("SYSTEMS and MINUTES are numbers"));
    let systems = args.next().unwrap_or(100);
    let minutes = args.next().unwrap_or(120) as i64;
    let sliced = std::env::args().any(|a| a == "--slices");
    let mut x: u64 = 7;
    // Warm the allocator with one minute of input, so RSS growth is the window state.
    drop(slot(0, 0, systems, &mut x, sliced));
    let (base, live_base) = (rss_bytes(), live_bytes());
    let mut w = Windows::new(spec, boot, None);
    if sliced {
        w = w.with_slices(octant_engine::window::SliceSpec::default(), (0..systems).map(|s| format!("sys-{s}")));
    }
    let (mut n, mut emitted, mut offset) = (0u64, 0u64, 0i64);
    let started = Instant::now();
    let mut busy = std::time::Duration::ZERO;
    let (mut rss_at_1h, mut series_at_1h, mut live_at_1h) = (0, 1, 0);
    for m in 0..minutes {
        for r in 0..10 {
            let input = slot(m, r, systems, &mut x, sliced);
            let t = Instant::now();
            for o in &input {
                w.add(o, offset);
                emitted += w.advance_to(o.event_time, offset).iter().map(|e| e.series.len() as u64).sum::<u64>();
                offset += 1;
                n += 1;
            }
            busy += t.elapsed();
        }
        let t = Instant::now();
        let _ = w.commit_point(offset);
        busy += t.elapsed();
        if m == 65.min(minutes - 1) {
            rss_at_1h = rss_bytes().saturating_sub(base);
            live_at_1h = live_bytes() - live_base;
            series_at_1h = w.series_count();
        }
    }
    let secs = busy.as_secs_f64();
    println!("| measure | value |");
    println!("|---|---|");
    let series = systems * METRICS.len();
    println!("| observations ({minutes} min of event time, {series} joint series, ~80 a minute each; slices: {sliced}) | {n} |");
    println!("| series windows emitted (bootstrap interval each, B = 1000) | {emitted} |");
    println!("| throughput, one core | {:.0} observations/s |", n as f64 / secs);
    println!("| cost per emitted series window (amortised, with its observations) | {:.0} µs |", 1e6 * secs / emitted as f64);
    println!("| series with state | {} |", w.series_count());
    println!("| resident memory of the state, 1 h window full (RSS growth) | {:.0} MiB |", rss_at_1h as f64 / 1048576.0);
    println!("| state per series, 1 h window full (RSS growth) | {:.0} KiB |", rss_at_1h as f64 / 1024.0 / series_at_1h as f64);
    println!("| heap bytes live in the state, 1 h window full | {:.0} MiB |", live_at_1h as f64 / 1048576.0);
    println!("| heap bytes live per series, 1 h window full | {:.0} KiB |", live_at_1h as f64 / 1024.0 / series_at_1h as f64);
    println!("| resident memory at the end (RSS growth) | {:.0} MiB |", rss_bytes().saturating_sub(base) as f64 / 1048576.0);
    println!("| heap bytes live per series at the end | {:.0} KiB |", (live_bytes() - live_base) as f64 / 1024.0 / w.series_count() as f64);
    println!("| wall time (incl. generating the input) | {:.1} s |", started.elapsed().as_secs_f64());
}
