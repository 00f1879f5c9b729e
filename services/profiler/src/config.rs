//! Profiler configuration (TOML; environment prefix `OCTANT_PROFILER`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use octant_core::gate::Thresholds;
use octant_core::stats::bootstrap::BootstrapSpec;
use octant_engine::EvaluationConfig;
use octant_runtime::KafkaConfig;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilerConfig {
    /// Where profiles are published (`octant.profiles`). Empty brokers: profiles are only
    /// written as evidence packages and served over HTTP.
    #[serde(default)]
    pub kafka: KafkaConfig,
    #[serde(default = "default_admin")]
    pub admin_addr: SocketAddr,
    /// When set, the profile API (`/profiles…`, `/run`) requires `Authorization: Bearer <token>`
    /// (`/metrics`, `/healthz`, `/readyz` stay open for probes and Prometheus). Never logged.
    #[serde(default)]
    pub api_token: Option<octant_runtime::config::Secret>,
    /// Named tokens, each with a role: a `viewer` reads the web view and the profile API, an
    /// `operator` may also start a run (`POST /run`). `api_token` is the operator `api`. With
    /// neither, the server is open (loopback by default). Tokens are never logged; the name is
    /// (who signed in, who started a run).
    #[serde(default)]
    pub users: Vec<User>,
    /// The lake (what the lake writer writes): a directory or an object-store URL.
    #[serde(default = "default_lake")]
    pub lake: PathBuf,
    /// Object-store options, as the lake writer's (secrets never logged).
    #[serde(default)]
    pub storage: octant_lake::StorageOptions,
    /// Where evidence packages go: `<evidence>/<system>/<version>/<source>/<period>/`.
    #[serde(default = "default_evidence")]
    pub evidence: PathBuf,
    /// Profile periods, each ending at the time of the run (default: last 24 h and last 7 d).
    #[serde(default = "default_periods", with = "periods_serde")]
    pub periods: Vec<Duration>,
    /// How often the scheduled run happens (on-demand runs: `POST /run`, `octant profile`).
    #[serde(default = "default_every", with = "humantime_serde")]
    pub every: Duration,
    /// How often the web view's fleet page (`/`) reloads its live state in the browser.
    #[serde(default = "default_web_refresh", with = "humantime_serde")]
    pub web_refresh: Duration,
    /// How observations become verdicts: the same `[evaluation]` section the aggregator reads
    /// (bootstrap, budgets, profile rules; the window geometry is the aggregator's), so a
    /// profile of a closed window's span equals the aggregator's window.
    #[serde(default)]
    pub evaluation: EvaluationConfig,
    /// Two-tier gate thresholds by metric id (design §1.5). No entry: no gate.
    #[serde(default)]
    pub gates: BTreeMap<String, Thresholds>,
    /// Efficacy Index weights by metric id (every gated metric needs one). No entry: no EI.
    #[serde(default)]
    pub weights: BTreeMap<String, f64>,
    /// Judge verdicts at or above this count as success for Cohen's κ (keep equal to the
    /// scorer's `judge_threshold`).
    #[serde(default = "default_judge_threshold")]
    pub judge_threshold: f64,
    /// A metric judged (partly) by an LLM judge enters a gate only when judge–human agreement
    /// on the same period reaches this Cohen's κ (seed 002: 0.6) …
    #[serde(default = "default_min_judge_kappa")]
    pub min_judge_kappa: f64,
    /// … on at least this many runs with both verdicts.
    #[serde(default = "default_min_labelled_runs")]
    pub min_labelled_runs: u64,
    /// Human grading (human verdicts of run success, the humans behind a judge's PPI, a
    /// human- or judge-rated instrument) enters a gate only when at least two human graders'
    /// results of it agree at this Krippendorff's α (seed 002 §5: κ or α ≥ 0.6). For run
    /// success the graders send their verdicts as evaluation results named `task_success`
    /// with `rater_kind = "human"`.
    #[serde(default = "default_min_human_agreement")]
    pub min_human_agreement: f64,
    /// Kept so that a configuration naming it still reads; `true` is refused: a system's
    /// self-assessment is never a gated metric (seed 002 §5). Until 2026-12-04 it opened gates
    /// on self-reported success.
    #[serde(default)]
    pub gate_self_reported: bool,
    /// The pane-sum store (per system and hour, the mergeable state of every series: a
    /// profile reads whole hours from it instead of the observations; `crate::panes`).
    /// Default: `<lake>/_pane_sums` for a local lake; none for an object-store lake unless set.
    #[serde(default)]
    pub pane_sums: Option<PathBuf>,
    /// Keep the store off (every profile reads every observation of its period).
    #[serde(default)]
    pub pane_sums_off: bool,
    /// An hour is stored once it ended this long ago (rows still arriving for it would only
    /// make the store rebuild it: late rows are detected and rebuilt either way).
    #[serde(default = "default_pane_settle", with = "humantime_serde")]
    pub pane_settle: Duration,
    /// The primary instruments each task family's report shows (seed 001's criteria by
    /// paradigm, mapped to the catalogue); a family not listed shows task success only.
    #[serde(default = "default_family_instruments")]
    pub family_instruments: BTreeMap<String, Vec<String>>,
    /// Tasks listed per family in a report (most failures first); the rest are counted.
    #[serde(default = "default_tasks_per_family")]
    pub tasks_per_family: usize,
    /// Release decisions (`octant compare`, and the evidence section of each declared release).
    #[serde(default)]
    pub compare: crate::compare::CompareConfig,
}

