//! # octant-lake-writer
//!
//! Consumes every Octant topic and writes Parquet (zstd) tables, Hive-partitioned as
//! `<lake>/<table>/system_id=<id>/date=<YYYY-MM-DD>/`, exactly once (`octant_lake::lake` has
//! the protocol). Tables and their Arrow schemas come from the Avro contracts
//! (`octant_lake::schema`).
//! Records that do not decode go to `raw_records` (hex payload and the error), so the lake
//! holds every offset of every topic. Personal data and secrets are redacted before writing (`[redaction]`: fields, and patterns
//! over the free text of trajectory events, alerts and dead letters).
//!
//! ## Guarantees
//! - **Exactly once in the lake**: a unit's files are published create-only, then its marker;
//!   offsets are committed after the marker; on assignment the writer recovers the partition
//!   (removes an interrupted unit) and skips offsets already in the lake.
//! - Files close on size (`max_file_bytes`) or age (`max_file_age`), whichever comes first,
//!   and on shutdown.
//! - The lake is a local directory or an object store (`s3://…`, `memory://`), through
//!   `octant_lake::store`; the same protocol on both.

pub mod config;
pub mod metrics;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::Context;
use arrow::json::ReaderBuilder;
use octant_contracts::*;
use octant_runtime::admin;
use octant_runtime::consumer::{CommitPoint, PartitionOffsets, TopicPartition};
use octant_runtime::kafka::OutRecord;
use octant_runtime::pipeline::{InMessage, Parts, Stage, TickContext};
use octant_runtime::service::{self, ServiceId};
use parquet::file::properties::WriterProperties;
use prometheus::Registry;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use config::LakeWriterConfig;
use metrics::Metrics;
use octant_lake::lake::{self, FileSpec, Lake};
use octant_lake::schema::{self, NO_SYSTEM, Table};
use octant_lake::{date_of, store};

pub const ID: ServiceId = ServiceId { name: "lake_writer", env: "OCTANT_LAKE_WRITER", group: "octant-lake-writer", admin_port: 9104 };
pub use octant_runtime::redact::REDACTED;
use octant_runtime::redact::Redactor;

/// A started lake writer.
pub type Running = service::Running;

pub async fn start(config: LakeWriterConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid lake-writer configuration")?;
    let stage = LakeStage::new(&config, &registry)?;
    let lag = stage.metrics.consumer_lag.clone();
    let inputs: Vec<String> = topics::ALL.iter().map(|t| config.stream.kafka.topic(t)).collect();
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    tracing::info!(lake = %config.lake.display(), "lake writer writes");
    service::start_stage(&ID, &config.stream, registry, &refs, lag, stage, |_, _| {}, shutdown).await
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
    /// When the unit's first record was read (`None`: nothing buffered).
    since: Option<Instant>,
    /// A write failed and the lake could not be read since (when it was last tried): whether
    /// its marker made it is unknown, so nothing is written before the lake says (see
    /// [`LakeStage::settle`]).
    unsure: Option<Instant>,
}

struct LakeStage {
    lake: Lake,
    props: WriterProperties,
    decoder: Decoder,
    schemas: HashMap<&'static str, arrow::datatypes::SchemaRef>,
    metrics: Metrics,
    config: LakeWriterConfig,
    redactor: Redactor,
}

/// The record as a JSON row of its table, with the system id it belongs to.
fn row_of(decoder: &Decoder, payload: &[u8], redactor: &Redactor) -> Result<(&'static Table, Value), String> {
    let (name, mut value) = octant_contracts::codec::decode_value(decoder, payload)?;
    if name == "ai.octant.v1.DeadLetter" {
        // Bytes as hex. Redacted here (a service with redaction off may have written them):
        // the payload and key before they become hex, the message by the patterns.
        let d: DeadLetter = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        value["error_message"] = Value::String(redactor.text(&d.error_message).into_owned());
        value["payload"] = Value::String(schema::hex_bytes(&redactor.payload(decoder, &d.payload)));
        value["key"] = d.key.as_deref().map_or(Value::Null, |k| Value::String(schema::hex_bytes(&redactor.bytes(k))));
    }
    let table = schema::table_of(if name.is_empty() { "ai.octant.v1.TrajectoryEvent" } else { &name })
        .ok_or_else(|| format!("no table for {name}"))?;
    Ok((table, value))
}

