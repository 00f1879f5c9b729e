//! The consume → process → produce → commit loop every stateful service runs, written once.
//!
//! A service implements [`Stage`]: per-partition state, what one message turns into, and its
//! commit point. The loop guarantees:
//! - messages of a partition are processed in offset order, one task for all partitions;
//! - a message's output records are produced concurrently with later messages, and its offset
//!   counts as done only when every one of its records is acknowledged by the broker;
//! - at most `max_inflight` messages await acknowledgement (then reading pauses: Kafka holds
//!   the rest — back-pressure);
//! - every `commit_interval`, each partition's commit point (offset + companion value, see
//!   [`crate::consumer`]) is committed on a blocking thread, never two commits at once;
//! - on shutdown: stop reading, await every acknowledgement, commit, return;
//! - a delivery that fails after librdkafka's retries ends the loop with an error (restart
//!   from the last commit rather than skip an offset).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rdkafka::Message;
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::FutureProducer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::admin::Health;
use crate::consumer::{self, GroupConsumer, GroupShared, PartitionOffsets, TopicPartition};
use crate::error::RuntimeError;
use crate::kafka::{self, OutRecord};

/// A service's processing, plugged into [`run`].
pub trait Stage: Send + 'static {
    /// State of one input partition.
    type Partition: Send;
    /// Handed back with a message's acknowledgement (for metrics).
    type Tag: Send + 'static;

    /// The first message of a partition this instance now owns has arrived; `companion` is
    /// the value committed with the partition's offset.
    fn open(&mut self, tp: &TopicPartition, offset: i64, companion: Option<i64>) -> Self::Partition;

    /// One message: the records to produce and a tag.
    fn process(
        &mut self,
        part: &mut Self::Partition,
        offsets: &mut PartitionOffsets,
        msg: &BorrowedMessage<'_>,
    ) -> (Vec<OutRecord>, Self::Tag);

    /// The records of a message are acknowledged; `latency` from reading it.
    fn acked(&mut self, tag: Self::Tag, latency: Duration);

    /// The commit point of a partition: (offset to resume at, companion value).
    fn commit_point(&mut self, part: &mut Self::Partition, offsets: &PartitionOffsets) -> Option<(i64, i64)>;

    /// Called once per commit interval, after the commit was started. Returns records that
    /// belong to no input message (watermarks): they are produced in order after the outputs
    /// of every message processed so far (per output partition), and a failed delivery is
    /// logged, not fatal (the next tick sends newer ones).
    fn tick(&mut self, _parts: &mut HashMap<TopicPartition, (Self::Partition, PartitionOffsets)>, _shared: &GroupShared) -> Vec<OutRecord> {
        Vec::new()
    }

    /// Shutdown, after every acknowledgement and before the final commit: make buffered state
    /// durable (the lake writer writes its open files).
    fn drain(&mut self, _parts: &mut HashMap<TopicPartition, (Self::Partition, PartitionOffsets)>) {}
}

/// Default commit interval of every service (serde default for service configs).
pub fn default_commit_interval() -> Duration {
    Duration::from_secs(1)
}

/// Default bound on messages awaiting acknowledgement (serde default for service configs).
pub fn default_max_inflight() -> usize {
    20_000
}

#[derive(Debug, Clone, Copy)]
pub struct LoopConfig {
    pub commit_interval: Duration,
    pub max_inflight: usize,
}

/// Outputs awaiting acknowledgement: a message's (`Some`) or a tick's (`None`).
type PendingFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Option<Done<T>>> + Send>>;

struct Done<T> {
    tp: TopicPartition,
    offset: i64,
    started: Instant,
    tag: T,
    result: Result<(), rdkafka::error::KafkaError>,
}

