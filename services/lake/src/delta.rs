//! The lake's tables as Delta Lake tables (delta-rs, without its DataFusion integration):
//! `<root>/<table>/_delta_log/` is the table's transaction log, and a data file is in the table
//! exactly when the log's snapshot lists it. Every engine that speaks Delta (DuckDB, Spark,
//! Trino, PyPI `deltalake`, Octant's reader) therefore sees the same committed files, and
//! nothing of a unit that a crash interrupted.
//!
//! ## Exactly once from Kafka (after kafka-delta-ingest)
//! Each commit carries, beside its files, a transaction identifier per input topic-partition
//! ([`app_id`]: `octant:<topic>:<partition>`, version = the unit's last offset), in the same
//! atomic log entry. A writer resumes from the versions in the log and commits to a table only
//! while the table's version for its partition is still the one it read ([`Tables::commit`]):
//! a writer that lost its partition without knowing it (paused past its session timeout) finds
//! the new owner's version there and is refused ([`Fenced`]); two commits racing from the same
//! snapshot are refused by delta-rs's conflict check (`ConcurrentTransaction`) and by the log's
//! create-only commit files, while commits of other partitions to the same table are rebased
//! and retried (appends do not conflict).
//!
//! What rests on what: on a local directory, a log entry is created with a hard link (an
//! existing entry is never replaced); on S3 (and compatible stores), with a conditional
//! `PUT` (`If-None-Match: *`), which the store promises to refuse when the entry exists — the
//! test server refuses a second create (tested); that two truly simultaneous creates get one
//! refusal is the store's promise (documented, not tested).
//!
//! ## Schema evolution
//! A table's schema is the one it was created with, widened by the first commit of a writer
//! whose contracts add fields (a nullable field at any depth, a field that became nullable):
//! that commit carries a `metaData` action with the merged schema ([`merged_schema`]), so every
//! engine reading the log sees the new fields (null in older files). A writer whose contracts
//! are older (a rolling upgrade) never narrows it: its files lack the newer fields, which read
//! as null. A field whose type changed is refused (an incompatible contract change). Writers
//! whose commits were rebased over the widening commit find the metadata changed under them
//! (delta-rs refuses such a rebase): each reads the table again and commits once more at once.
//!
//! Data files are written before the commit under names no other attempt uses (topic,
//! partition, offsets and a random tag: [`crate::layout::file_name`]); a file no commit lists
//! is invisible to every reader and is deleted by VACUUM after the retention.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, Schema, TimeUnit};
use deltalake_core::kernel::transaction::{CommitBuilder, CommitConflictError, CommitProperties, TransactionError};
use deltalake_core::kernel::{Action, Add, ArrayType, DataType, PrimitiveType, Remove, StructField, StructType, Transaction};
use deltalake_core::logstore::{LogStore, LogStoreFactory, StorageConfig, logstore_factories};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use object_store::ObjectStore;
use object_store::path::Path as ObjPath;
use url::Url;

/// The partition column of every lake table: the UTC date of the row's event time (issue 43:
/// by date, not by system, so the files of a flush do not multiply with the fleet; the system
/// is a column the files are sorted by). A date needs no escaping in a path.
pub const PARTITION_COLUMNS: [&str; 1] = ["date"];

/// How often a commit is rebased over other writers' commits to the same table before it
/// fails (an I/O error: retried by the writer at its next flush).
const COMMIT_RETRIES: usize = 15;

/// The transaction identifier of an input topic-partition.
pub fn app_id(topic: &str, partition: i32) -> String {
    format!("octant:{topic}:{partition}")
}

/// A commit refused because the table's version for the partition is not the one the writer
/// read: another writer committed there since (this one lost its partition, or raced).
#[derive(Debug, Clone, PartialEq)]
pub struct Fenced {
    pub table: String,
    pub app_id: String,
    pub expected: Option<i64>,
    pub found: Option<i64>,
}

impl std::fmt::Display for Fenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "commit to {} refused: {} is at {:?} in the log, this writer expected {:?} (another writer owns the partition)",
            self.table, self.app_id, self.found, self.expected
        )
    }
}

impl std::error::Error for Fenced {}

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// The Delta type of an Arrow type of the lake's schemas (`schema.rs`: strings, integers,
/// floats, booleans, millisecond timestamps in UTC — Delta's `timestamp`, files keep their
/// millisecond unit —, lists and structs).
pub fn delta_type(t: &ArrowType) -> io::Result<DataType> {
    Ok(match t {
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View | ArrowType::Null => DataType::Primitive(PrimitiveType::String),
        ArrowType::Boolean => DataType::Primitive(PrimitiveType::Boolean),
        ArrowType::Int32 => DataType::Primitive(PrimitiveType::Integer),
        ArrowType::Int64 => DataType::Primitive(PrimitiveType::Long),
        ArrowType::Float32 => DataType::Primitive(PrimitiveType::Float),
        ArrowType::Float64 => DataType::Primitive(PrimitiveType::Double),
        ArrowType::Timestamp(TimeUnit::Millisecond | TimeUnit::Microsecond, Some(_)) => DataType::Primitive(PrimitiveType::Timestamp),
        ArrowType::List(f) | ArrowType::LargeList(f) => {
            DataType::Array(Box::new(ArrayType::new(delta_type(f.data_type())?, f.is_nullable())))
        }
        ArrowType::Struct(fields) => DataType::Struct(Box::new(
            StructType::try_new(
                fields
                    .iter()
                    .map(|f| Ok(StructField::new(f.name(), delta_type(f.data_type())?, f.is_nullable())))
                    .collect::<io::Result<Vec<_>>>()?,
            )
            .map_err(err)?,
        )),
        other => return Err(err(format!("no Delta type for Arrow {other}"))),
    })
}

