//! # octant-aggregator
//!
//! Consumes `octant.observations` (keyed by system id, so one instance owns a system's
//! state), drops duplicate observation ids, and keeps event-time sliding windows per (system,
//! version, source, metric, benchmark) — 1 h long sliding every minute by default, tumbling as
//! an option. When the watermark closes a window it publishes, to `octant.windows` (keyed by
//! system id), one `MetricWindow` per series (count of units and clusters, estimate, 95 %
//! bootstrap interval clustered by run, band and band interval, N/A reason, veto state) and
//! one `DimensionProfile` per (system, version, source): the eight dimension bands with
//! intervals, veto caps applied, N/A reasons. It exports the latest values as Prometheus
//! gauges. Late observations go to `octant.dlq` (class `late_observation`) and are counted.
//!
//! ## Layout
//! - [`window`]: window state and emission (pure; the determinism argument lives there).
//! - [`upstream`]: the watermark, the minimum over the scorer's input partitions (pure).
//! - [`output`]: emissions → records (pure). [`config`], [`metrics`]; this file: the stage.
//!
//! ## Guarantees
//! - **Deterministic windows.** A window's content depends only on the observations of its
//!   series, never on partitioning or arrival order between series; the bootstrap depends only
//!   on the data and the seed.
//! - **Restart and rebalance change no emitted value.** The commit point is the offset from
//!   which a replay rebuilds every pane a future window needs, with the window frontier in
//!   force there as the companion value (`Windows::commit_point`); a new owner replays from it
//!   and re-emits identical windows (same ids) — duplicates at most, never different values.
//! - **At least once** through `octant_runtime::pipeline`.

pub mod config;
pub mod metrics;
pub mod output;
pub mod upstream;
pub mod window;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use octant_contracts::codec::to_single_object;
use octant_contracts::{Contract, Decoder, Observation, Watermark, topics};
use octant_core::profile::Profile;
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

pub use config::AggregatorConfig;

use metrics::Metrics;
use upstream::Upstream;
use window::{Added, Windows};

/// State of one input partition.
pub struct PartitionState {
    windows: Windows,
    upstream: Upstream,
}

const SERVICE: &str = "aggregator";

/// A published profile, for in-process viewers (the demo's live table).
#[derive(Debug, Clone)]
pub struct ProfileUpdate {
    pub record: octant_contracts::DimensionProfile,
    pub profile: Arc<Profile>,
}

pub struct Running {
    pub admin_addr: SocketAddr,
    pub task: JoinHandle<anyhow::Result<()>>,
    pub health: Arc<Health>,
    /// Every profile the aggregator publishes, as it publishes it.
    pub profiles: broadcast::Sender<ProfileUpdate>,
}

pub async fn start(config: AggregatorConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid aggregator configuration")?;
    let metrics = Metrics::new(&registry);
    let health = Health::new();
    let (admin_addr, _admin) = admin::serve(config.admin_addr, admin::router(registry, health.clone()), shutdown.clone())
        .await
        .context("failed to start the aggregator's admin server")?;
    let producer = kafka::producer(&config.kafka, SERVICE)?;
    let (consumer, shared) = consumer::group_consumer(
        &config.kafka,
        SERVICE,
        &config.group_id,
        &[&config.kafka.topic(topics::OBSERVATIONS)],
        metrics.consumer_lag.clone(),
    )?;
    let (profiles, _) = broadcast::channel(1024);
    let stage = AggregatorStage {
        out_topics: (config.kafka.topic(topics::WINDOWS), config.kafka.topic(topics::DLQ)),
        decoder: Decoder::new(),
        metrics,
        profiles: profiles.clone(),
        config: config.clone(),
    };
    let loop_cfg = LoopConfig { commit_interval: config.commit_interval, max_inflight: config.max_inflight };
    let task = tokio::spawn(pipeline::run(stage, consumer, shared, producer, health.clone(), loop_cfg, shutdown));
    tracing::info!(%admin_addr, "aggregator started");
    Ok(Running { admin_addr, task, health, profiles })
}

