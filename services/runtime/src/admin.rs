//! The admin HTTP server every service exposes: `/metrics` (Prometheus text format),
//! `/healthz` (alive) and `/readyz` (assigned and caught up, as the service reports it).
//! Readiness is also a gauge, `octant_service_ready{service}` (1 ready, 0 not), set at every
//! scrape, so Prometheus can alert on a service that stays unready.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use octant_contracts::Decoder;
use prometheus::{Encoder, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::RuntimeError;

/// A reason not to be ready that is judged when asked (at `/readyz` and at every scrape), not
/// when the service's loop last reported: a loop blocked on a broker that does not answer
/// cannot report anything.
pub type LiveCheck = Box<dyn Fn() -> Option<String> + Send + Sync>;

/// Readiness reported by a service, and live checks over it.
#[derive(Default)]
pub struct Health {
    ready: AtomicBool,
    detail: std::sync::Mutex<String>,
    live: std::sync::Mutex<Vec<LiveCheck>>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health").field("ready", &self.is_ready()).field("detail", &self.detail()).finish()
    }
}

impl Health {
    pub fn new() -> Arc<Health> {
        Arc::new(Health::default())
    }

    pub fn set_ready(&self, ready: bool, detail: impl Into<String>) {
        self.ready.store(ready, Ordering::SeqCst);
        *self.detail.lock().unwrap() = detail.into();
    }

    /// Adds a check that, when it gives a reason, makes the service not ready whatever it
    /// reported last.
    pub fn add_live_check(&self, check: impl Fn() -> Option<String> + Send + Sync + 'static) {
        self.live.lock().unwrap().push(Box::new(check));
    }

    fn live_reason(&self) -> Option<String> {
        self.live.lock().unwrap().iter().find_map(|c| c())
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst) && self.live_reason().is_none()
    }

    /// Why the service is not ready (a live check's reason first), or the detail given with
    /// the last readiness report.
    pub fn detail(&self) -> String {
        self.live_reason().unwrap_or_else(|| self.detail.lock().unwrap().clone())
    }
}

#[derive(Clone)]
struct AdminState {
    registry: Registry,
    health: Arc<Health>,
    service: &'static str,
}

/// Records read with a pre-specification Avro fingerprint, per service: the legacy producers
/// left (see `octant_contracts::codec`, "Fingerprint deprecation").
fn legacy_counter() -> &'static IntCounterVec {
    static LEGACY: std::sync::OnceLock<IntCounterVec> = std::sync::OnceLock::new();
    LEGACY.get_or_init(|| {
        IntCounterVec::new(
            Opts::new(
                "octant_legacy_fingerprint_records_total",
                "Avro single-object records read with a legacy (pre-specification) schema fingerprint, by service",
            ),
            &["service"],
        )
        .expect("valid metric")
    })
}

/// `decoder`, counting the legacy-fingerprint records it reads as `service` in `registry`.
pub fn count_legacy_fingerprints(registry: &Registry, service: &'static str, decoder: Decoder) -> Decoder {
    // Registered once per registry; the same counter serves every registry of the process.
    let _ = registry.register(Box::new(legacy_counter().clone()));
    let counter = legacy_counter().with_label_values(&[service]);
    decoder.on_legacy(std::sync::Arc::new(move || counter.inc()))
}

/// One gauge for every service of the process (the demo runs several on one registry).
fn ready_gauge() -> &'static IntGaugeVec {
    static READY: std::sync::OnceLock<IntGaugeVec> = std::sync::OnceLock::new();
    READY.get_or_init(|| {
        IntGaugeVec::new(Opts::new("octant_service_ready", "1 when the service is ready (/readyz answers 200), else 0"), &["service"])
            .expect("valid metric")
    })
}

async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
    // The gauge is shared by every admin server of the process: set and gathered under one
    // lock, or a scrape of another server between the two (another service, or another
    // instance in the same process) would report its readiness as this one's.
    static SCRAPE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let families = {
        let _one_at_a_time = SCRAPE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ready_gauge().with_label_values(&[s.service]).set(i64::from(s.health.is_ready()));
        s.registry.gather()
    };
    let mut buf = Vec::new();
    match TextEncoder::new().encode(&families, &mut buf) {
        Ok(()) => (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; version=0.0.4")], buf).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<AdminState>) -> impl IntoResponse {
    let detail = s.health.detail();
    if s.health.is_ready() {
        (StatusCode::OK, format!("ready {detail}\n"))
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("not ready {detail}\n"))
    }
}

/// The admin router of `service`, for services that add routes of their own.
pub fn router(service: &'static str, registry: Registry, health: Arc<Health>) -> Router {
    // Registered once per registry; the same gauge may serve several registries.
    let _ = registry.register(Box::new(ready_gauge().clone()));
    Router::new().route("/metrics", get(metrics)).route("/healthz", get(healthz)).route("/readyz", get(readyz)).with_state(AdminState {
        registry,
        health,
        service,
    })
}

/// How long a client has to send a request's headers, and then its body.
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The largest request body a server reads (a sign-in form; nothing Octant serves takes more).
pub const MAX_BODY: usize = 64 << 10;
/// Connections a server holds open at once; one more is closed as soon as it is accepted.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections one client address holds open at once: one client (a flood from one address)
/// cannot take every slot from the probes and Prometheus.
pub const MAX_CONNECTIONS_PER_CLIENT: usize = 64;

