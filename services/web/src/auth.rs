//! Sign-in to the web view when tokens are set (`api_token`, `[[users]]`; who holds which
//! token, and the throttle on wrong ones: `octant_runtime::access`).
//!
//! Programs send `Authorization: Bearer <token>`. A browser cannot, so the view has a sign-in
//! page: `POST /login` with a token sets a session cookie whose value is
//! `<user>.<expiry>.<HMAC-SHA256(server key, "octant-web-session|<user>|<expiry>|<SHA-256 of the user's token>")>`
//! in hex. The server key (`session_key`, else random per start) never leaves the server, so a
//! stolen cookie says nothing about the token (no offline guessing: without the key no guess
//! can be checked); the token's digest in the message means a new token for a user ends that
//! user's sessions. Stateless (no session store; every instance with the same key accepts it);
//! it expires after [`SESSION`]. The cookie is `HttpOnly`, `SameSite=Lax` (sent when a person
//! follows a link from Alertmanager, a chat or a mail, but not with other sites' subrequests or
//! forms), `Path=/`; over HTTPS (`X-Forwarded-Proto: https`, or `secure_cookie = true`) it is
//! `Secure` and named `__Host-octant_session` (a browser then refuses it from any other host or
//! path, and from plain HTTP). The view only reads, so a session authorises GET and HEAD.
//! Signing in and out refuse another site's request (`Sec-Fetch-Site`, else an `Origin` other
//! than the `Host`): no other site signs a person in or out. A browser asking for a page without
//! a session is sent to the sign-in page and back after it; any other client gets 401. Tokens
//! are never logged; who signed in is.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use octant_runtime::access::{Access, Refused, Role, Verified};
use ring::{digest, hmac};

use crate::page::{self, esc};

/// How long a session lasts.
pub const SESSION: Duration = Duration::from_secs(12 * 3600);
/// The cookie's name over plain HTTP, and over HTTPS (the `__Host-` prefix needs `Secure`).
pub const COOKIE: &str = "octant_session";
pub const SECURE_COOKIE: &str = "__Host-octant_session";

/// The server's users, its session key, and how its cookie is set.
#[derive(Clone)]
pub struct Auth {
    access: Access,
    key: hmac::Key,
    secure: bool,
}

/// Who a request is from (a request extension, set by [`require`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    pub user: String,
    pub role: Role,
    /// By a session cookie (a browser), not a bearer token.
    pub session: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Auth {{ access: {:?}, key: [redacted], secure: {} }}", self.access, self.secure)
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

impl Auth {
    /// `key`: the configured session key, or `None` for a random one.
    pub fn new(access: Access, key: Option<&[u8]>, secure: bool) -> Auth {
        let key = match key {
            Some(k) => hmac::Key::new(hmac::HMAC_SHA256, k),
            None => hmac::Key::generate(hmac::HMAC_SHA256, &ring::rand::SystemRandom::new()).expect("the system's random source"),
        };
        Auth { access, key, secure }
    }

    fn message(&self, user: &str, expiry: u64) -> Option<String> {
        let u = self.access.user(user)?;
        Some(format!("octant-web-session|{user}|{expiry}|{}", hex(digest::digest(&digest::SHA256, u.token.expose().as_bytes()).as_ref())))
    }

    /// A session of `user` that expires at `expiry` (epoch seconds); `None` for no such user.
    pub fn session(&self, user: &str, expiry: u64) -> Option<String> {
        let m = self.message(user, expiry)?;
        Some(format!("{user}.{expiry}.{}", hex(hmac::sign(&self.key, m.as_bytes()).as_ref())))
    }

    /// The user whose valid session `value` is, not expired at `now` (epoch seconds).
    fn session_user(&self, value: &str, now: u64) -> Option<Verified> {
        let mut parts = value.splitn(3, '.');
        let (Some(user), Some(expiry), Some(mac)) = (parts.next(), parts.next(), parts.next()) else { return None };
        let (Ok(expiry), Some(mac)) = (expiry.parse::<u64>(), unhex(mac)) else { return None };
        let m = self.message(user, expiry)?;
        (expiry > now && hmac::verify(&self.key, m.as_bytes(), &mac).is_ok())
            .then(|| Verified { user: user.to_string(), role: self.access.user(user).map_or(Role::Viewer, |u| u.role) })
    }

