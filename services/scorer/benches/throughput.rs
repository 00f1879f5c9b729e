//! The scorer against the broker's limit, printed as a table (figures go to BENCHMARKS.md).
//!
//! `cargo bench -p octant-scorer --bench throughput -- [EVENTS]` (default 300,000)
//!
//! One run, one machine, one broker (the embedded tansu, 4 partitions per topic): the ratios
//! between phases are the figures; absolute rates move with the machine's load. Broker,
//! clients and stages share this machine's cores. Phases, each on the same pre-filled topics:
//! 1. **produce**: the synthetic fleet's JSON trajectory events from one client;
//! 2. **raw consume**: a plain librdkafka consumer (assigned every partition, default fetch
//!    settings) that only counts;
//! 3. **stage in process**: the scorer's `Stage` driven without a broker (its CPU cost alone);
//! 4. **pass-through**: a stage that does nothing but, for each message, produce as many
//!    records of the same size as the scorer produces on average, run in Octant's stage loop
//!    (the scorer's consumer group settings, producer and commits: an offset only once every
//!    earlier output is acknowledged) — what the scorer would cost if scoring were free;
//!    Also a **plain pass-through** as a user of rdkafka would write it (a `FutureProducer`
//!    awaited per record), the baseline the scorer was first compared with;
//! 5. **scorer**: the release scorer in this process, in its own group, until every expected
//!    observation is acknowledged.
//!
//! Phases 4 and 5 are timed from their first message read: joining a group takes seconds with
//! tansu (printed apart), which is not the stage's rate.
//!
//! CPU: this process's user + system time (every thread, librdkafka's included) and the
//! broker's (`/proc/PID/stat`) over each phase, in cores (1.0 = one core busy for the phase).
//! `-- stage` runs phase 3 only; `-- scorer` skips the baselines (2 and 4), to profile the
//! scorer alone. `-- floors` adds two pass-throughs to each round that also read each event's
//! JSON: one only scans it (`serde::de::IgnoredAny`: the least any JSON consumer does), one
//! decodes it into a `TrajectoryEvent` as the scorer does (on the loop's thread) — what the
//! scorer would cost if reading its input were its only work.
//! `OCTANT_BENCH_KAFKA_SETTINGS="k=v,k=v"` passes librdkafka settings to the pass-through and
//! the scorer alike (the user's knobs).

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

use std::time::{Duration, Instant};

use octant_gen::{FleetSpec, GenRecord};
use octant_runtime::KafkaConfig;
use octant_runtime::broker::{self, EmbeddedBroker};
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::pipeline::Driver;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use octant_runtime::admin::Health;
use octant_runtime::consumer::{CommitPoint, GroupConsumer, GroupShared, PartitionOffsets, TopicPartition, group_consumer, lag_gauge};
use octant_runtime::pipeline::{self, InMessage, Stage};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

const PARTITIONS: i32 = 4;

/// CPU seconds (user + system) of this process and of the broker.
#[derive(Debug, Clone, Copy)]
struct Cpu {
    own: f64,
    broker: f64,
    at: Instant,
}

fn cpu(broker_pid: u32) -> Cpu {
    Cpu { own: broker::own_cpu_seconds(), broker: broker::cpu_seconds_of(broker_pid), at: Instant::now() }
}

struct Phase {
    name: String,
    events: usize,
    secs: f64,
    own_cores: f64,
    broker_cores: f64,
    note: String,
}

impl Phase {
    fn of(name: &str, events: usize, start: Cpu, end: Cpu, note: impl Into<String>) -> Phase {
        let secs = end.at.duration_since(start.at).as_secs_f64();
        Phase {
            name: name.to_string(),
            events,
            secs,
            own_cores: (end.own - start.own) / secs,
            broker_cores: (end.broker - start.broker) / secs,
            note: note.into(),
        }
    }
    fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }
}

