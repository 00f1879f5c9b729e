//! `octant up`: every service in one process against a real cluster (for a small team; larger
//! deployments run each service as its own process, see `deploy/`), and `octant topics
//! create`. The first real deployment: Collector → Kafka → `octant up --brokers …` → Prometheus.

use std::path::PathBuf;

use anyhow::Context;
use octant_runtime::config::KafkaConfig;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// Every service `octant up` can run, in start order.
pub const SERVICES: [&str; 6] = ["ingest", "scorer", "aggregator", "alerter", "lake_writer", "profiler"];

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Bootstrap servers of the cluster (overrides `[kafka] brokers` of the file).
    #[arg(long, env = "OCTANT_BROKERS")]
    pub brokers: Option<String>,
    /// One TOML file for every service: `[kafka]` (applies to all), the shared `[evaluation]`
    /// (windows, bootstrap, declared instruments), and a section per service: `[ingest]`,
    /// `[scorer]`, `[aggregator]`, `[alerter]`, `[lake_writer]`, `[profiler]`, each with the
    /// settings of that service's own configuration file.
    #[arg(long, env = "OCTANT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Run only these services (comma separated; default: all six).
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
    /// Create Octant's topics, its ingest topic and the Collector's two (existing ones are
    /// left as they are).
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
            for (t, p) in &topics {
                println!("{t}\t{p} partitions");
            }
            Ok(())
        }
    }
}

/// The configuration of one service from the file: its section, with `[kafka]` and (for the
/// services that evaluate) `[evaluation]` filled in where the section does not set them.
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
    // Unknown settings are refused by name, flattened ones included.
    octant_runtime::config::from_table(t).with_context(|| format!("invalid [{name}] section"))
}

pub async fn run(a: UpArgs) -> anyhow::Result<()> {
    let root: toml::Table = match &a.config {
        Some(p) => toml::from_str(&std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?)
            .with_context(|| format!("{} is not valid TOML", p.display()))?,
        None => toml::Table::new(),
    };
    if let Some(unknown) = root.keys().find(|k| !SERVICES.contains(&k.as_str()) && *k != "kafka" && *k != "evaluation") {
        anyhow::bail!("unknown section [{unknown}] (sections: kafka, evaluation, {})", SERVICES.join(", "));
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
    for s in &started {
        eprintln!("running: {s}");
    }
    eprintln!("brokers {}; Ctrl-C stops every service (each drains and commits)", kafka.brokers);
    supervisor.wait().await
}
