//! `octant-profiler`: on a schedule and on demand, DataFusion SQL over the lake builds the
//! profile of every (system, version, source) for each declared period (default the last 24 h
//! and 7 d), publishes it to `octant.profiles`, writes its evidence package and serves the
//! latest profiles over HTTP.
//!
//! HTTP (on the admin address, next to `/metrics`, `/healthz`, `/readyz`):
//! - `GET /profiles`: the latest profile records, JSON;
//! - `GET /profiles/{system}`: an HTML page with that system's latest profiles;
//! - `GET /profiles/{system}/json`: the same as JSON;
//! - `POST /run`: runs now (returns when done, with the number of profiles built).

pub mod alert;
pub mod auth;
pub mod build;
pub mod canary;
pub mod compare;
pub mod config;
pub mod evidence;
pub mod fleet;
pub mod meta;
pub mod metrics;
pub mod panes;
pub mod runs;
pub mod system;
pub mod web;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use octant_contracts::codec::to_single_object;
use octant_contracts::{Profile, topics};
use octant_runtime::admin::Health;
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::service::{self, ServiceId};
use prometheus::Registry;
use rdkafka::producer::FutureProducer;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

pub use build::{Built, Period};
pub use config::ProfilerConfig;
use metrics::Metrics;

/// The periods of a run ending at `now`.
pub fn periods(cfg: &ProfilerConfig, now: i64) -> Vec<Period> {
    cfg.periods.iter().map(|d| Period { name: config::period_name(*d), start: now - d.as_millis() as i64, end: now }).collect()
}

/// One run: every period's profiles, built and written as evidence packages. The returned
/// records carry their package directory in `evidence_uri`.
pub async fn run_once(cfg: &ProfilerConfig, periods: &[Period], system: Option<&str>, now: i64) -> anyhow::Result<Vec<Built>> {
    cfg.evaluation.declare_instruments().map_err(anyhow::Error::msg)?;
    let mut all = Vec::new();
    for p in periods {
        // A session per period: a session lists each table once and keeps that listing (and
        // the lake's commit markers it filtered by), while `build` records the markers it
        // reads first as what a stored hour holds — a listing from an earlier period's build
        // would be older than them, and the hour would be stored without files it claims.
        let ctx = octant_lake::reader::open_with(&cfg.lake, &cfg.storage)
            .await
            .with_context(|| format!("cannot open the lake {}", cfg.lake.display()))?;
        let built = build::build(&ctx, cfg, p, system, now).await.with_context(|| format!("profile of period {} failed", p.name))?;
        for mut b in built {
            let dir = evidence::write_package(&cfg.evidence, &b, cfg, &cfg.lake)
                .with_context(|| format!("cannot write the evidence package under {}", cfg.evidence.display()))?;
            b.record.evidence_uri = Some(dir.display().to_string());
            all.push(b);
        }
    }
    Ok(all)
}

/// The latest profiles, keyed by `system/version/source/period`.
#[derive(Default)]
struct Latest {
    profiles: BTreeMap<String, Built>,
}

#[derive(Clone)]
struct AppState {
    latest: Arc<Mutex<Latest>>,
    runner: Arc<Runner>,
    live: fleet::Shared,
}

struct Runner {
    cfg: ProfilerConfig,
    producer: Option<FutureProducer>,
    metrics: Metrics,
    health: Arc<Health>,
    latest: Arc<Mutex<Latest>>,
    /// One run at a time (scheduled and on-demand runs queue here).
    lock: Mutex<()>,
}

fn now_ms() -> i64 {
    octant_runtime::dlq::now_ms()
}

