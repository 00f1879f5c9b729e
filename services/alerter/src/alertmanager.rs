//! Delivery to Alertmanager's API v2 (`POST /api/v2/alerts`), off the stream's path.
//!
//! The stage hands alerts to a [`Notifier`] (an unbounded channel; never blocks). One task
//! keeps, per Alertmanager alert (fingerprint + severity), the latest thing to say, and posts
//! what is pending in batches. When Alertmanager is down or answers an error, it retries with
//! exponential back-off (200 ms doubling to 30 s) and keeps only the latest state per alert, so
//! the backlog is bounded by the number of distinct alerts (incidents beyond `max_pending` are
//! dropped, counted; they stay on `octant.alerts`). Like Prometheus, it re-sends every firing alert each
//! `resend_interval` with `endsAt` = now + `resolve_grace`, so Alertmanager resolves them by
//! itself if the alerter disappears; a resolved alert is sent once with `endsAt` = now.
//!
//! Alertmanager's `startsAt`/`endsAt` are wall-clock times (when the alerter decided), because
//! event times may lie in the past (replays, backfills) and Alertmanager would resolve such an
//! alert at once; the event-time window is in the annotations.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use octant_contracts::{Alert, AlertKind, AlertStatus, Severity};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

#[derive(Debug, Clone)]
pub struct AmConfig {
    /// Base URL, e.g. `http://127.0.0.1:9093`.
    pub url: String,
    /// The `Authorization` header value, if any (a secret: redacted in `Debug`).
    pub authorization: Option<octant_runtime::config::Secret>,
    /// The web view's external base URL: alerts link their pages ([`to_postable`]).
    pub web_base_url: Option<String>,
    pub resend_interval: Duration,
    pub resolve_grace: Duration,
    pub incident_ttl: Duration,
    pub max_pending: usize,
    pub request_timeout: Duration,
}

/// Hands alerts to the delivery task.
#[derive(Clone)]
pub struct Notifier {
    tx: mpsc::UnboundedSender<Msg>,
}

enum Msg {
    /// Send, and keep re-sending while firing.
    Alert(Alert),
    /// Send once, not re-sent (a firing alert read back from history, until this instance
    /// owns its series again: another instance may own it and resolve it meanwhile).
    Once(Alert),
    /// Stop re-sending the alerts of this fingerprint (its series moved to another instance).
    Forget(String),
}

impl Notifier {
    pub fn notify(&self, a: &Alert) {
        let _ = self.tx.send(Msg::Alert(a.clone()));
    }

    pub fn notify_once(&self, a: &Alert) {
        let _ = self.tx.send(Msg::Once(a.clone()));
    }

    pub fn forget(&self, fingerprint: &str) {
        let _ = self.tx.send(Msg::Forget(fingerprint.to_string()));
    }
}

