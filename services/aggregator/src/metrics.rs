//! The aggregator's Prometheus metrics: pipeline counters (`octant_aggregator_*`) and the
//! evaluation gauges operators chart and alert on (`octant_metric_*`, `octant_dimension_band`,
//! `octant_veto_state`, `octant_system_unsuitable`). Labels are bounded: system, version,
//! source, metric, dimension, benchmark, rule — never a run id.

use prometheus::{GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub observations: IntCounterVec,
    pub windows_emitted: IntCounter,
    pub profiles_emitted: IntCounter,
    pub dead_letters: IntCounterVec,
    pub series: IntGauge,
    pub watermark: GaugeVec,
    pub upstream_waiting: IntGauge,
    pub upstream_idle: IntGauge,
    pub consumer_lag: IntGaugeVec,
    pub estimate: GaugeVec,
    pub ci_low: GaugeVec,
    pub ci_high: GaugeVec,
    pub band: GaugeVec,
    pub units: GaugeVec,
    pub dimension_band: GaugeVec,
    pub dimension_band_low: GaugeVec,
    pub dimension_band_high: GaugeVec,
    pub not_applicable: GaugeVec,
    pub veto_state: GaugeVec,
    pub veto_evidence: GaugeVec,
    pub unsuitable: GaugeVec,
}

pub const METRIC_LABELS: [&str; 6] = ["system", "version", "source", "metric", "dimension", "benchmark"];
pub const DIMENSION_LABELS: [&str; 4] = ["system", "version", "source", "dimension"];
pub const NA_LABELS: [&str; 7] = ["system", "version", "source", "metric", "dimension", "benchmark", "reason"];
pub const VETO_LABELS: [&str; 5] = ["system", "version", "source", "rule", "benchmark"];

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let g = |name: &str, help: &str, labels: &[&str]| GaugeVec::new(Opts::new(name, help), labels).unwrap();
        let m = Metrics {
            observations: IntCounterVec::new(
                Opts::new(
                    "octant_aggregator_observations_total",
                    "Observations read, by outcome (accepted, duplicate, late, unknown, undecodable)",
                ),
                &["outcome"],
            )
            .unwrap(),
            windows_emitted: IntCounter::new("octant_aggregator_windows_emitted_total", "Metric windows published").unwrap(),
            profiles_emitted: IntCounter::new("octant_aggregator_profiles_emitted_total", "Rolling dimension profiles published").unwrap(),
            dead_letters: IntCounterVec::new(
                Opts::new("octant_aggregator_dead_letters_total", "Observations dead-lettered, by error class"),
                &["error_class"],
            )
            .unwrap(),
            series: IntGauge::new("octant_aggregator_series", "Series (system × version × source × metric × benchmark) with window state")
                .unwrap(),
            watermark: g(
                "octant_aggregator_watermark_seconds",
                "Event-time watermark of an input partition (minimum over upstream partitions), Unix seconds",
                &["partition"],
            ),
            upstream_waiting: IntGauge::new(
                "octant_aggregator_upstream_waiting",
                "Upstream (scorer input) partitions not heard from yet, summed over input partitions: windows wait for them",
            )
            .unwrap(),
            upstream_idle: IntGauge::new(
                "octant_aggregator_upstream_idle",
                "Upstream partitions announced idle (left out of the watermark), summed over input partitions",
            )
            .unwrap(),
            consumer_lag: octant_runtime::consumer::lag_gauge(registry, "aggregator"),
            estimate: g("octant_metric_estimate", "Point estimate of a metric over the latest window (absent when N/A)", &METRIC_LABELS),
            ci_low: g("octant_metric_ci_low", "Lower end of the metric's interval (absent when N/A)", &METRIC_LABELS),
            ci_high: g("octant_metric_ci_high", "Upper end of the metric's interval (absent when N/A)", &METRIC_LABELS),
            band: g("octant_metric_band", "Band 0..4 of the metric (absent when N/A)", &METRIC_LABELS),
            units: g("octant_metric_units", "Units behind the metric's latest window", &METRIC_LABELS),
            dimension_band: g("octant_dimension_band", "Band 0..4 of a dimension after veto caps (absent when N/A)", &DIMENSION_LABELS),
            dimension_band_low: g("octant_dimension_band_low", "Lower end of the dimension band interval", &DIMENSION_LABELS),
            dimension_band_high: g("octant_dimension_band_high", "Upper end of the dimension band interval", &DIMENSION_LABELS),
            not_applicable: g(
                "octant_metric_not_applicable",
                "1 when the metric's latest window is N/A, with the reason (insufficient_evidence, void, undefined, unconfigured); absent when banded",
                &NA_LABELS,
            ),
            veto_state: g(
                "octant_veto_state",
                "The window's veto verdict: 0 clear, 1 at risk, 2 breached, 3 confirmed; -1 no verdict (the metric is N/A: below its minimum evidence, void or undefined)",
                &VETO_LABELS,
            ),
            veto_evidence: g(
                "octant_veto_evidence_log_e",
                "ln of the sequential e-detector of a vetoed rate (confirmed at ln(1/alpha), 6.91 at the default alpha 1e-3); absent without a verdict",
                &VETO_LABELS,
            ),
            unsuitable: g(
                "octant_system_unsuitable",
                "1 when the unsafe-action veto flags the system unsuitable",
                &["system", "version", "source"],
            ),
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(m.observations.clone()),
            Box::new(m.windows_emitted.clone()),
            Box::new(m.profiles_emitted.clone()),
            Box::new(m.dead_letters.clone()),
            Box::new(m.series.clone()),
            Box::new(m.watermark.clone()),
            Box::new(m.upstream_waiting.clone()),
            Box::new(m.upstream_idle.clone()),
            Box::new(m.estimate.clone()),
            Box::new(m.ci_low.clone()),
            Box::new(m.ci_high.clone()),
            Box::new(m.band.clone()),
            Box::new(m.units.clone()),
            Box::new(m.dimension_band.clone()),
            Box::new(m.dimension_band_low.clone()),
            Box::new(m.dimension_band_high.clone()),
            Box::new(m.not_applicable.clone()),
            Box::new(m.veto_state.clone()),
            Box::new(m.veto_evidence.clone()),
            Box::new(m.unsuitable.clone()),
        ];
        for c in collectors {
            registry.register(c).expect("aggregator metrics registered once per registry");
        }
        m
    }
}