impl Runner {
    async fn run(&self) -> anyhow::Result<usize> {
        let _one = self.lock.lock().await;
        let t0 = Instant::now();
        let now = now_ms();
        let result = run_once(&self.cfg, &periods(&self.cfg, now), None, now).await;
        self.metrics.run_seconds.observe(t0.elapsed().as_secs_f64());
        let built = match result {
            Ok(b) => b,
            Err(e) => {
                self.metrics.runs.with_label_values(&["error"]).inc();
                return Err(e);
            }
        };
        let mut counted = std::collections::BTreeSet::new();
        for b in &built {
            self.metrics.observations.with_label_values(&[&b.period.name]).inc_by(b.observations.rows);
            if counted.insert(b.period.name.clone()) {
                let hours = ((b.period.end - 1).div_euclid(panes::HOUR_MS) - b.period.start.div_euclid(panes::HOUR_MS) + 1) as u64;
                let stored = b.hours_from_store as u64;
                self.metrics.hours.with_label_values(&[&b.period.name, "store"]).inc_by(stored);
                self.metrics.hours.with_label_values(&[&b.period.name, "observations"]).inc_by(hours - stored);
            }
            if let Some(p) = &self.producer {
                let rec = OutRecord {
                    topic: self.cfg.kafka.topic(topics::PROFILES),
                    partition: None,
                    key: b.record.system_id.clone(),
                    payload: to_single_object(&b.record).context("profile does not encode")?,
                };
                kafka::send(p, &rec).await.map_err(|e| anyhow::anyhow!("publishing profile {} failed: {e}", b.record.profile_id))?;
            }
        }
        let n = built.len();
        {
            let mut latest = self.latest.lock().await;
            for b in built {
                let r = &b.record;
                latest.profiles.insert(format!("{}/{}/{}/{}", r.system_id, r.system_version, r.source.as_str(), r.period), b);
            }
        }
        self.metrics.runs.with_label_values(&["ok"]).inc();
        self.metrics.profiles.set(n as i64);
        self.metrics.last_success.set(now_ms() as f64 / 1000.0);
        self.health.set_ready(true, format!("{n} profiles"));
        tracing::info!(profiles = n, seconds = t0.elapsed().as_secs_f64(), "profile run done");
        Ok(n)
    }
}

async fn list(State(s): State<AppState>) -> Response {
    let latest = s.latest.lock().await;
    let v: Vec<&Profile> = latest.profiles.values().map(|b| &b.record).collect();
    axum::Json(v).into_response()
}

async fn system_json(State(s): State<AppState>, UrlPath(system): UrlPath<String>) -> Response {
    let latest = s.latest.lock().await;
    let v: Vec<serde_json::Value> = latest
        .profiles
        .values()
        .filter(|b| b.record.system_id == system)
        .map(|b| evidence::to_json(b, &s.runner.cfg, &s.runner.cfg.lake))
        .collect();
    if v.is_empty() {
        return (StatusCode::NOT_FOUND, format!("no profile of system {system:?}\n")).into_response();
    }
    axum::Json(v).into_response()
}

