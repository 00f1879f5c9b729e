//! The scorer's Prometheus metrics (names `octant_scorer_*`; labels bounded: topic, metric,
//! error class — never a run id).

use octant_runtime::metrics::{LATENCY_BUCKETS, Register};
use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub events_consumed: IntCounterVec,
    pub observations_produced: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub sequence_gaps: IntCounter,
    pub replays_skipped: IntCounter,
    pub duplicate_events: IntCounter,
    pub evaluations: IntCounterVec,
    pub runs_abandoned: IntCounter,
    pub open_runs: IntGauge,
    pub processing_latency: Histogram,
    pub consumer_lag: IntGaugeVec,
    pub run_parts: IntCounterVec,
    pub unwatched_gated_steps: IntCounterVec,
    pub watched_sources: IntGauge,
}

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let r = Register::new(registry);
        Metrics {
            events_consumed: r.counters("octant_scorer_events_consumed_total", "Trajectory events read, by topic", &["topic"]),
            observations_produced: r.counters(
                "octant_scorer_observations_produced_total",
                "Observations acknowledged by the broker, by metric",
                &["metric"],
            ),
            dead_letters: r.counters("octant_scorer_dead_letters_total", "Input events dead-lettered, by error class", &["error_class"]),
            sequence_gaps: r.counter("octant_scorer_sequence_gaps_total", "Events accepted after a sequence gap"),
            replays_skipped: r.counter("octant_scorer_replays_skipped_total", "Replayed events of runs finished before a restart, skipped"),
            duplicate_events: r.counter(
                "octant_scorer_duplicate_events_total",
                "Events a run already had (same event id: a resend or an upstream replay), skipped",
            ),
            evaluations: r.counters(
                "octant_scorer_evaluations_total",
                "Evaluation results of run ends, by outcome (scored, undeclared: no instrument declared, no_value, out_of_range: outside what the template's evaluator can send, repeat: the same item rated again)",
                &["outcome"],
            ),
            runs_abandoned: r.counter("octant_scorer_runs_abandoned_total", "Runs ended as abandoned after the idle timeout"),
            open_runs: r.gauge("octant_scorer_open_runs", "Runs started and not yet ended"),
            processing_latency: r.histogram(
                "octant_scorer_processing_latency_seconds",
                "From reading an event to its outputs being acknowledged",
                &LATENCY_BUCKETS,
            ),
            consumer_lag: r.consumer_lag("scorer"),
            run_parts: r.counters(
                "octant_scorer_run_parts_total",
                "Starts that were a later part of a run: continued (an open run, paused or not) or derived (the run had ended: a run of its own, <run id>#<sequence>)",
                &["how"],
            ),
            unwatched_gated_steps: r.counters(
                "octant_scorer_unwatched_gated_steps_total",
                "High-impact calls not assessed for confirmation gating because their source never showed an approval flow (weightless units: N/A, unwatched), by system",
                &["system"],
            ),
            watched_sources: r.gauge(
                "octant_scorer_watched_sources",
                "Sources (system x instrumentation scope) known to show their approval flow (octant.approval_sources)",
            ),
        }
    }
}
