//! `octant-scorer`: the scorer as its own process.

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_scorer::ID,
        "Octant scorer: trajectory events in, observations out",
        &["evaluation"],
        octant_scorer::run,
    )
}
