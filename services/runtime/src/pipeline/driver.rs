//! The loop's contract without a broker: [`Driver`] runs a [`Stage`] in-process for unit and
//! golden tests.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use super::*;

/// An in-process driver for a [`Stage`]: feeds it messages and ticks as the loop would,
/// acknowledges its records (at once, or when told), and keeps what it produced and where it
/// would commit — the loop's contract without a broker, for unit and golden tests.
pub struct Driver<S: Stage> {
    pub stage: S,
    pub parts: Parts<S::Partition>,
    /// Every record produced so far, in order (message outputs and tick records).
    pub produced: Vec<OutRecord>,
    /// Acknowledge each message's records as soon as it is processed (default); when false,
    /// they wait for [`Driver::ack_all`].
    pub auto_ack: bool,
    companions: HashMap<TopicPartition, i64>,
    group: DriverGroup,
    now: Instant,
    next_offset: HashMap<TopicPartition, i64>,
    unacked: Vec<(TopicPartition, i64, S::Tag)>,
    tick_seq: u64,
    unacked_ticks: Vec<u64>,
}

#[derive(Default)]
struct DriverGroup {
    assigned: BTreeSet<TopicPartition>,
    lags: HashMap<TopicPartition, i64>,
}

impl GroupView for DriverGroup {
    fn assigned(&self) -> BTreeSet<TopicPartition> {
        self.assigned.clone()
    }

    fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        self.lags.get(tp).copied()
    }
}

impl<S: Stage> Driver<S> {
    pub fn new(stage: S) -> Self {
        Driver {
            stage,
            parts: HashMap::new(),
            produced: Vec::new(),
            auto_ack: true,
            companions: HashMap::new(),
            group: DriverGroup::default(),
            now: Instant::now(),
            next_offset: HashMap::new(),
            unacked: Vec::new(),
            tick_seq: 0,
            unacked_ticks: Vec::new(),
        }
    }

    /// `tp` is owned from now on and resumes with this companion value (as a new owner after
    /// a restart or a rebalance reads it).
    pub fn resume(&mut self, tp: TopicPartition, offset: i64, companion: Option<i64>) {
        if let Some(c) = companion {
            self.companions.insert(tp.clone(), c);
        }
        self.next_offset.insert(tp.clone(), offset);
        self.group.assigned.insert(tp);
    }

    /// `tp` is assigned (ticks see it) without a message yet.
    pub fn assign(&mut self, tp: TopicPartition) {
        self.group.assigned.insert(tp);
    }

    /// Messages of `tp` not yet read, as the group's statistics would say.
    pub fn set_lag(&mut self, tp: TopicPartition, lag: i64) {
        self.group.lags.insert(tp, lag);
    }

    /// Moves the driver's clock (read times and tick times) forward.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    /// Feeds one message at the next offset of its partition; returns its records.
    pub fn send(&mut self, topic: &str, partition: i32, key: Option<&[u8]>, payload: &[u8]) -> anyhow::Result<Vec<OutRecord>> {
        let offset = *self.next_offset.get(&TopicPartition::new(topic, partition)).unwrap_or(&0);
        self.send_at(topic, partition, offset, key, payload, None)
    }

    /// Feeds one message at `offset`; returns its records.
    pub fn send_at(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        key: Option<&[u8]>,
        payload: &[u8],
        timestamp: Option<i64>,
    ) -> anyhow::Result<Vec<OutRecord>> {
        let tp = TopicPartition::new(topic, partition);
        self.next_offset.insert(tp.clone(), offset + 1);
        if !self.parts.contains_key(&tp) {
            let state = self.stage.open(&tp, offset, self.companions.get(&tp).copied())?;
            self.parts.insert(tp.clone(), Owned { state, offsets: PartitionOffsets::default(), opened: 0, from: offset });
            self.group.assigned.insert(tp.clone());
        }
        let owned = self.parts.get_mut(&tp).expect("inserted above");
        owned.offsets.begin(offset);
        let msg = InMessage { topic, partition, offset, key, payload, timestamp, read_at: self.now };
        self.stage.prepare(std::slice::from_ref(&msg));
        let (records, tag) = self.stage.process(&mut owned.state, &mut owned.offsets, &msg);
        self.produced.extend(records.iter().cloned());
        self.unacked.push((tp, offset, tag));
        if self.auto_ack {
            self.ack_all();
        }
        Ok(records)
    }

    /// Acknowledges every record produced so far.
    pub fn ack_all(&mut self) {
        for (tp, offset, tag) in std::mem::take(&mut self.unacked) {
            if let Some(o) = self.parts.get_mut(&tp) {
                o.offsets.acked(offset);
            }
            self.stage.acked(tag, Duration::ZERO);
        }
        for seq in std::mem::take(&mut self.unacked_ticks) {
            self.stage.tick_acked(&mut self.parts, seq);
        }
    }

    /// One tick of the loop: its records (also kept in `produced`).
    pub fn tick(&mut self) -> Vec<OutRecord> {
        self.tick_seq += 1;
        let ctx = TickContext { group: &self.group, now: self.now, seq: self.tick_seq };
        let records = self.stage.tick(&mut self.parts, &ctx);
        self.produced.extend(records.iter().cloned());
        self.unacked_ticks.push(self.tick_seq);
        if self.auto_ack {
            self.ack_all();
        }
        records
    }

    /// Where every owned partition would commit now.
    pub fn commit_points(&mut self) -> BTreeMap<TopicPartition, CommitPoint> {
        let stage = &mut self.stage;
        self.parts.iter_mut().filter_map(|(tp, o)| stage.commit_point(&mut o.state, &o.offsets).map(|p| (tp.clone(), p))).collect()
    }

    /// Shutdown: acknowledges what is pending, then lets the stage make its state durable.
    pub fn drain(&mut self) {
        self.ack_all();
        self.stage.drain(&mut self.parts);
    }
}