/// The Delta columns of a lake table: its files' columns, then the partition columns.
pub fn delta_columns(schema: &Schema) -> io::Result<Vec<StructField>> {
    let mut out: Vec<StructField> = schema
        .fields()
        .iter()
        .map(|f| Ok(StructField::new(f.name(), delta_type(f.data_type())?, f.is_nullable())))
        .collect::<io::Result<_>>()?;
    for c in PARTITION_COLUMNS {
        out.push(StructField::new(c, DataType::Primitive(PrimitiveType::String), true));
    }
    Ok(out)
}

/// The `metaData` action widening `snapshot`'s schema to `schema`'s fields, if they add any.
fn evolve(snapshot: &deltalake_core::table::state::DeltaTableState, schema: Option<&Schema>) -> io::Result<Option<Action>> {
    let Some(schema) = schema else { return Ok(None) };
    let Some(merged) = merged_schema(&snapshot.schema(), &delta_columns(schema)?)? else { return Ok(None) };
    use deltalake_core::kernel::MetadataExt;
    let metadata = snapshot.metadata().clone().with_schema(&merged).map_err(err)?;
    tracing::info!(columns = merged.fields().count(), "the table's schema gains the contracts' new fields");
    Ok(Some(Action::Metadata(metadata)))
}

/// `table`'s schema widened by what `writer` adds (module docs), `None` when it adds nothing;
/// an error names a field whose type differs.
pub fn merged_schema(table: &StructType, writer: &[StructField]) -> io::Result<Option<StructType>> {
    merge_fields(table.fields(), writer.iter(), "")?.map(|f| StructType::try_new(f).map_err(err)).transpose()
}

fn merge_fields<'a>(
    table: impl Iterator<Item = &'a StructField>,
    writer: impl Iterator<Item = &'a StructField>,
    path: &str,
) -> io::Result<Option<Vec<StructField>>> {
    let mut out: Vec<StructField> = table.cloned().collect();
    let mut changed = false;
    for w in writer {
        let at = format!("{path}{}", w.name());
        match out.iter().position(|f| f.name() == w.name()) {
            // Older files lack the field: it is added nullable whatever the contract says
            // (a contract field with a default is not null in new records).
            None => {
                out.push(StructField::new(w.name(), w.data_type().clone(), true));
                changed = true;
            }
            Some(i) => {
                let t = &out[i];
                let data_type = merge_type(t.data_type(), w.data_type(), &at)?;
                let nullable = t.is_nullable() || w.is_nullable();
                if data_type.is_some() || nullable != t.is_nullable() {
                    out[i] = StructField::new(t.name(), data_type.unwrap_or_else(|| t.data_type().clone()), nullable);
                    changed = true;
                }
            }
        }
    }
    Ok(changed.then_some(out))
}

fn merge_type(table: &DataType, writer: &DataType, path: &str) -> io::Result<Option<DataType>> {
    match (table, writer) {
        (DataType::Struct(t), DataType::Struct(w)) => merge_fields(t.fields(), w.fields(), &format!("{path}."))?
            .map(|f| StructType::try_new(f).map(|s| DataType::Struct(Box::new(s))).map_err(err))
            .transpose(),
        (DataType::Array(t), DataType::Array(w)) => {
            let element = merge_type(t.element_type(), w.element_type(), &format!("{path}[]"))?;
            let contains_null = t.contains_null() || w.contains_null();
            Ok((element.is_some() || contains_null != t.contains_null())
                .then(|| DataType::Array(Box::new(ArrayType::new(element.unwrap_or_else(|| t.element_type().clone()), contains_null)))))
        }
        (t, w) if t == w => Ok(None),
        (t, w) => Err(err(format!("{path}: the table's type {t:?} is not the writer's {w:?} (an incompatible contract change)"))),
    }
}

/// delta-rs's plain log store for `s3://` locations on Octant's own S3 store (delta-rs's AWS
/// crate, which would build the AWS SDK, is not used): log entries are created with
/// conditional puts, which the store is configured for (`aws_conditional_put`).
#[derive(Debug, Default)]
struct PlainLogStores;

impl LogStoreFactory for PlainLogStores {
    fn with_options(
        &self,
        prefixed_store: deltalake_core::logstore::ObjectStoreRef,
        root_store: deltalake_core::logstore::ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> deltalake_core::DeltaResult<Arc<dyn LogStore>> {
        Ok(deltalake_core::logstore::default_logstore(prefixed_store, root_store, location, options))
    }
}

fn register_log_stores() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for scheme in ["s3://", "s3a://"] {
            logstore_factories().insert(Url::parse(scheme).expect("a URL"), Arc::new(PlainLogStores));
        }
    });
}

