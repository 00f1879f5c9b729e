//! The lake writer's Prometheus metrics (`octant_lake_writer_*`; labels bounded: table, topic,
//! kind).

use octant_runtime::metrics::Register;
use prometheus::{Histogram, IntCounterVec, IntGaugeVec, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub records: IntCounterVec,
    pub files: IntCounterVec,
    pub skipped: IntCounterVec,
    pub flush_seconds: Histogram,
    pub errors: IntCounterVec,
    pub buffered: IntGaugeVec,
    pub compacted: IntCounterVec,
    pub consumer_lag: IntGaugeVec,
}

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        let r = Register::new(registry);
        Metrics {
            records: r.counters("octant_lake_writer_records_total", "Records written to the lake, by table", &["table"]),
            files: r.counters("octant_lake_writer_files_total", "Parquet files published, by table", &["table"]),
            skipped: r.counters(
                "octant_lake_writer_skipped_total",
                "Records read again after a restart and skipped (already in the lake), by topic",
                &["topic"],
            ),
            flush_seconds: r.histogram(
                "octant_lake_writer_flush_seconds",
                "Time to write and publish one unit",
                &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0],
            ),
            errors: r.counters("octant_lake_writer_errors_total", "Failed unit writes (retried), by kind", &["kind"]),
            compacted: r.counters(
                "octant_lake_writer_compacted_files_total",
                "Small files of the writer's own partitions merged by background compaction, by table",
                &["table"],
            ),
            buffered: r.gauges("octant_lake_writer_buffered_records", "Records buffered, not yet in the lake, by topic", &["topic"]),
            consumer_lag: r.consumer_lag("lake_writer"),
        }
    }
}
