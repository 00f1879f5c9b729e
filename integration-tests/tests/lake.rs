//! The lake writer against a real broker: every record of every topic in the lake exactly
//! once after repeated SIGKILLs, redaction applied, the Delta tables read by independent
//! readers (the protocol's log replayed by hand and PyPI `deltalake` listing the files, the
//! `parquet` crate and DuckDB reading them) and by DataFusion as the profiler uses it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Int32Type, Int64Type};
use octant_contracts::topics;
use octant_gen::FleetSpec;
use octant_integration_tests::*;

use crate::service_command;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use prometheus::Registry;
use tokio_util::sync::CancellationToken;

/// What the independent Delta reader finds in every lake table
/// ([`octant_integration_tests::delta_read`]).
pub(crate) fn delta_read(lake: &Path) -> BTreeMap<String, serde_json::Value> {
    let tables: Vec<&str> = octant_lake::schema::TABLES.iter().map(|t| t.name).collect();
    octant_integration_tests::delta_read(lake, &tables, None)
}

/// (topic, partition) → offsets, counting repeats; and every value of one string column path.
pub(crate) struct LakeContents {
    pub offsets: BTreeMap<(String, i32), Vec<i64>>,
    pub rows_by_table: BTreeMap<String, usize>,
    step_arguments: Vec<Option<String>>,
}

/// Every row of every file the tables' logs list (the independent Delta reader's lists), read
/// with the `parquet` crate.
fn read_lake(root: &Path) -> LakeContents {
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for (table, found) in delta_read(root) {
        for f in found["files"].as_array().into_iter().flatten() {
            files.push((table.clone(), PathBuf::from(f.as_str().unwrap())));
        }
    }
    let mut c = LakeContents { offsets: BTreeMap::new(), rows_by_table: BTreeMap::new(), step_arguments: Vec::new() };
    for (table, f) in files {
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&f).unwrap()).unwrap().build().unwrap();
        for batch in reader {
            let b = batch.unwrap();
            *c.rows_by_table.entry(table.clone()).or_default() += b.num_rows();
            let topic = b.column_by_name("kafka_topic").unwrap().as_string::<i32>().clone();
            let part = b.column_by_name("kafka_partition").unwrap().as_primitive::<Int32Type>().clone();
            let off = b.column_by_name("kafka_offset").unwrap().as_primitive::<Int64Type>().clone();
            for i in 0..b.num_rows() {
                c.offsets.entry((topic.value(i).to_string(), part.value(i))).or_default().push(off.value(i));
            }
            if table == "trajectory_events" {
                let step = b.column_by_name("step").unwrap().as_struct();
                let args = step.column_by_name("arguments").unwrap().as_string::<i32>();
                for i in 0..b.num_rows() {
                    c.step_arguments.push((step.is_valid(i) && args.is_valid(i)).then(|| args.value(i).to_string()));
                }
            }
        }
    }
    c
}

/// Every offset of `produced` is in the lake once, and nothing else is: what was read.
pub(crate) fn assert_exactly_once(lake: &Path, produced: &BTreeMap<(String, i32), BTreeSet<i64>>) -> LakeContents {
    let c = read_lake(lake);
    let mut duplicates = 0;
    for (tp, want) in produced {
        let got = c.offsets.get(tp).cloned().unwrap_or_default();
        let set: BTreeSet<i64> = got.iter().copied().collect();
        duplicates += got.len() - set.len();
        let missing: Vec<i64> = want.difference(&set).copied().collect();
        let extra: Vec<i64> = set.difference(want).copied().collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{}/{}: {} offsets missing from the lake (first {:?}), {} not produced (first {:?})",
            tp.0,
            tp.1,
            missing.len(),
            missing.first(),
            extra.len(),
            extra.first()
        );
    }
    assert!(c.offsets.keys().all(|k| produced.contains_key(k)), "no partition the topics do not have");
    assert_eq!(duplicates, 0, "no record twice");
    c
}

/// A child process killed when dropped (also when the test fails).
pub(crate) struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn lake_writer_process(env: &TestEnv, lake: &Path, admin: std::net::SocketAddr) -> Child {
    lake_writer_process_with(env, lake, admin, &[])
}

