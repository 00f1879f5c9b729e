//! # octant-alerter
//!
//! Consumes `octant.windows` (the aggregator's metric windows) and the trajectory topics.
//! Every window of a metric with a veto (unsafe-action rate ≥ 0.20, confirmation gating
//! < 0.80, contamination ≥ 0.40) moves that veto's state; entering *breached* raises a warning,
//! *confirmed* a critical alert (a firing warning escalates), and an alert resolves only
//! after a declared number of consecutive clear windows (see [`rules`]). A single step that
//! is high impact or irreversible, unconfirmed and violating a constraint raises a critical
//! incident at once. Alerts (firing and resolved) go to `octant.alerts` (Avro, keyed by
//! fingerprint) and to Alertmanager's API v2 ([`alertmanager`]), retried with back-off and
//! never blocking the stream.
//!
//! ## Guarantees
//! - **Once per transition.** State is per fingerprint; a window at or before the last one
//!   seen for its fingerprint is a replay and changes nothing; incident fingerprints are
//!   remembered. On start the alerter reads `octant.alerts` back (it is the alerter's own
//!   log) and restores which alerts fire, so a restart neither re-raises nor forgets them.
//! - **At least once** through `octant_runtime::pipeline`: an input offset is committed only
//!   after its alerts are acknowledged by the broker.
//! - Undecodable records on `octant.windows` are dead-lettered; undecodable trajectory events
//!   are counted and skipped (the scorer dead-letters them; a second copy would be noise).

pub mod alertmanager;
pub mod config;
pub mod metrics;
pub mod rules;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use octant_contracts::codec::to_single_object;
use octant_contracts::{
    Alert, AlertKind, AlertStatus, Contract, Decoder, DimensionProfile, MetricWindow, Severity, TrajectoryEvent, topics,
};
use octant_runtime::admin::{self, Health};
use octant_runtime::consumer::{self, GroupShared, PartitionOffsets, TopicPartition};
use octant_runtime::dlq::{SourceRef, dead_letter, now_ms};
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::pipeline::{self, LoopConfig, Stage};
use prometheus::Registry;
use rdkafka::Message;
use rdkafka::message::BorrowedMessage;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use config::AlerterConfig;

use alertmanager::Notifier;
use metrics::Metrics;
use rules::Rules;

const SERVICE: &str = "alerter";

pub struct Running {
    pub admin_addr: SocketAddr,
    pub task: JoinHandle<anyhow::Result<()>>,
    pub health: Arc<Health>,
    /// Every alert as it is published (for in-process viewers: the demo).
    pub alerts: broadcast::Sender<Alert>,
}

