//! The at-least-once consumer: group membership, offset tracking, commits with a replay
//! horizon, and consumer-lag metrics.
//!
//! ## Delivery contract
//! A service processes messages in partition order and produces their outputs. An offset is
//! committable only when the outputs of that message **and of every earlier message** of the
//! partition are acknowledged by the broker ([`PartitionOffsets`]). A service may also *hold*
//! offsets (the scorer holds the first offset of every open run), and the commit never passes
//! a hold, so a crash re-reads what the state still needed.
//!
//! With each commit goes the **replay horizon** `h`: the highest offset whose outputs (and
//! those of all earlier offsets) were acknowledged. After a restart or a rebalance, records at
//! offsets ≤ h are replays whose effects are already durable; a service can use that to tell a
//! replayed tail of a finished run from a new orphan.
//!
//! More generally, each commit point carries one **companion value** chosen by the service
//! (the scorer: its replay horizon + 1; the aggregator: its window frontier). Commit metadata
//! would be the natural place, but not every Kafka-protocol broker keeps it (tansu drops it; a
//! test shows it), so companion values are stored as committed offsets of standalone groups
//! (clients that never join, only commit) — and a value is only usable with the offset it was
//! computed for: the aggregator's frontier resumed at an older offset dead-letters replayed
//! input as late and leaves the windows after it short (seen in CI, where a rebalance fell
//! between the two commits). Three standalone groups make the pair exact ([`CompanionStore`]):
//! `<group>.companion` and `<group>.companion.1` hold values in two alternating slots, and
//! `<group>.companion.at` holds, per partition, the offset the value goes with and its slot.
//! A commit writes the value into the slot the pair does **not** point at, then the pair, then
//! the group's offset. A crash after the value leaves the old pair pointing at the old value;
//! after the pair, the new pair points at the new value. Either way a new owner reads a value
//! and its own offset; it skips what it reads before that offset (acknowledged by the previous
//! owner). An instance's commits run one at a time, so a pair and the group's offset never
//! cross another commit's of the same instance; across instances, only the owner writes (a
//! revoked partition's late commit task writes nothing for it, and a member that lost its
//! assignment does not commit on revocation). Moving a group's offsets by hand (to re-read)
//! must also delete the three companion groups: a new owner otherwise skips ahead to the
//! stored pair's offset. Commit latency: three synchronous round trips per commit (values,
//! pair, offset), once per commit interval, not per message.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::{IntGaugeVec, Opts, Registry};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::config::KafkaConfig;
use crate::error::RuntimeError;
use crate::kafka::{apply_settings, client_config};

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition { topic: topic.into(), partition }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

/// Where a partition resumes after a restart or a rebalance: the offset to read next, and the
/// service's companion value (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitPoint {
    pub offset: i64,
    pub companion: i64,
}

/// What a stage may ask about its consumer group when it ticks.
pub trait GroupView {
    /// Partitions this instance owns now.
    fn assigned(&self) -> BTreeSet<TopicPartition>;
    /// Messages of `tp` not yet read, when known.
    fn lag(&self, tp: &TopicPartition) -> Option<i64>;
}

/// Offsets of one partition: processed-but-unacknowledged messages, holds, and the frontier.
#[derive(Debug, Default, Clone)]
pub struct PartitionOffsets {
    inflight: BTreeMap<i64, usize>,
    holds: BTreeMap<i64, usize>,
    /// Holds to release once every offset through the key is acknowledged.
    deferred: BTreeMap<i64, Vec<i64>>,
    /// One past the highest offset seen.
    next: Option<i64>,
}

impl PartitionOffsets {
    /// A message at `offset` was read; its outputs are pending until [`Self::acked`].
    pub fn begin(&mut self, offset: i64) {
        *self.inflight.entry(offset).or_default() += 1;
        self.next = Some(self.next.map_or(offset + 1, |n| n.max(offset + 1)));
    }

