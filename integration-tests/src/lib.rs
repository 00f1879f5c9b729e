//! Support for Octant's integration tests: a real broker per test (or `OCTANT_BROKERS`),
//! topic names unique to each test, collectors that read a topic back, and a metrics scraper.
//!
//! A test that needs the broker and cannot find it fails with the message of
//! [`octant_runtime::broker::locate_tansu`]: it never passes by skipping.

pub mod alertmanager;
pub mod prometheus_server;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use octant_contracts::{Contract, Decoder};
use octant_runtime::KafkaConfig;
use octant_runtime::broker::EmbeddedBroker;
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

/// Spawns `cmd` as a child that dies with the test process (`PR_SET_PDEATHSIG`), so a failing
/// test never leaves a service process behind (one holding the test's output pipe open).
pub fn spawn_child(mut cmd: std::process::Command) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; it only sets a flag on the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// A broker and a topic namespace for one test.
pub struct TestEnv {
    pub broker: Option<EmbeddedBroker>,
    pub kafka: KafkaConfig,
    pub name: String,
    /// Partitions of each keyed topic.
    pub partitions: i32,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl TestEnv {
    /// Starts a broker (or uses `OCTANT_BROKERS`) and creates the declared topics with
    /// `partitions` partitions under a prefix unique to this test.
    pub async fn new(name: &str, partitions: i32) -> TestEnv {
        // The services' logs, when asked for (`OCTANT_LOG=octant_runtime=info cargo test …`).
        if std::env::var_os("OCTANT_LOG").is_some() {
            octant_runtime::shutdown::init_tracing("warn");
        }
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let prefix = format!("t{}-{n}-{name}.", std::process::id());
        let (broker, brokers) = match std::env::var("OCTANT_BROKERS") {
            Ok(b) if !b.is_empty() => (None, b),
            _ => {
                // The broker's output goes to a log file (its path in any start-up error), never
                // to the terminal.
                let broker = EmbeddedBroker::start().await.unwrap_or_else(|e| panic!("{name}: cannot start the test broker: {e}"));
                let b = broker.brokers.clone();
                (Some(broker), b)
            }
        };
        let kafka = KafkaConfig { brokers, topic_prefix: prefix, ..KafkaConfig::default() };
        octant_runtime::kafka::ensure_topics(&kafka, &octant_runtime::kafka::default_topics(&kafka, partitions))
            .await
            .unwrap_or_else(|e| panic!("{name}: cannot create topics: {e}"));
        TestEnv { broker, kafka, name: name.to_string(), partitions }
    }

    pub fn topic(&self, base: &str) -> String {
        self.kafka.topic(base)
    }

    /// Stream settings for a service of this test: its topics, group `<prefix><name>`, admin on
    /// a free port, fast commits.
    pub fn stream(&self, name: &str) -> octant_runtime::service::StreamSettings {
        octant_runtime::service::StreamSettings {
            kafka: self.kafka.clone(),
            group_id: Some(format!("{}{name}", self.kafka.topic_prefix)),
            admin_addr: Some("127.0.0.1:0".parse().unwrap()),
            commit_interval: Duration::from_millis(200),
            ..Default::default()
        }
    }

    /// A scorer for this test: its topics and group, admin on a free port, fast commits.
    pub fn scorer_config(&self) -> octant_scorer::ScorerConfig {
        octant_scorer::ScorerConfig { stream: self.stream("scorer"), ..Default::default() }
    }
}

/// Reads every partition of `topic` from the beginning (assigned directly, no group) until
/// `want` records have been read or `timeout` has passed; returns what it has. Watermark
/// records (the scorer's event-time progress on `octant.observations`) are skipped.
pub async fn collect_raw(kafka: &KafkaConfig, topic: &str, want: usize, timeout: Duration) -> Vec<(i32, i64, Vec<u8>, Vec<u8>)> {
    let d = Decoder::new();
    let is_watermark =
        |v: &[u8]| d.writer_of(v).is_ok_and(|(_, k, _)| k.is_some_and(|k| k.full_name == octant_contracts::Watermark::FULL_NAME));
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", format!("collector-{}-{n}", std::process::id()))
        .set("enable.auto.commit", "false")
        .create()
        .expect("collector consumer");
    let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("topic metadata");
    let mut tpl = TopicPartitionList::new();
    for t in md.topics() {
        for p in t.partitions() {
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning).unwrap();
        }
    }
    assert!(tpl.count() > 0, "topic {topic} has no partitions");
    consumer.assign(&tpl).expect("assign");
    let deadline = tokio::time::Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < want {
        match tokio::time::timeout_at(deadline, consumer.recv()).await {
            Ok(Ok(m)) if is_watermark(m.payload().unwrap_or_default()) => {}
            Ok(Ok(m)) => {
                out.push((m.partition(), m.offset(), m.key().unwrap_or_default().to_vec(), m.payload().unwrap_or_default().to_vec()))
            }
            Ok(Err(e)) => panic!("collector on {topic}: {e}"),
            Err(_) => break,
        }
    }
    out
}

