//! # octant-scorer
//!
//! Consumes `octant.trajectories.production` and `octant.trajectories.evaluation`, assembles
//! runs by run id (the Kafka key), and emits one observation per instrument and unit to
//! `octant.observations` (keyed by system id) as soon as it is known; bad input goes to
//! `octant.dlq` with its topic, partition, offset and error class, and the stream goes on.
//!
//! ## Layout
//! - [`config`]: settings; [`metrics`]: Prometheus metrics; [`validate`]: input rules;
//!   [`assemble`]: run assembly (pure); this file: the consume–produce–commit loop.
//!
//! ## Guarantees
//! - **At least once** (the loop is `octant_runtime::pipeline`). An input offset is
//!   committed only after the observations and dead letters of that message, and of every
//!   earlier message of its partition, are acknowledged by the broker, and never past the
//!   first event of the oldest run that is open or whose events are not all acknowledged
//!   yet: a crash re-reads such runs whole instead of losing them. With each commit goes the
//!   replay horizon (the companion value, see `octant_runtime::consumer`), so the replayed
//!   tail of a run that finished before the crash is skipped, not mistaken for an orphan.
//!   Replays produce the same observation ids (run, metric, step), so downstream stages
//!   drop duplicates.
//! - **Order.** Events of a run are processed in partition order; one task processes all
//!   partitions assigned to an instance.
//! - **Watermarks.** Every commit interval, each assigned input partition's event-time
//!   progress (largest event time applied, or *idle*) goes to every partition of
//!   `octant.observations` as a `Watermark` record, produced after the observations of every
//!   message processed before it; the aggregator closes windows on the minimum over all
//!   upstream partitions, so skew between them delays windows instead of making data late.
//! - **Back-pressure.** At most `max_inflight` messages await acknowledgement; beyond that
//!   the loop stops reading, and Kafka holds the rest.
//! - **Failure.** A delivery that fails after librdkafka's retries (`message.timeout.ms`,
//!   5 min) stops the scorer with an error; it restarts from the last commit.

pub mod approvals;
pub mod assemble;
pub mod config;
pub mod metrics;
pub mod validate;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use octant_contracts::codec::to_single_object;
use octant_contracts::{Decoder, TrajectoryEvent, Watermark, topics};
use octant_runtime::admin;
use octant_runtime::consumer::{CommitPoint, PartitionOffsets, TopicPartition};
use octant_runtime::dlq::{DeadLetters, SourceRef, now_ms};
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::pipeline::{InMessage, Parts, Stage, TickContext};
use octant_runtime::service::{self, ServiceId};
use prometheus::Registry;
use tokio_util::sync::CancellationToken;

pub use config::ScorerConfig;

use assemble::{Assembler, Rules, Verdict};
use metrics::Metrics;

pub const ID: ServiceId = ServiceId { name: "scorer", env: "OCTANT_SCORER", group: "octant-scorer", admin_port: 9101 };

/// A started scorer.
pub type Running = service::Running;

/// Starts the scorer: binds the admin server, joins the consumer group, and spawns the loop.
/// The loop ends when `shutdown` is cancelled (after draining) or on a fatal error.
pub async fn start(config: ScorerConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid scorer configuration")?;
    config.evaluation.declare_instruments().map_err(anyhow::Error::msg)?;
    let kafka = &config.stream.kafka;
    let inputs = [kafka.topic(topics::TRAJECTORIES_PRODUCTION), kafka.topic(topics::TRAJECTORIES_EVALUATION)];
    let observations = kafka.topic(topics::OBSERVATIONS);
    let mut counts =
        kafka::partition_counts_when_reachable(kafka, &[inputs[0].clone(), inputs[1].clone(), observations.clone()], &shutdown)
            .await
            .context("the scorer's topics must exist (octant creates them; see `kafka::ensure_topics`)")?;
    let output_partitions = counts.remove(&observations).expect("asked for");
    let stage = ScorerStage::new(&config, &registry, Topology { input_partitions: counts, output_partitions })?;
    follow_approval_sources(kafka, &stage.rules.approvals, &shutdown).await?;
    let lag = stage.metrics.consumer_lag.clone();
    service::start_stage(&ID, &config.stream, registry, &[&inputs[0], &inputs[1]], lag, stage, |_, _| {}, shutdown).await
}

