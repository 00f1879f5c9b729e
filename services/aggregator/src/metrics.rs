//! The aggregator's Prometheus metrics: pipeline counters (`octant_aggregator_*`) and the
//! evaluation gauges operators chart and alert on (`octant_metric_*`, `octant_dimension_band`,
//! `octant_veto_state`, `octant_system_unsuitable`). Labels are bounded: system, version,
//! source, metric, dimension, benchmark, rule, and for the `octant_metric_slice_*` gauges
//! slice kind and a bounded slice (agent or task family) — never a run id.

use octant_runtime::metrics::Register;
use prometheus::{GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

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
    pub slice_estimate: GaugeVec,
    pub slice_ci_low: GaugeVec,
    pub slice_ci_high: GaugeVec,
    pub slice_band: GaugeVec,
    pub slice_units: GaugeVec,
}

pub const METRIC_LABELS: [&str; 6] = ["system", "version", "source", "metric", "dimension", "benchmark"];
pub const DIMENSION_LABELS: [&str; 4] = ["system", "version", "source", "dimension"];
pub const NA_LABELS: [&str; 7] = ["system", "version", "source", "metric", "dimension", "benchmark", "reason"];
/// A diagnostic slice (`slice_kind` agent or task_family): at most `[slices] max_values` + 1
/// slices per (system, version, source, kind), so per sliced metric.
pub const SLICE_LABELS: [&str; 7] = ["system", "version", "source", "metric", "dimension", "slice_kind", "slice"];
pub const VETO_LABELS: [&str; 5] = ["system", "version", "source", "rule", "benchmark"];

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let r = Register::new(registry);
        let g = |name: &str, help: &str, labels: &[&str]| r.values(name, help, labels);
        Metrics {
            observations: r.counters(
                "octant_aggregator_observations_total",
                "Observations read, by outcome (accepted, duplicate, late, unknown, derived, undecodable)",
                &["outcome"],
            ),
            windows_emitted: r.counter("octant_aggregator_windows_emitted_total", "Metric windows published"),
            profiles_emitted: r.counter("octant_aggregator_profiles_emitted_total", "Rolling dimension profiles published"),
            dead_letters: r.counters(
                "octant_aggregator_dead_letters_total",
                "Observations dead-lettered, by error class",
                &["error_class"],
            ),
            series: r.gauge("octant_aggregator_series", "Series (system × version × source × metric × benchmark) with window state"),
            watermark: g(
                "octant_aggregator_watermark_seconds",
                "Event-time watermark of an input partition (minimum over upstream partitions), Unix seconds",
                &["partition"],
            ),
            upstream_waiting: r.gauge(
                "octant_aggregator_upstream_waiting",
                "Upstream (scorer input) partitions not heard from yet, summed over input partitions: windows wait for them",
            ),
            upstream_idle: r.gauge(
                "octant_aggregator_upstream_idle",
                "Upstream partitions announced idle (left out of the watermark), summed over input partitions",
            ),
            consumer_lag: r.consumer_lag("aggregator"),
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
            slice_estimate: g(
                "octant_metric_slice_estimate",
                "Point estimate of a metric over the latest window, for one agent or task family (absent when N/A); never vetoed",
                &SLICE_LABELS,
            ),
            slice_ci_low: g("octant_metric_slice_ci_low", "Lower end of a slice's interval (absent when N/A)", &SLICE_LABELS),
            slice_ci_high: g("octant_metric_slice_ci_high", "Upper end of a slice's interval (absent when N/A)", &SLICE_LABELS),
            slice_band: g("octant_metric_slice_band", "Band 0..4 of a slice (absent when N/A)", &SLICE_LABELS),
            slice_units: g("octant_metric_slice_units", "Units behind a slice's latest window", &SLICE_LABELS),
        }
    }
}
