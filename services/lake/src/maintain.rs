//! Keeping the lake small and answerable: compaction (Delta's OPTIMIZE), retention, VACUUM,
//! checkpoints, and erasure (a data-protection request).
//!
//! delta-rs's own OPTIMIZE and DELETE need its DataFusion integration, which Octant leaves out
//! (it would build a second DataFusion configuration: BENCHMARKS.md, "The lake as Delta
//! tables"); both are small on Octant's layout, so they are written here over the same log
//! actions: a commit that removes files and adds their replacement.
//!
//! ## Compaction
//! Per table, date and input partition (the topic and partition in a unit's file name), runs
//! of consecutive files below `target_bytes` are merged into one file of at most that size,
//! sorted by system, metric and offset like the writer's, with their statistics and bloom
//! filters, named as a unit covering the merged offsets (so the pane-sum store's staleness
//! check, which reads offsets from names, still holds). The commit removes the old files with
//! `dataChange: false` (readers of the change feed see no change) and carries
//! [`crate::delta::rewrite_id`] of every partition it touched: two compactions (or a
//! compaction and an erasure) of the same partition's files never both land. A unit's files
//! stay one per table and date, so after compaction a table holds about one file per input
//! partition and date (plus one per `target_bytes`), whatever the size of the fleet.
//!
//! ## Retention and VACUUM
//! [`Lake::expire`] removes whole dates older than a table's retention (a commit, no
//! rewriting). Removed files stay on the store until [`Lake::vacuum`] deletes those removed at
//! least its retention ago (7 days by default, Delta's `deletedFileRetentionDuration`: a
//! reader of an older version, or a query in flight, still finds them) and files of
//! interrupted units no commit lists.
//!
//! ## Erasure
//! [`Lake::erase`] removes every row of one system or one run from every table that has the
//! column: each file holding such rows is replaced by one without them, in one commit per
//! table (`DELETE`, the predicate and who asked in its `commitInfo`), then the removed files —
//! and every file removed earlier, which older versions still list and may hold the rows — are
//! deleted at once, with files of interrupted units older than `orphan_age`. The erasure is
//! recorded in the `erasures` table: who, when, the predicate and counts, never the values.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::compute::{SortColumn, concat_batches, filter_record_batch, lexsort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use serde::Serialize;

use crate::delta::{Change, Rewrite, TableFile, is_conflict};
use crate::lake::Lake;
use crate::layout::{escape, file_name, new_tag, unit_of};
use crate::store::block_on;

/// Compacted files are at most this big (and files this big are left alone).
pub const TARGET_FILE_BYTES: i64 = 64 << 20;

/// How often a rewrite is tried again from a fresh snapshot after a concurrent rewrite of the
/// same partition's files refused it.
const REWRITE_ATTEMPTS: usize = 5;

/// The table that records erasures.
pub const ERASURES: &str = "erasures";

/// What a compaction, retention or erasure did to one table.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Rewritten {
    /// Files the commit removed.
    pub removed: usize,
    /// Files it added.
    pub added: usize,
    /// Rows of the files added (compaction) or removed (erasure).
    pub rows: usize,
}

/// Whose rows an erasure removes.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    System(String),
    Run(String),
}

impl Subject {
    fn column(&self) -> &'static str {
        match self {
            Subject::System(_) => "system_id",
            Subject::Run(_) => "run_id",
        }
    }

    fn value(&self) -> &str {
        match self {
            Subject::System(v) | Subject::Run(v) => v,
        }
    }

    /// The predicate as SQL (what the commit and the erasure record say).
    pub fn predicate(&self) -> String {
        format!("{} = '{}'", self.column(), self.value().replace('\'', "''"))
    }
}

/// What an erasure did.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Erased {
    /// Per table with rows of the subject: files replaced, rows removed.
    pub tables: BTreeMap<String, Rewritten>,
    /// Start (epoch ms) of every hour of the removed observations' event times: the pane sums
    /// of those hours included them.
    pub hours: BTreeSet<i64>,
    /// Files deleted from the store (replaced now, removed earlier, or orphaned).
    pub deleted: usize,
}

