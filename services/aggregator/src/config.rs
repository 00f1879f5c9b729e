//! Aggregator configuration (TOML; environment prefix `OCTANT_AGGREGATOR`). The
//! `[evaluation]` section is `octant_engine::EvaluationConfig`, the one the profiler reads too.

use octant_engine::EvaluationConfig;
use octant_runtime::service::StreamSettings;
use serde::{Deserialize, Serialize};

/// Unknown keys are refused by `octant_runtime::config::load`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AggregatorConfig {
    /// `kafka`, `group_id`, `admin_addr`, `commit_interval`, `max_inflight`.
    #[serde(flatten)]
    pub stream: StreamSettings,
    /// Personal data and secrets redacted from dead letters (and, in the alerter, alerts): the
    /// shared `[redaction]` section (`OCTANT_REDACTION_FILE`, `OCTANT_REDACTION__…`).
    #[serde(default)]
    pub redaction: octant_runtime::redact::RedactionConfig,
    /// Window geometry, bootstrap, budgets and profile rules (shared with the profiler).
    #[serde(default)]
    pub evaluation: EvaluationConfig,
    /// Diagnostic slices (`[slices]`): ratio series also kept per agent and per declared task
    /// family, published as windows with `slice_kind`/`slice` and as the
    /// `octant_metric_slice_*` gauges; never vetoed, never in a profile.
    #[serde(default)]
    pub slices: octant_engine::window::SliceSpec,
    /// The topics whose progress the scorer announces in its watermarks (its inputs, before the
    /// prefix): windows wait until every partition of each has been heard from, so the first
    /// watermarks of one topic cannot make another's data late. Default: both trajectory topics.
    #[serde(default = "default_upstream_topics")]
    pub upstream_topics: Vec<String>,
}

fn default_upstream_topics() -> Vec<String> {
    vec![octant_contracts::topics::TRAJECTORIES_PRODUCTION.to_string(), octant_contracts::topics::TRAJECTORIES_EVALUATION.to_string()]
}

impl Default for AggregatorConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl AggregatorConfig {
    pub fn check(&self) -> Result<(), String> {
        self.stream.check(&crate::ID)?;
        self.redaction.build()?;
        self.slices.check()?;
        if self.upstream_topics.is_empty() {
            return Err("upstream_topics: at least the topic the scorer reads".into());
        }
        self.evaluation.check()
    }
}
