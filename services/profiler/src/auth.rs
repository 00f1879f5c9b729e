//! Access to the profiler's HTTP server when tokens are set (`api_token`, `[[users]]`).
//!
//! Every token belongs to a user with a role (`config::User`): a **viewer** reads the pages
//! and the profile API, an **operator** may also start a run (`POST /run`; a viewer's token
//! gets 403 there). `api_token` is the operator `api`. Programs send
//! `Authorization: Bearer <token>`. A browser cannot, so the web view has a login page:
//! `POST /login` with a token sets a session cookie, `octant_session`, whose value is
//! `<user>.<expiry>.<HMAC-SHA256(token, "octant-web-session|<user>|<expiry>")>` in hex:
//! stateless (no session store; every profiler instance with the same users accepts it), it
//! expires after [`SESSION`], and changing a user's token ends that user's sessions. The cookie
//! is `HttpOnly` (no script reads it), `SameSite=Lax` (sent when a person follows a link from
//! Alertmanager, a chat or a mail — `Strict` would send them to the login page every time —
//! but not with other sites' subrequests or forms), `Path=/`, and `Secure` when the request
//! came over HTTPS (`X-Forwarded-Proto: https` from the proxy in front). A session only reads:
//! it authorises GET and HEAD, never `POST /run` (that takes an operator's bearer token, even
//! for an operator signed in), so no cross-site request can make a signed-in browser change
//! anything. A browser asking for a page without a session is sent to the login page and back
//! after it; any other client gets 401. A bearer token is compared with every user's, in
//! constant time each (how long a check takes does not say which user's token was near); a
//! session finds its user by name (names are not secret). Tokens are never logged; who signed
//! in and who started a run are.
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

use crate::config::{Role, User};
use crate::web::{self, esc};

/// How long a session lasts.
pub const SESSION: Duration = Duration::from_secs(12 * 3600);
pub const COOKIE: &str = "octant_session";

/// Wrong tokens a server accepts at `/login` within [`THROTTLE_WINDOW`] before it refuses every
/// sign-in until the window ends.
pub const MAX_FAILURES: u32 = 10;
pub const THROTTLE_WINDOW: Duration = Duration::from_secs(60);

/// The server's view of its users and their tokens.
#[derive(Clone)]
pub struct Auth {
    users: Arc<Vec<Principal>>,
    throttle: Arc<Mutex<Throttle>>,
}

/// A user as the server checks it: its token and the session key made from it.
struct Principal {
    name: String,
    role: Role,
    token: octant_runtime::config::Secret,
    key: hmac::Key,
}

