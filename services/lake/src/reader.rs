//! The lake as a DataFusion catalogue: every table of the lake writer registered by name,
//! with its partition column `date` and the schema derived from the contracts (so an empty or
//! partly written lake still answers every query), each listing showing only the files of the
//! table's Delta snapshot ([`crate::committed`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::committed::CommittedView;
use crate::lake::Lake;
use crate::schema::{TABLES, arrow_schema};
use crate::store::StorageOptions;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};

/// The partition column in the path.
fn partition_cols() -> Vec<(String, DataType)> {
    vec![("date".to_string(), DataType::Utf8)]
}

fn external(e: std::io::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// A session with every table of the local lake `lake` registered.
pub async fn open(lake: &Path) -> Result<SessionContext> {
    open_with(lake, &StorageOptions::default()).await
}

/// A session with every lake table registered; `lake` is a directory or an object-store URL
/// (`s3://bucket/prefix`). Queries see each table's committed files only
/// ([`crate::committed`]). Strings are read as plain `Utf8` (not views) so results print and
/// convert the same in every engine.
pub async fn open_with(lake: &Path, storage: &StorageOptions) -> Result<SessionContext> {
    Ok(open_versions(lake, storage).await?.0)
}

/// [`open_with`], and the version of each table the session reads (its Delta log version;
/// tables not created yet are absent): the cut a profile records in its evidence package, so
/// it can be read again at exactly those versions (Delta time travel, e.g. PyPI `deltalake`'s
/// `DeltaTable(path, version=v)`) until VACUUM removes files they list.
pub async fn open_versions(lake: &Path, storage: &StorageOptions) -> Result<(SessionContext, std::collections::BTreeMap<String, u64>)> {
    let mut versions = std::collections::BTreeMap::new();
    let mut config = SessionConfig::new().with_information_schema(true);
    config.options_mut().execution.parquet.schema_force_view_types = false;
    let ctx = SessionContext::new_with_config(config);
    let location = lake.to_string_lossy().to_string();
    let l = Lake::open(&location, storage).map_err(external)?;
    let o = &l.object;
    let base = url::Url::parse(&format!("{}://{}/", o.url.scheme(), o.url.host_str().unwrap_or("")))
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    let view = Arc::new(CommittedView::new(o.store.clone(), base.clone()));
    ctx.register_object_store(&base, view.clone());
    for t in TABLES {
        let schema = arrow_schema(t);
        // The snapshot read here is the one the session's listings show (read once).
        let (version, files) = l.tables.versioned_file_set(t.name).await.map_err(external)?;
        if let Some(v) = version {
            versions.insert(t.name.to_string(), v);
        }
        if !files.is_empty() {
            view.with_files(o.prefix.clone(), t.name, files);
            let path = format!("{}{}/", o.url.as_str().trim_end_matches('/').to_string() + "/", t.name);
            let opts = ParquetReadOptions::default().schema(&schema).table_partition_cols(partition_cols());
            ctx.register_parquet(t.name, &path, opts).await?;
        } else {
            // Nothing written yet: an empty table with the same columns.
            let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            for (name, dt) in partition_cols() {
                fields.push(Field::new(name, dt, true));
            }
            let empty = MemTable::try_new(Arc::new(Schema::new(fields)), vec![vec![]])?;
            ctx.register_table(t.name, Arc::new(empty))?;
        }
    }
    // The erasure record, once there is one (`octant lake erase`).
    let files = l.tables.file_set(crate::maintain::ERASURES).await.map_err(external)?;
    if !files.is_empty() {
        view.with_files(o.prefix.clone(), crate::maintain::ERASURES, files);
        let path = format!("{}/{}/", o.url.as_str().trim_end_matches('/'), crate::maintain::ERASURES);
        let schema = crate::maintain::erasures_schema();
        let opts = ParquetReadOptions::default().schema(&schema).table_partition_cols(partition_cols());
        ctx.register_parquet(crate::maintain::ERASURES, &path, opts).await?;
    }
    Ok((ctx, versions))
}

/// The files of `table` at its newest version, as paths relative to the lake
/// (`<table>/date=…/<name>`), with their `date` partition value, sorted.
pub async fn table_files(lake: &Path, storage: &StorageOptions, table: &str) -> std::io::Result<Vec<(String, String)>> {
    let l = Lake::open(&lake.to_string_lossy(), storage)?;
    let mut files: Vec<(String, String)> = l.tables.files(table).await?.into_iter().map(|(p, d)| (format!("{table}/{p}"), d)).collect();
    files.sort();
    Ok(files)
}

/// The files of `table` that can hold rows of `system` (by the least and greatest
/// `system_id` the log's statistics give; a file without them can), as [`table_files`] gives.
pub async fn system_files(lake: &Path, storage: &StorageOptions, table: &str, system: &str) -> std::io::Result<Vec<(String, String)>> {
    let l = Lake::open(&lake.to_string_lossy(), storage)?;
    let bound = |stats: &Option<serde_json::Value>, side: &str| -> Option<String> {
        stats.as_ref()?.get(side)?.get("system_id")?.as_str().map(str::to_string)
    };
    let mut files: Vec<(String, String)> = l
        .tables
        .files_with_stats(table)
        .await?
        .into_iter()
        .filter(|(_, _, stats)| {
            bound(stats, "minValues").is_none_or(|lo| lo.as_str() <= system)
                && bound(stats, "maxValues").is_none_or(|hi| hi.as_str() >= system)
        })
        .map(|(p, d, _)| (format!("{table}/{p}"), d))
        .collect();
    files.sort();
    Ok(files)
}

/// Every table's log version (`None`: not created yet).
pub type LakeState = BTreeMap<String, Option<u64>>;

/// What the lake holds: every table's log version. Equal states mean a reader sees the same
/// rows, so a result read under one state stays valid until the state changes (the web
/// view's page cache, which keeps `lake` open so each call reads only the new log entries).
pub async fn commits(lake: &Lake) -> std::io::Result<LakeState> {
    let mut out = BTreeMap::new();
    for t in TABLES {
        out.insert(t.name.to_string(), lake.tables.log_version(t.name).await?);
    }
    Ok(out)
}

/// Runs one SQL statement and collects its result.
pub async fn query(ctx: &SessionContext, sql: &str) -> Result<(Arc<Schema>, Vec<RecordBatch>)> {
    let df = ctx.sql(sql).await?;
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await?;
    Ok((schema, batches))
}

/// Output formats of `octant sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Format, String> {
        match s {
            "table" => Ok(Format::Table),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            other => Err(format!("unknown format {other:?} (table, csv or json)")),
        }
    }
}

