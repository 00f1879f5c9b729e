//! The alerter's Prometheus metrics (`octant_alerter_*`).

use octant_runtime::metrics::Register;
use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub inputs: IntCounterVec,
    pub alerts: IntCounterVec,
    pub firing: IntGaugeVec,
    pub dead_letters: IntCounterVec,
    pub processing_latency: Histogram,
    pub alertmanager_posts: IntCounterVec,
    pub alertmanager_pending: IntGauge,
    pub alertmanager_dropped: IntCounter,
    pub consumer_lag: IntGaugeVec,
}

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let r = Register::new(registry);
        Metrics {
            inputs: r.counters(
                "octant_alerter_inputs_total",
                "Records read, by kind (window, profile, event) and outcome (used, ignored, undecodable)",
                &["kind", "outcome"],
            ),
            alerts: r.counters(
                "octant_alerter_alerts_total",
                "Alerts published to octant.alerts, by kind, severity, status and system (one series per system a fleet has: bounded)",
                &["kind", "severity", "status", "system"],
            ),
            firing: r.gauges("octant_alerter_firing", "Veto alerts currently firing, by severity", &["severity"]),
            dead_letters: r.counters("octant_alerter_dead_letters_total", "Records dead-lettered, by error class", &["error_class"]),
            processing_latency: r.histogram(
                "octant_alerter_processing_seconds",
                "From reading a record to its alerts being acknowledged by the broker",
                &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5],
            ),
            alertmanager_posts: r.counters(
                "octant_alerter_alertmanager_posts_total",
                "POSTs to Alertmanager's /api/v2/alerts, by result (ok, error)",
                &["result"],
            ),
            alertmanager_pending: r.gauge("octant_alerter_alertmanager_pending", "Alert states waiting to be delivered to Alertmanager"),
            alertmanager_dropped: r.counter(
                "octant_alerter_alertmanager_dropped_total",
                "Incidents dropped from the Alertmanager backlog (bounded while Alertmanager is down); they stay on octant.alerts",
            ),
            consumer_lag: r.consumer_lag("alerter"),
        }
    }
}
