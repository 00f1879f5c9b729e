//! `octant-scorer`: the scorer as its own process.

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_scorer::ID,
        "Octant scorer: trajectory events in, observations out",
        &["evaluation", "redaction"],
        octant_scorer::run,
    )
}
