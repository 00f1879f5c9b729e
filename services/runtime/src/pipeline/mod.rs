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

mod driver;
pub use driver::Driver;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rdkafka::Message;
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::admin::Health;
use crate::config::KafkaConfig;
use crate::consumer::{self, CommitPoint, GroupConsumer, GroupShared, GroupView, PartitionOffsets, TopicPartition};
use crate::error::RuntimeError;
use crate::kafka::{self, OutRecord};

/// One input message as a stage sees it: plain data, no broker types, so a stage runs (and is
/// tested) without a broker ([`Driver`]).
#[derive(Debug, Clone, Copy)]
pub struct InMessage<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
    /// The record's timestamp (ms), when it carries one.
    pub timestamp: Option<i64>,
    /// When the loop read it (the clock idle detection reads; the driver sets it).
    pub read_at: Instant,
}

/// What a stage learns when the loop ticks.
pub struct TickContext<'a> {
    pub group: &'a dyn GroupView,
    pub now: Instant,
    /// This tick's number (1, 2, …): [`Stage::tick_acked`] names it once its records are
    /// acknowledged.
    pub seq: u64,
}

/// A partition this instance owns: the stage's state and the offsets in flight.
pub struct Owned<P> {
    pub state: P,
    pub offsets: PartitionOffsets,
    /// Which opening of the partition this is: acknowledgements of messages read before the
    /// partition was revoked and opened again belong to the old state, not to this one.
    opened: u64,
    /// The offset the partition resumed from (messages before it are skipped).
    from: i64,
}

/// Where a newly assigned partition whose first message is at `first` resumes, and with
/// which companion value: the stored pair when its offset is not behind `first`; a value
/// stored before pairs existed (no pair) at `first`.
fn resume_from(tp: &TopicPartition, first: i64, r: consumer::Resumption) -> (i64, Option<i64>) {
    match r.offset {
        Some(o) if o >= first => (o, r.companion),
        Some(o) => {
            // Retention past the pair's offset, or a group offset moved forward by hand: the
            // value belongs to an offset that is not read again, so it is not used (the stage
            // resumes as on a fresh partition).
            tracing::warn!(topic = %tp.topic, partition = tp.partition, first, paired = o, "the group's offset is past the companion value's: resuming there without the value");
            (first, None)
        }
        None => (first, r.companion),
    }
}

/// Every owned partition.
pub type Parts<P> = HashMap<TopicPartition, Owned<P>>;

