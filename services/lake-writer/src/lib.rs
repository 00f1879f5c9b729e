//! # octant-lake-writer
//!
//! Consumes every Octant topic and writes Parquet (zstd) tables, Hive-partitioned as
//! `<lake>/<table>/system_id=<id>/date=<YYYY-MM-DD>/`, exactly once ([`lake`] has the
//! protocol). Tables and their Arrow schemas come from the Avro contracts ([`schema`]).
//! Records that do not decode go to `raw_records` (hex payload and the error), so the lake
//! holds every offset of every topic. Fields named in `redact` are replaced before writing.
//!
//! ## Guarantees
//! - **Exactly once in the lake**: a unit's files are published create-only, then its marker;
//!   offsets are committed after the marker; on assignment the writer recovers the partition
//!   (removes an interrupted unit) and skips offsets already in the lake.
//! - Files close on size (`max_file_bytes`) or age (`max_file_age`), whichever comes first,
//!   and on shutdown.
//! - Local directories only for now (object stores: see ARCHITECTURE.md).

pub mod config;
pub mod lake;
pub mod schema;
pub mod store;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use arrow::json::ReaderBuilder;
use octant_contracts::*;
use octant_runtime::admin::{self, Health};
use octant_runtime::consumer::{self, GroupShared, PartitionOffsets, TopicPartition};
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::pipeline::{self, LoopConfig, Stage};
use parquet::file::properties::WriterProperties;
use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry};
use rdkafka::Message;
use rdkafka::message::BorrowedMessage;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use config::LakeWriterConfig;
use lake::{FileSpec, Lake};
use schema::{NO_SYSTEM, Table};

const SERVICE: &str = "lake_writer";
pub const REDACTED: &str = "[redacted]";

pub struct Running {
    pub admin_addr: SocketAddr,
    pub task: JoinHandle<anyhow::Result<()>>,
    pub health: Arc<Health>,
}

#[derive(Clone)]
struct Metrics {
    records: IntCounterVec,
    files: IntCounterVec,
    skipped: IntCounterVec,
    flush_seconds: Histogram,
    errors: IntCounterVec,
    buffered: IntGaugeVec,
    consumer_lag: IntGaugeVec,
}

impl Metrics {
    fn new(registry: &Registry) -> Metrics {
        let m = Metrics {
            records: IntCounterVec::new(Opts::new("octant_lake_writer_records_total", "Records written to the lake, by table"), &["table"])
                .unwrap(),
            files: IntCounterVec::new(Opts::new("octant_lake_writer_files_total", "Parquet files published, by table"), &["table"])
                .unwrap(),
            skipped: IntCounterVec::new(
                Opts::new(
                    "octant_lake_writer_skipped_total",
                    "Records read again after a restart and skipped (already in the lake), by topic",
                ),
                &["topic"],
            )
            .unwrap(),
            flush_seconds: Histogram::with_opts(HistogramOpts::new(
                "octant_lake_writer_flush_seconds",
                "Time to write and publish one unit",
            ))
            .unwrap(),
            errors: IntCounterVec::new(Opts::new("octant_lake_writer_errors_total", "Failed unit writes (retried), by kind"), &["kind"])
                .unwrap(),
            buffered: IntGaugeVec::new(
                Opts::new("octant_lake_writer_buffered_records", "Records buffered, not yet in the lake, by topic"),
                &["topic"],
            )
            .unwrap(),
            consumer_lag: consumer::lag_gauge(registry, "lake_writer"),
        };
        for c in [
            Box::new(m.records.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.files.clone()),
            Box::new(m.skipped.clone()),
            Box::new(m.flush_seconds.clone()),
            Box::new(m.errors.clone()),
            Box::new(m.buffered.clone()),
        ] {
            registry.register(c).expect("lake-writer metrics registered once per registry");
        }
        m
    }
}

pub async fn start(config: LakeWriterConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid lake-writer configuration")?;
    if !store::is_url(&config.lake.to_string_lossy()) {
        std::fs::create_dir_all(&config.lake).with_context(|| format!("cannot create the lake directory {}", config.lake.display()))?;
    }
    let metrics = Metrics::new(&registry);
    let decoder = admin::count_legacy_fingerprints(&registry, SERVICE, Decoder::new());
    let health = Health::new();
    let (admin_addr, _admin) = admin::serve(config.admin_addr, admin::router("lake_writer", registry, health.clone()), shutdown.clone())
        .await
        .context("failed to start the lake writer's admin server")?;
    let producer = kafka::producer(&config.kafka, SERVICE)?;
    let inputs: Vec<String> = topics::ALL.iter().map(|t| config.kafka.topic(t)).collect();
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let (consumer, shared) = consumer::group_consumer(&config.kafka, SERVICE, &config.group_id, &refs, metrics.consumer_lag.clone())?;
    let stage = LakeStage {
        lake: Lake::open(&config.lake.to_string_lossy(), &config.storage)
            .with_context(|| format!("cannot open the lake {}", config.lake.display()))?,
        props: lake::writer_properties(),
        decoder,
        schemas: schema::TABLES.iter().map(|t| (t.name, schema::arrow_schema(t))).collect(),
        metrics,
        config: config.clone(),
    };
    let loop_cfg = LoopConfig { commit_interval: config.commit_interval, max_inflight: config.max_inflight };
    let task = tokio::spawn(pipeline::run(stage, consumer, shared, producer, health.clone(), loop_cfg, shutdown));
    tracing::info!(%admin_addr, lake = %config.lake.display(), "lake writer started");
    Ok(Running { admin_addr, task, health })
}

