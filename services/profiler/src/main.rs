//! `octant-profiler`: the profiler as its own process.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_profiler::ID,
        "Octant profiler: periodic eight-dimension profiles and evidence packages from the lake",
        &["evaluation"],
        octant_profiler::run,
    )
}
