//! Who may use an Octant HTTP server (the profiler's API, the web view): users, each with a
//! token and a role, checked in constant time, with wrong tokens throttled.
//!
//! A **viewer** reads; an **operator** may also change something (the profiler's `POST /run`).
//! `api_token`, where a service has one, is the operator `api`. Tokens are at least
//! [`MIN_TOKEN_LEN`] characters (a short token is guessed, throttle or not) and never logged;
//! names are (who signed in, who started a run).
//!
//! Every wrong token counts, whether it came as `Authorization: Bearer` or through a sign-in
//! form: after [`MAX_FAILURES`] within [`THROTTLE_WINDOW`] every token check is refused (429
//! with `Retry-After`) until the window ends — the right token too, or the throttle would still
//! answer guesses. The count is per server, not per client (behind a proxy every client has the
//! proxy's address, and per-address counts would give an attacker with many addresses many
//! guesses): a flood of wrong tokens keeps token holders out for a minute at a time, never open
//! sessions, never the probes or `/metrics`, and caps guessing at ten tokens a minute.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use ring::hmac;
use serde::{Deserialize, Serialize};

use crate::config::Secret;

/// The shortest token a server accepts (characters).
pub const MIN_TOKEN_LEN: usize = 16;
/// Wrong tokens a server accepts within [`THROTTLE_WINDOW`] before it refuses every token
/// check until the window ends.
pub const MAX_FAILURES: u32 = 10;
pub const THROTTLE_WINDOW: Duration = Duration::from_secs(60);

/// A person or program with its own token (`[[users]]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Letters, digits, `_` and `-` (it is part of the web view's session cookie), at most 64.
    pub name: String,
    pub token: Secret,
    #[serde(default)]
    pub role: Role,
}

/// What a user may do: read (`viewer`), or read and start runs (`operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    Viewer,
    Operator,
}

impl Role {
    /// Its name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
        }
    }
}

/// Who may use a server: the `users`, and `api_token` as the operator `api`. Empty: the
/// server is open.
pub fn principals(api_token: Option<&Secret>, users: &[User]) -> Vec<User> {
    let api = api_token.map(|t| User { name: "api".into(), token: t.clone(), role: Role::Operator });
    api.into_iter().chain(users.iter().cloned()).collect()
}

/// The checks on a server's principals; the message names the user, never the token.
pub fn check(users: &[User]) -> Result<(), String> {
    for (i, u) in users.iter().enumerate() {
        if u.name.is_empty() || u.name.len() > 64 || !u.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(format!("user {:?}: a name is 1 to 64 letters, digits, _ or -", u.name));
        }
        let n = u.token.expose().chars().count();
        if n == 0 {
            return Err(format!("user {}: an empty token", u.name));
        }
        if n < MIN_TOKEN_LEN {
            return Err(format!("user {}: a token of {n} characters; at least {MIN_TOKEN_LEN}", u.name));
        }
        if let Some(o) = users[..i].iter().find(|o| o.name == u.name) {
            return Err(format!("user {}: named twice{}", o.name, if o.name == "api" { " (api is api_token's name)" } else { "" }));
        }
        // A token must say who it is: the same token for two users would be either of them.
        if let Some(o) = users[..i].iter().find(|o| o.token == u.token) {
            return Err(format!("users {} and {} have the same token", o.name, u.name));
        }
    }
    Ok(())
}

/// A user a token was found to belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub user: String,
    pub role: Role,
}

/// The server's users and the throttle on wrong tokens.
#[derive(Clone)]
pub struct Access {
    users: Arc<Vec<User>>,
    throttle: Arc<Mutex<Throttle>>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.users.iter().map(|u| u.name.as_str()).collect();
        write!(f, "Access {{ users: {names:?}, tokens: [redacted] }}")
    }
}

/// Wrong tokens in the current fixed window.
#[derive(Debug)]
struct Throttle {
    since: Instant,
    failures: u32,
}

impl Throttle {
    /// `Some(wait)` while token checks are refused at `now`.
    fn refused(&mut self, now: Instant) -> Option<Duration> {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= THROTTLE_WINDOW {
            *self = Throttle { since: now, failures: 0 };
            return None;
        }
        (self.failures >= MAX_FAILURES).then(|| THROTTLE_WINDOW - elapsed)
    }
}

/// Constant-time equality of two byte strings (of any lengths).
fn same(a: &[u8], b: &[u8]) -> bool {
    // Equal HMACs of both: equal inputs, in time independent of where they differ.
    let k = hmac::Key::new(hmac::HMAC_SHA256, b"octant-compare");
    hmac::verify(&k, a, hmac::sign(&k, b).as_ref()).is_ok()
}

