//! # octant-web
//!
//! Octant's web view, a service of its own: it reads the lake, the profiler's evidence
//! packages and the topics it follows, and never writes anything.
//!
//! | route | page |
//! |---|---|
//! | `GET /` | the fleet ([`fleet`]): live state from `octant.windows` and `octant.alerts` |
//! | `GET /systems/{system}[?days=N]` | a system over time ([`system`]) |
//! | `GET /alerts/{fingerprint}` | an alert and the runs behind it ([`alert`]) |
//! | `GET /runs/{run_id}[/json]` | a run, step by step ([`runs`]) |
//! | `GET /profiles`, `/profiles/{system}[/json]` | the latest profiles ([`profiles`]) |
//! | `GET /evidence/{system}/{version}/{source}/{period}/{file}` | a package's files |
//! | `GET, POST /login`, `POST /logout` | sign-in ([`auth`]) |
//! | `/metrics`, `/healthz`, `/readyz` | the admin endpoints every service has |
//!
//! Lake reads are cached per page and arguments until the lake commits again ([`cache`]);
//! every page shares one stylesheet and its security headers ([`page`]).

pub mod alert;
pub mod auth;
pub mod cache;
pub mod config;
pub mod fleet;
pub mod metrics;
pub mod page;
pub mod profiles;
pub mod query;
pub mod runs;
pub mod system;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use axum::Router;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use octant_runtime::access::Access;
use octant_runtime::admin::Health;
use octant_runtime::service::{self, ServiceId};
use prometheus::Registry;
use tokio_util::sync::CancellationToken;

pub use config::WebConfig;

pub const ID: ServiceId = ServiceId { name: "web", env: "OCTANT_WEB", group: "octant-web", admin_port: 9107 };

/// A started web view.
pub type Running = service::Running;

#[derive(Clone)]
struct AppState {
    cfg: Arc<WebConfig>,
    live: fleet::Shared,
    lake: cache::LakeCache,
    packages: profiles::Packages,
    /// The fleet page's Content-Security-Policy: its script's hash, computed once.
    fleet_csp: Arc<str>,
}

const HTML: &str = "text/html; charset=utf-8";

/// What a failed lake read answers: the reason goes to the log, the page says only that the
/// lake could not be read (no internal error, no server path).
fn lake_error(what: &str, e: impl std::fmt::Display) -> Response {
    tracing::warn!(error = %e, page = what, "web view: a lake read failed");
    (StatusCode::SERVICE_UNAVAILABLE, format!("the lake could not be read for this {what}; try again shortly\n")).into_response()
}

/// `GET /`: the fleet page, from the live state the follower keeps. Its CSP allows its one
/// script by hash.
async fn fleet_page(State(s): State<AppState>) -> Response {
    let html = page::focusable_tables(fleet::to_html(&s.live.read().unwrap(), s.cfg.refresh));
    ([(header::CONTENT_TYPE, HTML.to_string()), (header::CONTENT_SECURITY_POLICY, s.fleet_csp.to_string())], html).into_response()
}

async fn stylesheet() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "public, max-age=3600")], page::STYLESHEET).into_response()
}

/// `GET /runs/{run_id}`: the run page; `/runs/{run_id}/json` the same as JSON.
async fn run_page(State(s): State<AppState>, UrlPath(run_id): UrlPath<String>) -> Response {
    run_response(&s, &run_id, false).await
}

async fn run_json(State(s): State<AppState>, UrlPath(run_id): UrlPath<String>) -> Response {
    run_response(&s, &run_id, true).await
}

