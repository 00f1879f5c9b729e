//! # octant-lake-writer
//!
//! Consumes every Octant topic and writes Delta Lake tables of Parquet (zstd) files,
//! partitioned by date (`<lake>/<table>/date=<YYYY-MM-DD>/`, rows sorted by system), exactly
//! once (`octant_lake::lake` has the protocol). Tables and their Arrow schemas come from the
//! Avro contracts (`octant_lake::schema`).
//! Records that do not decode go to `raw_records` (hex payload and the error), so the lake
//! holds every offset of every topic. Personal data and secrets are redacted before writing (`[redaction]`: fields, and patterns
//! over the free text of trajectory events, alerts and dead letters).
//!
//! ## Guarantees
//! - **Exactly once in the lake**: a unit's files are committed table by table with the input
//!   partition's transaction identifier, the topic's home table last; offsets are committed
//!   after that; on assignment the writer reads every table's version of the partition and
//!   skips what each table holds already. A writer that lost its partition is refused
//!   (`octant_lake_writer_errors_total{kind="fenced"}`) and reads the lake again.
//! - Files close on size (`max_file_bytes`) or age (`max_file_age`), whichever comes first,
//!   and on shutdown: one file per table and date per unit, whatever the number of systems.
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
use octant_lake::lake::{self, FileSpec, Lake, TablePart};
use octant_lake::schema::{self, Table};
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
    /// The table whose version is the partition's progress ([`octant_lake::lake::home_table`]).
    home: &'static str,
    /// Last offset in every table (the home table's version; `None`: none yet).
    committed: Option<i64>,
    /// Every table's version of the partition as last read or committed: what a commit
    /// expects to find, and (above `committed`, after a crash between two tables' commits)
    /// the rows a table holds already.
    versions: HashMap<&'static str, Option<i64>>,
    /// (table, date) → rows.
    buffer: BTreeMap<(&'static str, String), Vec<Value>>,
    first: Option<i64>,
    last: i64,
    bytes: usize,
    /// When the unit's first record was read (`None`: nothing buffered).
    since: Option<Instant>,
    /// A write failed and the lake could not be read since (when it was last tried): what of
    /// the unit is in the lake is unknown, so nothing is written before the lake says (see
    /// [`LakeStage::settle`]).
    unsure: Option<Instant>,
    /// Tables written since the last background compaction, and when that was.
    written_to: std::collections::BTreeSet<&'static str>,
    compacted: Instant,
    /// When the last write failed (`None`: it succeeded): a full buffer is written again at
    /// most once per [`RETRY_EVERY`], not on every record read after it.
    failed: Option<Instant>,
}

/// How often a failing partition's full buffer is written again.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// While the lake refuses writes, a partition's buffer stops growing at this many times
/// `max_file_bytes`: reading the next record waits (up to [`FULL_WAIT`]) for a write to
/// succeed — backpressure on the consumer rather than a buffer that grows until the process
/// runs out of memory. Nothing read is lost: Kafka offsets move only with the lake.
const FULL_BUFFERS: usize = 4;

