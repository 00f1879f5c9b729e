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
//! - **At least once.** An input offset is committed only after the observations and dead
//!   letters of that message, and of every earlier message of its partition, are
//!   acknowledged by the broker, and never past the first event of the oldest run that is
//!   open or whose events are not all acknowledged yet: a crash re-reads such runs whole instead of
//!   losing them. With each commit goes the replay horizon (see `octant_runtime::consumer`),
//!   so the replayed tail of a run that finished before the crash is skipped, not mistaken
//!   for an orphan. Replays produce the same observation
//!   ids (run, metric, step), so downstream stages drop duplicates.
//! - **Order.** Events of a run are processed in partition order; one task processes all
//!   partitions assigned to an instance.
//! - **Back-pressure.** At most `max_inflight` messages await acknowledgement; beyond that
//!   the loop stops reading, and Kafka holds the rest.
//! - **Failure.** A delivery that fails after librdkafka's retries (`message.timeout.ms`,
//!   5 min) stops the scorer with an error; it restarts from the last commit.

pub mod assemble;
pub mod config;
pub mod metrics;
pub mod validate;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use octant_contracts::codec::to_single_object;
use octant_contracts::{Decoder, TrajectoryEvent, topics};
use octant_runtime::admin::{self, Health};
use octant_runtime::consumer::{self, GroupConsumer, GroupShared, PartitionOffsets, TopicPartition};
use octant_runtime::dlq::{SourceRef, dead_letter, now_ms};
use octant_runtime::kafka::{self, OutRecord};
use prometheus::Registry;
use rdkafka::Message;
use rdkafka::producer::FutureProducer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use config::ScorerConfig;

use assemble::{Assembler, Rules, Verdict};
use metrics::Metrics;

const SERVICE: &str = "scorer";

/// A started scorer: its admin address and the task running it.
pub struct Running {
    pub admin_addr: SocketAddr,
    pub task: JoinHandle<anyhow::Result<()>>,
    pub health: Arc<Health>,
}

/// Starts the scorer: binds the admin server, joins the consumer group, and spawns the loop.
/// The loop ends when `shutdown` is cancelled (after draining) or on a fatal error.
pub async fn start(config: ScorerConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid scorer configuration")?;
    let metrics = Metrics::new(&registry);
    let health = Health::new();
    let (admin_addr, _admin) = admin::serve(config.admin_addr, admin::router(registry, health.clone()), shutdown.clone())
        .await
        .context("failed to start the scorer's admin server")?;
    let mut decoder = Decoder::new();
    for (id, path) in &config.confluent_ids {
        decoder = decoder.with_confluent_id(*id, path).map_err(anyhow::Error::msg).context("confluent_ids")?;
    }
    let producer = kafka::producer(&config.kafka, SERVICE)?;
    let (consumer, shared) = consumer::group_consumer(
        &config.kafka,
        SERVICE,
        &config.group_id,
        &[&config.kafka.topic(topics::TRAJECTORIES_PRODUCTION), &config.kafka.topic(topics::TRAJECTORIES_EVALUATION)],
        metrics.consumer_lag.clone(),
    )?;
    let rules = Rules {
        idle_timeout_ms: config.idle_timeout.as_millis() as i64,
        low_confidence: config.low_confidence,
        ..Rules::default()
    };
    let out_topics = (config.kafka.topic(topics::OBSERVATIONS), config.kafka.topic(topics::DLQ));
    let lp = Loop { out_topics, config, metrics, health: health.clone(), decoder, producer, consumer, shared, rules, parts: HashMap::new(), committing: None };
    let task = tokio::spawn(lp.run(shutdown));
    tracing::info!(%admin_addr, "scorer started");
    Ok(Running { admin_addr, task, health })
}

/// Runs the scorer until `shutdown`.
pub async fn run(config: ScorerConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(config, registry, shutdown).await?;
    running.task.await.context("scorer task panicked")?
}

struct PartitionState {
    offsets: PartitionOffsets,
    /// The replay horizon committed by the previous owner; the horizon this owner commits
    /// never goes below it (what was durable stays durable).
    inherited: Option<i64>,
    assembler: Assembler,
    last_commit: Option<(i64, i64)>,
}