async fn run_response(s: &AppState, run_id: &str, json: bool) -> Response {
    let id = run_id.to_string();
    let violations = s.cfg.evaluation.violations.clone();
    match s.lake.get(format!("run/{run_id}"), |ctx| async move { runs::load(&ctx, &id, &violations).await }).await {
        Ok(run) => match run.as_ref() {
            Some(run) if json => axum::Json(run).into_response(),
            Some(run) => ([(header::CONTENT_TYPE, HTML)], page::focusable_tables(runs::to_html(run))).into_response(),
            None => (StatusCode::NOT_FOUND, format!("no event of run {} in the lake\n", runs::terminal_safe(run_id, 200))).into_response(),
        },
        Err(e) => lake_error("run", e),
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

/// `GET /systems/{system}[?days=N]`: the system page over the `days` (default 7, at most 31)
/// ending at the system's newest window, with its latest evidence packages.
async fn system_page(State(s): State<AppState>, UrlPath(system): UrlPath<String>, Query(q): Query<BTreeMap<String, String>>) -> Response {
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
    let key = format!("system/{system}/{days}/{}/{}", alerts_page.page, alerts_page.per_page);
    let id = system.clone();
    let loaded = s.lake.get(key, |ctx| async move { system::load(&ctx, &id, days, alerts_page).await }).await;
    let packages: Vec<system::Package> = s
        .packages
        .list(&s.cfg.evidence, Some(&system))
        .iter()
        .map(|p| system::Package {
            version: p.record.system_version.clone(),
            source: p.record.source,
            period: p.record.period.clone(),
            generated_at: p.record.generated_at,
            unsuitable: p.record.unsuitable,
            meta: p.meta.clone(),
        })
        .collect();
    match loaded {
        Ok(v) => match v.as_ref() {
            Some(v) => ([(header::CONTENT_TYPE, HTML)], page::focusable_tables(system::to_html(v, &packages))).into_response(),
            None => {
                (StatusCode::NOT_FOUND, format!("no window of system {} in the lake\n", runs::terminal_safe(&system, 200))).into_response()
            }
        },
        Err(e) => lake_error("system page", e),
    }
}

/// `GET /alerts/{fingerprint}`: the alert page.
async fn alert_page(State(s): State<AppState>, UrlPath(fingerprint): UrlPath<String>) -> Response {
    let id = fingerprint.clone();
    match s.lake.get(format!("alert/{fingerprint}"), |ctx| async move { alert::load(&ctx, &id).await }).await {
        Ok(v) => match v.as_ref() {
            Some(v) => ([(header::CONTENT_TYPE, HTML)], page::focusable_tables(alert::to_html(v))).into_response(),
            None => {
                (StatusCode::NOT_FOUND, format!("no alert {} in the lake (yet)\n", runs::terminal_safe(&fingerprint, 200))).into_response()
            }
        },
        Err(e) => lake_error("alert page", e),
    }
}

/// `GET /profiles`: the latest profile records of every package, JSON.
async fn profiles_json(State(s): State<AppState>) -> Response {
    let v: Vec<octant_contracts::Profile> = s.packages.list(&s.cfg.evidence, None).iter().map(|p| p.record.clone()).collect();
    axum::Json(v).into_response()
}

/// `GET /profiles/{system}/json`: the system's `profile.json` documents.
async fn system_profiles_json(State(s): State<AppState>, UrlPath(system): UrlPath<String>) -> Response {
    let v: Vec<serde_json::Value> = s.packages.list(&s.cfg.evidence, Some(&system)).iter().map(|p| (*p.json).clone()).collect();
    if v.is_empty() {
        return (StatusCode::NOT_FOUND, format!("no profile of system {}\n", runs::terminal_safe(&system, 200))).into_response();
    }
    axum::Json(v).into_response()
}

/// `GET /profiles/{system}`: one page with the bodies of the system's `profile.html` files.
async fn system_profiles_html(State(s): State<AppState>, UrlPath(system): UrlPath<String>) -> Response {
    let packages = s.packages.list(&s.cfg.evidence, Some(&system));
    let pages: Vec<String> = packages.iter().filter_map(|p| std::fs::read_to_string(p.dir.join("profile.html")).ok()).collect();
    if pages.is_empty() {
        return (StatusCode::NOT_FOUND, format!("no profile of system {}\n", runs::terminal_safe(&system, 200))).into_response();
    }
    let bodies: String = pages.iter().map(|p| format!("<section>{}</section><hr/>", profiles::body(p))).collect();
    let head_end = pages[0].find("<body>").unwrap_or(0);
    let html = format!("{}<body>{bodies}</body></html>\n", &pages[0][..head_end]);
    ([(header::CONTENT_TYPE, HTML), (header::CONTENT_SECURITY_POLICY, page::CSP_EVIDENCE)], html).into_response()
}

/// `GET /evidence/{system}/{version}/{source}/{period}/{file}`: a file of a package. Only the
/// three files of a package found in the listing are served: the path is looked up, never
/// joined from the request.
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
    let dir = s.packages.list(&s.cfg.evidence, Some(&system)).into_iter().find_map(|p| {
        let r = &p.record;
        (r.system_version == version && r.source.as_str() == source && r.period == period).then(|| p.dir.clone())
    });
    let Some(dir) = dir else { return (StatusCode::NOT_FOUND, "no such evidence package\n").into_response() };
    match tokio::fs::read(dir.join(&file)).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, kind), (header::CONTENT_SECURITY_POLICY, page::CSP_EVIDENCE)], bytes).into_response(),
        Err(_) => (StatusCode::NOT_FOUND, "the package is being replaced; try again\n").into_response(),
    }
}

