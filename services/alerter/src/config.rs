//! Alerter configuration (TOML; environment prefix `OCTANT_ALERTER`).

use std::time::Duration;

use octant_runtime::service::StreamSettings;
use serde::{Deserialize, Serialize};

use crate::alertmanager::AmConfig;
use crate::rules::RuleConfig;

/// Unknown keys are refused by `octant_runtime::config::load`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlerterConfig {
    /// `kafka`, `group_id`, `admin_addr`, `commit_interval`, `max_inflight`.
    #[serde(flatten)]
    pub stream: StreamSettings,
    /// Personal data and secrets redacted from dead letters (and, in the alerter, alerts): the
    /// shared `[redaction]` section (`OCTANT_REDACTION_FILE`, `OCTANT_REDACTION__…`).
    #[serde(default)]
    pub redaction: octant_runtime::redact::RedactionConfig,
    /// The shared `[evaluation]` section (`OCTANT_EVALUATION_FILE`): the alerter uses its
    /// `violations` — a step whose violations are all a declared policy's is no unsafe action,
    /// so it raises no incident.
    #[serde(default)]
    pub evaluation: octant_engine::EvaluationConfig,
    /// Alertmanager base URL (e.g. `http://alertmanager:9093`); unset: alerts go to Kafka only.
    /// No credentials in it: they go below, where they are kept secret.
    #[serde(default)]
    pub alertmanager_url: Option<String>,
    /// Basic authentication to Alertmanager (or the proxy in front of it): user …
    #[serde(default)]
    pub alertmanager_username: Option<String>,
    /// … and password (never logged, never in `Debug`).
    #[serde(default)]
    pub alertmanager_password: Option<octant_runtime::config::Secret>,
    /// Or a bearer token (never logged, never in `Debug`).
    #[serde(default)]
    pub alertmanager_bearer_token: Option<octant_runtime::config::Secret>,
    /// Consecutive clear windows before a firing veto alert resolves (hysteresis).
    #[serde(default = "default_resolve_after")]
    pub resolve_after: u32,
    /// Replace tool arguments in incidents by `[redacted]` (on by default: arguments may carry
    /// personal data or secrets).
    #[serde(default = "default_true")]
    pub redact_tool_arguments: bool,
    /// Base of the runbook links in alerts; `#<rule>` is appended. The default is the
    /// repository path of the runbooks: point it at where your deployment serves them.
    #[serde(default = "default_runbook")]
    pub runbook_base_url: String,
    /// External base URL of Octant's web view (the profiler's HTTP server, as people reach
    /// it, e.g. `https://octant.example.com`). Set: every alert sent to Alertmanager links its
    /// alert page (`generatorURL` and the `octant_url` annotation) and an incident its run page
    /// (`run_url`). Unset: no links.
    #[serde(default)]
    pub web_base_url: Option<String>,
    /// Firing alerts are re-sent to Alertmanager this often.
    #[serde(default = "default_resend", with = "humantime_serde")]
    pub resend_interval: Duration,
    /// `endsAt` of a firing veto alert is now + this (Alertmanager resolves it if re-sends stop).
    #[serde(default = "default_grace", with = "humantime_serde")]
    pub resolve_grace: Duration,
    /// How long an incident stays firing in Alertmanager.
    #[serde(default = "default_incident_ttl", with = "humantime_serde")]
    pub incident_ttl: Duration,
    /// Timeout of one POST to Alertmanager.
    #[serde(default = "default_am_timeout", with = "humantime_serde")]
    pub alertmanager_timeout: Duration,
    /// Bound on alert states waiting for Alertmanager.
    #[serde(default = "default_max_pending")]
    pub alertmanager_max_pending: usize,
}

fn default_resolve_after() -> u32 {
    3
}
fn default_true() -> bool {
    true
}
fn default_runbook() -> String {
    "deploy/runbooks.md".into()
}
fn default_resend() -> Duration {
    Duration::from_secs(60)
}
fn default_grace() -> Duration {
    Duration::from_secs(300)
}
fn default_incident_ttl() -> Duration {
    Duration::from_secs(3600)
}
fn default_am_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_max_pending() -> usize {
    10_000
}

impl Default for AlerterConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl AlerterConfig {
    pub fn check(&self) -> Result<(), String> {
        self.stream.check(&crate::ID)?;
        self.redaction.build()?;
        self.evaluation.check()?;
        if self.resolve_after == 0 {
            return Err("resolve_after must be at least 1".into());
        }
        if let Some(u) = &self.alertmanager_url {
            if !u.starts_with("http://") {
                return Err("alertmanager_url must be an http:// URL".into());
            }
            if u.trim_start_matches("http://").split('/').next().is_some_and(|authority| authority.contains('@')) {
                return Err("alertmanager_url must not carry credentials: set alertmanager_username and alertmanager_password, or alertmanager_bearer_token".into());
            }
        }
        if self.alertmanager_password.is_some() != self.alertmanager_username.is_some() {
            return Err("alertmanager_username and alertmanager_password go together".into());
        }
        if self.alertmanager_password.is_some() && self.alertmanager_bearer_token.is_some() {
            return Err("alertmanager: basic authentication or a bearer token, not both".into());
        }
        if let Some(u) = &self.web_base_url {
            octant_runtime::web::check_base_url("web_base_url", u)?;
        }
        if self.resolve_grace < self.resend_interval * 2 {
            return Err("resolve_grace must be at least twice resend_interval (or Alertmanager resolves between re-sends)".into());
        }
        Ok(())
    }

    pub fn rules(&self) -> RuleConfig {
        RuleConfig {
            resolve_after: self.resolve_after,
            redact_tool_arguments: self.redact_tool_arguments,
            runbook_base_url: self.runbook_base_url.clone(),
            redactor: self.redaction.build().expect("[redaction] is checked before the rules are built"),
            violations: self.evaluation.violations.clone(),
            ..RuleConfig::default()
        }
    }

    pub fn alertmanager(&self) -> Option<AmConfig> {
        self.alertmanager_url.as_ref().map(|url| AmConfig {
            url: url.clone(),
            web_base_url: self.web_base_url.clone(),
            resend_interval: self.resend_interval,
            resolve_grace: self.resolve_grace,
            incident_ttl: self.incident_ttl,
            max_pending: self.alertmanager_max_pending,
            request_timeout: self.alertmanager_timeout,
            authorization: match (&self.alertmanager_username, &self.alertmanager_password, &self.alertmanager_bearer_token) {
                (Some(user), Some(password), _) => {
                    use base64::Engine;
                    let pair = format!("{user}:{}", password.expose());
                    Some(octant_runtime::config::Secret::new(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))))
                }
                (_, _, Some(token)) => Some(octant_runtime::config::Secret::new(format!("Bearer {}", token.expose()))),
                _ => None,
            },
        })
    }
}
