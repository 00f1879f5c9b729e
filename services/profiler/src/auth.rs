//! Access to the profiler's HTTP server when `api_token` is set.
//!
//! Programs send `Authorization: Bearer <token>`. A browser cannot, so the web view has a
//! login page: `POST /login` with the token sets a session cookie, `octant_session`, whose
//! value is `<expiry>.<HMAC-SHA256(token, "octant-web-session|<expiry>")>` in hex: stateless
//! (no session store; every profiler instance with the same token accepts it), it expires
//! after [`SESSION`], and changing the token ends every session. The cookie is `HttpOnly`
//! (no script reads it), `SameSite=Lax` (sent when a person follows a link from Alertmanager,
//! a chat or a mail — `Strict` would send them to the login page every time — but not with
//! other sites' subrequests or forms), `Path=/`, and `Secure` when the request came over HTTPS
//! (`X-Forwarded-Proto: https` from the proxy in front). A session only reads: it authorises
//! GET and HEAD, never `POST /run` (that takes the bearer token), so no cross-site request
//! can make a signed-in browser change anything. A browser asking for a page without a
//! session is sent to the login page and back after it; any other client gets 401. The token
//! is compared in constant time and never logged.
//!
//! Guessing the token through the login page is throttled: after [`MAX_FAILURES`] wrong tokens
//! within [`THROTTLE_WINDOW`], every sign-in is refused with 429 and `Retry-After` until the
//! window ends — the right token too, or the throttle would still answer guesses. The count is
//! per server, not per client (behind a proxy every client has the proxy's address): a flood
//! of wrong tokens keeps people from signing in for a minute at a time, never programs with the
//! bearer token, and never sessions already open.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ring::hmac;

use crate::web::{self, esc};

/// How long a session lasts.
pub const SESSION: Duration = Duration::from_secs(12 * 3600);
pub const COOKIE: &str = "octant_session";

/// Wrong tokens a server accepts at `/login` within [`THROTTLE_WINDOW`] before it refuses every
/// sign-in until the window ends.
pub const MAX_FAILURES: u32 = 10;
pub const THROTTLE_WINDOW: Duration = Duration::from_secs(60);

/// The server's view of the token.
#[derive(Clone)]
pub struct Auth {
    token: octant_runtime::config::Secret,
    key: hmac::Key,
    throttle: Arc<Mutex<Throttle>>,
}

/// Failed sign-ins in the current fixed window.
#[derive(Debug)]
struct Throttle {
    since: Instant,
    failures: u32,
}

impl Throttle {
    /// `Some(wait)` while sign-ins are refused at `now`.
    fn refused(&mut self, now: Instant) -> Option<Duration> {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= THROTTLE_WINDOW {
            *self = Throttle { since: now, failures: 0 };
            return None;
        }
        (self.failures >= MAX_FAILURES).then(|| THROTTLE_WINDOW - elapsed)
    }
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Auth { token: [redacted] }")
    }
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// Constant-time equality of two byte strings (of any lengths).
fn same(a: &[u8], b: &[u8]) -> bool {
    // Equal HMACs of both: equal inputs, in time independent of where they differ.
    let k = hmac::Key::new(hmac::HMAC_SHA256, b"octant-compare");
    hmac::verify(&k, a, hmac::sign(&k, b).as_ref()).is_ok()
}

impl Auth {
    pub fn new(token: octant_runtime::config::Secret) -> Auth {
        let key = hmac::Key::new(hmac::HMAC_SHA256, token.expose().as_bytes());
        Auth { token, key, throttle: Arc::new(Mutex::new(Throttle { since: Instant::now(), failures: 0 })) }
    }

    /// Checks a sign-in with `given` at `now`: `Ok(true)` for the token, `Ok(false)` for a wrong
    /// one (counted), `Err(wait)` while sign-ins are throttled (not checked, not counted).
    fn sign_in(&self, given: Option<&str>, now: Instant) -> Result<bool, Duration> {
        let mut t = self.throttle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(wait) = t.refused(now) {
            return Err(wait);
        }
        let ok = given.is_some_and(|g| self.token_matches(g));
        if !ok {
            t.failures += 1;
        }
        Ok(ok)
    }

