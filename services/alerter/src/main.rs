//! `octant-alerter`: the alerter as its own process.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(version, about = "Octant alerter: veto alerts with hysteresis and single-action incidents, to Kafka and Alertmanager")]
struct Args {
    /// TOML configuration file; OCTANT_ALERTER__* environment variables override it.
    #[arg(long, env = "OCTANT_ALERTER_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    octant_runtime::shutdown::init_tracing("info");
    let config: octant_alerter::AlerterConfig =
        octant_runtime::config::load(args.config.as_deref(), "OCTANT_ALERTER").context("failed to load configuration")?;
    tracing::info!(?config, "configuration");
    let shutdown = tokio_util::sync::CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), Duration::from_secs(30));
    octant_alerter::run(config, prometheus::Registry::new(), shutdown).await
}
