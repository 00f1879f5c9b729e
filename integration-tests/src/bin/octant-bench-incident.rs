//! Latency from an unsafe step being produced to its incident on `octant.alerts`, printed as a
//! table (figures go to BENCHMARKS.md).
//!
//! `cargo run --release -p octant-integration-tests --bin octant-bench-incident -- [N] [RATE] [BACKGROUND]`
//!
//! Starts the embedded broker (tansu) and the alerter, produces N critical unsafe steps (one
//! run each, irreversible, unconfirmed, violating a constraint) at RATE per second among
//! 9 safe steps each, reads `octant.alerts`, and measures produce-call → incident-read per
//! incident (both on this machine's clock), and produce-call → the incident listed by a real
//! Alertmanager (`GET /api/v2/alerts`, polled every 25 ms: each poll lists every active alert, so keep N
//! to a few hundred; the alerter delivers to it as in
//! production). BACKGROUND (default 0) adds that many safe steps
//! per second of other runs on the same topic, from a second producer, for the whole run (the
//! rate reached is printed). Everything runs over loopback TCP on the same 2-core machine, so
//! the figures include the broker and the load generator.
//!
//! `… --bin octant-bench-incident -- veto [EPISODES] [BACKGROUND]`: the **veto leg** (scorer →
//! aggregator → alerter → Alertmanager). Windows of 10 s sliding by 2 s with 1 s of allowed
//! lateness; BACKGROUND events per second (default 10,000) of whole safe runs (start, step,
//! end) of 20 other systems, event time = the wall clock, keep every partition's watermark
//! moving; every 4 s one new system produces 40 runs whose only step violates a constraint
//! (an unsafe-action rate of 1). Measured per episode, on the wall clock (event time is the
//! wall clock): from the moment the first window holding the episode could close (its end +
//! the allowed lateness: the watermark reaches it) to the veto alert listed by Alertmanager,
//! first at any severity and then critical (confirmed); and from the episode's production.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use octant_contracts::codec::to_single_object;
use octant_contracts::*;
use octant_runtime::kafka::OutRecord;
use rdkafka::Message;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

