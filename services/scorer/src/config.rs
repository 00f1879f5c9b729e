//! Scorer configuration (`[scorer]`-less TOML; environment prefix `OCTANT_SCORER`).

use std::time::Duration;

use octant_runtime::service::StreamSettings;
use serde::{Deserialize, Serialize};

/// Unknown keys are refused by `octant_runtime::config::load`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScorerConfig {
    /// `kafka`, `group_id`, `admin_addr`, `commit_interval`, `max_inflight`.
    #[serde(flatten)]
    pub stream: StreamSettings,
    /// Personal data and secrets redacted from dead letters (and, in the alerter, alerts): the
    /// shared `[redaction]` section (`OCTANT_REDACTION_FILE`, `OCTANT_REDACTION__…`).
    #[serde(default)]
    pub redaction: octant_runtime::redact::RedactionConfig,
    /// Event-time idle period after which an open run is ended as abandoned.
    #[serde(default = "default_idle", with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Event-time bound on a run paused for a human (its last step a request for confirmation,
    /// as the ingest writes a keyed run that stopped on calls needing approval): it waits this
    /// long for the part that resumes it, then ends as abandoned (the approval expired).
    /// Separate from `idle_timeout` — approvals take hours — and from the ingest's
    /// `trace_quiet`/`trace_max_wait`, which bound one trace.
    #[serde(default = "default_pause", with = "humantime_serde")]
    pub pause_timeout: Duration,
    /// Confidence below which a step counts for deferral on uncertainty.
    #[serde(default = "default_low_confidence")]
    pub low_confidence: f64,
    /// A judge verdict at or above this counts as success, when no verifier or human judged the
    /// run (keep equal to the profiler's `judge_threshold`, which measures judge–human κ).
    #[serde(default = "default_low_confidence")]
    pub judge_threshold: f64,
    /// An input partition that is caught up and has had no input for this long is announced
    /// idle in its watermarks, so downstream windows do not wait for it.
    #[serde(default = "default_idle_partition", with = "humantime_serde")]
    pub idle_partition_after: Duration,
    /// Confluent schema ids accepted on input, mapped to files under `schemas/`.
    #[serde(default)]
    pub confluent_ids: std::collections::BTreeMap<u32, String>,
    /// When set, the input topics carry plain Avro binary datums (no header) written with this
    /// schema file under `schemas/` (e.g. `trajectory_event.avsc`), and nothing else: a plain
    /// datum's first byte can be anything, so the other framings are not recognised then.
    #[serde(default)]
    pub plain_binary_schema: Option<String>,
    /// The `[evaluation]` section every evaluating service reads (`OCTANT_EVALUATION_FILE`);
    /// the scorer uses its `instruments`: which evaluation results become which observations.
    #[serde(default)]
    pub evaluation: octant_engine::EvaluationConfig,
}

fn default_idle() -> Duration {
    Duration::from_secs(600)
}
fn default_pause() -> Duration {
    Duration::from_secs(24 * 3600)
}
fn default_idle_partition() -> Duration {
    Duration::from_secs(5)
}
fn default_low_confidence() -> f64 {
    0.5
}

impl Default for ScorerConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl ScorerConfig {
    /// Checks settings that depend on each other; the message says what to change.
    pub fn check(&self) -> Result<(), String> {
        self.stream.check(&crate::ID)?;
        self.redaction.build()?;
        if !(0.0..=1.0).contains(&self.low_confidence) {
            return Err(format!("low_confidence {} must be in [0, 1]", self.low_confidence));
        }
        if !(0.0..=1.0).contains(&self.judge_threshold) {
            return Err(format!("judge_threshold {} must be in [0, 1]", self.judge_threshold));
        }
        if self.idle_timeout.is_zero() {
            return Err("idle_timeout must be positive".into());
        }
        if self.pause_timeout < self.idle_timeout {
            return Err(format!("pause_timeout {:?} must be at least idle_timeout {:?}", self.pause_timeout, self.idle_timeout));
        }
        self.evaluation.check()
    }
}
