//! `octant-scorer`: the scorer as its own process.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(version, about = "Octant scorer: trajectory events in, observations out")]
struct Args {
    /// TOML configuration file; OCTANT_SCORER__* environment variables override it.
    #[arg(long, env = "OCTANT_SCORER_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    octant_runtime::shutdown::init_tracing("info");
    let config: octant_scorer::ScorerConfig =
        octant_runtime::config::load(args.config.as_deref(), "OCTANT_SCORER").context("failed to load configuration")?;
    tracing::info!(?config, "configuration");
    let shutdown = tokio_util::sync::CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), Duration::from_secs(30));
    octant_scorer::run(config, prometheus::Registry::new(), shutdown).await
}