/// Like [`collect_raw`], decoding every record as `T` (a record that does not decode fails).
pub async fn collect<T: Contract>(kafka: &KafkaConfig, topic: &str, want: usize, idle: Duration) -> Vec<T> {
    let d = Decoder::new();
    collect_raw(kafka, topic, want, idle)
        .await
        .into_iter()
        .map(|(p, o, _, v)| d.decode::<T>(&v).unwrap_or_else(|e| panic!("{topic} {p}/{o} does not decode: {e}")))
        .collect()
}

/// Every record of `topic` now (read to each partition's end, `octant_runtime::topic`), as
/// (partition, offset, key, payload), watermark records skipped. For topics whose producers
/// are done (a stage shut down after draining): no timeout to wait out, nothing missed.
pub async fn read_all_raw(kafka: &KafkaConfig, topic: &str) -> Vec<(i32, i64, Vec<u8>, Vec<u8>)> {
    let d = Decoder::new();
    let is_watermark =
        |v: &[u8]| d.writer_of(v).is_ok_and(|(_, k, _)| k.is_some_and(|k| k.full_name == octant_contracts::Watermark::FULL_NAME));
    octant_runtime::topic::read_to_end(kafka, topic, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("reading {topic}: {e}"))
        .into_iter()
        .filter(|r| !is_watermark(&r.payload))
        .map(|r| (r.partition, r.offset, r.key.unwrap_or_default(), r.payload))
        .collect()
}

/// Like [`read_all_raw`], decoding every record as `T` (a record that does not decode fails).
pub async fn read_all<T: Contract>(kafka: &KafkaConfig, topic: &str) -> Vec<T> {
    let d = Decoder::new();
    read_all_raw(kafka, topic)
        .await
        .into_iter()
        .map(|(p, o, _, v)| d.decode::<T>(&v).unwrap_or_else(|e| panic!("{topic} {p}/{o} does not decode: {e}")))
        .collect()
}

/// Scrapes a Prometheus text endpoint into `name{labels} → value`.
pub async fn scrape(addr: std::net::SocketAddr) -> BTreeMap<String, f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("admin server reachable");
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "GET /metrics: {}", body.lines().next().unwrap_or(""));
    octant_runtime::metrics::parse_exposition(body.split("\r\n\r\n").nth(1).unwrap_or(""))
}