/// Reads the watched sources persisted on `octant.approval_sources` (created compacted when
/// missing) before the first event is scored, then follows the topic every few seconds for what
/// other instances learn, until `shutdown`. A record that cannot be read is logged and left.
async fn follow_approval_sources(
    kafka: &octant_runtime::config::KafkaConfig,
    approvals: &std::sync::Arc<approvals::Approvals>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    use octant_runtime::topic;
    const TIMEOUT: Duration = Duration::from_secs(30);
    let name = kafka.topic(approvals::TOPIC);
    kafka::ensure_compacted_topic(kafka, &name, 1).await.context("creating octant.approval_sources")?;
    let mut next = std::collections::BTreeMap::new();
    let records = topic::read_to_end(kafka, &name, TIMEOUT).await.context("reading octant.approval_sources")?;
    adopt_records(approvals, records, &mut next);
    tracing::info!(watched = approvals.watched_count(), "approval sources read");
    let (kafka, approvals, shutdown) = (kafka.clone(), approvals.clone(), shutdown.clone());
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            match topic::read_from(&kafka, &name, &next, TIMEOUT).await {
                Ok(records) => adopt_records(&approvals, records, &mut next),
                Err(e) => tracing::warn!(topic = %name, error = %e, "reading approval sources failed; retrying"),
            }
        }
    });
    Ok(())
}

/// Adopts the watched sources of `records`, moving `next` past them.
fn adopt_records(
    approvals: &approvals::Approvals,
    records: Vec<octant_runtime::topic::Record>,
    next: &mut std::collections::BTreeMap<i32, i64>,
) {
    for r in records {
        next.insert(r.partition, r.offset + 1);
        match serde_json::from_slice::<approvals::Watched>(&r.payload) {
            Ok(w) => approvals.adopt(w),
            Err(e) => tracing::warn!(offset = r.offset, error = %e, "unreadable approval-source record left"),
        }
    }
}

/// Runs the scorer until `shutdown`.
pub async fn run(config: ScorerConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(config, registry, shutdown).await?;
    running.task.await.context("scorer task panicked")?
}

/// Per-partition state: open runs, and the replay horizon inherited from the previous owner
/// (the horizon this owner commits never goes below it: what was durable stays durable).
pub struct Partition {
    assembler: Assembler,
    inherited: Option<i64>,
    /// When a message was last read here (idle detection).
    last_read: Option<Instant>,
}

/// The partition counts watermarks depend on: of each input topic (announced with every
/// watermark) and of `octant.observations` (a watermark goes to each of its partitions).
#[derive(Debug, Clone)]
pub struct Topology {
    pub input_partitions: HashMap<String, i32>,
    pub output_partitions: i32,
}

/// Handed back when a message's outputs are acknowledged.
pub struct Tag {
    /// One counter per observation (`octant_scorer_observations_produced_total{metric}`).
    metrics: Vec<prometheus::IntCounter>,
    dead_letter: Option<&'static str>,
}

/// The scorer's processing, runnable without a broker (`octant_runtime::pipeline::Driver`).
pub struct ScorerStage {
    observations_topic: String,
    /// The compacted topic of watched sources ([`approvals`]).
    approvals_topic: String,
    dead_letters: DeadLetters,
    metrics: Metrics,
    decoder: Decoder,
    rules: Rules,
    topology: Topology,
    idle_after: Duration,
    /// When each assigned partition was first seen assigned (a partition just taken over is
    /// not idle before it has had `idle_after` to deliver its first message).
    assigned_since: HashMap<TopicPartition, std::time::Instant>,
    /// Labelled counters resolved once (a label lookup hashes and locks: per event and per
    /// observation it was a measurable share of the stage's work).
    consumed_by_topic: Vec<(String, prometheus::IntCounter)>,
    produced_by_metric: HashMap<String, prometheus::IntCounter>,
    /// The current batch's events, decoded ahead by [`Stage::prepare`], in batch order.
    prepared: std::collections::VecDeque<Prepared>,
}