/// Runs `stage` until `shutdown` (then drains) or a fatal delivery error.
pub async fn run<S: Stage>(
    mut stage: S,
    consumer: Arc<GroupConsumer>,
    shared: Arc<GroupShared>,
    producer: FutureProducer,
    health: Arc<Health>,
    cfg: LoopConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut parts: HashMap<TopicPartition, (S::Partition, PartitionOffsets)> = HashMap::new();
    let mut last_commit: HashMap<TopicPartition, (i64, i64)> = HashMap::new();
    let mut committing: Option<JoinHandle<Result<(), RuntimeError>>> = None;
    let mut pending: FuturesUnordered<PendingFuture<S::Tag>> = FuturesUnordered::new();
    let mut tick = tokio::time::interval(cfg.commit_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    loop {
        for tp in shared.take_revoked() {
            parts.remove(&tp);
            last_commit.remove(&tp);
        }
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(done) = pending.next(), if !pending.is_empty() => {
                if let Some(done) = done {
                    finish(&mut stage, &mut parts, done)?;
                }
            }
            _ = tick.tick() => {
                commit(&mut stage, &mut parts, &mut last_commit, &mut committing, &consumer, &shared);
                let records = stage.tick(&mut parts, &shared);
                if !records.is_empty() {
                    // Through the same FIFO as message outputs: first polled (so enqueued in
                    // the producer) after everything pushed before.
                    let producer = producer.clone();
                    pending.push(Box::pin(async move {
                        let results = futures::future::join_all(records.iter().map(|r| kafka::send(&producer, r))).await;
                        if let Some(e) = results.into_iter().find_map(Result::err) {
                            tracing::warn!(error = %e, "delivery of tick records failed");
                        }
                        None
                    }) as PendingFuture<S::Tag>);
                }
                let assigned = shared.assigned().len();
                health.set_ready(assigned > 0, format!("{assigned} partitions assigned"));
            }
            msg = consumer.recv(), if pending.len() < cfg.max_inflight => {
                match msg {
                    Ok(m) => {
                        let started = Instant::now();
                        let tp: TopicPartition = (m.topic().to_string(), m.partition());
                        let offset = m.offset();
                        if !parts.contains_key(&tp) {
                            let companion = tokio::task::block_in_place(|| shared.read_companion(&tp));
                            tracing::info!(topic = %tp.0, partition = tp.1, offset, ?companion, "partition opened");
                            let state = stage.open(&tp, offset, companion);
                            parts.insert(tp.clone(), (state, PartitionOffsets::default()));
                        }
                        let (state, offsets) = parts.get_mut(&tp).expect("inserted above");
                        offsets.begin(offset);
                        let (records, tag) = stage.process(state, offsets, &m);
                        let producer = producer.clone();
                        pending.push(Box::pin(async move {
                            let results = futures::future::join_all(records.iter().map(|r| kafka::send(&producer, r))).await;
                            let result = results.into_iter().find_map(Result::err).map_or(Ok(()), Err);
                            Some(Done { tp, offset, started, tag, result })
                        }));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "consumer error");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
    }
    tracing::info!(pending = pending.len(), "draining");
    while let Some(done) = pending.next().await {
        if let Some(done) = done {
            finish(&mut stage, &mut parts, done)?;
        }
    }
    if let Some(h) = committing.take() {
        let _ = h.await;
    }
    stage.drain(&mut parts);
    let points: Vec<_> = parts
        .iter_mut()
        .filter_map(|(tp, (state, offsets))| stage.commit_point(state, offsets).map(|(o, v)| (tp.0.clone(), tp.1, o, v)))
        .collect();
    if let Err(e) = consumer::commit(&consumer, &shared, points).await.expect("commit task") {
        tracing::warn!(error = %e, "final commit failed; a restart re-reads more");
    }
    tracing::info!("stopped");
    Ok(())
}

fn finish<S: Stage>(
    stage: &mut S,
    parts: &mut HashMap<TopicPartition, (S::Partition, PartitionOffsets)>,
    done: Done<S::Tag>,
) -> anyhow::Result<()> {
    if let Err(e) = done.result {
        anyhow::bail!(
            "delivery of the outputs of {}/{} offset {} failed after retries: {e}; restarting from the last commit",
            done.tp.0,
            done.tp.1,
            done.offset
        );
    }
    if let Some((_, offsets)) = parts.get_mut(&done.tp) {
        offsets.acked(done.offset);
    }
    stage.acked(done.tag, done.started.elapsed());
    Ok(())
}

fn commit<S: Stage>(
    stage: &mut S,
    parts: &mut HashMap<TopicPartition, (S::Partition, PartitionOffsets)>,
    last: &mut HashMap<TopicPartition, (i64, i64)>,
    committing: &mut Option<JoinHandle<Result<(), RuntimeError>>>,
    consumer: &Arc<GroupConsumer>,
    shared: &Arc<GroupShared>,
) {
    if let Some(h) = committing.as_ref() {
        if !h.is_finished() {
            return;
        }
        if let Some(Ok(Err(e))) = futures::FutureExt::now_or_never(committing.take().expect("checked")) {
            tracing::warn!(error = %e, "commit failed; retried at the next interval");
            last.clear();
        }
    }
    let mut changed = Vec::new();
    for (tp, (state, offsets)) in parts.iter_mut() {
        let Some((o, v)) = stage.commit_point(state, offsets) else { continue };
        shared.set_commit_point(tp.clone(), o, v);
        if last.get(tp) != Some(&(o, v)) {
            last.insert(tp.clone(), (o, v));
            changed.push((tp.0.clone(), tp.1, o, v));
        }
    }
    if !changed.is_empty() {
        *committing = Some(consumer::commit(consumer, shared, changed));
    }
}