async fn system_html(State(s): State<AppState>, UrlPath(system): UrlPath<String>) -> Response {
    let latest = s.latest.lock().await;
    let pages: Vec<String> =
        latest.profiles.values().filter(|b| b.record.system_id == system).map(|b| evidence::to_html(b, &s.runner.cfg.lake)).collect();
    if pages.is_empty() {
        return (StatusCode::NOT_FOUND, format!("no profile of system {system:?}\n")).into_response();
    }
    // One page: the bodies of every profile of the system, in key order.
    let bodies: String = pages
        .iter()
        .map(|p| {
            let start = p.find("<body>").map(|i| i + 6).unwrap_or(0);
            let end = p.rfind("</body>").unwrap_or(p.len());
            format!("<section>{}</section><hr/>", &p[start..end])
        })
        .collect();
    let head_end = pages[0].find("<body>").unwrap_or(0);
    let html = format!("{}<body>{bodies}</body></html>\n", &pages[0][..head_end]);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// `GET /`: the fleet page, from the live state the follower keeps.
async fn fleet_page(State(s): State<AppState>) -> Response {
    let html = fleet::to_html(&s.live.read().unwrap(), s.runner.cfg.web_refresh);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// `GET /runs/{run_id}`: the run page (`runs::to_html`), read from the lake on each request;
/// `/runs/{run_id}/json` the same as JSON.
async fn run_page(State(s): State<AppState>, UrlPath(run_id): UrlPath<String>) -> Response {
    run_response(&s, &run_id, false).await
}

async fn run_json(State(s): State<AppState>, UrlPath(run_id): UrlPath<String>) -> Response {
    run_response(&s, &run_id, true).await
}

async fn run_response(s: &AppState, run_id: &str, json: bool) -> Response {
    let cfg = &s.runner.cfg;
    let loaded = match octant_lake::reader::open_with(&cfg.lake, &cfg.storage).await {
        Ok(ctx) => runs::load(&ctx, run_id).await,
        Err(e) => Err(e),
    };
    match loaded {
        Ok(Some(run)) if json => axum::Json(run).into_response(),
        Ok(Some(run)) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], runs::to_html(&run)).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, format!("no event of run {} in the lake\n", runs::terminal_safe(run_id, 200))).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// Query parameter `name` as a whole number in `range`, `default` when absent; otherwise
/// what a 400 says.
fn whole_number(q: &BTreeMap<String, String>, name: &str, default: u32, range: std::ops::RangeInclusive<u32>) -> Result<u32, String> {
    match q.get(name).map(|v| v.parse::<u32>()) {
        None => Ok(default),
        Some(Ok(v)) if range.contains(&v) => Ok(v),
        Some(_) => Err(format!("{name} must be a whole number from {} to {}\n", range.start(), range.end())),
    }
}

/// `GET /systems/{system}[?days=N]`: the system page (`system::to_html`), from the lake, over
/// the `days` (default 7, at most 31: every window of the period is read) ending at the
/// system's newest window.
async fn system_page(
    State(s): State<AppState>,
    UrlPath(system): UrlPath<String>,
    axum::extract::Query(q): axum::extract::Query<BTreeMap<String, String>>,
) -> Response {
    let numbers = (|| {
        let days = whole_number(&q, "days", 7, 1..=31)?;
        let page = whole_number(&q, "alerts_page", 0, 0..=1_000_000)? as usize;
        let per_page = whole_number(&q, "alerts_per_page", system::ALERTS_PER_PAGE as u32, 1..=1000)? as usize;
        Ok::<_, String>((days, system::AlertsPage { page, per_page }))
    })();
    let (days, alerts_page) = match numbers {
        Ok(n) => n,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    let cfg = &s.runner.cfg;
    let loaded = match octant_lake::reader::open_with(&cfg.lake, &cfg.storage).await {
        Ok(ctx) => system::load(&ctx, &system, days, alerts_page).await,
        Err(e) => Err(e),
    };
    let packages: Vec<system::Package> = {
        let latest = s.latest.lock().await;
        latest
            .profiles
            .values()
            .filter(|b| b.record.system_id == system)
            .map(|b| system::Package {
                version: b.record.system_version.clone(),
                source: b.record.source,
                period: b.record.period.clone(),
                generated_at: b.record.generated_at,
                unsuitable: b.dimension_profile.unsuitable,
                meta: Some(b.meta.clone()),
            })
            .collect()
    };
    match loaded {
        Ok(Some(v)) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], system::to_html(&v, &packages)).into_response(),
        Ok(None) => {
            (StatusCode::NOT_FOUND, format!("no window of system {} in the lake\n", runs::terminal_safe(&system, 200))).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// `GET /alerts/{fingerprint}`: the alert page (`alert::to_html`), from the lake.
async fn alert_page(State(s): State<AppState>, UrlPath(fingerprint): UrlPath<String>) -> Response {
    let cfg = &s.runner.cfg;
    let loaded = match octant_lake::reader::open_with(&cfg.lake, &cfg.storage).await {
        Ok(ctx) => alert::load(&ctx, &fingerprint).await,
        Err(e) => Err(e),
    };
    match loaded {
        Ok(Some(v)) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], alert::to_html(&v)).into_response(),
        Ok(None) => {
            (StatusCode::NOT_FOUND, format!("no alert {} in the lake (yet)\n", runs::terminal_safe(&fingerprint, 200))).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// `GET /evidence/{system}/{version}/{source}/{period}/{file}`: a file of the evidence package
/// of a latest profile. Only the three package files of a profile the profiler holds are
/// served: the path is looked up, never joined from the request.
async fn evidence_file(
    State(s): State<AppState>,
    UrlPath((system, version, source, period, file)): UrlPath<(String, String, String, String, String)>,
) -> Response {
    let kind = match file.as_str() {
        "profile.html" => "text/html; charset=utf-8",
        "profile.json" => "application/json",
        "profile.md" => "text/markdown; charset=utf-8",
        _ => return (StatusCode::NOT_FOUND, "a package has profile.html, profile.json and profile.md\n").into_response(),
    };
    let dir = {
        let latest = s.latest.lock().await;
        latest
            .profiles
            .values()
            .find(|b| {
                let r = &b.record;
                r.system_id == system && r.system_version == version && r.source.as_str() == source && r.period == period
            })
            .map(|b| evidence::package_dir(&s.runner.cfg.evidence, b))
    };
    let Some(dir) = dir else { return (StatusCode::NOT_FOUND, "no such evidence package\n").into_response() };
    match tokio::fs::read(dir.join(&file)).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, kind)], bytes).into_response(),
        Err(e) => (StatusCode::NOT_FOUND, format!("the package is not written yet: {e}\n")).into_response(),
    }
}

