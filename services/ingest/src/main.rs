//! `octant-ingest`: the ingest as its own process.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_ingest::ID,
        "Octant ingest: OpenTelemetry traces and logs in, trajectory events out",
        &["redaction"],
        octant_ingest::run,
    )
}
