//! `octant-alerter`: the alerter as its own process.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_alerter::ID,
        "Octant alerter: veto alerts with hysteresis and single-action incidents, to Kafka and Alertmanager",
        &["evaluation", "redaction"],
        octant_alerter::run,
    )
}
