//! Reading a topic to its end: every record of every partition, from the beginning to the
//! end the broker has now ([`read_to_end`]); and following topics from the beginning as
//! records arrive ([`follow`]: the fleet page's live state, `octant compare --follow`). Used where a service rebuilds state from a log (the alerter's
//! history), by the demo's view, and by the tests, which read what a stage produced instead of
//! waiting out a timeout.
//!
//! The end of a partition is where a fetch finds nothing more (librdkafka's partition EOF),
//! not the high watermark from `ListOffsets`: the embedded broker reports that as the *first*
//! offset of the last batch + 1, so reading to it would stop up to a batch early.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::{Message, Timestamp};

use crate::config::KafkaConfig;
use crate::error::RuntimeError;
use crate::kafka::client_config;

/// A record as read back.
#[derive(Clone, PartialEq, Eq)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    pub timestamp: Option<i64>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

/// Every payload of the topics `bases` (with the configured prefix), every partition from the
/// beginning and then as records arrive, without a consumer group's commits (each follower
/// reads the whole topic). The stream ends only with an error of the client.
pub fn follow(
    cfg: &KafkaConfig,
    client: &str,
    bases: &[&str],
) -> Result<impl futures::Stream<Item = Result<Vec<u8>, RuntimeError>> + use<>, RuntimeError> {
    let mut c = client_config(cfg, client);
    c.set("group.id", format!("{}{}-{client}-{}", cfg.topic_prefix, cfg.client_id, std::process::id()));
    c.set("enable.auto.commit", "false");
    crate::kafka::apply_settings(&mut c, cfg);
    let consumer: rdkafka::consumer::StreamConsumer = c.create().map_err(|e| RuntimeError::kafka("failed to create a follower", e))?;
    crate::kafka::assign_from_beginning(&consumer, cfg, bases).map_err(|e| RuntimeError::kafka("assign", e))?;
    if consumer.assignment().map_or(0, |a| a.count()) == 0 {
        let names: Vec<String> = bases.iter().map(|b| cfg.topic(b)).collect();
        return Err(RuntimeError::Broker(format!("{} have no partitions (is the pipeline running?)", names.join(", "))));
    }
    Ok(futures::stream::unfold(consumer, |c| async move {
        let next = c.recv().await.map(|m| m.payload().unwrap_or_default().to_vec()).map_err(|e| RuntimeError::kafka("reading", e));
        Some((next, c))
    }))
}

/// Every record of `topic` now, in partition and offset order. Fails when the brokers do not
/// answer within `timeout`, or the topic has no partitions.
pub async fn read_to_end(cfg: &KafkaConfig, topic: &str, timeout: Duration) -> Result<Vec<Record>, RuntimeError> {
    read_from(cfg, topic, &BTreeMap::new(), timeout).await
}

/// Like [`read_to_end`], each partition from the offset `from` gives it (from the beginning
/// when `from` has none).
pub async fn read_from(cfg: &KafkaConfig, topic: &str, from: &BTreeMap<i32, i64>, timeout: Duration) -> Result<Vec<Record>, RuntimeError> {
    let (cfg, topic, from) = (cfg.clone(), topic.to_string(), from.clone());
    tokio::task::spawn_blocking(move || read_blocking(&cfg, &topic, &from, None, timeout)).await.expect("the reader does not panic")
}

/// Like [`read_from`], keeping only the records whose key is one of `keys` (what is read of a
/// busy topic stays small).
pub async fn read_from_keys(
    cfg: &KafkaConfig,
    topic: &str,
    from: &BTreeMap<i32, i64>,
    keys: std::collections::HashSet<Vec<u8>>,
    timeout: Duration,
) -> Result<Vec<Record>, RuntimeError> {
    let (cfg, topic, from) = (cfg.clone(), topic.to_string(), from.clone());
    tokio::task::spawn_blocking(move || read_blocking(&cfg, &topic, &from, Some(&keys), timeout)).await.expect("the reader does not panic")
}