pub async fn run(config: AggregatorConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(config, registry, shutdown).await?;
    running.task.await.context("aggregator task panicked")?
}

struct AggregatorStage {
    /// (windows, dead letters), prefix applied.
    out_topics: (String, String),
    decoder: Decoder,
    metrics: Metrics,
    profiles: broadcast::Sender<ProfileUpdate>,
    config: AggregatorConfig,
}

struct Tag {
    windows: u64,
    profiles: u64,
    dead_letter: Option<&'static str>,
}

impl AggregatorStage {
    /// Records (and gauges, and in-process profile updates) for closed windows.
    fn publish(&self, emissions: &[window::Emission], records: &mut Vec<OutRecord>, tag: &mut Tag) {
        let boot = self.config.bootstrap_spec();
        for e in emissions {
            let out = output::build(e, &self.config, &boot, &self.config.profile);
            self.publish_gauges(&out);
            for w in &out.windows {
                let payload = to_single_object(w).expect("windows always encode");
                records.push(OutRecord { partition: None, topic: self.out_topics.0.clone(), key: w.system_id.clone(), payload });
            }
            tag.windows += out.windows.len() as u64;
            for (record, profile) in out.profiles {
                let payload = to_single_object(&record).expect("profiles always encode");
                records.push(OutRecord { partition: None, topic: self.out_topics.0.clone(), key: record.system_id.clone(), payload });
                let _ = self.profiles.send(ProfileUpdate { record, profile: Arc::new(profile) });
                tag.profiles += 1;
            }
        }
    }

    fn publish_gauges(&self, out: &output::Outputs) {
        let m = &self.metrics;
        for w in &out.windows {
            let labels = [
                w.system_id.as_str(),
                w.system_version.as_str(),
                w.source.as_str(),
                w.metric.as_str(),
                w.dimension.as_str(),
                w.benchmark.as_deref().unwrap_or(""),
            ];
            m.units.with_label_values(&labels).set(w.units as f64);
            match (w.estimate, w.ci_low, w.ci_high) {
                (Some(e), Some(lo), Some(hi)) => {
                    m.estimate.with_label_values(&labels).set(e);
                    m.ci_low.with_label_values(&labels).set(lo);
                    m.ci_high.with_label_values(&labels).set(hi);
                }
                _ => {
                    let _ = m.estimate.remove_label_values(&labels);
                    let _ = m.ci_low.remove_label_values(&labels);
                    let _ = m.ci_high.remove_label_values(&labels);
                }
            }
            match w.band {
                Some(b) => m.band.with_label_values(&labels).set(b as f64),
                None => {
                    let _ = m.band.remove_label_values(&labels);
                }
            }
        }
        for (record, profile) in &out.profiles {
            let base = [record.system_id.as_str(), record.system_version.as_str(), record.source.as_str()];
            for d in &record.dimensions {
                let labels = [base[0], base[1], base[2], d.dimension.as_str()];
                match (d.band, d.band_low, d.band_high) {
                    (Some(b), lo, hi) => {
                        m.dimension_band.with_label_values(&labels).set(b as f64);
                        m.dimension_band_low.with_label_values(&labels).set(lo.unwrap_or(b) as f64);
                        m.dimension_band_high.with_label_values(&labels).set(hi.unwrap_or(b) as f64);
                    }
                    _ => {
                        let _ = m.dimension_band.remove_label_values(&labels);
                        let _ = m.dimension_band_low.remove_label_values(&labels);
                        let _ = m.dimension_band_high.remove_label_values(&labels);
                    }
                }
            }
            for v in &record.vetoes {
                let state = octant_core::VetoState::parse(&v.state).map_or(0.0, |s| s as u8 as f64);
                m.veto_state
                    .with_label_values(&[base[0], base[1], base[2], v.rule.as_str(), v.benchmark.as_deref().unwrap_or("")])
                    .set(state);
            }
            m.unsuitable.with_label_values(&base).set(profile.unsuitable as u8 as f64);
        }
    }
}

impl Stage for AggregatorStage {
    type Partition = PartitionState;
    type Tag = Tag;

