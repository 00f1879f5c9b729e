//! The ingest against a pass-through on the same broker, and a trace's latency to its
//! observations, printed as tables (figures go to BENCHMARKS.md).
//!
//! `cargo bench -p octant-integration-tests --bench ingest -- [TRACES]` (default 20,000)
//!
//! The traces are the conformance suite's (`conformance/fixtures`: what real instrumentations
//! of real agent frameworks wrote), each copied under new trace ids, eight traces to an export
//! request as the Collector's batch processor would send them, unkeyed, on `otlp_spans` (4
//! partitions, the embedded tansu). Phases:
//! 1. **in process**: the ingest's stage driven without a broker (its CPU cost alone; both hops);
//! 2. **pass-through, both hops**: two stages in Octant's stage loop, run together, that do
//!    nothing but pass bytes on — the first reads the Collector's requests and produces as many
//!    records of the same size as the ingest's re-keying hop does on average, the second reads
//!    those and produces what the assembling hop does — what the ingest would cost if
//!    re-keying and assembling were free;
//! 3. **ingest**: the release ingest in this process until every trace is emitted and
//!    acknowledged (the trace_quiet of the last traces, 200 ms here, is in its time).
//!
//! Then **latency**: with the ingest and the scorer running (trace_quiet 1 s), one trace every
//! 50 ms; for each, the time from its request's delivery to the broker (its last span) to its
//! first observation read from `octant.observations`, less trace_quiet: what the pipeline adds.
//! Phases 2 and 3 are timed from their first message read (joining a group is not a rate).

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use octant_contracts::{Observation, topics};
use octant_otlp::proto::{ExportTraceServiceRequest, ResourceSpans, ScopeSpans};
use octant_runtime::KafkaConfig;
use octant_runtime::admin::Health;
use octant_runtime::broker::EmbeddedBroker;
use octant_runtime::consumer::{CommitPoint, PartitionOffsets, TopicPartition, group_consumer, lag_gauge};
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::pipeline::{self, Driver, InMessage, Stage};
use prost::Message;

const PARTITIONS: i32 = 4;
const TRACES_PER_REQUEST: usize = 8;