/// Who a request is from (a request extension, set by [`require`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    pub user: String,
    pub role: Role,
    /// By a session cookie (a browser), not a bearer token.
    pub session: bool,
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
        let names: Vec<&str> = self.users.iter().map(|u| u.name.as_str()).collect();
        write!(f, "Auth {{ users: {names:?}, tokens: [redacted] }}")
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
    /// The server's users (`ProfilerConfig::principals`, checked: names and tokens unique).
    pub fn new(users: Vec<User>) -> Auth {
        let users = users
            .into_iter()
            .map(|u| Principal {
                key: hmac::Key::new(hmac::HMAC_SHA256, u.token.expose().as_bytes()),
                name: u.name,
                role: u.role,
                token: u.token,
            })
            .collect();
        Auth { users: Arc::new(users), throttle: Arc::new(Mutex::new(Throttle { since: Instant::now(), failures: 0 })) }
    }

    /// Checks a sign-in with `given` at `now`: `Ok(Some(user))` for a user's token,
    /// `Ok(None)` for a wrong one (counted), `Err(wait)` while sign-ins are throttled (not
    /// checked, not counted).
    fn sign_in(&self, given: Option<&str>, now: Instant) -> Result<Option<SignedIn>, Duration> {
        let mut t = self.throttle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(wait) = t.refused(now) {
            return Err(wait);
        }
        let user = given.and_then(|g| self.holder(g));
        if user.is_none() {
            t.failures += 1;
        }
        Ok(user.map(|u| SignedIn { user: u.name.clone(), role: u.role, session: true }))
    }

    fn message(user: &str, expiry: u64) -> String {
        format!("octant-web-session|{user}|{expiry}")
    }

    /// A session of `user` that expires at `expiry` (epoch seconds); `None` for no such user.
    pub fn session(&self, user: &str, expiry: u64) -> Option<String> {
        let u = self.users.iter().find(|u| u.name == user)?;
        Some(format!("{user}.{expiry}.{}", hex(hmac::sign(&u.key, Self::message(user, expiry).as_bytes()).as_ref())))
    }

    /// The user whose valid session `value` is, not expired at `now` (epoch seconds).
    fn session_user(&self, value: &str, now: u64) -> Option<&Principal> {
        let mut parts = value.splitn(3, '.');
        let (Some(user), Some(expiry), Some(mac)) = (parts.next(), parts.next(), parts.next()) else { return None };
        let (Ok(expiry), Some(mac)) = (expiry.parse::<u64>(), unhex(mac)) else { return None };
        let u = self.users.iter().find(|u| u.name == user)?;
        (expiry > now && hmac::verify(&u.key, Self::message(user, expiry).as_bytes(), &mac).is_ok()).then_some(u)
    }

    /// The user holding token `given`: every user's token is compared, in constant time each.
    fn holder(&self, given: &str) -> Option<&Principal> {
        self.users.iter().fold(None, |found, u| if same(given.as_bytes(), u.token.expose().as_bytes()) { Some(u) } else { found })
    }

    /// Who a request is from: a bearer token's user (a viewer only to read), or — to read
    /// (GET, HEAD) — a valid session's. A cookie never authorises a change (`POST /run`): a
    /// browser sends cookies with requests other pages make, so reading is all a session may
    /// do. `Err(403)` for a viewer's token asking for a change, `Err(401)` otherwise.
    pub fn check(&self, method: &axum::http::Method, headers: &HeaderMap) -> Result<SignedIn, (StatusCode, String)> {
        let reads = method == axum::http::Method::GET || method == axum::http::Method::HEAD;
        let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        let (user, session) = match bearer.and_then(|t| self.holder(t)) {
            Some(u) if reads || u.role == Role::Operator => (u, false),
            Some(u) => return Err((StatusCode::FORBIDDEN, format!("user {} is a viewer: this takes an operator's token\n", u.name))),
            None => match cookie(headers, COOKIE).and_then(|c| self.session_user(c, now_s())) {
                Some(u) if reads => (u, true),
                _ => return Err((StatusCode::UNAUTHORIZED, "a bearer token is required\n".into())),
            },
        };
        Ok(SignedIn { user: user.name.clone(), role: user.role, session })
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
pub async fn require(auth: Auth, mut req: Request, next: Next) -> Response {
    if req.uri().path() == "/login" || req.uri().path() == "/logout" {
        return next.run(req).await;
    }
    let denied = match auth.check(req.method(), req.headers()) {
        Ok(who) => {
            let fleet = req.uri().path() == "/";
            req.extensions_mut().insert(who.clone());
            let response = next.run(req).await;
            return if who.session { with_sign_out(&who, fleet, response).await } else { response };
        }
        Err(denied) => denied,
    };
    if denied.0 == StatusCode::FORBIDDEN {
        return denied.into_response();
    }
    let wants_html = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    if wants_html && req.method() == axum::http::Method::GET {
        let back = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let to = format!("/login?next={}", web::urlencode(back));
        return (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    }
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], denied.1).into_response()
}

/// A response to a signed-in browser: never stored by a cache (it is one user's, and after
/// signing out the Back button must not show it), and a page of the web view says who is
/// signed in, with a button to sign out, at the end of its navigation (the fleet page, which
/// has none, gets a navigation of its own). Other responses — evidence files above all, which
/// must read as written — pass unchanged.
async fn with_sign_out(who: &SignedIn, fleet: bool, mut response: Response) -> Response {
    response.headers_mut().insert(header::CACHE_CONTROL, axum::http::HeaderValue::from_static("private, no-store"));
    let html = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/html"));
    if !html {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 256 << 20).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the page could not be read back\n").into_response();
    };
    let page = String::from_utf8_lossy(&bytes);
    let form = format!(
        "<form method=\"post\" action=\"/logout\" class=\"signout\">Signed in as {} ({}) <button type=\"submit\">Sign out</button></form>",
        esc(&who.user),
        who.role.as_str()
    );
    let mut page = page.into_owned();
    match page.find(web::NAV).and_then(|i| page[i..].find("</nav>").map(|j| i + j)) {
        Some(end) => page.insert_str(end, &form),
        None if fleet => page = page.replacen("<body>", &format!("<body><nav aria-label=\"Session\">{form}</nav>"), 1),
        None => {}
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(page))
}