/// An input message decoded ahead of its processing.
struct Prepared {
    topic: String,
    partition: i32,
    offset: i64,
    event: Result<TrajectoryEvent, octant_contracts::DecodeError>,
}

/// Batches at least this large are decoded on two threads (below it, a thread's start costs
/// more than it saves).
const DECODE_IN_PARALLEL_FROM: usize = 64;

impl ScorerStage {
    fn consumed(&mut self, topic: &str) -> &prometheus::IntCounter {
        let i = match self.consumed_by_topic.iter().position(|(t, _)| t == topic) {
            Some(i) => i,
            None => {
                self.consumed_by_topic.push((topic.to_string(), self.metrics.events_consumed.with_label_values(&[topic])));
                self.consumed_by_topic.len() - 1
            }
        };
        &self.consumed_by_topic[i].1
    }

    fn produced(&mut self, metric: &str) -> prometheus::IntCounter {
        if let Some(c) = self.produced_by_metric.get(metric) {
            return c.clone();
        }
        let c = self.metrics.observations_produced.with_label_values(&[metric]);
        self.produced_by_metric.insert(metric.to_string(), c.clone());
        c
    }
}

impl ScorerStage {
    /// The stage of `config`, its metrics registered in `registry`.
    pub fn new(config: &ScorerConfig, registry: &Registry, topology: Topology) -> anyhow::Result<ScorerStage> {
        let mut decoder = admin::count_legacy_fingerprints(registry, ID.name, Decoder::new());
        if let Some(path) = &config.plain_binary_schema {
            decoder = decoder.with_plain_binary(path).map_err(anyhow::Error::msg).context("plain_binary_schema")?;
        }
        for (id, path) in &config.confluent_ids {
            decoder = decoder.with_confluent_id(*id, path).map_err(anyhow::Error::msg).context("confluent_ids")?;
        }
        let kafka = &config.stream.kafka;
        let redactor = config.redaction.build().map_err(anyhow::Error::msg).context("[redaction]")?;
        Ok(ScorerStage {
            observations_topic: kafka.topic(topics::OBSERVATIONS),
            approvals_topic: kafka.topic(approvals::TOPIC),
            dead_letters: DeadLetters::new(ID.name, kafka.topic(topics::DLQ), redactor.clone()),
            metrics: Metrics::new(registry),
            decoder,
            rules: Rules {
                idle_timeout_ms: config.idle_timeout.as_millis() as i64,
                pause_timeout_ms: config.pause_timeout.as_millis() as i64,
                low_confidence: config.low_confidence,
                judge_threshold: config.judge_threshold,
                instruments: std::sync::Arc::new(config.evaluation.instruments.clone()),
                violations: std::sync::Arc::new(config.evaluation.violations.clone()),
                protocols: std::sync::Arc::new(config.evaluation.protocols.clone()),
                detectors: if config.evaluation.leakage.detect { redactor } else { octant_runtime::redact::Redactor::none() },
                leakage_allowed: std::sync::Arc::new(config.evaluation.leakage.allowed_tools.clone()),
                approvals: std::sync::Arc::new(approvals::Approvals::new(config.evaluation.approval_signal.clone())),
                ..Rules::default()
            },
            topology,
            idle_after: config.idle_partition_after,
            assigned_since: HashMap::new(),
            consumed_by_topic: Vec::new(),
            produced_by_metric: HashMap::new(),
            prepared: Default::default(),
        })
    }
}

impl Stage for ScorerStage {
    type Partition = Partition;
    type Tag = Tag;

    fn open(&mut self, _tp: &TopicPartition, _offset: i64, companion: Option<i64>) -> anyhow::Result<Partition> {
        // The companion value is the replay horizon + 1.
        let inherited = companion.map(|v| v - 1);
        Ok(Partition { assembler: Assembler::new(self.rules.clone(), inherited), inherited, last_read: None })
    }