/// Why a token check did not find a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No token, or not one this server was given (counted).
    Unknown,
    /// Too many wrong tokens: checks resume after this long (not checked, not counted).
    Throttled(Duration),
}

impl Access {
    /// The server's users (checked with [`check`]).
    pub fn new(users: Vec<User>) -> Access {
        Access { users: Arc::new(users), throttle: Arc::new(Mutex::new(Throttle { since: Instant::now(), failures: 0 })) }
    }

    pub fn is_open(&self) -> bool {
        self.users.is_empty()
    }

    /// The user named `name` (names are not secret: a session cookie carries one).
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.iter().find(|u| u.name == name)
    }

    /// The user holding token `given` at `now`: every user's token is compared, in constant
    /// time each (how long a check takes does not say whose token was near). A wrong token is
    /// counted toward the throttle; a missing one is no guess and is not (a probe or a job
    /// without a token must not lock the token holders out).
    pub fn verify(&self, given: Option<&str>, now: Instant) -> Result<Verified, Refused> {
        let Some(given) = given.filter(|g| !g.is_empty()) else { return Err(Refused::Unknown) };
        let mut t = self.throttle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(wait) = t.refused(now) {
            return Err(Refused::Throttled(wait));
        }
        let found = self.users.iter().fold(None, |f, u| if same(given.as_bytes(), u.token.expose().as_bytes()) { Some(u) } else { f });
        match found {
            Some(u) => Ok(Verified { user: u.name.clone(), role: u.role }),
            None => {
                t.failures += 1;
                Err(Refused::Unknown)
            }
        }
    }

    /// The bearer token of a request, if it sent one.
    pub fn bearer(headers: &HeaderMap) -> Option<&str> {
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, token: &str, role: Role) -> User {
        User { name: name.into(), token: Secret::new(token), role }
    }

    #[test]
    fn users_are_named_once_with_long_tokens_of_their_own() {
        let ok = principals(
            Some(&Secret::new("t0-0123456789abcdef")),
            &[user("alice", "t1-0123456789abcdef", Role::Viewer), user("ops-bot", "t2-0123456789abcdef", Role::Operator)],
        );
        check(&ok).unwrap();
        let who: Vec<(&str, Role)> = ok.iter().map(|u| (u.name.as_str(), u.role)).collect();
        assert_eq!(who, [("api", Role::Operator), ("alice", Role::Viewer), ("ops-bot", Role::Operator)]);
        let long = "0123456789abcdef";
        for (users, error) in [
            (vec![user("a.b", long, Role::Viewer)], "a name is 1 to 64"),
            (vec![user("a", "", Role::Viewer)], "an empty token"),
            (vec![user("a", "short-token", Role::Viewer)], "a token of 11 characters; at least 16"),
            (principals(Some(&Secret::new("t0-0123456789abcdef")), &[user("api", long, Role::Viewer)]), "api is api_token's name"),
            (vec![user("a", long, Role::Viewer), user("b", long, Role::Viewer)], "users a and b have the same token"),
        ] {
            let e = check(&users).unwrap_err();
            assert!(e.contains(error) && !e.contains(long) && !e.contains("short-token"), "{e}");
        }
        assert!(toml::from_str::<User>("name = \"a\"\ntoken = \"t\"\nrole = \"admin\"\n").is_err());
        let access = Access::new(ok);
        assert!(!format!("{access:?}").contains("0123456789abcdef"));
    }

    /// Wrong tokens are counted however they come; at the limit the right token is refused
    /// too until the window ends (else the throttle would still answer guesses).
    #[test]
    fn wrong_tokens_are_throttled() {
        let access = Access::new(vec![user("alice", "alice-0123456789abcdef", Role::Viewer)]);
        let t0 = Instant::now();
        assert_eq!(access.verify(Some("alice-0123456789abcdef"), t0).unwrap().user, "alice");
        for i in 0..MAX_FAILURES {
            assert_eq!(access.verify(Some(&format!("guess-{i}")), t0), Err(Refused::Unknown));
        }
        let refused = access.verify(Some("alice-0123456789abcdef"), t0 + Duration::from_secs(1));
        assert!(
            matches!(refused, Err(Refused::Throttled(w)) if w <= Duration::from_secs(59) && w > Duration::from_secs(58)),
            "{refused:?}"
        );
        assert_eq!(access.verify(Some("guess-again"), t0 + THROTTLE_WINDOW).unwrap_err(), Refused::Unknown, "a new window counts again");
        for _ in 0..3 * MAX_FAILURES {
            assert_eq!(access.verify(None, t0 + THROTTLE_WINDOW), Err(Refused::Unknown), "no token is no guess");
        }
        assert_eq!(access.verify(Some("alice-0123456789abcdef"), t0 + THROTTLE_WINDOW).unwrap().role, Role::Viewer);
    }
}