/// A file of a table, as a commit adds it: its path under the table, its date partition, and
/// its statistics in the log (`numRecords`, `minValues`, `maxValues`, `nullCount`: what Delta
/// readers skip files by; [`file_stats`]).
#[derive(Debug, Clone)]
pub struct NewFile {
    pub path: String,
    pub date: String,
    pub size: i64,
    pub stats: serde_json::Value,
}

impl NewFile {
    /// The log's `add` action of the file.
    /// (`data_change`: false when the file re-packs rows the table holds already: compaction.)
    fn into_add(self, data_change: bool) -> Action {
        Action::Add(Add {
            path: self.path,
            partition_values: HashMap::from([("date".to_string(), Some(self.date))]),
            size: self.size,
            modification_time: now_ms(),
            data_change,
            stats: Some(self.stats.to_string()),
            ..Default::default()
        })
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A file of a table as its snapshot lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableFile {
    /// Under the table (`date=…/<name>`).
    pub path: String,
    pub date: String,
    pub size: i64,
    pub stats: Option<serde_json::Value>,
}

impl TableFile {
    /// The log's `remove` action of the file.
    fn into_remove(self, data_change: bool) -> Action {
        Action::Remove(Remove {
            path: self.path,
            data_change,
            deletion_timestamp: Some(now_ms()),
            extended_file_metadata: Some(true),
            partition_values: Some(HashMap::from([("date".to_string(), Some(self.date))])),
            size: Some(self.size),
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
        })
    }
}

/// The identifier every commit that removes files of an input partition's units carries
/// (compaction, retention, erasure: [`Tables::rewrite`]): two such commits that touch the same
/// partition's files cannot both land from one snapshot (delta-rs refuses the second with
/// `ConcurrentTransaction`). Without it two compactions of the same files would both commit —
/// delta-rs's own check ignores removals that do not change data — and the rows would be in
/// the table twice.
pub fn rewrite_id(topic: &str, partition: i32) -> String {
    format!("octant-rewrite:{topic}:{partition}")
}

/// What a commit that replaces files does.
#[derive(Debug, Clone)]
pub enum Rewrite {
    /// Re-packs rows the table holds (the same rows, fewer files): `dataChange` false.
    Compact { target_bytes: i64 },
    /// Removes the rows that match `predicate` (erasure, retention).
    Delete { predicate: String },
}

/// What a rewrite commits ([`Tables::rewrite`]).
#[derive(Debug)]
pub struct Change {
    pub removes: Vec<TableFile>,
    pub adds: Vec<NewFile>,
    /// The input partitions (topic as in file names, partition) whose files it removes.
    pub partitions: std::collections::BTreeSet<(String, i32)>,
    pub what: Rewrite,
    /// Into the commit's `commitInfo`.
    pub metadata: Vec<(String, serde_json::Value)>,
}

/// A commit refused because another commit changed the files it read (a concurrent
/// compaction, retention or erasure of the same partition): nothing was committed; read the
/// table again and retry.
pub fn is_conflict(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ResourceBusy
}

/// A commit attempt's failure: an error, or the table's metadata changed under it (retried).
enum Retry {
    MetadataChanged,
    Error(io::Error),
}

impl From<io::Error> for Retry {
    fn from(e: io::Error) -> Retry {
        Retry::Error(e)
    }
}

impl Retry {
    fn into_error(self) -> io::Error {
        match self {
            Retry::Error(e) => e,
            Retry::MetadataChanged => io::Error::new(io::ErrorKind::ResourceBusy, "the table's metadata changed twice under one commit"),
        }
    }
}

fn conflict(table: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::ResourceBusy,
        format!("{table}: another commit changed the files this one read ({e}); read the table again"),
    )
}

/// A file's statistics for the log: its rows, and the least and greatest `system_id` and
/// `kafka_offset` (the columns files are sorted and looked up by) with their null counts.
pub fn file_stats(batch: &arrow::record_batch::RecordBatch) -> serde_json::Value {
    use arrow::array::{Array, AsArray};
    use serde_json::{Map, Value, json};
    let (mut min, mut max, mut nulls) = (Map::new(), Map::new(), Map::new());
    if let Some(c) = batch.column_by_name("system_id").and_then(|c| c.as_string_opt::<i32>()) {
        if let Some(v) = arrow::compute::min_string(c) {
            min.insert("system_id".into(), json!(v));
        }
        if let Some(v) = arrow::compute::max_string(c) {
            max.insert("system_id".into(), json!(v));
        }
        nulls.insert("system_id".into(), json!(c.null_count()));
    }
    if let Some(c) = batch.column_by_name("kafka_offset").and_then(|c| c.as_primitive_opt::<arrow::datatypes::Int64Type>()) {
        if let Some(v) = arrow::compute::min(c) {
            min.insert("kafka_offset".into(), json!(v));
        }
        if let Some(v) = arrow::compute::max(c) {
            max.insert("kafka_offset".into(), json!(v));
        }
        nulls.insert("kafka_offset".into(), json!(c.null_count()));
    }
    json!({ "numRecords": batch.num_rows(), "minValues": Value::Object(min), "maxValues": Value::Object(max), "nullCount": Value::Object(nulls) })
}

/// The Delta tables of one lake: where they are, and each table's log as last read.
#[derive(Clone)]
pub struct Tables {
    /// The lake's root as a URL (`file:///…/` or `s3://bucket/prefix/`).
    pub root: Url,
    /// The store, `/` at the root of the bucket (or of the filesystem).
    pub store: Arc<dyn ObjectStore>,
    /// The lake's root in `store`.
    pub prefix: ObjPath,
    open: Arc<tokio::sync::Mutex<HashMap<String, DeltaTable>>>,
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tables({})", self.root)
    }
}

