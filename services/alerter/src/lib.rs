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
//!   remembered. On start, and again after every assignment of partitions (which may come
//!   from another instance of the group), the alerter reads `octant.alerts` back (it is the
//!   alerter's own log) and restores which alerts fire, so neither a restart nor a rebalance
//!   re-raises or forgets them.
//! - **One sender per series to Alertmanager.** An instance re-sends a firing veto alert only
//!   while it owns the partition of the alert's windows (from the first window it reads
//!   there); alerts read back from history are sent once, so an instance that does not own a
//!   series never revives an alert its owner resolved. The series' first window after a
//!   takeover arrives within one slide, well inside `resolve_grace`.
//! - **At least once** through `octant_runtime::pipeline`: an input offset is committed only
//!   after its alerts are acknowledged by the broker.
//! - Undecodable records on `octant.windows` are dead-lettered; undecodable trajectory events
//!   are counted and skipped (the scorer dead-letters them; a second copy would be noise).

pub mod alertmanager;
pub mod config;
pub mod metrics;
pub mod rules;

#[cfg(test)]
mod tests;

use std::time::Duration;

use anyhow::Context;
use octant_contracts::codec::to_single_object;
use octant_contracts::{
    Alert, AlertKind, AlertStatus, Contract, Decoder, DimensionProfile, MetricWindow, Severity, TrajectoryEvent, topics,
};
use octant_runtime::admin;
use octant_runtime::consumer::{CommitPoint, PartitionOffsets, TopicPartition};
use octant_runtime::dlq::DeadLetters;
use octant_runtime::kafka::OutRecord;
use octant_runtime::pipeline::{InMessage, Parts, Stage, TickContext};
use octant_runtime::service::{self, ServiceId};
use prometheus::Registry;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

pub use config::AlerterConfig;

use alertmanager::Notifier;
use metrics::Metrics;
use rules::Rules;

pub const ID: ServiceId = ServiceId { name: "alerter", env: "OCTANT_ALERTER", group: "octant-alerter", admin_port: 9103 };

/// A started alerter; its feed is every alert as it is published.
pub type Running = service::Running<broadcast::Sender<Alert>>;

pub async fn start(config: AlerterConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid alerter configuration")?;
    let kafka = &config.stream.kafka;
    let mut rules = Rules::new(config.rules());
    // The alerter's state is its own log: read octant.alerts back to its end.
    let history = read_history(kafka).await?;
    for a in &history {
        rules.restore(a);
    }
    let mut stage = AlerterStage::new(&config, &registry, rules);
    stage.remember_firing(&history);
    let notifier = config.alertmanager().map(|am| alertmanager::spawn(am, stage.metrics.clone(), shutdown.clone()).0);
    // Alertmanager forgets alerts that stop being re-sent: tell it once what is still firing
    // (re-sent from then on by whichever instance owns the series, when its next window comes).
    if let Some(n) = &notifier {
        for a in stage.firing_alerts.values() {
            n.notify_once(a);
        }
    }
    stage.notifier = notifier;
    tracing::info!(restored = history.len(), firing = stage.firing_alerts.len(), "alert history read back");
    let (feed, lag) = (stage.alerts.clone(), stage.metrics.consumer_lag.clone());
    let inputs = [kafka.topic(topics::WINDOWS), kafka.topic(topics::TRAJECTORIES_PRODUCTION), kafka.topic(topics::TRAJECTORIES_EVALUATION)];
    // Partitions that arrive with an assignment may come from another instance: read the
    // history again then (once per assignment), so no instance re-raises what another raised.
    let reload = |stage: &mut AlerterStage, shared: &std::sync::Arc<octant_runtime::consumer::GroupShared>| {
        stage.reload = Some(Reload { kafka: kafka.clone(), shared: shared.clone(), epoch: shared.assignment_epoch() });
    };
    let running =
        service::start_stage(&ID, &config.stream, registry, &[&inputs[0], &inputs[1], &inputs[2]], lag, stage, reload, shutdown).await?;
    Ok(running.with_feed(feed))
}

