//! `octant-lake-writer`: the lake writer as its own process.

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_lake_writer::ID,
        "Octant lake writer: every topic into a Hive-partitioned Parquet lake, exactly once",
        &["redaction"],
        octant_lake_writer::run,
    )
}
