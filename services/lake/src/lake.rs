//! The lake: Delta tables in a local directory or on an object store ([`crate::store`]), and
//! how a unit of files becomes part of them exactly once (where files go: [`crate::layout`];
//! the tables' logs: [`crate::delta`]).
//!
//! ## Commit protocol (exactly once)
//! A unit (offsets `first..=last` of one input partition) touches some tables. For each, in
//! the order given — the input topic's **home table** last ([`home_table`]) —:
//! 1. its files are written create-only under names no other attempt uses;
//! 2. they are committed to the table's log together with the transaction identifier
//!    `octant:<topic>:<partition>` at version `last`, if the table's version of it is still
//!    the one the writer read (else refused: another writer owns the partition).
//!
//! Only then are Kafka offsets committed (to the home table's version + 1). A writer that
//! starts (or fails a write) reads every table's version of its partition: records at or below
//! the home table's version are in every table; a table whose version is above it (a crash
//! between two tables' commits) already holds its own rows up to its version, which are not
//! written again. Files of an interrupted unit are in no log: no reader sees them, and VACUUM
//! deletes them.

use std::io;
use std::sync::Arc;

use arrow::datatypes::Schema;
use object_store::{PutMode, PutOptions, PutPayload};
use parquet::file::properties::WriterProperties;

use crate::delta::{NewFile, Tables, app_id};
pub use crate::layout::{FileSpec, LOOKUP_COLUMNS, MARKERS, TablePart, escape, file_name, new_tag, unit_of, writer_properties};
use crate::store::{ObjectLake, StorageOptions, block_on};

/// Where the lake is, and its tables.
#[derive(Debug, Clone)]
pub struct Lake {
    location: String,
    /// The store and the lake's root in it.
    pub object: ObjectLake,
    pub tables: Tables,
}

/// The table an input topic's unit commits last, whose version of a partition is the
/// partition's progress: the table of the records the topic carries (`octant.observations`
/// → `observations`, also with a topic prefix); raw records for any other topic.
pub fn home_table(topic: &str) -> &'static str {
    use octant_contracts::topics::*;
    let homes = [
        (TRAJECTORIES_PRODUCTION, "trajectory_events"),
        (TRAJECTORIES_EVALUATION, "trajectory_events"),
        (OBSERVATIONS, "observations"),
        (WINDOWS, "metric_windows"),
        (ALERTS, "alerts"),
        (PROFILES, "profiles"),
        (DLQ, "dead_letters"),
        (RERUNS, "rerun_requests"),
    ];
    homes.iter().find(|(t, _)| topic.ends_with(t)).map_or("raw_records", |(_, h)| h)
}

impl Lake {
    /// A local directory.
    pub fn new(root: impl AsRef<std::path::Path>) -> Lake {
        let object = ObjectLake::local(root.as_ref()).expect("a directory path");
        Lake::with(root.as_ref().display().to_string(), object)
    }

    fn with(location: String, object: ObjectLake) -> Lake {
        let tables = Tables::new(object.url.clone(), object.store.clone(), object.prefix.clone());
        Lake { location, object, tables }
    }

    /// A directory, or an object-store URL (`s3://bucket/prefix`, `memory://`, `file://`).
    pub fn open(location: &str, options: &StorageOptions) -> io::Result<Lake> {
        let object =
            if crate::store::is_url(location) { ObjectLake::open(location, options)? } else { ObjectLake::local(location.as_ref())? };
        Ok(Lake::with(location.to_string(), object))
    }

    pub fn location(&self) -> String {
        self.location.clone()
    }

    /// Whether the lake is a local directory (whose files this writer fsyncs: the object
    /// store's local implementation and delta-rs's local log store do not).
    fn is_local(&self) -> bool {
        self.object.url.scheme() == "file"
    }

    /// `table`'s version of `topic`/`partition`: the last offset of the partition the table
    /// holds everything of (`None`: nothing yet).
    pub fn committed(&self, table: &str, topic: &str, partition: i32) -> io::Result<Option<i64>> {
        block_on(self.tables.version(table, &app_id(topic, partition)))
    }

    /// The schema a table is created with: the lake's own for its tables, else the files'.
    fn schema_of(table: &str, files: &[FileSpec]) -> Option<Arc<Schema>> {
        match (crate::schema::table(table), files.first()) {
            (Some(t), _) => Some(crate::schema::arrow_schema(t)),
            (None, Some(f)) => Some(f.batch.schema()),
            (None, None) => None,
        }
    }