/// Seed 001's paradigms and their primary criteria, as catalogue instruments.
pub fn default_family_instruments() -> BTreeMap<String, Vec<String>> {
    use octant_core::catalogue::ids;
    [
        ("latent_space_reasoner", vec![ids::IRRELEVANCE_RATE, ids::CALIBRATION_ECE]),
        ("grounded_synthesizer", vec![ids::HALLUCINATION_RATE, ids::CITATION_COVERAGE, ids::CITATION_PRECISION_STRICT]),
        ("emergent_planner", vec![ids::SUBGOAL_PROGRESS, ids::STEP_EFFICIENCY, ids::ERROR_RECOVERY]),
        ("verifiable_executor", vec![ids::UNSAFE_ACTION_RATE, ids::AUDIT_COMPLETENESS, ids::TOOL_CALL_ACCURACY]),
    ]
    .into_iter()
    .map(|(f, m)| (f.to_string(), m.into_iter().map(str::to_string).collect()))
    .collect()
}

fn default_tasks_per_family() -> usize {
    20
}

fn default_pane_settle() -> Duration {
    Duration::from_secs(900)
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
fn default_lake() -> PathBuf {
    "octant-lake".into()
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
fn default_web_refresh() -> Duration {
    Duration::from_secs(5)
}
fn default_judge_threshold() -> f64 {
    0.5
}
fn default_min_judge_kappa() -> f64 {
    0.6
}
fn default_min_human_agreement() -> f64 {
    0.6
}
fn default_min_labelled_runs() -> u64 {
    octant_core::catalogue::DEFAULT_MIN_UNITS
}

/// A person or program with its own token (`[[users]]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Letters, digits, `_` and `-` (it is part of the session cookie), at most 64.
    pub name: String,
    pub token: octant_runtime::config::Secret,
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

impl Default for ProfilerConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl ProfilerConfig {
    pub fn bootstrap_spec(&self) -> BootstrapSpec {
        self.evaluation.bootstrap_spec()
    }

    /// Where pane sums are stored, if anywhere.
    pub fn pane_store(&self) -> Option<PathBuf> {
        if self.pane_sums_off {
            return None;
        }
        match &self.pane_sums {
            Some(d) => Some(d.clone()),
            None if octant_lake::store::is_url(&self.lake.to_string_lossy()) => None,
            None => Some(self.lake.join("_pane_sums")),
        }
    }

    /// Who may use the HTTP server: the `users`, and `api_token` as the operator `api`. Empty:
    /// the server is open.
    pub fn principals(&self) -> Vec<User> {
        let api = self.api_token.iter().map(|t| User { name: "api".into(), token: t.clone(), role: Role::Operator });
        api.chain(self.users.iter().cloned()).collect()
    }

    pub fn check(&self) -> Result<(), String> {
        let users = self.principals();
        for (i, u) in users.iter().enumerate() {
            if u.name.is_empty() || u.name.len() > 64 || !u.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(format!("user {:?}: a name is 1 to 64 letters, digits, _ or -", u.name));
            }
            if u.token.expose().is_empty() {
                return Err(format!("user {}: an empty token", u.name));
            }
            if let Some(o) = users[..i].iter().find(|o| o.name == u.name) {
                return Err(format!("user {}: named twice{}", o.name, if o.name == "api" { " (api is api_token's name)" } else { "" }));
            }
            // A token must say who it is: the same token for two users would be either of them.
            if let Some(o) = users[..i].iter().find(|o| o.token == u.token) {
                return Err(format!("users {} and {} have the same token", o.name, u.name));
            }
        }
        if self.periods.is_empty() || self.periods.iter().any(|p| p.is_zero()) {
            return Err("periods must be a non-empty list of positive durations".into());
        }
        self.evaluation.check()?;
        // Gates and family reports may name declared instruments: declare them first (the
        // declaration is idempotent; run_once declares them again).
        self.evaluation.declare_instruments()?;
        self.compare.check()?;
        for (f, ms) in &self.family_instruments {
            if let Some(m) = ms.iter().find(|m| octant_core::spec(m).is_none()) {
                return Err(format!("family_instruments.{f}: {m} is not an instrument"));
            }
        }
        for (m, t) in &self.gates {
            if octant_core::catalogue::spec(m).is_none() {
                return Err(format!("gate on {m:?}: not a catalogue metric"));
            }
            if t.outer == t.inner {
                return Err(format!("gate on {m}: outer and inner thresholds are equal"));
            }
        }
        if self.gate_self_reported {
            return Err(
                "gate_self_reported = true: a system's self-assessment is never a gated metric (seed 002 §5); gate a verdict instead"
                    .into(),
            );
        }
        if !self.weights.is_empty() {
            // Seed 002 §6: charter weights of EI = Σ w·ν and EI_G = exp(Σ w·ln(1 + ν)) − 1,
            // which is 0 at every outer threshold and ν when all are ν only if Σ w = 1.
            if let Some((m, w)) = self.weights.iter().find(|(_, w)| !(**w >= 0.0 && w.is_finite())) {
                return Err(format!("weight of {m} is {w}; weights are non-negative"));
            }
            let sum: f64 = self.weights.values().sum();
            if (sum - 1.0).abs() > 1e-9 {
                return Err(format!("weights sum to {sum}; the Efficacy Index's charter weights sum to 1"));
            }
            if let Some(m) = self.gates.keys().find(|m| !self.weights.contains_key(*m)) {
                return Err(format!("weights are declared but {m} (gated) has none"));
            }
            if let Some(m) = self.weights.keys().find(|m| !self.gates.contains_key(*m)) {
                return Err(format!("weight for {m}, which has no gate thresholds"));
            }
        }
        Ok(())
    }
}

/// A period's name: `24h`, `7d`, `90m`, or humantime's form.
pub fn period_name(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(86_400) && s >= 2 * 86_400 {
        format!("{}d", s / 86_400)
    } else if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        humantime::format_duration(d).to_string().replace(' ', "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_names() {
        let c = ProfilerConfig::default();
        c.check().unwrap();
        assert_eq!(c.periods.iter().map(|d| period_name(*d)).collect::<Vec<_>>(), ["24h", "7d"]);
        assert_eq!(period_name(Duration::from_secs(90 * 60)), "90m");
        let c: ProfilerConfig = toml::from_str("periods = [\"1h\", \"30d\"]\n[gates.task_success]\nouter = 0.5\ninner = 0.9\n").unwrap();
        assert_eq!(c.periods, [Duration::from_secs(3600), Duration::from_secs(30 * 86_400)]);
        c.check().unwrap();
        let bad: ProfilerConfig =
            toml::from_str("[gates.task_success]\nouter = 0.5\ninner = 0.9\n[weights]\nunsafe_action_rate = 1.0\n").unwrap();
        assert!(bad.check().is_err(), "a weight without a gate");
        let bad: ProfilerConfig = toml::from_str("[gates.nope]\nouter = 0.5\ninner = 0.9\n").unwrap();
        assert!(bad.check().unwrap_err().contains("not a catalogue metric"));
    }

    #[test]
    fn users_are_named_once_with_tokens_of_their_own() {
        let c: ProfilerConfig = toml::from_str(
            "api_token = \"t0\"\n[[users]]\nname = \"alice\"\ntoken = \"t1\"\n[[users]]\nname = \"ops-bot\"\ntoken = \"t2\"\nrole = \"operator\"\n",
        )
        .unwrap();
        c.check().unwrap();
        let principals = c.principals();
        let who: Vec<(&str, Role)> = principals.iter().map(|u| (u.name.as_str(), u.role)).collect();
        assert_eq!(who, [("api", Role::Operator), ("alice", Role::Viewer), ("ops-bot", Role::Operator)]);
        for (toml, error) in [
            ("[[users]]\nname = \"a.b\"\ntoken = \"t\"\n", "a name is 1 to 64"),
            ("[[users]]\nname = \"a\"\ntoken = \"\"\n", "an empty token"),
            ("api_token = \"t0\"\n[[users]]\nname = \"api\"\ntoken = \"t1\"\n", "api is api_token's name"),
            ("[[users]]\nname = \"a\"\ntoken = \"t\"\n[[users]]\nname = \"b\"\ntoken = \"t\"\n", "users a and b have the same token"),
        ] {
            let c: ProfilerConfig = toml::from_str(toml).unwrap();
            let e = c.check().unwrap_err();
            assert!(e.contains(error) && !e.contains("\"t\""), "{toml}: {e}");
        }
        assert!(toml::from_str::<ProfilerConfig>("[[users]]\nname = \"a\"\ntoken = \"t\"\nrole = \"admin\"\n").is_err());
    }
}

#[cfg(test)]
mod api_token_tests {
    use super::*;

    async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        request(addr, "GET", path, &auth, "").await
    }

    /// One HTTP/1.1 request with extra header lines `headers` (each ending in CRLF).
    async fn request(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let length = if body.is_empty() { String::new() } else { format!("Content-Length: {}\r\n", body.len()) };
        s.write_all(format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}{length}Connection: close\r\n\r\n{body}").as_bytes())
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

    /// With `api_token` set, the profile API answers 401 without the token (and with a wrong
    /// one), 200 with it; probes and `/metrics` stay open; the token is in no `Debug` output.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_profile_api_can_require_a_bearer_token() {
        let dir = std::env::temp_dir().join(format!("octant-profiler-token-{}", std::process::id()));
        let token = "canary-token-5be2";
        let cfg = ProfilerConfig {
            lake: dir.join("lake"),
            evidence: dir.join("evidence"),
            admin_addr: "127.0.0.1:0".parse().unwrap(),
            api_token: Some(octant_runtime::config::Secret::new(token)),
            users: vec![User { name: "alice".into(), token: octant_runtime::config::Secret::new("alice-viewer-77"), role: Role::Viewer }],
            ..Default::default()
        };
        cfg.check().unwrap();
        assert!(!format!("{cfg:?}").contains(token) && !format!("{cfg:?}").contains("alice-viewer-77"));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let running = crate::start(cfg, prometheus::Registry::new(), shutdown.clone()).await.unwrap();
        let addr = running.admin_addr;
        assert_eq!(get(addr, "/profiles", None).await.0, 401);
        assert_eq!(get(addr, "/profiles", Some("wrong")).await.0, 401);
        assert_eq!(get(addr, "/profiles/sys/json", None).await.0, 401);
        assert_eq!(get(addr, "/profiles", Some(token)).await.0, 200);
        let (status, metrics) = get(addr, "/metrics", None).await;
        assert_eq!(status, 200);
        assert!(!metrics.contains(token));
        assert_eq!(get(addr, "/healthz", None).await.0, 200);
        // A browser: sent to the login page and back; a wrong token is refused; the right
        // one sets an HttpOnly, SameSite=Lax session cookie that opens the pages.
        let (status, r) = request(addr, "GET", "/systems/a%2Fb?days=2", "Accept: text/html\r\n", "").await;
        assert_eq!((status, header(&r, "location")), (303, Some("/login?next=%2Fsystems%2Fa%252Fb%3Fdays%3D2")), "{r}");
        let (status, page) = request(addr, "GET", "/login?next=%2Fsystems%2Fa%252Fb%3Fdays%3D2", "Accept: text/html\r\n", "").await;
        assert_eq!(status, 200);
        assert!(page.contains("value=\"/systems/a%2Fb?days=2\"") && page.contains("type=\"password\""), "{page}");
        let form = "application/x-www-form-urlencoded";
        let (status, r) = request(addr, "POST", "/login", &format!("Content-Type: {form}\r\n"), "token=nope&next=%2F").await;
        assert_eq!(status, 401);
        assert!(header(&r, "set-cookie").is_none() && !r.contains("nope"), "{r}");
        let body = format!("token={token}&next=https%3A%2F%2Fevil.example%2F");
        let (status, r) = request(addr, "POST", "/login", &format!("Content-Type: {form}\r\n"), &body).await;
        assert_eq!((status, header(&r, "location")), (303, Some("/")), "no redirect off the server: {r}");
        let cookie = header(&r, "set-cookie").expect("a session cookie").to_string();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax") && !cookie.contains(token), "{cookie}");
        let session = cookie.split(';').next().unwrap();
        assert_eq!(request(addr, "GET", "/profiles", &format!("Cookie: {session}\r\n"), "").await.0, 200);
        // A signed-in browser's pages say who is signed in and offer to sign out; a program's do not.
        let (status, page) = request(addr, "GET", "/", &format!("Cookie: {session}\r\n"), "").await;
        assert_eq!(status, 200);
        assert!(
            page.contains("Signed in as api (operator) <button type=\"submit\">Sign out</button>") && page.contains("action=\"/logout\""),
            "{page}"
        );
        assert!(
            header(&page, "content-length").is_none_or(|n| n.parse::<usize>().unwrap() == page.split_once("\r\n\r\n").unwrap().1.len()),
            "{page}"
        );
        let (status, page) = get(addr, "/", Some(token)).await;
        assert!(status == 200 && !page.contains("Signed in as"), "{page}");
        let (status, page) = request(addr, "GET", "/profiles", &format!("Cookie: {session}\r\n"), "").await;
        assert!(status == 200 && !page.contains("Signed in as"), "a JSON answer is left as it is: {page}");
        assert_eq!(header(&page, "cache-control"), Some("private, no-store"), "a signed-in answer is never cached");
        for cross in ["Sec-Fetch-Site: cross-site\r\n", "Origin: http://evil.example\r\n"] {
            assert_eq!(request(addr, "POST", "/logout", cross, "").await.0, 403, "{cross}");
        }
        let (status, r) = request(addr, "POST", "/logout", "Sec-Fetch-Site: same-origin\r\n", "").await;
        assert_eq!((status, header(&r, "location")), (303, Some("/login")), "{r}");
        assert!(header(&r, "set-cookie").is_some_and(|c| c.starts_with("octant_session=;") && c.contains("Max-Age=0")), "{r}");
        assert_eq!(request(addr, "POST", "/run", &format!("Cookie: {session}\r\n"), "").await.0, 401, "a session only reads");
        assert!(session.starts_with("octant_session=api."), "the session names its user: {session}");
        // A viewer's token reads, and may not start a run: 403 says the role, not the token.
        assert_eq!(get(addr, "/profiles", Some("alice-viewer-77")).await.0, 200);
        let (status, r) = request(addr, "POST", "/run", "Authorization: Bearer alice-viewer-77\r\n", "").await;
        assert_eq!(status, 403, "{r}");
        assert!(r.contains("alice is a viewer") && !r.contains("alice-viewer-77"), "{r}");
        let (status, r) = request(addr, "POST", "/login", &format!("Content-Type: {form}\r\n"), "token=alice-viewer-77&next=%2F").await;
        assert_eq!(status, 303);
        assert!(header(&r, "set-cookie").is_some_and(|c| c.starts_with("octant_session=alice.")), "{r}");
        let flipped = if session.ends_with('0') { '1' } else { '0' };
        let forged = format!("{}{flipped}", &session[..session.len() - 1]);
        assert_eq!(request(addr, "GET", "/profiles", &format!("Cookie: {forged}\r\n"), "").await.0, 401);
        shutdown.cancel();
        let _ = running.task.await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
