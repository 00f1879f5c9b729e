//! `octant-profiler`: on a schedule (`every`) and on demand, runs the report library
//! (`octant_report::run`) over the lake for each declared period (default the last 24 h and
//! 7 d), publishes every profile to `octant.profiles` and writes its evidence package, which
//! the web view (`octant-web`) serves.
//!
//! HTTP, on the admin address next to `/metrics`, `/healthz`, `/readyz`: `POST /run` runs now
//! (answers when done, with the number of profiles built); with tokens set it takes an
//! operator's bearer token (a viewer's gets 403; wrong tokens are throttled).

pub mod config;
pub mod metrics;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use octant_contracts::codec::to_single_object;
use octant_contracts::topics;
use octant_report::pane_store::HOUR_MS;
use octant_runtime::access::{Access, Refused, Role};
use octant_runtime::admin::Health;
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::service::{self, ServiceId};
use prometheus::Registry;
use rdkafka::producer::FutureProducer;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

pub use config::ProfilerConfig;
use metrics::Metrics;
pub use octant_report::{Built, Period};

pub const ID: ServiceId = ServiceId { name: "profiler", env: "OCTANT_PROFILER", group: "octant-profiler", admin_port: 9105 };

/// A started profiler.
pub type Running = service::Running;

/// The periods of a run ending at `now`.
pub fn periods(cfg: &ProfilerConfig, now: i64) -> Vec<Period> {
    cfg.periods
        .iter()
        .map(|d| Period { name: octant_report::config::period_name(*d), start: now - d.as_millis() as i64, end: now })
        .collect()
}

/// One run: every period's profiles, built and written as evidence packages under
/// `cfg.evidence`. The returned records carry their package directory in `evidence_uri`.
pub async fn run_once(cfg: &ProfilerConfig, periods: &[Period], system: Option<&str>, now: i64) -> anyhow::Result<Vec<Built>> {
    octant_report::run(&cfg.report, &cfg.evidence, periods, system, now).await
}

/// Runs whose re-run this profiler requested: run id → (reason, when sent). Kept an hour, which
/// the lake writer needs far less than to archive them (the draw then reads the lake's copy).
type Sent = std::collections::BTreeMap<String, (String, i64)>;

struct Runner {
    cfg: ProfilerConfig,
    producer: Option<FutureProducer>,
    metrics: Metrics,
    health: Arc<Health>,
    /// One run at a time (scheduled and on-demand runs queue here); it holds the runs whose
    /// re-run this profiler requested (the lake's `rerun_requests` may not hold them yet).
    lock: Mutex<Sent>,
}

impl Runner {
    async fn run(&self) -> anyhow::Result<usize> {
        let mut sent = self.lock.lock().await;
        let t0 = Instant::now();
        let now = octant_runtime::dlq::now_ms();
        let result = run_once(&self.cfg, &periods(&self.cfg, now), None, now).await;
        self.metrics.run_seconds.observe(t0.elapsed().as_secs_f64());
        let built = match result {
            Ok(b) => b,
            Err(e) => {
                self.metrics.runs.with_label_values(&["error"]).inc();
                return Err(e);
            }
        };
        self.count(&built);
        if let Some(p) = &self.producer {
            for b in &built {
                let rec = OutRecord {
                    topic: self.cfg.kafka.topic(topics::PROFILES),
                    partition: None,
                    key: b.record.system_id.clone(),
                    payload: to_single_object(&b.record).context("profile does not encode")?,
                };
                kafka::send(p, &rec).await.map_err(|e| anyhow::anyhow!("publishing profile {} failed: {e}", b.record.profile_id))?;
            }
        }
        if let Some(p) = &self.producer {
            // Profiles are built and published: a re-run draw that fails is logged, retried at
            // the next run, and does not fail this one.
            if let Err(e) = self.request_reruns(p, &mut sent, now).await {
                self.metrics.rerun_errors.inc();
                tracing::warn!(error = %format!("{e:#}"), "re-run requests not all published; the rest are drawn again next run");
            }
        }
        let n = built.len();
        self.metrics.runs.with_label_values(&["ok"]).inc();
        self.metrics.profiles.set(n as i64);
        self.metrics.last_success.set(octant_runtime::dlq::now_ms() as f64 / 1000.0);
        self.health.set_ready(true, format!("{n} profiles"));
        tracing::info!(profiles = n, seconds = t0.elapsed().as_secs_f64(), "profile run done");
        Ok(n)
    }