/// A unit's file: its first and last offsets, and the file.
type Unit = (i64, i64, TableFile);

fn unit_of_path(path: &str) -> Option<(String, i32, i64, i64)> {
    unit_of(path.rsplit('/').next()?).map(|(t, p, f, l)| (t.to_string(), p, f, l))
}

/// Consecutive runs of files below `target` (by offset), packed into bins of at most
/// `target` bytes; bins of one file are left alone.
fn bins(mut files: Vec<Unit>, target: i64) -> Vec<Vec<Unit>> {
    files.sort_by_key(|(first, last, _)| (*first, *last));
    let (mut out, mut bin, mut bytes) = (Vec::new(), Vec::new(), 0);
    let close = |bin: &mut Vec<_>, out: &mut Vec<Vec<_>>| {
        if bin.len() >= 2 {
            out.push(std::mem::take(bin));
        }
        bin.clear();
    };
    for f in files {
        if f.2.size >= target {
            close(&mut bin, &mut out);
            bytes = 0;
            continue;
        }
        if bytes + f.2.size > target {
            close(&mut bin, &mut out);
            bytes = 0;
        }
        bytes += f.2.size;
        bin.push(f);
    }
    close(&mut bin, &mut out);
    out
}

/// `batch` sorted as the writer sorts a unit: system, metric (where the table has one), offset.
fn sorted(batch: &RecordBatch) -> io::Result<RecordBatch> {
    let columns: Vec<SortColumn> = ["system_id", "metric", "kafka_topic", "kafka_partition", "kafka_offset"]
        .iter()
        .filter_map(|c| batch.column_by_name(c))
        .map(|c| SortColumn { values: c.clone(), options: None })
        .collect();
    if columns.is_empty() {
        return Ok(batch.clone());
    }
    let order = lexsort_to_indices(&columns, None).map_err(io::Error::other)?;
    take_record_batch(batch, &order).map_err(io::Error::other)
}

fn concat(batches: &[RecordBatch]) -> io::Result<Option<RecordBatch>> {
    let Some(first) = batches.first() else { return Ok(None) };
    concat_batches(&first.schema(), batches).map(Some).map_err(io::Error::other)
}

/// The erasure record's columns.
pub fn erasures_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("erased_at", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false),
        Field::new("erased_by", DataType::Utf8, false),
        Field::new("reason", DataType::Utf8, true),
        Field::new("predicate", DataType::Utf8, false),
        Field::new("tables", DataType::Utf8, false),
        Field::new("rows", DataType::Int64, false),
        Field::new("files_deleted", DataType::Int64, false),
        Field::new("system_id", DataType::Utf8, true),
    ]))
}

impl Lake {
    /// The rows of one file of `table` (`path` under the table).
    async fn read_file(&self, table: &str, path: &str) -> io::Result<Vec<RecordBatch>> {
        let location = path.split('/').fold(self.tables.table_path(table), |acc, part| acc.join(part));
        let bytes = object_store::ObjectStoreExt::get(self.object.store.as_ref(), &location)
            .await
            .map_err(io::Error::other)?
            .bytes()
            .await
            .map_err(io::Error::other)?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(io::Error::other)?.build().map_err(io::Error::other)?;
        reader.collect::<Result<Vec<_>, _>>().map_err(io::Error::other)
    }

    /// Compacts `table` (module docs): every input partition's files, or only those of
    /// `only` (topic, partition) — what one lake writer owns.
    pub fn compact(&self, table: &str, only: Option<(&str, i32)>, target_bytes: i64, props: &WriterProperties) -> io::Result<Rewritten> {
        self.compact_within(table, only, target_bytes, i64::MAX, props)
    }