struct Entry {
    alert: Alert,
    /// When to stop re-sending (incidents), on the monotonic clock; `None` for veto alerts
    /// (until resolved).
    expires: Option<tokio::time::Instant>,
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// The `severity` label of a severity.
pub fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

fn ms(t: i64) -> String {
    rfc3339(UNIX_EPOCH + Duration::from_millis(t.max(0) as u64))
}

/// The Alertmanager key of an alert: fingerprint and severity (severity is a label, so an
/// escalated alert is a new Alertmanager alert; the warning one is resolved).
pub fn key(a: &Alert) -> String {
    format!("{}/{}", a.fingerprint, severity(a.severity))
}

/// The API v2 body of one alert; with the web view's base URL `web`, `generatorURL` and the
/// `octant_url` annotation link the alert's page, and an incident's `run_url` its run page.
pub fn to_postable(a: &Alert, starts: SystemTime, ends: SystemTime, web: Option<&str>) -> Value {
    let mut labels = Map::new();
    let mut l = |k: &str, v: &str| {
        labels.insert(k.into(), Value::String(v.into()));
    };
    l("alertname", &a.alertname);
    l("system", &a.system_id);
    l("version", &a.system_version);
    l("source", a.source.as_str());
    l("severity", severity(a.severity));
    l("rule", &a.rule);
    l("dimension", a.dimension.as_deref().unwrap_or(""));
    if a.kind == AlertKind::Incident {
        l("run_id", a.run_id.as_deref().unwrap_or(""));
        l("step", &a.step.map_or(String::new(), |s| s.to_string()));
    }
    // Contamination is per benchmark: what follows `system/version/source/rule/` in the
    // fingerprint (a system id may hold `/` itself).
    let prefix = format!("{}/{}/{}/{}/", a.system_id, a.system_version, a.source.as_str(), a.rule);
    if a.rule == "contamination_veto"
        && let Some(b) = a.fingerprint.strip_prefix(&prefix)
    {
        l("benchmark", b);
    }
    let mut ann = Map::new();
    let mut n = |k: &str, v: String| {
        if !v.is_empty() {
            ann.insert(k.into(), Value::String(v));
        }
    };
    n("summary", a.summary.clone());
    n("runbook_url", a.runbook_url.clone());
    n("estimate", a.estimate.map_or(String::new(), |e| format!("{e:.4}")));
    n(
        "interval",
        match (a.ci_low, a.ci_high) {
            (Some(lo), Some(hi)) => format!("[{lo:.4}, {hi:.4}]"),
            _ => String::new(),
        },
    );
    n("threshold", a.threshold.map_or(String::new(), |t| t.to_string()));
    n("veto_state", a.veto_state.clone().unwrap_or_default());
    n(
        "window",
        match (a.window_start, a.window_end) {
            (Some(s), Some(e)) => format!("{} – {}", ms(s), ms(e)),
            _ => String::new(),
        },
    );
    n("metric", a.metric.clone().unwrap_or_default());
    n("agent_id", a.agent_id.clone().unwrap_or_default());
    n("tool_name", a.tool_name.clone().unwrap_or_default());
    n("tool_arguments", a.tool_arguments.clone().unwrap_or_default());
    n("violations", a.violations.join(", "));
    n("event_time", ms(a.starts_at));
    let page = web.map(|w| octant_runtime::web::alert_url(w, &a.fingerprint)).unwrap_or_default();
    n("octant_url", page.clone());
    if let (Some(w), Some(run), AlertKind::Incident) = (web, &a.run_id, a.kind) {
        n("run_url", octant_runtime::web::run_url(w, run, a.step));
    }
    json!({
        "labels": labels,
        "annotations": ann,
        "startsAt": rfc3339(starts),
        "endsAt": rfc3339(ends),
        "generatorURL": page,
    })
}

/// Where batches of alerts go: Alertmanager over HTTP ([`Http`]), or a test's recorder.
pub trait Post: Send + 'static {
    /// Posts one JSON array of alerts; `Err` says why it was not accepted.
    fn post(&mut self, body: String) -> impl std::future::Future<Output = Result<(), String>> + Send;
}

/// `POST <url>/api/v2/alerts` with a timeout.
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    url: String,
    authorization: Option<octant_runtime::config::Secret>,
    timeout: Duration,
}

impl Http {
    pub fn new(cfg: &AmConfig) -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
            url: format!("{}/api/v2/alerts", cfg.url.trim_end_matches('/')),
            authorization: cfg.authorization.clone(),
            timeout: cfg.request_timeout,
        }
    }
}

impl Post for Http {
    async fn post(&mut self, body: String) -> Result<(), String> {
        let mut req = hyper::Request::post(&self.url).header("content-type", "application/json");
        if let Some(a) = &self.authorization {
            req = req.header("authorization", a.expose());
        }
        let req = req.body(Full::new(Bytes::from(body))).expect("valid request");
        match tokio::time::timeout(self.timeout, self.client.request(req)).await {
            Ok(Ok(resp)) if resp.status().is_success() => Ok(()),
            Ok(Ok(resp)) => Err(format!("{}: HTTP {}", self.url, resp.status())),
            Ok(Err(e)) => Err(format!("{}: {e}", self.url)),
            Err(_) => Err(format!("{}: timeout", self.url)),
        }
    }
}

/// First retry delay after a failed post; doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Starts the delivery task to Alertmanager.
pub fn spawn(cfg: AmConfig, metrics: Metrics, shutdown: CancellationToken) -> (Notifier, JoinHandle<()>) {
    let http = Http::new(&cfg);
    spawn_with(cfg, http, metrics, shutdown)
}

/// Starts the delivery task posting through `post`.
pub fn spawn_with<P: Post>(cfg: AmConfig, post: P, metrics: Metrics, shutdown: CancellationToken) -> (Notifier, JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(deliver(cfg, post, rx, metrics, shutdown));
    (Notifier { tx }, task)
}