    /// Independent re-runs (`[reruns]`): each period's draw, published on `octant.reruns` for
    /// the harnesses that own the runs.
    async fn request_reruns(&self, p: &FutureProducer, sent: &mut Sent, now: i64) -> anyhow::Result<()> {
        sent.retain(|_, (_, at)| now - *at < 3_600_000);
        let known = sent.iter().map(|(run, (reason, _))| (run.clone(), reason.clone())).collect();
        let requests = octant_report::draw_reruns(&self.cfg.report, &periods(&self.cfg, now), &known, now).await?;
        for r in &requests {
            let rec = OutRecord {
                topic: self.cfg.kafka.topic(topics::RERUNS),
                partition: None,
                key: r.run_id.clone(),
                payload: to_single_object(r).context("re-run request does not encode")?,
            };
            kafka::send(p, &rec).await.map_err(|e| anyhow::anyhow!("publishing the re-run request of {} failed: {e}", r.run_id))?;
            // Remembered once sent: the lake's copy may not be written yet at the next run.
            sent.insert(r.run_id.clone(), (r.reason.clone(), now));
            self.metrics.rerun_requests.with_label_values(&[&r.reason]).inc();
        }
        if !requests.is_empty() {
            tracing::info!(requests = requests.len(), "re-run requests published");
        }
        Ok(())
    }

    /// Observations and hours the run covered, per period.
    fn count(&self, built: &[Built]) {
        let mut counted = BTreeSet::new();
        let mut flagged = std::collections::BTreeMap::new();
        for b in built {
            self.metrics.observations.with_label_values(&[&b.period.name]).inc_by(b.observations.rows);
            if let Some(c) = b.reruns.as_ref().filter(|c| c.tested()) {
                // A system's versions share the series: flagged when any of them is.
                let f = flagged.entry((c.system.clone(), b.period.name.clone())).or_insert(false);
                *f |= c.flagged();
            }
            if counted.insert(b.period.name.clone()) {
                let hours = ((b.period.end - 1).div_euclid(HOUR_MS) - b.period.start.div_euclid(HOUR_MS) + 1) as u64;
                let stored = b.hours_from_store as u64;
                self.metrics.hours.with_label_values(&[&b.period.name, "store"]).inc_by(stored);
                self.metrics.hours.with_label_values(&[&b.period.name, "observations"]).inc_by(hours - stored);
            }
        }
        // Only this run's checks: a system whose re-runs left the period has no series.
        self.metrics.reruns_flagged.reset();
        for ((system, period), f) in flagged {
            self.metrics.reruns_flagged.with_label_values(&[&system, &period]).set(i64::from(f));
        }
    }
}

#[derive(Clone)]
struct AppState {
    runner: Arc<Runner>,
    /// `None`: no tokens set.
    access: Option<Access>,
    /// Without tokens, runs over HTTP are only taken on a loopback address.
    open_run: bool,
}

/// `POST /run`: runs now, for an operator's bearer token when tokens are set; without tokens
/// only on a loopback address. Never for another site's page (a browser's cross-site POST
/// carries `Origin` or `Sec-Fetch-Site`): no web page makes the profiler run.
async fn run_now(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let value = |h: &str| headers.get(h).and_then(|v| v.to_str().ok());
    let from_a_page = value("sec-fetch-site").is_some_and(|v| v != "same-origin" && v != "none") || value("origin").is_some();
    if from_a_page {
        return (StatusCode::FORBIDDEN, "runs are started by programs, not by web pages\n").into_response();
    }
    if s.access.is_none() && !s.open_run {
        return (StatusCode::FORBIDDEN, "set api_token (or [[users]]) to start runs over HTTP on a non-loopback address\n").into_response();
    }
    if let Some(access) = &s.access {
        match access.verify(Access::bearer(&headers), Instant::now()) {
            Ok(who) if who.role == Role::Operator => tracing::info!(user = %who.user, "profile run requested over HTTP"),
            Ok(who) => {
                return (StatusCode::FORBIDDEN, format!("user {} is a viewer: starting a run takes an operator's token\n", who.user))
                    .into_response();
            }
            Err(Refused::Unknown) => {
                return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "an operator's bearer token is required\n")
                    .into_response();
            }
            Err(Refused::Throttled(wait)) => {
                let secs = wait.as_secs().max(1);
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, secs.to_string())],
                    format!("too many wrong tokens: retry in {secs} s\n"),
                )
                    .into_response();
            }
        }
    }
    match s.runner.run().await {
        Ok(n) => (StatusCode::OK, format!("{n} profiles\n")).into_response(),
        Err(e) => {
            // The cause goes to the log; the answer does not carry paths or internal errors.
            tracing::error!(error = %format!("{e:#}"), "profile run failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "the profile run failed; the profiler's log says why\n").into_response()
        }
    }
}