fn lake_writer_process_with(env: &TestEnv, lake: &Path, admin: std::net::SocketAddr, extra: &[(String, String)]) -> Child {
    let mut cmd = service_command("lake_writer");
    cmd.env("OCTANT_LAKE_WRITER__KAFKA__BROKERS", &env.kafka.brokers)
        .env("OCTANT_LAKE_WRITER__KAFKA__TOPIC_PREFIX", &env.kafka.topic_prefix)
        .env("OCTANT_LAKE_WRITER__GROUP_ID", format!("{}lake", env.kafka.topic_prefix))
        .env("OCTANT_LAKE_WRITER__ADMIN_ADDR", admin.to_string())
        .env("OCTANT_LAKE_WRITER__LAKE", lake)
        .env("OCTANT_LAKE_WRITER__MAX_FILE_BYTES", "200000")
        .env("OCTANT_LAKE_WRITER__MAX_FILE_AGE", "700ms")
        .env("OCTANT_LAKE_WRITER__COMMIT_INTERVAL", "200ms")
        // Background compaction every second: SIGKILLs land in compactions too.
        .env("OCTANT_LAKE_WRITER__COMPACT_EVERY", "1s");
    cmd.envs(extra.iter().cloned());
    Child(spawn_child(cmd))
}

/// Every record of every topic is in the lake exactly once after the lake writer was
/// SIGKILLed repeatedly while the pipeline streamed: four times over ~25,000 trajectory events
/// in the test tier, ten times over ~200,000 under the soak command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lake_holds_every_record_exactly_once_across_crashes() {
    let env = TestEnv::new("lake", 4).await;
    let lake = std::env::temp_dir().join(format!("octant-lake-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&lake);
    let mut fleet = FleetSpec::demo(4, 31, 1_764_489_600_000);
    fleet.poison = 0.005;
    // About 10.4 trajectory events per run: ~25,000 (~200,000 under the soak command).
    let records = octant_gen::generate(&fleet, 0, sized(600, 5_100));
    let produced_events = records.len();
    assert!(produced_events >= sized(20_000, 200_000), "{produced_events} events");
    let (rounds, rate) = sized((4, 2000.0), (10, 4000.0));
    let shutdown = CancellationToken::new();
    let scorer = octant_scorer::start(env.scorer_config(), Registry::new(), shutdown.clone()).await.unwrap();
    let mut agg_cfg = octant_aggregator::AggregatorConfig { stream: env.stream("aggregator"), ..Default::default() };
    agg_cfg.evaluation.window.length = Duration::from_secs(600);
    // The aggregator is here to fill the windows topic; 100 replicates keep its CPU share small.
    agg_cfg.evaluation.bootstrap.replicates = 100;
    let agg = octant_aggregator::start(agg_cfg, Registry::new(), shutdown.clone()).await.unwrap();
    let kafka = env.kafka.clone();
    let producing = tokio::spawn(async move { octant_gen::produce(&kafka, records, Some(rate)).await });

    // SIGKILLs spread over the stream (~12 s; ~50 s under soak): each round lives 2–6 s once it
    // has written something (a different time each round, so the kills land at different points
    // of a unit).
    let mut kills = 0;
    let mut written_before = 0.0;
    while kills < rounds {
        let admin: std::net::SocketAddr = format!("127.0.0.1:{}", octant_runtime::broker::free_port()).parse().unwrap();
        let child = lake_writer_process(&env, &lake, admin);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            assert!(tokio::time::Instant::now() < deadline, "lake writer made no progress (round {kills})");
            tokio::time::sleep(Duration::from_millis(150 + 70 * (kills % 4) as u64)).await;
            if tokio::net::TcpStream::connect(admin).await.is_err() {
                continue;
            }
            if total(&scrape(admin).await, "octant_lake_writer_records_total") > 0.0 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(2_000 + 1_370 * (kills as u64 * 7 % 4))).await;
        written_before += total(&scrape(admin).await, "octant_lake_writer_records_total");
        drop(child); // SIGKILL
        kills += 1;
    }
    producing.await.unwrap().unwrap();
    eprintln!("lake writer SIGKILLed {kills} times; {written_before} records written before the kills");

    // Let the scorer finish its input, then stop the pipeline (it drains), so the topics stop
    // growing.
    wait_metrics(scorer.admin_addr, "the scorer read every event", |m| {
        total(m, "octant_scorer_events_consumed_total") >= produced_events as f64
    })
    .await;
    shutdown.cancel();
    scorer.task.await.unwrap().unwrap();
    agg.task.await.unwrap().unwrap();

    // The last lake writer runs to the end of every topic, then drains.
    let stop = CancellationToken::new();
    let cfg = octant_lake_writer::LakeWriterConfig {
        stream: env.stream("lake"),
        lake: lake.clone(),
        max_file_bytes: 200_000,
        max_file_age: Duration::from_millis(700),
        compact_every: Duration::from_secs(1),
        ..Default::default()
    };
    let writer = octant_lake_writer::start(cfg, Registry::new(), stop.clone()).await.unwrap();
    // What was produced: every topic read back to its end (partition EOF: tansu's reported
    // high watermark can be a batch early).
    let produced = topic_offsets(&env).await;
    let produced_total: usize = produced.values().map(BTreeSet::len).sum();
    caught_up(&lake, &produced, Duration::from_secs(400)).await;
    stop.cancel();
    writer.task.await.unwrap().unwrap();

    let c = assert_exactly_once(&lake, &produced);
    assert!(
        c.rows_by_table.get("trajectory_events").copied().unwrap_or(0) + c.rows_by_table.get("raw_records").copied().unwrap_or(0)
            >= produced_events
    );
    for t in ["trajectory_events", "observations", "watermarks", "metric_windows", "dimension_profiles", "dead_letters", "raw_records"] {
        assert!(c.rows_by_table.get(t).copied().unwrap_or(0) > 0, "table {t} has rows: {:?}", c.rows_by_table);
    }
    // Tool arguments are redacted by default.
    assert!(c.step_arguments.iter().flatten().count() > 100);
    assert!(c.step_arguments.iter().flatten().all(|a| a == "[redacted]"));
    eprintln!(
        "lake: {} records in {} tables, every offset of {} topic partitions exactly once: {:?}",
        c.rows_by_table.values().sum::<usize>(),
        c.rows_by_table.len(),
        produced.len(),
        c.rows_by_table
    );
    // The independent reader agrees: DuckDB reads the files the logs list, with their date
    // partitions and systems; every table's log holds each partition's transaction identifier.
    let duck = delta_read(&lake);
    for (t, n) in &c.rows_by_table {
        assert_eq!(duck[t]["rows"].as_u64(), Some(*n as u64), "DuckDB's row count of {t}");
        assert_eq!(duck[t]["distinct_offsets"], duck[t]["rows"], "{t}: no (topic, partition, offset) twice");
        assert!(duck[t]["dates"].as_u64() >= Some(1), "{t}: date partitions visible to DuckDB");
    }
    assert!(duck["observations"]["systems"].as_u64() >= Some(4), "every system's rows: {:?}", duck["observations"]);
    for ((topic, partition), offs) in &produced {
        let home = octant_lake::lake::home_table(topic);
        let txn = &duck[home]["txns"][octant_lake::delta::app_id(topic, *partition)];
        assert_eq!(txn.as_i64(), offs.iter().next_back().copied(), "{home}'s identifier of {topic}/{partition}: its last offset");
    }
    // Background compaction ran (and was killed too): OPTIMIZE commits in the logs, and still
    // every offset once above.
    let optimized: usize = ["trajectory_events", "observations", "raw_records"]
        .iter()
        .flat_map(|t| std::fs::read_dir(lake.join(t).join("_delta_log")).unwrap().flatten())
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter(|e| std::fs::read_to_string(e.path()).unwrap().contains("\"operation\":\"OPTIMIZE\""))
        .count();
    assert!(optimized > 0, "background compaction committed");
    eprintln!("{optimized} background compactions committed to trajectory_events, observations and raw_records");
    eprintln!(
        "DuckDB over the logs' files reads the same row counts: {:?}",
        duck.iter().map(|(t, v)| (t, v["rows"].clone(), v["files"].as_array().map_or(0, Vec::len))).collect::<Vec<_>>()
    );

    // DataFusion (the profiler's engine) over the same lake: no (topic, partition, offset) twice
    // in any table, and the offsets of every topic partition are exactly what was produced.
    let ctx = octant_lake::reader::open(&lake).await.unwrap();
    let mut in_sql: BTreeMap<(String, i32), BTreeSet<i64>> = BTreeMap::new();
    for t in c.rows_by_table.keys() {
        let dup = format!("SELECT kafka_topic, kafka_partition, kafka_offset, count(*) AS n FROM {t} GROUP BY 1, 2, 3 HAVING count(*) > 1");
        let (_, batches) = octant_lake::reader::query(&ctx, &dup).await.unwrap();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 0, "{dup} returns nothing");
        let (_, batches) =
            octant_lake::reader::query(&ctx, &format!("SELECT kafka_topic, kafka_partition, kafka_offset FROM {t}")).await.unwrap();
        let mut rows = 0;
        for b in batches {
            rows += b.num_rows();
            let topic = arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
            let (topic, part, off) =
                (topic.as_string::<i32>(), b.column(1).as_primitive::<Int32Type>(), b.column(2).as_primitive::<Int64Type>());
            for i in 0..b.num_rows() {
                in_sql.entry((topic.value(i).to_string(), part.value(i))).or_default().insert(off.value(i));
            }
        }
        assert_eq!(rows, c.rows_by_table[t], "DataFusion's row count of {t}");
    }
    assert_eq!(in_sql, produced, "the set of offsets in the lake (DataFusion) equals what was produced");
    eprintln!(
        "DataFusion: no duplicate (topic, partition, offset) in {} tables; offsets equal the {} produced records",
        c.rows_by_table.len(),
        produced_total
    );
    let _ = std::fs::remove_dir_all(&lake);
}

