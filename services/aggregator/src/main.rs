//! `octant-aggregator`: the aggregator as its own process.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(version, about = "Octant aggregator: observations in, windows, intervals, bands and profiles out")]
struct Args {
    /// TOML configuration file; OCTANT_AGGREGATOR__* environment variables override it.
    #[arg(long, env = "OCTANT_AGGREGATOR_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    octant_runtime::shutdown::init_tracing("info");
    let config: octant_aggregator::AggregatorConfig =
        octant_runtime::config::load(args.config.as_deref(), "OCTANT_AGGREGATOR").context("failed to load configuration")?;
    tracing::info!(?config, "configuration");
    let shutdown = tokio_util::sync::CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), Duration::from_secs(30));
    octant_aggregator::run(config, prometheus::Registry::new(), shutdown).await
}