/// `GET /login[?next=PATH]`: the sign-in form (only when tokens are set).
async fn login_form(Query(q): Query<BTreeMap<String, String>>) -> Response {
    let next = auth::safe_next(q.get("next").map(String::as_str));
    ([(header::CONTENT_TYPE, HTML)], auth::login_page(&next, false)).into_response()
}

/// Middleware: a page asked for under a host name not in `allowed_hosts` (when set) is
/// refused — a DNS-rebinding site pointing its own name at this address gets nothing.
async fn host_check(allowed: Arc<Vec<String>>, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    // `name:port` matches exactly; a bare name matches that name on any port.
    let name = host.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map_or(host, |(n, _)| n);
    if allowed.is_empty() || allowed.iter().any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name)) {
        return next.run(req).await;
    }
    (StatusCode::MISDIRECTED_REQUEST, "this server does not answer to that host name\n").into_response()
}

/// The route label of a path: its first segment among the view's, else `other` (bounded).
fn route_of(path: &str) -> &'static str {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    match first {
        "" => "/",
        "systems" => "/systems",
        "alerts" => "/alerts",
        "runs" => "/runs",
        "profiles" => "/profiles",
        "evidence" => "/evidence",
        "login" => "/login",
        "logout" => "/logout",
        "style.css" => "/style.css",
        _ => "other",
    }
}

/// Middleware: requests counted and timed by route.
async fn measured(m: metrics::Metrics, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let route = route_of(req.uri().path());
    let t0 = Instant::now();
    let res = next.run(req).await;
    m.seconds.with_label_values(&[route]).observe(t0.elapsed().as_secs_f64());
    m.requests.with_label_values(&[route, res.status().as_str()]).inc();
    res
}

/// The pages, sign-in, and the security headers; what [`start`] serves next to the admin
/// endpoints.
fn routes(cfg: &WebConfig, state: AppState, m: metrics::Metrics) -> anyhow::Result<Router> {
    let routes = Router::new()
        .route("/", get(fleet_page))
        .route(page::STYLESHEET_PATH, get(stylesheet))
        .route("/profiles", get(profiles_json))
        .route("/profiles/{system}", get(system_profiles_html))
        .route("/profiles/{system}/json", get(system_profiles_json))
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
        let key = cfg.session_key.as_ref().map(|k| k.expose().as_bytes().to_vec());
        let auth = auth::Auth::new(Access::new(users), key.as_deref(), cfg.secure_cookie);
        let (form_auth, out_auth) = (auth.clone(), auth.clone());
        routes
            .route(
                "/login",
                get(login_form).post(move |headers: HeaderMap, body: axum::body::Bytes| async move {
                    let form: BTreeMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
                    auth::login(&form_auth, &headers, &form)
                }),
            )
            .route("/logout", axum::routing::post(move |headers: HeaderMap| async move { auth::logout(&out_auth, &headers) }))
            .layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
                auth::require(auth.clone(), req, next)
            }))
    };
    let allowed = Arc::new(cfg.hosts());
    Ok(routes
        .layer(axum::middleware::from_fn(page::security_headers))
        .layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
            host_check(allowed.clone(), req, next)
        }))
        .route_layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
            measured(m.clone(), req, next)
        })))
}

pub async fn start(cfg: WebConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    cfg.check().map_err(anyhow::Error::msg).context("invalid web configuration")?;
    let m = metrics::Metrics::new(&registry);
    let health = Health::new();
    let live = fleet::Shared::default();
    if !cfg.kafka.brokers.is_empty() {
        let (kafka, live, stop) = (cfg.kafka.clone(), live.clone(), shutdown.clone());
        tokio::spawn(async move {
            if let Err(e) = fleet::follow(kafka, live, stop).await {
                tracing::error!(error = %format!("{e:#}"), "the fleet page's follower stopped");
            }
        });
    }
    let lake = cache::LakeCache::new(cfg.lake.clone(), cfg.storage.clone(), m.cache_hits.clone(), m.cache_misses.clone());
    let fleet_csp = page::csp_with_script(&fleet::script(cfg.refresh)).into();
    let state = AppState { cfg: Arc::new(cfg.clone()), live, lake, packages: profiles::Packages::default(), fleet_csp };
    let routes = routes(&cfg, state, m)?;
    let admin_addr = service::serve_admin(&ID, cfg.admin_addr, registry, health.clone(), Some(routes), shutdown.clone()).await?;
    health.set_ready(true, "serving");
    let task = tokio::spawn(async move {
        shutdown.cancelled().await;
        Ok(())
    });
    tracing::info!(%admin_addr, lake = %cfg.lake.display(), evidence = %cfg.evidence.display(), "web view started");
    Ok(Running { admin_addr, task, health, feed: () })
}

