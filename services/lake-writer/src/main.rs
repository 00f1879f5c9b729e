//! `octant-lake-writer`: the lake writer as its own process.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_lake_writer::ID,
        "Octant lake writer: every topic into a Hive-partitioned Parquet lake, exactly once",
        &["redaction"],
        octant_lake_writer::run,
    )
}