/// A service's processing, plugged into [`run`].
pub trait Stage: Send + 'static {
    /// State of one input partition.
    type Partition: Send;
    /// Handed back with a message's acknowledgement (for metrics).
    type Tag: Send + 'static;

    /// The first message of a partition this instance now owns is the one at `offset` (the
    /// offset the stored companion value goes with: messages read before it were the previous
    /// owner's and are skipped); `companion` is that value. An error stops the
    /// service (it restarts from the last commit): opening may recover state with I/O.
    fn open(&mut self, tp: &TopicPartition, offset: i64, companion: Option<i64>) -> anyhow::Result<Self::Partition>;

    /// The messages of a batch, before each is handed to [`Stage::process`] in order: a stage
    /// may do their stateless work here (decoding), on more than one thread. A message may
    /// still be skipped after this (its partition was revoked), so `process` must match what
    /// it prepared by topic, partition and offset. Default: nothing.
    fn prepare(&mut self, _batch: &[InMessage<'_>]) {}

    /// One message: the records to produce and a tag.
    fn process(&mut self, part: &mut Self::Partition, offsets: &mut PartitionOffsets, msg: &InMessage<'_>) -> (Vec<OutRecord>, Self::Tag);

    /// The records of a message are acknowledged; `latency` from reading it.
    fn acked(&mut self, tag: Self::Tag, latency: Duration);

    /// Where the partition may resume.
    fn commit_point(&mut self, part: &mut Self::Partition, offsets: &PartitionOffsets) -> Option<CommitPoint>;

    /// Called once per commit interval, after the commit was started. Returns records that
    /// belong to no input message (watermarks): they are produced in order after the outputs
    /// of every message processed so far (per output partition), and a failed delivery is
    /// logged, not fatal (the next tick sends newer ones).
    fn tick(&mut self, _parts: &mut Parts<Self::Partition>, _ctx: &TickContext<'_>) -> Vec<OutRecord> {
        Vec::new()
    }

    /// Every record of tick `seq` is acknowledged by the broker. A stage that emits buffered
    /// input from `tick` (the ingest's assembled traces) keeps that input's offsets out of its
    /// commit points until then; when a delivery fails this is never called, so they stay held
    /// and a restart re-reads them.
    fn tick_acked(&mut self, _parts: &mut Parts<Self::Partition>, _seq: u64) {}

    /// Shutdown, after every acknowledgement and before the final commit: make buffered state
    /// durable (the lake writer writes its open files).
    fn drain(&mut self, _parts: &mut Parts<Self::Partition>) {}

    /// The partition was revoked (another instance owns it now): forget what belongs to it.
    /// Its unacknowledged outputs may still be delivered; the next owner resumes from the last
    /// commit.
    fn close(&mut self, _tp: &TopicPartition, _state: Self::Partition) {}
}

/// Drops the state of revoked partitions (before any work that could touch them: a partition
/// revoked in the consumer's poll is gone before the next tick or message).
fn drop_revoked<S: Stage>(
    stage: &mut S,
    shared: &GroupShared,
    parts: &mut Parts<S::Partition>,
    last_commit: &mut HashMap<TopicPartition, CommitPoint>,
) {
    for tp in shared.take_revoked() {
        last_commit.remove(&tp);
        if let Some(owned) = parts.remove(&tp) {
            stage.close(&tp, owned.state);
        }
    }
}

/// Runs CPU-heavy stage work (a message, a tick) off the async runtime's worker threads when
/// the runtime has several (`block_in_place`); on a single-threaded runtime, in place.
fn cpu<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Messages already in the consumer's local queue taken in one turn of the loop (one hand-off
/// of the worker thread for them all: `block_in_place` moves the worker to another thread, a
/// thread wake-up per call, which per message cost the scorer more than its own work).
const MAX_BATCH: usize = 512;

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

/// A service whose brokers have not answered for this long reports not ready (`/readyz` 503,
/// `octant_service_ready` 0) until they answer again; librdkafka reconnects by itself.
/// As long as the session timeout: shorter, and a loaded machine (a consumer whose queue is full
/// fetches nothing, so hears nothing) reported silence that was not there (5 s: 72 false
/// warnings in one test run, 10 s: none). When the session lapses first, librdkafka revokes
/// the partitions and the service is not ready for that reason ("0 partitions assigned").
pub const BROKER_SILENCE: Duration = Duration::from_secs(10);

/// A loop that has not come round to its tick for this long reports not ready ("processing
/// stalled"): something it waits on (a broker that does not answer, a blocking read) holds it.
pub const LOOP_STALL: Duration = Duration::from_secs(30);

/// How long shutdown waits for a commit (a broker that stopped answering would hold it forever).
pub const FINAL_COMMIT_WAIT: Duration = Duration::from_secs(30);

/// Whose records a batch of deliveries is: a message's (by its sequence number in the loop),
/// or a tick's.
#[derive(Debug, Clone, Copy)]
enum Owner {
    Message(u64),
    Tick(u64),
}

/// The records of one message (or tick) in flight: librdkafka's delivery callback counts them
/// down and reports the batch once, with the first error if any.
pub struct Batch {
    owner: Owner,
    remaining: std::sync::atomic::AtomicUsize,
    error: std::sync::Mutex<Option<KafkaError>>,
}

impl Batch {
    /// One record of the batch is settled (acknowledged, or failed with `error`).
    fn settle(&self, error: Option<&KafkaError>, done: &mpsc::UnboundedSender<(Owner, Option<KafkaError>)>) {
        if let Some(e) = error {
            self.error.lock().unwrap().get_or_insert_with(|| e.clone());
        }
        if self.remaining.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            // The loop may have ended (a fatal error): nobody to tell.
            let _ = done.send((self.owner, self.error.lock().unwrap().take()));
        }
    }
}

/// The producer's context: delivery reports go to the loop through one channel (no future,
/// channel or allocation per record: per record, the futures of `FutureProducer` and their
/// joins were a large share of a stage's work).
pub struct AckContext {
    done: mpsc::UnboundedSender<(Owner, Option<KafkaError>)>,
}

impl ClientContext for AckContext {}

impl ProducerContext for AckContext {
    type DeliveryOpaque = Arc<Batch>;

    fn delivery(&self, result: &DeliveryResult<'_>, batch: Arc<Batch>) {
        batch.settle(result.as_ref().err().map(|(e, _)| e), &self.done);
    }
}

/// A stage's producer: an idempotent producer ([`kafka::producer`]'s settings) whose delivery
/// reports reach [`run`].
pub struct StageProducer {
    producer: Arc<ThreadedProducer<AckContext>>,
    done: mpsc::UnboundedReceiver<(Owner, Option<KafkaError>)>,
}

/// The producer a service hands to [`run`].
pub fn producer(cfg: &KafkaConfig, service: &str) -> Result<StageProducer, RuntimeError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let producer = kafka::producer_config(cfg, service)
        .create_with_context(AckContext { done: tx })
        .map_err(|e| RuntimeError::kafka("failed to create producer", e))?;
    Ok(StageProducer { producer: Arc::new(producer), done: rx })
}

