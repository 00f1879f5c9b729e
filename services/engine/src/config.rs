//! The `[evaluation]` section: how observations become verdicts. The aggregator and the
//! profiler read the same section (and `OCTANT_EVALUATION__*` overrides, or the file named by
//! `OCTANT_EVALUATION_FILE`: see `octant_runtime::config`), so a streaming window and a
//! profile over the same span can only agree.

use std::collections::BTreeMap;
use std::time::Duration;

use octant_core::profile::ProfileRules;
use octant_core::stats::bootstrap::{BootstrapSpec, DEFAULT_SEED};
use serde::{Deserialize, Serialize};

use crate::window::WindowSpec;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EvaluationConfig {
    /// Window geometry (the aggregator's; a profile is one window over its period).
    #[serde(default)]
    pub window: WindowConfig,
    #[serde(default)]
    pub bootstrap: BootstrapConfig,
    /// Budgets B of the ratio-to-budget (R) metrics, by metric id, for every system.
    #[serde(default = "default_budgets")]
    pub budgets: BTreeMap<String, f64>,
    /// Per-system budgets, overriding `budgets`: system id → metric id → B.
    #[serde(default)]
    pub system_budgets: BTreeMap<String, BTreeMap<String, f64>>,
    /// Dimension aggregation, when veto caps apply, the α of sequential evidence.
    #[serde(default)]
    pub profile: ProfileRules,
    /// Instruments declared beyond the built-in catalogue (`[[evaluation.instruments]]`):
    /// evaluation results mapped to instruments. Every service that reads this section
    /// declares them at start-up ([`Self::declare_instruments`]), so they are known to all.
    #[serde(default)]
    pub instruments: Vec<octant_core::catalogue::InstrumentDecl>,
    /// What kind of system each is (`llm`, `agent`, `multi_agent`, `multimodal`; default
    /// `agent`): a system without an action loop is N/A for the trajectory rows.
    #[serde(default)]
    pub system_types: BTreeMap<String, octant_core::catalogue::SystemType>,
    /// Whether each system's telemetry can show a human's approval of an action: `learned`
    /// (the default: from what its sources emit, see [`ApprovalSignal::Learned`]), `telemetry`
    /// (every source watched) or `none`: with `none`, confirmation gating is N/A (not assessed:
    /// unwatched) and carries no veto state, however many gated steps went unconfirmed.
    #[serde(default)]
    pub approval_signal: BTreeMap<String, ApprovalSignal>,
    /// Single-agent baselines S_1 of multi-agent systems (seed 000 Table IX, RCC): system id →
    /// the task-success rate a single agent achieves on the same tasks, measured and declared
    /// by the team. With one, every task-success window of the system also gives the relative
    /// coordination cost max(0, 1 − S_MAS / S_1).
    #[serde(default)]
    pub single_agent_baselines: BTreeMap<String, f64>,
    /// Reference pools of the comparative (Q) instruments, by metric id: a metric's band is the
    /// quartile of its value among the pool's reference systems (seed 000 Table V), and the
    /// pool's version is recorded in every window and profile banded against it.
    #[serde(default)]
    pub pools: BTreeMap<String, PoolDecl>,
    /// Which declared violations are policy violations rather than safety violations
    /// (`[evaluation.violations] policy = ["compliance.*"]`): an action whose violations are
    /// all policy ones counts for `policy_violation_rate`, not `unsafe_action_rate`.
    #[serde(default)]
    pub violations: ViolationClasses,
    /// Declared protocols by task family (`[evaluation.protocols.<family>] steps = [...]`):
    /// each run of the family is scored for `protocol_adherence` (seed 001).
    #[serde(default)]
    pub protocols: BTreeMap<String, ProtocolDecl>,
    /// Data leakage (`data_leakage_rate`): what a detector may find in a tool call's arguments
    /// without it being a leak.
    #[serde(default)]
    pub leakage: LeakageConfig,
}

/// `[evaluation.leakage]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LeakageConfig {
    /// Measure `data_leakage_rate` with the `[redaction]` detectors (default false: N/A). Off
    /// by default because a detector's finding is not always a leak — a recipient's address
    /// sent to a mail tool, an opaque token shaped like an API key — and a team should look at
    /// its tools (`allowed_tools`) before the rate enters its Safety band.
    #[serde(default)]
    pub detect: bool,
    /// Tools whose arguments carry personal data by design (a `send_email` recipient, a CRM
    /// lookup by e-mail): their calls are not units of `data_leakage_rate`.
    #[serde(default)]
    pub allowed_tools: Vec<String>,
}

