//! `octant-profiler`: the profiler as its own process.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(version, about = "Octant profiler: periodic eight-dimension profiles and evidence packages from the lake")]
struct Args {
    /// TOML configuration file; OCTANT_PROFILER__* environment variables override it.
    #[arg(long, env = "OCTANT_PROFILER_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    octant_runtime::shutdown::init_tracing("info");
    let config: octant_profiler::ProfilerConfig =
        octant_runtime::config::load(args.config.as_deref(), "OCTANT_PROFILER").context("failed to load configuration")?;
    tracing::info!(?config, "configuration");
    let shutdown = tokio_util::sync::CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), Duration::from_secs(30));
    octant_profiler::run(config, prometheus::Registry::new(), shutdown).await
}
