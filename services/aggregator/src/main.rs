//! `octant-aggregator`: the aggregator as its own process.

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_aggregator::ID,
        "Octant aggregator: observations in, windows, intervals, bands and profiles out",
        &["evaluation", "redaction"],
        octant_aggregator::run,
    )
}