    /// Who a request is from: a bearer token's user (checked, and counted when wrong), or a
    /// valid session's — to read (GET, HEAD) only.
    pub fn check(&self, method: &axum::http::Method, headers: &HeaderMap) -> Result<SignedIn, (StatusCode, String, Option<Duration>)> {
        let reads = method == axum::http::Method::GET || method == axum::http::Method::HEAD;
        if !reads {
            return Err((StatusCode::METHOD_NOT_ALLOWED, "the web view only reads\n".into(), None));
        }
        if let Some(token) = Access::bearer(headers) {
            return match self.access.verify(Some(token), Instant::now()) {
                Ok(v) => Ok(SignedIn { user: v.user, role: v.role, session: false }),
                Err(Refused::Unknown) => Err((StatusCode::UNAUTHORIZED, "not a token this server was given\n".into(), None)),
                Err(Refused::Throttled(wait)) => Err(throttled(wait)),
            };
        }
        // Over HTTPS only the host-only cookie counts: a plain one could have been planted by a
        // sibling domain or over plain HTTP (the attacker's own session, to sign a person in as
        // the attacker), which `__Host-` exists to rule out.
        let names: &[&str] = if self.secure_for(headers) { &[SECURE_COOKIE] } else { &[SECURE_COOKIE, COOKIE] };
        match names.iter().find_map(|n| cookie(headers, n)).and_then(|c| self.session_user(c, now_s())) {
            Some(v) => Ok(SignedIn { user: v.user, role: v.role, session: true }),
            None => Err((StatusCode::UNAUTHORIZED, "a bearer token or a session is required\n".into(), None)),
        }
    }

    /// Whether the cookie is `Secure` with the `__Host-` name for this request.
    fn secure_for(&self, headers: &HeaderMap) -> bool {
        self.secure || over_https(headers)
    }
}

fn throttled(wait: Duration) -> (StatusCode, String, Option<Duration>) {
    let secs = wait.as_secs().max(1);
    tracing::warn!(retry_after_s = secs, "web view: token checks throttled after too many wrong tokens");
    (StatusCode::TOO_MANY_REQUESTS, format!("too many wrong tokens: checks resume in {secs} s\n"), Some(Duration::from_secs(secs)))
}

fn refusal((status, body, wait): (StatusCode, String, Option<Duration>)) -> Response {
    match wait {
        Some(w) => (status, [(header::RETRY_AFTER, w.as_secs().to_string())], body).into_response(),
        None => (status, body).into_response(),
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

/// Where a sign-in may send the browser back to: a path on this server, nothing else (no
/// `//host`, no scheme: an open redirect would let a link sign someone in and send them away).
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') && !n.chars().any(char::is_control) => n.to_string(),
        _ => "/".into(),
    }
}

/// Whether a browser's request comes from another site (`Sec-Fetch-Site`, else an `Origin`
/// other than the `Host`); a request without either is not a browser's form.
fn cross_site(headers: &HeaderMap) -> bool {
    let value = |h: &str| headers.get(h).and_then(|v| v.to_str().ok());
    match (value("sec-fetch-site"), value("origin"), value("host")) {
        (Some(site), _, _) => site != "same-origin" && site != "none",
        (None, Some(origin), Some(host)) => origin.split_once("://").map(|(_, h)| h) != Some(host),
        (None, Some(_), None) => true,
        (None, None, _) => false,
    }
}

/// The middleware: lets through requests with a token or a session; sends a browser asking
/// for a page to the sign-in page; answers 401 (429 while throttled) otherwise. The sign-in
/// page, the stylesheet and the fleet page's script are open.
pub async fn require(auth: Auth, mut req: Request, next: Next) -> Response {
    if matches!(req.uri().path(), "/login" | "/logout" | page::STYLESHEET_PATH) {
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
    if denied.0 != StatusCode::UNAUTHORIZED {
        return refusal(denied);
    }
    let wants_html = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    if wants_html && req.method() == axum::http::Method::GET && Access::bearer(req.headers()).is_none() {
        let back = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let to = format!("/login?next={}", page::urlencode(back));
        return (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    }
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], denied.1).into_response()
}

