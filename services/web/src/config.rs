//! The web view's configuration (TOML; environment prefix `OCTANT_WEB`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use octant_runtime::KafkaConfig;
use octant_runtime::access::{self, User};
use octant_runtime::config::Secret;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    /// The topics the fleet page follows (`octant.windows`, `octant.alerts`). Empty brokers:
    /// the fleet page says so; every other page reads the lake.
    #[serde(default)]
    pub kafka: KafkaConfig,
    /// Where the pages, the probes and `/metrics` are served (loopback by default).
    #[serde(default = "default_addr")]
    pub admin_addr: SocketAddr,
    /// The operator `api`'s token (`Authorization: Bearer`, or the sign-in form). Never logged.
    #[serde(default)]
    pub api_token: Option<Secret>,
    /// People and programs, each with a token of its own and a role (`viewer`, `operator`;
    /// the web view only reads, so both read everything: the role is shown and logged). With
    /// neither, the server is open, which is only allowed on a loopback address.
    #[serde(default)]
    pub users: Vec<User>,
    /// The shared `[evaluation]` section (`OCTANT_EVALUATION_FILE`): the run page uses its
    /// `violations` — a step whose violations are all a declared policy's is not marked unsafe.
    #[serde(default)]
    pub evaluation: octant_engine::EvaluationConfig,
    /// The lake (what the lake writer writes): a directory or an object-store URL. Read only.
    #[serde(default = "default_lake")]
    pub lake: PathBuf,
    /// Object-store options, as the lake writer's (secrets never logged).
    #[serde(default)]
    pub storage: octant_lake::StorageOptions,
    /// The profiler's evidence packages (`<evidence>/<system>/<version>/<source>/<period>/`),
    /// read for the profile pages and downloads. Read only.
    #[serde(default = "default_evidence")]
    pub evidence: PathBuf,
    /// How often the fleet page reloads its live state in the browser.
    #[serde(default = "default_refresh", with = "humantime_serde")]
    pub refresh: Duration,
    /// The key sessions are signed with (at least 32 characters; every instance behind one
    /// address needs the same). Unset: a random key per start (a restart signs everyone out).
    #[serde(default)]
    pub session_key: Option<Secret>,
    /// Mark the session cookie `Secure` (and name it `__Host-octant_session`) on every
    /// response, not only behind a proxy that says `X-Forwarded-Proto: https`.
    #[serde(default)]
    pub secure_cookie: bool,
    /// The host names the pages answer to (`name:port` as the browser sends `Host`, or a bare
    /// name for any port; an IPv6 address in brackets, `[::1]`). A page asked for under another
    /// name (a DNS-rebinding site pointing its name at this address) gets 421. Empty: any name
    /// when tokens are set; without tokens (an open view, on loopback) the loopback names only.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

fn default_addr() -> SocketAddr {
    "127.0.0.1:9107".parse().unwrap()
}
fn default_lake() -> PathBuf {
    "octant-lake".into()
}
fn default_evidence() -> PathBuf {
    "octant-evidence".into()
}
fn default_refresh() -> Duration {
    Duration::from_secs(5)
}

impl Default for WebConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

/// The names an open (tokenless, loopback) web view answers to.
pub const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The shortest session key.
pub const MIN_SESSION_KEY: usize = 32;

impl WebConfig {
    /// Who may read the pages: the `users`, and `api_token` as the operator `api`.
    pub fn principals(&self) -> Vec<User> {
        access::principals(self.api_token.as_ref(), &self.users)
    }

    pub fn check(&self) -> Result<(), String> {
        let users = self.principals();
        access::check(&users)?;
        if users.is_empty() && !self.admin_addr.ip().is_loopback() {
            return Err(format!(
                "admin_addr {} is not a loopback address and no token is set: set api_token or [[users]] (an open web view on the network shows every run)",
                self.admin_addr
            ));
        }
        if let Some(k) = &self.session_key
            && k.expose().chars().count() < MIN_SESSION_KEY
        {
            return Err(format!("session_key: at least {MIN_SESSION_KEY} characters"));
        }
        if self.refresh.is_zero() {
            return Err("refresh must be positive".into());
        }
        if let Some(h) = self.allowed_hosts.iter().find(|h| h.is_empty() || h.contains(['/', ' '])) {
            return Err(format!("allowed_hosts: {h:?} is not a host name (with its port)"));
        }
        if let Some(h) = self.allowed_hosts.iter().find(|h| !h.starts_with('[') && h.matches(':').count() > 1) {
            return Err(format!("allowed_hosts: {h:?}: write an IPv6 address in brackets, as a browser sends it ([::1], [::1]:9107)"));
        }
        Ok(())
    }

    /// The host names the pages answer to ([`WebConfig::allowed_hosts`]); empty: any.
    pub fn hosts(&self) -> Vec<String> {
        if self.allowed_hosts.is_empty() && self.principals().is_empty() {
            return LOOPBACK_NAMES.iter().map(|h| h.to_string()).collect();
        }
        self.allowed_hosts.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_checks() {
        let c = WebConfig::default();
        c.check().unwrap();
        assert_eq!(c.admin_addr.to_string(), "127.0.0.1:9107");
        let open = WebConfig { admin_addr: "0.0.0.0:9107".parse().unwrap(), ..WebConfig::default() };
        assert!(open.check().unwrap_err().contains("not a loopback address"));
        let guarded = WebConfig { api_token: Some(Secret::new("0123456789abcdef-api")), ..open };
        guarded.check().unwrap();
        let short = WebConfig { session_key: Some(Secret::new("short-key-value")), ..WebConfig::default() };
        assert!(short.check().unwrap_err().contains("session_key"));
        let c: WebConfig = toml::from_str("refresh = \"2s\"\n[[users]]\nname = \"ann\"\ntoken = \"ann-0123456789abcdef\"\n").unwrap();
        c.check().unwrap();
        assert!(c.hosts().is_empty(), "with tokens, any name unless listed");
        assert_eq!(WebConfig::default().hosts(), LOOPBACK_NAMES, "open: the loopback names only");
        let v6 = WebConfig { allowed_hosts: vec!["::1".into()], ..WebConfig::default() };
        assert!(v6.check().unwrap_err().contains("in brackets"));
        assert!(!format!("{c:?}").contains("ann-0123456789abcdef"));
    }
}
