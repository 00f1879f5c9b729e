//! What a report is made of and from: the lake, the `[evaluation]` section, gates and weights,
//! the raters' thresholds, the pane-sum store, family reports and release comparisons. The
//! profiler's configuration carries these at its top level (`ReportConfig::report`,
//! flattened); `octant lake profile` and `octant compare` read the same keys.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use octant_core::gate::Thresholds;
use octant_core::stats::bootstrap::BootstrapSpec;
use octant_engine::EvaluationConfig;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    /// The lake (what the lake writer writes): a directory or an object-store URL.
    #[serde(default = "default_lake")]
    pub lake: PathBuf,
    /// Object-store options, as the lake writer's (secrets never logged).
    #[serde(default)]
    pub storage: octant_lake::StorageOptions,
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
    /// profile reads whole hours from it instead of the observations; `crate::pane_store`).
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
    /// Independent re-runs (seed 000 §IV-G): the share of runs drawn for a re-run, and how the
    /// re-runs are compared with their originals.
    #[serde(default)]
    pub reruns: crate::reruns::ReRunConfig,
}

/// Seed 001's paradigms and their primary criteria, as catalogue instruments.
pub fn default_family_instruments() -> BTreeMap<String, Vec<String>> {
    use octant_core::catalogue::ids;
    [
        ("latent_space_reasoner", vec![ids::IRRELEVANCE_RATE, ids::CALIBRATION_ECE]),
        ("grounded_synthesizer", vec![ids::HALLUCINATION_RATE, ids::CITATION_COVERAGE, ids::CITATION_PRECISION_STRICT]),
        ("emergent_planner", vec![ids::SUBGOAL_PROGRESS, ids::STEP_EFFICIENCY, ids::ERROR_RECOVERY]),
        ("verifiable_executor", vec![ids::UNSAFE_ACTION_RATE, ids::AUDIT_COMPLETENESS, ids::TOOL_CALL_ACCURACY, ids::PROTOCOL_ADHERENCE]),
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

fn default_lake() -> PathBuf {
    "octant-lake".into()
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

impl Default for ReportConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl ReportConfig {
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

    pub fn check(&self) -> Result<(), String> {
        self.evaluation.check()?;
        // Gates and family reports may name declared instruments: declare them first (the
        // declaration is idempotent; run_once declares them again).
        self.evaluation.declare_instruments()?;
        self.compare.check()?;
        self.reruns.check()?;
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
    fn defaults_and_checks() {
        ReportConfig::default().check().unwrap();
        assert_eq!(period_name(Duration::from_secs(90 * 60)), "90m");
        assert_eq!(period_name(Duration::from_secs(7 * 86_400)), "7d");
        let c: ReportConfig = toml::from_str("[gates.task_success]\nouter = 0.5\ninner = 0.9\n").unwrap();
        c.check().unwrap();
        let bad: ReportConfig =
            toml::from_str("[gates.task_success]\nouter = 0.5\ninner = 0.9\n[weights]\nunsafe_action_rate = 1.0\n").unwrap();
        assert!(bad.check().is_err(), "a weight without a gate");
        let bad: ReportConfig = toml::from_str("[gates.nope]\nouter = 0.5\ninner = 0.9\n").unwrap();
        assert!(bad.check().unwrap_err().contains("not a catalogue metric"));
    }
}
