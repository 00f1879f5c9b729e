//! Metric registration, written once: every constructor creates a metric and registers it in
//! the registry at once, so a metric declared in a service's `metrics.rs` cannot be forgotten
//! at registration. Names follow `octant_<service>_<name>_<unit>[_total]`; labels must be
//! bounded (system id yes, run id never).

use prometheus::core::Collector;
use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

/// Registers the metrics it creates in one registry.
pub struct Register<'a> {
    registry: &'a Registry,
}

impl<'a> Register<'a> {
    pub fn new(registry: &'a Registry) -> Self {
        Register { registry }
    }

    fn add<C: Collector + Clone + 'static>(&self, c: C) -> C {
        if let Err(e) = self.registry.register(Box::new(c.clone())) {
            panic!("a metric is registered twice in one registry (a service started twice on it?): {e}");
        }
        c
    }

    pub fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.add(IntCounter::new(name, help).expect("valid metric"))
    }

    pub fn counters(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.add(IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help).expect("valid metric"))
    }

    pub fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub fn value(&self, name: &str, help: &str) -> Gauge {
        self.add(Gauge::new(name, help).expect("valid metric"))
    }

    pub fn values(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        self.add(GaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> Histogram {
        self.add(Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec())).expect("valid metric"))
    }

    pub fn histograms(&self, name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
        self.add(HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels).expect("valid metric"))
    }

    /// The consumer-lag gauge of a service (`octant_<service>_consumer_lag_messages`).
    pub fn consumer_lag(&self, service: &str) -> IntGaugeVec {
        crate::consumer::lag_gauge(self.registry, service)
    }
}

/// Buckets for processing latencies (seconds), from 1 ms to 10 s.
pub const LATENCY_BUCKETS: [f64; 13] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Every sample of a text exposition (`/metrics`), keyed as it is written there
/// (`name{label="value",…}`); comments and unparsable lines are skipped.
pub fn parse_exposition(text: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Every sample of `registry` as `/metrics` would show it (see [`parse_exposition`]): what a
/// test of a stage driven in-process reads instead of scraping.
pub fn samples(registry: &Registry) -> std::collections::BTreeMap<String, f64> {
    let text = prometheus::TextEncoder::new().encode_to_string(&registry.gather()).expect("metrics encode");
    parse_exposition(&text)
}

/// Sum of every series of `name` (all label sets) in `samples`.
pub fn total(samples: &std::collections::BTreeMap<String, f64>, name: &str) -> f64 {
    samples.iter().filter(|(k, _)| *k == name || k.starts_with(&format!("{name}{{"))).map(|(_, v)| v).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_metrics_are_registered() {
        let registry = Registry::new();
        let r = Register::new(&registry);
        r.counters("octant_test_things_total", "things", &["kind"]).with_label_values(&["a"]).inc();
        r.value("octant_test_level", "level").set(2.5);
        let names: Vec<String> = registry.gather().iter().map(|f| f.name().to_string()).collect();
        assert_eq!(names, ["octant_test_level", "octant_test_things_total"]);
        let m = samples(&registry);
        assert_eq!(m.get("octant_test_things_total{kind=\"a\"}"), Some(&1.0));
        assert_eq!(total(&m, "octant_test_level"), 2.5);
    }
}
