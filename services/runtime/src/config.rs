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
/// A key that `T` does not have is an error naming it (configurations flatten shared
/// settings, which serde's `deny_unknown_fields` cannot check).
pub fn load<T: DeserializeOwned + Serialize>(path: Option<&Path>, prefix: &str) -> Result<T, RuntimeError> {
    load_with_shared(path, prefix, &[])
}

/// Like [`load`], for a configuration with sections shared between services (the
/// `[evaluation]` section the aggregator and the profiler both read). For each shared section
/// `name`, in order of precedence (later wins): the service's own file; the TOML file named by
/// `OCTANT_<NAME>_FILE` (the section's fields at its top level); `OCTANT_<NAME>__…` variables;
/// the service's `<PREFIX>__<NAME>__…` variables. One file or one set of variables configures
/// every service that reads the section.
pub fn load_with_shared<T: DeserializeOwned + Serialize>(path: Option<&Path>, prefix: &str, shared: &[&str]) -> Result<T, RuntimeError> {
    let mut root = match path {
        Some(p) => read_table(p)?,
        None => toml::Table::new(),
    };
    let vars: Vec<(String, String)> = std::env::vars().collect();
    for name in shared {
        let upper = name.to_ascii_uppercase();
        let mut section = match root.remove(*name) {
            Some(toml::Value::Table(t)) => t,
            Some(other) => return Err(RuntimeError::Config(format!("[{name}] must be a table, not {other}"))),
            None => toml::Table::new(),
        };
        if let Some((_, file)) = vars.iter().find(|(k, _)| *k == format!("OCTANT_{upper}_FILE")) {
            merge(&mut section, read_table(Path::new(file))?);
        }
        apply_env(&mut section, &format!("OCTANT_{upper}"), vars.iter().cloned());
        root.insert(name.to_string(), toml::Value::Table(section));
    }
    apply_env(&mut root, prefix, vars);
    from_table(root)
}

/// `T` from a table, refusing keys `T` does not know.
pub fn from_table<T: DeserializeOwned + Serialize>(root: toml::Table) -> Result<T, RuntimeError> {
    let value: T = toml::Value::Table(root.clone()).try_into().map_err(|e| RuntimeError::Config(format!("invalid configuration: {e}")))?;
    // Every key given must come back when the value is written out again.
    if let Ok(toml::Value::Table(known)) = toml::Value::try_from(&value) {
        let mut unknown = Vec::new();
        unknown_keys(&root, &known, "", &mut unknown);
        if !unknown.is_empty() {
            return Err(RuntimeError::Config(format!(
                "unknown setting{} {}",
                if unknown.len() > 1 { "s" } else { "" },
                unknown.join(", ")
            )));
        }
    }
    Ok(value)
}

fn unknown_keys(given: &toml::Table, known: &toml::Table, path: &str, out: &mut Vec<String>) {
    for (k, v) in given {
        let here = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
        match (known.get(k), v) {
            (None, _) => out.push(here),
            (Some(toml::Value::Table(kt)), toml::Value::Table(gt)) => unknown_keys(gt, kt, &here, out),
            _ => {}
        }
    }
}

fn read_table(p: &Path) -> Result<toml::Table, RuntimeError> {
    let text = std::fs::read_to_string(p).map_err(|e| RuntimeError::Config(format!("failed to read {}: {e}", p.display())))?;
    toml::from_str::<toml::Table>(&text).map_err(|e| RuntimeError::Config(format!("{} is not valid TOML: {e}", p.display())))
}

/// Deep-merges `over` into `base` (tables merge, anything else replaces).
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
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

/// A configured secret (a password, a token): its value never reaches `Debug`, `Display` or
/// logs; [`Secret::expose`] is the one way to read it, where it is used.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

pub use octant_contracts::secrets::is_secret_key;

impl KafkaConfig {
    /// "cannot reach the brokers …" with the connection settings that matter (security
    /// protocol, SASL mechanism and user; secrets redacted), for errors at start-up.
    pub fn unreachable_hint(&self) -> String {
        let shown: Vec<String> = self
            .settings
            .iter()
            .filter(|(k, _)| k.starts_with("security.") || k.starts_with("sasl.") || k.starts_with("ssl."))
            .map(|(k, v)| format!("{k}={}", if is_secret_key(k) { "[redacted]" } else { v.as_str() }))
            .collect();
        let how = if shown.is_empty() { "plaintext".to_string() } else { shown.join(", ") };
        format!("cannot reach the Kafka brokers {} ({how}): check the address, TLS and SASL settings", self.brokers)
    }
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
    fn unknown_settings_are_named_also_through_flattened_sections() {
        #[derive(Debug, Serialize, Deserialize)]
        struct Outer {
            #[serde(flatten)]
            common: crate::service::StreamSettings,
            #[serde(default)]
            own: u32,
        }
        let ok: Outer = from_table(toml::from_str("own = 3\nmax_inflight = 5\n[kafka]\nbrokers = \"a:1\"\n").unwrap()).unwrap();
        assert_eq!((ok.own, ok.common.max_inflight, ok.common.kafka.brokers.as_str()), (3, 5, "a:1"));
        let e = from_table::<Outer>(toml::from_str("owm = 3\nmax_inflihgt = 2\n").unwrap()).unwrap_err();
        assert!(e.to_string().ends_with("unknown settings max_inflihgt, owm"), "{e}");
        let e = from_table::<Outer>(toml::from_str("[kafka]\nbrokres = \"a:1\"\n").unwrap()).unwrap_err();
        assert!(e.to_string().contains("unknown field `brokres`"), "{e}");
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
    fn shared_sections_layer_file_then_variables() {
        let mut t: toml::Table = toml::from_str("[evaluation]\nx = 1\ny = 1\n[evaluation.inner]\na = 1\nb = 1\n").unwrap();
        let mut section = match t.remove("evaluation") {
            Some(toml::Value::Table(s)) => s,
            _ => unreachable!(),
        };
        merge(&mut section, toml::from_str("y = 2\n[inner]\nb = 2\n").unwrap());
        apply_env(&mut section, "OCTANT_EVALUATION", [("OCTANT_EVALUATION__INNER__A".to_string(), "3".to_string())]);
        assert_eq!(
            section.to_string(),
            toml::Table::from_iter([
                ("x".into(), 1.into()),
                ("y".into(), 2.into()),
                (
                    "inner".into(),
                    toml::Value::Table(toml::Table::from_iter([
                        ("a".to_string(), toml::Value::from(3)),
                        ("b".to_string(), toml::Value::from(2))
                    ]))
                )
            ])
            .to_string()
        );
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
