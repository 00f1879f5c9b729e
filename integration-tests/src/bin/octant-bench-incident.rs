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
        step: Some(Step {
            tool_name: Some("transfer_funds".into()),
            arguments: Some("{}".into()),
            impact: if critical { Impact::Irreversible } else { Impact::Low },
            confirmed: false,
            violations: if critical { vec!["policy".into()] } else { vec![] },
            ..Step::default()
        }),
        intervention: None,
        run_ended: None,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
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
