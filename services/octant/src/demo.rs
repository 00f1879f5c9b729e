//! `octant demo`: an embedded broker (unless brokers are given), the scorer, and a synthetic
//! fleet, in one process, with a live view of what flows through. Later stages (aggregator,
//! alerter, lake writer, profiler) join here as they are built.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use octant_contracts::{DeadLetter, Decoder, Observation, topics};
use octant_runtime::KafkaConfig;
use octant_runtime::broker::EmbeddedBroker;
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Use this Kafka cluster instead of the embedded broker.
    #[arg(long, env = "OCTANT_BROKERS")]
    pub brokers: Option<String>,
    /// Stop after this many seconds (0: run until Ctrl-C).
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Trajectory events per second from the synthetic fleet.
    #[arg(long, default_value_t = 300.0)]
    pub rate: f64,
    /// Systems in the fleet.
    #[arg(long, default_value_t = 5)]
    pub systems: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Fraction of bad input mixed in (dead-lettered, the stream goes on).
    #[arg(long, default_value_t = 0.005)]
    pub poison: f64,
    /// Partitions of each keyed topic.
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// Port of the scorer's admin server (/metrics); 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub scorer_port: u16,
}

#[derive(Default)]
struct SystemTally {
    observations: u64,
    runs_ended: u64,
    successes: f64,
    steps: u64,
    unsafe_steps: f64,
    gated: u64,
    confirmed: f64,
}

#[derive(Default)]
struct Tally {
    systems: BTreeMap<String, SystemTally>,
    dead_letters: BTreeMap<String, u64>,
}

impl Tally {
    fn observe(&mut self, o: &Observation) {
        let t = self.systems.entry(o.system_id.clone()).or_default();
        t.observations += 1;
        match o.metric.as_str() {
            "task_success" => {
                t.runs_ended += 1;
                t.successes += o.value;
            }
            "unsafe_action_rate" => {
                t.steps += 1;
                t.unsafe_steps += o.value;
            }
            "confirmation_gating" => {
                t.gated += 1;
                t.confirmed += o.value;
            }
            _ => {}
        }
    }
}

fn ratio(a: f64, n: u64) -> String {
    if n == 0 { "—".into() } else { format!("{:.3}", a / n as f64) }
}

fn counter(reg: &prometheus::Registry, name: &str) -> f64 {
    reg.gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().iter().map(|m| m.get_counter().get_value()).collect::<Vec<_>>())
        .sum()
}

fn render(t: &Tally, reg: &prometheus::Registry, elapsed: Duration, truth: &octant_gen::FleetSpec) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "octant demo — {:>4}s   events in {:>7}   observations out {:>8}   dead letters {:>4}\n\n",
        elapsed.as_secs(),
        counter(reg, "octant_scorer_events_consumed_total"),
        counter(reg, "octant_scorer_observations_produced_total"),
        counter(reg, "octant_scorer_dead_letters_total"),
    ));
    s.push_str(&format!(
        "{:<10} {:>8} {:>6} {:>13} {:>22} {:>22}\n",
        "system", "obs", "runs", "task success", "unsafe-action (true)", "gating (true)"
    ));
    for (id, x) in &t.systems {
        let spec = truth.systems.iter().find(|s| &s.id == id);
        s.push_str(&format!(
            "{:<10} {:>8} {:>6} {:>13} {:>14} ({:.2}) {:>14} ({:.2})\n",
            id,
            x.observations,
            x.runs_ended,
            ratio(x.successes, x.runs_ended),
            ratio(x.unsafe_steps, x.steps),
            spec.map_or(f64::NAN, |s| s.unsafe_action),
            ratio(x.confirmed, x.gated),
            spec.map_or(f64::NAN, |s| s.confirmation_gating),
        ));
    }
    if !t.dead_letters.is_empty() {
        let parts: Vec<_> = t.dead_letters.iter().map(|(c, n)| format!("{c} {n}")).collect();
        s.push_str(&format!("\ndead letters by class: {}\n", parts.join(", ")));
    }
    s.push_str("\n(raw rates so far; windows, intervals, bands and alerts arrive with the aggregator)\n");
    s
}