/// How declared violations divide between safety and policy.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ViolationClasses {
    /// Violation names (exact, or a prefix ending in `*`) that break a policy, not a safety
    /// constraint. Empty (the default): every violation is a safety violation, and
    /// `policy_violation_rate` is N/A (no policy declared).
    #[serde(default)]
    pub policy: Vec<String>,
}

impl ViolationClasses {
    /// Whether `violation` names a policy violation.
    pub fn is_policy(&self, violation: &str) -> bool {
        self.policy.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => violation.starts_with(prefix),
            None => violation == p,
        })
    }

    /// Whether `violations` holds a safety violation (one no declared policy names): an unsafe
    /// action's mark, for the scorer, the alerter and the run page alike.
    pub fn any_safety(&self, violations: &[String]) -> bool {
        violations.iter().any(|v| !self.is_policy(v))
    }

    /// Whether `violations` holds a declared policy's violation.
    pub fn any_policy(&self, violations: &[String]) -> bool {
        violations.iter().any(|v| self.is_policy(v))
    }

    /// Whether any policy is declared (else policy violations are not measured).
    pub fn declared(&self) -> bool {
        !self.policy.is_empty()
    }
}

/// A declared protocol (seed 001's `protocol_steps`): the tools a run of its task family
/// calls, in order. Tool calls of tools the protocol does not name are not protocol steps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProtocolDecl {
    /// The protocol's steps (tool names), in their order.
    pub steps: Vec<String>,
    /// Steps that may be skipped (seed 001's `required: false`); all others are required.
    #[serde(default)]
    pub optional: Vec<String>,
}

impl ProtocolDecl {
    /// Whether `tool` is a step of the protocol.
    pub fn names(&self, tool: &str) -> bool {
        self.steps.iter().any(|s| s == tool)
    }

    /// Seed 001's `protocol_adherence_evaluator` over the protocol steps executed, in order:
    /// 0 when a required step was never executed, else the share of the protocol's positions
    /// at which the executed step is the expected one.
    pub fn adherence(&self, executed: &[&str]) -> f64 {
        let required = self.steps.iter().filter(|s| !self.optional.contains(s));
        if required.clone().any(|r| !executed.contains(&r.as_str())) {
            return 0.0;
        }
        let matched = self.steps.iter().enumerate().filter(|(i, s)| executed.get(*i) == Some(&s.as_str())).count();
        matched as f64 / self.steps.len() as f64
    }
}

/// A reference pool (`[evaluation.pools.<metric>]`): inline, or a JSON file of the same shape
/// (`{"version": "…", "floor": 0.2, "systems": {"ref-a": 0.81, …}}`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PoolDecl {
    /// The pool's version (required, inline or in the file).
    #[serde(default)]
    pub version: Option<String>,
    /// Below this value the band is 0 whatever the rank.
    #[serde(default)]
    pub floor: Option<f64>,
    /// Reference systems and their values.
    #[serde(default)]
    pub systems: BTreeMap<String, f64>,
    /// A JSON file holding the pool instead.
    #[serde(default)]
    pub file: Option<std::path::PathBuf>,
}

/// A resolved reference pool.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    pub version: String,
    #[serde(default)]
    pub floor: Option<f64>,
    pub systems: BTreeMap<String, f64>,
}

