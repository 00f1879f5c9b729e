//! Files per table before and after compaction (issue 43): `UNITS` units of one input
//! partition, as the lake writer writes them at its default settings (one unit a minute:
//! `max_file_age` 60 s), each holding two observations of every system, then one compaction
//! (`octant_lake::maintain`, default target 64 MiB). Prints a table: files the table's log
//! lists before and after, rows, and the time to compact.
//!
//! `cargo bench -p octant-lake --bench compaction -- [UNITS]` (default 144: 2.4 hours of one
//! partition; a day is 1,440 units per partition).

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use octant_lake::lake::{FileSpec, Lake, TablePart, writer_properties};
use octant_lake::maintain::TARGET_FILE_BYTES;

const TABLE: &str = "bench_observations";

fn unit(systems: usize, first: i64) -> RecordBatch {
    let n = systems * 2;
    let offsets: Vec<i64> = (first..first + n as i64).collect();
    let mut system: Vec<String> = (0..n).map(|i| format!("agent-{:05}", i / 2)).collect();
    system.sort();
    RecordBatch::try_from_iter([
        ("kafka_topic", Arc::new(StringArray::from(vec!["octant.observations"; n])) as _),
        ("kafka_partition", Arc::new(Int32Array::from(vec![0; n])) as _),
        ("kafka_offset", Arc::new(Int64Array::from(offsets)) as _),
        ("system_id", Arc::new(StringArray::from(system)) as _),
        ("metric", Arc::new(StringArray::from(vec!["task_success"; n])) as _),
        ("run_id", Arc::new(StringArray::from((0..n).map(|i| format!("run-{first}-{i}")).collect::<Vec<_>>())) as _),
        ("value", Arc::new(Float64Array::from((0..n).map(|i| (i % 2) as f64).collect::<Vec<_>>())) as _),
    ])
    .expect("a batch")
}

fn files(lake: &Lake) -> usize {
    octant_lake::store::block_on(lake.tables.files(TABLE)).expect("the table's files").len()
}

fn main() {
    let units: i64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(144);
    let props = writer_properties();
    println!("| systems | units | rows per unit | files before | files after | rows | compaction |");
    println!("|---|---|---|---|---|---|---|");
    for systems in [100, 10_000] {
        let dir = std::env::temp_dir().join(format!("octant-compaction-bench-{systems}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let lake = Lake::new(&dir);
        let (mut first, mut version) = (0i64, None);
        for _ in 0..units {
            let batch = unit(systems, first);
            let last = first + batch.num_rows() as i64 - 1;
            let part = TablePart { table: TABLE, expected: version, files: vec![FileSpec { date: "2026-12-05".into(), batch }] };
            lake.write_unit("octant.observations", 0, first, last, vec![part], &props).expect("a unit");
            version = Some(last);
            first = last + 1;
        }
        let before = files(&lake);
        let started = Instant::now();
        let done = lake.compact(TABLE, None, TARGET_FILE_BYTES, &props).expect("compaction");
        let took = started.elapsed();
        println!("| {systems} | {units} | {} | {before} | {} | {} | {:.2} s |", systems * 2, files(&lake), done.rows, took.as_secs_f64());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
