//! Kafka clients: configuration, producing with awaited delivery, topic administration.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

use crate::config::KafkaConfig;
use crate::error::RuntimeError;

/// A librdkafka client configuration from [`KafkaConfig`], for `service`.
pub fn client_config(cfg: &KafkaConfig, service: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &cfg.brokers);
    c.set("client.id", format!("{}-{service}", cfg.client_id));
    apply_settings(&mut c, cfg);
    c
}

/// Applies the user's `kafka.settings`. Clients that set their own defaults after
/// [`client_config`] call it again last, so that the user's value always wins.
pub fn apply_settings(c: &mut ClientConfig, cfg: &KafkaConfig) {
    for (k, v) in &cfg.settings {
        c.set(k, v);
    }
}

/// An idempotent producer: no duplicates from its own retries, per-partition order kept.
/// Also applies `cfg.avro_fingerprint` to the process's Avro writer.
pub fn producer(cfg: &KafkaConfig, service: &str) -> Result<FutureProducer, RuntimeError> {
    producer_config(cfg, service).create().map_err(|e| RuntimeError::kafka("failed to create producer", e))
}

/// The configuration of [`producer`] (with the user's `kafka.settings` last).
pub fn producer_config(cfg: &KafkaConfig, service: &str) -> ClientConfig {
    octant_contracts::codec::set_write_fingerprint(cfg.avro_fingerprint);
    let mut c = client_config(cfg, service);
    c.set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "300000")
        .set("queue.buffering.max.messages", "200000");
    apply_settings(&mut c, cfg);
    c
}

/// An Avro single-object record ready to send. Its `Debug` shows the payload's size, never
/// its bytes (they may carry tool arguments).
#[derive(Clone, PartialEq, Eq)]
pub struct OutRecord {
    pub topic: String,
    /// `None`: the partitioner picks by key (the usual case); `Some` for records sent to
    /// every partition (watermarks).
    pub partition: Option<i32>,
    pub key: String,
    pub payload: Vec<u8>,
}

impl std::fmt::Debug for OutRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutRecord")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("key", &self.key)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

/// Sends a record; the future resolves when the broker acknowledged it (or delivery failed
/// after librdkafka's own retries, bounded by `message.timeout.ms`).
pub async fn send(producer: &FutureProducer, rec: &OutRecord) -> Result<(i32, i64), KafkaError> {
    let mut fr = FutureRecord::to(&rec.topic).key(rec.key.as_bytes()).payload(&rec.payload);
    if let Some(p) = rec.partition {
        fr = fr.partition(p);
    }
    match producer.send(fr, Timeout::Never).await {
        Ok(d) => Ok((d.partition, d.offset)),
        Err((e, _)) => Err(e),
    }
}

/// Sends every record (up to 10,000 in flight) and returns where each landed, in order; the
/// first failed delivery (after librdkafka's own retries) is the error.
pub async fn send_all(producer: &FutureProducer, records: &[OutRecord]) -> Result<Vec<(i32, i64)>, KafkaError> {
    use futures::StreamExt;
    let mut pending = futures::stream::FuturesOrdered::new();
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        pending.push_back(send(producer, r));
        while pending.len() >= 10_000 {
            out.push(pending.next().await.expect("non-empty")?);
        }
    }
    while let Some(d) = pending.next().await {
        out.push(d?);
    }
    Ok(out)
}

/// Declared topics (full names, prefix applied) and partition counts (design §2). Output
/// topics keyed by system use the same count so that one owner holds a system's state.
pub fn default_topics(cfg: &KafkaConfig, partitions: i32) -> Vec<(String, i32)> {
    use octant_contracts::topics::*;
    [
        (TRAJECTORIES_PRODUCTION, partitions),
        (TRAJECTORIES_EVALUATION, partitions),
        (OBSERVATIONS, partitions),
        (WINDOWS, partitions),
        (ALERTS, 1),
        (PROFILES, 1),
        (DLQ, 1),
        (RERUNS, 1),
        (OTLP_FRAGMENTS, partitions),
    ]
    .into_iter()
    .map(|(t, p)| (cfg.topic(t), p))
    .collect()
}

/// Creates topics that do not exist yet (an existing topic is not an error).
pub async fn ensure_topics(cfg: &KafkaConfig, topics: &[(String, i32)]) -> Result<(), RuntimeError> {
    create_topics(cfg, topics, 1).await
}

/// Creates `topics` (name, partitions) with `replication` replicas each; a topic that
/// exists already is left as it is.
pub async fn create_topics(cfg: &KafkaConfig, topics: &[(String, i32)], replication: i32) -> Result<(), RuntimeError> {
    let admin: AdminClient<DefaultClientContext> =
        client_config(cfg, "admin").create().map_err(|e| RuntimeError::kafka("failed to create admin client", e))?;
    let new: Vec<NewTopic> = topics.iter().map(|(t, p)| NewTopic::new(t, *p, TopicReplication::Fixed(replication))).collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin.create_topics(&new, &opts).await.map_err(|e| RuntimeError::kafka("create topics", e))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                return Err(RuntimeError::kafka(format!("create topic {topic}"), KafkaError::AdminOp(code)));
            }
        }
    }
    Ok(())
}