/// Each partition of `topic` and its high watermark now (where a reader that wants only what
/// comes next starts; the embedded broker may report it a batch early, which only makes such
/// a reader read a little more).
pub async fn end_offsets(cfg: &KafkaConfig, topic: &str, timeout: Duration) -> Result<BTreeMap<i32, i64>, RuntimeError> {
    let (cfg, topic) = (cfg.clone(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let c: BaseConsumer = client_config(&cfg, "offsets").create().map_err(|e| RuntimeError::kafka("failed to create a reader", e))?;
        let md = c.fetch_metadata(Some(&topic), timeout).map_err(|e| RuntimeError::kafka(format!("metadata of {topic}"), e))?;
        let parts: Vec<i32> = md.topics().first().map(|t| t.partitions().iter().map(|p| p.id()).collect()).unwrap_or_default();
        if parts.is_empty() {
            return Err(RuntimeError::Broker(format!("topic {topic} has no partitions (does it exist?)")));
        }
        parts
            .into_iter()
            .map(|p| {
                let (_, high) =
                    c.fetch_watermarks(&topic, p, timeout).map_err(|e| RuntimeError::kafka(format!("offsets of {topic}/{p}"), e))?;
                Ok((p, high))
            })
            .collect()
    })
    .await
    .expect("the offsets reader does not panic")
}

fn read_blocking(
    cfg: &KafkaConfig,
    topic: &str,
    from: &BTreeMap<i32, i64>,
    keys: Option<&std::collections::HashSet<Vec<u8>>>,
    timeout: Duration,
) -> Result<Vec<Record>, RuntimeError> {
    let c: BaseConsumer = client_config(cfg, "reader")
        .set("group.id", format!("{}.reader", cfg.client_id))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        // An offset to start from that retention has deleted: read from the earliest there is.
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "50")
        .create()
        .map_err(|e| RuntimeError::kafka("failed to create a reader", e))?;
    let md = c.fetch_metadata(Some(topic), timeout).map_err(|e| RuntimeError::kafka(format!("metadata of {topic}"), e))?;
    let parts: Vec<i32> = md.topics().first().map(|t| t.partitions().iter().map(|p| p.id()).collect()).unwrap_or_default();
    if parts.is_empty() {
        return Err(RuntimeError::Broker(format!("topic {topic} has no partitions (does it exist?)")));
    }
    let mut tpl = TopicPartitionList::new();
    for p in &parts {
        // From offset 0, not `Offset::Beginning`: the embedded broker once answered the
        // earliest-offset request with a later batch's base offset (a reader of a 4-partition
        // topic started at 278 and missed 0..=277 — seen in the scale-out test); an offset
        // retention has deleted resets to the earliest there is (above).
        let start = Offset::Offset(from.get(p).copied().unwrap_or(0));
        tpl.add_partition_offset(topic, *p, start).map_err(|e| RuntimeError::kafka("partition list", e))?;
    }
    c.assign(&tpl).map_err(|e| RuntimeError::kafka("assign", e))?;
    let mut open: BTreeSet<i32> = parts.into_iter().collect();
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + timeout;
    while !open.is_empty() {
        if std::time::Instant::now() > deadline {
            return Err(RuntimeError::Broker(format!(
                "reading {topic} to its end took longer than {timeout:?} ({} partitions left)",
                open.len()
            )));
        }
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => return Err(RuntimeError::kafka(format!("reading {topic}"), e)),
            Some(Ok(m)) if keys.is_some_and(|k| !m.key().is_some_and(|key| k.contains(key))) => {}
            Some(Ok(m)) => out.push(Record {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                payload: m.payload().unwrap_or_default().to_vec(),
                timestamp: match m.timestamp() {
                    Timestamp::NotAvailable => None,
                    t => t.to_millis(),
                },
            }),
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    Ok(out)
}
