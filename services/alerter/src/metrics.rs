//! The alerter's Prometheus metrics (`octant_alerter_*`).

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

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
        let m = Metrics {
            inputs: IntCounterVec::new(
                Opts::new(
                    "octant_alerter_inputs_total",
                    "Records read, by kind (window, profile, event) and outcome (used, ignored, undecodable)",
                ),
                &["kind", "outcome"],
            )
            .unwrap(),
            alerts: IntCounterVec::new(
                Opts::new(
                    "octant_alerter_alerts_total",
                    "Alerts published to octant.alerts, by kind, severity, status and system (one series per system a fleet has: bounded)",
                ),
                &["kind", "severity", "status", "system"],
            )
            .unwrap(),
            firing: IntGaugeVec::new(Opts::new("octant_alerter_firing", "Veto alerts currently firing, by severity"), &["severity"])
                .unwrap(),
            dead_letters: IntCounterVec::new(
                Opts::new("octant_alerter_dead_letters_total", "Records dead-lettered, by error class"),
                &["error_class"],
            )
            .unwrap(),
            processing_latency: Histogram::with_opts(
                HistogramOpts::new(
                    "octant_alerter_processing_seconds",
                    "From reading a record to its alerts being acknowledged by the broker",
                )
                .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
            )
            .unwrap(),
            alertmanager_posts: IntCounterVec::new(
                Opts::new("octant_alerter_alertmanager_posts_total", "POSTs to Alertmanager's /api/v2/alerts, by result (ok, error)"),
                &["result"],
            )
            .unwrap(),
            alertmanager_pending: IntGauge::new(
                "octant_alerter_alertmanager_pending",
                "Alert states waiting to be delivered to Alertmanager",
            )
            .unwrap(),
            alertmanager_dropped: IntCounter::new(
                "octant_alerter_alertmanager_dropped_total",
                "Incidents dropped from the Alertmanager backlog (bounded while Alertmanager is down); they stay on octant.alerts",
            )
            .unwrap(),
            consumer_lag: octant_runtime::consumer::lag_gauge(registry, "alerter"),
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(m.inputs.clone()),
            Box::new(m.alerts.clone()),
            Box::new(m.firing.clone()),
            Box::new(m.dead_letters.clone()),
            Box::new(m.processing_latency.clone()),
            Box::new(m.alertmanager_posts.clone()),
            Box::new(m.alertmanager_pending.clone()),
            Box::new(m.alertmanager_dropped.clone()),
        ];
        for c in collectors {
            registry.register(c).expect("alerter metrics registered once per registry");
        }
        m
    }
}