/// Creates a compacted topic of one partition with `replication` replicas (a ledger: the last
/// record of each key is kept for good) unless it exists.
pub async fn ensure_compacted_topic(cfg: &KafkaConfig, topic: &str, replication: i32) -> Result<(), RuntimeError> {
    let admin: AdminClient<DefaultClientContext> =
        client_config(cfg, "admin").create().map_err(|e| RuntimeError::kafka("failed to create admin client", e))?;
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(replication)).set("cleanup.policy", "compact");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin.create_topics([&new], &opts).await.map_err(|e| RuntimeError::kafka("create topics", e))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => return Err(RuntimeError::kafka(format!("create topic {topic}"), KafkaError::AdminOp(code))),
        }
    }
    Ok(())
}

/// The partition count of each of `topics` (blocking metadata requests on a blocking thread).
pub async fn partition_counts(cfg: &KafkaConfig, topics: &[String]) -> Result<HashMap<String, i32>, RuntimeError> {
    let producer: FutureProducer =
        client_config(cfg, "metadata").create().map_err(|e| RuntimeError::kafka("failed to create metadata client", e))?;
    let topics = topics.to_vec();
    let unreachable = cfg.unreachable_hint();
    tokio::task::spawn_blocking(move || {
        let mut out = HashMap::new();
        for t in &topics {
            let md = producer.client().fetch_metadata(Some(t), Duration::from_secs(10)).map_err(|e| {
                // A broker that does not answer is not a missing topic: say which it is.
                if matches!(
                    e.rdkafka_error_code(),
                    Some(RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::Authentication)
                ) {
                    RuntimeError::Broker(format!("{unreachable}: {e}"))
                } else {
                    RuntimeError::kafka(format!("metadata of {t}"), e)
                }
            })?;
            let n = md.topics().first().map_or(0, |m| m.partitions().len() as i32);
            if n == 0 {
                return Err(RuntimeError::Broker(format!("topic {t} has no partitions (does it exist?)")));
            }
            out.insert(t.clone(), n);
        }
        Ok(out)
    })
    .await
    .expect("metadata task does not panic")
}

/// [`partition_counts`], waiting for brokers that cannot be reached yet: each failed attempt
/// says so at once (the address and security settings, secrets redacted) and is retried every
/// 5 s until `shutdown`. Other errors (a missing topic) return at once.
pub async fn partition_counts_when_reachable(
    cfg: &KafkaConfig,
    topics: &[String],
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<HashMap<String, i32>, RuntimeError> {
    loop {
        match partition_counts(cfg, topics).await {
            Err(RuntimeError::Broker(m)) if m.starts_with("cannot reach") => {
                tracing::warn!(error = %m, "retrying in 5 s");
                tokio::select! {
                    _ = shutdown.cancelled() => return Err(RuntimeError::Broker(m)),
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
            other => return other,
        }
    }
}

/// Waits until the brokers answer a metadata request, or `timeout` passes.
pub async fn wait_for_metadata(cfg: &KafkaConfig, timeout: Duration) -> Result<(), RuntimeError> {
    let producer: FutureProducer = client_config(cfg, "probe").create().map_err(|e| RuntimeError::kafka("failed to create probe", e))?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let p = producer.clone();
        let probe = tokio::task::spawn_blocking(move || p.client().fetch_metadata(None, Duration::from_secs(2)))
            .await
            .expect("metadata probe does not panic");
        match probe {
            Ok(md) if !md.brokers().is_empty() => return Ok(()),
            Ok(_) => {}
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(RuntimeError::kafka(format!("brokers {} did not answer within {timeout:?}", cfg.brokers), e));
            }
            Err(_) => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(RuntimeError::Broker(format!("brokers {} returned no broker list", cfg.brokers)));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Assigns `consumer` every partition of the topics `bases` (prefixed as `cfg` says), each
/// from its beginning: a reader that follows whole topics without a consumer group's sharing.
pub fn assign_from_beginning<C: rdkafka::consumer::ConsumerContext>(
    consumer: &impl rdkafka::consumer::Consumer<C>,
    cfg: &KafkaConfig,
    bases: &[&str],
) -> Result<(), KafkaError> {
    let mut tpl = rdkafka::TopicPartitionList::new();
    for base in bases {
        let topic = cfg.topic(base);
        let md = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10))?;
        for t in md.topics() {
            for p in t.partitions() {
                tpl.add_partition_offset(&topic, p.id(), rdkafka::Offset::Beginning)?;
            }
        }
    }
    consumer.assign(&tpl)
}
