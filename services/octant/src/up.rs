//! `octant up`: every service in one process against a real cluster (for a small team; larger
//! deployments run each service as its own process, see `deploy/`), and `octant topics
//! create`. The first real deployment: Collector → Kafka → `octant up --brokers …` → Prometheus.

use std::path::PathBuf;

use anyhow::Context;
use octant_runtime::config::KafkaConfig;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// Every service `octant up` can run, in start order.
pub const SERVICES: [&str; 7] = ["ingest", "scorer", "aggregator", "alerter", "lake_writer", "profiler", "web"];

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Bootstrap servers of the cluster (overrides `[kafka] brokers` of the file).
    #[arg(long, env = "OCTANT_BROKERS")]
    pub brokers: Option<String>,
    /// One TOML file for every service: `[kafka]` (applies to all), the shared `[evaluation]`
    /// (windows, bootstrap, declared instruments), and a section per service: `[ingest]`,
    /// `[scorer]`, `[aggregator]`, `[alerter]`, `[lake_writer]`, `[profiler]`, `[web]`, each with
    /// the settings of that service's own configuration file (`[web]` reads the profiler's
    /// `lake`, `storage` and `evidence` unless it sets its own).
    #[arg(long, env = "OCTANT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Run only these services (comma separated; default: all seven).
    #[arg(long, value_delimiter = ',')]
    pub services: Vec<String>,
    /// Create missing topics first (`octant topics create` with these partitions and the
    /// replication below).
    #[arg(long)]
    pub create_topics: bool,
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1)]
    pub replication: i32,
}

#[derive(clap::Args, Debug)]
pub struct TopicsArgs {
    #[command(subcommand)]
    pub command: TopicsCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum TopicsCommand {
    /// Create Octant's topics, its ingest topic, the import ledger and the Collector's two
    /// (existing ones are left as they are).
    Create(CreateArgs),
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    #[arg(long, env = "OCTANT_BROKERS")]
    pub brokers: String,
    /// Prefix of Octant's topic names (not of the Collector's).
    #[arg(long, default_value = "")]
    pub topic_prefix: String,
    /// Partitions of the keyed topics (trajectories, observations, windows, ingest);
    /// alerts, profiles and dead letters get one.
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1)]
    pub replication: i32,
    /// The Collector's topics for traces and logs.
    #[arg(long, default_value = "otlp_spans")]
    pub spans_topic: String,
    #[arg(long, default_value = "otlp_logs")]
    pub logs_topic: String,
}

/// The topics `octant topics create` makes.
pub fn all_topics(kafka: &KafkaConfig, partitions: i32, spans: &str, logs: &str) -> Vec<(String, i32)> {
    let mut t = octant_runtime::kafka::default_topics(kafka, partitions);
    t.push((spans.to_string(), partitions));
    t.push((logs.to_string(), partitions));
    t
}

pub async fn topics(a: TopicsArgs) -> anyhow::Result<()> {
    match a.command {
        TopicsCommand::Create(c) => {
            let kafka = KafkaConfig { brokers: c.brokers, topic_prefix: c.topic_prefix, ..KafkaConfig::default() };
            let topics = all_topics(&kafka, c.partitions, &c.spans_topic, &c.logs_topic);
            octant_runtime::kafka::create_topics(&kafka, &topics, c.replication).await.context("creating topics")?;
            // The import ledger (`octant import`): compacted, one partition.
            let ledger = kafka.topic(octant_import::ledger::TOPIC);
            octant_runtime::kafka::ensure_compacted_topic(&kafka, &ledger, c.replication).await.context("creating the import ledger")?;
            for (t, p) in &topics {
                println!("{t}\t{p} partitions");
            }
            println!("{ledger}\t1 partition, compacted");
            Ok(())
        }
    }
}

/// The configuration of one service from the file: its section, with `[kafka]` and (for the
/// services that evaluate) `[evaluation]`, and `[redaction]`, filled in where the section does not set them.
fn section<T: DeserializeOwned + serde::Serialize>(
    root: &toml::Table,
    name: &str,
    kafka: &toml::Value,
    evaluation: Option<&toml::Value>,
) -> anyhow::Result<T> {
    let mut t = match root.get(name) {
        Some(toml::Value::Table(t)) => t.clone(),
        Some(_) => anyhow::bail!("[{name}] must be a table"),
        None => toml::Table::new(),
    };
    t.entry("kafka").or_insert_with(|| kafka.clone());
    if let Some(e) = evaluation {
        t.entry("evaluation").or_insert_with(|| e.clone());
    }
    // The web view reads what the profiler reads and writes.
    if name == "web"
        && let Some(toml::Value::Table(p)) = root.get("profiler")
    {
        for key in ["lake", "storage", "evidence"] {
            if let Some(v) = p.get(key) {
                t.entry(key).or_insert_with(|| v.clone());
            }
        }
    }
    // `[redaction]` for every service that writes what it read (the profiler and the web view
    // read the lake, already redacted).
    if let Some(r) = root.get("redaction")
        && name != "profiler"
        && name != "web"
    {
        t.entry("redaction").or_insert_with(|| r.clone());
    }
    // Unknown settings are refused by name, flattened ones included.
    octant_runtime::config::from_table(t).with_context(|| format!("invalid [{name}] section"))
}

