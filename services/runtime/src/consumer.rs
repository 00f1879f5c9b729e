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
//! Each commit carries, in its metadata, the **replay horizon** `h`: the highest offset whose
//! outputs (and those of all earlier offsets) were acknowledged. After a restart or a
//! rebalance, records at offsets ≤ h are replays whose effects are already durable; a service
//! can use that to tell a replayed tail of a finished run from a new orphan.

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
use crate::kafka::client_config;

pub type TopicPartition = (String, i32);

/// Offsets of one partition: processed-but-unacknowledged messages, holds, and the frontier.
#[derive(Debug, Default, Clone)]
pub struct PartitionOffsets {
    inflight: BTreeMap<i64, usize>,
    holds: BTreeMap<i64, usize>,
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
#[derive(Debug, Default)]
pub struct GroupShared {
    /// Latest commit point per partition: (offset, horizon).
    commit_points: Mutex<HashMap<TopicPartition, (i64, i64)>>,
    /// Partitions revoked since the loop last looked.
    revoked: Mutex<Vec<TopicPartition>>,
    /// Replay horizon read from the committed metadata of newly assigned partitions.
    horizons: Mutex<HashMap<TopicPartition, i64>>,
    assigned: Mutex<BTreeSet<TopicPartition>>,
}

impl GroupShared {
    pub fn set_commit_point(&self, tp: TopicPartition, offset: i64, horizon: i64) {
        self.commit_points.lock().unwrap().insert(tp, (offset, horizon));
    }

    pub fn take_revoked(&self) -> Vec<TopicPartition> {
        std::mem::take(&mut *self.revoked.lock().unwrap())
    }

    /// The replay horizon recorded with the committed offset of `tp`, if any.
    pub fn horizon(&self, tp: &TopicPartition) -> Option<i64> {
        self.horizons.lock().unwrap().get(tp).copied()
    }

    pub fn assigned(&self) -> BTreeSet<TopicPartition> {
        self.assigned.lock().unwrap().clone()
    }
}

/// The consumer context: commits on revocation, reads horizons on assignment, exports lag.
pub struct GroupContext {
    pub shared: Arc<GroupShared>,
    lag: IntGaugeVec,
    group: String,
}

impl ClientContext for GroupContext {
    fn stats(&self, stats: Statistics) {
        for (topic, t) in &stats.topics {
            for (p, part) in &t.partitions {
                if *p >= 0 && part.consumer_lag >= 0 {
                    self.lag.with_label_values(&[&self.group, topic, &p.to_string()]).set(part.consumer_lag);
                }
            }
        }
    }
}

fn metadata_horizon(meta: &str) -> Option<i64> {
    meta.strip_prefix("h=")?.parse().ok()
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let points = self.shared.commit_points.lock().unwrap();
            let mut commit = TopicPartitionList::new();
            let mut revoked = Vec::new();
            for e in tpl.elements() {
                let tp = (e.topic().to_string(), e.partition());
                if let Some((offset, horizon)) = points.get(&tp) {
                    let _ = commit.add_partition_offset(&tp.0, tp.1, Offset::Offset(*offset));
                    if let Some(mut el) = commit.find_partition(&tp.0, tp.1) {
                        el.set_metadata(format!("h={horizon}"));
                    }
                }
                revoked.push(tp);
            }
            drop(points);
            if commit.count() > 0 {
                if let Err(e) = consumer.commit(&commit, CommitMode::Sync) {
                    tracing::warn!(error = %e, group = %self.group, "commit on revocation failed; the next owner re-reads more");
                }
            }
            let mut assigned = self.shared.assigned.lock().unwrap();
            for tp in &revoked {
                assigned.remove(tp);
                self.shared.commit_points.lock().unwrap().remove(tp);
            }
            self.shared.revoked.lock().unwrap().extend(revoked);
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            match consumer.committed_offsets((*tpl).clone(), Duration::from_secs(10)) {
                Ok(committed) => {
                    let mut horizons = self.shared.horizons.lock().unwrap();
                    for e in committed.elements() {
                        let tp = (e.topic().to_string(), e.partition());
                        match metadata_horizon(e.metadata()) {
                            Some(h) => horizons.insert(tp, h),
                            None => horizons.remove(&tp),
                        };
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not read committed offsets on assignment"),
            }
            let mut assigned = self.shared.assigned.lock().unwrap();
            for e in tpl.elements() {
                assigned.insert((e.topic().to_string(), e.partition()));
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
    let shared = Arc::new(GroupShared::default());
    let ctx = GroupContext { shared: shared.clone(), lag, group: group.to_string() };
    let mut c = client_config(cfg, service);
    c.set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("statistics.interval.ms", "1000")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000");
    let consumer: GroupConsumer =
        c.create_with_context(ctx).map_err(|e| RuntimeError::kafka("failed to create consumer", e))?;
    consumer.subscribe(topics).map_err(|e| RuntimeError::kafka(format!("failed to subscribe to {topics:?}"), e))?;
    Ok((Arc::new(consumer), shared))
}

/// Commits the given points `(topic, partition, offset, horizon)` asynchronously.
pub fn commit(consumer: &GroupConsumer, points: &[(String, i32, i64, i64)]) -> Result<(), RuntimeError> {
    if points.is_empty() {
        return Ok(());
    }
    let mut tpl = TopicPartitionList::new();
    for (t, p, o, h) in points {
        tpl.add_partition_offset(t, *p, Offset::Offset(*o)).map_err(|e| RuntimeError::kafka("commit list", e))?;
        if let Some(mut el) = tpl.find_partition(t, *p) {
            el.set_metadata(format!("h={h}"));
        }
    }
    consumer.commit(&tpl, CommitMode::Async).map_err(|e| RuntimeError::kafka("commit", e))
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
        p.acked(13);
        p.acked(14);
        assert_eq!(p.commit_offset(), Some(12), "held by an open run");
        assert_eq!(p.horizon(), Some(14), "but acknowledged through 14");
        p.release(12);
        assert_eq!(p.commit_offset(), Some(15));
        assert_eq!(p.pending(), 0);
    }

    #[test]
    fn horizon_metadata_parses() {
        assert_eq!(metadata_horizon("h=42"), Some(42));
        assert_eq!(metadata_horizon(""), None);
    }
}
