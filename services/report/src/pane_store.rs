//! The pane-sum store: per system and hour, the mergeable state of every series
//! ([`octant_engine::panes::PaneSums`]) and what the evidence package needs of the rows behind
//! it (offsets, provenance, duplicates), so a profile reads its whole hours from here and only
//! the hours not stored yet (the period's partial first and last hours, the hours that are
//! not settled, hours that received late rows) from the observations.
//!
//! ## Layout
//! `<store>/<hour>/<system>.parquet` (hour: epoch ms of its start; system escaped like the
//! lake's partitions) holds one row per series; `<store>/<hour>/_complete.json` is written
//! last and names every system the hour holds and, per lake topic partition, the last offset
//! of the lake's observation files when the hour was built. An hour without its marker is
//! not stored (a profiler killed half-way leaves files that are rebuilt and replaced).
//!
//! ## Staleness
//! The lake's files are named by topic, partition and offsets, and never change. A lake file
//! that starts after the marker's offset for its partition is newer than the hour's sums: its
//! Parquet statistics (min and max event time) say whether it holds rows of that hour. If one
//! does (late data), the hour is rebuilt from the observations and stored again. So a profile
//! from stored sums always covers the same rows as one from the observations.
//!
//! Local lakes only: with an object-store lake there is no store (profiles read everything
//! from the observations, as before).

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int32Array, Int64Array, Int64Builder, ListArray, ListBuilder, RecordBatch, StringArray,
    StringBuilder, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Float64Type, Int32Type, Int64Type, Schema, UInt8Type};
use octant_contracts::Source;
use octant_core::catalogue::spec;
use octant_core::stats::bootstrap::{BootstrapSpec, ReplicateSums};
use octant_engine::panes::PaneSums;
use octant_engine::window::SeriesKey;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;
use serde::{Deserialize, Serialize};

/// Store format version (in every file's metadata and marker). 2 (issue 57): a linear state's
/// weightless units (an unwatched source's gated steps), so a profile from stored hours shows
/// confirmation gating N/A `unwatched` as one from observations does; hours stored in format 1
/// are refused and recomputed from the observations.
const FORMAT: u32 = 2;
pub const HOUR_MS: i64 = 3_600_000;

/// What a profile needs of the rows behind one (system, version, source) in one hour.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupMeta {
    pub version: String,
    pub source: String,
    /// (topic, partition) → (first offset, last offset, rows).
    pub offsets: Vec<(String, i32, i64, i64, u64)>,
    /// metric → provenance → accepted observations.
    pub provenance: BTreeMap<String, BTreeMap<String, u64>>,
    pub duplicates: u64,
}

/// One system's hour: its series' pane sums and its groups' row bookkeeping.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SystemHour {
    pub series: Vec<(SeriesKey, PaneSums)>,
    pub groups: Vec<GroupMeta>,
}

#[derive(Debug, Serialize, Deserialize)]
struct FileMeta {
    format: u32,
    /// What the sums were computed under ([`Store::new`]): a store of another catalogue,
    /// method or evaluation configuration is not read.
    fingerprint: String,
    groups: Vec<GroupMeta>,
}

/// The marker of a stored hour.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Marker {
    pub format: u32,
    pub fingerprint: String,
    pub systems: Vec<String>,
    /// "topic/partition" → the lake's committed offset (its commit marker) read before the
    /// hour's observations were: every lake file up to it was visible to that read.
    pub lake: BTreeMap<String, i64>,
}

/// A pane-sum store in a directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    boot: BootstrapSpec,
    fingerprint: String,
}

fn hour_dir(dir: &Path, hour: i64) -> PathBuf {
    dir.join(hour.to_string())
}