/// Renders a result: an aligned table, CSV with a header, or JSON lines (one object per row).
pub fn render(schema: &Schema, batches: &[RecordBatch], format: Format) -> Result<String> {
    let err = |e: arrow::error::ArrowError| DataFusionError::ArrowError(Box::new(e), None);
    match format {
        Format::Table => {
            if batches.iter().all(|b| b.num_rows() == 0) {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                return Ok(format!("{}\n(0 rows)\n", names.join(" | ")));
            }
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            Ok(format!("{}\n({rows} rows)\n", arrow::util::pretty::pretty_format_batches(batches).map_err(err)?))
        }
        Format::Csv => {
            let mut buf = Vec::new();
            {
                let mut w = arrow::csv::WriterBuilder::new().with_header(true).build(&mut buf);
                if batches.is_empty() {
                    w.write(&RecordBatch::new_empty(Arc::new(schema.clone()))).map_err(err)?;
                }
                for b in batches {
                    w.write(b).map_err(err)?;
                }
            }
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
        Format::Json => {
            let mut buf = Vec::new();
            {
                let mut w = arrow::json::LineDelimitedWriter::new(&mut buf);
                for b in batches {
                    w.write(b).map_err(err)?;
                }
                w.finish().map_err(err)?;
            }
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DataType, Field, Fields, Schema};

    use super::*;
    use crate::schema::{arrow_schema, table};
    use futures::TryStreamExt;
    use object_store::ObjectStore;

    /// `schema` without the named fields of the struct column `parent`.
    fn without(schema: &Schema, parent: &str, drop: &[&str]) -> Schema {
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Struct(children) if f.name() == parent => {
                    let kept: Fields = children.iter().filter(|c| !drop.contains(&c.name().as_str())).cloned().collect();
                    Field::new(f.name(), DataType::Struct(kept), f.is_nullable())
                }
                _ => f.as_ref().clone(),
            })
            .collect();
        Schema::new(fields)
    }

    /// A lake file written before fields were added to a nested record (here `run_ended`'s
    /// `grounding`, `review` and `faults`, and `step.result`) still reads under the current schema: the
    /// added fields read as null, the rest as written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_written_before_a_nested_field_was_added_still_read() {
        let current = arrow_schema(table("trajectory_events").unwrap());
        let older = without(&without(&current, "run_ended", &["grounding", "review", "faults"]), "step", &["result"]);
        assert_ne!(older, *current);
        let line = r#"{"event_id": "r/1", "run_id": "r", "system": {"id": "s", "version": "1", "config_hash": ""}, "source": "PRODUCTION",
            "event_time": 1764489600000, "sequence": 1, "kind": "RUN_ENDED", "kafka_topic": "t", "kafka_partition": 0, "kafka_offset": 7,
            "run_ended": {"outcome": "SUCCESS", "sentences_assertive": 4, "evaluations": []}}"#;
        let mut reader = arrow::json::ReaderBuilder::new(Arc::new(older.clone())).build(std::io::Cursor::new(line)).unwrap();
        let batch = reader.next().unwrap().unwrap();
        let lake = std::env::temp_dir().join(format!("octant-lake-older-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&lake);
        let dir = lake.join("trajectory_events/date=2025-12-01");
        std::fs::create_dir_all(&dir).unwrap();
        let file = std::fs::File::create(dir.join("old.parquet")).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, Arc::new(older), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let size = std::fs::metadata(dir.join("old.parquet")).unwrap().len() as i64;
        let file = crate::delta::NewFile {
            path: "date=2025-12-01/old.parquet".into(),
            date: "2025-12-01".into(),
            size,
            stats: crate::delta::file_stats(&batch),
        };
        crate::Lake::new(&lake).tables.commit("trajectory_events", Some(&current), "t", None, 7, vec![file]).await.unwrap();

        let ctx = open(&lake).await.unwrap();
        let (_, batches) = query(
            &ctx,
            "SELECT run_id, get_field(run_ended, 'sentences_assertive') AS a, get_field(run_ended, 'grounding') AS g, get_field(run_ended, 'review') AS r FROM trajectory_events",
        )
        .await
        .unwrap();
        let b = &batches[0];
        assert_eq!(b.num_rows(), 1);
        assert_eq!(b.column(0).as_string::<i32>().value(0), "r");
        assert_eq!(b.column(1).as_primitive::<arrow::datatypes::Int32Type>().value(0), 4);
        assert!(b.column(2).is_null(0) && b.column(3).is_null(0), "added fields read as null");
        let _ = std::fs::remove_dir_all(&lake);
    }

    /// Readers see committed files only: a unit's file that is written but not committed
    /// (written now, or left by a crash or a refused writer) is not counted and not listed as
    /// evidence; once committed it is. On a directory and on an object store.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_see_committed_files_only() {
        let schema = arrow_schema(table("trajectory_events").unwrap());
        let line = r#"{"event_id": "r/1", "run_id": "r", "system": {"id": "s", "version": "1", "config_hash": ""}, "source": "PRODUCTION",
            "event_time": 1764489600000, "sequence": 1, "kind": "RUN_ENDED", "kafka_topic": "t", "kafka_partition": 0, "kafka_offset": 7,
            "run_ended": {"outcome": "SUCCESS", "evaluations": []}}"#;
        let mut reader = arrow::json::ReaderBuilder::new(schema.clone()).build(std::io::Cursor::new(line)).unwrap();
        let batch = reader.next().unwrap().unwrap();
        let dir = std::env::temp_dir().join(format!("octant-lake-committed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for location in [dir.to_string_lossy().to_string(), "memory:///lake".to_string()] {
            let lake = crate::Lake::open(&location, &StorageOptions::default()).unwrap();
            let part = |expected| crate::lake::TablePart {
                table: "trajectory_events",
                expected,
                files: vec![crate::lake::FileSpec { date: "2025-11-30".into(), batch: batch.clone() }],
            };
            let props = crate::lake::writer_properties();
            lake.write_unit("octant.t", 0, 0, 7, vec![part(None)], &props).unwrap();
            // A refused writer's unit: its file is written, its commit refused.
            assert!(lake.write_unit("octant.t", 0, 8, 9, vec![part(Some(3))], &props).is_err());
            // The view DataFusion lists with (an in-memory store is a new one each time it is
            // opened, so it is read through the writer's), and `table_files`.
            let o = &lake.object;
            let base = url::Url::parse(&format!("{}://{}/", o.url.scheme(), o.url.host_str().unwrap_or(""))).unwrap();
            let count = || async {
                let view = CommittedView::new(o.store.clone(), base.clone());
                let table = o.prefix.clone().join("trajectory_events");
                let listed: Vec<_> = view.list(Some(&table)).try_collect().await.unwrap();
                let mut by_level = Vec::new();
                for date in view.list_with_delimiter(Some(&table)).await.unwrap().common_prefixes {
                    by_level.extend(view.list_with_delimiter(Some(&date)).await.unwrap().objects);
                }
                let strip = format!("{}/", o.prefix.as_ref());
                let names = |v: &[object_store::ObjectMeta]| {
                    v.iter().map(|m| m.location.as_ref().strip_prefix(strip.as_str()).unwrap().to_string()).collect::<Vec<_>>()
                };
                assert_eq!(names(&listed), names(&by_level), "list and list_with_delimiter agree");
                names(&listed)
            };
            let seen = count().await;
            assert_eq!(seen.len(), 1, "{location}: the uncommitted file is hidden: {seen:?}");
            if o.url.scheme() == "file" {
                let ctx = open_with(Path::new(&location), &StorageOptions::default()).await.unwrap();
                let (_, b) = query(&ctx, "SELECT count(*) AS n, min(system_id) AS s FROM trajectory_events").await.unwrap();
                assert_eq!(b[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0), 1);
                let files = table_files(Path::new(&location), &StorageOptions::default(), "trajectory_events").await.unwrap();
                assert_eq!(files.into_iter().map(|(f, _)| f).collect::<Vec<_>>(), seen);
            }
            lake.write_unit("octant.t", 0, 8, 9, vec![part(Some(7))], &props).unwrap();
            assert_eq!(count().await.len(), 2, "{location}: committed, the unit is read");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A run is looked up through the bloom filters the lake writes (`lake::LOOKUP_COLUMNS`):
    /// a run id within a row group's min/max range but not in it skips that row group without
    /// reading the column; a run that is there is found. The other engines' view of the same
    /// files (DuckDB) is the interoperability test's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn run_lookups_skip_row_groups_by_bloom_filter() {
        let schema = arrow_schema(table("trajectory_events").unwrap());
        let event = |run: &str, offset: i64| {
            format!(
                r#"{{"event_id": "{run}/1", "run_id": "{run}", "system": {{"id": "s", "version": "1", "config_hash": ""}}, "source": "PRODUCTION",
                "event_time": 1764489600000, "sequence": 1, "kind": "RUN_ENDED", "kafka_topic": "t", "kafka_partition": 0, "kafka_offset": {offset},
                "run_ended": {{"outcome": "SUCCESS", "evaluations": []}}}}"#
            )
        };
        let lines = format!("{}\n{}\n", event("run-a", 0), event("run-z", 1));
        let batch = arrow::json::ReaderBuilder::new(schema).build(std::io::Cursor::new(lines)).unwrap().next().unwrap().unwrap();
        let dir = std::env::temp_dir().join(format!("octant-lake-bloom-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let lake = crate::Lake::new(&dir);
        let part = crate::lake::TablePart {
            table: "trajectory_events",
            expected: None,
            files: vec![crate::lake::FileSpec { date: "2025-11-30".into(), batch }],
        };
        let written = lake.write_unit("octant.t", 0, 0, 1, vec![part], &crate::lake::writer_properties()).unwrap();
        // The file carries a filter of run_id.
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(std::fs::File::open(&written[0]).unwrap()).unwrap();
        let meta = parquet::file::reader::FileReader::metadata(&reader);
        let run_id = meta.file_metadata().schema_descr().columns().iter().position(|c| c.path().string() == "run_id").unwrap();
        assert!(meta.row_group(0).column(run_id).bloom_filter_offset().is_some(), "run_id has a bloom filter");

        let ctx = open(&dir).await.unwrap();
        let plan = |run: &str| format!("EXPLAIN ANALYZE SELECT count(*) FROM trajectory_events WHERE run_id = '{run}'");
        let metrics = |b: &[RecordBatch]| -> String {
            b.iter().map(|b| (0..b.num_rows()).map(|i| b.column(1).as_string::<i32>().value(i).to_string()).collect::<String>()).collect()
        };
        // "run-m" sorts between the file's min and max: statistics keep the row group, the
        // filter prunes it.
        let (_, absent) = query(&ctx, &plan("run-m")).await.unwrap();
        let absent = metrics(&absent);
        assert!(absent.contains("row_groups_pruned_bloom_filter=1 total \u{2192} 0 matched"), "pruned by the filter: {absent}");
        let (_, present) = query(&ctx, &plan("run-z")).await.unwrap();
        let present = metrics(&present);
        assert!(present.contains("row_groups_pruned_bloom_filter=1 total \u{2192} 1 matched"), "kept: {present}");
        let (_, b) = query(&ctx, "SELECT event_id FROM trajectory_events WHERE run_id = 'run-z'").await.unwrap();
        assert_eq!(b[0].column(0).as_string::<i32>().value(0), "run-z/1");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