/// How long one record waits for a full buffer to be written (the loop then goes on, so
/// ticks, rebalances and shutdown are not held up longer than this; the buffer grows by one
/// record per wait at most).
const FULL_WAIT: Duration = Duration::from_secs(10);

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

    /// Every table's version of `topic`/`partition` in the lake, its newest log entries made
    /// durable first (what this writer goes on from must survive a power loss: an entry of a
    /// write that failed after its commit, or of a writer that crashed, may not be;
    /// [`Lake::sync_log`]).
    fn versions(&self, topic: &str, partition: i32) -> std::io::Result<HashMap<&'static str, Option<i64>>> {
        schema::TABLES
            .iter()
            .map(|t| {
                self.lake.sync_log(t.name)?;
                Ok((t.name, self.lake.committed(t.name, topic, partition)?))
            })
            .collect()
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
        let mut by_table: BTreeMap<&'static str, Vec<FileSpec>> = BTreeMap::new();
        let mut counts = Vec::new();
        for ((table, date), rows) in p.buffer.iter_mut() {
            // Sorted by system, then metric (where the table has one), then offset: Parquet
            // statistics then skip the row groups of other systems.
            let key = |r: &Value| {
                let s = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
                (s("system_id"), s("metric"), r.get("kafka_offset").and_then(Value::as_i64))
            };
            rows.sort_by_cached_key(key);
            let schema = self.schemas[table].clone();
            let batch = (|| {
                let mut d = ReaderBuilder::new(schema).with_batch_size(rows.len().max(1)).build_decoder()?;
                d.serialize(rows)?;
                d.flush()
            })();
            match batch {
                Ok(Some(batch)) => {
                    counts.push((*table, batch.num_rows()));
                    by_table.entry(table).or_default().push(FileSpec { date: date.clone(), batch });
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
        // The home table last, with or without files: its version is the partition's progress.
        let home_files = by_table.remove(p.home).unwrap_or_default();
        let mut parts: Vec<TablePart<'_>> = by_table
            .into_iter()
            .map(|(table, files)| TablePart { table, expected: p.versions.get(table).copied().flatten(), files })
            .collect();
        parts.push(TablePart { table: p.home, expected: p.versions.get(p.home).copied().flatten(), files: home_files });
        let tables: Vec<&'static str> = parts.iter().map(|t| t.table).collect();
        let result = tokio::task::block_in_place(|| self.lake.write_unit(&p.topic, p.partition, first, p.last, parts, &self.props));
        match result {
            Ok(paths) => {
                for (table, n) in counts {
                    self.metrics.records.with_label_values(&[table]).inc_by(n as u64);
                    self.metrics.files.with_label_values(&[table]).inc();
                }
                for t in tables {
                    p.versions.insert(t, Some(p.last));
                    p.written_to.insert(t);
                }
                self.metrics.flush_seconds.observe(started.elapsed().as_secs_f64());
                p.failed = None;
                tracing::debug!(topic = %p.topic, partition = p.partition, first, last = p.last, files = paths.len(), "unit written");
                self.written(p);
                true
            }
            Err(e) => {
                if let Some(f) = octant_lake::delta::is_fenced(&e) {
                    tracing::warn!(topic = %p.topic, partition = p.partition, table = %f.table, expected = ?f.expected, found = ?f.found,
                        "commit refused: another writer committed this partition since it was read (this one may have lost it); reading the lake again");
                    self.metrics.errors.with_label_values(&["fenced"]).inc();
                } else if octant_lake::delta::is_conflict(&e) {
                    tracing::info!(error = %e, topic = %p.topic, partition = p.partition, "an erasure or retention removed files while a unit was committed; written again at the next tick");
                    self.metrics.errors.with_label_values(&["conflict"]).inc();
                } else {
                    tracing::warn!(error = %e, topic = %p.topic, partition = p.partition, "writing a unit failed; retried at the next tick");
                    self.metrics.errors.with_label_values(&["io"]).inc();
                }
                p.failed = Some(Instant::now());
                self.settle(p);
                p.first.is_none()
            }
        }
    }

    /// Background compaction of the partition's own files in the tables it wrote to since
    /// the last one, reading at most four target sizes per table (the rest next time). A failure is counted and logged; nothing depends on it (the files stay
    /// as they are, and a compaction that did not commit left files no reader sees).
    fn compact(&self, p: &mut LakePartition) {
        let target = self.config.compact_target_bytes;
        for table in std::mem::take(&mut p.written_to) {
            let done = tokio::task::block_in_place(|| {
                self.lake.compact_within(table, Some((&p.topic, p.partition)), target, 4 * target, &self.props)
            });
            match done {
                Ok(d) if d.removed > 0 => {
                    self.metrics.compacted.with_label_values(&[table]).inc_by(d.removed as u64);
                    tracing::debug!(table, topic = %p.topic, partition = p.partition, removed = d.removed, added = d.added, "files compacted");
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, table, topic = %p.topic, partition = p.partition, "background compaction failed; tried again later");
                    self.metrics.errors.with_label_values(&["compact"]).inc();
                }
            }
        }
    }

    /// The buffer is in the lake: start the next unit.
    fn written(&self, p: &mut LakePartition) {
        p.committed = Some(p.last).max(p.committed);
        p.buffer.clear();
        p.first = None;
        p.since = None;
        p.bytes = 0;
        self.metrics.buffered.with_label_values(&[&p.topic]).set(0);
    }

    /// After a failed or refused write: reads every table's version of the partition again
    /// and drops the rows a table holds already — a unit can fail after some tables' commits,
    /// and another writer may have committed since. Written again, those rows would be in the
    /// table twice. Returns whether the rest may be written (false while the lake cannot be
    /// read: retried later).
    fn settle(&self, p: &mut LakePartition) -> bool {
        let versions = match self.versions(&p.topic, p.partition) {
            Err(e) => {
                tracing::warn!(error = %e, topic = %p.topic, partition = p.partition, "cannot read the lake after a failed write; nothing is written until it can be");
                self.metrics.errors.with_label_values(&["io"]).inc();
                p.unsure = Some(Instant::now());
                return false;
            }
            Ok(v) => v,
        };
        p.unsure = None;
        let home = versions.get(p.home).copied().flatten();
        p.versions = versions;
        p.committed = home.max(p.committed);
        let mut first = None;
        for ((table, _), rows) in p.buffer.iter_mut() {
            let held = p.versions.get(table).copied().flatten().max(p.committed);
            let before = rows.len();
            rows.retain(|r| r.get("kafka_offset").and_then(Value::as_i64).is_none_or(|o| held.is_none_or(|h| o > h)));
            let dropped = before - rows.len();
            if dropped > 0 {
                self.metrics.records.with_label_values(&[table]).inc_by(dropped as u64);
            }
            if let Some(h) = rows.iter().filter_map(|r| r.get("kafka_offset").and_then(Value::as_i64)).min() {
                first = Some(first.map_or(h, |f: i64| f.min(h)));
            }
        }
        p.buffer.retain(|_, rows| !rows.is_empty());
        tracing::info!(topic = %p.topic, partition = p.partition, in_lake = ?p.committed, "rows the lake holds already are not written again");
        if p.first.is_none() {
            return true;
        }
        if p.committed.is_some_and(|c| c >= p.last) {
            // The whole unit is in the lake.
            self.written(p);
        } else if p.buffer.is_empty() {
            // Nothing left to write, but the home table's version must still reach the unit's
            // last offset: an identifier-only commit.
            p.first = Some(p.committed.map_or(0, |c| c + 1));
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
        let versions = self
            .versions(&tp.topic, tp.partition)
            .with_context(|| format!("cannot read the lake state of {tp} in {}", self.lake.location()))?;
        let home = lake::home_table(&tp.topic);
        let committed = versions.get(home).copied().flatten();
        tracing::info!(topic = %tp.topic, partition = tp.partition, offset, ?committed, "partition opened: resuming after the last offset in the lake");
        if offset > committed.map_or(0, |c| c + 1) {
            // The group's offset is past the lake's end (moved by hand, or the lake was
            // replaced): the records between are read by no one.
            tracing::warn!(topic = %tp.topic, partition = tp.partition, offset, ?committed,
                "the consumer group resumes past the last offset in the lake: the records between are not in it (reset the group's offset to write them)");
            self.metrics.errors.with_label_values(&["gap"]).inc();
        }
        Ok(LakePartition {
            topic: tp.topic.clone(),
            partition: tp.partition,
            home,
            committed,
            versions,
            buffer: BTreeMap::new(),
            first: None,
            last: -1,
            bytes: 0,
            since: None,
            unsure: None,
            written_to: Default::default(),
            compacted: Instant::now(),
            failed: None,
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
        let system = table.system.and_then(|ptr| row.pointer(ptr)).and_then(Value::as_str).map(str::to_string);
        let date = date_of(row.pointer(table.time).and_then(Value::as_i64).unwrap_or(timestamp));
        // Tables that carry what agents and people wrote (dead letters and raw records are
        // redacted above); the others hold identifiers and numbers.
        if matches!(table.name, "trajectory_events" | "alerts") {
            self.redactor.value(&mut row);
        }
        if let Some(o) = row.as_object_mut() {
            o.insert("system_id".into(), system.map_or(Value::Null, Value::String));
            o.insert("kafka_topic".into(), Value::String(p.topic.clone()));
            o.insert("kafka_partition".into(), Value::from(p.partition));
            o.insert("kafka_offset".into(), Value::from(offset));
        }
        if p.first.is_none() {
            p.first = Some(offset);
            p.since = Some(m.read_at);
        }
        p.last = offset;
        if p.versions.get(table.name).copied().flatten().is_some_and(|v| offset <= v) {
            // The table holds it already (a crash between two tables' commits); the unit
            // still covers it, so the home table's version moves past it.
            self.metrics.skipped.with_label_values(&[&p.topic]).inc();
            return (Vec::new(), ());
        }
        p.bytes += payload.len() + 64;
        p.buffer.entry((table.name, date)).or_default().push(row);
        self.metrics.buffered.with_label_values(&[&p.topic]).inc();
        let full = |p: &LakePartition| p.bytes >= FULL_BUFFERS * self.config.max_file_bytes;
        if p.bytes >= self.config.max_file_bytes && (full(p) || p.failed.is_none_or(|t| t.elapsed() >= RETRY_EVERY)) {
            let waiting = Instant::now();
            let mut warned = false;
            while !self.flush(p) && full(p) && waiting.elapsed() < FULL_WAIT {
                if !std::mem::replace(&mut warned, true) {
                    tracing::warn!(topic = %p.topic, partition = p.partition, bytes = p.bytes, "the buffer is full and the lake refuses writes: reading waits");
                }
                std::thread::sleep(RETRY_EVERY);
            }
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
            let every = self.config.compact_every;
            if !every.is_zero() && ctx.now.saturating_duration_since(p.compacted) >= every {
                self.compact(p);
                p.compacted = ctx.now;
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

    /// A lake writer's stage on a fresh directory `name`, with its partition `topic`/0 opened.
    fn stage_on(name: &str, topic: &str) -> (std::path::PathBuf, LakeStage, LakePartition) {
        let dir = std::env::temp_dir().join(format!("octant-lake-writer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = LakeWriterConfig { lake: dir.clone(), ..Default::default() };
        let mut stage = LakeStage::new(&config, &Registry::new()).unwrap();
        let p = stage.open(&TopicPartition { topic: topic.into(), partition: 0 }, 0, None).unwrap();
        (dir, stage, p)
    }

    /// Reads `offsets` of `topic`/0: payloads that are no contract, so raw records.
    fn read(stage: &mut LakeStage, p: &mut LakePartition, topic: &str, offsets: std::ops::RangeInclusive<i64>) {
        for offset in offsets {
            let m = InMessage {
                topic,
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

    /// Another writer's unit `first..=last` of raw records of `topic`/0, committed to the
    /// raw-records table only (as a crash between two tables' commits leaves it, or a writer
    /// that took the partition over).
    fn committed_elsewhere(dir: &std::path::Path, topic: &str, expected: Option<i64>, first: i64, last: i64) {
        let lake = Lake::new(dir);
        let schema = schema::arrow_schema(schema::table("raw_records").unwrap());
        let rows: Vec<Value> = (first..=last)
            .map(|o| serde_json::json!({"kafka_topic": topic, "kafka_partition": 0, "kafka_offset": o, "payload": "00", "error": "x"}))
            .collect();
        let mut d = ReaderBuilder::new(schema).build_decoder().unwrap();
        d.serialize(&rows).unwrap();
        let batch = d.flush().unwrap().unwrap();
        let part = TablePart { table: "raw_records", expected, files: vec![FileSpec { date: "1970-01-01".into(), batch }] };
        lake.write_unit(topic, 0, first, last, vec![part], &lake::writer_properties()).unwrap();
    }

    /// The offsets of `topic` in the raw-records table, as its snapshot lists them.
    fn raw_offsets(dir: &std::path::Path) -> Vec<i64> {
        let lake = Lake::new(dir);
        let files = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(lake.tables.files("raw_records"))).unwrap();
        let mut out = Vec::new();
        for (path, _) in files {
            let file = std::fs::File::open(dir.join("raw_records").join(path)).unwrap();
            for b in parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap() {
                let b = b.unwrap();
                let col = b.column_by_name("kafka_offset").unwrap();
                out.extend(col.as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().values().iter().copied());
            }
        }
        out.sort();
        out
    }

    /// A unit refused because another writer committed the partition since it was read (this
    /// one lost it, or a write failed after its commit): the rows the table holds are dropped,
    /// the rest is written as the next commit, every offset once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_unit_is_not_written_twice() {
        let (dir, mut stage, mut p) = stage_on("fenced", "t");
        read(&mut stage, &mut p, "t", 0..=4);
        committed_elsewhere(&dir, "t", None, 0, 2);
        assert!(!stage.flush(&mut p), "refused: the lake is read again, the rest kept for the next flush");
        assert_eq!(stage.metrics.errors.with_label_values(&["fenced"]).get(), 1);
        assert_eq!((p.first, p.committed), (Some(3), Some(2)));
        assert!(stage.flush(&mut p));
        assert_eq!(raw_offsets(&dir), vec![0, 1, 2, 3, 4]);
        assert_eq!(stage.commit_point(&mut p, &PartitionOffsets::default()).map(|c| c.offset), Some(5));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A crash between two tables' commits: the raw-records table holds offsets 0..=2, the
    /// topic's home table (observations) nothing. The next owner resumes from the home table
    /// (offset 0), skips what raw records holds, writes the rest, and moves the home table's
    /// version on with an identifier-only commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crash_between_two_tables_leaves_each_offset_once() {
        let topic = "octant.observations";
        let dir = std::env::temp_dir().join(format!("octant-lake-writer-between-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        committed_elsewhere(&dir, topic, None, 0, 2);
        let config = LakeWriterConfig { lake: dir.clone(), ..Default::default() };
        let mut stage = LakeStage::new(&config, &Registry::new()).unwrap();
        let mut p = stage.open(&TopicPartition { topic: topic.into(), partition: 0 }, 0, None).unwrap();
        assert_eq!(stage.commit_point(&mut p, &PartitionOffsets::default()), None, "the home table has nothing yet");
        read(&mut stage, &mut p, topic, 0..=4);
        assert_eq!(stage.metrics.skipped.with_label_values(&[topic]).get(), 3);
        assert!(stage.flush(&mut p));
        assert_eq!(raw_offsets(&dir), vec![0, 1, 2, 3, 4]);
        assert_eq!(stage.lake.committed("observations", topic, 0).unwrap(), Some(4));
        assert_eq!(stage.commit_point(&mut p, &PartitionOffsets::default()).map(|c| c.offset), Some(5));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// While the lake refuses writes, a full buffer is written again once per [`RETRY_EVERY`],
    /// not for every record read after it (each try would leave a file behind); past
    /// [`FULL_BUFFERS`] buffers, reading waits for the lake, and goes on once a write succeeds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_lake_is_retried_once_a_second_and_holds_reading_back() {
        let (dir, mut stage, mut p) = stage_on("failing", "t");
        stage.config.max_file_bytes = 1_000;
        // The date directory of the raw-records table is a file: every write fails (also as root).
        let blocker = dir.join("raw_records").join("date=1970-01-01");
        std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
        std::fs::write(&blocker, b"not a directory").unwrap();
        let tries = |stage: &LakeStage| stage.metrics.errors.with_label_values(&["io"]).get();
        // 78 bytes a record: full at record 13, 50 records in well under a second.
        read(&mut stage, &mut p, "t", 0..=49);
        assert!((1..=2).contains(&tries(&stage)), "{} writes tried for 37 records past a full buffer", tries(&stage));
        assert_eq!(p.first, Some(0), "everything still buffered");
        // Four buffers full: the next record waits until the lake takes the unit.
        stage.config.max_file_bytes = 900;
        let mended = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2_500));
            std::fs::remove_file(&blocker).unwrap();
        });
        read(&mut stage, &mut p, "t", 50..=50);
        mended.join().unwrap();
        assert!(p.first.is_none(), "written while reading waited");
        assert_eq!(raw_offsets(&dir), (0..=50).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Background compaction merges the partition's own units; every offset stays once, and
    /// a unit written after it is written as usual.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn background_compaction_merges_the_partitions_units() {
        let (dir, mut stage, mut p) = stage_on("compact", "t");
        for unit in 0..4 {
            read(&mut stage, &mut p, "t", unit * 3..=unit * 3 + 2);
            assert!(stage.flush(&mut p));
        }
        let files = |dir: &std::path::Path| {
            let lake = Lake::new(dir);
            tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(lake.tables.files("raw_records"))).unwrap().len()
        };
        assert_eq!(files(&dir), 4);
        stage.compact(&mut p);
        assert_eq!(files(&dir), 1);
        assert_eq!(stage.metrics.compacted.with_label_values(&["raw_records"]).get(), 4);
        read(&mut stage, &mut p, "t", 12..=13);
        assert!(stage.flush(&mut p));
        assert_eq!(raw_offsets(&dir), (0..=13).collect::<Vec<_>>());
        assert_eq!(files(&dir), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