fn system_file(dir: &Path, hour: i64, system: &str) -> PathBuf {
    hour_dir(dir, hour).join(format!("{}.parquet", octant_lake::lake::escape(system)))
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

fn list_i64(values: impl IntoIterator<Item = Option<Vec<i64>>>) -> ArrayRef {
    let mut b = ListBuilder::new(Int64Builder::new());
    for v in values {
        match v {
            Some(v) => {
                b.values().append_slice(&v);
                b.append(true);
            }
            None => b.append(false),
        }
    }
    Arc::new(b.finish())
}

fn list_str(values: impl IntoIterator<Item = Vec<String>>) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for v in values {
        for s in v {
            b.values().append_value(s);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

/// Fixed-point sums as stored (i64); `None` when one does not fit (that hour is not stored).
fn narrow(v: &[i128]) -> Option<Vec<i64>> {
    v.iter().map(|x| i64::try_from(*x).ok()).collect()
}

fn schema() -> Arc<Schema> {
    let list = |t: DataType| DataType::List(Arc::new(Field::new("item", t, true)));
    Arc::new(Schema::new(vec![
        Field::new("system_version", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("benchmark", DataType::Utf8, true),
        Field::new("kind", DataType::UInt8, false),
        Field::new("units", DataType::Int64, false),
        Field::new("dims", DataType::Int32, false),
        Field::new("point", list(DataType::Int64), true),
        Field::new("reps", list(DataType::Int64), true),
        Field::new("clusters", list(DataType::Int64), true),
        Field::new("logs", list(DataType::Int64), true),
        Field::new("groups", list(DataType::Utf8), true),
        Field::new("task_names", list(DataType::Utf8), true),
        Field::new("task_counts", list(DataType::Int64), true),
        Field::new("declared_max", DataType::Float64, true),
        Field::new("declared_count", DataType::Int64, true),
        Field::new("weightless", DataType::Int64, false),
    ]))
}

/// The columns of a store file while it is built (one row per series).
#[derive(Default)]
struct Columns {
    version: Vec<String>,
    source: Vec<String>,
    metric: Vec<String>,
    bench: Vec<Option<String>>,
    kind: Vec<u8>,
    units: Vec<i64>,
    dims: Vec<i32>,
    point: Vec<Option<Vec<i64>>>,
    reps: Vec<Option<Vec<i64>>>,
    clusters: Vec<Option<Vec<i64>>>,
    logs: Vec<Option<Vec<i64>>>,
    groups: Vec<Vec<String>>,
    task_names: Vec<Vec<String>>,
    task_counts: Vec<Option<Vec<i64>>>,
    dmax: Vec<Option<f64>>,
    dcount: Vec<Option<i64>>,
    weightless: Vec<i64>,
}

impl Columns {
    /// A row for `k` with every state column empty (a linear state of kind 0 by default).
    fn blank(&mut self, k: &SeriesKey) {
        self.version.push(k.system_version.clone());
        self.source.push(k.source.as_str().to_string());
        self.metric.push(k.metric.to_string());
        self.bench.push(k.benchmark.clone());
        self.kind.push(0);
        self.units.push(0);
        self.dims.push(0);
        self.point.push(None);
        self.reps.push(None);
        self.clusters.push(None);
        self.logs.push(None);
        self.groups.push(Vec::new());
        self.task_names.push(Vec::new());
        self.task_counts.push(None);
        self.dmax.push(None);
        self.dcount.push(None);
        self.weightless.push(0);
    }
}

impl Store {
    /// A store for sums computed with `evaluation` (bootstrap, veto rules, budgets …) under
    /// this catalogue version and method: files written under anything else are not read.
    pub fn new(dir: impl Into<PathBuf>, evaluation: &octant_engine::EvaluationConfig) -> Store {
        let text = format!(
            "{}|{}|{}",
            octant_core::catalogue::CATALOGUE_VERSION,
            octant_core::stats::bootstrap::METHOD,
            serde_json::to_string(evaluation).unwrap_or_default()
        );
        // FNV-1a 64: stable across builds and platforms (std's hasher is not).
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
        Store { dir: dir.into(), boot: evaluation.bootstrap_spec(), fingerprint: format!("{FORMAT}-{hash:016x}") }
    }

    /// The marker of `hour` when the hour is stored with this store's bootstrap.
    pub fn marker(&self, hour: i64) -> Option<Marker> {
        let text = std::fs::read_to_string(hour_dir(&self.dir, hour).join("_complete.json")).ok()?;
        let m: Marker = serde_json::from_str(&text).ok()?;
        (m.format == FORMAT && m.fingerprint == self.fingerprint).then_some(m)
    }

    /// Writes `hour` (every system with data in it), then its marker. `None` in `systems`
    /// values: a system whose sums do not fit the stored width; then nothing is stored.
    pub fn write_hour(&self, hour: i64, systems: &BTreeMap<String, SystemHour>, lake: BTreeMap<String, i64>) -> io::Result<bool> {
        let dir = hour_dir(&self.dir, hour);
        // A previous version of the hour (stale): its marker goes first.
        let _ = std::fs::remove_file(dir.join("_complete.json"));
        std::fs::create_dir_all(&dir)?;
        for (system, h) in systems {
            let Some(batch) = self.batch(h) else { return Ok(false) };
            let meta = FileMeta { format: FORMAT, fingerprint: self.fingerprint.clone(), groups: h.groups.clone() };
            let kv = parquet::file::metadata::KeyValue::new("octant.pane_sums".into(), serde_json::to_string(&meta).map_err(invalid)?);
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
                .set_key_value_metadata(Some(vec![kv]))
                .build();
            let path = system_file(&self.dir, hour, system);
            let tmp = path.with_extension("parquet.tmp");
            let mut w = ArrowWriter::try_new(File::create(&tmp)?, batch.schema(), Some(props)).map_err(invalid)?;
            w.write(&batch).map_err(invalid)?;
            w.close().map_err(invalid)?;
            std::fs::rename(&tmp, &path)?;
        }
        let marker = Marker { format: FORMAT, fingerprint: self.fingerprint.clone(), systems: systems.keys().cloned().collect(), lake };
        let tmp = dir.join("_complete.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&marker).map_err(invalid)?)?;
        std::fs::rename(tmp, dir.join("_complete.json"))?;
        Ok(true)
    }

    fn batch(&self, h: &SystemHour) -> Option<RecordBatch> {
        let mut c = Columns::default();
        for (k, p) in &h.series {
            c.blank(k);
            let last = c.kind.len() - 1;
            match p {
                PaneSums::Linear { units, weightless, sums, clusters, logs, groups } => {
                    c.units[last] = *units as i64;
                    c.weightless[last] = *weightless as i64;
                    c.dims[last] = sums.dims() as i32;
                    c.point[last] = Some(narrow(sums.point())?);
                    c.reps[last] = Some(narrow(sums.reps())?);
                    c.clusters[last] = Some(clusters.iter().map(|x| *x as i64).collect());
                    c.logs[last] = match logs {
                        Some(l) => Some(narrow(l)?),
                        None => None,
                    };
                    c.groups[last] = groups.clone();
                }
                PaneSums::Tasks(t) => {
                    c.kind[last] = 1;
                    c.task_names[last] = t.keys().cloned().collect();
                    c.task_counts[last] = Some(t.values().flat_map(|(a, s)| [*a as i64, *s as i64]).collect());
                }
                PaneSums::Declared { max, count } => {
                    c.kind[last] = 2;
                    c.dmax[last] = Some(*max);
                    c.dcount[last] = Some(*count as i64);
                }
            }
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(c.version)),
            Arc::new(StringArray::from(c.source)),
            Arc::new(StringArray::from(c.metric)),
            Arc::new(StringArray::from(c.bench)),
            Arc::new(UInt8Array::from(c.kind)),
            Arc::new(Int64Array::from(c.units)),
            Arc::new(Int32Array::from(c.dims)),
            list_i64(c.point),
            list_i64(c.reps),
            list_i64(c.clusters),
            list_i64(c.logs),
            list_str(c.groups),
            list_str(c.task_names),
            list_i64(c.task_counts),
            Arc::new(Float64Array::from(c.dmax)),
            Arc::new(Int64Array::from(c.dcount)),
            Arc::new(Int64Array::from(c.weightless)),
        ];
        RecordBatch::try_new(schema(), columns).ok()
    }

    /// One system's stored hour (`None`: not stored, or unreadable: then it is rebuilt).
    pub fn read(&self, hour: i64, system: &str) -> Option<SystemHour> {
        let mut h = self
            .try_read(hour, system)
            .map_err(|e| tracing::warn!(hour, system, error = %e, "stored pane sums unreadable; rebuilt"))
            .ok()?;
        for (k, _) in &mut h.series {
            k.system_id = system.to_string();
        }
        Some(h)
    }

    fn try_read(&self, hour: i64, system: &str) -> io::Result<SystemHour> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(system_file(&self.dir, hour, system))?).map_err(invalid)?;
        let meta: FileMeta = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == "octant.pane_sums"))
            .and_then(|k| k.value.as_deref())
            .map(serde_json::from_str)
            .ok_or_else(|| invalid("no pane-sum metadata"))?
            .map_err(invalid)?;
        if (meta.format, &meta.fingerprint) != (FORMAT, &self.fingerprint) {
            return Err(invalid("stored under another format, catalogue, method or evaluation configuration"));
        }
        let mut out = SystemHour { series: Vec::new(), groups: meta.groups };
        for batch in builder.build().map_err(invalid)? {
            let b = batch.map_err(invalid)?;
            let s = |i: usize| b.column(i).as_string::<i32>().clone();
            let (version, source, metric, bench) = (s(0), s(1), s(2), s(3));
            let kind = b.column(4).as_primitive::<UInt8Type>();
            let units = b.column(5).as_primitive::<Int64Type>();
            let dims = b.column(6).as_primitive::<Int32Type>();
            let list = |i: usize| b.column(i).as_list::<i32>().clone();
            let (point, reps, clusters, logs, groups, task_names, task_counts) =
                (list(7), list(8), list(9), list(10), list(11), list(12), list(13));
            let dmax = b.column(14).as_primitive::<Float64Type>();
            let dcount = b.column(15).as_primitive::<Int64Type>();
            let weightless = b.column(16).as_primitive::<Int64Type>();
            let ints = |l: &ListArray, i: usize| -> Vec<i64> { l.value(i).as_primitive::<Int64Type>().values().to_vec() };
            let strs = |l: &ListArray, i: usize| -> Vec<String> {
                let v = l.value(i);
                let v = v.as_string::<i32>();
                (0..v.len()).map(|j| v.value(j).to_string()).collect()
            };
            for i in 0..b.num_rows() {
                let metric = spec(metric.value(i)).ok_or_else(|| invalid(format!("unknown metric {}", metric.value(i))))?.id;
                let key = SeriesKey {
                    system_id: String::new(),
                    system_version: version.value(i).to_string(),
                    source: if source.value(i) == Source::Evaluation.as_str() { Source::Evaluation } else { Source::Production },
                    metric,
                    benchmark: (!bench.is_null(i)).then(|| bench.value(i).to_string()),
                    slice: None,
                };
                let p = match kind.value(i) {
                    0 => {
                        let spec = spec(metric).expect("looked up above");
                        if octant_engine::window::linear_dims(spec) != Some(dims.value(i) as usize) {
                            return Err(invalid(format!("{metric}: stored width {} is not the series'", dims.value(i))));
                        }
                        let wide = |v: Vec<i64>| v.into_iter().map(i128::from).collect::<Vec<_>>();
                        let sums =
                            ReplicateSums::from_parts(&self.boot, dims.value(i) as usize, 0, wide(ints(&point, i)), wide(ints(&reps, i)))
                                .ok_or_else(|| invalid("replicate sums of the wrong size"))?;
                        let logs = if logs.is_null(i) {
                            None
                        } else {
                            Some(wide(ints(&logs, i)).try_into().map_err(|_| invalid("log factors of the wrong size"))?)
                        };
                        PaneSums::Linear {
                            units: units.value(i) as u64,
                            weightless: weightless.value(i) as u64,
                            sums,
                            clusters: ints(&clusters, i).into_iter().map(|x| x as u64).collect(),
                            logs,
                            groups: strs(&groups, i),
                        }
                    }
                    1 => {
                        let counts = ints(&task_counts, i);
                        PaneSums::Tasks(
                            strs(&task_names, i)
                                .into_iter()
                                .zip(counts.chunks_exact(2))
                                .map(|(t, c)| (t, (c[0] as u64, c[1] as u64)))
                                .collect(),
                        )
                    }
                    _ => PaneSums::Declared { max: dmax.value(i), count: dcount.value(i) as u64 },
                };
                out.series.push((key, p));
            }
        }
        Ok(out)
    }
}

