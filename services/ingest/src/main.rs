//! `octant-ingest`: the ingest as its own process.

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_ingest::ID,
        "Octant ingest: OpenTelemetry traces and logs in, trajectory events out",
        &["redaction"],
        octant_ingest::run,
    )
}