impl Tables {
    pub fn new(root: Url, store: Arc<dyn ObjectStore>, prefix: ObjPath) -> Tables {
        register_log_stores();
        let root = if root.path().ends_with('/') { root } else { Url::parse(&format!("{root}/")).expect("a URL") };
        Tables { root, store, prefix, open: Default::default() }
    }

    /// The URL of `table`'s directory.
    pub fn table_url(&self, table: &str) -> Url {
        self.root.join(&format!("{table}/")).expect("a table name joins")
    }

    /// `table`'s location in the store.
    pub fn table_path(&self, table: &str) -> ObjPath {
        self.prefix.clone().join(table)
    }

    fn build(&self, table: &str) -> io::Result<DeltaTable> {
        let url = self.table_url(table);
        DeltaTableBuilder::from_url(url.clone()).map_err(err)?.with_storage_backend(self.store.clone(), url).build().map_err(err)
    }

    /// `table` at its newest version (`None`: not created yet).
    async fn latest(&self, table: &str) -> io::Result<Option<DeltaTable>> {
        let mut open = self.open.lock().await;
        if let Some(t) = open.get_mut(table) {
            t.update_incremental(None).await.map_err(err)?;
            return Ok(Some(t.clone()));
        }
        // No log yet: not created (delta-rs's own error for it depends on the store).
        let log = self.table_path(table).join("_delta_log");
        if self.store.list_with_delimiter(Some(&log)).await.map_err(err)?.objects.is_empty() {
            return Ok(None);
        }
        let mut t = self.build(table)?;
        t.load().await.map_err(err)?;
        open.insert(table.to_string(), t.clone());
        Ok(Some(t))
    }

    /// `table` at its newest version, created with `schema` (and the partition columns) if it
    /// does not exist; a writer that loses the race to create it loads the winner's.
    async fn latest_or_create(&self, table: &str, schema: Option<&Schema>) -> io::Result<DeltaTable> {
        if let Some(t) = self.latest(table).await? {
            return Ok(t);
        }
        let schema = schema.ok_or_else(|| err(format!("table {table} does not exist and no schema was given to create it")))?;
        let created = self
            .build(table)?
            .create()
            .with_table_name(table)
            .with_columns(delta_columns(schema)?)
            .with_partition_columns(PARTITION_COLUMNS)
            .with_save_mode(SaveMode::Ignore)
            .await;
        if let Err(e) = created {
            tracing::debug!(error = %e, table, "creating the table raced another writer; loading it");
        }
        self.latest(table).await?.ok_or_else(|| err(format!("table {table} could not be created")))
    }

    /// `table`'s newest log version (`None`: not created yet).
    pub async fn log_version(&self, table: &str) -> io::Result<Option<u64>> {
        Ok(self.latest(table).await?.and_then(|t| t.version()))
    }

    /// The version of `app` in `table` (`None`: no commit of it).
    pub async fn version(&self, table: &str, app: &str) -> io::Result<Option<i64>> {
        let Some(t) = self.latest(table).await? else { return Ok(None) };
        t.snapshot().map_err(err)?.transaction_version(t.log_store().as_ref(), app).await.map_err(err)
    }

    /// Commits `files` (already written under the table) to `table` with `app` at version
    /// `last`, if the table's version of `app` is still `expected` (module docs); returns the
    /// table's new log version. A refusal is an `io::Error` wrapping [`Fenced`].
    pub async fn commit(
        &self,
        table: &str,
        schema: Option<&Schema>,
        app: &str,
        expected: Option<i64>,
        last: i64,
        files: Vec<NewFile>,
    ) -> io::Result<u64> {
        match self.commit_once(table, schema, app, expected, last, files.clone()).await {
            // Another writer widened the table's schema since this one read it: read the
            // table again and commit once more (module docs, schema evolution).
            Err(Retry::MetadataChanged) => {
                tracing::info!(table, "the table's schema changed under this commit; committing again on the new schema");
                self.commit_once(table, schema, app, expected, last, files).await.map_err(Retry::into_error)
            }
            done => done.map_err(Retry::into_error),
        }
    }

