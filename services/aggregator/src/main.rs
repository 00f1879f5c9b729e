//! `octant-aggregator`: the aggregator as its own process.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_aggregator::ID,
        "Octant aggregator: observations in, windows, intervals, bands and profiles out",
        &["evaluation", "redaction"],
        octant_aggregator::run,
    )
}