/// Enqueues `records` as one batch reported as `owner` (at once when there are none).
/// Blocks while librdkafka's queue is full (the delivery thread drains it) unless `closed`
/// (the loop ended: the records settle as failed). A record librdkafka refuses outright (too
/// large for the broker, an unknown partition) settles as a failed delivery.
fn enqueue(producer: &ThreadedProducer<AckContext>, owner: Owner, records: &[OutRecord], closed: &AtomicBool) {
    let batch = Arc::new(Batch { owner, remaining: records.len().into(), error: Default::default() });
    let done = &producer.context().done;
    if records.is_empty() {
        let _ = done.send((owner, None));
        return;
    }
    for r in records {
        let mut rec = BaseRecord::with_opaque_to(&r.topic, batch.clone()).key(r.key.as_bytes()).payload(&r.payload);
        if let Some(p) = r.partition {
            rec = rec.partition(p);
        }
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) if !closed.load(Ordering::Relaxed) => {
                    rec = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((e, _)) => {
                    batch.settle(Some(&e), done);
                    break;
                }
            }
        }
    }
}

/// Records handed to the [`Outbox`] at once: each message's (or tick's) with its owner.
type Parcel = Vec<(Owner, Vec<OutRecord>)>;

/// The records of messages and ticks, enqueued into librdkafka by a thread of its own in the
/// order they are handed over (so per output partition in processing order, and a tick's
/// watermarks after the records of every message processed before it). A `produce` call per
/// record (a lock, a copy, a wake-up of librdkafka's thread) was about half of the loop's
/// work per message: with it off the loop's thread, the stage's processing and librdkafka's
/// enqueueing run side by side. What it holds is bounded by the loop's `max_inflight` (a
/// message stays in flight until its records are acknowledged) and by [`MAX_TICKS_IN_FLIGHT`].
/// When the loop ends, the thread is stopped and joined before the producer is dropped: no
/// record is enqueued after [`run`] returns (an in-process restart must not have an old
/// producer still sending beside the new one).
struct Outbox {
    tx: Option<std::sync::mpsc::Sender<Parcel>>,
    closed: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A stage's `tick` is not called while this many ticks' records are unacknowledged (a broker
/// that does not answer): each would add records to the outbox, without bound. The stage
/// keeps what it would have emitted until a tick runs again.
const MAX_TICKS_IN_FLIGHT: usize = 4;

impl Outbox {
    fn start(producer: Arc<ThreadedProducer<AckContext>>) -> std::io::Result<Outbox> {
        let (tx, rx) = std::sync::mpsc::channel::<Parcel>();
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        let thread = std::thread::Builder::new().name("octant-outbox".into()).spawn(move || {
            for items in rx {
                for (owner, records) in items {
                    if flag.load(Ordering::Relaxed) {
                        // The loop ended: what is left is not sent (its messages were never
                        // committed; the next owner reads them again).
                        return;
                    }
                    enqueue(&producer, owner, &records, &flag);
                }
            }
        })?;
        Ok(Outbox { tx: Some(tx), closed, thread: Some(thread) })
    }

    /// Whether the thread ended (it only does when the loop closes it, or on a panic).
    fn stopped(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    fn send(&self, items: Parcel) -> anyhow::Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let tx = self.tx.as_ref().expect("open until dropped");
        tx.send(items).map_err(|_| anyhow::anyhow!("the producer's enqueueing thread stopped"))
    }
}

impl Drop for Outbox {
    /// Stops the thread and waits for it: it finishes the record it is enqueueing (without
    /// waiting for room in a full queue: nobody reads the reports any more) and sends nothing
    /// else. After a normal drain it holds nothing.
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A message whose records are in flight.
struct Waiting<T> {
    tp: TopicPartition,
    offset: i64,
    /// [`Owned::opened`] of the state that processed it.
    opened: u64,
    started: Instant,
    tag: T,
}

/// Runs `stage` until `shutdown` (then drains) or a fatal delivery error.
pub async fn run<S: Stage>(
    stage: S,
    consumer: Arc<GroupConsumer>,
    shared: Arc<GroupShared>,
    producer: StageProducer,
    health: Arc<Health>,
    cfg: LoopConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let result = run_loop(stage, consumer, shared, producer, health, cfg, shutdown).await;
    // The service's task ends here: say why where operators look (the caller may only see a
    // finished task).
    if let Err(e) = &result {
        tracing::error!(error = format!("{e:#}"), "the stage stopped");
    }
    result
}

/// After the loop: every record in flight acknowledged (or the producer gone), then the last
/// commit of every partition's commit point, each wait bounded.
#[allow(clippy::too_many_arguments)]
async fn drain<S: Stage>(
    mut stage: S,
    mut parts: Parts<S::Partition>,
    mut waiting: HashMap<u64, Waiting<S::Tag>>,
    mut ticks_in_flight: usize,
    mut producer: StageProducer,
    outbox: &Outbox,
    mut committing: Option<JoinHandle<Result<(), RuntimeError>>>,
    consumer: &Arc<GroupConsumer>,
    shared: &Arc<GroupShared>,
) -> anyhow::Result<()> {
    tracing::info!(pending = waiting.len(), "draining");
    while !waiting.is_empty() || ticks_in_flight > 0 {
        let report = match tokio::time::timeout(Duration::from_secs(1), producer.done.recv()).await {
            Ok(Some(report)) => report,
            Ok(None) => break,
            Err(_) if outbox.stopped() => anyhow::bail!("the producer's enqueueing thread stopped while draining"),
            Err(_) => continue,
        };
        let (owner, error) = report;
        finish(&mut stage, &mut parts, &mut waiting, &mut ticks_in_flight, owner, error)?;
    }
    // librdkafka's synchronous commit waits as long as the coordinator does not answer: bound
    // the waits of shutdown (what is not committed is re-read by the next owner).
    if let Some(h) = committing.take()
        && tokio::time::timeout(FINAL_COMMIT_WAIT, h).await.is_err()
    {
        tracing::warn!("a commit in flight did not finish; stopping without it");
    }
    stage.drain(&mut parts);
    let points: Vec<_> =
        parts.iter_mut().filter_map(|(tp, o)| stage.commit_point(&mut o.state, &o.offsets).map(|p| (tp.clone(), p))).collect();
    match tokio::time::timeout(FINAL_COMMIT_WAIT, consumer::commit(consumer, shared, points)).await {
        Ok(r) => {
            if let Err(e) = r.expect("commit task") {
                tracing::warn!(error = %e, "final commit failed; a restart re-reads more");
            }
        }
        Err(_) => tracing::warn!("the final commit did not finish in {FINAL_COMMIT_WAIT:?}; a restart re-reads more"),
    }
    Ok(())
}

/// One turn of the loop over a batch of messages: their partitions opened as needed, each
/// processed and waiting for its acknowledgement.
struct Turn<'a, S: Stage> {
    parts: &'a mut Parts<S::Partition>,
    waiting: &'a mut HashMap<u64, Waiting<S::Tag>>,
    next_seq: &'a mut u64,
    openings: &'a mut u64,
}

impl<S: Stage> Turn<'_, S> {
    /// The records of `batch`, each with the owner its acknowledgement goes to.
    #[allow(clippy::type_complexity)]
    fn process(
        &mut self,
        stage: &mut S,
        shared: &GroupShared,
        batch: &[rdkafka::message::BorrowedMessage<'_>],
    ) -> anyhow::Result<Vec<(Owner, Vec<OutRecord>)>> {
        let mut out = Vec::with_capacity(batch.len());
        let started = Instant::now();
        let msgs: Vec<InMessage<'_>> = batch
            .iter()
            .map(|m| InMessage {
                topic: m.topic(),
                partition: m.partition(),
                offset: m.offset(),
                key: m.key(),
                payload: m.payload().unwrap_or_default(),
                timestamp: m.timestamp().to_millis(),
                read_at: started,
            })
            .collect();
        stage.prepare(&msgs);
        for msg in &msgs {
            let tp = TopicPartition::new(msg.topic, msg.partition);
            let offset = msg.offset;
            if !self.parts.contains_key(&tp) && !shared.owns(&tp) {
                // A message of a partition revoked (the session lapsed while the
                // brokers did not answer) that was already in the local queue: not
                // this instance's to process; the next owner reads it again. Opening
                // it would run the stage's `open` (reads from the brokers) for a
                // partition it does not own.
                tracing::debug!(topic = %tp.topic, partition = tp.partition, offset, "message of a partition not assigned here: skipped");
                continue;
            }
            if !self.parts.contains_key(&tp) {
                let resumption = shared.read_resumption(&tp).with_context(|| format!("failed to read where {tp} resumes"))?;
                let (from, companion) = resume_from(&tp, offset, resumption);
                tracing::info!(topic = %tp.topic, partition = tp.partition, offset, from, ?companion, "partition opened");
                let state = stage.open(&tp, from, companion).map_err(|e| e.context(format!("failed to open partition {tp}")))?;
                *self.openings += 1;
                self.parts.insert(tp.clone(), Owned { state, offsets: PartitionOffsets::default(), opened: *self.openings, from });
            }
            let owned = self.parts.get_mut(&tp).expect("inserted above");
            if offset < owned.from {
                // Before the offset the companion value goes with: the previous
                // owner's last commit stored the value but not the group offset.
                // Its outputs are acknowledged; it is not read again.
                continue;
            }
            owned.offsets.begin(offset);
            let (records, tag) = stage.process(&mut owned.state, &mut owned.offsets, msg);
            *self.next_seq += 1;
            self.waiting.insert(*self.next_seq, Waiting { tp, offset, opened: owned.opened, started, tag });
            out.push((Owner::Message(*self.next_seq), records));
        }
        Ok(out)
    }
}

/// Readiness checks judged when asked (at `/readyz` and every scrape), so that a loop held up
/// cannot leave "ready" standing: the brokers' silence, and a loop that stopped turning. Returns
/// the loop's clock and where it records its last turn.
fn live_checks(health: &Health, shared: &Arc<GroupShared>) -> (Instant, Arc<std::sync::atomic::AtomicU64>) {
    let started_at = Instant::now();
    let last_turn = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let s = shared.clone();
    health.add_live_check(move || {
        s.broker_silence().filter(|s| *s >= BROKER_SILENCE).map(|s| format!("no answer from the brokers for {} s", s.as_secs()))
    });
    let turn = last_turn.clone();
    health.add_live_check(move || {
        let since = started_at.elapsed().saturating_sub(Duration::from_millis(turn.load(std::sync::atomic::Ordering::Relaxed)));
        (since >= LOOP_STALL).then(|| format!("processing stalled for {} s", since.as_secs()))
    });
    (started_at, last_turn)
}

/// Ready when partitions are assigned and the brokers answer; the change is logged once.
fn report_readiness(health: &Health, shared: &GroupShared, broker_silent: &mut bool) {
    let assigned = GroupView::assigned(shared).len();
    match shared.broker_silence() {
        Some(silent) if silent >= BROKER_SILENCE => {
            if !*broker_silent {
                tracing::warn!(silent_s = silent.as_secs(), "no answer from the brokers: not ready until they answer (reconnecting)");
            }
            *broker_silent = true;
            health.set_ready(false, format!("no answer from the brokers for {} s", silent.as_secs()));
        }
        _ => {
            if std::mem::take(broker_silent) {
                tracing::info!("the brokers answer again");
            }
            health.set_ready(assigned > 0, format!("{assigned} partitions assigned"));
        }
    }
}

async fn run_loop<S: Stage>(
    mut stage: S,
    consumer: Arc<GroupConsumer>,
    shared: Arc<GroupShared>,
    mut producer: StageProducer,
    health: Arc<Health>,
    cfg: LoopConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let outbox = Outbox::start(producer.producer.clone()).context("failed to start the producer's thread")?;
    let mut parts: Parts<S::Partition> = HashMap::new();
    let mut last_commit: HashMap<TopicPartition, CommitPoint> = HashMap::new();
    let mut committing: Option<JoinHandle<Result<(), RuntimeError>>> = None;
    let mut waiting: HashMap<u64, Waiting<S::Tag>> = HashMap::new();
    let mut next_seq = 0u64;
    let mut openings = 0u64;
    let mut ticks_in_flight = 0usize;
    let mut tick = tokio::time::interval(cfg.commit_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tick_seq = 0u64;
    let mut broker_silent = false;
    let (started_at, last_turn) = live_checks(&health, &shared);

    loop {
        drop_revoked(&mut stage, &shared, &mut parts, &mut last_commit);
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(first) = producer.done.recv() => {
                // Every report already there, in one turn.
                let mut report = Some(first);
                let mut n = 0;
                while let Some((owner, error)) = report {
                    finish(&mut stage, &mut parts, &mut waiting, &mut ticks_in_flight, owner, error)?;
                    n += 1;
                    report = if n < MAX_BATCH { producer.done.try_recv().ok() } else { None };
                }
            }
            _ = tick.tick() => {
                last_turn.store(started_at.elapsed().as_millis() as u64, std::sync::atomic::Ordering::Relaxed);
                if outbox.stopped() {
                    anyhow::bail!("the producer's enqueueing thread stopped");
                }
                drop_revoked(&mut stage, &shared, &mut parts, &mut last_commit);
                commit(&mut stage, &mut parts, &mut last_commit, &mut committing, &consumer, &shared);
                if ticks_in_flight < MAX_TICKS_IN_FLIGHT {
                    tick_seq += 1;
                    let ctx = TickContext { group: &*shared, now: Instant::now(), seq: tick_seq };
                    let records = cpu(|| stage.tick(&mut parts, &ctx));
                    if !records.is_empty() {
                        // Enqueued after every record of the messages processed so far.
                        ticks_in_flight += 1;
                        outbox.send(vec![(Owner::Tick(tick_seq), records)])?;
                    } else {
                        stage.tick_acked(&mut parts, tick_seq);
                    }
                }
                report_readiness(&health, &shared, &mut broker_silent);
            }
            msg = consumer.recv(), if waiting.len() < cfg.max_inflight => {
                let mut batch = match msg {
                    Ok(m) => vec![m],
                    Err(e) => {
                        tracing::warn!(error = %e, "consumer error");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Revocations up to the first message (it is of the new assignment).
                drop_revoked(&mut stage, &shared, &mut parts, &mut last_commit);
                // What else is already in the local queue, up to a batch: one hand-off of the
                // worker thread (`cpu`) for the batch rather than one per message. A rebalance
                // can run inside any of these calls: the messages taken before it belong to the
                // state as it was, the one it returned to the new assignment (a partition revoked
                // and assigned again reopens from its commit point), so the batch ends there
                // and that message is processed after the revoked state is dropped. (Nothing
                // more is taken: a second rebalance would mix two assignments.)
                let room = (cfg.max_inflight - waiting.len()).min(MAX_BATCH);
                let mut after_rebalance = Vec::new();
                while batch.len() < room {
                    match futures::FutureExt::now_or_never(consumer.recv()) {
                        Some(Ok(m)) if !shared.has_revoked() => batch.push(m),
                        Some(Ok(m)) => {
                            after_rebalance.push(m);
                            break;
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "consumer error");
                            break;
                        }
                        None => break,
                    }
                }
                for (i, batch) in [batch, after_rebalance].iter().enumerate() {
                    if i > 0 {
                        drop_revoked(&mut stage, &shared, &mut parts, &mut last_commit);
                    }
                    let mut turn = Turn { parts: &mut parts, waiting: &mut waiting, next_seq: &mut next_seq, openings: &mut openings };
                    let out = cpu(|| turn.process(&mut stage, &shared, batch))?;
                    outbox.send(out)?;
                }
            }
        }
    }
    drain(stage, parts, waiting, ticks_in_flight, producer, &outbox, committing, &consumer, &shared).await?;
    tracing::info!("stopped");
    Ok(())
}

fn finish<S: Stage>(
    stage: &mut S,
    parts: &mut Parts<S::Partition>,
    waiting: &mut HashMap<u64, Waiting<S::Tag>>,
    ticks_in_flight: &mut usize,
    owner: Owner,
    error: Option<KafkaError>,
) -> anyhow::Result<()> {
    let seq = match owner {
        Owner::Tick(seq) => {
            *ticks_in_flight -= 1;
            match error {
                None => stage.tick_acked(parts, seq),
                Some(e) => tracing::warn!(error = %e, "delivery of tick records failed"),
            }
            return Ok(());
        }
        Owner::Message(seq) => seq,
    };
    let done = waiting.remove(&seq).expect("every message in flight is waited for");
    if let Some(e) = error {
        anyhow::bail!(
            "delivery of the outputs of {} offset {} failed after retries: {e}; restarting from the last commit",
            done.tp,
            done.offset
        );
    }
    if let Some(o) = parts.get_mut(&done.tp).filter(|o| o.opened == done.opened) {
        o.offsets.acked(done.offset);
    }
    stage.acked(done.tag, done.started.elapsed());
    Ok(())
}

fn commit<S: Stage>(
    stage: &mut S,
    parts: &mut Parts<S::Partition>,
    last: &mut HashMap<TopicPartition, CommitPoint>,
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
    for (tp, o) in parts.iter_mut() {
        let Some(point) = stage.commit_point(&mut o.state, &o.offsets) else { continue };
        shared.set_commit_point(tp.clone(), point);
        if last.get(tp) != Some(&point) {
            last.insert(tp.clone(), point);
            changed.push((tp.clone(), point));
        }
    }
    if !changed.is_empty() {
        *committing = Some(consumer::commit(consumer, shared, changed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::Resumption;

    #[test]
    fn a_partition_resumes_at_its_pair_or_without_the_value() {
        let tp = TopicPartition::new("t", 0);
        let r = |offset, companion| Resumption { offset, companion };
        assert_eq!(resume_from(&tp, 4, r(Some(6), Some(66))), (6, Some(66)), "the pair is ahead of the group: skip to it");
        assert_eq!(resume_from(&tp, 6, r(Some(6), Some(66))), (6, Some(66)));
        assert_eq!(resume_from(&tp, 9, r(Some(6), Some(66))), (9, None), "the value's offset is not read again");
        assert_eq!(resume_from(&tp, 3, r(None, Some(5))), (3, Some(5)), "a value from before pairs");
    }
}