pub async fn run(cfg: WebConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(cfg, registry, shutdown).await?;
    running.task.await.context("web task panicked")?
}

#[cfg(test)]
mod http_tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// One HTTP/1.1 request with extra header lines `headers` (each ending in CRLF).
    async fn request(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let length = if body.is_empty() { String::new() } else { format!("Content-Length: {}\r\n", body.len()) };
        let host = if headers.to_ascii_lowercase().contains("host: ") { String::new() } else { format!("Host: {addr}\r\n") };
        s.write_all(format!("{method} {path} HTTP/1.1\r\n{host}{headers}{length}Connection: close\r\n\r\n{body}").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        (out[9..12].parse().unwrap(), out)
    }

    fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
        response
            .lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| l.split_once(": ").filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()))
    }

    async fn started(cfg: WebConfig) -> (Running, CancellationToken) {
        let stop = CancellationToken::new();
        (start(cfg, Registry::new(), stop.clone()).await.unwrap(), stop)
    }

    /// With tokens: a program's bearer token reads, a wrong one does not, a browser is sent to
    /// the sign-in page and back; the session cookie (signed by the server key, not the token)
    /// opens the pages and says who is signed in; the view never takes a change; signing in
    /// from another site is refused; the probes and `/metrics` stay open; no token in any
    /// answer or `Debug`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pages_take_a_token_or_a_session() {
        let dir = std::env::temp_dir().join(format!("octant-web-auth-{}", std::process::id()));
        let token = "canary-token-5be2-0123";
        let cfg = WebConfig {
            lake: dir.join("lake"),
            evidence: dir.join("evidence"),
            admin_addr: "127.0.0.1:0".parse().unwrap(),
            api_token: Some(octant_runtime::config::Secret::new(token)),
            ..Default::default()
        };
        assert!(!format!("{cfg:?}").contains(token));
        let (running, stop) = started(cfg).await;
        let addr = running.admin_addr;
        let bearer = |t: &str| format!("Authorization: Bearer {t}\r\n");
        assert_eq!(request(addr, "GET", "/profiles", "", "").await.0, 401);
        assert_eq!(request(addr, "GET", "/profiles", &bearer("wrong-token-0123456789"), "").await.0, 401);
        assert_eq!(request(addr, "GET", "/profiles", &bearer(token), "").await.0, 200);
        assert_eq!(request(addr, "POST", "/profiles", &bearer(token), "").await.0, 405, "the view only reads");
        let (status, metrics) = request(addr, "GET", "/metrics", "", "").await;
        assert!(status == 200 && !metrics.contains(token) && metrics.contains("octant_web_requests_total"), "{metrics}");
        assert_eq!(request(addr, "GET", "/healthz", "", "").await.0, 200);
        assert_eq!(request(addr, "GET", "/style.css", "", "").await.0, 200, "the stylesheet is open (the sign-in page uses it)");
        let (status, r) = request(addr, "GET", "/systems/a%2Fb?days=2", "Accept: text/html\r\n", "").await;
        assert_eq!((status, header(&r, "location")), (303, Some("/login?next=%2Fsystems%2Fa%252Fb%3Fdays%3D2")), "{r}");
        let (status, page) = request(addr, "GET", "/login?next=%2Fsystems%2Fa%252Fb%3Fdays%3D2", "Accept: text/html\r\n", "").await;
        assert!(status == 200 && page.contains("value=\"/systems/a%2Fb?days=2\"") && page.contains("type=\"password\""), "{page}");
        let csp = header(&page, "content-security-policy").unwrap();
        assert!(csp.contains("style-src 'self'") && !csp.contains("unsafe-inline"), "{csp}");
        let form = "Content-Type: application/x-www-form-urlencoded\r\n";
        let (status, r) =
            request(addr, "POST", "/login", &format!("{form}Sec-Fetch-Site: cross-site\r\n"), &format!("token={token}")).await;
        assert!(status == 403 && header(&r, "set-cookie").is_none(), "another site cannot sign a person in: {r}");
        let (status, r) = request(addr, "POST", "/login", form, "token=nope&next=%2F").await;
        assert!(status == 401 && header(&r, "set-cookie").is_none() && !r.contains("nope"), "{r}");
        let (status, r) = request(addr, "POST", "/login", form, &format!("token={token}&next=https%3A%2F%2Fevil.example%2F")).await;
        assert_eq!((status, header(&r, "location")), (303, Some("/")), "no redirect off the server: {r}");
        let cookie = header(&r, "set-cookie").expect("a session cookie").to_string();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax") && !cookie.contains(token), "{cookie}");
        let session = cookie.split(';').next().unwrap().to_string();
        assert!(session.starts_with("octant_session=api."), "{session}");
        let (status, page) = request(addr, "GET", "/", &format!("Cookie: {session}\r\n"), "").await;
        assert!(status == 200 && page.contains("Signed in as api (operator) <button type=\"submit\">Sign out</button>"), "{page}");
        assert_eq!(header(&page, "cache-control"), Some("private, no-store"));
        let csp = header(&page, "content-security-policy").unwrap();
        assert!(csp.contains("script-src 'sha256-") && !csp.contains("unsafe-inline"), "the fleet script by its hash: {csp}");
        let flipped = if session.ends_with('0') { '1' } else { '0' };
        let forged = format!("{}{flipped}", &session[..session.len() - 1]);
        assert_eq!(request(addr, "GET", "/profiles", &format!("Cookie: {forged}\r\n"), "").await.0, 401);
        let (status, r) = request(addr, "POST", "/logout", "Sec-Fetch-Site: same-origin\r\n", "").await;
        assert!(status == 303 && header(&r, "set-cookie").is_some_and(|c| c.contains("Max-Age=0")), "{r}");
        // Ten wrong bearer tokens and the right one waits too (429), the session does not.
        for i in 0..10 {
            let _ = request(addr, "GET", "/profiles", &bearer(&format!("guess-{i}-0123456789")), "").await;
        }
        let (status, r) = request(addr, "GET", "/profiles", &bearer(token), "").await;
        assert!(status == 429 && header(&r, "retry-after").is_some(), "{r}");
        assert_eq!(request(addr, "GET", "/profiles", &format!("Cookie: {session}\r\n"), "").await.0, 200);
        stop.cancel();
        let _ = running.task.await;
    }

    /// A name not among `allowed_hosts` gets 421 (a DNS-rebinding site's name pointed at the
    /// loopback address); error pages say what failed without internal errors or paths.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn other_host_names_and_lake_failures_say_little() {
        let dir = std::env::temp_dir().join(format!("octant-web-host-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("lake/_markers")).unwrap();
        std::fs::write(dir.join("lake/_markers/x"), "").unwrap();
        let cfg = WebConfig {
            lake: dir.join("lake"),
            evidence: dir.join("evidence"),
            admin_addr: "127.0.0.1:0".parse().unwrap(),
            allowed_hosts: vec!["127.0.0.1".into(), "localhost".into()],
            ..Default::default()
        };
        let (running, stop) = started(cfg).await;
        let addr = running.admin_addr;
        assert_eq!(request(addr, "GET", "/", "Host: evil.example:9107\r\n", "").await.0, 421);
        assert_eq!(request(addr, "GET", "/", &format!("Host: localhost:{}\r\n", addr.port()), "").await.0, 200);
        let (status, body) = request(addr, "GET", "/runs/r1", "", "").await;
        assert_eq!(status, 404, "{body}");
        assert!(!body.contains(dir.to_str().unwrap()), "no server path in an answer: {body}");
        stop.cancel();
        let _ = running.task.await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A request sent half and then left hanging is dropped after the header timeout; one sent
    /// whole within it is answered (the server is never held by a slow client).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_half_sent_request_is_dropped() {
        let cfg = WebConfig { admin_addr: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
        let (running, stop) = started(cfg).await;
        let mut s = tokio::net::TcpStream::connect(running.admin_addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        tokio::time::sleep(octant_runtime::admin::HEADER_TIMEOUT + Duration::from_secs(1)).await;
        let _ = s.write_all(b"\r\n").await;
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        let text = String::from_utf8_lossy(&out);
        assert!(!text.contains("200 OK"), "answered after the header timeout: {text}");
        assert_eq!(request(running.admin_addr, "GET", "/healthz", "", "").await.0, 200);
        stop.cancel();
        let _ = running.task.await;
    }
}