impl PartitionState {
    fn horizon(&self) -> Option<i64> {
        self.offsets.horizon().max(self.inherited)
    }
}

/// What an in-flight message resolves to once its outputs are acknowledged.
struct Done {
    tp: TopicPartition,
    offset: i64,
    started: Instant,
    metrics: Vec<String>,
    dead_letter: Option<&'static str>,
    result: Result<(), rdkafka::error::KafkaError>,
}

struct Loop {
    /// (observations, dead letters), prefix applied.
    out_topics: (String, String),
    config: ScorerConfig,
    metrics: Metrics,
    health: Arc<Health>,
    decoder: Decoder,
    producer: FutureProducer,
    consumer: Arc<GroupConsumer>,
    shared: Arc<GroupShared>,
    rules: Rules,
    parts: HashMap<TopicPartition, PartitionState>,
    committing: Option<JoinHandle<Result<(), octant_runtime::RuntimeError>>>,
}

impl Loop {
    async fn run(mut self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut pending = FuturesUnordered::new();
        let mut tick = tokio::time::interval(self.config.commit_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let consumer = self.consumer.clone();
        loop {
            for tp in self.shared.take_revoked() {
                self.parts.remove(&tp);
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(done) = pending.next(), if !pending.is_empty() => self.finish(done)?,
                _ = tick.tick() => self.commit(),
                msg = consumer.recv(), if pending.len() < self.config.max_inflight => {
                    match msg {
                        Ok(m) => pending.push(self.process(&m)),
                        Err(e) => {
                            tracing::warn!(error = %e, "consumer error");
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                    }
                }
            }
        }
        tracing::info!(pending = pending.len(), "scorer draining");
        while let Some(done) = pending.next().await {
            self.finish(done)?;
        }
        if let Some(h) = self.committing.take() {
            let _ = h.await;
        }
        let points = self.commit_points();
        if let Err(e) = consumer::commit(&self.consumer, &self.shared, points).await.expect("commit task") {
            tracing::warn!(error = %e, "final commit failed; a restart re-reads more");
        }
        tracing::info!("scorer stopped");
        Ok(())
    }

    /// Decodes, validates and assembles one message; returns the future of its outputs.
    fn process(&mut self, m: &rdkafka::message::BorrowedMessage<'_>) -> impl Future<Output = Done> + use<> {
        let started = Instant::now();
        let tp: TopicPartition = (m.topic().to_string(), m.partition());
        let offset = m.offset();
        let payload = m.payload().unwrap_or_default();
        let key = m.key();
        self.metrics.events_consumed.with_label_values(&[m.topic()]).inc();
        if !self.parts.contains_key(&tp) {
            let inherited = tokio::task::block_in_place(|| self.shared.read_horizon(&tp));
            tracing::info!(topic = %tp.0, partition = tp.1, offset, ?inherited, "partition started");
            self.parts.insert(
                tp.clone(),
                PartitionState {
                    offsets: PartitionOffsets::default(),
                    assembler: Assembler::new(self.rules.clone(), inherited),
                    inherited,
                    last_commit: None,
                },
            );
        }
        let state = self.parts.get_mut(&tp).expect("inserted above");
        state.offsets.begin(offset);

        let mut records = Vec::new();
        let mut metric_names = Vec::new();
        let mut rejected: Option<(&'static str, String)> = None;
        match self.decoder.decode::<TrajectoryEvent>(payload) {
            Err(e) => rejected = Some((e.class(), e.to_string())),
            Ok(ev) => match validate::validate(&ev, key) {
                Err(msg) => rejected = Some(("invalid_value", msg)),
                Ok(()) => {
                    let (verdict, abandoned, effects) = state.assembler.apply(&ev, offset);
                    if let Some(h) = effects.hold {
                        state.offsets.hold(h);
                    }
                    // A finished run's hold goes once everything through this message is
                    // acknowledged: until then a restart must replay the whole run.
                    for r in effects.release {
                        state.offsets.release_after(offset, r);
                    }
                    if abandoned.runs > 0 {
                        self.metrics.runs_abandoned.inc_by(abandoned.runs as u64);
                    }
                    let mut observations = abandoned.observations;
                    match verdict {
                        Verdict::Accepted { observations: obs, sequence_gap } => {
                            if sequence_gap {
                                self.metrics.sequence_gaps.inc();
                                tracing::warn!(run_id = %ev.run_id, sequence = ev.sequence, "sequence gap: event accepted");
                            }
                            observations.extend(obs);
                        }
                        Verdict::Replayed => self.metrics.replays_skipped.inc(),
                        Verdict::Rejected { class, message } => rejected = Some((class, message)),
                    }
                    for o in observations {
                        metric_names.push(o.metric.clone());
                        let payload = to_single_object(&o).expect("observations always encode");
                        records.push(OutRecord { topic: self.out_topics.0.clone(), key: o.system_id.clone(), payload });
                    }
                }
            },
        }
        let dead_letter_class = rejected.as_ref().map(|(c, _)| *c);
        if let Some((class, message)) = rejected {
            let src = SourceRef { topic: &tp.0, partition: tp.1, offset, key, payload };
            tracing::debug!(topic = %tp.0, partition = tp.1, offset, class, %message, "dead letter");
            records.push(dead_letter(SERVICE, &self.out_topics.1, &src, class, &message, now_ms()).1);
        }
        let producer = self.producer.clone();
        async move {
            let results = futures::future::join_all(records.iter().map(|r| kafka::send(&producer, r))).await;
            let result = results.into_iter().find_map(Result::err).map_or(Ok(()), Err);
            Done { tp, offset, started, metrics: metric_names, dead_letter: dead_letter_class, result }
        }
    }

    fn finish(&mut self, done: Done) -> anyhow::Result<()> {
        if let Err(e) = done.result {
            anyhow::bail!(
                "delivery of the outputs of {}/{} offset {} failed after retries: {e}; restarting from the last commit",
                done.tp.0,
                done.tp.1,
                done.offset
            );
        }
        if let Some(state) = self.parts.get_mut(&done.tp) {
            state.offsets.acked(done.offset);
        }
        for m in &done.metrics {
            self.metrics.observations_produced.with_label_values(&[m]).inc();
        }
        if let Some(class) = done.dead_letter {
            self.metrics.dead_letters.with_label_values(&[class]).inc();
        }
        self.metrics.processing_latency.observe(done.started.elapsed().as_secs_f64());
        Ok(())
    }

    fn commit_points(&self) -> Vec<(String, i32, i64, i64)> {
        self.parts
            .iter()
            .filter_map(|(tp, s)| Some((tp.0.clone(), tp.1, s.offsets.commit_offset()?, s.horizon()?)))
            .collect()
    }

    /// Starts a commit of every partition whose safe point moved, unless one is in flight.
    fn commit(&mut self) {
        if let Some(h) = &self.committing {
            if !h.is_finished() {
                return;
            }
            let h = self.committing.take().expect("checked");
            if let Some(Ok(Err(e))) = futures::FutureExt::now_or_never(h) {
                tracing::warn!(error = %e, "commit failed; retried at the next interval");
                self.parts.values_mut().for_each(|s| s.last_commit = None);
            }
        }
        let mut changed = Vec::new();
        for (tp, s) in self.parts.iter_mut() {
            let (Some(c), Some(h)) = (s.offsets.commit_offset(), s.horizon()) else { continue };
            self.shared.set_commit_point(tp.clone(), c, h);
            if s.last_commit != Some((c, h)) {
                s.last_commit = Some((c, h));
                changed.push((tp.0.clone(), tp.1, c, h));
            }
        }
        if !changed.is_empty() {
            self.committing = Some(consumer::commit(&self.consumer, &self.shared, changed));
        }
        self.metrics.open_runs.set(self.parts.values().map(|s| s.assembler.open_runs() as i64).sum());
        let assigned = self.shared.assigned().len();
        self.health.set_ready(assigned > 0, format!("{assigned} partitions assigned"));
    }
}