pub async fn run(a: UpArgs) -> anyhow::Result<()> {
    let root: toml::Table = match &a.config {
        Some(p) => toml::from_str(&std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?)
            .with_context(|| format!("{} is not valid TOML", p.display()))?,
        None => toml::Table::new(),
    };
    if let Some(unknown) =
        root.keys().find(|k| !SERVICES.contains(&k.as_str()) && !["kafka", "evaluation", "redaction"].contains(&k.as_str()))
    {
        anyhow::bail!("unknown section [{unknown}] (sections: kafka, evaluation, redaction, {})", SERVICES.join(", "));
    }
    let mut kafka: KafkaConfig = match root.get("kafka") {
        Some(v) => v.clone().try_into().context("invalid [kafka] section")?,
        None => KafkaConfig::default(),
    };
    if let Some(b) = &a.brokers {
        kafka.brokers = b.clone();
    }
    anyhow::ensure!(!kafka.brokers.is_empty(), "no brokers: give --brokers (or [kafka] brokers); `octant demo` runs an embedded one");
    let kafka_value = toml::Value::try_from(&kafka)?;
    let evaluation = root.get("evaluation");
    let wanted = |s: &str| a.services.is_empty() || a.services.iter().any(|x| x == s);
    if let Some(bad) = a.services.iter().find(|s| !SERVICES.contains(&s.as_str())) {
        anyhow::bail!("unknown service {bad} (services: {})", SERVICES.join(", "));
    }

    let ingest: octant_ingest::IngestConfig = section(&root, "ingest", &kafka_value, None)?;
    if a.create_topics {
        let topics = all_topics(&kafka, a.partitions, &ingest.spans_topic, &ingest.logs_topic);
        octant_runtime::kafka::create_topics(&kafka, &topics, a.replication).await.context("creating topics")?;
        tracing::info!(count = topics.len(), "topics created (existing ones left as they are)");
    }
    let shutdown = CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), std::time::Duration::from_secs(30));
    let registry = prometheus::Registry::new();
    let mut supervisor = octant_runtime::supervisor::Supervisor::new(shutdown.clone());
    let mut started = Vec::new();
    macro_rules! start {
        ($name:literal, $cfg:expr, $start:path) => {
            if wanted($name) {
                let running = $start($cfg, registry.clone(), shutdown.clone()).await.with_context(|| format!("{} did not start", $name))?;
                started.push(format!("{} http://{}/metrics", $name, running.admin_addr));
                supervisor.add($name, running.task);
            }
        };
    }
    start!("ingest", ingest, octant_ingest::start);
    start!("scorer", section::<octant_scorer::ScorerConfig>(&root, "scorer", &kafka_value, evaluation)?, octant_scorer::start);
    start!(
        "aggregator",
        section::<octant_aggregator::AggregatorConfig>(&root, "aggregator", &kafka_value, evaluation)?,
        octant_aggregator::start
    );
    start!("alerter", section::<octant_alerter::AlerterConfig>(&root, "alerter", &kafka_value, None)?, octant_alerter::start);
    start!(
        "lake_writer",
        section::<octant_lake_writer::LakeWriterConfig>(&root, "lake_writer", &kafka_value, None)?,
        octant_lake_writer::start
    );
    start!("profiler", section::<octant_profiler::ProfilerConfig>(&root, "profiler", &kafka_value, evaluation)?, octant_profiler::start);
    start!("web", section::<octant_web::WebConfig>(&root, "web", &kafka_value, None)?, octant_web::start);
    for s in &started {
        eprintln!("running: {s}");
    }
    eprintln!("brokers {}; Ctrl-C stops every service (each drains and commits)", kafka.brokers);
    supervisor.wait().await
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Every service's configuration from one file: `[kafka]` and `[evaluation]` fill in what a
    /// section does not set.
    #[test]
    fn sections_inherit_kafka_and_evaluation() {
        let root: toml::Table = toml::from_str(
            "[kafka]\ntopic_prefix = \"p.\"\n[evaluation.window]\nlength = \"10m\"\n[scorer]\nidle_timeout = \"2m\"\n[aggregator.kafka]\ntopic_prefix = \"own.\"\n",
        )
        .unwrap();
        let kafka =
            toml::Value::try_from(KafkaConfig { brokers: "b:9092".into(), topic_prefix: "p.".into(), ..KafkaConfig::default() }).unwrap();
        let scorer: octant_scorer::ScorerConfig = section(&root, "scorer", &kafka, root.get("evaluation")).unwrap();
        assert_eq!((scorer.stream.kafka.brokers.as_str(), scorer.stream.kafka.topic_prefix.as_str()), ("b:9092", "p."));
        assert_eq!(scorer.idle_timeout, std::time::Duration::from_secs(120));
        assert_eq!(scorer.evaluation.window.length, std::time::Duration::from_secs(600));
        let agg: octant_aggregator::AggregatorConfig = section(&root, "aggregator", &kafka, root.get("evaluation")).unwrap();
        assert_eq!(agg.stream.kafka.topic_prefix, "own.", "a section's own [kafka] wins");
        // The web view reads the profiler's lake and evidence unless it names its own.
        let root: toml::Table =
            toml::from_str("[profiler]\nlake = \"/data/lake\"\nevidence = \"/data/evidence\"\n[web]\nevidence = \"/e\"\n").unwrap();
        let web: octant_web::WebConfig = section(&root, "web", &kafka, None).unwrap();
        assert_eq!((web.lake.to_str(), web.evidence.to_str()), (Some("/data/lake"), Some("/e")));
    }

    fn any_value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("\"x\"".to_string()),
            Just("\"10s\"".to_string()),
            Just("-1".to_string()),
            Just("1e308".to_string()),
            Just("true".to_string()),
            Just("[1, \"a\"]".to_string()),
            Just("{ family = \"higher\" }".to_string()),
            "\"[ -~]{0,12}\"".prop_map(|s| s),
            any::<i64>().prop_map(|i| i.to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Arbitrary settings (known and unknown names, any value type) in any section: every
        /// service's configuration is built or refused with an error, never a panic; and what is
        /// built passes or fails its own check without panicking.
        #[test]
        fn no_configuration_makes_the_loader_panic(
            lines in proptest::collection::vec(
                (
                    prop::sample::select(vec!["", "kafka.", "evaluation.", "evaluation.window.", "evaluation.bootstrap.", "mapping."]),
                    prop::sample::select(vec![
                        "brokers", "topic_prefix", "idle_timeout", "length", "slide", "tumbling", "replicates", "level", "seed",
                        "commit_interval", "max_inflight", "admin_addr", "trace_quiet", "tool_impact", "lake", "budgets", "nope",
                    ]),
                    any_value(),
                ),
                0..8,
            ),
            service in prop::sample::select(SERVICES.to_vec()),
            junk in "[ -~\n]{0,40}",
        ) {
            let mut text = format!("[{service}]\n");
            for (prefix, key, value) in &lines {
                text.push_str(&format!("{prefix}{key} = {value}\n"));
            }
            let kafka = toml::Value::try_from(KafkaConfig::default()).unwrap();
            for candidate in [text.clone(), format!("{text}{junk}")] {
                let Ok(root) = toml::from_str::<toml::Table>(&candidate) else { continue };
                let ev = root.get(service).and_then(|s| s.get("evaluation")).cloned();
                match service {
                    "ingest" => { let _ = section::<octant_ingest::IngestConfig>(&root, service, &kafka, None).map(|c| c.check()); }
                    "scorer" => { let _ = section::<octant_scorer::ScorerConfig>(&root, service, &kafka, ev.as_ref()).map(|c| c.check()); }
                    "aggregator" => { let _ = section::<octant_aggregator::AggregatorConfig>(&root, service, &kafka, ev.as_ref()).map(|c| c.check()); }
                    "alerter" => { let _ = section::<octant_alerter::AlerterConfig>(&root, service, &kafka, None).map(|c| c.check()); }
                    "lake_writer" => { let _ = section::<octant_lake_writer::LakeWriterConfig>(&root, service, &kafka, None).map(|c| c.check()); }
                    "profiler" => { let _ = section::<octant_profiler::ProfilerConfig>(&root, service, &kafka, ev.as_ref()).map(|c| c.check()); }
                    _ => { let _ = section::<octant_web::WebConfig>(&root, service, &kafka, None).map(|c| c.check()); }
                }
            }
        }
    }
}