    fn message(expiry: u64) -> String {
        format!("octant-web-session|{expiry}")
    }

    /// A session value that expires at `expiry` (epoch seconds).
    pub fn session(&self, expiry: u64) -> String {
        format!("{expiry}.{}", hex(hmac::sign(&self.key, Self::message(expiry).as_bytes()).as_ref()))
    }

    /// Whether `value` is a session of this token, not expired at `now` (epoch seconds).
    pub fn valid_session(&self, value: &str, now: u64) -> bool {
        let Some((expiry, mac)) = value.split_once('.') else { return false };
        let (Ok(expiry), Some(mac)) = (expiry.parse::<u64>(), unhex(mac)) else { return false };
        expiry > now && hmac::verify(&self.key, Self::message(expiry).as_bytes(), &mac).is_ok()
    }

    fn token_matches(&self, given: &str) -> bool {
        same(given.as_bytes(), self.token.expose().as_bytes())
    }

    /// Whether a request carries the bearer token, or — to read (GET, HEAD) — a valid session
    /// cookie. A cookie never authorises a change (`POST /run`): a browser sends cookies with
    /// requests other pages make, so reading is all a session may do.
    pub fn allows(&self, method: &axum::http::Method, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| self.token_matches(t));
        let reads = method == axum::http::Method::GET || method == axum::http::Method::HEAD;
        bearer || (reads && cookie(headers, COOKIE).is_some_and(|c| self.valid_session(c, now_s())))
    }
}

/// The value of cookie `name`, if sent.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Where a login may send the browser back to: a path on this server, nothing else (no
/// `//host`, no scheme: an open redirect would let a link log someone in and send them away).
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') && !n.chars().any(char::is_control) => n.to_string(),
        _ => "/".into(),
    }
}

/// The middleware: lets through requests with the token or a session; sends a browser asking
/// for a page to the login page; answers 401 otherwise. The login page itself is open.
pub async fn require(auth: Auth, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/login" || auth.allows(req.method(), req.headers()) {
        return next.run(req).await;
    }
    let wants_html = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    if wants_html && req.method() == axum::http::Method::GET {
        let back = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let to = format!("/login?next={}", web::urlencode(back));
        return (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    }
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "a bearer token is required\n").into_response()
}

/// `GET /login`: the form.
pub fn login_page(next: &str, failed: bool) -> String {
    let mut s = web::page_start("Sign in to Octant");
    s.push_str("</header><main>");
    if failed {
        s.push_str("<p role=\"alert\" class=\"unsafe-tag\" id=\"login-error\">That token is not the one this server was given.</p>");
    }
    let invalid = if failed { " aria-invalid=\"true\" aria-describedby=\"login-error\"" } else { "" };
    s.push_str(&format!(
        "<form method=\"post\" action=\"/login\"><p><label for=\"token\">API token</label> \
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required{invalid}/></p>\
         <input type=\"hidden\" name=\"next\" value=\"{}\"/><p><button type=\"submit\">Sign in</button></p></form>\
         <p>The session lasts {} hours, in this browser only.</p></main></body></html>\n",
        esc(next),
        SESSION.as_secs() / 3600
    ));
    s
}

