//! `octant-profiler`: the profiler as its own process.

fn main() -> anyhow::Result<()> {
    octant_runtime::service::main(
        &octant_profiler::ID,
        "Octant profiler: periodic eight-dimension profiles and evidence packages from the lake",
        &["evaluation"],
        octant_profiler::run,
    )
}