/// Bounds the backlog: drops incident states beyond `max` (veto alerts are kept), for good:
/// a dropped incident is not re-sent (it stays on `octant.alerts`).
fn bound<E>(pending: &mut BTreeMap<String, Value>, active: &mut BTreeMap<String, E>, max: usize, metrics: &Metrics) {
    while pending.len() > max {
        let Some(k) = pending.keys().find(|k| k.contains(crate::rules::INCIDENT_RULE)).cloned() else { break };
        pending.remove(&k);
        active.remove(&k);
        metrics.alertmanager_dropped.inc();
    }
    metrics.alertmanager_pending.set(pending.len() as i64);
}

async fn deliver<P: Post>(cfg: AmConfig, mut post: P, mut rx: mpsc::UnboundedReceiver<Msg>, metrics: Metrics, shutdown: CancellationToken) {
    // Firing alerts to keep re-sending, with when they started (wall clock).
    let mut active: BTreeMap<String, (Entry, SystemTime)> = BTreeMap::new();
    // What to post next: key → body.
    let mut pending: BTreeMap<String, Value> = BTreeMap::new();
    let mut backoff = FIRST_BACKOFF;
    let mut next_try = tokio::time::Instant::now();
    let web_base = cfg.web_base_url.clone();
    let web = web_base.as_deref();
    let mut resend = tokio::time::interval(cfg.resend_interval);
    resend.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            m = rx.recv() => {
                let (a, once) = match m {
                    None => break,
                    Some(Msg::Alert(a)) => (a, false),
                    Some(Msg::Once(a)) => (a, true),
                    Some(Msg::Forget(f)) => {
                        let prefix = format!("{f}/");
                        // A resolution not yet delivered still goes (resolved alerts are not
                        // active); a firing one is the new owner's to send.
                        pending.retain(|k, _| !(k.starts_with(&prefix) && active.contains_key(k)));
                        active.retain(|k, _| !k.starts_with(&prefix));
                        metrics.alertmanager_pending.set(pending.len() as i64);
                        continue;
                    }
                };
                let now = SystemTime::now();
                let k = key(&a);
                match a.status {
                    AlertStatus::Firing if once => {
                        let ends = now + cfg.resolve_grace;
                        pending.insert(k, to_postable(&a, now, ends, web));
                    }
                    AlertStatus::Firing => {
                        let (expires, ends) = match a.kind {
                            AlertKind::Incident => (Some(tokio::time::Instant::now() + cfg.incident_ttl), now + cfg.incident_ttl),
                            _ => (None, now + cfg.resolve_grace),
                        };
                        pending.insert(k.clone(), to_postable(&a, now, ends, web));
                        active.insert(k, (Entry { alert: a, expires }, now));
                    }
                    AlertStatus::Resolved => {
                        let starts = active.remove(&k).map_or(now, |(_, s)| s);
                        pending.insert(k, to_postable(&a, starts, now, web));
                    }
                }
                bound(&mut pending, &mut active, cfg.max_pending, &metrics);
            }
            _ = resend.tick() => {
                let (now, mono) = (SystemTime::now(), tokio::time::Instant::now());
                active.retain(|_, (e, _)| e.expires.is_none_or(|x| x > mono));
                for (k, (e, starts)) in &active {
                    let ends = now + e.expires.map_or(cfg.resolve_grace, |x| x - mono);
                    pending.entry(k.clone()).or_insert_with(|| to_postable(&e.alert, *starts, ends, web));
                }
                bound(&mut pending, &mut active, cfg.max_pending, &metrics);
            }
            _ = tokio::time::sleep_until(next_try), if !pending.is_empty() => {
                let batch: Vec<(String, Value)> = pending.iter().take(500).map(|(k, v)| (k.clone(), v.clone())).collect();
                let body = Value::Array(batch.iter().map(|(_, v)| v.clone()).collect()).to_string();
                let result = post.post(body).await;
                metrics.alertmanager_pending.set(pending.len() as i64);
                match result {
                    Ok(()) => {
                        for (k, v) in batch {
                            // Keep a newer state that arrived meanwhile.
                            if pending.get(&k) == Some(&v) {
                                pending.remove(&k);
                            }
                        }
                        metrics.alertmanager_posts.with_label_values(&["ok"]).inc();
                        metrics.alertmanager_pending.set(pending.len() as i64);
                        backoff = FIRST_BACKOFF;
                        next_try = tokio::time::Instant::now();
                    }
                    Err(e) => {
                        metrics.alertmanager_posts.with_label_values(&["error"]).inc();
                        tracing::warn!(error = %e, pending = pending.len(), retry_in = ?backoff, "Alertmanager delivery failed");
                        next_try = tokio::time::Instant::now() + backoff;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        }
    }
}