/// Waits until every partition's home table's version reaches its last produced offset
/// (cheap: no need to read the lake back while it is being written).
async fn caught_up(lake: &Path, produced: &BTreeMap<(String, i32), BTreeSet<i64>>, within: Duration) {
    let marks = octant_lake::lake::Lake::new(lake);
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let behind: Vec<&(String, i32)> = produced
            .iter()
            .filter(|((t, p), offs)| {
                let home = octant_lake::lake::home_table(t);
                marks.committed(home, t, *p).unwrap().is_none_or(|c| c < *offs.iter().next_back().unwrap())
            })
            .map(|(k, _)| k)
            .collect();
        if behind.is_empty() {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "lake writer did not catch up on {behind:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A zombie writer, deterministically: writer A writes its first unit's files and is held
/// just before committing them (`OCTANT_LAKE_HOLD_COMMIT`), then paused (SIGSTOP) past its
/// Kafka session timeout; writer B takes every partition over and writes the whole topic;
/// A resumes and tries its commit. It is refused (`errors_total{kind="fenced"}`), its files
/// stay in no table, and the independent reader finds every offset exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_writer_cannot_commit_over_the_partitions_new_owner() {
    let env = TestEnv::new("zombie", 2).await;
    let lake = std::env::temp_dir().join(format!("octant-lake-zombie-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&lake);
    let hold = std::env::temp_dir().join(format!("octant-lake-zombie-hold-{}", std::process::id()));
    let held = hold.with_extension("held");
    let _ = std::fs::remove_file(&held);
    std::fs::write(&hold, b"").unwrap();
    let records = octant_gen::generate(&FleetSpec::demo(2, 7, 1_764_489_600_000), 0, 40);
    octant_gen::produce(&env.kafka, records, None).await.unwrap();
    // No background compaction: a file on disk that no log lists is then the zombie's.
    let quiet = |mut v: Vec<(String, String)>| {
        v.push(("OCTANT_LAKE_WRITER__COMPACT_EVERY".into(), "0s".into()));
        v
    };
    let admin_a: std::net::SocketAddr = format!("127.0.0.1:{}", octant_runtime::broker::free_port()).parse().unwrap();
    let a = lake_writer_process_with(&env, &lake, admin_a, &quiet(vec![("OCTANT_LAKE_HOLD_COMMIT".into(), hold.display().to_string())]));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !held.exists() {
        assert!(tokio::time::Instant::now() < deadline, "writer A never reached its first commit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A holds a unit whose files are written; paused, its heartbeats stop too.
    unsafe { libc::kill(a.0.id() as i32, libc::SIGSTOP) };
    let produced = topic_offsets(&env).await;
    let admin_b: std::net::SocketAddr = format!("127.0.0.1:{}", octant_runtime::broker::free_port()).parse().unwrap();
    let b = lake_writer_process_with(&env, &lake, admin_b, &quiet(vec![]));
    // B gets the partitions once A's session (10 s) lapses, and writes everything.
    caught_up(&lake, &produced, Duration::from_secs(180)).await;
    let fenced = |m: &BTreeMap<String, f64>| {
        m.iter()
            .filter(|(k, _)| k.starts_with("octant_lake_writer_errors_total") && k.contains("kind=\"fenced\""))
            .map(|(_, v)| *v)
            .sum::<f64>()
    };
    // A goes on: its commit finds B's version of the partition where it expected none.
    std::fs::remove_file(&hold).unwrap();
    unsafe { libc::kill(a.0.id() as i32, libc::SIGCONT) };
    let m = wait_metrics(admin_a, "writer A's commit refused", |m| fenced(m) >= 1.0).await;
    eprintln!("zombie writer refused {} time(s)", fenced(&m));
    assert_eq!(fenced(&scrape(admin_b).await), 0.0, "the new owner was never refused");
    drop(a);
    drop(b);
    let c = assert_exactly_once(&lake, &produced);
    // A's refused files are on disk, in no table.
    let listed: BTreeSet<PathBuf> = delta_read(&lake)
        .values()
        .flat_map(|t| t["files"].as_array().cloned().unwrap_or_default())
        .map(|f| PathBuf::from(f.as_str().unwrap()).canonicalize().unwrap())
        .collect();
    let on_disk: Vec<PathBuf> = std::fs::read_dir(&lake)
        .unwrap()
        .flatten()
        .flat_map(|t| std::fs::read_dir(t.path()).into_iter().flatten().flatten())
        .filter(|d| d.file_name().to_string_lossy().starts_with("date="))
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten().map(|f| f.path().canonicalize().unwrap()))
        .collect();
    let unlisted = on_disk.iter().filter(|f| !listed.contains(*f)).count();
    assert!(unlisted >= 1, "the zombie's files are on disk and in no table ({} files, {} listed)", on_disk.len(), listed.len());
    eprintln!("every offset once ({:?}); {unlisted} file(s) of the refused unit in no table", c.rows_by_table);
    let _ = std::fs::remove_dir_all(&lake);
    let _ = std::fs::remove_file(&held);
}

/// (topic, partition) → every offset on it, for every topic the lake writer reads, each read
/// to its end (call once the producers have stopped).
pub(crate) async fn topic_offsets(env: &TestEnv) -> BTreeMap<(String, i32), BTreeSet<i64>> {
    let mut out: BTreeMap<(String, i32), BTreeSet<i64>> = BTreeMap::new();
    for base in topics::ALL {
        let t = env.kafka.topic(base);
        for r in octant_runtime::topic::read_to_end(&env.kafka, &t, Duration::from_secs(60)).await.unwrap() {
            out.entry((t.clone(), r.partition)).or_default().insert(r.offset);
        }
    }
    out
}

/// An S3-compatible server (moto, installed by `scripts/setup.sh` into `.octant/s3`) on a
/// free loopback port, with bucket `lake`.
struct S3Server {
    _child: Child,
    endpoint: String,
}

async fn s3_server() -> S3Server {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.octant/s3");
    assert!(root.join("moto").exists(), "moto (the S3 server) not found in {} (run scripts/setup.sh)", root.display());
    let port = octant_runtime::broker::free_port();
    let mut cmd = std::process::Command::new("python3");
    cmd.env("PYTHONPATH", &root)
        .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = Child(spawn_child(cmd));
    let addr = format!("127.0.0.1:{port}");
    // moto imports boto and flask first: seconds on an idle machine, over 30 s on a loaded one
    // (seen in CI with builds running beside).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            s.write_all(format!("PUT /lake HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).await.unwrap();
            assert!(answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"), "bucket created: {answer}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the S3 server did not start on {addr}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    S3Server { _child: child, endpoint: format!("http://{addr}") }
}

/// The lake on an object store (S3 API over loopback): exactly once across SIGKILLs with
/// create-only puts, then read back by DataFusion through the same URL and profiled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lake_on_an_object_store_is_exactly_once_and_readable() {
    let s3 = s3_server().await;
    let env = TestEnv::new("s3lake", 2).await;
    let url = format!("s3://lake/run-{}", std::process::id());
    let storage: Vec<(String, String)> = [
        ("AWS_ENDPOINT", s3.endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing-secret"),
    ]
    .iter()
    .map(|(k, v)| (format!("OCTANT_LAKE_WRITER__STORAGE__{k}"), v.to_string()))
    .collect();
    let options = octant_lake::store::StorageOptions(
        storage.iter().map(|(k, v)| (k.trim_start_matches("OCTANT_LAKE_WRITER__STORAGE__").to_ascii_lowercase(), v.clone())).collect(),
    );
    let mut fleet = FleetSpec::demo(2, 5, 1_764_489_600_000);
    fleet.poison = 0.01;
    let records = octant_gen::generate(&fleet, 0, 300);
    let shutdown = CancellationToken::new();
    let scorer = octant_scorer::start(env.scorer_config(), Registry::new(), shutdown.clone()).await.unwrap();
    let kafka = env.kafka.clone();
    let producing = tokio::spawn(async move { octant_gen::produce(&kafka, records, Some(1500.0)).await });
    for round in 0..3 {
        let admin: std::net::SocketAddr = format!("127.0.0.1:{}", octant_runtime::broker::free_port()).parse().unwrap();
        let child = lake_writer_process_with(&env, Path::new(&url), admin, &storage);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            assert!(tokio::time::Instant::now() < deadline, "lake writer on S3 made no progress (round {round})");
            tokio::time::sleep(Duration::from_millis(200)).await;
            if tokio::net::TcpStream::connect(admin).await.is_ok() && total(&scrape(admin).await, "octant_lake_writer_records_total") > 0.0
            {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(700 + 500 * round)).await;
        drop(child); // SIGKILL
    }
    producing.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    shutdown.cancel();
    scorer.task.await.unwrap().unwrap();

    let stop = CancellationToken::new();
    let cfg = octant_lake_writer::LakeWriterConfig {
        stream: env.stream("lake"),
        lake: url.clone().into(),
        storage: options.clone(),
        max_file_age: Duration::from_millis(500),
        ..Default::default()
    };
    let writer = octant_lake_writer::start(cfg, Registry::new(), stop.clone()).await.unwrap();
    let produced = topic_offsets(&env).await;
    let produced_total: usize = produced.values().map(BTreeSet::len).sum();
    let read_back = || async {
        let ctx = octant_lake::reader::open_with(Path::new(&url), &options).await.unwrap();
        let mut got: BTreeMap<(String, i32), Vec<i64>> = BTreeMap::new();
        for t in octant_lake::schema::TABLES {
            let (_, batches) =
                octant_lake::reader::query(&ctx, &format!("SELECT kafka_topic, kafka_partition, kafka_offset FROM {}", t.name))
                    .await
                    .unwrap();
            for b in batches {
                let topic = arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
                let (topic, part, off) =
                    (topic.as_string::<i32>(), b.column(1).as_primitive::<Int32Type>(), b.column(2).as_primitive::<Int64Type>());
                for i in 0..b.num_rows() {
                    got.entry((topic.value(i).to_string(), part.value(i))).or_default().push(off.value(i));
                }
            }
        }
        got
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let got = loop {
        let got = read_back().await;
        if got.values().map(Vec::len).sum::<usize>() >= produced_total {
            break got;
        }
        assert!(tokio::time::Instant::now() < deadline, "lake writer on S3 did not catch up");
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    stop.cancel();
    writer.task.await.unwrap().unwrap();
    let as_sets: BTreeMap<(String, i32), BTreeSet<i64>> = got.iter().map(|(k, v)| (k.clone(), v.iter().copied().collect())).collect();
    let duplicates: usize = got.values().map(Vec::len).sum::<usize>() - as_sets.values().map(BTreeSet::len).sum::<usize>();
    assert_eq!(duplicates, 0, "no record twice in the S3 lake");
    assert_eq!(as_sets, produced, "every produced offset in the S3 lake, exactly once");
    // The profiler reads the same URL.
    let pcfg = octant_profiler::ProfilerConfig {
        evidence: std::env::temp_dir().join(format!("octant-s3-evidence-{}", std::process::id())),
        report: octant_report::ReportConfig { lake: url.clone().into(), storage: options.clone(), ..Default::default() },
        ..Default::default()
    };
    let period =
        octant_profiler::Period { name: "all".into(), start: 1_764_489_600_000 - 3_600_000, end: 1_764_489_600_000 + 30 * 86_400_000 };
    let built = octant_profiler::run_once(&pcfg, &[period], None, 0).await.unwrap();
    assert!(built.len() >= 2, "profiles of both systems from the S3 lake");
    for b in &built {
        assert!(b.observations.rows > 0 && !b.observations.files.is_empty());
        assert!(b.observations.files.iter().all(|f| f.starts_with("observations/date=")), "{:?}", b.observations.files);
    }
    eprintln!(
        "S3 lake ({url} on moto): lake writer SIGKILLed 3 times; {produced_total} records of {} topic partitions exactly once; {} profiles built from it",
        produced.len(),
        built.len()
    );
    let _ = std::fs::remove_dir_all(&pcfg.evidence);
}