impl LakeStage {
    /// The stage writing to `config.lake` (created if a directory), its metrics registered in
    /// `registry`.
    pub fn new(config: &LakeWriterConfig, registry: &Registry) -> anyhow::Result<LakeStage> {
        if !store::is_url(&config.lake.to_string_lossy()) {
            std::fs::create_dir_all(&config.lake).with_context(|| format!("cannot create the lake directory {}", config.lake.display()))?;
        }
        Ok(LakeStage {
            lake: Lake::open(&config.lake.to_string_lossy(), &config.storage)
                .with_context(|| format!("cannot open the lake {}", config.lake.display()))?,
            props: lake::writer_properties(),
            decoder: admin::count_legacy_fingerprints(registry, ID.name, Decoder::new()),
            schemas: schema::TABLES.iter().map(|t| (t.name, schema::arrow_schema(t))).collect(),
            metrics: Metrics::new(registry),
            config: config.clone(),
            redactor: config.redaction.build().map_err(anyhow::Error::msg)?,
        })
    }

    /// Writes the partition's buffer as one unit. On failure the buffer stays (retried later).
    fn flush(&self, p: &mut LakePartition) -> bool {
        if p.first.is_none() {
            return true;
        }
        // Retried at most once a second (a full buffer would otherwise retry on every record).
        if let Some(tried) = p.unsure {
            if tried.elapsed() < Duration::from_secs(1) || !self.settle(p) {
                return false;
            }
            if p.first.is_none() {
                return true;
            }
        }
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
                self.written(p);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, topic = %p.topic, partition = p.partition, "writing a unit failed; retried at the next tick");
                self.metrics.errors.with_label_values(&["io"]).inc();
                self.settle(p);
                p.first.is_none()
            }
        }
    }

    /// The buffer is in the lake: start the next unit.
    fn written(&self, p: &mut LakePartition) {
        p.committed = Some(p.last);
        p.buffer.clear();
        p.first = None;
        p.since = None;
        p.bytes = 0;
        self.metrics.buffered.with_label_values(&[&p.topic]).set(0);
    }

    /// After a failed write: recovers the partition (a half-written unit is removed) and learns
    /// from its highest marker what of the buffer is in the lake after all — a write can fail
    /// after its marker is created (syncing the markers' directory, removing older markers),
    /// and another owner may have written past it. Those rows are dropped: written again, grown
    /// by later records under another name, their offsets would be in the lake twice. Returns
    /// whether the rest may be written (false while the lake cannot be read: retried later).
    fn settle(&self, p: &mut LakePartition) -> bool {
        let committed = match self.lake.recover(&p.topic, p.partition) {
            Err(e) => {
                tracing::warn!(error = %e, topic = %p.topic, partition = p.partition, "cannot read the lake after a failed write; nothing is written until it can be");
                self.metrics.errors.with_label_values(&["io"]).inc();
                p.unsure = Some(Instant::now());
                return false;
            }
            Ok(c) => c,
        };
        p.unsure = None;
        p.committed = committed.max(p.committed);
        let Some(c) = committed else { return true };
        if p.first.is_none_or(|f| c < f) {
            return true;
        }
        // Rows are buffered in offset order per (table, system, date).
        let mut first = None;
        for ((table, _, _), rows) in p.buffer.iter_mut() {
            let before = rows.len();
            rows.retain(|r| r.get("kafka_offset").and_then(Value::as_i64).is_none_or(|o| o > c));
            let dropped = before - rows.len();
            if dropped > 0 {
                self.metrics.records.with_label_values(&[table]).inc_by(dropped as u64);
            }
            if let Some(h) = rows.iter().filter_map(|r| r.get("kafka_offset").and_then(Value::as_i64)).min() {
                first = Some(first.map_or(h, |f: i64| f.min(h)));
            }
        }
        p.buffer.retain(|_, rows| !rows.is_empty());
        tracing::info!(topic = %p.topic, partition = p.partition, in_lake = c, "rows of the failed write found in the lake are not written again");
        if p.buffer.is_empty() {
            let last = p.last.max(c);
            self.written(p);
            p.committed = Some(last);
        } else {
            p.first = first;
        }
        true
    }
}