    /// Decodes the batch's events (JSON or Avro: about half of the stage's own work, and
    /// independent per message) on two threads when the batch is large: the loop's thread
    /// would otherwise do it in series with consuming and producing.
    fn prepare(&mut self, batch: &[InMessage<'_>]) {
        self.prepared.clear();
        let decoder = &self.decoder;
        let decode = |m: &InMessage<'_>| Prepared {
            topic: m.topic.to_string(),
            partition: m.partition,
            offset: m.offset,
            event: decoder.decode::<TrajectoryEvent>(m.payload),
        };
        if batch.len() < DECODE_IN_PARALLEL_FROM {
            self.prepared.extend(batch.iter().map(decode));
            return;
        }
        let (first, second) = batch.split_at(batch.len() / 2);
        let (first, second) = std::thread::scope(|s| {
            // A thread that cannot be started leaves its half to this one.
            let other = std::thread::Builder::new().spawn_scoped(s, || second.iter().map(decode).collect::<Vec<_>>()).ok();
            let first: Vec<Prepared> = first.iter().map(decode).collect();
            let second = match other {
                Some(t) => t.join().expect("decoding does not panic"),
                None => second.iter().map(decode).collect(),
            };
            (first, second)
        });
        self.prepared.extend(first);
        self.prepared.extend(second);
    }

