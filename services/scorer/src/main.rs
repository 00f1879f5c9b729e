//! `octant-scorer`: the scorer as its own process.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_scorer::ID,
        "Octant scorer: trajectory events in, observations out",
        &["evaluation", "redaction"],
        octant_scorer::run,
    )
}