impl PoolDecl {
    /// The pool, read from its file when it names one (files are read once per process).
    pub fn resolve(&self) -> Result<Pool, String> {
        static FILES: std::sync::Mutex<BTreeMap<std::path::PathBuf, Result<Pool, String>>> = std::sync::Mutex::new(BTreeMap::new());
        let pool = match &self.file {
            Some(path) => {
                let mut files = FILES.lock().unwrap_or_else(|e| e.into_inner());
                files
                    .entry(path.clone())
                    .or_insert_with(|| {
                        let text = std::fs::read_to_string(path).map_err(|e| format!("pool file {}: {e}", path.display()))?;
                        serde_json::from_str::<Pool>(&text).map_err(|e| format!("pool file {}: {e}", path.display()))
                    })
                    .clone()?
            }
            None => {
                Pool { version: self.version.clone().ok_or("a pool needs a version")?, floor: self.floor, systems: self.systems.clone() }
            }
        };
        if pool.version.is_empty() {
            return Err("a pool needs a version".into());
        }
        if pool.systems.is_empty() || pool.systems.values().any(|v| !v.is_finite()) {
            return Err(format!("pool {}: at least one reference system, with finite values", pool.version));
        }
        Ok(pool)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WindowConfig {
    /// Window length (default 1 h).
    #[serde(default = "default_length", with = "humantime_serde")]
    pub length: Duration,
    /// Slide (default 1 min); ignored when `tumbling`.
    #[serde(default = "default_slide", with = "humantime_serde")]
    pub slide: Duration,
    /// Tumbling windows (slide = length).
    #[serde(default)]
    pub tumbling: bool,
    /// How far behind the newest event time a window stays open (default 2 min).
    #[serde(default = "default_lateness", with = "humantime_serde")]
    pub allowed_lateness: Duration,
    /// How far before the frontier (the end of the last published window) a duplicate
    /// observation id is still recognised (dropped and counted rather than dead-lettered as
    /// late), in whole panes. Default and least (a shorter value is taken as): the window
    /// length, whose panes the windows hold anyway.
    /// The ids cost 8 bytes an observation: a longer horizon costs memory in proportion
    /// (BENCHMARKS.md, issue 44).
    #[serde(default, with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub duplicate_horizon: Option<Duration>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BootstrapConfig {
    #[serde(default = "default_replicates")]
    pub replicates: u32,
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default = "default_level")]
    pub level: f64,
}

fn default_length() -> Duration {
    Duration::from_secs(3600)
}
fn default_slide() -> Duration {
    Duration::from_secs(60)
}
fn default_lateness() -> Duration {
    Duration::from_secs(120)
}
fn default_replicates() -> u32 {
    1000
}
fn default_seed() -> u64 {
    DEFAULT_SEED
}
fn default_level() -> f64 {
    0.95
}

/// The least budget of `coordination_efficiency` (seed 000 Table IX, R): its native value,
/// messages over a reference trace's, is at least 1, and R's band 4 needs v ≤ B/4, so a
/// smaller budget makes band 4 unreachable for every system.
pub const COORDINATION_BUDGET_FLOOR: f64 = 4.0;

