//! The web view's Prometheus metrics (`octant_web_*`). The page label is the route (`/systems/{system}`),
//! never the address asked for: it stays bounded.

use octant_runtime::metrics::Register;
use prometheus::{HistogramVec, IntCounter, IntCounterVec, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub requests: IntCounterVec,
    pub seconds: HistogramVec,
    pub cache_hits: IntCounter,
    pub cache_misses: IntCounter,
}

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let r = Register::new(registry);
        let cache = r.counters(
            "octant_web_lake_reads_total",
            "Page reads of the lake, by whether the cache held them (hit) or the lake was queried (miss)",
            &["result"],
        );
        Metrics {
            requests: r.counters("octant_web_requests_total", "Requests answered, by route and status code", &["route", "code"]),
            seconds: r.histograms(
                "octant_web_request_seconds",
                "Time to answer a request, by route",
                &["route"],
                &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0],
            ),
            cache_hits: cache.with_label_values(&["hit"]),
            cache_misses: cache.with_label_values(&["miss"]),
        }
    }
}