/// Whether the request came over HTTPS to the proxy in front (`X-Forwarded-Proto`).
fn over_https(headers: &HeaderMap) -> bool {
    headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|p| p.eq_ignore_ascii_case("https"))
}

/// `POST /logout`: signs this browser out (its cookie is cleared) and shows the login page.
/// Sessions are stateless, so a copy of the cookie taken before stays valid until it expires;
/// changing the user's token ends every session of that user. A browser's request from another
/// site (`Sec-Fetch-Site`, else an `Origin` other than the `Host`) is refused: no other site
/// signs a person out.
pub fn logout(headers: &HeaderMap) -> Response {
    let value = |h: &str| headers.get(h).and_then(|v| v.to_str().ok());
    let cross_site = match (value("sec-fetch-site"), value("origin"), value("host")) {
        (Some(site), _, _) => site != "same-origin" && site != "none",
        (None, Some(origin), Some(host)) => origin.split_once("://").map(|(_, h)| h) != Some(host),
        (None, Some(_), None) => true,
        (None, None, _) => false, // not a browser's form
    };
    if cross_site {
        return (StatusCode::FORBIDDEN, "signing out is for this server's own pages\n").into_response();
    }
    let cookie = format!("{COOKIE}=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0{}", if over_https(headers) { "; Secure" } else { "" });
    (StatusCode::SEE_OTHER, [(header::LOCATION, "/login".to_string()), (header::SET_COOKIE, cookie)]).into_response()
}

