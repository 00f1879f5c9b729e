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
        self.evaluation.check()
    }
}
