//! The chain scorer → aggregator → lake writer, in events per second per core, printed as a
//! table (figures go to BENCHMARKS.md).
//!
//! `cargo bench -p octant-integration-tests --bench chain -- [EVENTS] [SYSTEMS] [INSTANCES] [hot] [paced=RATE] [alone]`
//! (defaults 100,000 events, 20 systems, 1 instance of scorer and aggregator)
//!
//! With `alone`, each stage then runs once more by itself, in its own process
//! (`octant-test-service`, release, a consumer group of its own) over the topics the chain
//! filled — the lake writer, then the aggregator, then the scorer — and its peak resident
//! set (VmHWM) once it has done the same work is printed: the chain's one-process peak split
//! by stage.
//!
//! With `paced=RATE` the events are not pre-filled: the stages start first, then the events
//! are produced at RATE per second while they run, and the latency of each run — its last
//! event produced → its last observation produced (both Kafka timestamps, read back from the
//! lake) — is printed as percentiles.
//!
//! The embedded broker (tansu, 4 partitions per topic) is pre-filled with the synthetic
//! fleet's JSON trajectory events (SYSTEMS systems of the demo's five kinds; with `hot`, one
//! system carries half the runs); then the stages start in this process — INSTANCES scorers
//! and aggregators in their groups, one lake writer — with their default configuration (the
//! lake in a temporary directory, files closed after 2 s rather than 60 s), and the clock runs from the first event a scorer reads
//! until the aggregators have counted every observation and the lake writer has written every
//! trajectory event and observation. CPU: this process (every stage and librdkafka's threads)
//! and the broker, over that interval; memory: this process's peak resident set. Broker,
//! stages and load generator share this machine's 2 cores.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

use std::time::{Duration, Instant};

use octant_gen::FleetSpec;
use octant_runtime::KafkaConfig;
use octant_runtime::broker::{self, EmbeddedBroker};
use octant_runtime::kafka;
use octant_runtime::service::StreamSettings;

/// CPU seconds (user + system) of this process, and of the broker's process.
fn cpu(broker_pid: u32) -> (f64, f64) {
    (broker::own_cpu_seconds(), broker::cpu_seconds_of(broker_pid))
}

/// A counter summed over `registries` (instances) and label values; with `label`, only the
/// series with that label value.
fn total(registries: &[prometheus::Registry], name: &str, label: Option<(&str, &str)>) -> f64 {
    registries
        .iter()
        .flat_map(|r| r.gather())
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().to_vec())
        .filter(|m| label.is_none_or(|(k, v)| m.get_label().iter().any(|l| l.name() == k && l.value() == v)))
        .map(|m| m.get_counter().get_value())
        .sum()
}

/// This process's peak resident set (VmHWM), in MiB.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// A scrape of a stage's `/metrics`.
struct Scraped(std::collections::BTreeMap<String, f64>);

impl Scraped {
    /// The sum of `name`'s series whose labels contain `label`.
    fn sum(&self, name: &str, label: &str) -> f64 {
        self.0.iter().filter(|(k, _)| k.split('{').next() == Some(name) && k.contains(label)).map(|(_, v)| v).sum()
    }
}

/// When a stage running alone has done its work, judged by its metrics.
type Done = Box<dyn Fn(&Scraped) -> bool>;

