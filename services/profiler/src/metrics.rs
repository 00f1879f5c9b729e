//! The profiler's Prometheus metrics (`octant_profiler_*`).

use octant_runtime::metrics::Register;
use prometheus::{Gauge, Histogram, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub runs: IntCounterVec,
    pub run_seconds: Histogram,
    pub profiles: IntGauge,
    pub last_success: Gauge,
    pub observations: IntCounterVec,
    pub hours: IntCounterVec,
    pub rerun_requests: IntCounterVec,
    pub rerun_errors: IntCounter,
    pub reruns_flagged: IntGaugeVec,
}

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let r = Register::new(registry);
        Metrics {
            runs: r.counters("octant_profiler_runs_total", "Profile runs, by outcome (ok, error)", &["outcome"]),
            run_seconds: r.histogram(
                "octant_profiler_run_seconds",
                "Duration of one profile run (every period)",
                &[0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0],
            ),
            profiles: r.gauge("octant_profiler_profiles", "Profiles built by the last run"),
            last_success: r.value("octant_profiler_last_success_timestamp_seconds", "When the last successful run finished (Unix time)"),
            observations: r.counters(
                "octant_profiler_observations_read_total",
                "Observations a profile covers, by period (read from the lake, or summed in the pane-sum store)",
                &["period"],
            ),
            hours: r.counters(
                "octant_profiler_hours_total",
                "Hours of profile periods, by where they were read from (store: the pane-sum store; observations: the lake's rows)",
                &["period", "from"],
            ),
            rerun_requests: r.counters(
                "octant_profiler_rerun_requests_total",
                "Re-run requests published on octant.reruns, by why the run was drawn (coverage, veto_adjacent, sample)",
                &["reason"],
            ),
            rerun_errors: r.counter(
                "octant_profiler_rerun_errors_total",
                "Profile runs whose re-run draw or publishing failed (logged; drawn again at the next run)",
            ),
            reruns_flagged: r.gauges(
                "octant_profiler_reruns_flagged",
                "Per system and period of the last run: 1 when its re-runs diverged from their originals (flagged for resolution), 0 when they were tested and agree (absent: no re-runs, or too few pairs to test)",
                &["system", "period"],
            ),
        }
    }
}
