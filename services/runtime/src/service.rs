//! What every service has, written once: its identity, the settings every streaming service
//! shares ([`StreamSettings`], flattened into each service's configuration), the admin server
//! and readiness at start-up, the handle a started service returns ([`Running`]), and the
//! process `main` of every service binary ([`main`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, Health};
use crate::config::KafkaConfig;
use crate::pipeline::LoopConfig;

/// A service's identity: its name in metrics and logs, its environment prefix, its default
/// consumer group and admin port.
#[derive(Debug, Clone, Copy)]
pub struct ServiceId {
    /// `scorer`, `aggregator`, `alerter`, `lake_writer`, `profiler`.
    pub name: &'static str,
    /// Environment prefix of its configuration, e.g. `OCTANT_SCORER`.
    pub env: &'static str,
    /// Default consumer group.
    pub group: &'static str,
    /// Default admin port (on 127.0.0.1).
    pub admin_port: u16,
}

/// Settings of every service that consumes a topic in a group (flattened into its
/// configuration: `kafka`, `group_id`, `admin_addr`, `commit_interval`, `max_inflight` are
/// top-level keys).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamSettings {
    #[serde(default)]
    pub kafka: KafkaConfig,
    /// Consumer group; every instance of one deployment shares it (default: the service's,
    /// e.g. `octant-scorer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Admin server (`/metrics`, `/healthz`, `/readyz`); port 0 picks one. Default: loopback,
    /// the service's own port (scorer 9101 … profiler 9105).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_addr: Option<SocketAddr>,
    /// How often safe offsets are committed.
    #[serde(default = "crate::pipeline::default_commit_interval", with = "humantime_serde")]
    pub commit_interval: Duration,
    /// Messages read but not yet acknowledged before reading pauses (back-pressure).
    #[serde(default = "crate::pipeline::default_max_inflight")]
    pub max_inflight: usize,
}

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings {
            kafka: KafkaConfig::default(),
            group_id: None,
            admin_addr: None,
            commit_interval: crate::pipeline::default_commit_interval(),
            max_inflight: crate::pipeline::default_max_inflight(),
        }
    }
}

impl StreamSettings {
    pub fn group_id(&self, id: &ServiceId) -> String {
        self.group_id.clone().unwrap_or_else(|| id.group.to_string())
    }

    pub fn admin_addr(&self, id: &ServiceId) -> SocketAddr {
        self.admin_addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], id.admin_port)))
    }

    pub fn loop_config(&self) -> LoopConfig {
        LoopConfig { commit_interval: self.commit_interval, max_inflight: self.max_inflight }
    }

    /// The checks every streaming service makes; the message names the setting.
    pub fn check(&self, id: &ServiceId) -> Result<(), String> {
        if self.kafka.brokers.is_empty() {
            return Err(format!("kafka.brokers is empty (set {}__KAFKA__BROKERS)", id.env));
        }
        if self.max_inflight == 0 {
            return Err("max_inflight must be at least 1".into());
        }
        if self.commit_interval.is_zero() {
            return Err("commit_interval must be positive".into());
        }
        Ok(())
    }
}

/// A started service: where its admin server listens, the task running it (it ends when the
/// shutdown token is cancelled, after draining, or on a fatal error), its readiness, and what
/// else the service hands out (`X`, its feed for in-process viewers: the aggregator's
/// profile updates, the alerter's alerts).
pub struct Running<X = ()> {
    pub admin_addr: SocketAddr,
    pub task: JoinHandle<anyhow::Result<()>>,
    pub health: Arc<Health>,
    pub feed: X,
}

/// Binds the admin server of `id` at `addr` with `registry` and `health` (and `routes`, a
/// service's own HTTP API) until `shutdown`; returns the bound address.
pub async fn serve_admin(
    id: &ServiceId,
    addr: SocketAddr,
    registry: prometheus::Registry,
    health: Arc<Health>,
    routes: Option<axum::Router>,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let mut router = admin::router(id.name, registry, health);
    if let Some(r) = routes {
        router = router.merge(r);
    }
    let (bound, _task) = admin::serve(addr, router, shutdown)
        .await
        .map_err(|e| anyhow::anyhow!("failed to start the {}'s admin server: {e}", id.name.replace('_', " ")))?;
    Ok(bound)
}