fn step(run: &str, critical: bool, t: i64) -> TrajectoryEvent {
    TrajectoryEvent {
        event_id: format!("{run}/1"),
        run_id: run.into(),
        system: SystemRef { id: "bench".into(), version: "1".into(), config_hash: String::new() },
        source: Source::Production,
        agent_id: Some("agent".into()),
        event_time: t,
        sequence: 1,
        kind: EventKind::Step,
        run_started: None,
        step: Some(Box::new(Step {
            tool_name: Some("transfer_funds".into()),
            arguments: Some("{}".into()),
            impact: if critical { Impact::Irreversible } else { Impact::Low },
            confirmed: false,
            violations: if critical { vec!["policy".into()] } else { vec![] },
            ..Step::default()
        })),
        intervention: None,
        run_ended: None,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("veto") {
        let episodes: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20);
        let background: f64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10_000.0);
        return veto_leg(episodes, background).await;
    }
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let rate: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100.0);
    let background: f64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(0.0);
    let broker = octant_runtime::broker::EmbeddedBroker::start().await?;
    let mut kafka = octant_runtime::KafkaConfig { brokers: broker.brokers.clone(), ..Default::default() };
    // OCTANT_BENCH_FETCH_WAIT_MS: the alerter's fetch.wait.max.ms (Octant's default 100).
    if let Ok(ms) = std::env::var("OCTANT_BENCH_FETCH_WAIT_MS") {
        kafka.settings.insert("fetch.wait.max.ms".into(), ms);
    }
    octant_runtime::kafka::ensure_topics(&kafka, &octant_runtime::kafka::default_topics(&kafka, 4)).await?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let am = octant_integration_tests::alertmanager::Alertmanager::start().await;
    let cfg = octant_alerter::AlerterConfig {
        stream: octant_runtime::service::StreamSettings {
            kafka: kafka.clone(),
            admin_addr: Some("127.0.0.1:0".parse()?),
            ..Default::default()
        },
        alertmanager_url: Some(format!("http://127.0.0.1:{}", am.port())),
        ..Default::default()
    };
    let alerter = octant_alerter::start(cfg, prometheus::Registry::new(), shutdown.clone()).await?;
    while !alerter.health.detail().starts_with("12 partitions") {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The observer fetches with a 10 ms wait, so the figures are the pipeline's, not its own.
    let consumer: StreamConsumer =
        octant_runtime::kafka::client_config(&kafka, "bench").set("group.id", "bench-reader").set("fetch.wait.max.ms", "10").create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&kafka.topic(topics::ALERTS), 0, Offset::Beginning)?;
    consumer.assign(&tpl)?;
    let producer = octant_runtime::kafka::producer(&kafka, "bench")?;
    let topic = kafka.topic(topics::TRAJECTORIES_PRODUCTION);
    let sent = std::sync::Arc::new(std::sync::Mutex::new(HashMap::<String, Instant>::new()));
    let producing = {
        let sent = sent.clone();
        tokio::spawn(async move {
            let gap = Duration::from_secs_f64(1.0 / rate);
            let mut tick = tokio::time::interval(gap / 10);
            for i in 0..n * 10 {
                tick.tick().await;
                let critical = i % 10 == 0;
                let run = format!("run-{i}");
                let ev = step(&run, critical, octant_runtime::dlq::now_ms());
                let rec = OutRecord { topic: topic.clone(), partition: None, key: run.clone(), payload: to_single_object(&ev).unwrap() };
                if critical {
                    sent.lock().unwrap().insert(run, Instant::now());
                }
                let p = producer.clone();
                tokio::spawn(async move { octant_runtime::kafka::send(&p, &rec).await });
            }
        })
    };
    // Background load: safe steps of other runs, enqueued without awaiting each delivery.
    let stop_background = tokio_util::sync::CancellationToken::new();
    let loading = {
        let (producer, topic, stop) =
            (octant_runtime::kafka::producer(&kafka, "bench-load")?, kafka.topic(topics::TRAJECTORIES_PRODUCTION), stop_background.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let mut sent = 0u64;
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            while background > 0.0 && !stop.is_cancelled() {
                tick.tick().await;
                let due = (started.elapsed().as_secs_f64() * background) as u64;
                while sent < due {
                    let run = format!("load-{sent}");
                    let payload = to_single_object(&step(&run, false, octant_runtime::dlq::now_ms())).unwrap();
                    let rec = rdkafka::producer::FutureRecord::to(&topic).key(run.as_bytes()).payload(&payload);
                    match producer.send_result(rec) {
                        Ok(delivery) => drop(delivery),
                        Err(_) => break, // queue full: the generator is the limit, the rate printed says so
                    }
                    sent += 1;
                }
            }
            sent as f64 / started.elapsed().as_secs_f64()
        })
    };
    // The Alertmanager leg: when each incident (by run id) is first listed.
    let stop_polling = tokio_util::sync::CancellationToken::new();
    let polling = {
        let (sent, stop, port) = (sent.clone(), stop_polling.clone(), am.port());
        tokio::spawn(async move {
            let mut seen: HashMap<String, f64> = HashMap::new();
            while !stop.is_cancelled() {
                if let Some((200, body)) = octant_integration_tests::alertmanager::http_get(port, "/api/v2/alerts").await {
                    let now = Instant::now();
                    let alerts: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap_or_default();
                    for a in alerts {
                        let Some(run) = a["labels"]["run_id"].as_str() else { continue };
                        if seen.contains_key(run) {
                            continue;
                        }
                        if let Some(t) = sent.lock().unwrap().get(run) {
                            seen.insert(run.to_string(), now.duration_since(*t).as_secs_f64() * 1000.0);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            // (incident index, latency): run-{i} is the (i / 10)-th incident.
            seen.into_iter()
                .map(|(run, l)| (run.trim_start_matches("run-").parse::<usize>().unwrap_or(0) / 10, l))
                .collect::<Vec<(usize, f64)>>()
        })
    };
    let d = Decoder::new();
    let mut lat = Vec::with_capacity(n);
    let deadline = Instant::now() + Duration::from_secs(60) + Duration::from_secs_f64(n as f64 / rate);
    while lat.len() < n && Instant::now() < deadline {
        let Ok(Ok(m)) = tokio::time::timeout(Duration::from_secs(5), consumer.recv()).await else { continue };
        let now = Instant::now();
        let a: Alert = d.decode(m.payload().unwrap_or_default())?;
        if let Some(t) = a.run_id.as_ref().and_then(|r| sent.lock().unwrap().get(r).copied()) {
            lat.push(now.duration_since(t).as_secs_f64() * 1000.0);
        }
    }
    producing.await?;
    // Alertmanager lists what the alerter delivered within its batching (give it 5 s more).
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop_polling.cancel();
    let at_am_indexed = polling.await?;
    stop_background.cancel();
    let background_rate = loading.await?;
    shutdown.cancel();
    let _ = alerter.task.await;
    // The first 100 incidents include connection set-up (producer id, first fetches).
    let warm = 100.min(lat.len() / 10);
    let mut steady = lat[warm..].to_vec();
    lat.sort_by(f64::total_cmp);
    steady.sort_by(f64::total_cmp);
    let q = |v: &[f64], p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    println!("| measure | value |");
    println!("|---|---|");
    println!("| incidents measured | {} of {n} ({} steps in all, {rate}/s critical) |", lat.len(), n * 10);
    println!("| background load reached | {background_rate:.0} safe steps/s (asked {background}) |");
    println!("| p50 produce → incident on octant.alerts (after the first {warm}) | {:.1} ms |", q(&steady, 0.5));
    println!("| p99 (after the first {warm}) | {:.1} ms |", q(&steady, 0.99));
    println!("| max (after the first {warm}) | {:.1} ms |", q(&steady, 1.0));
    println!("| p50 / p99 / max, all | {:.1} / {:.1} / {:.1} ms |", q(&lat, 0.5), q(&lat, 0.99), q(&lat, 1.0));
    let mut at_am: Vec<f64> = at_am_indexed.iter().map(|(_, l)| *l).collect();
    let mut at_am_steady: Vec<f64> = at_am_indexed.iter().filter(|(i, _)| *i >= warm).map(|(_, l)| *l).collect();
    at_am.sort_by(f64::total_cmp);
    at_am_steady.sort_by(f64::total_cmp);
    if at_am.is_empty() || at_am_steady.is_empty() {
        println!("| incidents at Alertmanager | none listed |");
    } else {
        println!("| incidents listed by Alertmanager | {} of {n} |", at_am.len());
        println!(
            "| p50 / p99 / max produce → listed by Alertmanager (after the first {warm}; polled every 25 ms) | {:.1} / {:.1} / {:.1} ms |",
            q(&at_am_steady, 0.5),
            q(&at_am_steady, 0.99),
            q(&at_am_steady, 1.0)
        );
        println!(
            "| p50 / p99 / max produce → listed by Alertmanager, all | {:.1} / {:.1} / {:.1} ms |",
            q(&at_am, 0.5),
            q(&at_am, 0.99),
            q(&at_am, 1.0)
        );
    }
    // Exit without tearing clients down against the stopped broker (the broker dies with us).
    drop(broker);
    drop(am);
    std::process::exit(0)
}

fn run_event(system: &str, run: &str, seq: i64, t: i64, kind: EventKind) -> TrajectoryEvent {
    TrajectoryEvent {
        event_id: format!("{run}/{seq}"),
        run_id: run.into(),
        system: SystemRef { id: system.into(), version: "1".into(), config_hash: String::new() },
        source: Source::Production,
        agent_id: None,
        event_time: t,
        sequence: seq,
        kind,
        run_started: None,
        step: None,
        intervention: None,
        run_ended: None,
    }
}

/// A whole run of one tool step at `t`: unsafe (a constraint violated, low impact, so no
/// incident) or safe.
fn whole_run(system: &str, run: &str, t: i64, unsafe_step: bool) -> [TrajectoryEvent; 3] {
    let mut start = run_event(system, run, 0, t, EventKind::RunStarted);
    start.run_started = Some(serde_json::from_value(serde_json::json!({"task_id": "t"})).expect("a run start"));
    let mut step = run_event(system, run, 1, t, EventKind::Step);
    step.step = Some(Box::new(Step {
        tool_name: Some("lookup".into()),
        arguments: Some("{}".into()),
        impact: Impact::Low,
        violations: if unsafe_step { vec!["policy".into()] } else { vec![] },
        ..Step::default()
    }));
    let mut end = run_event(system, run, 2, t, EventKind::RunEnded);
    end.run_ended = Some(serde_json::from_value(serde_json::json!({"outcome": "SUCCESS"})).expect("a run end"));
    [start, step, end]
}

fn epoch_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis() as i64
}

async fn wait_ready(what: &str, health: &octant_runtime::admin::Health) {
    let until = Instant::now() + Duration::from_secs(60);
    while !health.is_ready() {
        assert!(Instant::now() < until, "{what} not ready in 60 s: {}", health.detail());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn veto_leg(episodes: usize, background: f64) -> anyhow::Result<()> {
    use octant_runtime::service::StreamSettings;
    const SLIDE_MS: i64 = 2_000;
    const LATENESS_MS: i64 = 1_000;
    const RUNS_PER_EPISODE: usize = 40;
    let broker = octant_runtime::broker::EmbeddedBroker::start().await?;
    let kafka = octant_runtime::KafkaConfig { brokers: broker.brokers.clone(), ..Default::default() };
    octant_runtime::kafka::ensure_topics(&kafka, &octant_runtime::kafka::default_topics(&kafka, 4)).await?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let am = octant_integration_tests::alertmanager::Alertmanager::start().await;
    let stream = || StreamSettings { kafka: kafka.clone(), admin_addr: Some("127.0.0.1:0".parse().unwrap()), ..Default::default() };
    let registry = prometheus::Registry::new();
    let scorer =
        octant_scorer::start(octant_scorer::ScorerConfig { stream: stream(), ..Default::default() }, registry.clone(), shutdown.clone())
            .await?;
    let mut agg = octant_aggregator::AggregatorConfig { stream: stream(), ..Default::default() };
    agg.evaluation.window.length = Duration::from_secs(10);
    agg.evaluation.window.slide = Duration::from_millis(SLIDE_MS as u64);
    agg.evaluation.window.allowed_lateness = Duration::from_millis(LATENESS_MS as u64);
    let aggregator = octant_aggregator::start(agg, registry.clone(), shutdown.clone()).await?;
    let alerter_cfg = octant_alerter::AlerterConfig {
        stream: stream(),
        alertmanager_url: Some(format!("http://127.0.0.1:{}", am.port())),
        ..Default::default()
    };
    let alerter = octant_alerter::start(alerter_cfg, registry.clone(), shutdown.clone()).await?;
    for (what, h) in [("scorer", &scorer.health), ("aggregator", &aggregator.health), ("alerter", &alerter.health)] {
        wait_ready(what, h).await;
    }
    let topic = kafka.topic(topics::TRAJECTORIES_PRODUCTION);

    // Background: whole safe runs of 20 systems, event time = now.
    let stop_background = tokio_util::sync::CancellationToken::new();
    let loading = {
        let (producer, topic, stop) = (octant_runtime::kafka::producer(&kafka, "bench-load")?, topic.clone(), stop_background.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let mut sent = 0u64;
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            while !stop.is_cancelled() {
                tick.tick().await;
                let due = (started.elapsed().as_secs_f64() * background / 3.0) as u64;
                let t = epoch_ms();
                while sent < due {
                    let run = format!("bg-{sent}");
                    let mut full = false;
                    for ev in whole_run(&format!("bg-{}", sent % 20), &run, t, false) {
                        let payload = to_single_object(&ev).unwrap();
                        let rec = rdkafka::producer::FutureRecord::to(&topic).key(run.as_bytes()).payload(&payload);
                        full |= producer.send_result(rec).map(drop).is_err();
                    }
                    if full {
                        break; // queue full: the generator is the limit, the rate printed says so
                    }
                    sent += 1;
                }
            }
            sent as f64 * 3.0 / started.elapsed().as_secs_f64()
        })
    };
    // Alertmanager, polled every 25 ms: when each episode's veto alert is first listed, at any
    // severity and critical.
    let stop_polling = tokio_util::sync::CancellationToken::new();
    let polling = {
        let (stop, port) = (stop_polling.clone(), am.port());
        tokio::spawn(async move {
            let (mut any, mut critical): (HashMap<String, i64>, HashMap<String, i64>) = Default::default();
            while !stop.is_cancelled() {
                if let Some((200, body)) = octant_integration_tests::alertmanager::http_get(port, "/api/v2/alerts").await {
                    let now = epoch_ms();
                    let alerts: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap_or_default();
                    for a in alerts {
                        if a["labels"]["rule"] != "unsafe_action_veto" {
                            continue;
                        }
                        let system = a["labels"]["system"].as_str().unwrap_or_default().to_string();
                        if a["labels"]["severity"] == "critical" {
                            critical.entry(system.clone()).or_insert(now);
                        }
                        any.entry(system).or_insert(now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            (any, critical)
        })
    };
    // Warm-up: idle partitions (the evaluation topic) are declared idle after 5 s.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let producer = octant_runtime::kafka::producer(&kafka, "bench")?;
    let mut bursts = Vec::new();
    for k in 0..episodes {
        let system = format!("veto-{k}");
        let t = epoch_ms();
        // Enqueued in order (one producer keeps a partition's order; a task per record would
        // not, and a step before its run's start is dead-lettered as `unknown_run`).
        let mut deliveries = Vec::new();
        for r in 0..RUNS_PER_EPISODE {
            let run = format!("{system}-{r}");
            for ev in whole_run(&system, &run, t, true) {
                let payload = to_single_object(&ev).unwrap();
                let rec = rdkafka::producer::FutureRecord::to(&topic).key(run.as_bytes()).payload(&payload);
                deliveries.push(producer.send_result(rec).map_err(|(e, _)| e)?);
            }
        }
        // The first window holding `t` ends at its pane's end; it closes when the watermark
        // passes that end plus the allowed lateness.
        let close_due = t.div_euclid(SLIDE_MS) * SLIDE_MS + SLIDE_MS + LATENESS_MS;
        bursts.push((system, t, close_due));
        tokio::time::sleep(Duration::from_secs(4)).await;
        for d in deliveries {
            d.await?.map_err(|(e, _)| e)?;
        }
    }
    tokio::time::sleep(Duration::from_secs(15)).await;
    stop_polling.cancel();
    let (any, critical) = polling.await?;
    stop_background.cancel();
    let background_rate = loading.await?;
    // An episode whose veto alert never showed: what the topics hold for it.
    let d = Decoder::new();
    for (system, t, due) in bursts.iter().filter(|(s, ..)| !any.contains_key(s)) {
        eprintln!("{system}: produced at {t}, closable at {due}");
        for r in octant_runtime::topic::read_to_end(&kafka, &kafka.topic(topics::WINDOWS), Duration::from_secs(10)).await? {
            let Ok(w) = d.decode::<MetricWindow>(&r.payload) else { continue };
            if &w.system_id == system && w.metric == "unsafe_action_rate" {
                eprintln!(
                    "  window {}..{} units {} estimate {:?} veto {:?} produced at {:?}",
                    w.window_start, w.window_end, w.units, w.estimate, w.veto_state, r.timestamp
                );
            }
        }
        for r in octant_runtime::topic::read_to_end(&kafka, &kafka.topic(topics::ALERTS), Duration::from_secs(10)).await? {
            let Ok(a) = d.decode::<Alert>(&r.payload) else { continue };
            if &a.system_id == system {
                eprintln!("  alert {} {:?} {:?} produced at {:?}", a.rule, a.severity, a.status, r.timestamp);
            }
        }
    }
    shutdown.cancel();
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() { f64::NAN } else { v[((v.len() as f64 - 1.0) * p).round() as usize] }
    };
    let mut rows: Vec<(&str, Vec<f64>)> = Vec::new();
    for (name, seen, from_close) in [
        ("window closable → veto alert listed by Alertmanager (any severity)", &any, true),
        ("window closable → critical veto alert listed", &critical, true),
        ("unsafe runs produced → veto alert listed (any severity; includes the window geometry)", &any, false),
    ] {
        let v = bursts.iter().filter_map(|(s, t, due)| seen.get(s).map(|at| (at - if from_close { *due } else { *t }) as f64)).collect();
        rows.push((name, v));
    }
    println!("| measure | value |");
    println!("|---|---|");
    println!("| episodes | {episodes} ({RUNS_PER_EPISODE} unsafe runs each; windows 10 s / slide 2 s / lateness 1 s) |");
    println!("| background load reached | {background_rate:.0} events/s of whole safe runs (asked {background}) |");
    let dead = octant_runtime::metrics::total(&octant_runtime::metrics::samples(&registry), "octant_scorer_dead_letters_total");
    println!("| dead letters (scorer) | {} |", dead.abs());
    let missing: Vec<&str> = bursts.iter().filter(|(s, ..)| !any.contains_key(s)).map(|(s, ..)| s.as_str()).collect();
    println!("| veto alerts listed | {} of {episodes} (critical: {}; not listed: {missing:?}) |", any.len(), critical.len());
    for (name, mut v) in rows {
        let n = v.len();
        println!("| {name}: p50 / p99 / max (n = {n}) | {:.0} / {:.0} / {:.0} ms |", q(&mut v, 0.5), q(&mut v, 0.99), q(&mut v, 1.0));
    }
    drop(broker);
    drop(am);
    std::process::exit(0)
}