    /// The outputs of the message at `offset` are acknowledged.
    pub fn acked(&mut self, offset: i64) {
        if let Some(n) = self.inflight.get_mut(&offset) {
            *n -= 1;
            if *n == 0 {
                self.inflight.remove(&offset);
            }
        }
        if let Some(h) = self.horizon() {
            let later = self.deferred.split_off(&(h + 1));
            for hold in std::mem::replace(&mut self.deferred, later).into_values().flatten() {
                self.release(hold);
            }
        }
    }

    /// Releases `hold` once every offset through `through` is acknowledged (not merely
    /// `through` itself): until then a restart may still need the held offset.
    pub fn release_after(&mut self, through: i64, hold: i64) {
        if self.horizon().is_some_and(|h| h >= through) {
            self.release(hold);
        } else {
            self.deferred.entry(through).or_default().push(hold);
        }
    }

    pub fn hold(&mut self, offset: i64) {
        *self.holds.entry(offset).or_default() += 1;
    }

    pub fn release(&mut self, offset: i64) {
        if let Some(n) = self.holds.get_mut(&offset) {
            *n -= 1;
            if *n == 0 {
                self.holds.remove(&offset);
            }
        }
    }

    /// Offset to commit (the next offset to read after a restart), if anything was read.
    pub fn commit_offset(&self) -> Option<i64> {
        let next = self.next?;
        let mut c = next;
        if let Some((&o, _)) = self.inflight.first_key_value() {
            c = c.min(o);
        }
        if let Some((&o, _)) = self.holds.first_key_value() {
            c = c.min(o);
        }
        Some(c)
    }

    /// Highest offset whose outputs and those of every earlier read message are acknowledged.
    pub fn horizon(&self) -> Option<i64> {
        let next = self.next?;
        let frontier = self.inflight.first_key_value().map_or(next, |(&o, _)| o);
        Some(frontier - 1)
    }

    /// Offsets read but not yet acknowledged.
    pub fn pending(&self) -> usize {
        self.inflight.values().sum()
    }
}

/// What the rebalance callbacks and the processing loop share.
pub struct GroupShared {
    /// Where companion values are stored, paired with their offsets.
    companions: CompanionStore,
    /// Latest commit point per partition.
    commit_points: Mutex<HashMap<TopicPartition, CommitPoint>>,
    /// Partitions revoked since the loop last looked.
    revoked: Mutex<Vec<TopicPartition>>,
    /// Messages not yet read, per partition, from the latest statistics.
    lags: Mutex<HashMap<TopicPartition, i64>>,
    assigned: Mutex<BTreeSet<TopicPartition>>,
    /// When statistics last arrived, and how long the brokers had been silent then (the least
    /// `rxidle` of the cluster's brokers).
    contact: Mutex<Option<(std::time::Instant, Duration)>>,
    /// Assignments received so far (a stage that keeps state shared between partitions
    /// reloads it once per assignment).
    assignments: std::sync::atomic::AtomicU64,
}

impl GroupShared {
    /// How long no broker has answered this client (None before the first statistics). Fetch
    /// requests come back at least every `fetch.wait.max.ms`, so a healthy cluster answers
    /// within a second; a stalled or unreachable one does not.
    pub fn broker_silence(&self) -> Option<Duration> {
        self.contact.lock().unwrap().map(|(at, idle)| at.elapsed() + idle)
    }

    pub fn set_commit_point(&self, tp: TopicPartition, point: CommitPoint) {
        self.commit_points.lock().unwrap().insert(tp, point);
    }

