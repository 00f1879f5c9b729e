//! `octant lake migrate`: a lake of the layout before Delta tables (Hive directories
//! `<table>/system_id=<id>/date=<day>/`, commit markers under `_commits/`) converted into
//! Delta tables once.
//!
//! Only committed units are taken (a unit's file whose partition's highest marker is below its
//! last offset is left out, as the old reader left it out). Each file is rewritten under
//! `<table>/date=<day>/` with its `system_id` from the old path as a column, rows unchanged,
//! and each table's first commit lists them with every topic partition's marker as its
//! transaction identifier: the lake writer resumes after the markers, exactly where the old
//! one stopped (its Kafka offsets say the same). A table that is a Delta table already is
//! refused (migrating twice changes nothing). The old directories and markers stay, hidden
//! from every Delta reader, until the operator deletes them (the README says when).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::delta::{NewFile, app_id, file_stats};
use crate::lake::Lake;
use crate::layout::{MARKERS, unit_of, writer_properties};
use crate::schema::{NO_SYSTEM, TABLES, arrow_schema};

/// What a migration converted, per table: files and rows; and the files left out.
#[derive(Debug, Default, PartialEq)]
pub struct Migrated {
    pub tables: BTreeMap<String, (usize, usize)>,
    pub uncommitted: usize,
}

/// A Hive partition value as written (`%XX` escapes) back to the value.
fn unescape(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(x) = u8::from_str_radix(&v[i + 1..i + 3], 16)
        {
            out.push(x);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The highest marker of every topic partition of the old lake at `root`.
fn markers(root: &Path) -> io::Result<BTreeMap<(String, i32), i64>> {
    let mut out = BTreeMap::new();
    for topic in std::fs::read_dir(root.join(MARKERS)).into_iter().flatten() {
        let topic = topic?;
        for partition in std::fs::read_dir(topic.path())? {
            let partition = partition?;
            let Ok(p) = partition.file_name().to_string_lossy().parse::<i32>() else { continue };
            for marker in std::fs::read_dir(partition.path())? {
                if let Ok(last) = marker?.file_name().to_string_lossy().parse::<i64>() {
                    let e = out.entry((topic.file_name().to_string_lossy().to_string(), p)).or_insert(last);
                    *e = (*e).max(last);
                }
            }
        }
    }
    Ok(out)
}

/// Converts the old-layout lake in the directory `root` (module docs).
pub fn migrate(root: &Path) -> io::Result<Migrated> {
    let marks = markers(root)?;
    if marks.is_empty() {
        return Err(io::Error::other(format!("{} has no commit markers ({MARKERS}/): not a lake of the old layout", root.display())));
    }
    let lake = Lake::new(root);
    let props = writer_properties();
    let txns: Vec<(String, i64)> = marks.iter().map(|((t, p), last)| (app_id(t, *p), *last)).collect();
    let mut done = Migrated::default();
    for t in TABLES {
        let dir = root.join(t.name);
        if !dir.is_dir() {
            continue;
        }
        if dir.join("_delta_log").exists() {
            return Err(io::Error::other(format!("{} is a Delta table already: nothing migrated", dir.display())));
        }
        let schema = arrow_schema(t);
        let mut files = Vec::new();
        let mut rows = 0;
        for system_dir in std::fs::read_dir(&dir)? {
            let system_dir = system_dir?.path();
            let Some(system) = system_dir.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix("system_id=")).map(unescape)
            else {
                continue;
            };
            for date_dir in std::fs::read_dir(&system_dir)? {
                let date_dir = date_dir?.path();
                let Some(date) = date_dir.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix("date=")).map(str::to_string)
                else {
                    continue;
                };
                for f in std::fs::read_dir(&date_dir)? {
                    let f = f?.path();
                    let name = f.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                    let Some((topic, partition, first, last)) = unit_of(&name) else { continue };
                    if marks.get(&(topic.to_string(), partition)).is_none_or(|&m| m < last) {
                        done.uncommitted += 1;
                        continue;
                    }
                    let system = (system != NO_SYSTEM).then_some(system.as_str());
                    let (bytes, n) = with_system(&f, system, &props)?;
                    let new_name = crate::layout::file_name(topic, partition, first, last, &crate::layout::new_tag());
                    let out_dir = dir.join(format!("date={date}"));
                    std::fs::create_dir_all(&out_dir)?;
                    std::fs::write(out_dir.join(&new_name), &bytes.0)?;
                    files.push(NewFile {
                        path: format!("date={date}/{new_name}"),
                        date: date.clone(),
                        size: bytes.0.len() as i64,
                        stats: bytes.1,
                    });
                    rows += n;
                }
            }
        }
        let n = files.len();
        crate::store::block_on(lake.tables.import(t.name, &schema, &txns, files))?;
        done.tables.insert(t.name.to_string(), (n, rows));
    }
    Ok(done)
}