/// Every alert on `octant.alerts`, read to its end.
async fn read_history(kafka: &octant_runtime::config::KafkaConfig) -> anyhow::Result<Vec<Alert>> {
    let decoder = Decoder::new();
    Ok(octant_runtime::topic::read_to_end(kafka, &kafka.topic(topics::ALERTS), Duration::from_secs(60))
        .await
        .context("failed to read octant.alerts back")?
        .iter()
        .filter_map(|r| decoder.decode(&r.payload).ok())
        .collect())
}

/// Where and when the history was last read.
struct Reload {
    kafka: octant_runtime::config::KafkaConfig,
    shared: std::sync::Arc<octant_runtime::consumer::GroupShared>,
    epoch: u64,
}

pub async fn run(config: AlerterConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(config, registry, shutdown).await?;
    running.task.await.context("alerter task panicked")?
}

/// The alerter's processing, runnable without a broker (`octant_runtime::pipeline::Driver`).
pub struct AlerterStage {
    windows_topic: String,
    alerts_topic: String,
    dead_letters: DeadLetters,
    decoder: Decoder,
    rules: Rules,
    notifier: Option<Notifier>,
    metrics: Metrics,
    alerts: broadcast::Sender<Alert>,
    /// The latest firing alert of every veto alert that fires (fingerprint + severity), to
    /// hand to Alertmanager when this instance takes its series over.
    firing_alerts: std::collections::BTreeMap<String, Alert>,
    reload: Option<Reload>,
}

/// What a message raised, counted when its records are acknowledged.
pub struct Tag {
    alerts: Vec<(AlertKind, Severity, AlertStatus, String)>,
    dead_letter: Option<&'static str>,
}

impl AlerterStage {
    /// The stage of `config` with its veto state `rules` (restored from history or new), its
    /// metrics registered in `registry`; no Alertmanager until `notifier` is set.
    pub fn new(config: &AlerterConfig, registry: &Registry, rules: Rules) -> AlerterStage {
        let kafka = &config.stream.kafka;
        AlerterStage {
            windows_topic: kafka.topic(topics::WINDOWS),
            alerts_topic: kafka.topic(topics::ALERTS),
            dead_letters: DeadLetters::new(
                ID.name,
                kafka.topic(topics::DLQ),
                config.redaction.build().expect("[redaction] is checked before the stage is built"),
            ),
            decoder: admin::count_legacy_fingerprints(registry, ID.name, Decoder::new()),
            rules,
            notifier: None,
            metrics: Metrics::new(registry),
            alerts: broadcast::channel(1024).0,
            firing_alerts: Default::default(),
            reload: None,
        }
    }

    /// Keeps the latest firing alert of each veto alert that `alerts` (in log order) leave firing.
    fn remember_firing(&mut self, alerts: &[Alert]) {
        for a in alerts.iter().filter(|a| a.kind == AlertKind::Veto) {
            let k = alertmanager::key(a);
            match a.status {
                AlertStatus::Firing => {
                    self.firing_alerts.insert(k, a.clone());
                }
                AlertStatus::Resolved => {
                    self.firing_alerts.remove(&k);
                }
            }
        }
        let firing: std::collections::HashSet<(String, Severity)> = self.rules.firing().into_iter().collect();
        self.firing_alerts.retain(|_, a| firing.contains(&(a.fingerprint.clone(), a.severity)));
    }
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

/// The veto fingerprints whose windows this instance has read on a partition it owns.
pub type Owned = std::collections::HashSet<String>;

impl Stage for AlerterStage {
    type Partition = Owned;
    type Tag = Tag;