pub async fn run(config: LakeWriterConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(config, registry, shutdown).await?;
    running.task.await.context("lake writer task panicked")?
}

/// One input partition: what is in the lake, and the buffer of the next unit.
pub struct LakePartition {
    topic: String,
    partition: i32,
    /// Last offset in the lake (`None`: none yet).
    committed: Option<i64>,
    /// (table, system, date) → rows.
    buffer: BTreeMap<(&'static str, String, String), Vec<Value>>,
    first: Option<i64>,
    last: i64,
    bytes: usize,
    since: Instant,
}

struct LakeStage {
    lake: Lake,
    props: WriterProperties,
    decoder: Decoder,
    schemas: HashMap<&'static str, arrow::datatypes::SchemaRef>,
    metrics: Metrics,
    config: LakeWriterConfig,
}

/// The UTC date (`YYYY-MM-DD`) of an epoch-ms time: the `date` partition value.
pub fn date_of(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_string()
}

/// The record as a JSON row of its table, with the system id it belongs to.
fn row_of(decoder: &Decoder, payload: &[u8]) -> Result<(&'static Table, Value), String> {
    let (_, known, _) = decoder.writer_of(payload).map_err(|e| e.to_string())?;
    let name = known.map(|k| k.full_name.as_str()).unwrap_or_default();
    fn to<T: Contract + serde::Serialize>(d: &Decoder, p: &[u8]) -> Result<Value, String> {
        let v: T = d.decode(p).map_err(|e| e.to_string())?;
        serde_json::to_value(&v).map_err(|e| e.to_string())
    }
    let value = match name {
        "ai.octant.v1.TrajectoryEvent" => to::<TrajectoryEvent>(decoder, payload),
        "ai.octant.v1.Observation" => to::<Observation>(decoder, payload),
        "ai.octant.v1.Watermark" => to::<Watermark>(decoder, payload),
        "ai.octant.v1.MetricWindow" => to::<MetricWindow>(decoder, payload),
        "ai.octant.v1.DimensionProfile" => to::<DimensionProfile>(decoder, payload),
        "ai.octant.v1.Alert" => to::<Alert>(decoder, payload),
        "ai.octant.v1.Profile" => to::<Profile>(decoder, payload),
        "ai.octant.v1.DeadLetter" => {
            let d: DeadLetter = decoder.decode(payload).map_err(|e| e.to_string())?;
            let mut v = serde_json::to_value(&d).map_err(|e| e.to_string())?;
            v["payload"] = Value::String(schema::hex_bytes(&d.payload));
            v["key"] = d.key.as_deref().map_or(Value::Null, |k| Value::String(schema::hex_bytes(k)));
            Ok(v)
        }
        // JSON input (trajectory events may be JSON): decode as the topic's record.
        _ => to::<TrajectoryEvent>(decoder, payload).map_err(|e| format!("{e} (writer {name:?})")),
    }?;
    let table = schema::table_of(if name.is_empty() { "ai.octant.v1.TrajectoryEvent" } else { name })
        .ok_or_else(|| format!("no table for {name}"))?;
    Ok((table, value))
}

impl LakeStage {
    /// Writes the partition's buffer as one unit. On failure the buffer stays (retried later).
    fn flush(&self, p: &mut LakePartition) -> bool {
        let Some(first) = p.first else { return true };
        let started = Instant::now();
        let mut files = Vec::new();
        let mut counts = Vec::new();
        for ((table, system, date), rows) in &p.buffer {
            let schema = self.schemas[table].clone();
            let batch = (|| {
                let mut d = ReaderBuilder::new(schema).with_batch_size(rows.len().max(1)).build_decoder()?;
                d.serialize(rows)?;
                d.flush()
            })();
            match batch {
                Ok(Some(batch)) => {
                    counts.push((*table, batch.num_rows()));
                    files.push(FileSpec { table, system, date, batch });
                }
                Ok(None) => {}
                Err(e) => {
                    // A contract/schema mismatch is a bug: say where, keep the buffer.
                    tracing::error!(error = %e, table, "rows do not fit the table's Arrow schema");
                    self.metrics.errors.with_label_values(&["schema"]).inc();
                    return false;
                }
            }
        }
        let result = tokio::task::block_in_place(|| self.lake.write_unit(&p.topic, p.partition, first, p.last, files, &self.props));
        match result {
            Ok(paths) => {
                for (table, n) in counts {
                    self.metrics.records.with_label_values(&[table]).inc_by(n as u64);
                    self.metrics.files.with_label_values(&[table]).inc();
                }
                self.metrics.flush_seconds.observe(started.elapsed().as_secs_f64());
                tracing::debug!(topic = %p.topic, partition = p.partition, first, last = p.last, files = paths.len(), "unit written");
                p.committed = Some(p.last);
                p.buffer.clear();
                p.first = None;
                p.bytes = 0;
                self.metrics.buffered.with_label_values(&[&p.topic]).set(0);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, topic = %p.topic, partition = p.partition, "writing a unit failed; retried at the next tick");
                self.metrics.errors.with_label_values(&["io"]).inc();
                // Leave no half-unit behind before retrying.
                let _ = self.lake.recover(&p.topic, p.partition);
                false
            }
        }
    }
}

