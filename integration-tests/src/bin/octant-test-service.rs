//! One Octant service as a separate process, for tests that scale a consumer group out and
//! back and kill instances with SIGKILL: `octant-test-service <service> [config.toml]`, with
//! the service's `OCTANT_<SERVICE>__*` environment variables over the file, like the real
//! binaries. SIGTERM stops it gracefully.

use std::path::PathBuf;

use octant_runtime::config::load;
use prometheus::Registry;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    octant_runtime::shutdown::init_tracing("warn");
    let mut args = std::env::args().skip(1);
    let service = args.next().unwrap_or_default();
    let path = args.next().map(PathBuf::from);
    let path = path.as_deref();
    let shutdown = CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), std::time::Duration::from_secs(30));
    let r = Registry::new();
    match service.as_str() {
        "scorer" => octant_scorer::run(load(path, "OCTANT_SCORER")?, r, shutdown).await,
        "aggregator" => octant_aggregator::run(load(path, "OCTANT_AGGREGATOR")?, r, shutdown).await,
        "alerter" => octant_alerter::run(load(path, "OCTANT_ALERTER")?, r, shutdown).await,
        "lake_writer" => octant_lake_writer::run(load(path, "OCTANT_LAKE_WRITER")?, r, shutdown).await,
        "profiler" => octant_profiler::run(load(path, "OCTANT_PROFILER")?, r, shutdown).await,
        "ingest" => octant_ingest::run(load(path, "OCTANT_INGEST")?, r, shutdown).await,
        other => anyhow::bail!("unknown service {other:?} (scorer, aggregator, alerter, lake_writer, profiler, ingest)"),
    }
}
