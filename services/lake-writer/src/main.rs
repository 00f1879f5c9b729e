//! `octant-lake-writer`: the lake writer as its own process.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(version, about = "Octant lake writer: every topic into a Hive-partitioned Parquet lake, exactly once")]
struct Args {
    /// TOML configuration file; OCTANT_LAKE_WRITER__* environment variables override it.
    #[arg(long, env = "OCTANT_LAKE_WRITER_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    octant_runtime::shutdown::init_tracing("info");
    let config: octant_lake_writer::LakeWriterConfig =
        octant_runtime::config::load(args.config.as_deref(), "OCTANT_LAKE_WRITER").context("failed to load configuration")?;
    tracing::info!(?config, "configuration");
    let shutdown = tokio_util::sync::CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), Duration::from_secs(30));
    octant_lake_writer::run(config, prometheus::Registry::new(), shutdown).await
}