    /// Writes and commits one unit of `topic`/`partition` as the lake writer does, reading
    /// each table's version first: `files` grouped by table, the topic's home table last (an
    /// identifier-only commit if it has no files). For tools, tests and benches; the lake
    /// writer keeps the versions itself and calls [`Lake::write_unit`].
    pub fn append(
        &self,
        topic: &str,
        partition: i32,
        first: i64,
        last: i64,
        files: Vec<(&str, FileSpec)>,
        props: &WriterProperties,
    ) -> io::Result<Vec<String>> {
        let home = home_table(topic);
        let mut by_table: std::collections::BTreeMap<&str, Vec<FileSpec>> = std::collections::BTreeMap::new();
        for (t, f) in files {
            by_table.entry(t).or_default().push(f);
        }
        let home_files = by_table.remove(home).unwrap_or_default();
        let mut parts = Vec::new();
        for (table, files) in by_table.into_iter().chain([(home, home_files)]) {
            parts.push(TablePart { table, expected: self.committed(table, topic, partition)?, files });
        }
        self.write_unit(topic, partition, first, last, parts, props)
    }

    /// Writes and commits one unit, table by table in the order of `parts` (module docs).
    /// Returns the files written (their locations in the store). The first failure stops it:
    /// the tables before it are committed, the rest are not (a refusal wraps
    /// [`crate::delta::Fenced`]).
    pub fn write_unit(
        &self,
        topic: &str,
        partition: i32,
        first: i64,
        last: i64,
        parts: Vec<TablePart<'_>>,
        props: &WriterProperties,
    ) -> io::Result<Vec<String>> {
        let app = app_id(topic, partition);
        let tag = new_tag();
        let name = file_name(&escape(topic), partition, first, last, &tag);
        block_on(async {
            let mut written = Vec::new();
            for part in parts {
                let schema = Lake::schema_of(part.table, &part.files);
                let mut files = Vec::new();
                let put = std::time::Instant::now();
                for f in &part.files {
                    let (file, shown) = self.put_file(part.table, &f.date, &name, &f.batch, props).await?;
                    written.push(shown);
                    files.push(file);
                }
                hold_before_commit();
                // Files no commit lists are deleted by an erasure's VACUUM of orphans once
                // older than its orphan age (24 h by default): files that old are not committed.
                if put.elapsed() > MAX_UNCOMMITTED_AGE {
                    return Err(io::Error::other(format!(
                        "{}'s files of {app} were written {:?} ago, more than {MAX_UNCOMMITTED_AGE:?}: not committed (VACUUM may have deleted them); the unit is written again",
                        part.table,
                        put.elapsed()
                    )));
                }
                let version = self.tables.commit(part.table, schema.as_deref(), &app, part.expected, last, files).await?;
                self.sync_commit(part.table, version)?;
            }
            Ok(written)
        })
    }
}