/// A response to a signed-in browser: never stored by a cache (it is one user's, and after
/// signing out the Back button must not show it), and a page of the web view says who is
/// signed in, with a button to sign out, at the end of its navigation. Other responses —
/// evidence files above all, which must read as written — pass unchanged.
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
    match page.find(page::NAV).and_then(|i| page[i..].find("</nav>").map(|j| i + j)) {
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

/// `POST /logout`: signs this browser out (its cookie is cleared) and shows the sign-in page.
/// Sessions are stateless, so a copy of the cookie taken before stays valid until it expires;
/// changing the user's token (or the session key) ends them.
pub fn logout(auth: &Auth, headers: &HeaderMap) -> Response {
    if cross_site(headers) {
        return (StatusCode::FORBIDDEN, "signing out is for this server's own pages\n").into_response();
    }
    // Both names cleared: a cookie of either kind left behind would keep the browser signed in.
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/login".to_string())]).into_response();
    let mut clear = vec![format!("{COOKIE}=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0")];
    if auth.secure_for(headers) {
        clear.push(format!("{SECURE_COOKIE}=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0; Secure"));
    }
    for c in clear {
        r.headers_mut().append(header::SET_COOKIE, c.parse().expect("a cookie header"));
    }
    r
}

/// `GET /login`: the form.
pub fn login_page(next: &str, failed: bool) -> String {
    let mut s = page::page_start("Sign in to Octant");
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
    if cross_site(headers) {
        return (StatusCode::FORBIDDEN, "signing in is for this server's own pages\n").into_response();
    }
    let next = safe_next(form.get("next").map(String::as_str));
    let who = match auth.access.verify(form.get("token").map(String::as_str), Instant::now()) {
        Ok(who) => who,
        Err(Refused::Throttled(wait)) => return refusal(throttled(wait)),
        Err(Refused::Unknown) => {
            tracing::warn!("web view: a sign-in with a wrong token");
            let html = login_page(&next, true);
            return (StatusCode::UNAUTHORIZED, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
        }
    };
    tracing::info!(user = %who.user, role = who.role.as_str(), "web view: signed in");
    let expiry = now_s() + SESSION.as_secs();
    let value = auth.session(&who.user, expiry).unwrap_or_default();
    let cookie = if auth.secure_for(headers) {
        format!("{SECURE_COOKIE}={value}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}; Secure", SESSION.as_secs())
    } else {
        format!("{COOKIE}={value}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}", SESSION.as_secs())
    };
    (StatusCode::SEE_OTHER, [(header::LOCATION, next), (header::SET_COOKIE, cookie)]).into_response()
}

#[cfg(test)]
mod tests {
    use octant_runtime::access::{MAX_FAILURES, THROTTLE_WINDOW, User};
    use octant_runtime::config::Secret;

    use super::*;

    fn user(name: &str, token: &str, role: Role) -> User {
        User { name: name.into(), token: Secret::new(token), role }
    }

    fn auth(users: Vec<User>, key: &[u8]) -> Auth {
        Auth::new(Access::new(users), Some(key), false)
    }

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn sessions_are_signed_by_the_server_key_and_expire() {
        let a = auth(vec![user("api", "s3cret-0123456789ab", Role::Operator)], KEY);
        let v = a.session("api", 2_000).unwrap();
        assert!(v.starts_with("api.2000.") && a.session("nobody", 2_000).is_none());
        assert!(!v.contains("s3cret") && a.session_user(&v, 1_999).is_some());
        assert!(a.session_user(&v, 2_000).is_none(), "expired");
        let other_key = auth(vec![user("api", "s3cret-0123456789ab", Role::Operator)], b"another-key-another-key-another-k");
        assert!(other_key.session_user(&v, 1_000).is_none(), "another server key's session");
        // The MAC is over the server key: the token alone cannot make or check one.
        let by_token = hmac::Key::new(hmac::HMAC_SHA256, b"s3cret-0123456789ab");
        let guess = hex(hmac::sign(&by_token, a.message("api", 2_000).unwrap().as_bytes()).as_ref());
        assert!(!v.ends_with(&guess));
        let rotated = auth(vec![user("api", "s3cret-0123456789ab-2", Role::Operator)], KEY);
        assert!(rotated.session_user(&v, 1_000).is_none(), "a new token ends the user's sessions");
        let forged = v.replacen(".2000.", ".9999.", 1);
        assert!(a.session_user(&forged, 1_000).is_none(), "a moved expiry breaks the signature");
        assert!(a.session_user("garbage", 0).is_none() && a.session_user("api.1.zz", 0).is_none());
        assert!(!format!("{a:?}").contains("s3cret"));
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("a=b; {COOKIE}={}", a.session("api", now_s() + 60).unwrap()).parse().unwrap());
        assert!(a.check(&axum::http::Method::GET, &h).is_ok_and(|w| w.session));
        assert_eq!(a.check(&axum::http::Method::POST, &h).unwrap_err().0, StatusCode::METHOD_NOT_ALLOWED, "the view only reads");
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

    /// Wrong bearer tokens count toward the throttle as wrong sign-ins do; while throttled the
    /// right token is refused too (429), open sessions are not.
    #[test]
    fn bearer_guesses_are_throttled_like_sign_ins() {
        let a = auth(vec![user("api", "s3cret-0123456789ab", Role::Operator)], KEY);
        let session = a.session("api", now_s() + 60).unwrap();
        let bearer = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
            h
        };
        let get = axum::http::Method::GET;
        for i in 0..MAX_FAILURES / 2 {
            assert_eq!(a.check(&get, &bearer(&format!("guess-{i}"))).unwrap_err().0, StatusCode::UNAUTHORIZED);
        }
        let form: std::collections::BTreeMap<String, String> = [("token".to_string(), "wrong".to_string())].into();
        for _ in MAX_FAILURES / 2..MAX_FAILURES {
            assert_eq!(login(&a, &HeaderMap::new(), &form).status(), StatusCode::UNAUTHORIZED);
        }
        let (status, _, wait) = a.check(&get, &bearer("s3cret-0123456789ab")).unwrap_err();
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(wait.is_some_and(|w| w <= THROTTLE_WINDOW));
        let right: std::collections::BTreeMap<String, String> = [("token".to_string(), "s3cret-0123456789ab".to_string())].into();
        let r = login(&a, &HeaderMap::new(), &right);
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(r.headers()[header::RETRY_AFTER].to_str().unwrap().parse::<u64>().is_ok_and(|s| (1..=60).contains(&s)));
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("{COOKIE}={session}").parse().unwrap());
        assert!(a.check(&get, &h).is_ok(), "an open session is never throttled");
    }

    #[test]
    fn sign_in_refuses_other_sites_and_sets_a_host_only_secure_cookie_over_https() {
        let a = auth(vec![user("alice", "alice-0123456789abcdef", Role::Viewer)], KEY);
        let form: std::collections::BTreeMap<String, String> =
            [("token".to_string(), "alice-0123456789abcdef".to_string()), ("next".to_string(), "/x".to_string())].into();
        for (k, v) in [("sec-fetch-site", "cross-site"), ("origin", "http://evil.example")] {
            let mut h = HeaderMap::new();
            h.insert(k, v.parse().unwrap());
            h.insert(header::HOST, "127.0.0.1:9107".parse().unwrap());
            assert_eq!(login(&a, &h, &form).status(), StatusCode::FORBIDDEN, "{k}: {v}");
        }
        let mut h = HeaderMap::new();
        h.insert("sec-fetch-site", "same-origin".parse().unwrap());
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        let r = login(&a, &h, &form);
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let c = r.headers()[header::SET_COOKIE].to_str().unwrap();
        assert!(
            c.starts_with("__Host-octant_session=alice.") && c.contains("; Secure") && c.contains("Path=/") && !c.contains("Domain"),
            "{c}"
        );
        let forced = Auth::new(Access::new(vec![user("alice", "alice-0123456789abcdef", Role::Viewer)]), Some(KEY), true);
        let c = login(&forced, &HeaderMap::new(), &form).headers()[header::SET_COOKIE].to_str().unwrap().to_string();
        assert!(c.starts_with("__Host-octant_session=") && c.ends_with("; Secure"), "{c}");
        // Over HTTPS a plain-named cookie (planted by a sibling domain or over HTTP) is not a session.
        let planted = forced.session("alice", now_s() + 60).unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("{COOKIE}={planted}").parse().unwrap());
        assert_eq!(forced.check(&axum::http::Method::GET, &h).unwrap_err().0, StatusCode::UNAUTHORIZED);
        h.insert(header::COOKIE, format!("{SECURE_COOKIE}={planted}").parse().unwrap());
        assert!(forced.check(&axum::http::Method::GET, &h).is_ok());
        let out = logout(&forced, &HeaderMap::new());
        let cleared: Vec<&str> = out.headers().get_all(header::SET_COOKIE).iter().map(|v| v.to_str().unwrap()).collect();
        assert!(
            cleared.iter().any(|c| c.starts_with("octant_session=;")) && cleared.iter().any(|c| c.starts_with("__Host-octant_session=;")),
            "{cleared:?}"
        );
    }
}
