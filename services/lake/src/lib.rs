//! # octant-lake
//!
//! The lake's format, written once and used by the lake writer (which writes it), the profiler
//! and the `octant` command (which read it):
//! - [`schema`]: the tables, which records go where, their Arrow schemas derived from the
//!   Avro contracts;
//! - [`layout`]: where files go (`<table>/date=…/`, file names made of topic, partition and
//!   offsets) and the Parquet settings;
//! - [`delta`]: every table is a Delta Lake table: its log, transaction identifiers per input
//!   partition, fencing;
//! - [`lake`]: the lake, local or on an object store, and the exactly-once protocol (units
//!   committed table by table, the topic's home table last);
//! - [`store`]: where a lake is (a directory, S3 and compatible stores) and its options;
//! - [`committed`]: what Octant's reader sees — each table's committed files only;
//! - [`reader`]: the lake as a DataFusion catalogue (every table registered by name), SQL and
//!   rendering.
//!
//! Any engine that reads Delta tables reads the lake (DuckDB's delta extension, Spark, Trino,
//! PyPI `deltalake`); this crate is Octant's own reader.

pub mod committed;
pub mod delta;
pub mod lake;
pub mod layout;
pub mod maintain;
pub mod migrate;
pub mod reader;
pub mod schema;
pub mod store;

pub use lake::Lake;
pub use store::StorageOptions;

/// The UTC date (`YYYY-MM-DD`) of an epoch-ms time: the `date` partition value.
pub fn date_of(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(1_709_164_800_000), "2024-02-29");
        assert_eq!(date_of(1_709_251_199_999), "2024-02-29");
        assert_eq!(date_of(1_709_251_200_000), "2024-03-01");
    }
}
