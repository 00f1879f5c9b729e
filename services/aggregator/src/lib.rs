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
//! gauges. Late observations go to `octant.dlq` (class `late_observation`) and are counted;
//! late evaluation results (a harness log imported after the fact) are counted as
//! `historical` and left to the lake's profiles.
//!
//! ## Layout
//! The evaluation itself is `octant-engine` (window state and emission, the upstream
//! watermark, records with their verdicts), shared with the profiler. Here: [`config`],
//! [`metrics`] (the gauges), and this file, the stage over Kafka.
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

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use octant_contracts::codec::to_single_object;
use octant_contracts::{Contract, Decoder, Observation, Watermark, topics};
use octant_core::profile::Profile;
use octant_runtime::admin;
use octant_runtime::consumer::{CommitPoint, PartitionOffsets, TopicPartition};
use octant_runtime::dlq::DeadLetters;
use octant_runtime::kafka::OutRecord;
use octant_runtime::pipeline::{InMessage, Parts, Stage, TickContext};
use octant_runtime::service::{self, ServiceId};
use prometheus::Registry;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

pub use config::AggregatorConfig;

use metrics::Metrics;
use octant_engine::upstream::Upstream;
use octant_engine::verdicts;
use octant_engine::window::{self, Added, Resume, Windows};

pub const ID: ServiceId = ServiceId { name: "aggregator", env: "OCTANT_AGGREGATOR", group: "octant-aggregator", admin_port: 9102 };

/// State of one input partition.
pub struct PartitionState {
    windows: Windows,
    upstream: Upstream,
}

/// A published profile, for in-process viewers (the demo's live table).
#[derive(Debug, Clone)]
pub struct ProfileUpdate {
    pub record: octant_contracts::DimensionProfile,
    pub profile: Arc<Profile>,
}

/// A started aggregator; its feed is every profile it publishes, as it publishes it.
pub type Running = service::Running<broadcast::Sender<ProfileUpdate>>;

pub async fn start(config: AggregatorConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid aggregator configuration")?;
    config.evaluation.declare_instruments().map_err(anyhow::Error::msg)?;
    let stage = AggregatorStage::new(&config, &registry);
    let (feed, lag) = (stage.profiles.clone(), stage.metrics.consumer_lag.clone());
    let input = config.stream.kafka.topic(topics::OBSERVATIONS);
    let running = service::start_stage(&ID, &config.stream, registry, &[&input], lag, stage, |_, _| {}, shutdown).await?;
    Ok(running.with_feed(feed))
}

pub async fn run(config: AggregatorConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(config, registry, shutdown).await?;
    running.task.await.context("aggregator task panicked")?
}

/// The aggregator's processing, runnable without a broker (`octant_runtime::pipeline::Driver`).
pub struct AggregatorStage {
    /// (windows, dead letters), prefix applied.
    out_topics: (String, String),
    decoder: Decoder,
    dead_letters: DeadLetters,
    metrics: Metrics,
    profiles: broadcast::Sender<ProfileUpdate>,
    config: AggregatorConfig,
    /// The scorer's input topics (prefixed): every partition state waits for their progress.
    upstream_topics: Vec<String>,
    /// Label sets of the evaluation gauges → window end of their last update, so series of
    /// systems, versions or benchmarks that stopped reporting are removed (bounded cardinality).
    gauge_sets: std::sync::Mutex<GaugeSets>,
}

#[derive(Default)]
struct GaugeSets {
    metric: HashMap<Vec<String>, i64>,
    dimension: HashMap<Vec<String>, i64>,
    veto: HashMap<Vec<String>, i64>,
    system: HashMap<Vec<String>, i64>,
    slice: HashMap<Vec<String>, i64>,
    /// Metric label set → the N/A reason its `octant_metric_not_applicable` series carries.
    na_reason: HashMap<Vec<String>, &'static str>,
}

/// What a message was worth, counted when its records are acknowledged.
pub struct Tag {
    windows: u64,
    profiles: u64,
    dead_letter: Option<&'static str>,
}

impl AggregatorStage {
    /// The stage of `config`, its metrics (and gauges) registered in `registry`.
    pub fn new(config: &AggregatorConfig, registry: &Registry) -> AggregatorStage {
        let kafka = &config.stream.kafka;
        AggregatorStage {
            out_topics: (kafka.topic(topics::WINDOWS), kafka.topic(topics::DLQ)),
            decoder: admin::count_legacy_fingerprints(registry, ID.name, Decoder::new()),
            dead_letters: DeadLetters::new(
                ID.name,
                kafka.topic(topics::DLQ),
                config.redaction.build().expect("[redaction] is checked before the stage is built"),
            ),
            metrics: Metrics::new(registry),
            profiles: broadcast::channel(1024).0,
            config: config.clone(),
            upstream_topics: config.upstream_topics.iter().map(|t| kafka.topic(t)).collect(),
            gauge_sets: Default::default(),
        }
    }