/// One trace of every fixture, as a request of its own (resource and scope kept).
fn templates() -> Vec<ExportTraceServiceRequest> {
    let root = octant_integration_tests::repo_root().join("conformance/fixtures");
    let mut out = Vec::new();
    let mut files: Vec<std::path::PathBuf> = walk(&root).into_iter().filter(|p| p.ends_with("spans.pb")).collect();
    files.sort();
    for f in files {
        let req = ExportTraceServiceRequest::decode(std::fs::read(&f).unwrap().as_slice()).unwrap();
        let mut traces: BTreeMap<Vec<u8>, ExportTraceServiceRequest> = BTreeMap::new();
        for rs in &req.resource_spans {
            for ss in &rs.scope_spans {
                for s in &ss.spans {
                    let t = traces.entry(s.trace_id.clone()).or_default();
                    t.resource_spans.push(ResourceSpans {
                        resource: rs.resource.clone(),
                        scope_spans: vec![ScopeSpans {
                            scope: ss.scope.clone(),
                            spans: vec![s.clone()],
                            schema_url: ss.schema_url.clone(),
                        }],
                        schema_url: rs.schema_url.clone(),
                    });
                }
            }
        }
        out.extend(traces.into_values());
    }
    assert!(!out.is_empty(), "no fixtures under {}", root.display());
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// Trace `i`: template `i % n` under trace id `i` (big-endian, nonzero).
fn trace(templates: &[ExportTraceServiceRequest], i: usize) -> ExportTraceServiceRequest {
    let mut t = templates[i % templates.len()].clone();
    let mut id = [0u8; 16];
    id[8..].copy_from_slice(&(i as u64 + 1).to_be_bytes());
    id[0] = 0xbe;
    for rs in &mut t.resource_spans {
        for ss in &mut rs.scope_spans {
            for s in &mut ss.spans {
                s.trace_id = id.to_vec();
            }
        }
    }
    t
}

/// The Collector's requests: `traces` traces, [`TRACES_PER_REQUEST`] to a request; and the spans.
fn requests(templates: &[ExportTraceServiceRequest], from: usize, traces: usize) -> (Vec<Vec<u8>>, usize) {
    let mut out = Vec::new();
    let mut spans = 0;
    for chunk in (from..from + traces).collect::<Vec<_>>().chunks(TRACES_PER_REQUEST) {
        let mut req = ExportTraceServiceRequest::default();
        for &i in chunk {
            req.resource_spans.extend(trace(templates, i).resource_spans);
        }
        spans += req.resource_spans.iter().map(|r| r.scope_spans.iter().map(|s| s.spans.len()).sum::<usize>()).sum::<usize>();
        out.push(req.encode_to_vec());
    }
    (out, spans)
}

fn ingest_config(kafka: &KafkaConfig, spans: &str, group: &str, quiet: Duration) -> octant_ingest::IngestConfig {
    let mut c = octant_ingest::IngestConfig::default();
    c.stream.kafka = kafka.clone();
    c.stream.group_id = Some(group.into());
    c.stream.admin_addr = Some("127.0.0.1:0".parse().unwrap());
    c.spans_topic = spans.into();
    c.logs_topic = kafka.topic("bench.otlp_logs");
    c.trace_quiet = quiet;
    c
}

/// Records and bytes a hop of the in-process ingest produced per message it read.
#[derive(Default, Debug, Clone, Copy)]
struct Hop {
    read: usize,
    records: usize,
    bytes: usize,
}

impl Hop {
    fn per_message(&self) -> f64 {
        self.records as f64 / self.read.max(1) as f64
    }
    fn size(&self) -> usize {
        self.bytes / self.records.max(1)
    }
}

/// Phase 1: the stage without a broker. Returns the time and both hops' averages.
fn in_process(kafka: &KafkaConfig, spans: &str, payloads: &[Vec<u8>]) -> (Duration, Hop, Hop) {
    let config = ingest_config(kafka, spans, "bench.in-process", Duration::from_millis(200));
    let fragments = kafka.topic(topics::OTLP_FRAGMENTS);
    let mut d = Driver::new(octant_ingest::IngestStage::new(&config, &prometheus::Registry::new()));
    let (mut h1, mut h2) = (Hop::default(), Hop::default());
    let t0 = Instant::now();
    let count = |h: &mut Hop, out: &[OutRecord]| {
        h.records += out.len();
        h.bytes += out.iter().map(|r| r.payload.len()).sum::<usize>();
    };
    for p in payloads {
        let out = d.send(spans, 0, None, p).unwrap();
        h1.read += 1;
        count(&mut h1, &out);
        for r in out {
            let more = d.send(&fragments, 0, Some(r.key.as_bytes()), &r.payload).unwrap();
            h2.read += 1;
            count(&mut h2, &more);
        }
    }
    d.advance(Duration::from_secs(1));
    let last = d.tick();
    count(&mut h2, &last);
    (t0.elapsed(), h1, h2)
}

/// Passes bytes on: for each message `per_message` records (spread evenly) of `size` bytes to
/// `topic`, keyed by the message's position; commits like every Octant stage.
struct PassThrough {
    topic: String,
    payload: Vec<u8>,
    per_message: f64,
    read: usize,
    acked: Arc<AtomicUsize>,
    first: Arc<Mutex<Option<Instant>>>,
}

impl Stage for PassThrough {
    type Partition = ();
    type Tag = ();

    fn open(&mut self, _tp: &TopicPartition, _offset: i64, _companion: Option<i64>) -> anyhow::Result<()> {
        Ok(())
    }

    fn process(&mut self, _part: &mut (), _offsets: &mut PartitionOffsets, _msg: &InMessage<'_>) -> (Vec<OutRecord>, ()) {
        self.first.lock().unwrap().get_or_insert_with(Instant::now);
        let k = ((self.read + 1) as f64 * self.per_message) as usize - (self.read as f64 * self.per_message) as usize;
        let key = format!("{}", self.read);
        self.read += 1;
        let records = (0..k)
            .map(|_| OutRecord { topic: self.topic.clone(), partition: None, key: key.clone(), payload: self.payload.clone() })
            .collect();
        (records, ())
    }

    fn acked(&mut self, _tag: (), _latency: Duration) {
        self.acked.fetch_add(1, Ordering::Relaxed);
    }

    fn commit_point(&mut self, _part: &mut (), offsets: &PartitionOffsets) -> Option<CommitPoint> {
        Some(CommitPoint { offset: offsets.commit_offset()?, companion: offsets.horizon()? + 1 })
    }
}

type PassTask = (Arc<AtomicUsize>, Arc<Mutex<Option<Instant>>>, tokio::task::JoinHandle<anyhow::Result<()>>);

fn spawn_pass(
    kafka: &KafkaConfig,
    input: &str,
    output: &str,
    group: &str,
    hop: Hop,
    shutdown: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<PassTask> {
    let (consumer, shared) = group_consumer(kafka, group, group, &[input], lag_gauge(&prometheus::Registry::new(), "bench"))?;
    let producer = pipeline::producer(kafka, group)?;
    let (acked, first) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(None)));
    let stage = PassThrough {
        topic: output.into(),
        payload: vec![b'x'; hop.size()],
        per_message: hop.per_message(),
        read: 0,
        acked: acked.clone(),
        first: first.clone(),
    };
    let cfg = pipeline::LoopConfig { commit_interval: pipeline::default_commit_interval(), max_inflight: pipeline::default_max_inflight() };
    let task = tokio::spawn(pipeline::run(stage, consumer, shared, producer, Health::new(), cfg, shutdown.clone()));
    Ok((acked, first, task))
}