impl Stage for LakeStage {
    type Partition = LakePartition;
    type Tag = ();

    fn open(&mut self, tp: &TopicPartition, offset: i64, _companion: Option<i64>) -> anyhow::Result<LakePartition> {
        // Without knowing what is in the lake, writing could duplicate: an error stops the
        // writer (it restarts from the last commit).
        let committed = self
            .lake
            .recover(&tp.topic, tp.partition)
            .with_context(|| format!("cannot read the lake state of {tp} in {}", self.lake.location()))?;
        tracing::info!(topic = %tp.topic, partition = tp.partition, offset, ?committed, "partition opened: resuming after the last offset in the lake");
        Ok(LakePartition {
            topic: tp.topic.clone(),
            partition: tp.partition,
            committed,
            buffer: BTreeMap::new(),
            first: None,
            last: -1,
            bytes: 0,
            since: None,
            unsure: None,
        })
    }

    fn process(&mut self, p: &mut LakePartition, _offsets: &mut PartitionOffsets, m: &InMessage<'_>) -> (Vec<OutRecord>, ()) {
        let offset = m.offset;
        if p.committed.is_some_and(|c| offset <= c) {
            self.metrics.skipped.with_label_values(&[&p.topic]).inc();
            return (Vec::new(), ());
        }
        let payload = m.payload;
        let timestamp = m.timestamp.unwrap_or(0);
        let (table, mut row) = match row_of(&self.decoder, payload, &self.redactor) {
            Ok(x) => x,
            Err(error) => (
                schema::table("raw_records").expect("declared"),
                serde_json::json!({
                    "kafka_timestamp": timestamp,
                    "key": m.key.map(|k| schema::hex_bytes(&self.redactor.bytes(k))),
                    "payload": schema::hex_bytes(&self.redactor.payload(&self.decoder, payload)),
                    "error": self.redactor.text(&error),
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
        // Tables that carry what agents and people wrote (dead letters and raw records are
        // redacted above); the others hold identifiers and numbers.
        if matches!(table.name, "trajectory_events" | "alerts") {
            self.redactor.value(&mut row);
        }
        if let Some(o) = row.as_object_mut() {
            o.insert("kafka_topic".into(), Value::String(p.topic.clone()));
            o.insert("kafka_partition".into(), Value::from(p.partition));
            o.insert("kafka_offset".into(), Value::from(offset));
        }
        if p.first.is_none() {
            p.first = Some(offset);
            p.since = Some(m.read_at);
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

    fn commit_point(&mut self, p: &mut LakePartition, _offsets: &PartitionOffsets) -> Option<CommitPoint> {
        // Kafka may resume anywhere ≤ the lake's end: offsets ≤ `committed` are skipped.
        p.committed.map(|c| CommitPoint { offset: c + 1, companion: 0 })
    }

    fn tick(&mut self, parts: &mut Parts<LakePartition>, ctx: &TickContext<'_>) -> Vec<OutRecord> {
        for o in parts.values_mut() {
            let p = &mut o.state;
            if p.since.is_some_and(|t| ctx.now.saturating_duration_since(t) >= self.config.max_file_age) {
                self.flush(p);
            }
        }
        Vec::new()
    }

    fn drain(&mut self, parts: &mut Parts<LakePartition>) {
        for o in parts.values_mut() {
            self.flush(&mut o.state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lake writer's stage on a fresh directory `name`, its partition `t`/0 opened, and the
    /// directory its raw records (what non-contract payloads become) are written to.
    fn stage_on(name: &str) -> (std::path::PathBuf, LakeStage, LakePartition, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("octant-lake-writer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = LakeWriterConfig { lake: dir.clone(), ..Default::default() };
        let mut stage = LakeStage::new(&config, &Registry::new()).unwrap();
        let p = stage.open(&TopicPartition { topic: "t".into(), partition: 0 }, 0, None).unwrap();
        let files = dir.join("raw_records").join(format!("system_id={}", lake::escape(NO_SYSTEM))).join("date=1970-01-01");
        (dir, stage, p, files)
    }

    fn read(stage: &mut LakeStage, p: &mut LakePartition, offsets: std::ops::RangeInclusive<i64>) {
        for offset in offsets {
            let m = InMessage {
                topic: "t",
                partition: 0,
                offset,
                key: None,
                payload: b"not a contract",
                timestamp: Some(0),
                read_at: Instant::now(),
            };
            stage.process(p, &mut PartitionOffsets::default(), &m);
        }
    }

    /// A unit `first..=last` in the lake: its file and its marker.
    fn in_lake(dir: &std::path::Path, files: &std::path::Path, first: i64, last: i64) {
        std::fs::create_dir_all(files).unwrap();
        std::fs::write(files.join(lake::file_name("t", 0, first, last)), b"in the lake").unwrap();
        std::fs::create_dir_all(dir.join("_commits/t/0")).unwrap();
        std::fs::write(dir.join("_commits/t/0").join(format!("{last:020}")), b"").unwrap();
    }

    /// The units in `files`, by (first, last) offset.
    fn units(files: &std::path::Path) -> Vec<(i64, i64)> {
        let mut units: Vec<(i64, i64)> = std::fs::read_dir(files)
            .unwrap()
            .filter_map(|e| octant_lake::lake::unit_of(&e.unwrap().file_name().to_string_lossy()).map(|(_, _, f, l)| (f, l)))
            .collect();
        units.sort();
        units
    }

    /// A write that fails after its unit's marker was created (here: the previous attempt
    /// left the unit's file and marker, so publishing again is refused) must not be written
    /// again, grown by later records under another name: its offsets would be in the lake twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_failed_after_its_marker_is_not_written_twice() {
        let (dir, mut stage, mut p, files) = stage_on("settle");
        read(&mut stage, &mut p, 0..=2);
        in_lake(&dir, &files, 0, 2);
        assert!(stage.flush(&mut p), "the unit is in the lake: the write counts as done");
        assert_eq!(stage.commit_point(&mut p, &PartitionOffsets::default()).map(|c| c.offset), Some(3));
        read(&mut stage, &mut p, 3..=3);
        assert!(stage.flush(&mut p));
        assert_eq!(units(&files), vec![(0, 2), (3, 3)], "every offset in one unit");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// After a failure, part of the buffer may be in the lake (a write failed after its
    /// marker while the lake could not be read, and the buffer grew meanwhile; or another
    /// owner wrote past it): those rows are dropped, the rest is written as the next unit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rows_found_in_the_lake_after_a_failure_are_not_written_again() {
        let (dir, mut stage, mut p, files) = stage_on("partial");
        read(&mut stage, &mut p, 0..=4);
        in_lake(&dir, &files, 0, 2);
        assert!(stage.settle(&mut p), "the lake was read");
        assert_eq!((p.first, p.last, p.committed), (Some(3), 4, Some(2)));
        assert!(stage.flush(&mut p));
        assert_eq!(units(&files), vec![(0, 2), (3, 4)], "every offset in one unit");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