/// Open connections per client address; a slot is given back when its guard drops.
#[derive(Default, Clone)]
struct PerClient(Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>);

struct ClientSlot(PerClient, std::net::IpAddr);

impl PerClient {
    fn take(&self, ip: std::net::IpAddr) -> Option<ClientSlot> {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = m.entry(ip).or_default();
        if *n >= MAX_CONNECTIONS_PER_CLIENT {
            return None;
        }
        *n += 1;
        Some(ClientSlot(self.clone(), ip))
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut m = (self.0).0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = m.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

/// Reads a request's whole body within [`BODY_TIMEOUT`] and [`MAX_BODY`] before the handler
/// sees it: a body sent half and then left hanging is answered 408, a larger one 413.
async fn bounded_body(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::body::Body;
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => return (StatusCode::PAYLOAD_TOO_LARGE, format!("a request body is at most {MAX_BODY} bytes\n")).into_response(),
        Err(_) => return (StatusCode::REQUEST_TIMEOUT, "the request body did not arrive in time\n").into_response(),
    };
    next.run(axum::extract::Request::from_parts(parts, Body::from(bytes))).await
}

/// Binds `addr` (port 0 picks a free port) and serves `router` until `shutdown`.
/// Returns the bound address.
///
/// HTTP/1.1 only (what Prometheus, probes and browsers speak here), with limits a public
/// listener needs: headers within [`HEADER_TIMEOUT`], a body within [`BODY_TIMEOUT`] and
/// [`MAX_BODY`], at most [`MAX_CONNECTIONS`] open connections and [`MAX_CONNECTIONS_PER_CLIENT`]
/// from one address (a client holding connections open half-sent cannot starve the probes).
pub async fn serve(addr: SocketAddr, router: Router, shutdown: CancellationToken) -> Result<(SocketAddr, JoinHandle<()>), RuntimeError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| RuntimeError::Admin(format!("failed to bind {addr}: {e}")))?;
    let bound = listener.local_addr().map_err(|e| RuntimeError::Admin(e.to_string()))?;
    let router = router.layer(axum::middleware::from_fn(bounded_body));
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let per_client = PerClient::default();
    let handle = tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                _ = shutdown.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => (stream, peer.ip()),
                    Err(e) => {
                        // Out of descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %e, "admin server: accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let (stream, ip) = stream;
            let Some(client) = per_client.take(ip) else {
                drop(stream);
                continue;
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let service = hyper_util::service::TowerToHyperService::new(router.clone());
            let stop = shutdown.clone();
            tokio::spawn(async move {
                let _slots = (slot, client);
                let mut http = hyper::server::conn::http1::Builder::new();
                http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
                let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => {}
                    _ = stop.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn).await;
                    }
                }
            });
        }
    });
    Ok((bound, handle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use octant_contracts::codec::to_single_object_with;
    use octant_contracts::{Contract, FingerprintKind, Watermark};

    #[test]
    fn a_live_check_overrides_what_the_loop_reported_last() {
        let h = Health::new();
        h.set_ready(true, "4 partitions assigned");
        let silent = Arc::new(AtomicBool::new(false));
        let s = silent.clone();
        h.add_live_check(move || s.load(Ordering::SeqCst).then(|| "no answer from the brokers for 12 s".to_string()));
        assert!(h.is_ready());
        assert_eq!(h.detail(), "4 partitions assigned");
        // The loop is held up and reports nothing: the check, judged when asked, says so.
        silent.store(true, Ordering::SeqCst);
        assert!(!h.is_ready());
        assert_eq!(h.detail(), "no answer from the brokers for 12 s");
        silent.store(false, Ordering::SeqCst);
        assert!(h.is_ready());
    }

    #[test]
    fn legacy_fingerprint_records_are_counted_per_service() {
        let registry = Registry::new();
        let d = count_legacy_fingerprints(&registry, "test_service", Decoder::new());
        let w = Watermark {
            service: "scorer".into(),
            source_topic: "t".into(),
            source_partition: 0,
            source_partitions: 1,
            watermark: Some(1),
            idle: false,
            produced_at: 2,
        };
        let legacy = to_single_object_with(&w, FingerprintKind::Legacy).unwrap();
        let standard = to_single_object_with(&w, FingerprintKind::Standard).unwrap();
        assert_ne!(legacy, standard);
        for bytes in [&legacy, &standard, &legacy] {
            assert_eq!(d.decode::<Watermark>(bytes).unwrap(), w);
        }
        let counted: f64 = registry
            .gather()
            .iter()
            .filter(|f| f.name() == "octant_legacy_fingerprint_records_total")
            .flat_map(|f| {
                f.get_metric()
                    .iter()
                    .filter(|m| m.get_label().iter().any(|l| l.value() == "test_service"))
                    .map(|m| m.get_counter().get_value())
                    .collect::<Vec<_>>()
            })
            .sum();
        assert_eq!(counted, 2.0, "two legacy records read, the standard one not counted ({})", Watermark::FULL_NAME);
    }
}