fn user_settings() -> Vec<(String, String)> {
    std::env::var("OCTANT_BENCH_KAFKA_SETTINGS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let target: usize = std::env::args().skip(1).find_map(|a| a.replace(['_', ','], "").parse().ok()).unwrap_or(300_000);
    let broker = EmbeddedBroker::start().await?;
    let pid = broker.pid();
    let kafka = KafkaConfig { brokers: broker.brokers.clone(), topic_prefix: "bench.".into(), ..Default::default() };
    let topics = kafka::default_topics(&kafka, PARTITIONS);
    kafka::ensure_topics(&kafka, &topics).await?;
    kafka::ensure_topics(&kafka, &[(kafka.topic("passthrough"), PARTITIONS)]).await?;
    let inputs =
        [kafka.topic(octant_contracts::topics::TRAJECTORIES_PRODUCTION), kafka.topic(octant_contracts::topics::TRAJECTORIES_EVALUATION)];

    // The fleet: 20 systems, every event JSON (the "JSON trajectory events").
    let mut spec = FleetSpec::demo(20, 7, 1_700_000_000_000);
    spec.json_share = 1.0;
    let runs = (target / 20 / 9).max(1) as u64;
    let records: Vec<GenRecord> = octant_gen::generate(&spec, 0, runs);
    let n = records.len();
    let bytes: usize = records.iter().map(|r| r.payload.len()).sum();
    eprintln!("bench: {n} events ({} runs per system, {:.0} bytes each on average)", runs, bytes as f64 / n as f64);

    // 3 first (no broker): what the scorer produces, and its CPU cost alone.
    let config = octant_scorer::ScorerConfig {
        stream: octant_runtime::service::StreamSettings {
            kafka: kafka.clone(),
            admin_addr: Some("127.0.0.1:0".parse()?),
            ..Default::default()
        },
        ..Default::default()
    };
    let topology = octant_scorer::Topology {
        input_partitions: inputs.iter().map(|t| (t.clone(), PARTITIONS)).collect(),
        output_partitions: PARTITIONS,
    };
    let mut driver = Driver::new(octant_scorer::ScorerStage::new(&config, &prometheus::Registry::new(), topology)?);
    let c0 = cpu(pid);
    let (mut out_records, mut out_bytes) = (0usize, 0usize);
    for r in &records {
        // One partition per topic: the runs' order is kept, which is all the stage needs.
        for o in driver.send(&kafka.topic(r.topic), 0, Some(r.key.as_bytes()), &r.payload)? {
            out_records += 1;
            out_bytes += o.payload.len();
        }
        // The driver keeps what was produced (for tests): not the stage's cost.
        driver.produced.clear();
    }
    let c1 = cpu(pid);
    let in_process = Phase::of(
        "scorer stage in process (no broker)",
        n,
        c0,
        c1,
        format!("{out_records} observations, {:.0} bytes each", out_bytes as f64 / out_records as f64),
    );
    drop(driver);
    if std::env::args().any(|a| a == "stage") {
        // `-- stage`: only the stage in process (for profiling its CPU cost).
        println!("{}: {:.0} events/s", in_process.name, in_process.rate());
        return Ok(());
    }

    // 1. Produce.
    let c0 = cpu(pid);
    octant_gen::produce(&kafka, records, None).await?;
    let c1 = cpu(pid);
    let produce = Phase::of("produce (one client, idempotent, acks=all)", n, c0, c1, "");

    // `-- scorer`: the scorer alone (for profiling it), no baselines. `rounds=N`: the
    // Octant-loop pass-through and the scorer alternate N times, each round in fresh groups
    // (the machine's speed drifts within a run; the median round's ratio is the figure).
    let only_scorer = std::env::args().any(|a| a == "scorer");
    let floors = std::env::args().any(|a| a == "floors");
    let rounds: usize = std::env::args().find_map(|a| a.strip_prefix("rounds=").and_then(|r| r.parse().ok())).unwrap_or(1).max(1);
    let per_message = out_records as f64 / n as f64;
    let size = out_bytes / out_records.max(1);
    let mut tuned = kafka.clone();
    tuned.settings.extend(user_settings());
    let baselines = if only_scorer {
        None
    } else {
        // 2. Raw consume.
        let c0 = cpu(pid);
        let raw = {
            let kafka = kafka.clone();
            let inputs = inputs.clone();
            tokio::task::spawn_blocking(move || -> anyhow::Result<usize> {
                let consumer: BaseConsumer = kafka::client_config(&kafka, "bench-raw").set("group.id", "bench-raw").create()?;
                let mut tpl = TopicPartitionList::new();
                for t in &inputs {
                    for p in 0..PARTITIONS {
                        tpl.add_partition_offset(t, p, Offset::Beginning)?;
                    }
                }
                consumer.assign(&tpl)?;
                let mut count = 0;
                while count < n {
                    if let Some(m) = consumer.poll(Duration::from_secs(10)) {
                        m?;
                        count += 1;
                    } else {
                        anyhow::bail!("raw consumer: nothing for 10 s after {count} of {n}");
                    }
                }
                Ok(count)
            })
            .await??
        };
        let c1 = cpu(pid);
        let raw = Phase::of("raw consume (librdkafka, counts only)", raw, c0, c1, "");

        // 4. Pass-through as a user of rdkafka would write it (Octant's loop: each round).
        let (c0, c1) = plain_pass_through(&tuned, &inputs, n, per_message, size, pid).await?;
        let plain = Phase::of(
            "plain pass-through (rdkafka FutureProducer, commit after delivery)",
            n,
            c0,
            c1,
            format!("{out_records} records of {size} bytes"),
        );
        Some((raw, plain))
    };

    // 4 and 5, alternating: the pass-through in Octant's stage loop, then the scorer.
    let mut config = config;
    config.stream.kafka.settings.extend(user_settings());
    let mut played = Vec::new();
    for round in 0..rounds {
        // Every other round the scorer goes first: neither always meets the fuller broker (the
        // embedded broker keeps every record in memory: ~0.5 GB per round at 300,000 events).
        let pass = async {
            if only_scorer {
                return anyhow::Ok(None);
            }
            let joined = Instant::now();
            let (c0, c1) = pass_through(ReadJson::Not, &tuned, &inputs, &format!("bench-pass-{round}"), n, per_message, size, pid).await?;
            let name = format!("{}, round {}", ReadJson::Not.name(), round + 1);
            let pass = (Phase::of(&name, n, c0, c1, format!("{out_records} records of {size} bytes")), c0.at.duration_since(joined));
            let mut read = Vec::new();
            for how in [ReadJson::Scan, ReadJson::Decode].into_iter().filter(|_| floors) {
                let group = format!("bench-pass-{how:?}-{round}");
                let (c0, c1) = pass_through(how, &tuned, &inputs, &group, n, per_message, size, pid).await?;
                read.push(Phase::of(&format!("{}, round {}", how.name(), round + 1), n, c0, c1, ""));
            }
            Ok(Some((pass, read)))
        };
        let group = format!("bench-scorer-{round}");
        let scorer = scorer_round(&config, &group, n, out_records, pid, round + 1);
        let (pass, scorer) = if round % 2 == 0 {
            let pass = pass.await?;
            (pass, scorer.await?)
        } else {
            let scorer = scorer.await?;
            (pass.await?, scorer)
        };
        played.push((pass, scorer));
    }

    println!(
        "\n{n} JSON trajectory events, {PARTITIONS} partitions per topic, embedded broker (tansu), 2 cores shared by broker, clients and stages"
    );
    let settings = user_settings();
    if !settings.is_empty() {
        println!("librdkafka settings for pass-through and scorer: {settings:?}");
    }
    let seconds = |d: Vec<Duration>| d.iter().map(|d| format!("{:.1} s", d.as_secs_f64())).collect::<Vec<_>>().join(", ");
    let pass_joins = seconds(played.iter().filter_map(|r| r.0.as_ref().map(|p| p.0.1)).collect());
    println!(
        "joining the consumer group (not timed): pass-through {}, scorer {}",
        if pass_joins.is_empty() { "not run".into() } else { pass_joins },
        seconds(played.iter().map(|r| r.1.1).collect())
    );
    println!();
    // Without a pass-through (`-- scorer`) the column compares with the first scorer round.
    let versus = if only_scorer { "vs scorer, round 1" } else { "vs pass-through" };
    println!("| phase | events/s | {versus} | this process (cores) | broker (cores) | note |");
    println!("|---|---|---|---|---|---|");
    // "vs pass-through": against the first round's pass-through, a round's scorer against its own.
    let first_pass = played[0].0.as_ref().map_or(played[0].1.0.rate(), |p| p.0.0.rate());
    let mut rows: Vec<(&Phase, f64)> = vec![(&produce, first_pass)];
    if let Some((raw, _)) = &baselines {
        rows.push((raw, first_pass));
    }
    rows.push((&in_process, first_pass));
    if let Some((_, plain)) = &baselines {
        rows.push((plain, first_pass));
    }
    let mut ratios = Vec::new();
    // `-- floors`: each reading pass-through's ratio, by round.
    let mut floor_ratios: Vec<(String, Vec<f64>)> = Vec::new();
    for (pass, (scorer, _)) in &played {
        let reference = pass.as_ref().map_or(scorer.rate(), |p| p.0.0.rate());
        if let Some(((p, _), read)) = pass {
            rows.push((p, reference));
            ratios.push(scorer.rate() / reference);
            for (i, r) in read.iter().enumerate() {
                rows.push((r, reference));
                if floor_ratios.len() <= i {
                    floor_ratios.push((r.name.rsplit_once(", round").map_or(r.name.clone(), |(a, _)| a.to_string()), Vec::new()));
                }
                floor_ratios[i].1.push(r.rate() / reference);
            }
        }
        rows.push((scorer, reference));
    }
    for (p, reference) in rows {
        println!(
            "| {} | {:.0} | {:.0} % | {:.2} | {:.2} | {} |",
            p.name,
            p.rate(),
            100.0 * p.rate() / reference,
            p.own_cores,
            p.broker_cores,
            p.note
        );
    }
    if !ratios.is_empty() {
        let shown: Vec<String> = ratios.iter().map(|r| format!("{:.0} %", 100.0 * r)).collect();
        ratios.sort_by(f64::total_cmp);
        let median = octant_core::stats::bootstrap::quantile_sorted(&ratios, 0.5);
        println!("\nscorer ÷ pass-through in Octant's loop, by round: {}; median {:.0} %", shown.join(", "), 100.0 * median);
    }
    for (name, mut r) in floor_ratios {
        let shown: Vec<String> = r.iter().map(|r| format!("{:.0} %", 100.0 * r)).collect();
        r.sort_by(f64::total_cmp);
        let median = octant_core::stats::bootstrap::quantile_sorted(&r, 0.5);
        println!("{name} ÷ pass-through, by round: {}; median {:.0} %", shown.join(", "), 100.0 * median);
    }
    drop(broker);
    std::process::exit(0)
}

/// One scorer run in its own `group`, timed from its first message read until every expected
/// observation is acknowledged. Returns the phase and how long joining the group took.
async fn scorer_round(
    config: &octant_scorer::ScorerConfig,
    group: &str,
    n: usize,
    out_records: usize,
    pid: u32,
    round: usize,
) -> anyhow::Result<(Phase, Duration)> {
    let mut config = config.clone();
    config.stream.group_id = Some(group.into());
    let registry = prometheus::Registry::new();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let joined = Instant::now();
    let running = octant_scorer::start(config, registry.clone(), shutdown.clone()).await?;
    // Timing starts at the first message read, as for the pass-through (joining the group
    // is not the stage's rate).
    while counter(&registry, "octant_scorer_events_consumed_total") == 0.0 {
        anyhow::ensure!(joined.elapsed() < Duration::from_secs(120), "scorer: nothing read after 120 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let c0 = cpu(pid);
    let join = c0.at.duration_since(joined);
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut last = (0.0, Instant::now());
    loop {
        let acked = counter(&registry, "octant_scorer_observations_produced_total");
        if acked >= out_records as f64 {
            break;
        }
        if acked != last.0 {
            last = (acked, Instant::now());
        } else if counter(&registry, "octant_scorer_events_consumed_total") >= n as f64 && last.1.elapsed() > Duration::from_secs(5) {
            eprintln!(
                "bench: the scorer acknowledged {acked} observations, not the {out_records} of the in-process run; timing ends at its last one"
            );
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "scorer: {acked} of {out_records} observations after 30 min");
        anyhow::ensure!(!running.task.is_finished(), "the scorer stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let c1 = cpu(pid);
    let phase = Phase::of(
        &format!("scorer (release, in this process), round {round}"),
        counter(&registry, "octant_scorer_events_consumed_total") as usize,
        c0,
        c1,
        format!("{out_records} observations acknowledged"),
    );
    shutdown.cancel();
    let _ = running.task.await;
    Ok((phase, join))
}

fn counter(registry: &prometheus::Registry, name: &str) -> f64 {
    registry.gather().iter().filter(|f| f.name() == name).flat_map(|f| f.get_metric().iter().map(|m| m.get_counter().get_value())).sum()
}

/// Records the `read`-th message produces so that `per_message` are produced on average.
fn records_for(read: usize, per_message: f64) -> usize {
    ((read + 1) as f64 * per_message) as usize - (read as f64 * per_message) as usize
}

/// A consumer of `inputs` in `group` with every Octant stage's consumer settings.
fn join(kafka: &KafkaConfig, inputs: &[String], group: &str) -> anyhow::Result<(Arc<GroupConsumer>, Arc<GroupShared>)> {
    let topics: Vec<&str> = inputs.iter().map(String::as_str).collect();
    Ok(group_consumer(kafka, group, group, &topics, lag_gauge(&prometheus::Registry::new(), "bench"))?)
}

/// What a pass-through does with each event's bytes (`-- floors`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum ReadJson {
    /// Nothing: the pass-through proper.
    Not,
    /// Scans it (syntax only, nothing built).
    Scan,
    /// Decodes it into the contract's `TrajectoryEvent`, as the scorer does.
    Decode,
}

impl ReadJson {
    fn name(self) -> &'static str {
        match self {
            ReadJson::Not => "pass-through in Octant's stage loop (consume, produce, commit after delivery)",
            ReadJson::Scan => "pass-through that also scans each event's JSON (IgnoredAny)",
            ReadJson::Decode => "pass-through that also decodes each event (TrajectoryEvent)",
        }
    }
}

/// The pass-through stage: for each message, the scorer's average number of records
/// (`per_message`, spread evenly) of `size` bytes, keyed like the input; commits like the
/// scorer (the offset after every acknowledged message).
struct PassThrough {
    /// What is done with each event's JSON besides passing it on.
    read_json: ReadJson,
    decoder: octant_contracts::Decoder,
    topic: String,
    payload: Vec<u8>,
    per_message: f64,
    read: usize,
    acked: Arc<AtomicUsize>,
    first: Arc<OnceLock<Cpu>>,
    broker_pid: u32,
}

impl Stage for PassThrough {
    type Partition = ();
    type Tag = ();

    fn open(&mut self, _tp: &TopicPartition, _offset: i64, _companion: Option<i64>) -> anyhow::Result<()> {
        Ok(())
    }

    fn process(&mut self, _part: &mut (), _offsets: &mut PartitionOffsets, msg: &InMessage<'_>) -> (Vec<OutRecord>, ()) {
        self.first.get_or_init(|| cpu(self.broker_pid));
        match self.read_json {
            ReadJson::Not => {}
            ReadJson::Scan => {
                let scanned: Result<serde::de::IgnoredAny, _> = serde_json::from_slice(msg.payload);
                std::hint::black_box(scanned.is_ok());
            }
            ReadJson::Decode => {
                let decoded = self.decoder.decode::<octant_contracts::TrajectoryEvent>(msg.payload);
                std::hint::black_box(decoded.is_ok());
            }
        }
        let k = records_for(self.read, self.per_message);
        self.read += 1;
        let key = String::from_utf8_lossy(msg.key.unwrap_or_default()).into_owned();
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

/// Runs [`PassThrough`] in Octant's stage loop (the scorer's consumer, producer and commits)
/// in its own group until every message's records are acknowledged. Returns when the first
/// message was read (the group's join time is not the stage's rate) and when the last was
/// acknowledged.
#[allow(clippy::too_many_arguments)]
async fn pass_through(
    read_json: ReadJson,
    kafka: &KafkaConfig,
    inputs: &[String],
    group: &str,
    n: usize,
    per_message: f64,
    size: usize,
    broker_pid: u32,
) -> anyhow::Result<(Cpu, Cpu)> {
    let (consumer, shared) = join(kafka, inputs, group)?;
    let producer = pipeline::producer(kafka, group)?;
    let (acked, first) = (Arc::new(AtomicUsize::new(0)), Arc::new(OnceLock::new()));
    let stage = PassThrough {
        read_json,
        decoder: octant_contracts::Decoder::new(),
        topic: kafka.topic("passthrough"),
        payload: vec![b'x'; size],
        per_message,
        read: 0,
        acked: acked.clone(),
        first: first.clone(),
        broker_pid,
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let cfg = pipeline::LoopConfig { commit_interval: pipeline::default_commit_interval(), max_inflight: pipeline::default_max_inflight() };
    let task = tokio::spawn(pipeline::run(stage, consumer, shared, producer, Health::new(), cfg, shutdown.clone()));
    let deadline = Instant::now() + Duration::from_secs(1800);
    while acked.load(Ordering::Relaxed) < n {
        anyhow::ensure!(Instant::now() < deadline, "pass-through: {} of {n} after 30 min", acked.load(Ordering::Relaxed));
        anyhow::ensure!(!task.is_finished(), "the pass-through stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let end = cpu(broker_pid);
    shutdown.cancel();
    task.await??;
    Ok((*first.get().expect("read at least one message"), end))
}

/// A pass-through as a user of rdkafka would write it (no Octant runtime): a consumer group
/// with the stages' consumer settings, a `FutureProducer` awaited per record, offsets
/// committed every second once every earlier message's records are acknowledged. Returns when
/// the first message was read and when the last was acknowledged.
async fn plain_pass_through(
    kafka: &KafkaConfig,
    inputs: &[String],
    n: usize,
    per_message: f64,
    size: usize,
    broker_pid: u32,
) -> anyhow::Result<(Cpu, Cpu)> {
    use futures::StreamExt;
    use rdkafka::Message;
    use rdkafka::consumer::CommitMode;
    use rdkafka::topic_partition_list::TopicPartitionList;
    let (consumer, _shared) = join(kafka, inputs, "bench-plain")?;
    let producer = kafka::producer(kafka, "bench-plain")?;
    let topic = kafka.topic("passthrough");
    let payload = vec![b'x'; size];
    let mut inflight = futures::stream::FuturesOrdered::new();
    let mut done: std::collections::HashMap<(String, i32), i64> = Default::default();
    let (mut read, mut acked) = (0usize, 0usize);
    let mut first = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let commit = |done: &std::collections::HashMap<(String, i32), i64>, mode| -> anyhow::Result<()> {
        let mut tpl = TopicPartitionList::new();
        for ((t, p), o) in done {
            tpl.add_partition_offset(t, *p, Offset::Offset(o + 1))?;
        }
        if tpl.count() > 0 {
            consumer.commit(&tpl, mode)?;
        }
        Ok(())
    };
    while acked < n {
        tokio::select! {
            Some((tp, offset, result)) = inflight.next(), if !inflight.is_empty() => {
                let result: Result<(), rdkafka::error::KafkaError> = result;
                result?;
                done.insert(tp, offset);
                acked += 1;
            }
            _ = tick.tick() => commit(&done, CommitMode::Async)?,
            m = consumer.recv(), if inflight.len() < 20_000 && read < n => {
                let m = m?;
                first.get_or_insert_with(|| cpu(broker_pid));
                let k = records_for(read, per_message);
                read += 1;
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                let recs: Vec<OutRecord> = (0..k).map(|_| OutRecord { topic: topic.clone(), partition: None, key: key.clone(), payload: payload.clone() }).collect();
                let (tp, offset, p) = ((m.topic().to_string(), m.partition()), m.offset(), producer.clone());
                inflight.push_back(async move {
                    let results = futures::future::join_all(recs.iter().map(|r| kafka::send(&p, r))).await;
                    (tp, offset, results.into_iter().find_map(Result::err).map_or(Ok(()), Err))
                });
            }
        }
    }
    let end = cpu(broker_pid);
    commit(&done, CommitMode::Sync)?;
    Ok((first.expect("read at least one message"), end))
}