    /// [`Lake::compact`], stopping after the bin that brings the files read to `budget_bytes`
    /// (the lake writer's background compaction: bounded work per tick, so a backlog of
    /// small files never keeps it from its consumer; the rest is compacted next time).
    pub fn compact_within(
        &self,
        table: &str,
        only: Option<(&str, i32)>,
        target_bytes: i64,
        budget_bytes: i64,
        props: &WriterProperties,
    ) -> io::Result<Rewritten> {
        let only = only.map(|(t, p)| (escape(t), p));
        block_on(async {
            let mut attempt = 1;
            loop {
                match self.compact_once(table, only.as_ref(), target_bytes, budget_bytes, props).await {
                    Err(e) if is_conflict(&e) && attempt < REWRITE_ATTEMPTS => attempt += 1,
                    done => return done,
                }
            }
        })
    }

    async fn compact_once(
        &self,
        table: &str,
        only: Option<&(String, i32)>,
        target_bytes: i64,
        budget_bytes: i64,
        props: &WriterProperties,
    ) -> io::Result<Rewritten> {
        let Some((snapshot, files)) = self.tables.snapshot_files(table).await? else { return Ok(Rewritten::default()) };
        // (date, topic, partition) → (first, last, file).
        let mut groups: BTreeMap<(String, String, i32), Vec<Unit>> = BTreeMap::new();
        for f in files {
            let Some((topic, partition, first, last)) = unit_of_path(&f.path) else { continue };
            if only.is_some_and(|(t, p)| *t != topic || *p != partition) {
                continue;
            }
            groups.entry((f.date.clone(), topic, partition)).or_default().push((first, last, f));
        }
        let (mut removes, mut adds, mut partitions, mut done) = (Vec::new(), Vec::new(), BTreeSet::new(), Rewritten::default());
        let mut read = 0i64;
        for ((date, topic, partition), files) in groups {
            for bin in bins(files, target_bytes) {
                if read >= budget_bytes {
                    break;
                }
                read += bin.iter().map(|b| b.2.size).sum::<i64>();
                let mut batches = Vec::new();
                for (_, _, f) in &bin {
                    batches.extend(self.read_file(table, &f.path).await?);
                }
                let merged = match concat(&batches) {
                    Ok(Some(b)) => sorted(&b)?,
                    Ok(None) => continue,
                    Err(e) => {
                        // Files of two schema versions: left as they are.
                        tracing::warn!(error = %e, table, date, "files of different schemas are not compacted together");
                        continue;
                    }
                };
                let first = bin.first().map_or(0, |b| b.0);
                let last = bin.iter().map(|b| b.1).max().unwrap_or(first);
                let name = file_name(&topic, partition, first, last, &new_tag());
                let (file, _) = self.put_file(table, &date, &name, &merged, props).await?;
                done.removed += bin.len();
                done.added += 1;
                done.rows += merged.num_rows();
                partitions.insert((topic.clone(), partition));
                removes.extend(bin.into_iter().map(|b| b.2));
                adds.push(file);
            }
        }
        if adds.is_empty() {
            return Ok(done);
        }
        let change = Change { removes, adds, partitions, what: Rewrite::Compact { target_bytes }, metadata: Vec::new() };
        let version = self.tables.rewrite(table, &snapshot, change).await?;
        self.sync_commit(table, version)?;
        Ok(done)
    }

    /// Removes `table`'s dates before `before` (`YYYY-MM-DD`) in one commit (the files stay
    /// until [`Lake::vacuum`]).
    pub fn expire(&self, table: &str, before: &str) -> io::Result<Rewritten> {
        block_on(async {
            let mut attempt = 1;
            loop {
                let once = async {
                    let Some((read, files)) = self.tables.snapshot_files(table).await? else { return Ok(Rewritten::default()) };
                    let old: Vec<TableFile> = files.into_iter().filter(|f| f.date.as_str() < before).collect();
                    if old.is_empty() {
                        return Ok(Rewritten::default());
                    }
                    let partitions = old.iter().filter_map(|f| unit_of_path(&f.path)).map(|(t, p, _, _)| (t, p)).collect();
                    let done = Rewritten { removed: old.len(), ..Default::default() };
                    let what = Rewrite::Delete { predicate: format!("date < '{before}'") };
                    let change = Change { removes: old, adds: Vec::new(), partitions, what, metadata: Vec::new() };
                    let version = self.tables.rewrite(table, &read, change).await?;
                    self.sync_commit(table, version)?;
                    Ok(done)
                };
                match once.await {
                    Err(e) if is_conflict(&e) && attempt < REWRITE_ATTEMPTS => attempt += 1,
                    done => return done,
                }
            }
        })
    }

