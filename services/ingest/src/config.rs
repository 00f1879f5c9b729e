//! Ingest configuration (TOML; environment prefix `OCTANT_INGEST`).

use std::time::Duration;

use octant_otlp::Mapping;
use octant_runtime::service::StreamSettings;
use serde::{Deserialize, Serialize};

/// Unknown keys are refused by `octant_runtime::config::load`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IngestConfig {
    /// `kafka`, `group_id`, `admin_addr`, `commit_interval`, `max_inflight`.
    #[serde(flatten)]
    pub stream: StreamSettings,
    /// Personal data and secrets redacted from dead letters (and, in the alerter, alerts): the
    /// shared `[redaction]` section (`OCTANT_REDACTION_FILE`, `OCTANT_REDACTION__…`).
    #[serde(default)]
    pub redaction: octant_runtime::redact::RedactionConfig,
    /// The topic the Collector's Kafka exporter writes traces to (its default `otlp_spans`;
    /// not prefixed with `kafka.topic_prefix`: it is the Collector's).
    #[serde(default = "default_spans")]
    pub spans_topic: String,
    /// The topic it writes logs to (its default `otlp_logs`); evaluation results and approval
    /// decisions are log events.
    #[serde(default = "default_logs")]
    pub logs_topic: String,
    /// A trace is complete when its root span has arrived and nothing more for this long
    /// (wall clock) …
    #[serde(default = "default_quiet", with = "humantime_serde")]
    pub trace_quiet: Duration,
    /// … or, root or not, this long after its first fragment (the bound on waiting).
    #[serde(default = "default_max_wait", with = "humantime_serde")]
    pub trace_max_wait: Duration,
    /// How long a result that names only a `gen_ai.response.id` waits for the span that
    /// returned it, and how long that span's link is kept.
    #[serde(default = "default_max_wait", with = "humantime_serde")]
    pub response_wait: Duration,
    /// Emitted trace ids remembered to recognise fragments that come after their trace.
    #[serde(default = "default_memory")]
    pub emitted_memory: usize,
    /// What the conventions do not say (`[mapping]`).
    #[serde(default)]
    pub mapping: Mapping,
}

fn default_spans() -> String {
    "otlp_spans".into()
}
fn default_logs() -> String {
    "otlp_logs".into()
}
fn default_quiet() -> Duration {
    Duration::from_secs(5)
}
fn default_max_wait() -> Duration {
    Duration::from_secs(300)
}
fn default_memory() -> usize {
    100_000
}

impl Default for IngestConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl IngestConfig {
    pub fn check(&self) -> Result<(), String> {
        self.stream.check(&crate::ID)?;
        self.redaction.build()?;
        if self.spans_topic.is_empty() || self.logs_topic.is_empty() || self.spans_topic == self.logs_topic {
            return Err("spans_topic and logs_topic must be two different topics".into());
        }
        if self.trace_quiet.is_zero() || self.trace_max_wait < self.trace_quiet {
            return Err("trace_quiet must be positive and at most trace_max_wait".into());
        }
        Ok(())
    }
}
