//! Issue 43's write/commit micro-benchmark: COMMITS appends of ROWS observations each (SYSTEMS
//! systems, one date partition), every commit carrying a transaction identifier (app id per
//! topic-partition, version = last offset) as the lake writer would; then the table reopened
//! and the identifier read back. Prints one table.

use std::sync::Arc;
use std::time::Instant;

use deltalake_core::DeltaTableBuilder;
use deltalake_core::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use deltalake_core::arrow::datatypes::{DataType, Field, Schema};
use deltalake_core::kernel::transaction::CommitProperties;
use deltalake_core::kernel::{DataType as DeltaType, PrimitiveType, StructField, Transaction};
use deltalake_core::writer::{DeltaWriter, RecordBatchWriter};

const APP: &str = "octant.observations-0";

fn batch(commit: usize, rows: usize, systems: usize) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("system_id", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("run_id", DataType::Utf8, false),
        Field::new("event_time", DataType::Int64, false),
        Field::new("value", DataType::Float64, false),
        Field::new("date", DataType::Utf8, false),
    ]));
    // Sorted by system and metric, as the lake writer would sort a unit.
    let mut keys: Vec<(String, &str, usize)> = (0..rows)
        .map(|i| (format!("sys-{:05}", (commit * rows + i) % systems), ["task_success", "unsafe_action_rate"][i % 2], i))
        .collect();
    keys.sort();
    let system: StringArray = keys.iter().map(|k| Some(k.0.as_str())).collect();
    let metric: StringArray = keys.iter().map(|k| Some(k.1)).collect();
    let run: StringArray = keys.iter().map(|k| Some(format!("run-{commit}-{}", k.2))).collect();
    let t: Int64Array = keys.iter().map(|k| Some(1_796_400_000_000 + (commit * rows + k.2) as i64)).collect();
    let v: Float64Array = keys.iter().map(|k| Some((k.2 % 2) as f64)).collect();
    let date: StringArray = keys.iter().map(|_| Some("2026-12-04")).collect();
    RecordBatch::try_new(schema, vec![Arc::new(system), Arc::new(metric), Arc::new(run), Arc::new(t), Arc::new(v), Arc::new(date)]).unwrap()
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn count(dir: &std::path::Path, ext: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += count(&p, ext);
        } else if p.to_string_lossy().ends_with(ext) {
            n += 1;
        }
    }
    n
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("numbers")).collect();
    let (commits, rows, systems) =
        (args.first().copied().unwrap_or(200), args.get(1).copied().unwrap_or(1000), args.get(2).copied().unwrap_or(100));
    let dir = std::env::temp_dir().join(format!("octant-delta-spike-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = url::Url::from_directory_path(&dir).unwrap();
    let table = DeltaTableBuilder::from_url(url.clone()).unwrap().build().unwrap();
    let columns = [
        ("system_id", PrimitiveType::String),
        ("metric", PrimitiveType::String),
        ("run_id", PrimitiveType::String),
        ("event_time", PrimitiveType::Long),
        ("value", PrimitiveType::Double),
        ("date", PrimitiveType::String),
    ]
    .map(|(n, t)| StructField::new(n.to_string(), DeltaType::Primitive(t), false));
    let mut table = table.create().with_columns(columns).with_partition_columns(["date"]).await.unwrap();

    let mut lat = Vec::with_capacity(commits);
    let started = Instant::now();
    for c in 0..commits {
        let t0 = Instant::now();
        let last_offset = ((c + 1) * rows - 1) as i64;
        let props = CommitProperties::default().with_application_transaction(Transaction::new(APP, last_offset));
        let mut w = RecordBatchWriter::for_table(&table).unwrap().with_commit_properties(props);
        w.write(batch(c, rows, systems)).await.unwrap();
        w.flush_and_commit(&mut table).await.unwrap();
        lat.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    let total = started.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);

    let t0 = Instant::now();
    let mut reopened = DeltaTableBuilder::from_url(url).unwrap().build().unwrap();
    reopened.load().await.unwrap();
    let version = reopened.snapshot().unwrap().transaction_version(reopened.log_store().as_ref(), APP).await.unwrap();
    let reopen_ms = t0.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(version, Some((commits * rows - 1) as i64), "the last commit's offset comes back");

    println!(
        "| commits | rows/commit | systems | commit p50 | commit p95 | rows/s | data files | log files (json, checkpoint) | reopen + txn version |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {commits} | {rows} | {systems} | {:.1} ms | {:.1} ms | {:.0} | {} | {}, {} | {:.1} ms |",
        pct(&lat, 0.5),
        pct(&lat, 0.95),
        (commits * rows) as f64 / total,
        count(&dir, ".parquet") - count(&dir.join("_delta_log"), ".parquet"),
        count(&dir.join("_delta_log"), ".json"),
        count(&dir.join("_delta_log"), ".checkpoint.parquet"),
        reopen_ms
    );
    let _ = std::fs::remove_dir_all(&dir);
}