    /// Deletes the files `table`'s log removed at least `retention` ago, and (`orphans`) files
    /// no commit lists last written at least `retention` ago; returns how many.
    pub fn vacuum(&self, table: &str, retention: Duration, orphans: bool) -> io::Result<usize> {
        block_on(self.tables.vacuum(table, retention, orphans)).map(|d| d.len())
    }

    /// Writes a checkpoint of `table` at its newest version.
    pub fn checkpoint(&self, table: &str) -> io::Result<()> {
        block_on(self.tables.checkpoint(table))
    }

    /// Erases `subject` from every table (module docs) and records it; `by` and `reason` go
    /// into the commits and the record.
    pub fn erase(&self, subject: &Subject, by: &str, reason: &str, orphan_age: Duration, props: &WriterProperties) -> io::Result<Erased> {
        block_on(async {
            let mut out = Erased::default();
            let mut touched = Vec::new();
            for t in crate::schema::TABLES {
                if crate::schema::arrow_schema(t).field_with_name(subject.column()).is_err() {
                    continue;
                }
                touched.push(t.name);
                let mut attempt = 1;
                let (done, hours) = loop {
                    match self.erase_table(t.name, subject, by, reason, props).await {
                        Err(e) if is_conflict(&e) && attempt < REWRITE_ATTEMPTS => attempt += 1,
                        done => break done?,
                    }
                };
                out.hours.extend(hours);
                if done.removed > 0 {
                    out.tables.insert(t.name.to_string(), done);
                }
            }
            // Every removed file goes now, not only this erasure's: files compaction or an
            // earlier rewrite removed may hold the rows too (older versions list them).
            for table in touched {
                out.deleted += self.tables.vacuum(table, Duration::ZERO, false).await?.len();
                out.deleted += self.tables.vacuum(table, orphan_age, true).await?.len();
            }
            self.record_erasure(subject, by, reason, &out).await?;
            Ok(out)
        })
    }

    async fn erase_table(
        &self,
        table: &str,
        subject: &Subject,
        by: &str,
        reason: &str,
        props: &WriterProperties,
    ) -> io::Result<(Rewritten, BTreeSet<i64>)> {
        let Some((read, files)) = self.tables.snapshot_files(table).await? else { return Ok(Default::default()) };
        let (column, value) = (subject.column(), subject.value());
        let (mut removes, mut adds, mut partitions, mut done, mut hours) =
            (Vec::new(), Vec::new(), BTreeSet::new(), Rewritten::default(), BTreeSet::new());
        for f in files {
            if matches!(subject, Subject::System(_)) && !may_hold_system(f.stats.as_ref(), value) {
                continue;
            }
            let mut kept = Vec::new();
            let mut matched = 0;
            for b in self.read_file(table, &f.path).await? {
                let Some(c) = b.column_by_name(column).and_then(|c| c.as_string_opt::<i32>()) else {
                    kept.push(b);
                    continue;
                };
                let hit: BooleanArray = c.iter().map(|v| Some(v == Some(value))).collect();
                if hit.true_count() == 0 {
                    kept.push(b);
                    continue;
                }
                matched += hit.true_count();
                if let Some(t) = filter_record_batch(&b, &hit).map_err(io::Error::other)?.column_by_name("event_time") {
                    let t = arrow::compute::cast(t, &DataType::Int64).map_err(io::Error::other)?;
                    hours.extend(
                        t.as_primitive::<arrow::datatypes::Int64Type>().iter().flatten().map(|ms| ms.div_euclid(3_600_000) * 3_600_000),
                    );
                }
                let rest = filter_record_batch(&b, &arrow::compute::not(&hit).map_err(io::Error::other)?).map_err(io::Error::other)?;
                if rest.num_rows() > 0 {
                    kept.push(rest);
                }
            }
            if matched == 0 {
                continue;
            }
            done.removed += 1;
            done.rows += matched;
            let name = match unit_of_path(&f.path) {
                Some((topic, partition, first, last)) => {
                    partitions.insert((topic.clone(), partition));
                    file_name(&topic, partition, first, last, &new_tag())
                }
                None => format!("erased-{}.parquet", new_tag()),
            };
            if let Some(rest) = concat(&kept)? {
                adds.push(self.put_file(table, &f.date, &name, &rest, props).await?.0);
                done.added += 1;
            }
            removes.push(f);
        }
        if removes.is_empty() {
            return Ok((done, BTreeSet::new()));
        }
        let metadata = vec![("octantErasure".to_string(), serde_json::json!({ "by": by, "reason": reason }))];
        let what = Rewrite::Delete { predicate: subject.predicate() };
        let version = self.tables.rewrite(table, &read, Change { removes, adds, partitions, what, metadata }).await?;
        self.sync_commit(table, version)?;
        Ok((done, if table == "observations" { hours } else { BTreeSet::new() }))
    }

