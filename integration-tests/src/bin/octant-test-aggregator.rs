//! The aggregator as a separate process, for tests that kill it with SIGKILL. Configured from
//! `OCTANT_AGGREGATOR__*` environment variables, like the real binary.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    octant_runtime::shutdown::init_tracing("warn");
    let config: octant_aggregator::AggregatorConfig = octant_runtime::config::load(None, "OCTANT_AGGREGATOR")?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), std::time::Duration::from_secs(30));
    octant_aggregator::run(config, prometheus::Registry::new(), shutdown).await
}