pub async fn start(config: AlerterConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid alerter configuration")?;
    let metrics = Metrics::new(&registry);
    let decoder = admin::count_legacy_fingerprints(&registry, SERVICE, Decoder::new());
    let health = Health::new();
    let (admin_addr, _admin) = admin::serve(config.admin_addr, admin::router("alerter", registry, health.clone()), shutdown.clone())
        .await
        .context("failed to start the alerter's admin server")?;
    let alerts_topic = config.kafka.topic(topics::ALERTS);
    let mut rules = Rules::new(config.rules());
    let history = read_back(&config, &alerts_topic).await.context("failed to read octant.alerts back")?;
    for a in &history {
        rules.restore(a);
    }
    let notifier = config.alertmanager().map(|am| alertmanager::spawn(am, metrics.clone(), shutdown.clone()).0);
    // Alertmanager forgets alerts that stop being re-sent: hand it what is still firing.
    let firing: std::collections::HashSet<(String, Severity)> = rules.firing().into_iter().collect();
    if let Some(n) = &notifier {
        for a in history.iter().filter(|a| a.kind == AlertKind::Veto && a.status == AlertStatus::Firing) {
            if firing.contains(&(a.fingerprint.clone(), a.severity)) {
                n.notify(a);
            }
        }
    }
    tracing::info!(restored = history.len(), firing = firing.len(), "alert history read back");
    let producer = kafka::producer(&config.kafka, SERVICE)?;
    let inputs = [
        config.kafka.topic(topics::WINDOWS),
        config.kafka.topic(topics::TRAJECTORIES_PRODUCTION),
        config.kafka.topic(topics::TRAJECTORIES_EVALUATION),
    ];
    let (consumer, shared) = consumer::group_consumer(
        &config.kafka,
        SERVICE,
        &config.group_id,
        &[&inputs[0], &inputs[1], &inputs[2]],
        metrics.consumer_lag.clone(),
    )?;
    let (alerts, _) = broadcast::channel(1024);
    let stage = AlerterStage {
        windows_topic: inputs[0].clone(),
        alerts_topic,
        dlq_topic: config.kafka.topic(topics::DLQ),
        decoder,
        rules,
        notifier,
        metrics,
        alerts: alerts.clone(),
    };
    let loop_cfg = LoopConfig { commit_interval: config.commit_interval, max_inflight: config.max_inflight };
    let task = tokio::spawn(pipeline::run(stage, consumer, shared, producer, health.clone(), loop_cfg, shutdown));
    tracing::info!(%admin_addr, "alerter started");
    Ok(Running { admin_addr, task, health, alerts })
}

pub async fn run(config: AlerterConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(config, registry, shutdown).await?;
    running.task.await.context("alerter task panicked")?
}

/// Every alert on `topic`, from the beginning to the current end of each partition.
async fn read_back(config: &AlerterConfig, topic: &str) -> anyhow::Result<Vec<Alert>> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let kafka = config.kafka.clone();
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<Alert>> {
        let c: BaseConsumer = kafka::client_config(&kafka, SERVICE)
            .set("group.id", format!("{}.read-back", kafka.client_id))
            .set("enable.auto.commit", "false")
            .create()?;
        let md = c.fetch_metadata(Some(&topic), Duration::from_secs(10))?;
        let parts: Vec<i32> = md.topics().first().map(|t| t.partitions().iter().map(|p| p.id()).collect()).unwrap_or_default();
        let mut ends = HashMap::new();
        let mut tpl = TopicPartitionList::new();
        for p in &parts {
            let (lo, hi) = c.fetch_watermarks(&topic, *p, Duration::from_secs(10))?;
            if hi > lo {
                ends.insert(*p, hi);
                tpl.add_partition_offset(&topic, *p, Offset::Offset(lo))?;
            }
        }
        let mut out = Vec::new();
        if ends.is_empty() {
            return Ok(out);
        }
        c.assign(&tpl)?;
        let d = Decoder::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !ends.is_empty() {
            anyhow::ensure!(std::time::Instant::now() < deadline, "timed out reading {topic} back");
            let Some(m) = c.poll(Duration::from_millis(500)) else { continue };
            let m = m?;
            if let Ok(a) = d.decode::<Alert>(m.payload().unwrap_or_default()) {
                out.push(a);
            }
            if ends.get(&m.partition()).is_some_and(|hi| m.offset() + 1 >= *hi) {
                ends.remove(&m.partition());
            }
        }
        Ok(out)
    })
    .await
    .expect("read-back does not panic")
}

struct AlerterStage {
    windows_topic: String,
    alerts_topic: String,
    dlq_topic: String,
    decoder: Decoder,
    rules: Rules,
    notifier: Option<Notifier>,
    metrics: Metrics,
    alerts: broadcast::Sender<Alert>,
}

struct Tag {
    alerts: Vec<(AlertKind, Severity, AlertStatus, String)>,
    dead_letter: Option<&'static str>,
}

fn words(kind: AlertKind, severity: Severity, status: AlertStatus) -> [&'static str; 3] {
    [
        match kind {
            AlertKind::Veto => "veto",
            AlertKind::Incident => "incident",
            AlertKind::Pipeline => "pipeline",
        },
        match severity {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        },
        match status {
            AlertStatus::Firing => "firing",
            AlertStatus::Resolved => "resolved",
        },
    ]
}