/// The start every streaming service shares once its stage is built: readiness, the admin
/// server, the producer, the group consumer on `inputs` (with the stage's lag gauge), and the
/// consume loop until `shutdown`. `prepare` sees the stage and the group's shared state before
/// the loop starts (the alerter reads its history again on each assignment). A service is its
/// configuration, its stage and one call of this.
#[allow(clippy::too_many_arguments)]
pub async fn start_stage<S: crate::pipeline::Stage>(
    id: &ServiceId,
    stream: &StreamSettings,
    registry: prometheus::Registry,
    inputs: &[&str],
    lag: prometheus::IntGaugeVec,
    mut stage: S,
    prepare: impl FnOnce(&mut S, &Arc<crate::consumer::GroupShared>),
    shutdown: CancellationToken,
) -> anyhow::Result<Running> {
    let health = admin::Health::new();
    let admin_addr = serve_admin(id, stream.admin_addr(id), registry, health.clone(), None, shutdown.clone()).await?;
    let producer = crate::pipeline::producer(&stream.kafka, id.name)?;
    let (consumer, shared) = crate::consumer::group_consumer(&stream.kafka, id.name, &stream.group_id(id), inputs, lag)?;
    prepare(&mut stage, &shared);
    let task = tokio::spawn(crate::pipeline::run(stage, consumer, shared, producer, health.clone(), stream.loop_config(), shutdown));
    tracing::info!(%admin_addr, inputs = ?inputs, "{} started", id.name.replace('_', " "));
    Ok(Running { admin_addr, task, health, feed: () })
}

impl Running {
    /// The same service handing out `feed` (its stream for in-process viewers).
    pub fn with_feed<X>(self, feed: X) -> Running<X> {
        Running { admin_addr: self.admin_addr, task: self.task, health: self.health, feed }
    }
}

/// The `main` of a service binary: `--config FILE` (or `<ENV>_CONFIG`), environment overrides
/// (`<ENV>__…`, and `OCTANT_<SECTION>__…` for `shared` sections), structured logs, SIGTERM and
/// Ctrl-C draining, then `run`.
pub fn main<C, F, Fut>(id: &ServiceId, about: &'static str, shared: &[&str], run: F) -> anyhow::Result<()>
where
    C: Serialize + DeserializeOwned + std::fmt::Debug,
    F: FnOnce(C, prometheus::Registry, CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let args = clap::Command::new(format!("octant-{}", id.name.replace('_', "-")).leak() as &'static str)
        .version(env!("CARGO_PKG_VERSION"))
        .about(about)
        .arg(
            clap::Arg::new("config")
                .long("config")
                .env(format!("{}_CONFIG", id.env).leak() as &'static str)
                .value_parser(clap::value_parser!(std::path::PathBuf))
                .help(format!("TOML configuration file; {}__* environment variables override it", id.env)),
        )
        .get_matches();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        crate::shutdown::init_tracing("info");
        let path = args.get_one::<std::path::PathBuf>("config");
        let config: C = crate::config::load_with_shared(path.map(|p| p.as_path()), id.env, shared)
            .map_err(|e| anyhow::anyhow!("failed to load configuration: {e}"))?;
        tracing::info!(?config, "configuration");
        let shutdown = CancellationToken::new();
        crate::shutdown::on_signals(shutdown.clone(), Duration::from_secs(30));
        run(config, prometheus::Registry::new(), shutdown).await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: ServiceId = ServiceId { name: "scorer", env: "OCTANT_SCORER", group: "octant-scorer", admin_port: 9101 };

    #[test]
    fn defaults_and_checks() {
        let mut s = StreamSettings::default();
        assert_eq!(s.group_id(&ID), "octant-scorer");
        assert_eq!(s.admin_addr(&ID).to_string(), "127.0.0.1:9101", "loopback unless configured");
        assert_eq!(s.check(&ID).unwrap_err(), "kafka.brokers is empty (set OCTANT_SCORER__KAFKA__BROKERS)");
        s.kafka.brokers = "k:9092".into();
        s.check(&ID).unwrap();
        s.max_inflight = 0;
        assert!(s.check(&ID).is_err());
    }
}
