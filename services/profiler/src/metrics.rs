//! The profiler's Prometheus metrics (`octant_profiler_*`).

use octant_runtime::metrics::Register;
use prometheus::{Gauge, Histogram, IntCounterVec, IntGauge, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub runs: IntCounterVec,
    pub run_seconds: Histogram,
    pub profiles: IntGauge,
    pub last_success: Gauge,
    pub observations: IntCounterVec,
    pub hours: IntCounterVec,
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
        }
    }
}