/// A stage to run alone: its service name, its environment prefix, extra variables, and when
/// it is done.
type Alone = (&'static str, &'static str, Vec<(&'static str, String)>, Done);

/// Runs `stage` alone in its own process over the topics, in a consumer group of its own,
/// until `done` holds of its metrics (an hour at most); returns the seconds that took and its
/// peak resident set in MiB.
async fn alone(kafka: &KafkaConfig, stage: &str, prefix: &str, extra: &[(&str, String)], done: Done) -> anyhow::Result<(f64, f64)> {
    let admin = format!("127.0.0.1:{}", broker::free_port());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_octant-test-service"));
    cmd.arg(stage)
        .env(format!("{prefix}__KAFKA__BROKERS"), &kafka.brokers)
        .env(format!("{prefix}__GROUP_ID"), format!("octant-bench-alone-{stage}"))
        .env(format!("{prefix}__ADMIN_ADDR"), &admin)
        .stdout(std::process::Stdio::null());
    for (k, v) in extra {
        cmd.env(format!("{prefix}__{k}"), v);
    }
    let mut child = cmd.spawn()?;
    let started = Instant::now();
    let addr: std::net::SocketAddr = admin.parse()?;
    let result = loop {
        if started.elapsed() > Duration::from_secs(3600) {
            break Err(anyhow::anyhow!("{stage} alone did not finish in an hour"));
        }
        if let Some(status) = child.try_wait()? {
            break Err(anyhow::anyhow!("{stage} alone exited: {status}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            continue;
        }
        if done(&Scraped(octant_integration_tests::scrape(addr).await)) {
            let hwm = std::fs::read_to_string(format!("/proc/{}/status", child.id()))?
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
                .map_or(f64::NAN, |kb| kb / 1024.0);
            break Ok((started.elapsed().as_secs_f64(), hwm));
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    result
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let hot = args.iter().any(|a| a == "hot");
    let paced: Option<f64> = std::env::args().find_map(|a| a.strip_prefix("paced=").and_then(|r| r.parse().ok()));
    let args: Vec<String> = args.into_iter().filter(|a| !a.starts_with("paced=")).collect();
    let number = |i: usize, default: usize| args.get(i).and_then(|a| a.replace(['_', ','], "").parse().ok()).unwrap_or(default);
    let (target, systems, instances) = (number(0, 100_000), number(1, 20), number(2, 1));
    let broker = EmbeddedBroker::start().await?;
    let pid = broker.pid();
    let kafka = KafkaConfig { brokers: broker.brokers.clone(), ..Default::default() };
    kafka::ensure_topics(&kafka, &kafka::default_topics(&kafka, 4)).await?;
    let mut spec = FleetSpec::demo(systems, 7, 1_700_000_000_000);
    for (i, s) in spec.systems.iter_mut().enumerate() {
        s.id = format!("agent-{i:05}");
    }
    spec.json_share = 1.0;
    // About 9 events a run; with `hot`, the first system has as many runs as all others.
    let runs = (target / systems.max(1) / 9 / if hot { 2 } else { 1 }).max(1) as u64;
    let mut records = octant_gen::generate(&spec, 0, runs);
    if hot && systems > 1 {
        let only_hot = FleetSpec { systems: spec.systems[..1].to_vec(), ..spec.clone() };
        records.extend(octant_gen::generate(&only_hot, runs, runs * (systems as u64 - 2)));
    }
    let n = records.len();
    let mut records = Some(records);
    if paced.is_none() {
        octant_gen::produce(&kafka, records.take().expect("records"), None).await?;
        eprintln!("chain: {n} events produced");
    }

    let stream = || StreamSettings { kafka: kafka.clone(), admin_addr: Some("127.0.0.1:0".parse().unwrap()), ..Default::default() };
    let lake = std::env::temp_dir().join(format!("octant-bench-chain-{}", std::process::id()));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let rs: Vec<prometheus::Registry> = (0..instances).map(|_| prometheus::Registry::new()).collect();
    let ra: Vec<prometheus::Registry> = (0..instances).map(|_| prometheus::Registry::new()).collect();
    let rl = [prometheus::Registry::new()];
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut healths = Vec::new();
    for r in &rs {
        let s = octant_scorer::start(octant_scorer::ScorerConfig { stream: stream(), ..Default::default() }, r.clone(), shutdown.clone())
            .await?;
        healths.push(s.health.clone());
        tasks.push(("scorer", s.task));
    }
    for r in &ra {
        let config = octant_aggregator::AggregatorConfig { stream: stream(), ..Default::default() };
        let a = octant_aggregator::start(config, r.clone(), shutdown.clone()).await?;
        healths.push(a.health.clone());
        tasks.push(("aggregator", a.task));
    }
    // Files close at 64 MiB or after 2 s (the default 60 s age would be most of the time measured).
    let config = octant_lake_writer::LakeWriterConfig {
        stream: stream(),
        lake: lake.clone(),
        max_file_age: Duration::from_secs(2),
        ..Default::default()
    };
    let w = octant_lake_writer::start(config, rl[0].clone(), shutdown.clone()).await?;
    healths.push(w.health.clone());
    tasks.push(("lake writer", w.task));
    let producing = match (paced, records.take()) {
        (Some(rate), Some(records)) => {
            // Every stage has its partitions before the first event is produced.
            while !healths.iter().all(|h| h.is_ready()) {
                anyhow::ensure!(started.elapsed() < Duration::from_secs(120), "the stages did not join in 120 s");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let k = kafka.clone();
            Some(tokio::spawn(async move { octant_gen::produce(&k, records, Some(rate)).await.map(|_| ()) }))
        }
        _ => None,
    };
    while total(&rs, "octant_scorer_events_consumed_total", None) == 0.0 {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(120), "the scorer read nothing in 120 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (t0, c0) = (Instant::now(), cpu(pid));
    let join = t0.duration_since(started);
    let deadline = t0 + Duration::from_secs(1800);
    let (mut scored_at, mut aggregated_at) = (None, None);
    let mut last_obs = (0.0, Instant::now());
    loop {
        let consumed = total(&rs, "octant_scorer_events_consumed_total", None);
        let obs = total(&rs, "octant_scorer_observations_produced_total", None);
        if obs != last_obs.0 {
            last_obs = (obs, Instant::now());
        }
        // The scorers are done when they have read every event (replays after a rebalance
        // count again) and their output stopped growing.
        let scored = consumed >= n as f64 && last_obs.1.elapsed() > Duration::from_secs(2);
        if scored && scored_at.is_none() {
            scored_at = Some(last_obs.1);
        }
        let aggregated = total(&ra, "octant_aggregator_observations_total", None);
        if scored && aggregated >= obs && aggregated_at.is_none() {
            aggregated_at = Some(Instant::now());
        }
        let lake_events = total(&rl, "octant_lake_writer_records_total", Some(("table", "trajectory_events")));
        let lake_obs = total(&rl, "octant_lake_writer_records_total", Some(("table", "observations")));
        if scored && aggregated_at.is_some() && lake_events >= n as f64 && lake_obs >= obs {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "after 30 min: scorers {consumed}/{n} events, aggregators {aggregated}/{obs}, lake {lake_events} events {lake_obs} observations"
        );
        for (name, task) in &tasks {
            anyhow::ensure!(!task.is_finished(), "a {name} stopped");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (t1, c1) = (Instant::now(), cpu(pid));
    let secs = t1.duration_since(t0).as_secs_f64();
    let (own, brk) = ((c1.0 - c0.0) / secs, (c1.1 - c0.1) / secs);
    let obs = total(&rs, "octant_scorer_observations_produced_total", None);
    let windows = total(&ra, "octant_aggregator_windows_emitted_total", None);
    let at = |t: Option<Instant>| t.map_or(f64::NAN, |t| t.duration_since(t0).as_secs_f64());
    println!(
        "\n{n} JSON trajectory events, {systems} systems{}, {instances} scorer(s) and aggregator(s), 4 partitions per topic, embedded broker (tansu); 2 cores shared by broker and stages",
        if hot { " (one carrying half the runs)" } else { "" }
    );
    println!("joining the consumer groups (not timed): {:.1} s\n", join.as_secs_f64());
    println!("| measure | value |");
    println!("|---|---|");
    println!("| scorer done (every event read, observations acknowledged) | {:.1} s ({obs:.0} observations) |", at(scored_at));
    println!("| aggregator done (every observation counted) | {:.1} s ({windows:.0} windows emitted) |", at(aggregated_at));
    println!("| lake writer done (every event and observation written) | {secs:.1} s |");
    println!("| **chain throughput** | **{:.0} events/s** |", n as f64 / secs);
    println!("| cores: the three stages (this process) / broker | {own:.2} / {brk:.2} |");
    println!("| **events/s per core, stages only** | **{:.0}** |", n as f64 / secs / own);
    println!("| events/s per core, stages and broker | {:.0} |", n as f64 / secs / (own + brk));
    println!("| peak resident memory of the stages (one process) | {:.0} MiB |", peak_rss_mib());
    if let Some(p) = producing {
        p.await??;
        // Per run: its last event produced → its last observation produced (the records' Kafka
        // timestamps, set by each producer when it produced them).
        let mut last: std::collections::HashMap<String, (i64, i64)> = std::collections::HashMap::new();
        let (events, observations) =
            (kafka.topic(octant_contracts::topics::TRAJECTORIES_PRODUCTION), kafka.topic(octant_contracts::topics::OBSERVATIONS));
        for r in octant_runtime::topic::read_to_end(&kafka, &events, Duration::from_secs(60)).await? {
            let v: serde_json::Value = serde_json::from_slice(&r.payload).unwrap_or_default();
            if let (Some(run), Some(t)) = (v["run_id"].as_str(), r.timestamp) {
                let e = last.entry(run.to_string()).or_insert((i64::MIN, i64::MIN));
                e.0 = e.0.max(t);
            }
        }
        let d = octant_contracts::Decoder::new();
        for r in octant_runtime::topic::read_to_end(&kafka, &observations, Duration::from_secs(60)).await? {
            if let (Ok(o), Some(t)) = (d.decode::<octant_contracts::Observation>(&r.payload), r.timestamp)
                && let Some(e) = last.get_mut(&o.run_id)
            {
                e.1 = e.1.max(t);
            }
        }
        let mut lat: Vec<i64> = last.values().filter(|(e, o)| *e > i64::MIN && *o > i64::MIN).map(|(e, o)| o - e).collect();
        lat.sort_unstable();
        anyhow::ensure!(!lat.is_empty(), "no run found in the lake");
        let q = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
        println!(
            "| paced at {} events/s: run's last event produced → its last observation produced, p50 / p99 / max over {} runs | {} / {} / {} ms |",
            paced.unwrap_or(0.0),
            lat.len(),
            q(0.5),
            q(0.99),
            q(1.0)
        );
    }
    shutdown.cancel();
    for (_, task) in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    }
    let _ = std::fs::remove_dir_all(&lake);
    if args.iter().any(|a| a == "alone") {
        let events = n as f64;
        let lake_alone = std::env::temp_dir().join(format!("octant-bench-chain-alone-{}", std::process::id()));
        let stages: [Alone; 3] = [
            (
                "lake_writer",
                "OCTANT_LAKE_WRITER",
                vec![("LAKE", lake_alone.display().to_string()), ("MAX_FILE_AGE", "2s".into())],
                Box::new(move |m: &Scraped| {
                    m.sum("octant_lake_writer_records_total", "table=\"trajectory_events\"") >= events
                        && m.sum("octant_lake_writer_records_total", "table=\"observations\"") >= obs
                }),
            ),
            (
                "aggregator",
                "OCTANT_AGGREGATOR",
                vec![],
                Box::new(move |m: &Scraped| m.sum("octant_aggregator_observations_total", "") >= obs),
            ),
            ("scorer", "OCTANT_SCORER", vec![], Box::new(move |m: &Scraped| m.sum("octant_scorer_events_consumed_total", "") >= events)),
        ];
        println!();
        println!("| stage alone (its own process, same input) | done in | peak resident memory |");
        println!("|---|---|---|");
        for (stage, prefix, extra, done) in stages {
            let (secs, mib) = alone(&kafka, stage, prefix, &extra, done).await?;
            println!("| {stage} | {secs:.1} s | {mib:.0} MiB |");
        }
        let _ = std::fs::remove_dir_all(&lake_alone);
    }
    drop(broker);
    std::process::exit(0)
}
