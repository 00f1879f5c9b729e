//! Configuration: TOML files with environment overrides, and the Kafka client settings every
//! service shares.
//!
//! Environment variables override the file: `OCTANT_SCORER__KAFKA__BROKERS=host:9092` sets
//! `kafka.brokers` of a config loaded with prefix `OCTANT_SCORER`. Path segments are separated
//! by `__` and lower-cased; a value that parses as a TOML scalar (number, boolean) is taken as
//! such, anything else as a string.

use std::collections::BTreeMap;
use std::path::Path;

use octant_contracts::FingerprintKind;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::RuntimeError;

/// Loads `T` from an optional TOML file, then applies environment overrides under `prefix`.
pub fn load<T: DeserializeOwned>(path: Option<&Path>, prefix: &str) -> Result<T, RuntimeError> {
    let mut root = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| RuntimeError::Config(format!("failed to read {}: {e}", p.display())))?;
            toml::from_str::<toml::Table>(&text).map_err(|e| RuntimeError::Config(format!("{} is not valid TOML: {e}", p.display())))?
        }
        None => toml::Table::new(),
    };
    apply_env(&mut root, prefix, std::env::vars());
    toml::Value::Table(root).try_into().map_err(|e| RuntimeError::Config(format!("invalid configuration: {e}")))
}

/// Applies `PREFIX__A__B=value` overrides to a TOML table.
pub fn apply_env(root: &mut toml::Table, prefix: &str, vars: impl IntoIterator<Item = (String, String)>) {
    let start = format!("{prefix}__");
    for (key, value) in vars {
        let Some(path) = key.strip_prefix(&start) else { continue };
        let segments: Vec<String> = path.split("__").map(|s| s.to_ascii_lowercase()).collect();
        let mut table = &mut *root;
        for seg in &segments[..segments.len() - 1] {
            let entry = table.entry(seg.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if !entry.is_table() {
                *entry = toml::Value::Table(toml::Table::new());
            }
            table = entry.as_table_mut().expect("made a table above");
        }
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|t| t.get("v").cloned())
            .filter(|v| !v.is_table() && !v.is_array())
            .unwrap_or(toml::Value::String(value));
        table.insert(segments.last().expect("non-empty").clone(), parsed);
    }
}

/// Kafka client settings shared by every service.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// Bootstrap servers, comma separated. Empty means "the embedded broker" where the
    /// command supports one (`octant demo`, the tests).
    #[serde(default)]
    pub brokers: String,
    /// Client id prefix; the service name is appended.
    #[serde(default = "default_client_id")]
    pub client_id: String,
    /// Prefix of every topic name (e.g. `staging.` gives `staging.octant.observations`).
    /// Empty by default; the tests give each test its own prefix.
    #[serde(default)]
    pub topic_prefix: String,
    /// Extra librdkafka settings passed through verbatim (security.protocol, sasl.mechanism,
    /// sasl.username, sasl.password, ssl.ca.location, …). Values of keys that look secret are
    /// never printed.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// Which schema fingerprint the Avro single-object records this process writes carry:
    /// `standard` (the Avro specification's; default) or `legacy` (what Octant 0.1 wrote),
    /// only while a rolling upgrade still has old readers. Readers accept both. Process-wide:
    /// applied when a service creates its producer.
    #[serde(default)]
    pub avro_fingerprint: FingerprintKind,
}

fn default_client_id() -> String {
    "octant".into()
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            brokers: String::new(),
            client_id: default_client_id(),
            topic_prefix: String::new(),
            settings: BTreeMap::new(),
            avro_fingerprint: FingerprintKind::Standard,
        }
    }
}

impl KafkaConfig {
    /// The full name of a topic: the prefix, then the base name from
    /// `octant_contracts::topics`.
    pub fn topic(&self, base: &str) -> String {
        format!("{}{base}", self.topic_prefix)
    }
}

/// True for librdkafka keys whose values are secrets.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "token", "ssl.key.pem", "ssl.keystore", "sasl.oauthbearer.config", "credential"].iter().any(|s| k.contains(s))
}

impl std::fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let settings: BTreeMap<&str, &str> =
            self.settings.iter().map(|(k, v)| (k.as_str(), if is_secret_key(k) { "[redacted]" } else { v.as_str() })).collect();
        f.debug_struct("KafkaConfig")
            .field("brokers", &self.brokers)
            .field("client_id", &self.client_id)
            .field("topic_prefix", &self.topic_prefix)
            .field("settings", &settings)
            .field("avro_fingerprint", &self.avro_fingerprint)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Svc {
        kafka: KafkaConfig,
        #[serde(default)]
        batch: u32,
        #[serde(default, with = "humantime_serde")]
        idle: Option<std::time::Duration>,
    }

    #[test]
    fn env_overrides_the_file() {
        let mut t: toml::Table = toml::from_str("batch = 5\n[kafka]\nbrokers = \"a:1\"\n").unwrap();
        apply_env(
            &mut t,
            "OCTANT_X",
            [
                ("OCTANT_X__KAFKA__BROKERS".to_string(), "b:2".to_string()),
                ("OCTANT_X__BATCH".to_string(), "9".to_string()),
                ("OCTANT_X__IDLE".to_string(), "5m".to_string()),
                ("OCTANT_X__KAFKA__SETTINGS__SASL.PASSWORD".to_string(), "hunter2".to_string()),
                ("OTHER__BATCH".to_string(), "1".to_string()),
            ],
        );
        let svc: Svc = toml::Value::Table(t).try_into().unwrap();
        assert_eq!(svc.kafka.brokers, "b:2");
        assert_eq!(svc.batch, 9);
        assert_eq!(svc.idle, Some(std::time::Duration::from_secs(300)));
        assert_eq!(svc.kafka.settings["sasl.password"], "hunter2");
    }

    #[test]
    fn secrets_never_reach_debug() {
        let mut k = KafkaConfig::default();
        k.settings.insert("sasl.password".into(), "hunter2".into());
        k.settings.insert("sasl.username".into(), "svc".into());
        k.settings.insert("ssl.key.password".into(), "pem-secret".into());
        let shown = format!("{k:?} {:?}", Svc { kafka: k.clone(), batch: 0, idle: None });
        assert!(!shown.contains("hunter2") && !shown.contains("pem-secret"), "{shown}");
        assert!(shown.contains("svc"));
    }
}