    /// Records (and gauges, and in-process profile updates) for closed windows.
    fn publish(&self, emissions: &[window::Emission], records: &mut Vec<OutRecord>, tag: &mut Tag) {
        for e in emissions {
            let out = verdicts::build(e, &self.config.evaluation);
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

    fn publish_gauges(&self, out: &verdicts::Outputs) {
        let m = &self.metrics;
        let mut sets = self.gauge_sets.lock().unwrap();
        let key = |l: &[&str]| l.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let mut end = i64::MIN;
        for (w, na) in out.windows.iter().zip(&out.not_applicable) {
            let series = [w.system_id.as_str(), w.system_version.as_str(), w.source.as_str(), w.metric.as_str(), w.dimension.as_str()];
            if let (Some(kind), Some(slice)) = (&w.slice_kind, &w.slice) {
                let labels = [&series[..], &[kind.as_str(), slice.as_str()]].concat();
                sets.slice.insert(key(&labels), w.window_end);
                end = end.max(w.window_end);
                m.slice_units.with_label_values(&labels).set(w.units as f64);
                let gauges = [
                    (&m.slice_estimate, w.estimate),
                    (&m.slice_ci_low, w.ci_low),
                    (&m.slice_ci_high, w.ci_high),
                    (&m.slice_band, w.band.map(f64::from)),
                ];
                for (g, v) in gauges {
                    match v.filter(|_| na.is_none()) {
                        Some(v) => g.with_label_values(&labels).set(v),
                        None => {
                            let _ = g.remove_label_values(&labels);
                        }
                    }
                }
                continue;
            }
            let labels = [&series[..], &[w.benchmark.as_deref().unwrap_or("")]].concat();
            let k = key(&labels);
            sets.metric.insert(k.clone(), w.window_end);
            end = end.max(w.window_end);
            m.units.with_label_values(&labels).set(w.units as f64);
            // The gauges carry the window's verdict: an N/A metric has no estimate, interval or
            // band here (nothing may alert on a value the evaluation refused to judge).
            match (na, w.estimate, w.ci_low, w.ci_high) {
                (None, Some(e), Some(lo), Some(hi)) => {
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
            let previous = match na {
                Some(reason) => sets.na_reason.insert(k, reason).filter(|r| r != reason),
                None => sets.na_reason.remove(&k),
            };
            if let Some(old) = previous {
                let _ = m.not_applicable.remove_label_values(&[&labels[..], &[old]].concat());
            }
            if let Some(reason) = na {
                m.not_applicable.with_label_values(&[&labels[..], &[*reason]].concat()).set(1.0);
            }
        }
        for (record, profile) in &out.profiles {
            let base = [record.system_id.as_str(), record.system_version.as_str(), record.source.as_str()];
            sets.system.insert(key(&base), record.window_end);
            end = end.max(record.window_end);
            for d in &record.dimensions {
                let labels = [base[0], base[1], base[2], d.dimension.as_str()];
                sets.dimension.insert(key(&labels), record.window_end);
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
            // Every vetoed metric of the window: its verdict, or -1 when it has none (N/A).
            for ev in profile.metrics.iter().filter(|ev| ev.metric.veto.is_some()) {
                let rule = ev.metric.veto.expect("filtered");
                let labels = [base[0], base[1], base[2], rule.name, ev.benchmark.as_deref().unwrap_or("")];
                sets.veto.insert(key(&labels), record.window_end);
                m.veto_state.with_label_values(&labels).set(ev.veto.map_or(-1.0, |s| s as u8 as f64));
                match (ev.veto, ev.evidence) {
                    (Some(_), Some(e)) => m.veto_evidence.with_label_values(&labels).set(e.log_e),
                    _ => {
                        let _ = m.veto_evidence.remove_label_values(&labels);
                    }
                }
            }
            m.unsuitable.with_label_values(&base).set(profile.unsuitable as u8 as f64);
        }
        // A label set not updated for two window lengths has stopped reporting (a retired
        // system, version or benchmark): remove it, so cardinality stays bounded.
        let horizon = end.saturating_sub(2 * self.config.evaluation.window_spec().length_ms);
        let expired = |map: &mut HashMap<Vec<String>, i64>| {
            let gone: Vec<Vec<String>> = map.iter().filter(|(_, t)| **t < horizon).map(|(k, _)| k.clone()).collect();
            for k in &gone {
                map.remove(k);
            }
            gone
        };
        let remove = |gauges: &[&prometheus::GaugeVec], k: &[String]| {
            let l: Vec<&str> = k.iter().map(String::as_str).collect();
            for g in gauges {
                let _ = g.remove_label_values(&l);
            }
        };
        for k in expired(&mut sets.metric) {
            remove(&[&m.estimate, &m.ci_low, &m.ci_high, &m.band, &m.units], &k);
            if let Some(reason) = sets.na_reason.remove(&k) {
                let _ = m.not_applicable.remove_label_values(&[k.iter().map(String::as_str).collect::<Vec<_>>(), vec![reason]].concat());
            }
        }
        for k in expired(&mut sets.dimension) {
            remove(&[&m.dimension_band, &m.dimension_band_low, &m.dimension_band_high], &k);
        }
        for k in expired(&mut sets.veto) {
            remove(&[&m.veto_state, &m.veto_evidence], &k);
        }
        for k in expired(&mut sets.slice) {
            remove(&[&m.slice_estimate, &m.slice_ci_low, &m.slice_ci_high, &m.slice_band, &m.slice_units], &k);
        }
        for k in expired(&mut sets.system) {
            remove(&[&m.unsuitable], &k);
        }
    }
}

impl Stage for AggregatorStage {
    type Partition = PartitionState;
    type Tag = Tag;

    fn open(&mut self, _tp: &TopicPartition, _offset: i64, companion: Option<i64>) -> anyhow::Result<PartitionState> {
        // The companion value says where the windows resume (see `Resume`).
        let resume = companion.and_then(Resume::decode);
        Ok(PartitionState {
            windows: Windows::new(self.config.evaluation.window_spec(), self.config.evaluation.bootstrap_spec(), resume)
                .with_slices(self.config.slices.clone(), self.config.evaluation.multi_agent_systems())
                .with_duplicate_horizon(self.config.evaluation.duplicate_horizon_ms()),
            // The scorer's inputs: windows wait for both trajectory topics' progress.
            upstream: Upstream::expecting(self.upstream_topics.clone()),
        })
    }

    fn process(&mut self, part: &mut PartitionState, _offsets: &mut PartitionOffsets, m: &InMessage<'_>) -> (Vec<OutRecord>, Tag) {
        let payload = m.payload;
        let mut records = Vec::new();
        let mut tag = Tag { windows: 0, profiles: 0, dead_letter: None };
        let reject = |class: &'static str, message: String, records: &mut Vec<OutRecord>, tag: &mut Tag| {
            records.push(self.dead_letters.message(m, class, &message));
            tag.dead_letter = Some(class);
        };
        let is_watermark = self.decoder.writer_of(payload).is_ok_and(|(_, k, _)| k.is_some_and(|k| k.full_name == Watermark::FULL_NAME));
        if is_watermark {
            let emissions = match self.decoder.decode::<Watermark>(payload) {
                Ok(w) => match part.upstream.observe(&w) {
                    Some(wm) => {
                        self.metrics.watermark.with_label_values(&[&m.partition.to_string()]).set(wm as f64 / 1000.0);
                        part.windows.advance_to(wm, m.offset)
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
        // A re-run's units (seed 000 §IV-G) repeat a sampled run: counted in a window they
        // would weigh that run twice. Their home is the profiler's re-run check over the lake.
        if obs.rerun_of.is_some() {
            self.metrics.observations.with_label_values(&["rerun"]).inc();
            return (records, tag);
        }
        let added = part.windows.add(&obs, m.offset);
        // An evaluation result older than the published windows is a harness's log imported
        // after the fact (`octant import`): its home is the lake's profiles and comparisons,
        // not the live windows — counted, not dead-lettered. A late production observation is.
        let historical = matches!(added, Added::Late { .. }) && obs.source == octant_contracts::Source::Evaluation;
        let outcome = match &added {
            Added::Accepted => "accepted",
            Added::Duplicate => "duplicate",
            Added::Late { .. } if historical => "historical",
            Added::Late { .. } => "late",
            Added::Unknown => "unknown",
            Added::Derived { .. } => "derived",
        };
        self.metrics.observations.with_label_values(&[outcome]).inc();
        match added {
            Added::Late { .. } if historical => {}
            Added::Late { frontier } => reject(
                "late_observation",
                format!("event time {} is before the window frontier {frontier}: its windows were already published", obs.event_time),
                &mut records,
                &mut tag,
            ),
            Added::Unknown => reject("unknown_metric", format!("metric {:?} is not in the catalogue", obs.metric), &mut records, &mut tag),
            Added::Derived { from } => reject(
                "derived_metric",
                format!("metric {:?} is derived by the aggregator from {from} observations; send {from} instead", obs.metric),
                &mut records,
                &mut tag,
            ),
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

    fn commit_point(&mut self, part: &mut PartitionState, offsets: &PartitionOffsets) -> Option<CommitPoint> {
        let limit = offsets.commit_offset()?;
        let (offset, resume) = part.windows.commit_point(limit);
        Some(CommitPoint { offset, companion: resume.map_or(0, |r| r.encode()) })
    }

    fn tick(&mut self, parts: &mut Parts<PartitionState>, _ctx: &TickContext<'_>) -> Vec<OutRecord> {
        self.metrics.series.set(parts.values().map(|o| o.state.windows.series_count() as i64).sum());
        self.metrics.upstream_waiting.set(parts.values().map(|o| o.state.upstream.waiting() as i64).sum());
        self.metrics.upstream_idle.set(parts.values().map(|o| o.state.upstream.idle() as i64).sum());
        Vec::new()
    }
}

#[cfg(test)]
mod tests;
