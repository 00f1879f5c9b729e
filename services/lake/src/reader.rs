//! The lake as a DataFusion catalogue: every table of the lake writer registered by name,
//! with its Hive partition columns (`system_id`, `date`) and the schema derived from the
//! contracts (so an empty or partly written lake still answers every query).

use std::path::Path;
use std::sync::Arc;

use crate::committed::{Commits, CommittedView};
use crate::layout::escape;
use crate::schema::{TABLES, arrow_schema};
use crate::store::{ObjectLake, StorageOptions, is_url};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};

/// Tables partitioned by system in the path (every table: a table without a system id is
/// written under Hive's default partition).
fn partition_cols() -> Vec<(String, DataType)> {
    vec![("system_id".to_string(), DataType::Utf8), ("date".to_string(), DataType::Utf8)]
}

/// A session with every table of the local lake `lake` registered.
pub async fn open(lake: &Path) -> Result<SessionContext> {
    open_with(lake, &StorageOptions::default()).await
}

/// A session with every lake table registered; `lake` is a directory or an object-store URL
/// (`s3://bucket/prefix`). Queries see committed units only ([`crate::committed`]). Strings are read as plain `Utf8` (not views) so results print and
/// convert the same in every engine.
pub async fn open_with(lake: &Path, storage: &StorageOptions) -> Result<SessionContext> {
    let mut config = SessionConfig::new().with_information_schema(true);
    config.options_mut().execution.parquet.schema_force_view_types = false;
    let ctx = SessionContext::new_with_config(config);
    let location = lake.to_string_lossy().to_string();
    let object = if is_url(&location) {
        let o = ObjectLake::open(&location, storage).map_err(|e| DataFusionError::External(Box::new(e)))?;
        let base = url::Url::parse(&format!("{}://{}", o.url.scheme(), o.url.host_str().unwrap_or("")))
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        ctx.register_object_store(&base, Arc::new(CommittedView::new(o.store.clone())));
        Some(o)
    } else {
        let local = url::Url::parse("file://").map_err(|e| DataFusionError::External(Box::new(e)))?;
        ctx.register_object_store(&local, Arc::new(CommittedView::new(Arc::new(object_store::local::LocalFileSystem::new()))));
        None
    };
    for t in TABLES {
        let schema = arrow_schema(t);
        let present = match &object {
            Some(o) => {
                o.list_table(t.name).await.map_err(|e| DataFusionError::External(Box::new(e)))?.iter().any(|(p, _)| p.ends_with(".parquet"))
            }
            None => !table_files(lake, storage, t.name, None).await.map_err(|e| DataFusionError::External(Box::new(e)))?.is_empty(),
        };
        if present {
            let path = format!("{}/{}/", location.trim_end_matches('/'), t.name);
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
    Ok(ctx)
}

/// The committed data files of `table` for `system` (all systems: `None`), as paths relative
/// to the lake, with their `date` partition value.
pub async fn table_files(
    lake: &Path,
    storage: &StorageOptions,
    table: &str,
    system: Option<&str>,
) -> std::io::Result<Vec<(String, String)>> {
    let location = lake.to_string_lossy().to_string();
    // The markers before the listing (see `crate::committed`).
    let (commits, names): (Commits, Vec<String>) = if is_url(&location) {
        let o = ObjectLake::open(&location, storage)?;
        let commits = Commits::of_store(o.store.as_ref(), &o.prefix).await.map_err(std::io::Error::other)?;
        (commits, o.list_table(table).await?.into_iter().map(|(p, _)| p).collect())
    } else {
        let commits = Commits::of_dir(lake)?;
        let mut out = Vec::new();
        fn walk(root: &Path, d: &Path, out: &mut Vec<String>, depth: usize) {
            for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() && depth < 3 {
                    walk(root, &p, out, depth + 1);
                } else if let Ok(rel) = p.strip_prefix(root) {
                    out.push(rel.to_string_lossy().to_string());
                }
            }
        }
        walk(lake, &lake.join(table), &mut out, 0);
        (commits, out)
    };
    let want = system.map(|s| format!("system_id={}", escape(s)));
    let mut files: Vec<(String, String)> = names
        .into_iter()
        .filter(|n| n.ends_with(".parquet") && !n.rsplit('/').next().unwrap_or("").starts_with('.'))
        .filter(|n| commits.admits(n.rsplit('/').next().unwrap_or("")))
        .filter(|n| want.as_ref().is_none_or(|w| n.split('/').nth(1) == Some(w.as_str())))
        .filter_map(|n| {
            let date = n.split('/').nth(2)?.strip_prefix("date=")?.to_string();
            Some((n, date))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// What the lake has committed: the highest commit marker of every topic partition. Equal
/// states mean a reader sees the same rows (readers see committed units only), so a result
/// read under one state stays valid until the state changes (the web view's page cache).
pub async fn commits(lake: &Path, storage: &StorageOptions) -> std::io::Result<Commits> {
    let location = lake.to_string_lossy().to_string();
    if is_url(&location) {
        let o = ObjectLake::open(&location, storage)?;
        Commits::of_store(o.store.as_ref(), &o.prefix).await.map_err(std::io::Error::other)
    } else {
        Commits::of_dir(lake)
    }
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
    use object_store::{ObjectStore, ObjectStoreExt};

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
    /// `grounding` and `review`, and `step.result`) still reads under the current schema: the
    /// added fields read as null, the rest as written.
    #[tokio::test]
    async fn files_written_before_a_nested_field_was_added_still_read() {
        let current = arrow_schema(table("trajectory_events").unwrap());
        let older = without(&without(&current, "run_ended", &["grounding", "review"]), "step", &["result"]);
        assert_ne!(older, *current);
        let line = r#"{"event_id": "r/1", "run_id": "r", "system": {"id": "s", "version": "1", "config_hash": ""}, "source": "PRODUCTION",
            "event_time": 1764489600000, "sequence": 1, "kind": "RUN_ENDED", "kafka_topic": "t", "kafka_partition": 0, "kafka_offset": 7,
            "run_ended": {"outcome": "SUCCESS", "sentences_assertive": 4, "evaluations": []}}"#;
        let mut reader = arrow::json::ReaderBuilder::new(Arc::new(older.clone())).build(std::io::Cursor::new(line)).unwrap();
        let batch = reader.next().unwrap().unwrap();
        let lake = std::env::temp_dir().join(format!("octant-lake-older-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&lake);
        let dir = lake.join("trajectory_events/system_id=s/date=2025-12-01");
        std::fs::create_dir_all(&dir).unwrap();
        let file = std::fs::File::create(dir.join("old.parquet")).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, Arc::new(older), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();

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

    /// Readers see committed units only: a unit whose files are published but whose marker is
    /// not (written now, or interrupted by a crash and not yet recovered) is not counted, not
    /// listed as evidence, and cannot fail a query when recovery deletes it; once the marker
    /// is written it is. On a directory and on an object store.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_see_committed_units_only() {
        let schema = arrow_schema(table("trajectory_events").unwrap());
        let line = r#"{"event_id": "r/1", "run_id": "r", "system": {"id": "s", "version": "1", "config_hash": ""}, "source": "PRODUCTION",
            "event_time": 1764489600000, "sequence": 1, "kind": "RUN_ENDED", "kafka_topic": "t", "kafka_partition": 0, "kafka_offset": 7,
            "run_ended": {"outcome": "SUCCESS", "evaluations": []}}"#;
        let mut reader = arrow::json::ReaderBuilder::new(schema).build(std::io::Cursor::new(line)).unwrap();
        let batch = reader.next().unwrap().unwrap();
        let dir = std::env::temp_dir().join(format!("octant-lake-committed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for location in [dir.to_string_lossy().to_string(), "memory:///lake".to_string()] {
            let lake = crate::Lake::open(&location, &StorageOptions::default()).unwrap();
            let spec = |system: &'static str| {
                vec![crate::lake::FileSpec { table: "trajectory_events", system, date: "2025-11-30", batch: batch.clone() }]
            };
            let props = crate::lake::writer_properties();
            lake.write_unit("octant.t", 0, 0, 7, spec("s"), &props).unwrap();
            // The next unit's file, published without its marker: the state a crash leaves,
            // and every unit's state for a moment before its marker.
            let object = match &lake {
                crate::Lake::Object(o) => Some(o.clone()),
                crate::Lake::Local(_) => None,
            };
            let (name, marker) = (crate::lake::file_name("octant.t", 0, 8, 9), format!("{:020}", 9));
            let pending = ["trajectory_events", "system_id=u", "date=2025-11-30", name.as_str()];
            let committed_file = format!("trajectory_events/system_id=s/date=2025-11-30/{}", crate::lake::file_name("octant.t", 0, 0, 7));
            match &object {
                Some(o) => {
                    let bytes = o
                        .store
                        .get(&o.path(&[
                            "trajectory_events",
                            "system_id=s",
                            "date=2025-11-30",
                            &crate::lake::file_name("octant.t", 0, 0, 7),
                        ]))
                        .await
                        .unwrap()
                        .bytes()
                        .await
                        .unwrap();
                    o.store.put(&o.path(&pending), object_store::PutPayload::from(bytes)).await.unwrap();
                }
                None => {
                    std::fs::create_dir_all(dir.join("trajectory_events/system_id=u/date=2025-11-30")).unwrap();
                    std::fs::copy(dir.join(&committed_file), dir.join(pending.join("/"))).unwrap();
                }
            }
            // A directory is read through `open_with` and `table_files`; an in-memory store
            // (a new one each time it is opened) through the view DataFusion lists with.
            let count = || async {
                match &object {
                    None => {
                        let ctx = open_with(Path::new(&location), &StorageOptions::default()).await.unwrap();
                        let (_, b) = query(&ctx, "SELECT count(*) AS n FROM trajectory_events").await.unwrap();
                        let n = b[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0);
                        let files = table_files(Path::new(&location), &StorageOptions::default(), "trajectory_events", None).await.unwrap();
                        (n, files.into_iter().map(|(f, _)| f).collect::<Vec<_>>())
                    }
                    Some(o) => {
                        let view = CommittedView::new(o.store.clone());
                        let table = o.path(&["trajectory_events"]);
                        let listed: Vec<_> = view.list(Some(&table)).try_collect().await.unwrap();
                        let mut by_level = Vec::new();
                        for system in view.list_with_delimiter(Some(&table)).await.unwrap().common_prefixes {
                            for date in view.list_with_delimiter(Some(&system)).await.unwrap().common_prefixes {
                                by_level.extend(view.list_with_delimiter(Some(&date)).await.unwrap().objects);
                            }
                        }
                        let strip = format!("{}/", o.prefix.as_ref());
                        let names = |v: &[object_store::ObjectMeta]| {
                            v.iter().map(|m| m.location.as_ref().strip_prefix(strip.as_str()).unwrap().to_string()).collect::<Vec<_>>()
                        };
                        assert_eq!(names(&listed), names(&by_level), "list and list_with_delimiter agree");
                        (listed.len() as i64, names(&listed))
                    }
                }
            };
            assert_eq!(count().await, (1, vec![committed_file.clone()]), "{location}: the uncommitted unit is hidden");
            match &object {
                Some(o) => {
                    o.store
                        .put(&o.path(&[crate::committed::MARKERS, "octant.t", "0", &marker]), object_store::PutPayload::default())
                        .await
                        .unwrap();
                }
                None => {
                    std::fs::create_dir_all(dir.join("_commits/octant.t/0")).unwrap();
                    std::fs::write(dir.join("_commits/octant.t/0").join(&marker), b"").unwrap();
                }
            }
            let (n, files) = count().await;
            assert_eq!((n, files.len()), (2, 2), "{location}: committed, the unit is read");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A run is looked up through the bloom filters the lake writes (`lake::LOOKUP_COLUMNS`):
    /// a run id within a row group's min/max range but not in it skips that row group without
    /// reading the column; a run that is there is found. The other engines' view of the same
    /// files (DuckDB) is the interoperability test's.
    #[tokio::test]
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
        let spec = vec![crate::lake::FileSpec { table: "trajectory_events", system: "s", date: "2025-11-30", batch }];
        let written = lake.write_unit("octant.t", 0, 0, 1, spec, &crate::lake::writer_properties()).unwrap();
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