/// `POST /login` with form fields `token` and `next`.
pub fn login(auth: &Auth, headers: &HeaderMap, form: &std::collections::BTreeMap<String, String>) -> Response {
    let next = safe_next(form.get("next").map(String::as_str));
    let ok = match auth.sign_in(form.get("token").map(String::as_str), Instant::now()) {
        Ok(ok) => ok,
        Err(wait) => {
            let secs = wait.as_secs().max(1);
            tracing::warn!(retry_after_s = secs, "web view: sign-ins throttled after {MAX_FAILURES} wrong tokens");
            let body = format!("too many wrong tokens: sign-ins resume in {secs} s\n");
            return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, secs.to_string())], body).into_response();
        }
    };
    if !ok {
        tracing::warn!("web view: a sign-in with a wrong token");
        let html = login_page(&next, true);
        return (StatusCode::UNAUTHORIZED, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    }
    let expiry = now_s() + SESSION.as_secs();
    let https = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}{}",
        auth.session(expiry),
        SESSION.as_secs(),
        if https { "; Secure" } else { "" }
    );
    (StatusCode::SEE_OTHER, [(header::LOCATION, next), (header::SET_COOKIE, cookie)]).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_signed_by_the_token_and_expire() {
        let auth = Auth::new(octant_runtime::config::Secret::new("s3cret"));
        let v = auth.session(2_000);
        assert!(auth.valid_session(&v, 1_999));
        assert!(!auth.valid_session(&v, 2_000), "expired");
        let other = Auth::new(octant_runtime::config::Secret::new("other"));
        assert!(!other.valid_session(&v, 1_000), "another token's session");
        let forged = v.replacen("2000.", "9999.", 1);
        assert!(!auth.valid_session(&forged, 1_000), "a moved expiry breaks the signature");
        assert!(!auth.valid_session("garbage", 0) && !auth.valid_session("1.zz", 0));
        assert!(!format!("{auth:?}").contains("s3cret"));
        assert!(auth.token_matches("s3cret") && !auth.token_matches("s3cre") && !auth.token_matches(""));
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("a=b; {COOKIE}={}", auth.session(now_s() + 60)).parse().unwrap());
        assert!(auth.allows(&axum::http::Method::GET, &h));
        assert!(!auth.allows(&axum::http::Method::POST, &h), "a session only reads");
        let mut b = HeaderMap::new();
        b.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert!(auth.allows(&axum::http::Method::POST, &b));
        for (next, want) in [
            (Some("/alerts/a%2Fb?x=1"), "/alerts/a%2Fb?x=1"),
            (Some("//evil.example"), "/"),
            (Some("https://evil.example"), "/"),
            (Some("/\\evil"), "/"),
            (None, "/"),
        ] {
            assert_eq!(safe_next(next), want);
        }
        assert!(login_page("\"><script>", false).contains("value=\"&quot;&gt;&lt;script&gt;\""));
    }

    #[test]
    fn guessing_the_token_is_throttled() {
        let auth = Auth::new(octant_runtime::config::Secret::new("s3cret"));
        let t0 = Instant::now();
        auth.throttle.lock().unwrap().since = t0;
        for i in 0..MAX_FAILURES {
            assert_eq!(auth.sign_in(Some(&format!("guess-{i}")), t0), Ok(false));
        }
        assert_eq!(auth.sign_in(None, t0), Err(THROTTLE_WINDOW), "the form without a token counts too, and is refused now");
        let later = t0 + Duration::from_secs(45);
        assert_eq!(
            auth.sign_in(Some("s3cret"), later),
            Err(Duration::from_secs(15)),
            "even the token: a throttle that answered would still confirm guesses"
        );
        let next_window = t0 + THROTTLE_WINDOW;
        assert_eq!(auth.sign_in(Some("s3cret"), next_window), Ok(true));
        assert_eq!(auth.sign_in(Some("wrong"), next_window), Ok(false), "a new window counts afresh");
        // Sessions and the bearer token are never throttled.
        let mut b = HeaderMap::new();
        b.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        for _ in 0..MAX_FAILURES {
            let _ = auth.sign_in(Some("wrong"), next_window);
        }
        assert!(auth.sign_in(Some("s3cret"), next_window).is_err());
        assert!(auth.allows(&axum::http::Method::GET, &b));
        let form: std::collections::BTreeMap<String, String> = [("token".to_string(), "s3cret".to_string())].into();
        let r = login(&auth, &HeaderMap::new(), &form);
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = r.headers()[header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
    }
}