    async fn record_erasure(&self, subject: &Subject, by: &str, reason: &str, done: &Erased) -> io::Result<()> {
        use arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let schema = erasures_schema();
        let tables = serde_json::to_string(&done.tables).map_err(io::Error::other)?;
        let rows: usize = done.tables.values().map(|t| t.rows).sum();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(TimestampMillisecondArray::from(vec![now]).with_timezone("UTC")),
                Arc::new(StringArray::from(vec![by])),
                Arc::new(StringArray::from(vec![(!reason.is_empty()).then_some(reason)])),
                Arc::new(StringArray::from(vec![subject.predicate()])),
                Arc::new(StringArray::from(vec![tables])),
                Arc::new(Int64Array::from(vec![rows as i64])),
                Arc::new(Int64Array::from(vec![done.deleted as i64])),
                Arc::new(StringArray::from(vec![None::<&str>])),
            ],
        )
        .map_err(io::Error::other)?;
        let date = crate::date_of(now);
        let name = format!("erasure-{now}.{}.parquet", new_tag());
        let (file, _) = self.put_file(ERASURES, &date, &name, &batch, &crate::layout::writer_properties()).await?;
        let version = self.tables.append_plain(ERASURES, &schema, vec![file]).await?;
        self.sync_commit(ERASURES, version)
    }
}