    async fn commit_once(
        &self,
        table: &str,
        schema: Option<&Schema>,
        app: &str,
        expected: Option<i64>,
        last: i64,
        files: Vec<NewFile>,
    ) -> Result<u64, Retry> {
        let t = self.latest_or_create(table, schema).await?;
        let snapshot = t.snapshot().map_err(err)?;
        let found = snapshot.transaction_version(t.log_store().as_ref(), app).await.map_err(err)?;
        if found != expected {
            return Err(io::Error::other(Fenced { table: table.into(), app_id: app.into(), expected, found }).into());
        }
        let mut actions: Vec<Action> = evolve(snapshot, schema)?.into_iter().collect();
        actions.extend(files.into_iter().map(|f| f.into_add(true)));
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: Some(PARTITION_COLUMNS.iter().map(|c| c.to_string()).collect()),
            predicate: None,
        };
        // Retries rebase the commit over other partitions' commits to the same table (several
        // writers share a table); a winning commit that carries this partition's identifier
        // fails the rebase (delta-rs's `ConcurrentTransaction`), so the check above holds at
        // whatever version the commit lands.
        let props = CommitProperties::default().with_application_transaction(Transaction::new(app, last)).with_max_retries(COMMIT_RETRIES);
        let done = CommitBuilder::from(props).with_actions(actions).build(Some(snapshot), t.log_store(), operation).await;
        match done {
            Ok(finalized) => {
                let version = finalized.version();
                let mut open = self.open.lock().await;
                if let Some(entry) = open.get_mut(table) {
                    entry.state = Some(finalized.snapshot());
                }
                Ok(version)
            }
            Err(DeltaTableError::Transaction { source: TransactionError::CommitConflict(c) }) => {
                let found = self.version(table, app).await.ok().flatten();
                if found == expected {
                    if matches!(c, CommitConflictError::MetadataChanged) {
                        return Err(Retry::MetadataChanged);
                    }
                    // Not another owner: a rewrite (erasure, retention) removed files this
                    // commit's snapshot listed.
                    return Err(conflict(table, c).into());
                }
                Err(io::Error::other(Fenced { table: table.into(), app_id: app.into(), expected, found }).into())
            }
            Err(e) => Err(err(e).into()),
        }
    }

    /// Creates `table` with `files` and the identifiers `txns` (app id, version) in its first
    /// commit (`octant lake migrate`); refused if the table exists.
    pub async fn import(&self, table: &str, schema: &Schema, txns: &[(String, i64)], files: Vec<NewFile>) -> io::Result<()> {
        if self.latest(table).await?.is_some() {
            return Err(err(format!("{table} is a Delta table already")));
        }
        let adds = files.into_iter().map(|f| f.into_add(true));
        let props = CommitProperties::default()
            .with_application_transactions(txns.iter().map(|(app, v)| Transaction::new(app, *v)).collect())
            .with_max_retries(0);
        self.build(table)?
            .create()
            .with_table_name(table)
            .with_columns(delta_columns(schema)?)
            .with_partition_columns(PARTITION_COLUMNS)
            .with_save_mode(SaveMode::ErrorIfExists)
            .with_actions(adds)
            .with_commit_properties(props)
            .await
            .map_err(err)?;
        Ok(())
    }

    /// `table` at its newest version and its files (`None`: not created yet): what a rewrite
    /// reads and commits against ([`Tables::rewrite`]).
    pub async fn snapshot_files(&self, table: &str) -> io::Result<Option<(DeltaTable, Vec<TableFile>)>> {
        let Some(t) = self.latest(table).await? else { return Ok(None) };
        let files = t
            .snapshot()
            .map_err(err)?
            .log_data()
            .iter()
            .map(|f| TableFile {
                path: f.path().to_string(),
                date: f.partition_values_map().get("date").cloned().flatten().unwrap_or_default(),
                size: f.size(),
                stats: f.stats().and_then(|s| serde_json::from_str(&s).ok()),
            })
            .collect();
        Ok(Some((t, files)))
    }

    /// Replaces the change's `removes` (files of `read`, the snapshot they were listed from)
    /// by its `adds` in one commit carrying [`rewrite_id`] of every input partition in
    /// `partitions` (the partitions whose files it removes). Commits of other writers since `read` are rebased
    /// over (appends do not conflict); one that removed or rewrote files of the same partitions
    /// refuses it ([`is_conflict`]). `metadata` goes into the commit's `commitInfo`.
    pub async fn rewrite(&self, table: &str, read: &DeltaTable, change: Change) -> io::Result<u64> {
        let Change { removes, adds, partitions, what, metadata } = change;
        let data_change = matches!(what, Rewrite::Delete { .. });
        let mut actions: Vec<Action> = removes.into_iter().map(|f| f.into_remove(data_change)).collect();
        actions.extend(adds.into_iter().map(|f| f.into_add(data_change)));
        let operation = match what {
            Rewrite::Compact { target_bytes } => DeltaOperation::Optimize { predicate: None, target_size: target_bytes },
            Rewrite::Delete { predicate } => DeltaOperation::Delete { predicate: Some(predicate) },
        };
        let next = read.version().map_or(0, |v| v as i64 + 1);
        let txns = partitions.iter().map(|(topic, p)| Transaction::new(rewrite_id(topic, *p), next)).collect();
        let props =
            CommitProperties::default().with_application_transactions(txns).with_metadata(metadata).with_max_retries(COMMIT_RETRIES);
        let snapshot = read.snapshot().map_err(err)?;
        match CommitBuilder::from(props).with_actions(actions).build(Some(snapshot), read.log_store(), operation).await {
            Ok(finalized) => {
                let version = finalized.version();
                if let Some(entry) = self.open.lock().await.get_mut(table) {
                    entry.state = Some(finalized.snapshot());
                }
                Ok(version)
            }
            Err(DeltaTableError::Transaction { source: TransactionError::CommitConflict(c) }) => Err(conflict(table, c)),
            Err(e) => Err(err(e)),
        }
    }

    /// Commits `files` to `table` (created with `schema` if it does not exist) with no
    /// transaction identifier: a table no input partition writes (the erasure record).
    pub async fn append_plain(&self, table: &str, schema: &Schema, files: Vec<NewFile>) -> io::Result<u64> {
        let t = self.latest_or_create(table, Some(schema)).await?;
        let mut actions: Vec<Action> = evolve(t.snapshot().map_err(err)?, Some(schema))?.into_iter().collect();
        actions.extend(files.into_iter().map(|f| f.into_add(true)));
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: Some(PARTITION_COLUMNS.iter().map(|c| c.to_string()).collect()),
            predicate: None,
        };
        let props = CommitProperties::default().with_max_retries(COMMIT_RETRIES);
        let done = CommitBuilder::from(props)
            .with_actions(actions)
            .build(Some(t.snapshot().map_err(err)?), t.log_store(), operation)
            .await
            .map_err(err)?;
        let version = done.version();
        if let Some(entry) = self.open.lock().await.get_mut(table) {
            entry.state = Some(done.snapshot());
        }
        Ok(version)
    }

    /// Deletes the files `table`'s log removed at least `retention` ago (VACUUM; `orphans`:
    /// also files no commit ever listed — interrupted units — last modified at least
    /// `retention` ago). Returns the files deleted. Readers of versions older than `retention`
    /// lose the files those versions list (Delta's time travel is bounded by it).
    pub async fn vacuum(&self, table: &str, retention: std::time::Duration, orphans: bool) -> io::Result<Vec<String>> {
        use deltalake_core::operations::vacuum::VacuumMode;
        let Some(t) = self.latest(table).await? else { return Ok(Vec::new()) };
        let retention = chrono::Duration::from_std(retention).map_err(err)?;
        let (done, metrics) = t
            .vacuum()
            .with_retention_period(retention)
            .with_enforce_retention_duration(false)
            .with_mode(if orphans { VacuumMode::Full } else { VacuumMode::Lite })
            .await
            .map_err(err)?;
        if let Some(entry) = self.open.lock().await.get_mut(table) {
            *entry = done;
        }
        Ok(metrics.files_deleted)
    }

    /// Writes a checkpoint of `table` at its newest version (readers then replay the log from
    /// it; delta-rs also writes one every `delta.checkpointInterval` commits, 100 by default).
    pub async fn checkpoint(&self, table: &str) -> io::Result<()> {
        let Some(t) = self.latest(table).await? else { return Ok(()) };
        deltalake_core::checkpoints::create_checkpoint(&t, None).await.map_err(err)
    }

    /// The files of `table` at its newest version: paths under the table, with their date.
    pub async fn files(&self, table: &str) -> io::Result<Vec<(String, String)>> {
        Ok(self.files_with_stats(table).await?.into_iter().map(|(p, d, _)| (p, d)).collect())
    }

    /// The files of `table` at its newest version with their statistics in the log.
    pub async fn files_with_stats(&self, table: &str) -> io::Result<Vec<(String, String, Option<serde_json::Value>)>> {
        let Some(t) = self.latest(table).await? else { return Ok(Vec::new()) };
        let snapshot = t.snapshot().map_err(err)?;
        Ok(snapshot
            .log_data()
            .iter()
            .map(|f| {
                let pv = f.partition_values_map();
                let stats = f.stats().and_then(|s| serde_json::from_str(&s).ok());
                (f.path().to_string(), pv.get("date").cloned().flatten().unwrap_or_default(), stats)
            })
            .collect())
    }

    /// The files of `table`, as full locations in the store.
    pub async fn file_set(&self, table: &str) -> io::Result<HashSet<ObjPath>> {
        Ok(self.versioned_file_set(table).await?.1)
    }

    /// `table`'s newest log version (`None`: no table) and its files at that version, as
    /// full locations in the store.
    pub async fn versioned_file_set(&self, table: &str) -> io::Result<(Option<u64>, HashSet<ObjPath>)> {
        let base = self.table_path(table);
        let Some((t, files)) = self.snapshot_files(table).await? else { return Ok((None, HashSet::new())) };
        let set = files.into_iter().map(|f| f.path.split('/').fold(base.clone(), |acc, part| acc.join(part))).collect();
        Ok((t.version(), set))
    }
}