/// An old file's rows with a `system_id` column (the path's value) if they lack one: the new
/// file's bytes and log statistics, and its rows.
fn with_system(
    path: &Path,
    system: Option<&str>,
    props: &parquet::file::properties::WriterProperties,
) -> io::Result<((Vec<u8>, serde_json::Value), usize)> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path)?)
        .map_err(io::Error::other)?
        .build()
        .map_err(io::Error::other)?;
    let mut batches = Vec::new();
    for b in reader {
        let b = b.map_err(io::Error::other)?;
        let b = if b.schema().field_with_name("system_id").is_ok() {
            b
        } else {
            let mut fields: Vec<Field> = b.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
            fields.insert(3.min(fields.len()), Field::new("system_id", DataType::Utf8, true));
            let mut columns: Vec<ArrayRef> = b.columns().to_vec();
            columns.insert(3.min(columns.len()), Arc::new(StringArray::from(vec![system; b.num_rows()])));
            RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(io::Error::other)?
        };
        batches.push(b);
    }
    let schema = batches.first().map(|b| b.schema()).ok_or_else(|| io::Error::other(format!("{} has no rows", path.display())))?;
    let all = arrow::compute::concat_batches(&schema, &batches).map_err(io::Error::other)?;
    Ok(((crate::layout::parquet_bytes(&all, props)?, file_stats(&all)), all.num_rows()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use parquet::arrow::ArrowWriter;

    #[test]
    fn partition_values_unescape() {
        assert_eq!(unescape("a%2Fb%3Dc%20d"), "a/b=c d");
        assert_eq!(unescape("agent-a"), "agent-a");
        assert_eq!(unescape("%2E%2E"), "..");
        assert_eq!(unescape("50%"), "50%");
    }

    /// An old lake: two committed units and one a crash left uncommitted; migrated, the Delta
    /// tables hold the committed rows with their systems, the identifiers equal the markers,
    /// and migrating again is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_lake_becomes_delta_tables_once() {
        let root = std::env::temp_dir().join(format!("octant-lake-migrate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let old = |system: &str, first: i64, last: i64| {
            let dir = root.join(format!("raw_records/system_id={system}/date=2026-11-30"));
            std::fs::create_dir_all(&dir).unwrap();
            let n = (last - first + 1) as usize;
            let batch = RecordBatch::try_from_iter([
                ("kafka_topic", Arc::new(StringArray::from(vec!["octant.dlq"; n])) as ArrayRef),
                ("kafka_partition", Arc::new(arrow::array::Int32Array::from(vec![0; n])) as ArrayRef),
                ("kafka_offset", Arc::new(Int64Array::from_iter_values(first..=last)) as ArrayRef),
                ("payload", Arc::new(StringArray::from(vec!["00"; n])) as ArrayRef),
                ("error", Arc::new(StringArray::from(vec!["x"; n])) as ArrayRef),
            ])
            .unwrap();
            let name = format!("octant.dlq-0-{first:020}-{last:020}.parquet");
            let mut w = ArrowWriter::try_new(std::fs::File::create(dir.join(name)).unwrap(), batch.schema(), None).unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
        };
        old("a%2Fb", 0, 4);
        old(NO_SYSTEM, 5, 9);
        old("c", 10, 14);
        std::fs::create_dir_all(root.join("_commits/octant.dlq/0")).unwrap();
        std::fs::write(root.join("_commits/octant.dlq/0").join(format!("{:020}", 9)), b"").unwrap();

        let done = migrate(&root).unwrap();
        assert_eq!(done, Migrated { tables: [("raw_records".to_string(), (2, 10))].into(), uncommitted: 1 });
        let lake = Lake::new(&root);
        assert_eq!(lake.committed("raw_records", "octant.dlq", 0).unwrap(), Some(9));
        let ctx = crate::reader::open(&root).await.unwrap();
        let (_, b) = crate::reader::query(
            &ctx,
            "SELECT count(*) AS n, count(DISTINCT kafka_offset) AS d, min(system_id) AS s, count(system_id) AS c FROM raw_records",
        )
        .await
        .unwrap();
        use arrow::array::AsArray;
        assert_eq!(b[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0), 10);
        assert_eq!(b[0].column(1).as_primitive::<arrow::datatypes::Int64Type>().value(0), 10);
        assert_eq!(b[0].column(2).as_string::<i32>().value(0), "a/b", "the system from the old path");
        assert_eq!(b[0].column(3).as_primitive::<arrow::datatypes::Int64Type>().value(0), 5, "no system: null");
        assert!(migrate(&root).is_err(), "migrating twice is refused");
        let _ = std::fs::remove_dir_all(&root);
    }
}
