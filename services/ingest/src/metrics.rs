//! The ingest's Prometheus metrics (names `octant_ingest_*`; labels bounded: topic, outcome,
//! error class, schema URL — never a trace id).

use octant_runtime::metrics::Register;
use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub requests: IntCounterVec,
    pub spans: IntCounterVec,
    pub log_records: IntCounterVec,
    pub runs: IntCounterVec,
    pub events_produced: IntCounter,
    pub open_traces: IntGauge,
    pub schema_urls: IntCounterVec,
    pub approval_channels: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub consumer_lag: IntGaugeVec,
}

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let r = Register::new(registry);
        Metrics {
            requests: r.counters(
                "octant_ingest_requests_total",
                "OTLP export requests read, by topic and outcome (ok, undecodable)",
                &["topic", "outcome"],
            ),
            spans: r.counters(
                "octant_ingest_spans_total",
                "Spans, by outcome (accepted, duplicate, late: after their trace was emitted, no_trace)",
                &["outcome"],
            ),
            log_records: r.counters(
                "octant_ingest_log_records_total",
                "Log records, by outcome (kept, ignored: not an event Octant reads, unjoinable: no trace or response id, late)",
                &["outcome"],
            ),
            runs: r.counters(
                "octant_ingest_runs_total",
                "Traces complete, by why (quiet: complete, max_wait: the bound on waiting; not_a_run: no run in it, e.g. only create_agent spans)",
                &["reason"],
            ),
            events_produced: r.counter("octant_ingest_events_produced_total", "Trajectory events produced"),
            open_traces: r.gauge("octant_ingest_open_traces", "Traces being assembled"),
            schema_urls: r.counters(
                "octant_ingest_schema_urls_total",
                "Spans by the semantic-conventions schema URL their producer declared (none: not declared)",
                &["schema_url"],
            ),
            approval_channels: r.counters(
                "octant_ingest_approval_channel_runs_total",
                "Runs (traces) by what they show of their approval flow: seen (a decision, a confirmation, a keyed run's pause: the source is watched from then on), not_shown (nothing: the source's learned state decides), declared_none (every tool span from a scope declared without a channel)",
                &["channel"],
            ),
            dead_letters: r.counters("octant_ingest_dead_letters_total", "Input dead-lettered, by error class", &["error_class"]),
            consumer_lag: r.consumer_lag("ingest"),
        }
    }
}
