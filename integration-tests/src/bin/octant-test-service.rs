//! One Octant service as a separate process, for tests that scale a consumer group out and
//! back and kill instances with SIGKILL: `octant-test-service <service> [config.toml]`, with
//! the service's `OCTANT_<SERVICE>__*` environment variables over the file, like the real
//! binaries. SIGTERM stops it gracefully.

use std::path::PathBuf;

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
    // Like the real binaries: the shared sections from their own files and variables too.
    let shared: &[&str] = match service.as_str() {
        "scorer" | "aggregator" => &["evaluation", "redaction"],
        "profiler" => &["evaluation"],
        _ => &["redaction"],
    };
    fn load<C: serde::de::DeserializeOwned + serde::Serialize>(
        path: Option<&std::path::Path>,
        prefix: &str,
        shared: &[&str],
    ) -> anyhow::Result<C> {
        Ok(octant_runtime::config::load_with_shared(path, prefix, shared)?)
    }
    match service.as_str() {
        "scorer" => octant_scorer::run(load(path, "OCTANT_SCORER", shared)?, r, shutdown).await,
        "aggregator" => octant_aggregator::run(load(path, "OCTANT_AGGREGATOR", shared)?, r, shutdown).await,
        "alerter" => octant_alerter::run(load(path, "OCTANT_ALERTER", shared)?, r, shutdown).await,
        "lake_writer" => octant_lake_writer::run(load(path, "OCTANT_LAKE_WRITER", shared)?, r, shutdown).await,
        "profiler" => octant_profiler::run(load(path, "OCTANT_PROFILER", shared)?, r, shutdown).await,
        "ingest" => octant_ingest::run(load(path, "OCTANT_INGEST", shared)?, r, shutdown).await,
        other => anyhow::bail!("unknown service {other:?} (scorer, aggregator, alerter, lake_writer, profiler, ingest)"),
    }
}