/// The [`Fenced`] refusal an error of [`Tables::commit`] carries, if it is one.
pub fn is_fenced(e: &io::Error) -> Option<&Fenced> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<Fenced>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::Field;
    use parquet::arrow::ArrowWriter;

    fn schema() -> Arc<Schema> {
        Arc::new(Schema::new(vec![
            Field::new("kafka_topic", ArrowType::Utf8, false),
            Field::new("kafka_partition", ArrowType::Int32, false),
            Field::new("kafka_offset", ArrowType::Int64, false),
            Field::new("system_id", ArrowType::Utf8, true),
        ]))
    }

    /// A lake on a fresh directory, opened as a writer would.
    fn tables_on(dir: &std::path::Path) -> Tables {
        std::fs::create_dir_all(dir).unwrap();
        let root = Url::from_directory_path(dir).unwrap();
        Tables::new(root, Arc::new(object_store::local::LocalFileSystem::new()), ObjPath::from_absolute_path(dir).unwrap())
    }

    /// Writes offsets `first..=last` of `t`/0 as one file of `table` (date 2026-12-05), not
    /// committed yet; returns it as a commit adds it.
    async fn write(tables: &Tables, table: &str, first: i64, last: i64, tag: &str) -> NewFile {
        let n = (last - first + 1) as usize;
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(vec!["t"; n])),
                Arc::new(Int32Array::from(vec![0; n])),
                Arc::new(Int64Array::from_iter_values(first..=last)),
                Arc::new(StringArray::from(vec![Some("agent/a"); n])),
            ],
        )
        .unwrap();
        let mut w = ArrowWriter::try_new(Vec::new(), schema(), None).unwrap();
        w.write(&batch).unwrap();
        let bytes = w.into_inner().unwrap();
        let path = format!("date=2026-12-05/t-0-{first:020}-{last:020}.{tag}.parquet");
        let location = path.split('/').fold(tables.table_path(table), |p, part| p.join(part));
        let size = bytes.len() as i64;
        object_store::ObjectStoreExt::put(tables.store.as_ref(), &location, bytes.into()).await.unwrap();
        NewFile { path, date: "2026-12-05".into(), size, stats: file_stats(&batch) }
    }

    /// Runs `script` under PyPI `deltalake` (installed by `scripts/setup.sh` into
    /// `.octant/delta`) with `args`, and reads the JSON it prints.
    fn deltalake_py(script: &str, args: &[&std::ffi::OsStr]) -> serde_json::Value {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.octant/delta");
        assert!(root.join("deltalake").exists(), "PyPI deltalake not found in {} (run scripts/setup.sh)", root.display());
        let out =
            std::process::Command::new("python3").env("PYTHONPATH", &root).arg("-c").arg(script).args(args).output().expect("python3 runs");
        assert!(out.status.success(), "deltalake failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    #[test]
    fn every_lake_table_has_a_delta_schema() {
        for t in crate::schema::TABLES {
            let columns = delta_columns(&crate::schema::arrow_schema(t)).unwrap_or_else(|e| panic!("{}: {e}", t.name));
            assert_eq!(columns.last().unwrap().name(), "date", "{}", t.name);
        }
    }

    /// The zombie writer: an owner reads the log, loses its partition without knowing it, the
    /// new owner commits, and the old owner's commit is refused — its file stays out of the
    /// table for every reader, the new owner's offsets are there once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_that_lost_its_partition_cannot_commit_over_the_new_owner() {
        let dir = std::env::temp_dir().join(format!("octant-delta-zombie-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (old, new) = (tables_on(&dir), tables_on(&dir));
        let app = app_id("t", 0);
        // Both owners start from the same log: offsets 0..=9 in the table.
        let f = write(&old, "obs", 0, 9, "a").await;
        old.commit("obs", Some(&schema()), &app, None, 9, vec![f]).await.unwrap();
        assert_eq!(old.version("obs", &app).await.unwrap(), Some(9));
        assert_eq!(new.version("obs", &app).await.unwrap(), Some(9));
        // The old owner pauses with 10..=19 written; the new owner commits 10..=14.
        let stale = write(&old, "obs", 10, 19, "b").await;
        let f = write(&new, "obs", 10, 14, "c").await;
        new.commit("obs", Some(&schema()), &app, Some(9), 14, vec![f]).await.unwrap();
        let refused = old.commit("obs", Some(&schema()), &app, Some(9), 19, vec![stale]).await.unwrap_err();
        assert_eq!(
            is_fenced(&refused),
            Some(&Fenced { table: "obs".into(), app_id: app.clone(), expected: Some(9), found: Some(14) }),
            "{refused}"
        );
        // A transaction-only commit (no files) is fenced the same way.
        assert!(is_fenced(&old.commit("obs", Some(&schema()), &app, Some(9), 19, vec![]).await.unwrap_err()).is_some());
        let mut files: Vec<String> = new.files("obs").await.unwrap().into_iter().map(|(p, _)| p).collect();
        files.sort();
        assert_eq!(
            files,
            vec![
                format!("date=2026-12-05/t-0-{:020}-{:020}.a.parquet", 0, 9),
                format!("date=2026-12-05/t-0-{:020}-{:020}.c.parquet", 10, 14)
            ],
            "the refused file is not in the table"
        );
        // Another partition's identifier is its own.
        assert_eq!(new.version("obs", &app_id("t", 1)).await.unwrap(), None);
        assert_eq!(new.version("absent", &app).await.unwrap(), None, "a table not created yet has no versions");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Schema evolution: nested fields added to a struct and to a list's structs, a field that
    /// became nullable, a new top-level column — merged into the table's schema; nothing to add
    /// is no change; a type change is refused, a new field declared not null is added nullable.
    #[test]
    fn contracts_that_add_fields_widen_the_table_schema() {
        let int = || DataType::Primitive(PrimitiveType::Long);
        let text = || DataType::Primitive(PrimitiveType::String);
        let record = |fields: Vec<StructField>| DataType::Struct(Box::new(StructType::try_new(fields).unwrap()));
        let list = |fields: Vec<StructField>| DataType::Array(Box::new(ArrayType::new(record(fields), true)));
        let table = StructType::try_new(vec![
            StructField::new("id", text(), false),
            StructField::new("tokens", int(), false),
            StructField::new("step", record(vec![StructField::new("tool", text(), true)]), true),
            StructField::new("evaluations", list(vec![StructField::new("name", text(), false)]), true),
        ])
        .unwrap();
        let writer = vec![
            StructField::new("id", text(), false),
            StructField::new("tokens", int(), true),
            StructField::new(
                "step",
                record(vec![StructField::new("tool", text(), true), StructField::new("needs_human", text(), true)]),
                true,
            ),
            StructField::new(
                "evaluations",
                list(vec![StructField::new("name", text(), false), StructField::new("rater", text(), true)]),
                true,
            ),
            StructField::new("note", text(), true),
        ];
        let merged = merged_schema(&table, &writer).unwrap().expect("fields added");
        assert_eq!(merged, StructType::try_new(writer.clone()).unwrap());
        assert_eq!(merged_schema(&merged, &writer).unwrap(), None, "nothing new");
        let older: Vec<StructField> = table.fields().cloned().collect();
        assert_eq!(merged_schema(&merged, &older).unwrap(), None, "an older writer never narrows it");
        let mut changed = writer.clone();
        changed[1] = StructField::new("tokens", text(), true);
        assert!(merged_schema(&table, &changed).unwrap_err().to_string().contains("tokens"));
        // A field the contract declares not null (with a default) is added nullable: older
        // files lack it.
        let mut required = writer.clone();
        required[4] = StructField::new("note", text(), false);
        assert_eq!(merged_schema(&table, &required).unwrap().unwrap(), merged);
    }

    /// A writer with a newer contract commits the wider schema with its files (a `metaData`
    /// action): PyPI `deltalake` reads the new column; a writer with the older contract commits
    /// after it without narrowing the schema.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_newer_contract_widens_the_table_for_every_reader() {
        let dir = std::env::temp_dir().join(format!("octant-delta-evolve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tables = tables_on(&dir);
        let app = app_id("t", 0);
        let f = write(&tables, "obs", 0, 9, "a").await;
        tables.commit("obs", Some(&schema()), &app, None, 9, vec![f]).await.unwrap();
        let mut fields: Vec<Field> = schema().fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("note", ArrowType::Utf8, true));
        let newer = Schema::new(fields);
        let f = write(&tables, "obs", 10, 19, "b").await;
        tables.commit("obs", Some(&newer), &app, Some(9), 19, vec![f]).await.unwrap();
        let f = write(&tables, "obs", 20, 29, "c").await;
        tables.commit("obs", Some(&schema()), &app, Some(19), 29, vec![f]).await.unwrap();
        let script = r#"
import json, sys
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
print(json.dumps({"columns": [f.name for f in dt.schema().fields], "files": len(dt.file_uris())}))
"#;
        let v = deltalake_py(script, &[dir.join("obs").as_os_str()]);
        assert_eq!(v["columns"], serde_json::json!(["kafka_topic", "kafka_partition", "kafka_offset", "system_id", "date", "note"]), "{v}");
        assert_eq!(v["files"], 3, "{v}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// PyPI `deltalake` (an independent implementation of the protocol, installed by
    /// `scripts/setup.sh` into `.octant/delta`) reads what a writer committed: the files, the
    /// rows, and the transaction identifier; not the file a refused commit left behind.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_delta_implementation_reads_the_tables() {
        let dir = std::env::temp_dir().join(format!("octant-delta-pypi-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tables = tables_on(&dir);
        let app = app_id("t", 0);
        let mut expected = None;
        for (first, last) in [(0, 99), (100, 149), (150, 400)] {
            let f = write(&tables, "obs", first, last, "x").await;
            tables.commit("obs", Some(&schema()), &app, expected, last, vec![f]).await.unwrap();
            expected = Some(last);
        }
        write(&tables, "obs", 401, 500, "orphan").await;
        let script = r#"
import json, sys
from deltalake import DeltaTable, QueryBuilder
dt = DeltaTable(sys.argv[1])
rows = QueryBuilder().register("obs", dt).execute(
    "SELECT count(*) AS n, count(DISTINCT kafka_offset) AS d, max(kafka_offset) AS hi, min(system_id) AS s FROM obs").read_all()
r = rows.to_pylist()[0] if hasattr(rows, "to_pylist") else {c: rows[c][0].as_py() for c in ["n", "d", "hi", "s"]}
print(json.dumps({"version": dt.version(), "files": len(dt.file_uris()), "txn": dt.transaction_version(sys.argv[2]),
                  "partitions": dt.metadata().partition_columns, "rows": r}))
"#;
        let v = deltalake_py(script, &[dir.join("obs").as_os_str(), std::ffi::OsStr::new(&app)]);
        assert_eq!(v["files"], 3, "{v}");
        assert_eq!(v["txn"], 400, "{v}");
        assert_eq!(v["partitions"], serde_json::json!(["date"]), "{v}");
        assert_eq!(v["rows"], serde_json::json!({"n": 401, "d": 401, "hi": 400, "s": "agent/a"}), "{v}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