/// Whether a file with these log statistics may hold rows of `system` (no statistics: yes).
fn may_hold_system(stats: Option<&serde_json::Value>, system: &str) -> bool {
    let Some(s) = stats else { return true };
    let min = s.pointer("/minValues/system_id").and_then(|v| v.as_str());
    let max = s.pointer("/maxValues/system_id").and_then(|v| v.as_str());
    match (min, max) {
        (Some(lo), Some(hi)) => lo <= system && system <= hi,
        // Every row null (no system): none of it; otherwise unknown.
        _ => s.pointer("/nullCount/system_id") != s.pointer("/numRecords"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lake::{FileSpec, writer_properties};
    use arrow::array::{Int64Array, StringArray};

    fn file(size: i64) -> TableFile {
        TableFile { path: String::new(), date: String::new(), size, stats: None }
    }

    #[test]
    fn small_consecutive_files_are_binned_up_to_the_target() {
        let files =
            vec![(0, 9, file(40)), (10, 19, file(40)), (20, 29, file(40)), (30, 39, file(200)), (40, 49, file(10)), (50, 59, file(10))];
        let got: Vec<Vec<i64>> = bins(files, 100).into_iter().map(|b| b.iter().map(|f| f.0).collect()).collect();
        // 0+10 fill a bin (20 would pass 100), 20 alone stays, 30 is big, 40+50 merge.
        assert_eq!(got, vec![vec![0, 10], vec![40, 50]]);
    }

    #[test]
    fn statistics_say_which_files_may_hold_a_system() {
        let s = serde_json::json!({"numRecords": 3, "minValues": {"system_id": "b"}, "maxValues": {"system_id": "d"}, "nullCount": {"system_id": 0}});
        assert!(may_hold_system(Some(&s), "c") && !may_hold_system(Some(&s), "a") && !may_hold_system(Some(&s), "e"));
        let nulls = serde_json::json!({"numRecords": 3, "minValues": {}, "maxValues": {}, "nullCount": {"system_id": 3}});
        assert!(!may_hold_system(Some(&nulls), "c"));
        assert!(may_hold_system(None, "c"));
        assert_eq!(Subject::Run("it's".into()).predicate(), "run_id = 'it''s'");
    }

    fn rows(offsets: std::ops::Range<i64>, system: impl Fn(i64) -> String, run: impl Fn(i64) -> String) -> RecordBatch {
        let o: Vec<i64> = offsets.collect();
        RecordBatch::try_from_iter([
            ("kafka_offset", Arc::new(Int64Array::from(o.clone())) as _),
            ("system_id", Arc::new(StringArray::from(o.iter().map(|&i| system(i)).collect::<Vec<_>>())) as _),
            ("run_id", Arc::new(StringArray::from(o.iter().map(|&i| run(i)).collect::<Vec<_>>())) as _),
        ])
        .unwrap()
    }

    fn offsets(lake: &Lake, table: &str) -> Vec<i64> {
        let (_, files) = block_on(lake.tables.snapshot_files(table)).unwrap().unwrap();
        let mut out: Vec<i64> = files
            .iter()
            .flat_map(|f| block_on(lake.read_file(table, &f.path)).unwrap())
            .flat_map(|b| b.column_by_name("kafka_offset").unwrap().as_primitive::<arrow::datatypes::Int64Type>().values().to_vec())
            .collect();
        out.sort();
        out
    }

    /// Ten units of one partition become one file with the same rows; a second compaction
    /// from the same snapshot is refused rather than adding the rows again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compaction_keeps_every_row_once_in_fewer_files() {
        let root = std::env::temp_dir().join(format!("octant-lake-compact-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let lake = Lake::new(&root);
        let props = writer_properties();
        for u in 0..10 {
            let batch = rows(u * 10..u * 10 + 10, |i| format!("sys-{}", i % 3), |i| format!("run-{}", i / 5));
            lake.append("octant.obs", 0, u * 10, u * 10 + 9, vec![("home", FileSpec { date: "2026-12-05".into(), batch })], &props)
                .unwrap();
        }
        let (before, files) = block_on(lake.tables.snapshot_files("home")).unwrap().unwrap();
        assert_eq!(files.len(), 10);
        let done = lake.compact("home", Some(("octant.obs", 0)), TARGET_FILE_BYTES, &props).unwrap();
        assert_eq!(done, Rewritten { removed: 10, added: 1, rows: 100 });
        assert_eq!(offsets(&lake, "home"), (0..100).collect::<Vec<_>>());
        let (_, after) = block_on(lake.tables.snapshot_files("home")).unwrap().unwrap();
        assert_eq!(after.len(), 1);
        assert_eq!(unit_of_path(&after[0].path).map(|u| (u.2, u.3)), Some((0, 99)), "named as the unit of every merged offset");
        // The writer's version of its partition is untouched.
        assert_eq!(lake.committed("home", "octant.obs", 0).unwrap(), Some(99));
        // A stale compactor (read before the first compaction landed) cannot add them again.
        let partitions = BTreeSet::from([("octant.obs".to_string(), 0)]);
        let change =
            Change { removes: files, adds: Vec::new(), partitions, what: Rewrite::Compact { target_bytes: 1 }, metadata: Vec::new() };
        let stale = block_on(lake.tables.rewrite("home", &before, change)).unwrap_err();
        assert!(is_conflict(&stale), "{stale}");
        // Nothing left to merge.
        assert_eq!(lake.compact("home", None, TARGET_FILE_BYTES, &props).unwrap(), Rewritten::default());
        // The removed files go at vacuum; none of them is listed any more.
        assert_eq!(lake.vacuum("home", Duration::ZERO, false).unwrap(), 10);
        assert_eq!(offsets(&lake, "home"), (0..100).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The writer's bounded compaction: one bin past the budget, the rest at the next call.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compaction_within_a_budget_leaves_the_rest_for_later() {
        let root = std::env::temp_dir().join(format!("octant-lake-budget-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let lake = Lake::new(&root);
        let props = writer_properties();
        for u in 0..6 {
            let batch = rows(u * 10..u * 10 + 10, |_| "sys".into(), |i| format!("run-{i}"));
            let date = if u < 3 { "2026-12-04" } else { "2026-12-05" };
            lake.append("octant.obs", 0, u * 10, u * 10 + 9, vec![("home", FileSpec { date: date.into(), batch })], &props).unwrap();
        }
        let count = || block_on(lake.tables.files("home")).unwrap().len();
        assert_eq!(lake.compact_within("home", None, TARGET_FILE_BYTES, 1, &props).unwrap(), Rewritten { removed: 3, added: 1, rows: 30 });
        assert_eq!(count(), 4);
        assert_eq!(lake.compact_within("home", None, TARGET_FILE_BYTES, 1, &props).unwrap().removed, 3);
        assert_eq!(count(), 2);
        assert_eq!(offsets(&lake, "home"), (0..60).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A run's rows leave every file that held them; the others stay, once; the erasure is
    /// recorded with its predicate and counts.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn erasure_removes_a_run_and_records_it() {
        let root = std::env::temp_dir().join(format!("octant-lake-erase-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let lake = Lake::new(&root);
        let props = writer_properties();
        for u in 0..4 {
            let batch = rows(u * 10..u * 10 + 10, |_| "sys".into(), |i| format!("run-{}", i % 4));
            lake.append("octant.obs", 0, u * 10, u * 10 + 9, vec![("home", FileSpec { date: "2026-12-05".into(), batch })], &props)
                .unwrap();
        }
        // A compaction first: its removed files hold the run too, and must go with it.
        lake.compact("home", None, TARGET_FILE_BYTES, &props).unwrap();
        let subject = Subject::Run("run-1".into());
        let done = block_on(async {
            let mut d = Erased::default();
            let (r, _) = lake.erase_table("home", &subject, "dpo@example.com", "ticket 7", &props).await.unwrap();
            d.tables.insert("home".into(), r);
            d.deleted = lake.tables.vacuum("home", Duration::ZERO, false).await.unwrap().len();
            lake.record_erasure(&subject, "dpo@example.com", "ticket 7", &d).await.unwrap();
            d
        });
        assert_eq!(done.tables["home"], Rewritten { removed: 1, added: 1, rows: 10 });
        assert_eq!(done.deleted, 5, "the four compacted-away files and the erased one");
        assert_eq!(offsets(&lake, "home"), (0..40).filter(|i| i % 4 != 1).collect::<Vec<_>>());
        let on_disk: Vec<_> = walk(&root.join("home")).into_iter().filter(|p| p.extension().is_some_and(|e| e == "parquet")).collect();
        assert_eq!(on_disk.len(), 1, "{on_disk:?}");
        let (_, record) = block_on(lake.tables.snapshot_files(ERASURES)).unwrap().unwrap();
        let b = &block_on(lake.read_file(ERASURES, &record[0].path)).unwrap()[0];
        assert_eq!(b.column_by_name("predicate").unwrap().as_string::<i32>().value(0), "run_id = 'run-1'");
        assert_eq!(b.column_by_name("erased_by").unwrap().as_string::<i32>().value(0), "dpo@example.com");
        assert_eq!(b.column_by_name("rows").unwrap().as_primitive::<arrow::datatypes::Int64Type>().value(0), 10);
        let _ = std::fs::remove_dir_all(&root);
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}