pub async fn start(cfg: ProfilerConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    cfg.check().map_err(anyhow::Error::msg).context("invalid profiler configuration")?;
    std::fs::create_dir_all(&cfg.evidence).with_context(|| format!("cannot create the evidence directory {}", cfg.evidence.display()))?;
    let leftovers = octant_report::evidence::remove_leftovers(&cfg.evidence).context("cannot clean the evidence directory")?;
    if leftovers > 0 {
        tracing::info!(leftovers, "removed unfinished evidence packages of a previous run");
    }
    let metrics = Metrics::new(&registry);
    let health = Health::new();
    health.set_ready(false, "no run yet");
    let producer = if cfg.kafka.brokers.is_empty() { None } else { Some(kafka::producer(&cfg.kafka, ID.name)?) };
    let runner = Arc::new(Runner { cfg: cfg.clone(), producer, metrics, health: health.clone(), lock: Mutex::new(Sent::new()) });
    let users = cfg.principals();
    let access = (!users.is_empty()).then(|| Access::new(users));
    let open_run = cfg.admin_addr.ip().is_loopback();
    let routes = Router::new().route("/run", post(run_now)).with_state(AppState { runner: runner.clone(), access, open_run });
    let admin_addr = service::serve_admin(&ID, cfg.admin_addr, registry, health.clone(), Some(routes), shutdown.clone()).await?;
    let every = cfg.every;
    let task = tokio::spawn(async move {
        loop {
            if let Err(e) = runner.run().await {
                // A failed run (a lake being written, a broker away) is retried next time.
                tracing::error!(error = %format!("{e:#}"), "profile run failed");
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(every) => {}
            }
        }
    });
    tracing::info!(%admin_addr, lake = %cfg.report.lake.display(), evidence = %cfg.evidence.display(), "profiler started");
    Ok(Running { admin_addr, task, health, feed: () })
}

pub async fn run(cfg: ProfilerConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(cfg, registry, shutdown).await?;
    running.task.await.context("profiler task panicked")?
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use octant_runtime::access::User;
    use octant_runtime::config::Secret;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn post(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        (out[9..12].parse().unwrap(), out)
    }

    /// With tokens, a run takes an operator's token: none or a wrong one 401, a viewer's 403
    /// (saying the role, not the token), the operator's 200; the tokens in no answer or
    /// `Debug`; the probes stay open.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_takes_an_operators_token() {
        let dir = std::env::temp_dir().join(format!("octant-profiler-run-token-{}", std::process::id()));
        let (op, viewer) = ("operator-token-5be2-0123", "alice-viewer-77-0123456");
        let mut cfg = ProfilerConfig {
            evidence: dir.join("evidence"),
            admin_addr: "127.0.0.1:0".parse().unwrap(),
            api_token: Some(Secret::new(op)),
            users: vec![User { name: "alice".into(), token: Secret::new(viewer), role: Role::Viewer }],
            every: std::time::Duration::from_secs(3600),
            ..Default::default()
        };
        cfg.report.lake = dir.join("lake");
        assert!(!format!("{cfg:?}").contains(op) && !format!("{cfg:?}").contains(viewer));
        let stop = CancellationToken::new();
        let running = start(cfg, Registry::new(), stop.clone()).await.unwrap();
        let addr = running.admin_addr;
        assert_eq!(post(addr, "/run", None).await.0, 401);
        assert_eq!(post(addr, "/run", Some("wrong-token-0123456789")).await.0, 401);
        let (status, r) = post(addr, "/run", Some(viewer)).await;
        assert!(status == 403 && r.contains("alice is a viewer") && !r.contains(viewer), "{r}");
        let (status, r) = post(addr, "/run", Some(op)).await;
        assert!(status == 200 && r.contains("0 profiles"), "{r}");
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let page = format!(
            "POST /run HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://evil.example\r\nAuthorization: Bearer {op}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        s.write_all(page.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 403"), "no web page starts a run: {out}");
        stop.cancel();
        let _ = running.task.await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