fn counter(registry: &prometheus::Registry, name: &str) -> f64 {
    registry.gather().iter().filter(|f| f.name() == name).flat_map(|f| f.get_metric().iter().map(|m| m.get_counter().get_value())).sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let traces: usize = std::env::args().skip(1).find(|a| !a.starts_with('-')).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let broker = EmbeddedBroker::start().await?;
    let kafka = broker.kafka_config();
    let spans_topic = kafka.topic("bench.otlp_spans");
    let (mid, out) = (kafka.topic("bench.pass.mid"), kafka.topic("bench.pass.out"));
    let names = [
        spans_topic.clone(),
        kafka.topic("bench.otlp_logs"),
        kafka.topic(topics::OTLP_FRAGMENTS),
        kafka.topic(topics::TRAJECTORIES_PRODUCTION),
        kafka.topic(topics::TRAJECTORIES_EVALUATION),
        kafka.topic(topics::OBSERVATIONS),
        kafka.topic(topics::DLQ),
        mid.clone(),
        out.clone(),
    ];
    kafka::ensure_topics(&kafka, &names.iter().map(|t| (t.clone(), PARTITIONS)).collect::<Vec<_>>()).await?;
    let templates = templates();
    let (payloads, spans) = requests(&templates, 0, traces);
    println!(
        "{traces} traces ({} templates from conformance/fixtures), {spans} spans, {} requests of {TRACES_PER_REQUEST} traces, {:.0} bytes a request",
        templates.len(),
        payloads.len(),
        payloads.iter().map(Vec::len).sum::<usize>() as f64 / payloads.len() as f64
    );

    let (cpu_time, h1, h2) = in_process(&kafka, &spans_topic, &payloads);
    let producer = kafka::producer(&kafka, "bench")?;
    for (i, p) in payloads.iter().enumerate() {
        kafka::send(
            &producer,
            &OutRecord { topic: spans_topic.clone(), partition: Some(i as i32 % PARTITIONS), key: String::new(), payload: p.clone() },
        )
        .await?;
    }

    // Phase 2: both pass-through hops at once.
    let shutdown = tokio_util::sync::CancellationToken::new();
    let (_a1, first, t1) = spawn_pass(&kafka, &spans_topic, &mid, "bench.pass1", h1, &shutdown)?;
    let (a2, _f2, t2) = spawn_pass(&kafka, &mid, &out, "bench.pass2", h2, &shutdown)?;
    let mid_records =
        (0..payloads.len()).map(|r| ((r + 1) as f64 * h1.per_message()) as usize - (r as f64 * h1.per_message()) as usize).sum::<usize>();
    let deadline = Instant::now() + Duration::from_secs(1800);
    while a2.load(Ordering::Relaxed) < mid_records {
        anyhow::ensure!(Instant::now() < deadline, "pass-through: {} of {mid_records}", a2.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pass_time = first.lock().unwrap().expect("read").elapsed();
    shutdown.cancel();
    t1.await??;
    t2.await??;

    // Phase 3: the ingest.
    let registry = prometheus::Registry::new();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let running = octant_ingest::start(
        ingest_config(&kafka, &spans_topic, "bench.ingest", Duration::from_millis(200)),
        registry.clone(),
        shutdown.clone(),
    )
    .await?;
    while counter(&registry, "octant_ingest_requests_total") == 0.0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let t0 = Instant::now();
    while counter(&registry, "octant_ingest_runs_total") < traces as f64 {
        anyhow::ensure!(Instant::now() < deadline, "ingest: {} of {traces} runs", counter(&registry, "octant_ingest_runs_total"));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ingest_time = t0.elapsed();
    shutdown.cancel();
    running.task.await??;

    let rate = |d: Duration| spans as f64 / d.as_secs_f64();
    println!();
    println!("| phase | spans/s | traces/s | vs pass-through | note |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, d: Duration, note: String| {
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} % | {note} |",
            rate(d),
            traces as f64 / d.as_secs_f64(),
            100.0 * rate(d) / rate(pass_time)
        )
    };
    row("ingest stage in process (both hops, no broker)", cpu_time, "its CPU cost alone".into());
    row(
        "pass-through, both hops in Octant's stage loop",
        pass_time,
        format!(
            "hop 1: {:.2} records of {} B a request; hop 2: {:.2} records of {} B a fragment",
            h1.per_message(),
            h1.size(),
            h2.per_message(),
            h2.size()
        ),
    );
    row("ingest (release, in this process)", ingest_time, "until every trace is emitted and acknowledged; trace_quiet 200 ms".into());

    // Latency: one trace every 50 ms through the ingest and the scorer, on topics of their own.
    let quiet = Duration::from_secs(1);
    let kafka = KafkaConfig { topic_prefix: "lat.".into(), ..kafka.clone() };
    let spans_topic = kafka.topic("bench.otlp_spans");
    let names: Vec<(String, i32)> = names.iter().map(|t| (format!("lat.{t}"), PARTITIONS)).collect();
    kafka::ensure_topics(&kafka, &names).await?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let ingest = octant_ingest::start(
        ingest_config(&kafka, &spans_topic, "bench.ingest.latency", quiet),
        prometheus::Registry::new(),
        shutdown.clone(),
    )
    .await?;
    let mut scorer_cfg = octant_scorer::ScorerConfig::default();
    scorer_cfg.stream.kafka = kafka.clone();
    scorer_cfg.stream.group_id = Some("bench.scorer".into());
    scorer_cfg.stream.admin_addr = Some("127.0.0.1:0".parse().unwrap());
    let scorer = octant_scorer::start(scorer_cfg, prometheus::Registry::new(), shutdown.clone()).await?;
    let seen: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let watcher = {
        let (kafka, seen, stop) = (kafka.clone(), seen.clone(), shutdown.clone());
        let topic = kafka.topic(topics::OBSERVATIONS);
        std::thread::spawn(move || watch(&kafka, &topic, &seen, &stop))
    };
    // Let both join their groups.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let probes = 100;
    let mut sent: BTreeMap<String, Instant> = BTreeMap::new();
    for i in 0..probes {
        let (p, _) = requests(&templates, traces + i * 7919, 1);
        kafka::send(
            &producer,
            &OutRecord { topic: spans_topic.clone(), partition: Some(i as i32 % PARTITIONS), key: String::new(), payload: p[0].clone() },
        )
        .await?;
        let id = trace(&templates, traces + i * 7919).resource_spans[0].scope_spans[0].spans[0].trace_id.clone();
        sent.insert(hex(&id), Instant::now());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let until = Instant::now() + Duration::from_secs(120);
    while seen.lock().unwrap().keys().filter(|k| sent.contains_key(*k)).count() < probes && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    shutdown.cancel();
    let _ = (ingest.task.await, scorer.task.await, watcher.join());
    let seen = seen.lock().unwrap();
    let mut beyond: Vec<f64> = sent
        .iter()
        .filter_map(|(id, t)| seen.get(id).map(|s| s.duration_since(*t).as_secs_f64() * 1e3 - quiet.as_secs_f64() * 1e3))
        .collect();
    beyond.sort_by(f64::total_cmp);
    let q = |p: f64| octant_core::stats::bootstrap::quantile_sorted(&beyond, p);
    println!();
    println!("| latency beyond trace_quiet ({} ms), last span → first observation | p50 | p95 | max | traces |", quiet.as_millis());
    println!("|---|---|---|---|---|");
    println!(
        "| ingest + scorer, one trace every 50 ms | {:.0} ms | {:.0} ms | {:.0} ms | {} of {probes} |",
        q(0.5),
        q(0.95),
        beyond.last().copied().unwrap_or(f64::NAN),
        beyond.len()
    );
    drop(broker);
    std::process::exit(0)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Reads `topic` from its end until `stop`, noting when each run's first observation arrives.
fn watch(kafka: &KafkaConfig, topic: &str, seen: &Mutex<BTreeMap<String, Instant>>, stop: &tokio_util::sync::CancellationToken) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message as _;
    let consumer: BaseConsumer = kafka::client_config(kafka, "bench-watch").set("group.id", "bench-watch").create().unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::End).unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let d = octant_contracts::Decoder::new();
    while !stop.is_cancelled() {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50))
            && let Ok(o) = d.decode::<Observation>(m.payload().unwrap_or_default())
        {
            seen.lock().unwrap().entry(o.run_id).or_insert_with(Instant::now);
        }
    }
}