impl Stage for LakeStage {
    type Partition = LakePartition;
    type Tag = ();

    fn open(&mut self, tp: &TopicPartition, offset: i64, _companion: Option<i64>) -> LakePartition {
        let committed = tokio::task::block_in_place(|| self.lake.recover(&tp.0, tp.1)).unwrap_or_else(|e| {
            // Without knowing what is in the lake, writing could duplicate: stop.
            panic!("cannot read the lake state of {}/{} in {}: {e}", tp.0, tp.1, self.lake.location())
        });
        tracing::info!(topic = %tp.0, partition = tp.1, offset, ?committed, "partition opened: resuming after the last offset in the lake");
        LakePartition {
            topic: tp.0.clone(),
            partition: tp.1,
            committed,
            buffer: BTreeMap::new(),
            first: None,
            last: -1,
            bytes: 0,
            since: Instant::now(),
        }
    }

    fn process(&mut self, p: &mut LakePartition, _offsets: &mut PartitionOffsets, m: &BorrowedMessage<'_>) -> (Vec<OutRecord>, ()) {
        let offset = m.offset();
        if p.committed.is_some_and(|c| offset <= c) {
            self.metrics.skipped.with_label_values(&[&p.topic]).inc();
            return (Vec::new(), ());
        }
        let payload = m.payload().unwrap_or_default();
        let timestamp = m.timestamp().to_millis().unwrap_or(0);
        let (table, mut row) = match row_of(&self.decoder, payload) {
            Ok(x) => x,
            Err(error) => (
                schema::table("raw_records").expect("declared"),
                serde_json::json!({
                    "kafka_timestamp": timestamp,
                    "key": m.key().map(schema::hex_bytes),
                    "payload": schema::hex_bytes(payload),
                    "error": error,
                }),
            ),
        };
        let system = match table.system {
            Some(ptr) => row.pointer(ptr).and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| NO_SYSTEM.into()),
            None => NO_SYSTEM.into(),
        };
        if table.system == Some("/system_id")
            && let Some(o) = row.as_object_mut()
        {
            o.remove("system_id");
        }
        let date = date_of(row.pointer(table.time).and_then(Value::as_i64).unwrap_or(timestamp));
        for ptr in &self.config.redact {
            if let Some(v) = row.pointer_mut(ptr)
                && !v.is_null()
            {
                *v = Value::String(REDACTED.into());
            }
        }
        if let Some(o) = row.as_object_mut() {
            o.insert("kafka_topic".into(), Value::String(p.topic.clone()));
            o.insert("kafka_partition".into(), Value::from(p.partition));
            o.insert("kafka_offset".into(), Value::from(offset));
        }
        if p.first.is_none() {
            p.first = Some(offset);
            p.since = Instant::now();
        }
        p.last = offset;
        p.bytes += payload.len() + 64;
        p.buffer.entry((table.name, system, date)).or_default().push(row);
        self.metrics.buffered.with_label_values(&[&p.topic]).inc();
        if p.bytes >= self.config.max_file_bytes {
            self.flush(p);
        }
        (Vec::new(), ())
    }

    fn acked(&mut self, _tag: (), _latency: Duration) {}

    fn commit_point(&mut self, p: &mut LakePartition, _offsets: &PartitionOffsets) -> Option<(i64, i64)> {
        // Kafka may resume anywhere ≤ the lake's end: offsets ≤ `committed` are skipped.
        p.committed.map(|c| (c + 1, 0))
    }

    fn tick(&mut self, parts: &mut HashMap<TopicPartition, (LakePartition, PartitionOffsets)>, _shared: &GroupShared) -> Vec<OutRecord> {
        for (p, _) in parts.values_mut() {
            if p.first.is_some() && p.since.elapsed() >= self.config.max_file_age {
                self.flush(p);
            }
        }
        Vec::new()
    }

    fn drain(&mut self, parts: &mut HashMap<TopicPartition, (LakePartition, PartitionOffsets)>) {
        for (p, _) in parts.values_mut() {
            self.flush(p);
        }
    }
}