/// Forgets stored hours so the next profile rebuilds them from the lake (an erasure: `octant
/// lake erase`): every hour that holds `system`'s sums, and the hours `hours` (epoch ms of
/// their starts). Returns how many hours were removed.
pub fn forget(dir: &Path, system: Option<&str>, hours: &std::collections::BTreeSet<i64>) -> io::Result<usize> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(0) };
    let mut removed = 0;
    for e in entries {
        let e = e?;
        let Some(hour) = e.file_name().to_str().and_then(|n| n.parse::<i64>().ok()) else { continue };
        if hours.contains(&hour) || system.is_some_and(|s| system_file(dir, hour, s).exists()) {
            std::fs::remove_dir_all(e.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Lake observation files: (topic, partition, first offset, path under the lake).
pub fn parse_lake_file(path: &str) -> Option<(String, i32, i64, i64)> {
    let (topic, partition, first, last) = octant_lake::lake::unit_of(path.rsplit('/').next()?)?;
    Some((topic.to_string(), partition, first, last))
}

/// The lake's committed offset per "topic/partition" of the observation files listed (read
/// from its commit markers; call before reading the observations the store will hold).
pub fn commit_marks(lake: &Path, storage: &octant_lake::StorageOptions, files: &[String]) -> io::Result<BTreeMap<String, i64>> {
    let lake = octant_lake::lake::Lake::open(&lake.to_string_lossy(), storage)?;
    let mut out = BTreeMap::new();
    let partitions: std::collections::BTreeSet<(String, i32)> =
        files.iter().filter_map(|f| parse_lake_file(f)).map(|(t, p, _, _)| (t, p)).collect();
    for (topic, partition) in partitions {
        if let Some(o) = lake.committed("observations", &topic, partition)? {
            out.insert(format!("{topic}/{partition}"), o);
        }
    }
    Ok(out)
}

/// Whether a lake file the hour's sums may not include — one ending after the committed
/// offset recorded in `marker` (written later, or published but not yet committed when the
/// hour was read) — holds rows with event times in `hour` (by its Parquet statistics; a file
/// without them counts as overlapping).
pub fn stale(lake: &Path, files: &[String], marker: &Marker, hour: i64) -> bool {
    files.iter().any(|f| {
        let Some((topic, partition, _, last)) = parse_lake_file(f) else { return false };
        if marker.lake.get(&format!("{topic}/{partition}")).is_some_and(|m| last <= *m) {
            return false;
        }
        match event_time_range(&lake.join(f)) {
            Some((lo, hi)) => lo < hour + HOUR_MS && hi >= hour,
            None => true,
        }
    })
}

/// (min, max) event time of a lake file by its Parquet statistics.
fn event_time_range(path: &Path) -> Option<(i64, i64)> {
    let reader = SerializedFileReader::new(File::open(path).ok()?).ok()?;
    let meta = reader.metadata();
    let idx = meta.file_metadata().schema_descr().columns().iter().position(|c| c.name() == "event_time")?;
    let mut range: Option<(i64, i64)> = None;
    for rg in meta.row_groups() {
        let Some(Statistics::Int64(s)) = rg.column(idx).statistics() else { return None };
        let (lo, hi) = (*s.min_opt()?, *s.max_opt()?);
        range = Some(range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
    }
    range
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lake_file_names_parse() {
        assert_eq!(
            parse_lake_file(
                "observations/system_id=a/date=2025-11-30/t1-octant.observations-3-00000000000000000012-00000000000000000040.parquet"
            ),
            Some(("t1-octant.observations".to_string(), 3, 12, 40))
        );
        assert_eq!(parse_lake_file("observations/x/_marker.json"), None);
    }

    /// A lake file written after an hour was stored makes it stale only when it holds rows of
    /// that hour (late data), by its Parquet statistics.
    #[test]
    fn late_rows_make_a_stored_hour_stale() {
        use arrow::array::TimestampMillisecondArray;
        use arrow::datatypes::TimeUnit;
        let lake = std::env::temp_dir().join(format!("octant-pane-stale-{}", std::process::id()));
        let dir = lake.join("observations/system_id=a/date=2025-11-30");
        std::fs::create_dir_all(&dir).unwrap();
        let h = 1_764_489_600_000i64;
        let write = |name: &str, times: &[i64]| {
            let schema = Arc::new(Schema::new(vec![Field::new(
                "event_time",
                DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())),
                false,
            )]));
            let col = TimestampMillisecondArray::from(times.to_vec()).with_timezone("+00:00");
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(col)]).unwrap();
            let mut w = ArrowWriter::try_new(File::create(dir.join(name)).unwrap(), schema, None).unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
            format!("observations/system_id=a/date=2025-11-30/{name}")
        };
        let old = write(&format!("t-obs-0-{:020}-{:020}.parquet", 0, 10), &[h + 10, h + 20]);
        let marker = Marker {
            format: FORMAT,
            fingerprint: String::new(),
            systems: vec![],
            lake: [("t-obs/0".to_string(), 10)].into_iter().collect(),
        };
        assert!(!stale(&lake, std::slice::from_ref(&old), &marker, h), "the files it was built from");
        // A unit that was published but not committed when the hour was read (its files may
        // have been partly visible, or rewritten after a crash): checked like a new one.
        let straddling = write(&format!("t-obs-0-{:020}-{:020}.parquet", 5, 15), &[h + 30]);
        assert!(stale(&lake, &[old.clone(), straddling.clone()], &marker, h), "a file ending after the commit mark");
        std::fs::remove_file(lake.join(&straddling)).unwrap();
        let next_hour = write(&format!("t-obs-0-{:020}-{:020}.parquet", 11, 20), &[h + HOUR_MS + 5, h + 2 * HOUR_MS]);
        assert!(!stale(&lake, &[old.clone(), next_hour.clone()], &marker, h), "new rows of later hours only");
        let late = write(&format!("t-obs-0-{:020}-{:020}.parquet", 21, 22), &[h + HOUR_MS + 9, h + 59 * 60_000]);
        assert!(stale(&lake, &[old, next_hour, late], &marker, h), "a late row of the hour");
        let _ = std::fs::remove_dir_all(&lake);
    }

    /// An erasure forgets the hours that hold the system's sums, and the hours named.
    #[test]
    fn forgotten_hours_are_rebuilt_later() {
        let dir = std::env::temp_dir().join(format!("octant-pane-forget-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (hour, system) in [(0, "a/b"), (HOUR_MS, "c"), (2 * HOUR_MS, "c"), (3 * HOUR_MS, "a/b")] {
            std::fs::create_dir_all(hour_dir(&dir, hour)).unwrap();
            std::fs::write(system_file(&dir, hour, system), b"").unwrap();
            std::fs::write(hour_dir(&dir, hour).join("_complete.json"), b"{}").unwrap();
        }
        assert_eq!(forget(&dir, Some("a/b"), &[2 * HOUR_MS].into()).unwrap(), 3);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().into_string().unwrap()).collect();
        assert_eq!(left, vec![HOUR_MS.to_string()]);
        assert_eq!(forget(&dir.join("none"), None, &Default::default()).unwrap(), 0, "no store: nothing to forget");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