/// A unit's files are committed within this long of being written, or not at all (the
/// writer writes them again): an erasure deletes files in no table older than its orphan age
/// (24 h by default, `octant lake erase --orphan-age`), which must stay well above this.
pub const MAX_UNCOMMITTED_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// A test hook (the zombie-writer test): with `OCTANT_LAKE_HOLD_COMMIT=<file>` set and the
/// file present, the process's first unit stops after writing its first table's files and
/// before committing them, creates `<file>.held`, and goes on once the file is gone. Unset
/// (always, outside that test), it costs one environment lookup per unit.
fn hold_before_commit() {
    static HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(file) = std::env::var_os("OCTANT_LAKE_HOLD_COMMIT").map(std::path::PathBuf::from) else { return };
    if !file.exists() || HELD.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let mut held = file.clone().into_os_string();
    held.push(".held");
    let _ = std::fs::write(&held, b"");
    tracing::warn!(file = %file.display(), "holding a unit before its commit (OCTANT_LAKE_HOLD_COMMIT) until the file is removed");
    while file.exists() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

impl Lake {
    /// Writes `batch` as the file `date=<date>/<name>` of `table`, create-only (and durable on
    /// a local directory), not committed yet: returns it as a commit adds it, and where it is
    /// (a path on a local lake).
    pub(crate) async fn put_file(
        &self,
        table: &str,
        date: &str,
        name: &str,
        batch: &arrow::record_batch::RecordBatch,
        props: &WriterProperties,
    ) -> io::Result<(NewFile, String)> {
        let bytes = crate::layout::parquet_bytes(batch, props)?;
        let location = self.tables.table_path(table).join(format!("date={date}")).join(name);
        let size = bytes.len() as i64;
        let create = PutOptions { mode: PutMode::Create, ..Default::default() };
        self.object.store.put_opts(&location, PutPayload::from(bytes), create).await.map_err(io::Error::other)?;
        let shown = if self.is_local() { format!("/{location}") } else { location.to_string() };
        if self.is_local() {
            sync(std::path::Path::new(&shown))?;
        }
        Ok((NewFile { path: format!("date={date}/{name}"), date: date.to_string(), size, stats: crate::delta::file_stats(batch) }, shown))
    }

    /// Makes `table`'s log entry `version` durable on a local directory (delta-rs's local log
    /// store does not fsync).
    pub(crate) fn sync_commit(&self, table: &str, version: u64) -> io::Result<()> {
        if self.is_local() {
            let log = std::path::PathBuf::from(format!("/{}", self.tables.table_path(table))).join("_delta_log");
            sync(&log.join(format!("{version:020}.json")))?;
        }
        Ok(())
    }
}

impl Lake {
    /// Makes the newest entries of `table`'s log durable on a local directory (no-op on an
    /// object store): a writer about to rely on the versions it reads (opening a partition,
    /// settling after a failed write) must not rely on an entry a failed or crashed writer
    /// wrote but did not fsync — a power loss could take it after Kafka offsets were committed
    /// past it, or leave a gap below a later, synced entry.
    pub fn sync_log(&self, table: &str) -> io::Result<()> {
        if !self.is_local() {
            return Ok(());
        }
        let log = std::path::PathBuf::from(format!("/{}", self.tables.table_path(table))).join("_delta_log");
        let mut entries: Vec<std::path::PathBuf> = match std::fs::read_dir(&log) {
            Ok(d) => d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        // Zero-padded versions: the name order is the version order.
        entries.sort();
        for e in entries.iter().rev().take(SYNCED_LOG_ENTRIES) {
            std::fs::File::open(e)?.sync_all()?;
        }
        std::fs::File::open(&log)?.sync_all()?;
        if let Some(table_dir) = log.parent() {
            std::fs::File::open(table_dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// Log entries [`Lake::sync_log`] makes durable, newest first: more than the writers of a
/// table can commit between a failed fsync and the next reading (fsync of a clean file is cheap).
const SYNCED_LOG_ENTRIES: usize = 32;

/// Makes a file written on a local directory durable: the file, then its directory (a
/// power loss must not take a committed log entry or a file it lists; SIGKILL alone would not).
fn sync(file: &std::path::Path) -> io::Result<()> {
    std::fs::File::open(file)?.sync_all()?;
    if let Some(dir) = file.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::record_batch::RecordBatch;

    fn batch(offsets: std::ops::RangeInclusive<i64>) -> RecordBatch {
        let n = offsets.clone().count();
        RecordBatch::try_from_iter([
            ("kafka_offset", Arc::new(Int64Array::from_iter_values(offsets)) as _),
            ("system_id", Arc::new(StringArray::from(vec![Some("a/b"); n])) as _),
        ])
        .unwrap()
    }

    #[test]
    fn topics_have_their_home_tables() {
        assert_eq!(home_table("octant.observations"), "observations");
        assert_eq!(home_table("t1-octant.trajectories.evaluation"), "trajectory_events");
        assert_eq!(home_table("octant.dlq"), "dead_letters");
        assert_eq!(home_table("elsewhere"), "raw_records");
    }

    /// A unit interrupted between two tables' commits: the first table holds its rows, the
    /// home table does not; the versions say so, and the unit's files that no commit lists
    /// are in no table.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_unit_is_committed_table_by_table_home_last() {
        let root = std::env::temp_dir().join(format!("octant-lake-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let lake = Lake::new(&root);
        let p = writer_properties();
        let part = |table, expected, offsets| TablePart {
            table,
            expected,
            files: vec![FileSpec { date: "2026-12-05".into(), batch: batch(offsets) }],
        };
        let written = lake.write_unit("octant.obs", 0, 0, 9, vec![part("side", None, 0..=4), part("home", None, 5..=9)], &p).unwrap();
        assert_eq!(written.len(), 2);
        assert!(std::path::Path::new(&written[0]).exists(), "{written:?}");
        assert_eq!(
            (lake.committed("side", "octant.obs", 0).unwrap(), lake.committed("home", "octant.obs", 0).unwrap()),
            (Some(9), Some(9))
        );
        // The next unit's home commit is refused (another writer moved the home table on).
        let refused =
            lake.write_unit("octant.obs", 0, 10, 19, vec![part("side", Some(9), 10..=14), part("home", Some(8), 15..=19)], &p).unwrap_err();
        assert!(crate::delta::is_fenced(&refused).is_some(), "{refused}");
        assert_eq!(
            (lake.committed("side", "octant.obs", 0).unwrap(), lake.committed("home", "octant.obs", 0).unwrap()),
            (Some(19), Some(9))
        );
        assert_eq!(block_on(lake.tables.files("home")).unwrap().len(), 1, "the refused file is not in the table");
        // A transaction-only commit moves the version without files.
        lake.write_unit("octant.obs", 0, 10, 19, vec![TablePart { table: "home", expected: Some(9), files: vec![] }], &p).unwrap();
        assert_eq!(lake.committed("home", "octant.obs", 0).unwrap(), Some(19));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn partition_values_are_escaped() {
        assert_eq!(escape("agent-a"), "agent-a");
        assert_eq!(escape("a/b=c d"), "a%2Fb%3Dc%20d");
        assert_eq!(escape(".."), "%2E%2E");
        assert_eq!(escape(""), crate::schema::NO_SYSTEM);
    }
}
