//! Profiler configuration (TOML; environment prefix `OCTANT_PROFILER`): the schedule and where
//! profiles go, with what a report is made of ([`ReportConfig`]) at the same level.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use octant_report::ReportConfig;
use octant_runtime::KafkaConfig;
use octant_runtime::access::{self, User};
use octant_runtime::config::Secret;
use serde::{Deserialize, Serialize};

/// Unknown keys are refused by the loader (`octant_runtime::config::from_table`), which sees
/// through the flattened report settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfilerConfig {
    /// Where profiles are published (`octant.profiles`). Empty brokers: profiles are only
    /// written as evidence packages.
    #[serde(default)]
    pub kafka: KafkaConfig,
    /// The admin server (`/metrics`, `/healthz`, `/readyz`, `POST /run`).
    #[serde(default = "default_admin")]
    pub admin_addr: SocketAddr,
    /// When set (or `users`), `POST /run` requires an operator's `Authorization: Bearer
    /// <token>`; this token is the operator `api`. Never logged.
    #[serde(default)]
    pub api_token: Option<Secret>,
    /// Named tokens with roles: an `operator` may start a run, a `viewer` may not (403).
    #[serde(default)]
    pub users: Vec<User>,
    /// Where evidence packages go: `<evidence>/<system>/<version>/<source>/<period>/` (the web
    /// view reads them there).
    #[serde(default = "default_evidence")]
    pub evidence: PathBuf,
    /// Profile periods, each ending at the time of the run (default: last 24 h and last 7 d).
    #[serde(default = "default_periods", with = "periods_serde")]
    pub periods: Vec<Duration>,
    /// How often the scheduled run happens (on-demand runs: `POST /run`, `octant profile`).
    #[serde(default = "default_every", with = "humantime_serde")]
    pub every: Duration,
    /// The lake, the evaluation, gates, raters' thresholds, the pane-sum store, family reports
    /// and release comparisons (top-level keys).
    #[serde(flatten)]
    pub report: ReportConfig,
}

mod periods_serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|d| humantime::format_duration(*d).to_string()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        let v = Vec::<String>::deserialize(d)?;
        v.iter().map(|s| humantime::parse_duration(s).map_err(serde::de::Error::custom)).collect()
    }
}

fn default_admin() -> SocketAddr {
    "127.0.0.1:9105".parse().unwrap()
}
fn default_evidence() -> PathBuf {
    "octant-evidence".into()
}
fn default_periods() -> Vec<Duration> {
    vec![Duration::from_secs(24 * 3600), Duration::from_secs(7 * 24 * 3600)]
}
fn default_every() -> Duration {
    Duration::from_secs(300)
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl ProfilerConfig {
    /// Who may start a run: the `users`, and `api_token` as the operator `api`. Empty: anyone
    /// who reaches the admin address.
    pub fn principals(&self) -> Vec<User> {
        access::principals(self.api_token.as_ref(), &self.users)
    }

    pub fn check(&self) -> Result<(), String> {
        access::check(&self.principals())?;
        if self.periods.is_empty() || self.periods.iter().any(|p| p.is_zero()) {
            return Err("periods must be a non-empty list of positive durations".into());
        }
        self.report.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_the_flattened_report_settings() {
        let c = ProfilerConfig::default();
        c.check().unwrap();
        assert_eq!(c.periods.iter().map(|d| octant_report::config::period_name(*d)).collect::<Vec<_>>(), ["24h", "7d"]);
        let root: toml::Table =
            toml::from_str("periods = [\"1h\", \"30d\"]\nlake = \"/l\"\n[gates.task_success]\nouter = 0.5\ninner = 0.9\n").unwrap();
        let c: ProfilerConfig = octant_runtime::config::from_table(root).unwrap();
        assert_eq!(c.periods, [Duration::from_secs(3600), Duration::from_secs(30 * 86_400)]);
        assert_eq!((c.report.lake.to_str(), c.report.gates.len()), (Some("/l"), 1));
        c.check().unwrap();
        let typo: toml::Table = toml::from_str("evry = \"5m\"\n").unwrap();
        let e = octant_runtime::config::from_table::<ProfilerConfig>(typo).unwrap_err().to_string();
        assert!(e.contains("evry"), "{e}");
        let short = ProfilerConfig { api_token: Some(Secret::new("short")), ..ProfilerConfig::default() };
        assert!(short.check().unwrap_err().contains("at least 16"));
    }
}