    fn process(&mut self, part: &mut Partition, offsets: &mut PartitionOffsets, m: &InMessage<'_>) -> (Vec<OutRecord>, Tag) {
        let offset = m.offset;
        part.last_read = Some(m.read_at);
        let (payload, key) = (m.payload, m.key);
        self.consumed(m.topic).inc();
        let mut records = Vec::new();
        let mut metric_names = Vec::new();
        let mut rejected: Option<(&'static str, String)> = None;
        // Prepared in batch order; entries of messages the loop skipped are passed over.
        let mut decoded = None;
        while let Some(p) = self.prepared.pop_front() {
            if p.offset == offset && p.partition == m.partition && p.topic == m.topic {
                decoded = Some(p.event);
                break;
            }
        }
        match decoded.unwrap_or_else(|| self.decoder.decode::<TrajectoryEvent>(payload)) {
            Err(e) => rejected = Some((e.class(), e.to_string())),
            Ok(ev) => match validate::validate(&ev, key) {
                Err(msg) => rejected = Some(("invalid_value", msg)),
                Ok(valid) => {
                    let (verdict, abandoned, effects) = part.assembler.apply(valid, offset);
                    if let Some(h) = effects.hold {
                        offsets.hold(h);
                    }
                    // A finished run's hold goes once everything through this message is
                    // acknowledged: until then a restart must replay the whole run.
                    for r in effects.release {
                        offsets.release_after(offset, r);
                    }
                    if let Some(part) = effects.part {
                        self.metrics.run_parts.with_label_values(&[part.label()]).inc();
                    }
                    for w in effects.learned {
                        tracing::info!(system = %w.system, source = %w.source, evidence = %w.evidence, run_id = %w.run_id, "approval flow seen: the source is watched from now on");
                        let payload = serde_json::to_vec(&w).expect("a record of strings encodes");
                        records.push(OutRecord { partition: None, topic: self.approvals_topic.clone(), key: w.key(), payload });
                    }
                    if abandoned.runs > 0 {
                        self.metrics.runs_abandoned.inc_by(abandoned.runs as u64);
                    }
                    let mut observations = abandoned.observations;
                    match verdict {
                        Verdict::Accepted { observations: obs, sequence_gap, evaluations } => {
                            for (outcome, n) in [
                                ("scored", evaluations.scored),
                                ("undeclared", evaluations.undeclared),
                                ("no_value", evaluations.no_value),
                                ("out_of_range", evaluations.out_of_range),
                                ("repeat", evaluations.repeat),
                            ] {
                                if n > 0 {
                                    self.metrics.evaluations.with_label_values(&[outcome]).inc_by(n as u64);
                                }
                            }
                            if evaluations.undeclared > 0 {
                                tracing::info!(run_id = %ev.run_id, undeclared = evaluations.undeclared, "evaluation results without a declared instrument (see [[evaluation.instruments]])");
                            }
                            if sequence_gap {
                                self.metrics.sequence_gaps.inc();
                                tracing::warn!(run_id = %ev.run_id, sequence = ev.sequence, "sequence gap: event accepted");
                            }
                            observations.extend(obs);
                        }
                        Verdict::Replayed => self.metrics.replays_skipped.inc(),
                        Verdict::Duplicate => self.metrics.duplicate_events.inc(),
                        Verdict::Rejected { class, message } => rejected = Some((class, message)),
                    }
                    for o in observations {
                        if o.weight == 0.0 && o.metric == octant_core::catalogue::ids::CONFIRMATION_GATING {
                            self.metrics.unwatched_gated_steps.with_label_values(&[&o.system_id]).inc();
                        }
                        let counter = self.produced(&o.metric);
                        metric_names.push(counter);
                        let payload = to_single_object(&*o).expect("observations always encode");
                        let key = o.system_id.clone();
                        records.push(OutRecord { partition: None, topic: self.observations_topic.clone(), key, payload });
                        assemble::recycle(o);
                    }
                }
            },
        }
        let dead_letter_class = rejected.as_ref().map(|(c, _)| *c);
        if let Some((class, message)) = rejected {
            let src = SourceRef { topic: m.topic, partition: m.partition, offset, key, payload };
            records.push(self.dead_letters.of(&src, class, &message));
        }
        (records, Tag { metrics: metric_names, dead_letter: dead_letter_class })
    }

    fn acked(&mut self, tag: Tag, latency: std::time::Duration) {
        for c in &tag.metrics {
            c.inc();
        }
        if let Some(class) = tag.dead_letter {
            self.metrics.dead_letters.with_label_values(&[class]).inc();
        }
        self.metrics.processing_latency.observe(latency.as_secs_f64());
    }

    fn commit_point(&mut self, part: &mut Partition, offsets: &PartitionOffsets) -> Option<CommitPoint> {
        let horizon = offsets.horizon().max(part.inherited)?;
        Some(CommitPoint { offset: offsets.commit_offset()?, companion: horizon + 1 })
    }

    /// Every tick, for every assigned input partition, a [`Watermark`] to every partition of
    /// `octant.observations`: its largest event time, or *idle* when it is caught up (lag 0)
    /// and has had no input for `idle_partition_after`. Sent every tick, not only on change,
    /// so a consumer resuming mid-topic hears from every upstream partition within a tick.
    fn tick(&mut self, parts: &mut Parts<Partition>, ctx: &TickContext<'_>) -> Vec<OutRecord> {
        self.metrics.open_runs.set(parts.values().map(|o| o.state.assembler.open_runs() as i64).sum());
        self.metrics.watched_sources.set(self.rules.approvals.watched_count() as i64);
        let now = now_ms();
        let mut records = Vec::new();
        let assigned = ctx.group.assigned();
        self.assigned_since.retain(|tp, _| assigned.contains(tp));
        for tp in assigned {
            let Some(&partitions) = self.topology.input_partitions.get(&tp.topic) else { continue };
            let part = parts.get(&tp).map(|o| &o.state);
            let since = *self.assigned_since.entry(tp.clone()).or_insert(ctx.now);
            let last = part.and_then(|p| p.last_read).map_or(since, |t| t.max(since));
            let quiet = ctx.now.saturating_duration_since(last) >= self.idle_after;
            let idle = quiet && ctx.group.lag(&tp) == Some(0);
            let watermark = part.and_then(|p| p.assembler.watermark());
            if watermark.is_none() && !idle {
                // Not read yet but not known to be empty: say nothing, so consumers wait.
                continue;
            }
            let wm = Watermark {
                service: ID.name.into(),
                source_topic: tp.topic.clone(),
                source_partition: tp.partition,
                source_partitions: partitions,
                watermark,
                idle,
                produced_at: now,
            };
            let payload = to_single_object(&wm).expect("watermarks always encode");
            for p in 0..self.topology.output_partitions {
                records.push(OutRecord {
                    topic: self.observations_topic.clone(),
                    partition: Some(p),
                    key: tp.to_string(),
                    payload: payload.clone(),
                });
            }
        }
        records
    }
}