    fn open(&mut self, _tp: &TopicPartition, _offset: i64, _companion: Option<i64>) -> anyhow::Result<Owned> {
        if let Some(r) = &mut self.reload {
            let epoch = r.shared.assignment_epoch();
            if epoch != r.epoch {
                // In the loop's blocking section (`open` runs in `block_in_place`).
                // A read that fails fast (brokers just back after an outage) is tried twice more,
                // 1 s and 2 s later; one that hangs is bounded by the read's own timeouts. (The
                // loop is held meanwhile: retrying for longer would outlast the group's poll
                // interval.)
                let mut delay = Duration::from_secs(1);
                let history = loop {
                    match tokio::runtime::Handle::current().block_on(read_history(&r.kafka)) {
                        Ok(h) => break h,
                        Err(e) if delay <= Duration::from_secs(2) => {
                            tracing::warn!(error = format!("{e:#}"), retry_in = ?delay, "reading the alert history failed");
                            std::thread::sleep(delay);
                            delay *= 2;
                        }
                        Err(e) => return Err(e.context("reading the alert history after an assignment")),
                    }
                };
                r.epoch = epoch;
                for a in &history {
                    self.rules.restore(a);
                }
                self.remember_firing(&history);
                tracing::info!(restored = history.len(), epoch, "alert history read again after an assignment");
            }
        }
        Ok(Owned::new())
    }

    fn close(&mut self, _tp: &TopicPartition, owned: Owned) {
        // The series may move to another instance, which re-sends their alerts from then on.
        for f in owned {
            self.rules.forget_clear_count(&f);
            if let Some(n) = &self.notifier {
                n.forget(&f);
            }
        }
    }

    fn process(&mut self, part: &mut Owned, _offsets: &mut PartitionOffsets, m: &InMessage<'_>) -> (Vec<OutRecord>, Tag) {
        let payload = m.payload;
        let mut tag = Tag { alerts: Vec::new(), dead_letter: None };
        let mut records = Vec::new();
        let mut alerts = Vec::new();
        if m.topic == self.windows_topic {
            let name = self.decoder.writer_of(payload).ok().and_then(|(_, k, _)| k).map(|k| k.full_name.as_str());
            match name {
                Some(n) if n == DimensionProfile::FULL_NAME => {
                    self.metrics.inputs.with_label_values(&["profile", "ignored"]).inc();
                }
                _ => match self.decoder.decode::<MetricWindow>(payload) {
                    Ok(w) => {
                        alerts = self.rules.on_window(&w);
                        self.metrics.inputs.with_label_values(&["window", "used"]).inc();
                        // The first window of a series on a partition this instance owns: it
                        // re-sends the series' firing alerts to Alertmanager from now on.
                        if let Some(rule) = octant_core::catalogue::spec(&w.metric).and_then(|s| s.veto) {
                            let f = rules::veto_fingerprint(&w, rule.name);
                            if part.insert(f.clone())
                                && let Some(n) = &self.notifier
                            {
                                for a in self.firing_alerts.values().filter(|a| a.fingerprint == f) {
                                    if !alerts.iter().any(|x| alertmanager::key(x) == alertmanager::key(a)) {
                                        n.notify(a);
                                    }
                                }
                            }
                        }
                    }
                    Err(e) => {
                        self.metrics.inputs.with_label_values(&["window", "undecodable"]).inc();
                        records.push(self.dead_letters.message(m, e.class(), &e.to_string()));
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
        if !alerts.is_empty() {
            self.remember_firing(&alerts);
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

    fn commit_point(&mut self, _part: &mut Owned, offsets: &PartitionOffsets) -> Option<CommitPoint> {
        Some(CommitPoint { offset: offsets.commit_offset()?, companion: 0 })
    }

    fn tick(&mut self, _parts: &mut Parts<Owned>, _ctx: &TickContext<'_>) -> Vec<OutRecord> {
        let firing = self.rules.firing();
        for sev in [Severity::Warning, Severity::Critical] {
            let n = firing.iter().filter(|(_, s)| *s == sev).count();
            self.metrics.firing.with_label_values(&[words(AlertKind::Veto, sev, AlertStatus::Firing)[1]]).set(n as i64);
        }
        Vec::new()
    }
}