/// Polls an admin server's metrics until `done` holds; returns that scrape. Waits as long as
/// the condition takes (no fixed sleep); a condition still false after two minutes fails the
/// test, naming `what`.
pub async fn wait_metrics(addr: std::net::SocketAddr, what: &str, done: impl Fn(&BTreeMap<String, f64>) -> bool) -> BTreeMap<String, f64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let m = scrape(addr).await;
        if done(&m) {
            return m;
        }
        if tokio::time::Instant::now() >= deadline {
            let shown: Vec<String> =
                m.iter().filter(|(k, v)| **v != 0.0 && !k.contains("_bucket")).map(|(k, v)| format!("{k} {v}")).collect();
            panic!("waited two minutes for: {what}; metrics:\n{}", shown.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GET a path on an admin server; returns (status, body).
pub async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    get_with(addr, path, "").await
}

/// GET with extra header lines (each ending in CRLF), e.g. an `Authorization` header.
pub async fn get_with(addr: std::net::SocketAddr, path: &str, headers: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("admin server reachable");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    let status = body.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, body.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}

pub use octant_runtime::metrics::total;

/// True under the soak command (`scripts/soak.sh`, `OCTANT_SOAK=1`): the tests that have a
/// size run at their large size (the 200,000-event lake crash test, ten kills, …). Without
/// it they run at the smallest size that proves their property.
/// An empty directory for test `name` under the system's temporary directory (any left from an
/// earlier run of this process id removed).
pub fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("octant-{name}-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

pub fn soak() -> bool {
    std::env::var_os("OCTANT_SOAK").is_some_and(|v| !v.is_empty() && v != "0")
}

/// `small` in the test tier, `large` under the soak command.
pub fn sized<T>(small: T, large: T) -> T {
    if soak() { large } else { small }
}

/// One record written by fastavro in the three framings Octant accepts.
pub struct FastavroRecord {
    pub single_object: Vec<u8>,
    pub confluent: Vec<u8>,
    pub plain: Vec<u8>,
}

/// The repository root (for `.octant/` and the scripts).
/// What the independent Delta reader (`integration-tests/scripts/delta_reader.py`: the
/// protocol's log and checkpoints replayed by hand, and PyPI `deltalake`, with DuckDB reading
/// the files) finds in each of `tables`: table → its files, transaction identifiers, rows,
/// distinct offsets, systems and dates (`null`: no table); with `matching` (column, value),
/// also the rows holding it in the listed files and in every Parquet file of the table's
/// directory. Both lists of files are asserted equal.
pub fn delta_read(lake: &std::path::Path, tables: &[&str], matching: Option<(&str, &str)>) -> BTreeMap<String, serde_json::Value> {
    let root = repo_root().join(".octant");
    for (dir, what) in [("python/duckdb", "DuckDB"), ("delta/deltalake", "PyPI deltalake")] {
        assert!(root.join(dir).exists(), "{what} not found in {} (run scripts/setup.sh)", root.join(dir).display());
    }
    let path = format!("{}:{}", root.join("python").display(), root.join("delta").display());
    let mut cmd = std::process::Command::new("python3");
    cmd.env("PYTHONPATH", path).arg(repo_root().join("integration-tests/scripts/delta_reader.py")).arg(lake).args(tables);
    if let Some((column, value)) = matching {
        cmd.env("DELTA_READER_MATCH", format!("{column}={value}"));
    }
    let output = cmd.output().expect("python3 runs");
    assert!(output.status.success(), "the Delta reader failed: {}", String::from_utf8_lossy(&output.stderr));
    let v: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&output.stdout).expect("the Delta reader's answer parses");
    for (t, found) in &v {
        if !found.is_null() {
            assert_eq!(
                found["files"], found["deltalake_files"],
                "{t}: the protocol replayed by hand and PyPI deltalake list the same files"
            );
        }
    }
    v
}

pub fn repo_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the fastavro side of the interoperability tests (`services/contracts/tests/avro_interop.py`,
/// its request and answer documented there) with fastavro as installed by `scripts/setup.sh`.
pub fn fastavro(mut request: serde_json::Value) -> serde_json::Value {
    use std::io::Write;
    let root = repo_root();
    let site = root.join(".octant/python");
    assert!(site.join("fastavro").is_dir(), "fastavro is not installed in {}: run scripts/setup.sh", site.display());
    request["schemas_dir"] = serde_json::json!(root.join("schemas"));
    let mut child = std::process::Command::new("python3")
        .arg(root.join("services/contracts/tests/avro_interop.py"))
        .env("PYTHONPATH", &site)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "avro_interop.py failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Lower-case hex of bytes (the interoperability script's transport).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Trajectory events written by fastavro in every framing (Confluent with `confluent_id`).
pub fn fastavro_trajectory_events(events: &[octant_contracts::TrajectoryEvent], confluent_id: u32) -> Vec<FastavroRecord> {
    let answer = fastavro(serde_json::json!({
        "write": events
            .iter()
            .map(|e| serde_json::json!({"file": "trajectory_event.avsc", "json": serde_json::to_value(e).unwrap(), "confluent_id": confluent_id}))
            .collect::<Vec<_>>(),
    }));
    let unhex = |v: &serde_json::Value| {
        let s = v.as_str().unwrap();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect::<Vec<u8>>()
    };
    answer["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| FastavroRecord { single_object: unhex(&w["single_object"]), confluent: unhex(&w["confluent"]), plain: unhex(&w["plain"]) })
        .collect()
}

/// Single-object records read by fastavro, which resolves each writer schema by its
/// fingerprint: (schema file under `schemas/`, or `None` if unresolved; the value as JSON).
pub fn fastavro_read(records: &[Vec<u8>]) -> Vec<(Option<String>, serde_json::Value)> {
    let answer = fastavro(serde_json::json!({ "read": records.iter().map(|r| hex(r)).collect::<Vec<_>>() }));
    answer["read"].as_array().unwrap().iter().map(|r| (r["path"].as_str().map(String::from), r["json"].clone())).collect()
}