/// Deployment-wide default budgets; declare your own per system.
pub fn default_budgets() -> BTreeMap<String, f64> {
    // review_burden: reviewer minutes per completed task; coordination_efficiency: messages
    // per message a reference trace needs, a ratio of at least 1, so its budget is at least
    // 4 (R gives band 4 to v ≤ B/4: with B = 4 the optimum itself is band 4, twice the
    // optimum band 3, four times band 1).
    [
        ("cost_per_run", 0.05),
        ("tokens_per_run", 40_000.0),
        ("latency_per_run", 30_000.0),
        ("cost_per_success", 0.1),
        ("review_burden", 30.0),
        ("coordination_efficiency", COORDINATION_BUDGET_FLOOR),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl Default for WindowConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl BootstrapConfig {
    pub fn spec(&self) -> BootstrapSpec {
        BootstrapSpec { replicates: self.replicates, seed: self.seed, level: self.level }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.replicates < 100 {
            return Err(format!("bootstrap.replicates {} is too few for a percentile interval (≥ 100)", self.replicates));
        }
        if !(0.5..1.0).contains(&self.level) {
            return Err(format!("bootstrap.level {} must be in [0.5, 1)", self.level));
        }
        Ok(())
    }
}

impl EvaluationConfig {
    /// Takes `declared`'s policy, protocols, leakage setting and instruments (a fleet's
    /// compliance declarations, given to every evaluating service alike).
    pub fn adopt(&mut self, declared: &EvaluationConfig) {
        self.violations = declared.violations.clone();
        self.protocols = declared.protocols.clone();
        self.leakage = declared.leakage.clone();
        self.instruments.extend(declared.instruments.iter().cloned());
    }

    /// The systems declared `multi_agent`.
    pub fn multi_agent_systems(&self) -> Vec<String> {
        self.system_types.iter().filter(|(_, t)| **t == octant_core::catalogue::SystemType::MultiAgent).map(|(s, _)| s.clone()).collect()
    }

    pub fn window_spec(&self) -> WindowSpec {
        let length = self.window.length.as_millis() as i64;
        WindowSpec {
            length_ms: length,
            slide_ms: if self.window.tumbling { length } else { self.window.slide.as_millis() as i64 },
            lateness_ms: self.window.allowed_lateness.as_millis() as i64,
        }
    }

    /// [`WindowConfig::duplicate_horizon`] in milliseconds, at least the window length.
    pub fn duplicate_horizon_ms(&self) -> i64 {
        let length = self.window_spec().length_ms;
        self.window.duplicate_horizon.map_or(length, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(length))
    }

    pub fn bootstrap_spec(&self) -> BootstrapSpec {
        self.bootstrap.spec()
    }

    /// What `system`'s telemetry can show of approvals (default: learned from the data).
    pub fn approval_signal(&self, system: &str) -> ApprovalSignal {
        self.approval_signal.get(system).copied().unwrap_or_default()
    }

    /// The declared type of `system` (default: an agent).
    pub fn system_type(&self, system: &str) -> octant_core::catalogue::SystemType {
        self.system_types.get(system).copied().unwrap_or_default()
    }

    /// Every budget declared for `metric`, deployment-wide and per system.
    fn all_budgets<'a>(&'a self, metric: &'a str) -> impl Iterator<Item = f64> + 'a {
        self.budgets.get(metric).into_iter().chain(self.system_budgets.values().filter_map(move |b| b.get(metric))).copied()
    }

    /// The budget of `metric` for `system`, if declared.
    pub fn budget(&self, system: &str, metric: &str) -> Option<f64> {
        self.system_budgets.get(system).and_then(|b| b.get(metric)).or_else(|| self.budgets.get(metric)).copied()
    }

    /// Checks the settings that depend on each other; the message names the setting.
    pub fn check(&self) -> Result<(), String> {
        self.window_spec().check()?;
        self.bootstrap.check()?;
        if let Some((s, b)) = self.single_agent_baselines.iter().find(|(_, b)| !(**b > 0.0 && **b <= 1.0)) {
            return Err(format!("single-agent baseline of {s} is {b}; a success rate in (0, 1] is needed"));
        }
        if let Some((m, b)) = self.budgets.iter().chain(self.system_budgets.values().flatten()).find(|(_, b)| **b <= 0.0) {
            return Err(format!("evaluation budget of {m} is {b}; budgets must be positive"));
        }
        if let Some(b) = self.all_budgets(octant_core::catalogue::ids::COORDINATION_EFFICIENCY).find(|b| *b < COORDINATION_BUDGET_FLOOR) {
            return Err(format!(
                "evaluation budget of coordination_efficiency is {b}; messages over a reference trace's are at least 1, and band 4 needs a ratio ≤ B/4, so B must be at least {COORDINATION_BUDGET_FLOOR}"
            ));
        }
        if !(self.profile.veto_alpha > 0.0 && self.profile.veto_alpha < 1.0) {
            return Err(format!("evaluation.profile.veto_alpha {} must be in (0, 1)", self.profile.veto_alpha));
        }
        for (m, p) in &self.pools {
            p.resolve().map_err(|e| format!("evaluation.pools.{m}: {e}"))?;
        }
        for (family, p) in &self.protocols {
            if p.steps.is_empty() {
                return Err(format!("evaluation.protocols.{family}: a protocol needs at least one step"));
            }
            if let Some(o) = p.optional.iter().find(|o| !p.names(o)) {
                return Err(format!("evaluation.protocols.{family}: optional step {o} is not one of its steps"));
            }
        }
        if let Some(p) = self.violations.policy.iter().find(|p| p.is_empty() || *p == "*") {
            return Err(format!("evaluation.violations.policy: {p:?} would make every violation a policy one (and no action unsafe)"));
        }
        for d in &self.instruments {
            if let Ok(spec) = d.resolve()
                && spec.family == octant_core::family::Family::Comparative
                && !self.pools.contains_key(&d.id)
            {
                return Err(format!("evaluation.instruments: {} is comparative (Q) and needs [evaluation.pools.{}]", d.id, d.id));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for d in &self.instruments {
            if !seen.insert((
                d.evaluation_name(),
                d.evaluator.as_deref(),
                d.evaluator_version.as_deref(),
                d.scoring_mode.as_deref(),
                d.rater_kind.as_deref(),
            )) {
                return Err(format!(
                    "evaluation.instruments: {} from {:?} {:?} is declared twice",
                    d.evaluation_name(),
                    d.evaluator,
                    d.evaluator_version
                ));
            }
        }
        Ok(())
    }

    /// The reference pool of `metric` for `system` (the system's own entry left out: it is
    /// ranked among the others) and the pool's version; `None` without a declared pool.
    pub fn pool(&self, metric: &str, system: &str) -> Option<(octant_core::family::ComparativePool, String)> {
        let pool = self.pools.get(metric)?.resolve().ok()?;
        let values = pool.systems.iter().filter(|(s, _)| s.as_str() != system).map(|(_, v)| *v).collect();
        Some((octant_core::family::ComparativePool { values, floor: pool.floor.unwrap_or(f64::NEG_INFINITY) }, pool.version))
    }

    /// Declares `instruments` into the catalogue of this process.
    pub fn declare_instruments(&self) -> Result<(), String> {
        for d in &self.instruments {
            d.declare().map_err(|e| format!("evaluation.instruments: {e}"))?;
        }
        Ok(())
    }
}

/// What a system's telemetry can show of a human's approval (`[evaluation.approval_signal]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalSignal {
    /// Learned from the data (the default): each of the system's sources (the instrumentation
    /// scope that traced its tool calls) is *unwatched* — a high-impact call is not assessed,
    /// N/A — until a run of it shows that its approval flow is traced (a pause for approval, a
    /// decision, a denial, a confirmation attribute, a declared approval event); from then on
    /// it is *watched*, for good, and a high-impact call without a confirmation is a 0.
    #[default]
    Learned,
    /// Declared: approvals reach the telemetry, every source is watched (a high-impact step
    /// without a confirmation was not confirmed).
    Telemetry,
    /// Declared: nothing in the telemetry can show an approval: confirmation gating is N/A.
    None,
}

#[cfg(test)]
mod tests {
    use octant_core::catalogue::ids::COORDINATION_EFFICIENCY;
    use octant_core::family::{BandContext, Family};

    use super::*;

    /// Seed 000 Table IX gives coordination efficiency (messages over a reference trace's, at
    /// least 1) family R: the optimum must reach band 4 under the default budget, and a budget
    /// that makes band 4 unreachable is refused with the setting's name.
    #[test]
    fn coordination_efficiency_can_reach_every_band() {
        let config = EvaluationConfig::default();
        let b = config.budget("any", COORDINATION_EFFICIENCY).expect("a default budget");
        let band = |v: f64| Family::Budget.band(v, &BandContext { budget: Some(b), pool: None }).unwrap();
        // By hand from R(B = 4): v ≤ 1 → 4, ≤ 2 → 3, ≤ 3 → 2, ≤ 4 → 1, above → 0.
        assert_eq!([1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 4.5].map(band), [4, 3, 3, 2, 2, 1, 0]);
        config.check().expect("the defaults hold");

        let mut halved = EvaluationConfig::default();
        halved.system_budgets.entry("sys".into()).or_default().insert(COORDINATION_EFFICIENCY.into(), 2.0);
        let err = halved.check().expect_err("a budget of 2 leaves band 4 unreachable");
        assert!(err.contains("coordination_efficiency") && err.contains("at least 4"), "{err}");
    }

    /// Seed 001's `protocol_adherence_evaluator`, by hand: a missing required step scores 0;
    /// otherwise the share of the protocol's positions holding the expected step.
    #[test]
    fn protocol_adherence_follows_the_seed() {
        let p = ProtocolDecl {
            steps: ["verify_identity", "check_policy", "issue_refund", "notify"].map(String::from).to_vec(),
            optional: vec!["notify".into()],
        };
        assert_eq!(p.adherence(&["verify_identity", "check_policy", "issue_refund", "notify"]), 1.0);
        assert_eq!(p.adherence(&["verify_identity", "check_policy", "issue_refund"]), 0.75, "an optional step skipped");
        assert_eq!(p.adherence(&["check_policy", "verify_identity", "issue_refund"]), 0.25, "two swapped: one position of four");
        assert_eq!(p.adherence(&["verify_identity", "issue_refund"]), 0.0, "a required step missing");
        assert_eq!(p.adherence(&[]), 0.0);
        let config: EvaluationConfig = toml::from_str(
            "[protocols.refunds]\nsteps = [\"a\", \"b\"]\noptional = [\"c\"]\n[violations]\npolicy = [\"compliance.*\", \"gdpr.retention\"]",
        )
        .unwrap();
        assert!(config.check().unwrap_err().contains("optional step c"));
        assert!(config.violations.is_policy("compliance.refund_limit") && config.violations.is_policy("gdpr.retention"));
        assert!(!config.violations.is_policy("gdpr.retention_extra") && !config.violations.is_policy("policy.no_side_effects"));
        let every: EvaluationConfig = toml::from_str("[violations]\npolicy = [\"*\"]").unwrap();
        assert!(every.check().unwrap_err().contains("every violation"));
    }
}
