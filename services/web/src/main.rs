//! `octant-web`: the web view as its own process.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_web::ID,
        "Octant web view: fleet, system, alert, run and profile pages over the lake (read only)",
        &["evaluation"],
        octant_web::run,
    )
}