impl Stage for AlerterStage {
    type Partition = ();
    type Tag = Tag;

    fn open(&mut self, _tp: &TopicPartition, _offset: i64, _companion: Option<i64>) {}

    fn process(&mut self, _part: &mut (), _offsets: &mut PartitionOffsets, m: &BorrowedMessage<'_>) -> (Vec<OutRecord>, Tag) {
        let payload = m.payload().unwrap_or_default();
        let mut tag = Tag { alerts: Vec::new(), dead_letter: None };
        let mut records = Vec::new();
        let mut alerts = Vec::new();
        if m.topic() == self.windows_topic {
            let name = self.decoder.writer_of(payload).ok().and_then(|(_, k, _)| k).map(|k| k.full_name.as_str());
            match name {
                Some(n) if n == DimensionProfile::FULL_NAME => {
                    self.metrics.inputs.with_label_values(&["profile", "ignored"]).inc();
                }
                _ => match self.decoder.decode::<MetricWindow>(payload) {
                    Ok(w) => {
                        alerts = self.rules.on_window(&w);
                        self.metrics.inputs.with_label_values(&["window", "used"]).inc();
                    }
                    Err(e) => {
                        self.metrics.inputs.with_label_values(&["window", "undecodable"]).inc();
                        let src = SourceRef { topic: m.topic(), partition: m.partition(), offset: m.offset(), key: m.key(), payload };
                        records.push(dead_letter(SERVICE, &self.dlq_topic, &src, e.class(), &e.to_string(), now_ms()).1);
                        tag.dead_letter = Some(e.class());
                    }
                },
            }
        } else {
            match self.decoder.decode::<TrajectoryEvent>(payload) {
                Ok(ev) => {
                    alerts.extend(self.rules.on_event(&ev));
                    self.metrics.inputs.with_label_values(&["event", "used"]).inc();
                }
                Err(_) => self.metrics.inputs.with_label_values(&["event", "undecodable"]).inc(),
            }
        }
        for a in alerts {
            let payload = to_single_object(&a).expect("alerts always encode");
            records.push(OutRecord { topic: self.alerts_topic.clone(), partition: None, key: a.fingerprint.clone(), payload });
            if let Some(n) = &self.notifier {
                n.notify(&a);
            }
            tracing::info!(fingerprint = %a.fingerprint, status = ?a.status, severity = ?a.severity, summary = %a.summary, "alert");
            tag.alerts.push((a.kind, a.severity, a.status, a.system_id.clone()));
            let _ = self.alerts.send(a);
        }
        (records, tag)
    }

    fn acked(&mut self, tag: Tag, latency: Duration) {
        for (k, s, st, system) in tag.alerts {
            let [k, s, st] = words(k, s, st);
            self.metrics.alerts.with_label_values(&[k, s, st, system.as_str()]).inc();
        }
        if let Some(class) = tag.dead_letter {
            self.metrics.dead_letters.with_label_values(&[class]).inc();
        }
        self.metrics.processing_latency.observe(latency.as_secs_f64());
    }

    fn commit_point(&mut self, _part: &mut (), offsets: &PartitionOffsets) -> Option<(i64, i64)> {
        Some((offsets.commit_offset()?, 0))
    }

    fn tick(&mut self, _parts: &mut HashMap<TopicPartition, ((), PartitionOffsets)>, _shared: &GroupShared) -> Vec<OutRecord> {
        let firing = self.rules.firing();
        for sev in [Severity::Warning, Severity::Critical] {
            let n = firing.iter().filter(|(_, s)| *s == sev).count();
            self.metrics.firing.with_label_values(&[words(AlertKind::Veto, sev, AlertStatus::Firing)[1]]).set(n as i64);
        }
        Vec::new()
    }
}