    /// How many assignments this consumer has received: changes whenever partitions may have
    /// come from another instance.
    pub fn assignment_epoch(&self) -> u64 {
        self.assignments.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether a partition was revoked since the loop last took the revocations.
    pub fn has_revoked(&self) -> bool {
        !self.revoked.lock().unwrap().is_empty()
    }

    pub fn take_revoked(&self) -> Vec<TopicPartition> {
        std::mem::take(&mut *self.revoked.lock().unwrap())
    }

    /// Where a newly assigned partition resumes: its companion value and the offset the
    /// value goes with (blocking, two round trips). Call it when the first message of the
    /// partition arrives, not in the assignment callback. The previous owner commits on
    /// revocation, before the assignment; an owner that lost its assignment without knowing
    /// (its session lapsed) does not commit (see `pre_rebalance`), and a commit task of its
    /// that was late writes nothing for partitions it no longer owns ([`CompanionStore::write`]).
    ///
    /// A failed read is tried again twice (a coordinator moving answers with a retriable
    /// error for a moment) before the error stops the partition's opening.
    pub fn read_resumption(&self, tp: &TopicPartition) -> Result<Resumption, RuntimeError> {
        let mut attempt = 0;
        loop {
            match self.companions.read(tp) {
                Ok(r) => return Ok(r),
                Err(e) if attempt < 2 => {
                    attempt += 1;
                    tracing::warn!(error = %e, topic = %tp.topic, partition = tp.partition, attempt, "could not read the companion value; trying again");
                    std::thread::sleep(Duration::from_millis(500 * attempt));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Where a partition resumes, as the companion store says ([`CompanionStore::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Resumption {
    /// The offset the companion value was computed for; `None` when no pair was stored (a
    /// fresh group, or values written before pairs existed: then the value is at least as
    /// new as the group's committed offset).
    pub offset: Option<i64>,
    pub companion: Option<i64>,
}

/// Companion values paired with the offsets they go with (the module docs say how).
pub struct CompanionStore {
    /// Standalone clients of `<group>.companion` (slot 0) and `<group>.companion.1` (slot 1).
    values: [BaseConsumer; 2],
    /// Standalone client of `<group>.companion.at`: per partition, `offset << 1 | slot`.
    pairs: BaseConsumer,
    /// The slot the stored pair points at, per partition, as this instance last read or wrote
    /// it (forgotten after a failed write: it is read again). Held for a whole commit, so
    /// commits of the group run one at a time.
    slots: Mutex<HashMap<TopicPartition, usize>>,
}

impl CompanionStore {
    pub fn new(cfg: &KafkaConfig, service: &str, group: &str) -> Result<CompanionStore, RuntimeError> {
        let client = |g: String| -> Result<BaseConsumer, RuntimeError> {
            client_config(cfg, service)
                .set("group.id", g)
                .set("enable.auto.commit", "false")
                .create()
                .map_err(|e| RuntimeError::kafka("failed to create a companion client", e))
        };
        Ok(CompanionStore {
            values: [client(format!("{group}.companion"))?, client(format!("{group}.companion.1"))?],
            pairs: client(format!("{group}.companion.at"))?,
            slots: Mutex::new(HashMap::new()),
        })
    }

    /// Committed offsets of `tps` in a standalone group; `None` where nothing (or 0) was
    /// committed.
    fn committed(client: &BaseConsumer, tps: &[&TopicPartition]) -> Result<Vec<Option<i64>>, RuntimeError> {
        let mut tpl = TopicPartitionList::new();
        for tp in tps {
            tpl.add_partition(&tp.topic, tp.partition);
        }
        let got = client.committed_offsets(tpl, Duration::from_secs(10)).map_err(|e| RuntimeError::kafka("read companion values", e))?;
        Ok(tps
            .iter()
            .map(|tp| match got.find_partition(&tp.topic, tp.partition).map(|e| e.offset()) {
                Some(Offset::Offset(o)) if o > 0 => Some(o),
                _ => None,
            })
            .collect())
    }

    fn commit(client: &BaseConsumer, entries: &[(&TopicPartition, i64)], what: &'static str) -> Result<(), RuntimeError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for (tp, v) in entries {
            tpl.add_partition_offset(&tp.topic, tp.partition, Offset::Offset((*v).max(0))).map_err(|e| RuntimeError::kafka(what, e))?;
        }
        client.commit(&tpl, CommitMode::Sync).map_err(|e| RuntimeError::kafka(what, e))
    }

    /// A stored pair is `offset << 1 | slot`, plus 1 so that offset 0 in slot 0 is not 0
    /// (which reads back as "none").
    fn encode_pair(offset: i64, slot: usize) -> i64 {
        (offset.max(0) << 1 | slot as i64) + 1
    }

    /// (offset, slot) of a stored pair.
    fn decode_pair(v: i64) -> (i64, usize) {
        ((v - 1) >> 1, ((v - 1) & 1) as usize)
    }

    /// The stored pair of `tp`: (offset, slot).
    fn pair(&self, tp: &TopicPartition) -> Result<Option<(i64, usize)>, RuntimeError> {
        Ok(Self::committed(&self.pairs, &[tp])?[0].map(Self::decode_pair))
    }

    /// Reads where `tp` resumes. On an error the service must not go on with the partition
    /// (the pipeline stops; a restart reads again): resuming without the value would not be
    /// the resume the commit promised.
    pub fn read(&self, tp: &TopicPartition) -> Result<Resumption, RuntimeError> {
        let mut slots = self.slots.lock().unwrap();
        // What this instance knew of the slots is stale once another owner may have written:
        // forget it first, so that a failed read leaves nothing to write from.
        slots.remove(tp);
        match self.pair(tp)? {
            Some((offset, slot)) => {
                let companion = Self::committed(&self.values[slot], &[tp])?[0];
                slots.insert(tp.clone(), slot);
                Ok(Resumption { offset: Some(offset), companion })
            }
            None => Ok(Resumption { offset: None, companion: Self::committed(&self.values[0], &[tp])?[0] }),
        }
    }

    /// Writes `points`: each value into the slot its stored pair does not point at, then the
    /// pairs. Runs `then` (the group's offset commit) before letting another write start.
    /// Points of partitions `owned` no longer holds are dropped (checked under the lock: a
    /// commit task that lost the race with a revocation writes nothing for the partitions the
    /// revocation gave away); `then` gets the points written.
    pub fn write(
        &self,
        points: &[(TopicPartition, CommitPoint)],
        owned: impl Fn(&TopicPartition) -> bool,
        then: impl FnOnce(&[(TopicPartition, CommitPoint)]) -> Result<(), RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let slots = self.slots.lock().unwrap();
        let points: Vec<(TopicPartition, CommitPoint)> = points.iter().filter(|(tp, _)| owned(tp)).cloned().collect();
        self.write_locked(slots, &points, 3, then)
    }

    /// A write cut after its first `steps` stores (1: the values, 2: and the pairs), as a
    /// crash would leave it: for tests of what the next owner reads.
    #[doc(hidden)]
    pub fn write_interrupted(&self, points: &[(TopicPartition, CommitPoint)], steps: usize) -> Result<(), RuntimeError> {
        self.write_locked(self.slots.lock().unwrap(), points, steps, |_| Ok(()))
    }

    fn write_locked(
        &self,
        mut slots: std::sync::MutexGuard<'_, HashMap<TopicPartition, usize>>,
        points: &[(TopicPartition, CommitPoint)],
        steps: usize,
        then: impl FnOnce(&[(TopicPartition, CommitPoint)]) -> Result<(), RuntimeError>,
    ) -> Result<(), RuntimeError> {
        if points.is_empty() {
            return Ok(());
        }
        let unknown: Vec<&TopicPartition> = points.iter().map(|(tp, _)| tp).filter(|tp| !slots.contains_key(*tp)).collect();
        if !unknown.is_empty() {
            for (tp, v) in unknown.iter().zip(Self::committed(&self.pairs, &unknown)?) {
                // No pair yet: slot 0 may hold a value written before pairs existed; write 1.
                slots.insert((*tp).clone(), v.map_or(0, |v| Self::decode_pair(v).1));
            }
        }
        let next = |tp: &TopicPartition| 1 - slots[tp];
        let mut by_slot: [Vec<(&TopicPartition, i64)>; 2] = Default::default();
        for (tp, cp) in points {
            by_slot[next(tp)].push((tp, cp.companion));
        }
        let pairs: Vec<(&TopicPartition, i64)> = points.iter().map(|(tp, cp)| (tp, Self::encode_pair(cp.offset, next(tp)))).collect();
        let written = (|| {
            Self::commit(&self.values[0], &by_slot[0], "commit companion values")?;
            Self::commit(&self.values[1], &by_slot[1], "commit companion values")?;
            if steps < 2 {
                return Ok(());
            }
            Self::commit(&self.pairs, &pairs, "commit companion pairs")
        })();
        if steps < 3 {
            // Cut (tests): what this instance knows of the slots is no longer what is stored.
            slots.clear();
            return written;
        }
        match written {
            Ok(()) => {
                for (tp, _) in points {
                    let s = 1 - slots[tp];
                    slots.insert(tp.clone(), s);
                }
                then(points)
            }
            Err(e) => {
                // Whether the pairs were stored is unknown: read them again next time.
                for (tp, _) in points {
                    slots.remove(tp);
                }
                Err(e)
            }
        }
    }
}

impl GroupShared {
    /// Whether `tp` is assigned to this instance now.
    pub fn owns(&self, tp: &TopicPartition) -> bool {
        self.assigned.lock().unwrap().contains(tp)
    }
}

impl GroupView for GroupShared {
    fn assigned(&self) -> BTreeSet<TopicPartition> {
        self.assigned.lock().unwrap().clone()
    }

    /// From librdkafka's statistics, refreshed every second.
    fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        self.lags.lock().unwrap().get(tp).copied()
    }
}

/// Commits points: companion values and their pairs first, then the group's offsets, all
/// synchronously (call from a blocking context).
fn commit_points_sync<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    shared: &GroupShared,
    points: &[(TopicPartition, CommitPoint)],
) -> Result<(), RuntimeError> {
    if points.is_empty() {
        return Ok(());
    }
    shared.companions.write(
        points,
        |tp| shared.owns(tp),
        |points| {
            let mut tpl = TopicPartitionList::new();
            for (tp, cp) in points {
                tpl.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(cp.offset))
                    .map_err(|e| RuntimeError::kafka("commit list", e))?;
            }
            consumer.commit(&tpl, CommitMode::Sync).map_err(|e| RuntimeError::kafka("commit", e))
        },
    )
}

/// The consumer context: commits on revocation, tracks the assignment, exports lag.
pub struct GroupContext {
    pub shared: Arc<GroupShared>,
    lag: IntGaugeVec,
    group: String,
}

impl ClientContext for GroupContext {
    fn stats(&self, stats: Statistics) {
        // Contact: the least idle time of the cluster's brokers (bootstrap entries have no node
        // id; `rxidle` is −1 before the first answer).
        let idle = stats.brokers.values().filter(|b| b.nodeid >= 0 && b.rxidle >= 0).map(|b| b.rxidle).min();
        let idle = idle.map_or(Duration::from_secs(3600), |us| Duration::from_micros(us as u64));
        *self.shared.contact.lock().unwrap() = Some((std::time::Instant::now(), idle));
        // Lag = messages not yet read (high watermark − next offset to read). librdkafka's own
        // `consumer_lag` counts from the committed offset, which services that hold commits
        // back on purpose (the aggregator, for its window span) keep far behind.
        // Only partitions assigned now: librdkafka keeps reporting ones it owned before.
        let assigned = self.shared.assigned.lock().unwrap().clone();
        for (topic, t) in &stats.topics {
            for (p, part) in &t.partitions {
                if *p < 0 || part.hi_offset < 0 || !assigned.contains(&TopicPartition::new(topic.clone(), *p)) {
                    continue;
                }
                // Nothing read yet and nothing committed: reading starts at the low watermark
                // (`auto.offset.reset=earliest`), so an empty partition has no lag; librdkafka's
                // own figure is −1 (unknown) then, and such a partition would never be idle.
                let lag = if part.app_offset >= 0 {
                    (part.hi_offset - part.app_offset).max(0)
                } else if part.consumer_lag >= 0 {
                    part.consumer_lag
                } else if part.committed_offset < 0 && part.lo_offset >= 0 {
                    (part.hi_offset - part.lo_offset).max(0)
                } else {
                    -1
                };
                if lag >= 0 {
                    self.shared.lags.lock().unwrap().insert(TopicPartition::new(topic.clone(), *p), lag);
                    self.lag.with_label_values(&[&self.group, topic, &p.to_string()]).set(lag);
                }
            }
        }
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let revoked: Vec<TopicPartition> = tpl.elements().iter().map(|e| TopicPartition::new(e.topic(), e.partition())).collect();
            let points: Vec<(TopicPartition, CommitPoint)> = {
                let mut cp = self.shared.commit_points.lock().unwrap();
                revoked.iter().filter_map(|tp| cp.remove(tp).map(|p| (tp.clone(), p))).collect()
            };
            // A synchronous commit blocks the loop (this runs inside its poll) until the broker
            // answers: when it has not been answering (the revocation is librdkafka's own, after
            // the session timed out), skip it; the next owner re-reads from the last commit.
            let silent = self.shared.broker_silence().is_some_and(|s| s >= Duration::from_secs(3));
            if silent && !points.is_empty() {
                tracing::warn!(group = %self.group, partitions = points.len(), "brokers not answering: no commit on revocation; the next owner re-reads more");
            } else if consumer.assignment_lost() && !points.is_empty() {
                // The group gave the partitions away already (the member was expelled): another
                // instance may own them now, and its commits are the ones that count.
                tracing::warn!(group = %self.group, partitions = points.len(), "assignment lost: no commit on revocation; the next owner re-reads more");
            } else if !points.is_empty()
                && let Err(e) = commit_points_sync(consumer, &self.shared, &points)
            {
                tracing::warn!(error = %e, group = %self.group, "commit on revocation failed; the next owner re-reads more");
            }
            let mut assigned = self.shared.assigned.lock().unwrap();
            let mut lags = self.shared.lags.lock().unwrap();
            for tp in &revoked {
                assigned.remove(tp);
                // A lag known from before is stale once the partition comes back; another
                // instance reports it now.
                lags.remove(tp);
                let _ = self.lag.remove_label_values(&[&self.group, &tp.topic, &tp.partition.to_string()]);
            }
            self.shared.revoked.lock().unwrap().extend(revoked);
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            self.shared.assignments.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut assigned = self.shared.assigned.lock().unwrap();
            for e in tpl.elements() {
                assigned.insert(TopicPartition::new(e.topic(), e.partition()));
            }
            tracing::info!(group = %self.group, partitions = tpl.count(), "partitions assigned");
        }
    }
}

pub type GroupConsumer = StreamConsumer<GroupContext>;

/// Consumer-lag gauge, registered once per registry.
pub fn lag_gauge(registry: &Registry, service: &str) -> IntGaugeVec {
    let g = IntGaugeVec::new(
        Opts::new(format!("octant_{service}_consumer_lag_messages"), "Messages behind the partition's high watermark"),
        &["group", "topic", "partition"],
    )
    .expect("valid metric");
    let _ = registry.register(Box::new(g.clone()));
    g
}

/// A consumer in `group` subscribed to `topics`, with manual commits.
pub fn group_consumer(
    cfg: &KafkaConfig,
    service: &str,
    group: &str,
    topics: &[&str],
    lag: IntGaugeVec,
) -> Result<(Arc<GroupConsumer>, Arc<GroupShared>), RuntimeError> {
    let shared = Arc::new(GroupShared {
        companions: CompanionStore::new(cfg, service, group)?,
        commit_points: Default::default(),
        revoked: Default::default(),
        lags: Default::default(),
        assigned: Default::default(),
        contact: Default::default(),
        assignments: Default::default(),
    });
    let ctx = GroupContext { shared: shared.clone(), lag, group: group.to_string() };
    let mut c = client_config(cfg, service);
    c.set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("statistics.interval.ms", "1000")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        // The rebalance timeout: how long a rebalance may wait for a member to rejoin. The
        // loop polls at least every commit interval, so a live member rejoins within a second;
        // librdkafka's default (5 min) let one member that never rejoined stall the group for
        // that long (seen with tansu when instances left during a rebalance).
        .set("max.poll.interval.ms", "60000")
        // Small per-partition fetches and prefetch queues: when a backlog builds, partitions
        // are read interleaved rather than one large batch after another, which keeps the
        // event-time skew between partitions (and so late data downstream) small.
        .set("max.partition.fetch.bytes", "65536")
        .set("queued.min.messages", "2000")
        // Since librdkafka 2.1 a partition whose prefetch queue reached `queued.min.messages`
        // is not fetched again for `fetch.queue.backoff.ms` (default 1 s): with the small
        // queue above that capped every partition at 2,000 messages per second (the scorer
        // read about 3,000 events/s of a backlog while waiting, not working; BENCHMARKS.md).
        .set("fetch.queue.backoff.ms", "10")
        // Latency: librdkafka's default lets a fetch wait 500 ms for data, per hop; the alerting
        // path has two hops (scorer → aggregator → alerter, or trajectories → alerter). 100 ms
        // keeps idle fetch traffic modest.
        .set("fetch.wait.max.ms", "100");
    // The user's `kafka.settings` win over every tuning default above, but not over what
    // the loop's correctness rests on (its own commits, its group).
    apply_settings(&mut c, cfg);
    c.set("group.id", group).set("enable.auto.commit", "false").set("enable.auto.offset.store", "false");
    let consumer: GroupConsumer = c.create_with_context(ctx).map_err(|e| RuntimeError::kafka("failed to create consumer", e))?;
    consumer.subscribe(topics).map_err(|e| RuntimeError::kafka(format!("failed to subscribe to {topics:?}"), e))?;
    Ok((Arc::new(consumer), shared))
}

/// Commits points on a blocking thread (companion values and pairs first, then offsets). Await the
/// handle to know the outcome.
pub fn commit(
    consumer: &Arc<GroupConsumer>,
    shared: &Arc<GroupShared>,
    points: Vec<(TopicPartition, CommitPoint)>,
) -> tokio::task::JoinHandle<Result<(), RuntimeError>> {
    let (consumer, shared) = (consumer.clone(), shared.clone());
    tokio::task::spawn_blocking(move || commit_points_sync(&*consumer, &shared, &points))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_never_passes_an_unacked_message_or_a_hold() {
        let mut p = PartitionOffsets::default();
        assert_eq!(p.commit_offset(), None);
        for o in 10..15 {
            p.begin(o);
        }
        assert_eq!(p.commit_offset(), Some(10));
        p.acked(11);
        p.acked(10);
        assert_eq!(p.commit_offset(), Some(12));
        assert_eq!(p.horizon(), Some(11));
        p.hold(12);
        p.acked(12);
        p.acked(14);
        // The run held at 12 ended at 14, but 13 is still in flight: the hold stays.
        p.release_after(14, 12);
        assert_eq!(p.commit_offset(), Some(12), "held until everything through the run's end is acknowledged");
        assert_eq!(p.horizon(), Some(12));
        p.acked(13);
        assert_eq!(p.horizon(), Some(14));
        assert_eq!(p.commit_offset(), Some(15));
        assert_eq!(p.pending(), 0);
    }
}