/// `GET /login[?next=PATH]`: the sign-in form of the web view (only when a token is set).
async fn login_form(axum::extract::Query(q): axum::extract::Query<BTreeMap<String, String>>) -> Response {
    let next = auth::safe_next(q.get("next").map(String::as_str));
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], auth::login_page(&next, false)).into_response()
}

async fn run_now(State(s): State<AppState>, who: Option<axum::Extension<auth::SignedIn>>) -> Response {
    // Who started it, when the server has users (an open server's runs are anyone's).
    if let Some(axum::Extension(who)) = &who {
        tracing::info!(user = %who.user, "profile run requested over HTTP");
    }
    match s.runner.run().await {
        Ok(n) => (StatusCode::OK, format!("{n} profiles\n")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}\n")).into_response(),
    }
}

pub const ID: ServiceId = ServiceId { name: "profiler", env: "OCTANT_PROFILER", group: "octant-profiler", admin_port: 9105 };

/// A started profiler.
pub type Running = service::Running;

pub async fn start(cfg: ProfilerConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    cfg.check().map_err(anyhow::Error::msg).context("invalid profiler configuration")?;
    cfg.evaluation.declare_instruments().map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&cfg.evidence).with_context(|| format!("cannot create the evidence directory {}", cfg.evidence.display()))?;
    let leftovers = evidence::remove_leftovers(&cfg.evidence).context("cannot clean the evidence directory")?;
    if leftovers > 0 {
        tracing::info!(leftovers, "removed unfinished evidence packages of a previous run");
    }
    let metrics = Metrics::new(&registry);
    let health = Health::new();
    health.set_ready(false, "no run yet");
    let producer = if cfg.kafka.brokers.is_empty() { None } else { Some(kafka::producer(&cfg.kafka, ID.name)?) };
    let latest = Arc::new(Mutex::new(Latest::default()));
    let runner =
        Arc::new(Runner { cfg: cfg.clone(), producer, metrics, health: health.clone(), latest: latest.clone(), lock: Mutex::new(()) });
    let live = fleet::Shared::default();
    if !cfg.kafka.brokers.is_empty() {
        let (kafka, live, stop) = (cfg.kafka.clone(), live.clone(), shutdown.clone());
        tokio::spawn(async move {
            if let Err(e) = fleet::follow(kafka, live, stop).await {
                tracing::error!(error = %format!("{e:#}"), "the fleet page's follower stopped");
            }
        });
    }
    let state = AppState { latest, runner: runner.clone(), live };
    let routes = Router::new()
        .route("/", get(fleet_page))
        .route("/profiles", get(list))
        .route("/profiles/{system}", get(system_html))
        .route("/profiles/{system}/json", get(system_json))
        .route("/run", post(run_now))
        .route("/runs/{run_id}", get(run_page))
        .route("/runs/{run_id}/json", get(run_json))
        .route("/systems/{system}", get(system_page))
        .route("/alerts/{fingerprint}", get(alert_page))
        .route("/evidence/{system}/{version}/{source}/{period}/{file}", get(evidence_file))
        .with_state(state);
    let users = cfg.principals();
    let routes = if users.is_empty() {
        routes
    } else {
        let auth = auth::Auth::new(users);
        let form_auth = auth.clone();
        routes
            .route(
                "/login",
                get(login_form).post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| async move {
                    let form: BTreeMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
                    auth::login(&form_auth, &headers, &form)
                }),
            )
            .route("/logout", post(|headers: axum::http::HeaderMap| async move { auth::logout(&headers) }))
            .layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
                auth::require(auth.clone(), req, next)
            }))
    };
    let routes = routes.layer(axum::middleware::from_fn(web::security_headers));
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
    tracing::info!(%admin_addr, lake = %cfg.lake.display(), evidence = %cfg.evidence.display(), "profiler started");
    Ok(Running { admin_addr, task, health, feed: () })
}

pub async fn run(cfg: ProfilerConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(cfg, registry, shutdown).await?;
    running.task.await.context("profiler task panicked")?
}
