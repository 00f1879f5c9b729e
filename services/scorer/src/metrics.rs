//! The scorer's Prometheus metrics (names `octant_scorer_*`; labels bounded: topic, metric,
//! error class — never a run id).

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub events_consumed: IntCounterVec,
    pub observations_produced: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub sequence_gaps: IntCounter,
    pub replays_skipped: IntCounter,
    pub runs_abandoned: IntCounter,
    pub open_runs: IntGauge,
    pub processing_latency: Histogram,
    pub consumer_lag: IntGaugeVec,
}

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let m = Metrics {
            events_consumed: IntCounterVec::new(
                Opts::new("octant_scorer_events_consumed_total", "Trajectory events read, by topic"),
                &["topic"],
            )
            .unwrap(),
            observations_produced: IntCounterVec::new(
                Opts::new("octant_scorer_observations_produced_total", "Observations acknowledged by the broker, by metric"),
                &["metric"],
            )
            .unwrap(),
            dead_letters: IntCounterVec::new(
                Opts::new("octant_scorer_dead_letters_total", "Input events dead-lettered, by error class"),
                &["error_class"],
            )
            .unwrap(),
            sequence_gaps: IntCounter::new("octant_scorer_sequence_gaps_total", "Events accepted after a sequence gap").unwrap(),
            replays_skipped: IntCounter::new(
                "octant_scorer_replays_skipped_total",
                "Replayed events of runs finished before a restart, skipped",
            )
            .unwrap(),
            runs_abandoned: IntCounter::new("octant_scorer_runs_abandoned_total", "Runs ended as abandoned after the idle timeout")
                .unwrap(),
            open_runs: IntGauge::new("octant_scorer_open_runs", "Runs started and not yet ended").unwrap(),
            processing_latency: Histogram::with_opts(
                HistogramOpts::new("octant_scorer_processing_latency_seconds", "From reading an event to its outputs being acknowledged")
                    .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
            )
            .unwrap(),
            consumer_lag: octant_runtime::consumer::lag_gauge(registry, "scorer"),
        };
        for c in [
            Box::new(m.events_consumed.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.observations_produced.clone()),
            Box::new(m.dead_letters.clone()),
            Box::new(m.sequence_gaps.clone()),
            Box::new(m.replays_skipped.clone()),
            Box::new(m.runs_abandoned.clone()),
            Box::new(m.open_runs.clone()),
            Box::new(m.processing_latency.clone()),
        ] {
            registry.register(c).expect("scorer metrics registered once per registry");
        }
        m
    }
}