/// `GET /login`: the form.
pub fn login_page(next: &str, failed: bool) -> String {
    let mut s = web::page_start("Sign in to Octant");
    s.push_str("</header><main>");
    if failed {
        s.push_str("<p role=\"alert\" class=\"unsafe-tag\" id=\"login-error\">That token is not one this server was given.</p>");
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
    let who = match auth.sign_in(form.get("token").map(String::as_str), Instant::now()) {
        Ok(who) => who,
        Err(wait) => {
            let secs = wait.as_secs().max(1);
            tracing::warn!(retry_after_s = secs, "web view: sign-ins throttled after {MAX_FAILURES} wrong tokens");
            let body = format!("too many wrong tokens: sign-ins resume in {secs} s\n");
            return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, secs.to_string())], body).into_response();
        }
    };
    let Some(who) = who else {
        tracing::warn!("web view: a sign-in with a wrong token");
        let html = login_page(&next, true);
        return (StatusCode::UNAUTHORIZED, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    };
    tracing::info!(user = %who.user, role = who.role.as_str(), "web view: signed in");
    let expiry = now_s() + SESSION.as_secs();
    let https = over_https(headers);
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}{}",
        auth.session(&who.user, expiry).unwrap_or_default(),
        SESSION.as_secs(),
        if https { "; Secure" } else { "" }
    );
    (StatusCode::SEE_OTHER, [(header::LOCATION, next), (header::SET_COOKIE, cookie)]).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, token: &str, role: Role) -> User {
        User { name: name.into(), token: octant_runtime::config::Secret::new(token), role }
    }

    fn one(token: &str) -> Auth {
        Auth::new(vec![user("api", token, Role::Operator)])
    }

    #[test]
    fn sessions_are_signed_by_the_token_and_expire() {
        let auth = one("s3cret");
        let v = auth.session("api", 2_000).unwrap();
        assert!(v.starts_with("api.2000.") && auth.session("nobody", 2_000).is_none());
        assert!(auth.session_user(&v, 1_999).is_some());
        assert!(auth.session_user(&v, 2_000).is_none(), "expired");
        let other = one("other");
        assert!(other.session_user(&v, 1_000).is_none(), "another token's session");
        let forged = v.replacen(".2000.", ".9999.", 1);
        assert!(auth.session_user(&forged, 1_000).is_none(), "a moved expiry breaks the signature");
        assert!(
            auth.session_user("garbage", 0).is_none()
                && auth.session_user("1.zz", 0).is_none()
                && auth.session_user("api.1.zz", 0).is_none()
        );
        assert!(!format!("{auth:?}").contains("s3cret"));
        assert!(auth.holder("s3cret").is_some() && auth.holder("s3cre").is_none() && auth.holder("").is_none());
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("a=b; {COOKIE}={}", auth.session("api", now_s() + 60).unwrap()).parse().unwrap());
        assert!(auth.check(&axum::http::Method::GET, &h).is_ok());
        assert!(auth.check(&axum::http::Method::POST, &h).is_err(), "a session only reads");
        let mut b = HeaderMap::new();
        b.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert!(auth.check(&axum::http::Method::POST, &b).is_ok());
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

    /// Each user is who its token says, with its role: a viewer reads but may not start a run
    /// (403, not 401: the token is good, the role is not enough); a session names its user and
    /// ends when that user's token changes, not when another's does.
    #[test]
    fn users_have_roles_and_their_own_sessions() {
        let users = vec![
            user("api", "op-token", Role::Operator),
            user("alice", "alice-token", Role::Viewer),
            user("bob", "bob-token", Role::Operator),
        ];
        let auth = Auth::new(users.clone());
        let bearer = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
            h
        };
        let (get, post) = (axum::http::Method::GET, axum::http::Method::POST);
        assert_eq!(auth.check(&get, &bearer("alice-token")), Ok(SignedIn { user: "alice".into(), role: Role::Viewer, session: false }));
        let (status, why) = auth.check(&post, &bearer("alice-token")).unwrap_err();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(why.contains("alice is a viewer") && !why.contains("alice-token"), "{why}");
        assert_eq!(auth.check(&post, &bearer("bob-token")).map(|w| w.user), Ok("bob".into()));
        assert_eq!(auth.check(&post, &bearer("nope")).unwrap_err().0, StatusCode::UNAUTHORIZED);
        assert_eq!(auth.check(&get, &HeaderMap::new()).unwrap_err().0, StatusCode::UNAUTHORIZED);
        let debug = format!("{auth:?}");
        assert!(debug.contains("alice") && !debug.contains("-token"), "{debug}");
        // Sessions: alice's names alice; bob cannot pass his as hers.
        let alice = auth.session("alice", now_s() + 60).unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("{COOKIE}={alice}").parse().unwrap());
        assert_eq!(auth.check(&get, &h).map(|w| (w.user, w.session)), Ok(("alice".into(), true)));
        let bob = auth.session("bob", now_s() + 60).unwrap();
        assert!(auth.session_user(&bob.replacen("bob.", "alice.", 1), 0).is_none(), "a session is signed with its own user's token");
        // A new token for alice ends her sessions, not bob's.
        let rotated = Auth::new(vec![users[0].clone(), user("alice", "alice-token-2", Role::Viewer), users[2].clone()]);
        assert!(rotated.session_user(&alice, 0).is_none() && rotated.session_user(&bob, 0).is_some());
        // Signing in says who.
        assert_eq!(auth.sign_in(Some("bob-token"), Instant::now()).unwrap().map(|w| w.user), Some("bob".into()));
    }

    #[test]
    fn guessing_the_token_is_throttled() {
        let auth = one("s3cret");
        let t0 = Instant::now();
        auth.throttle.lock().unwrap().since = t0;
        for i in 0..MAX_FAILURES {
            assert_eq!(auth.sign_in(Some(&format!("guess-{i}")), t0), Ok(None));
        }
        assert_eq!(auth.sign_in(None, t0), Err(THROTTLE_WINDOW), "the form without a token counts too, and is refused now");
        let later = t0 + Duration::from_secs(45);
        assert_eq!(
            auth.sign_in(Some("s3cret"), later),
            Err(Duration::from_secs(15)),
            "even the token: a throttle that answered would still confirm guesses"
        );
        let next_window = t0 + THROTTLE_WINDOW;
        assert_eq!(auth.sign_in(Some("s3cret"), next_window).map(|w| w.map(|w| w.user)), Ok(Some("api".into())));
        assert_eq!(auth.sign_in(Some("wrong"), next_window), Ok(None), "a new window counts afresh");
        // Sessions and the bearer token are never throttled.
        let mut b = HeaderMap::new();
        b.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        for _ in 0..MAX_FAILURES {
            let _ = auth.sign_in(Some("wrong"), next_window);
        }
        assert!(auth.sign_in(Some("s3cret"), next_window).is_err());
        assert!(auth.check(&axum::http::Method::GET, &b).is_ok());
        let form: std::collections::BTreeMap<String, String> = [("token".to_string(), "s3cret".to_string())].into();
        let r = login(&auth, &HeaderMap::new(), &form);
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = r.headers()[header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
    }
}
