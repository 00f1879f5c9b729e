//! The lake writer as a separate process, for tests that kill it with SIGKILL. Configured from
//! `OCTANT_LAKE_WRITER__*` environment variables, like the real binary.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    octant_runtime::shutdown::init_tracing("warn");
    let config: octant_lake_writer::LakeWriterConfig = octant_runtime::config::load(None, "OCTANT_LAKE_WRITER")?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), std::time::Duration::from_secs(30));
    octant_lake_writer::run(config, prometheus::Registry::new(), shutdown).await
}