    fn open(&mut self, _tp: &TopicPartition, _offset: i64, companion: Option<i64>) -> PartitionState {
        // The companion value is the window frontier in force at the commit point (0: none).
        let frontier = companion.filter(|f| *f > 0);
        PartitionState { windows: Windows::new(self.config.window_spec(), self.config.bootstrap_spec(), frontier), upstream: Upstream::default() }
    }

    fn process(&mut self, part: &mut PartitionState, _offsets: &mut PartitionOffsets, m: &BorrowedMessage<'_>) -> (Vec<OutRecord>, Tag) {
        let payload = m.payload().unwrap_or_default();
        let mut records = Vec::new();
        let mut tag = Tag { windows: 0, profiles: 0, dead_letter: None };
        let reject = |class: &'static str, message: String, records: &mut Vec<OutRecord>, tag: &mut Tag| {
            let src = SourceRef { topic: m.topic(), partition: m.partition(), offset: m.offset(), key: m.key(), payload };
            records.push(dead_letter(SERVICE, &self.out_topics.1, &src, class, &message, now_ms()).1);
            tag.dead_letter = Some(class);
        };
        let is_watermark = self.decoder.writer_of(payload).is_ok_and(|(_, k, _)| k.is_some_and(|k| k.full_name == Watermark::FULL_NAME));
        if is_watermark {
            let emissions = match self.decoder.decode::<Watermark>(payload) {
                Ok(w) => match part.upstream.observe(&w) {
                    Some(wm) => {
                        self.metrics.watermark.with_label_values(&[&m.partition().to_string()]).set(wm as f64 / 1000.0);
                        part.windows.advance_to(wm, m.offset())
                    }
                    None => Vec::new(),
                },
                Err(e) => {
                    reject(e.class(), e.to_string(), &mut records, &mut tag);
                    return (records, tag);
                }
            };
            self.publish(&emissions, &mut records, &mut tag);
            return (records, tag);
        }
        let obs = match self.decoder.decode::<Observation>(payload) {
            Ok(o) => o,
            Err(e) => {
                self.metrics.observations.with_label_values(&["undecodable"]).inc();
                reject(e.class(), e.to_string(), &mut records, &mut tag);
                return (records, tag);
            }
        };
        let added = part.windows.add(&obs, m.offset());
        let outcome = match &added {
            Added::Accepted => "accepted",
            Added::Duplicate => "duplicate",
            Added::Late { .. } => "late",
            Added::Unknown => "unknown",
        };
        self.metrics.observations.with_label_values(&[outcome]).inc();
        match added {
            Added::Late { frontier } => reject(
                "late_observation",
                format!("event time {} is before the window frontier {frontier}: its windows were already published", obs.event_time),
                &mut records,
                &mut tag,
            ),
            Added::Unknown => reject("unknown_metric", format!("metric {:?} is not in the catalogue", obs.metric), &mut records, &mut tag),
            _ => {}
        }
        (records, tag)
    }

    fn acked(&mut self, tag: Tag, _latency: std::time::Duration) {
        self.metrics.windows_emitted.inc_by(tag.windows);
        self.metrics.profiles_emitted.inc_by(tag.profiles);
        if let Some(class) = tag.dead_letter {
            self.metrics.dead_letters.with_label_values(&[class]).inc();
        }
    }

    fn commit_point(&mut self, part: &mut PartitionState, offsets: &PartitionOffsets) -> Option<(i64, i64)> {
        let limit = offsets.commit_offset()?;
        let (c, frontier) = part.windows.commit_point(limit);
        Some((c, frontier.unwrap_or(0)))
    }

    fn tick(&mut self, parts: &HashMap<TopicPartition, (PartitionState, PartitionOffsets)>, _shared: &GroupShared) -> Vec<OutRecord> {
        self.metrics.series.set(parts.values().map(|(p, _)| p.windows.series_count() as i64).sum());
        self.metrics.upstream_waiting.set(parts.values().map(|(p, _)| p.upstream.waiting() as i64).sum());
        self.metrics.upstream_idle.set(parts.values().map(|(p, _)| p.upstream.idle() as i64).sum());
        Vec::new()
    }
}
