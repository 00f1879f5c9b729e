//! Lake-writer configuration (TOML; environment prefix `OCTANT_LAKE_WRITER`).

use std::path::PathBuf;
use std::time::Duration;

use octant_runtime::service::StreamSettings;
use serde::{Deserialize, Serialize};

/// Unknown keys are refused by `octant_runtime::config::load`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LakeWriterConfig {
    /// `kafka`, `group_id`, `admin_addr`, `commit_interval`, `max_inflight`.
    #[serde(flatten)]
    pub stream: StreamSettings,
    /// Where the lake is: a local directory (default `octant-lake`) or an object-store URL
    /// (`s3://bucket/prefix`; `memory://` for experiments).
    #[serde(default = "default_lake")]
    pub lake: PathBuf,
    /// Object-store options (`aws_endpoint`, `aws_region`, `aws_access_key_id`,
    /// `aws_secret_access_key`, `aws_allow_http`, …); `AWS_*` environment variables also work.
    /// Secret values are never logged.
    #[serde(default)]
    pub storage: octant_lake::StorageOptions,
    /// A unit (one input partition's buffer) is written when it holds this many bytes of
    /// records …
    #[serde(default = "default_max_bytes")]
    pub max_file_bytes: usize,
    /// … or when its oldest record has waited this long, whichever comes first.
    #[serde(default = "default_max_age", with = "humantime_serde")]
    pub max_file_age: Duration,
    /// Background compaction: every this long, a writer merges the small files of the input
    /// partitions it owns, per table and date, into files of up to `compact_target_bytes`
    /// (`octant_lake::maintain`; the files stay one partition's, so writers never compact the
    /// same files). `0s`: never (run `octant lake maintain` instead).
    #[serde(default = "default_compact_every", with = "humantime_serde")]
    pub compact_every: Duration,
    #[serde(default = "default_compact_target")]
    pub compact_target_bytes: i64,
    /// Personal data and secrets replaced before writing (the shared `[redaction]` section:
    /// see `octant_runtime::redact`).
    #[serde(default)]
    pub redaction: octant_runtime::redact::RedactionConfig,
}

fn default_lake() -> PathBuf {
    "octant-lake".into()
}
fn default_max_bytes() -> usize {
    64 << 20
}
fn default_max_age() -> Duration {
    Duration::from_secs(60)
}
fn default_compact_every() -> Duration {
    Duration::from_secs(600)
}
fn default_compact_target() -> i64 {
    octant_lake::maintain::TARGET_FILE_BYTES
}
impl Default for LakeWriterConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl LakeWriterConfig {
    pub fn check(&self) -> Result<(), String> {
        self.stream.check(&crate::ID)?;
        self.redaction.build()?;
        if self.compact_target_bytes <= 0 {
            return Err("compact_target_bytes must be positive".into());
        }
        if self.max_file_bytes == 0 {
            return Err("max_file_bytes must be positive".into());
        }
        Ok(())
    }
}