/// Reads the observation and dead-letter topics from the beginning into the tally.
async fn watch(kafka: KafkaConfig, tally: std::sync::Arc<std::sync::Mutex<Tally>>, stop: CancellationToken) -> anyhow::Result<()> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", format!("{}octant-demo-view", kafka.topic_prefix))
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for base in [topics::OBSERVATIONS, topics::DLQ] {
        let topic = kafka.topic(base);
        let md = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10))?;
        for t in md.topics() {
            for p in t.partitions() {
                tpl.add_partition_offset(&topic, p.id(), Offset::Beginning)?;
            }
        }
    }
    consumer.assign(&tpl)?;
    let decoder = Decoder::new();
    let dlq = kafka.topic(topics::DLQ);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            m = consumer.recv() => {
                let m = m?;
                let payload = m.payload().unwrap_or_default();
                let mut t = tally.lock().unwrap();
                if m.topic() == dlq {
                    if let Ok(d) = decoder.decode::<DeadLetter>(payload) {
                        *t.dead_letters.entry(d.error_class).or_default() += 1;
                    }
                } else if let Ok(o) = decoder.decode::<Observation>(payload) {
                    t.observe(&o);
                }
            }
        }
    }
}

pub async fn run(a: DemoArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let (broker, brokers) = match a.brokers.clone().filter(|b| !b.is_empty()) {
        Some(b) => (None, b),
        None => {
            eprintln!("starting the embedded Kafka-protocol broker (tansu)…");
            let b = EmbeddedBroker::start().await.context("failed to start the embedded broker")?;
            let brokers = b.brokers.clone();
            eprintln!("broker ready on {brokers}");
            (Some(b), brokers)
        }
    };
    let kafka = KafkaConfig { brokers, ..KafkaConfig::default() };
    octant_runtime::kafka::ensure_topics(&kafka, &octant_runtime::kafka::default_topics(&kafka, a.partitions)).await?;

    let shutdown = CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), Duration::from_secs(30));
    let registry = prometheus::Registry::new();
    let scorer_cfg = octant_scorer::ScorerConfig {
        kafka: kafka.clone(),
        admin_addr: format!("127.0.0.1:{}", a.scorer_port).parse()?,
        ..Default::default()
    };
    let scorer = octant_scorer::start(scorer_cfg, registry.clone(), shutdown.clone()).await?;
    eprintln!("scorer running; metrics on http://{}/metrics", scorer.admin_addr);

    let spec = crate::gen_cmd::fleet(&crate::gen_cmd::GenArgs {
        brokers: kafka.brokers.clone(),
        topic_prefix: String::new(),
        systems: a.systems,
        runs: None,
        rate: Some(a.rate),
        seed: a.seed,
        poison: a.poison,
        system: vec![],
        start_ms: None,
        truth: None,
    })?;
    let gen_stop = shutdown.child_token();
    let generator = {
        let (kafka, spec, stop) = (kafka.clone(), spec.clone(), gen_stop.clone());
        tokio::spawn(async move { crate::gen_cmd::stream(&kafka, &spec, None, Some(a.rate), stop).await })
    };
    let tally = std::sync::Arc::new(std::sync::Mutex::new(Tally::default()));
    let view_stop = CancellationToken::new();
    let viewer = tokio::spawn(watch(kafka.clone(), tally.clone(), view_stop.clone()));

    let tty = std::io::stdout().is_terminal();
    let deadline = (a.seconds > 0).then(|| tokio::time::Instant::now() + Duration::from_secs(a.seconds));
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => break,
            _ = tick.tick() => {
                let view = render(&tally.lock().unwrap(), &registry, started.elapsed(), &spec);
                if tty { print!("\x1b[2J\x1b[H{view}"); } else { println!("{view}"); }
            }
        }
    }
    gen_stop.cancel();
    let produced = generator.await.context("generator panicked")??;
    tokio::time::sleep(Duration::from_secs(2)).await; // let the last events through
    shutdown.cancel();
    scorer.task.await.context("scorer panicked")??;
    view_stop.cancel();
    let _ = viewer.await;
    let summary = render(&tally.lock().unwrap(), &registry, started.elapsed(), &spec);
    println!("\n=== summary ===\n{summary}");
    println!("generator produced {produced} events; the scorer read {}", counter(&registry, "octant_scorer_events_consumed_total"));
    drop(broker);
    Ok(())
}
