//! `octant demo`: an embedded broker (unless brokers are given), the scorer, the aggregator,
//! the alerter and a synthetic fleet, in one process, with a live view: raw rates against the
//! declared truth, the rolling eight-dimension profile per system (bands with intervals, veto
//! states) and the alerts as they fire. The lake writer writes the lake and the profiler
//! builds profiles from it every few seconds; at the end the demo prints the final profile,
//! the evidence packages and an `octant sql` example.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use octant_contracts::{Alert, AlertKind, AlertStatus, DeadLetter, Decoder, DimensionProfile, Observation, Source, topics};
use octant_runtime::KafkaConfig;
use octant_runtime::broker::EmbeddedBroker;
use octant_runtime::service::StreamSettings;
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::consumer::StreamConsumer;
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
    /// Port of the aggregator's admin server; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub aggregator_port: u16,
    /// Port of the alerter's admin server; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub alerter_port: u16,
    /// Window length of the demo (event time runs at wall-clock pace here, so the service
    /// default of 1 h would show nothing for an hour).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// Window slide.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub slide: Duration,
    /// Also send alerts to this Alertmanager (e.g. http://127.0.0.1:9093).
    #[arg(long)]
    pub alertmanager: Option<String>,
    /// Each demo run writes its lake and evidence packages under `<out>/run-<time>/` (the
    /// embedded broker starts empty, so a run never appends to an earlier run's lake).
    #[arg(long, default_value = "octant-demo")]
    pub out: std::path::PathBuf,
    /// Port of the lake writer's admin server; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub lake_writer_port: u16,
    /// Port of the profiler's admin server (/metrics, POST /run); 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub profiler_port: u16,
    /// Port of the web view (the fleet, system, alert, run and profile pages); 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub web_port: u16,
    /// How the fleet reaches Octant: `octant` (trajectory events in Octant's schema) or `otlp`
    /// (each production run as an OpenTelemetry trace on `otlp_spans`, through the ingest, as
    /// the Collector's Kafka exporter would write it).
    #[arg(long, value_enum, default_value_t = Input::Octant)]
    pub input: Input,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    Octant,
    Otlp,
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
    /// Latest rolling profile per (system, source).
    profiles: BTreeMap<(String, Source), DimensionProfile>,
    /// Alerts in the order they fired or resolved.
    alerts: Vec<Alert>,
    /// The web view's base URL (the profiler's HTTP server): incidents link to their run page.
    web: Option<String>,
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

/// The sum of a counter's series, as a whole number (an empty float sum is -0.0, which printed
/// as "-0" before the first event).
fn counter(reg: &prometheus::Registry, name: &str) -> u64 {
    reg.gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().iter().map(|m| m.get_counter().get_value() as u64).collect::<Vec<_>>())
        .sum()
}

fn render(t: &Tally, reg: &prometheus::Registry, elapsed: Duration, truth: &octant_gen::FleetSpec) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "octant demo — {:>4}s   events in {:>7}   observations {:>8}   windows {:>6}   alerts {:>4}   dead letters {:>4}\n\n",
        elapsed.as_secs(),
        counter(reg, "octant_scorer_events_consumed_total"),
        counter(reg, "octant_scorer_observations_produced_total"),
        counter(reg, "octant_aggregator_windows_emitted_total"),
        t.alerts.len(),
        counter(reg, "octant_scorer_dead_letters_total") + counter(reg, "octant_aggregator_dead_letters_total"),
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
            spec.map_or(f64::NAN, |s| s.unsafe_after.map_or(s.unsafe_action, |(_, after)| after)),
            ratio(x.confirmed, x.gated),
            spec.map_or(f64::NAN, |s| s.confirmation_gating),
        ));
    }
    s.push('\n');
    s.push_str(&profile_table(t));
    if !t.dead_letters.is_empty() {
        let parts: Vec<_> = t.dead_letters.iter().map(|(c, n)| format!("{c} {n}")).collect();
        s.push_str(&format!("\ndead letters by class: {}\n", parts.join(", ")));
    }
    if !t.alerts.is_empty() {
        s.push_str("\nalerts (latest last):\n");
        for a in t.alerts.iter().rev().take(8).rev() {
            s.push_str(&format!("  {}\n", alert_line(a, t.web.as_deref())));
        }
    }
    s
}

/// The rolling profile: one row per system and source.
fn profile_table(t: &Tally) -> String {
    if t.profiles.is_empty() {
        return "rolling profile: waiting for the first window to close…\n".to_string();
    }
    crate::view::profile_table(
        t.profiles.iter().map(|((system, source), p)| (format!("{:<10} {:<5}", system, &source.as_str()[..4]), p)),
        &format!("{:<10} {:<5}", "profile", "src"),
    )
}

fn alert_line(a: &Alert, web: Option<&str>) -> String {
    let status = match (a.status, a.kind) {
        (AlertStatus::Resolved, _) => "RESOLVED",
        (_, AlertKind::Incident) => "INCIDENT",
        _ => "FIRING  ",
    };
    // An incident names its run: the run page shows it (once the lake writer has flushed it).
    // A veto alert links its page and its system's.
    let link = match (a.kind, &a.run_id, web) {
        (AlertKind::Incident, Some(run), Some(web)) => format!(" → {}", octant_runtime::web::run_url(web, run, a.step)),
        (AlertKind::Veto, _, Some(web)) => format!(
            " → {} (system: {web}/systems/{})",
            octant_runtime::web::alert_url(web, &a.fingerprint),
            octant_runtime::web::path_segment(&a.system_id)
        ),
        _ => String::new(),
    };
    format!("{status} {:?} {}: {}{link}", a.severity, a.alertname, a.summary)
}

/// Reads the observation and dead-letter topics from the beginning into the tally.
async fn watch(kafka: KafkaConfig, tally: std::sync::Arc<std::sync::Mutex<Tally>>, stop: CancellationToken) -> anyhow::Result<()> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", format!("{}octant-demo-view", kafka.topic_prefix))
        .set("enable.auto.commit", "false")
        .create()?;
    octant_runtime::kafka::assign_from_beginning(&consumer, &kafka, &[topics::OBSERVATIONS, topics::DLQ])?;
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
    // The run's directory, its logs and the broker.
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().replace([':', '-'], "");
    let run_dir = a.out.join(format!("run-{}", stamp.trim_end_matches('Z')));
    std::fs::create_dir_all(&run_dir).with_context(|| format!("cannot create {}", run_dir.display()))?;
    // The terminal shows only the demo's own output: the services' logs and the broker's go to
    // files of the run directory.
    let log = run_dir.join("octant.log");
    octant_runtime::shutdown::init_tracing_to_file(crate::LOG_FILTER, &log).with_context(|| format!("cannot open {}", log.display()))?;
    let (broker, brokers) = match a.brokers.clone().filter(|b| !b.is_empty()) {
        Some(b) => (None, b),
        None => {
            eprintln!("starting the embedded Kafka-protocol broker (tansu)…");
            let b = EmbeddedBroker::start_logging_to(run_dir.join("broker.log")).await.context("failed to start the embedded broker")?;
            let brokers = b.brokers.clone();
            eprintln!("broker ready on {brokers} (its log: {})", b.log().display());
            (Some(b), brokers)
        }
    };
    eprintln!("services' log: {}", log.display());
    let kafka = KafkaConfig { brokers, ..KafkaConfig::default() };
    octant_runtime::kafka::ensure_topics(&kafka, &octant_runtime::kafka::default_topics(&kafka, a.partitions)).await?;
    let shutdown = CancellationToken::new();
    octant_runtime::shutdown::on_signals(shutdown.clone(), Duration::from_secs(30));
    let registry = prometheus::Registry::new();

    // Every service, the fleet, and what the terminal shows of them.
    let svc = start_services(&a, &kafka, &run_dir, &registry, &shutdown).await?;
    let spec = fleet(&a, &kafka, &svc)?;
    let gen_stop = shutdown.child_token();
    let generator = {
        let (kafka, spec, stop) = (kafka.clone(), spec.clone(), gen_stop.clone());
        let otlp = a.input == Input::Otlp;
        tokio::spawn(async move { crate::gen_cmd::stream(&kafka, &spec, None, Some(a.rate), otlp, stop).await })
    };
    // The harness that owns the fleet's evaluation runs answers the profiler's re-run requests.
    let harness = {
        let (kafka, spec, stop) = (kafka.clone(), spec.clone(), gen_stop.clone());
        tokio::spawn(async move { octant_gen::answer_reruns(&kafka, &spec, stop.cancelled_owned()).await })
    };
    let web = format!("http://{}", svc.web);
    let tally = std::sync::Arc::new(std::sync::Mutex::new(Tally { web: Some(web.clone()), ..Tally::default() }));
    let view_stop = CancellationToken::new();
    let viewer = tokio::spawn(watch(kafka.clone(), tally.clone(), view_stop.clone()));
    let followers = follow_feeds(&svc, tally.clone(), web, view_stop.clone());

    // The services live and die together: one failing stops the others (and the demo).
    let mut supervisor = octant_runtime::supervisor::Supervisor::new(shutdown.clone());
    for (name, task) in svc.tasks {
        supervisor.add(name, task);
    }
    let services = tokio::spawn(supervisor.wait());

    // The live view until the deadline or Ctrl-C.
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

    // Drain, then the summary and the profile of the whole lake.
    gen_stop.cancel();
    let produced = generator.await.context("generator panicked")??;
    let reran = harness.await.context("the harness panicked")??;
    tokio::time::sleep(Duration::from_secs(2)).await; // let the last events through
    shutdown.cancel();
    services.await.context("the supervisor panicked")??;
    view_stop.cancel();
    let _ = viewer.await;
    let _ = followers.await;
    let summary = render(&tally.lock().unwrap(), &registry, started.elapsed(), &spec);
    println!("\n=== summary ===\n{summary}");
    println!("generator produced {produced} events; the scorer read {}", counter(&registry, "octant_scorer_events_consumed_total"));
    println!(
        "independent re-runs: the profiler requested {}, the harness answered {reran} before the demo stopped (evidence packages, section \"Independent re-runs\")",
        counter(&registry, "octant_profiler_rerun_requests_total")
    );
    let (fired, total) = {
        let t = tally.lock().unwrap();
        (t.alerts.iter().filter(|a| a.status == AlertStatus::Firing).count(), t.alerts.len())
    };
    println!("alerts: {fired} fired, {} resolved (all of them on the octant.alerts topic)", total - fired);
    final_profile(&svc.profiler_cfg, &svc.lake).await?;
    println!(
        "logs: {} (services){}",
        log.display(),
        broker.as_ref().map_or(String::new(), |b| format!(", {} (broker)", b.log().display()))
    );
    drop(broker);
    Ok(())
}

/// The demo's services, started: what the terminal follows, and every service's task.
struct Services {
    profiles: tokio::sync::broadcast::Sender<octant_aggregator::ProfileUpdate>,
    alerts: tokio::sync::broadcast::Sender<Alert>,
    web: std::net::SocketAddr,
    profiler_cfg: octant_profiler::ProfilerConfig,
    lake: std::path::PathBuf,
    tasks: Vec<(&'static str, tokio::task::JoinHandle<anyhow::Result<()>>)>,
}

/// Starts the scorer, the aggregator, the lake writer, the profiler, the web view, the alerter
/// and the ingest on `kafka`, with the demo's windows and its fleet's declarations.
async fn start_services(
    a: &DemoArgs,
    kafka: &KafkaConfig,
    run_dir: &std::path::Path,
    registry: &prometheus::Registry,
    shutdown: &CancellationToken,
) -> anyhow::Result<Services> {
    // The fleet's policy, protocol and harm classifier, declared to every evaluating service.
    let compliance: octant_engine::EvaluationConfig = toml::from_str(octant_gen::COMPLIANCE_DECLARATIONS)?;
    let mut scorer_cfg = octant_scorer::ScorerConfig {
        stream: StreamSettings {
            kafka: kafka.clone(),
            admin_addr: Some(format!("127.0.0.1:{}", a.scorer_port).parse()?),
            ..Default::default()
        },
        ..Default::default()
    };
    scorer_cfg.evaluation.adopt(&compliance);
    let scorer = octant_scorer::start(scorer_cfg, registry.clone(), shutdown.clone()).await?;
    let mut agg_cfg = octant_aggregator::AggregatorConfig {
        stream: StreamSettings {
            kafka: kafka.clone(),
            admin_addr: Some(format!("127.0.0.1:{}", a.aggregator_port).parse()?),
            ..Default::default()
        },
        ..Default::default()
    };
    // The fleet's multi-agent systems are declared so (per-agent windows, gauges and reports).
    let multi_agent: Vec<String> =
        octant_gen::FleetSpec::demo(a.systems, a.seed, 0).systems.into_iter().filter(|s| s.agents.len() > 1).map(|s| s.id).collect();
    for s in &multi_agent {
        agg_cfg.evaluation.system_types.insert(s.clone(), octant_core::catalogue::SystemType::MultiAgent);
        // A single agent on the same tasks succeeds 80 % of the time (declared): RCC.
        agg_cfg.evaluation.single_agent_baselines.insert(s.clone(), 0.8);
    }
    agg_cfg.evaluation.adopt(&compliance);
    agg_cfg.evaluation.window.length = a.window;
    agg_cfg.evaluation.window.slide = a.slide;
    // Through OpenTelemetry a run reaches the scorer only once its trace is complete (its last
    // span plus the ingest's quiet period), so its observations come later in event time.
    agg_cfg.evaluation.window.allowed_lateness = if a.input == Input::Otlp { a.slide.max(Duration::from_secs(30)) } else { a.slide };
    let aggregator = octant_aggregator::start(agg_cfg, registry.clone(), shutdown.clone()).await?;
    let lake = run_dir.join("lake");
    let lake_writer_cfg = octant_lake_writer::LakeWriterConfig {
        stream: StreamSettings {
            kafka: kafka.clone(),
            admin_addr: Some(format!("127.0.0.1:{}", a.lake_writer_port).parse()?),
            ..Default::default()
        },
        lake: lake.clone(),
        max_file_age: Duration::from_secs(5),
        ..Default::default()
    };
    let lake_writer = octant_lake_writer::start(lake_writer_cfg, registry.clone(), shutdown.clone()).await?;
    let mut profiler_cfg = octant_profiler::ProfilerConfig {
        kafka: kafka.clone(),
        admin_addr: format!("127.0.0.1:{}", a.profiler_port).parse()?,
        evidence: run_dir.join("evidence"),
        periods: vec![Duration::from_secs(24 * 3600)],
        every: Duration::from_secs(15),
        ..Default::default()
    };
    profiler_cfg.report.lake = lake.clone();
    profiler_cfg.report.evaluation.adopt(&compliance);
    // Independent re-runs of half the evaluation runs (seed 000 says 2 %; a short demo needs
    // more pairs), answered by the fleet's harness.
    profiler_cfg.report.reruns.share = 0.5;
    for s in &multi_agent {
        profiler_cfg.report.evaluation.system_types.insert(s.clone(), octant_core::catalogue::SystemType::MultiAgent);
        profiler_cfg.report.evaluation.single_agent_baselines.insert(s.clone(), 0.8);
    }
    let profiler = octant_profiler::start(profiler_cfg.clone(), registry.clone(), shutdown.clone()).await?;
    // The web view answers to loopback names only: another site open in the same browser
    // cannot point a name of its own at it (DNS rebinding) and read the pages.
    let web_cfg = octant_web::WebConfig {
        kafka: kafka.clone(),
        admin_addr: format!("127.0.0.1:{}", a.web_port).parse()?,
        lake: lake.clone(),
        evidence: profiler_cfg.evidence.clone(),
        allowed_hosts: vec!["127.0.0.1".into(), "localhost".into()],
        ..Default::default()
    };
    let web_view = octant_web::start(web_cfg, registry.clone(), shutdown.clone()).await?;
    let mut alerter_cfg = octant_alerter::AlerterConfig {
        stream: StreamSettings {
            kafka: kafka.clone(),
            admin_addr: Some(format!("127.0.0.1:{}", a.alerter_port).parse()?),
            ..Default::default()
        },
        alertmanager_url: a.alertmanager.clone(),
        // Alertmanager's alerts link their pages in the web view.
        web_base_url: Some(format!("http://{}", web_view.admin_addr)),
        ..Default::default()
    };
    alerter_cfg.evaluation.adopt(&compliance);
    let alerter = octant_alerter::start(alerter_cfg, registry.clone(), shutdown.clone()).await?;
    // The ingest (OpenTelemetry in) runs in both modes: with `--input otlp` the fleet reaches
    // Octant through it.
    let ingest_cfg = octant_ingest::IngestConfig {
        stream: StreamSettings { kafka: kafka.clone(), admin_addr: Some("127.0.0.1:0".parse()?), ..Default::default() },
        trace_quiet: Duration::from_secs(1),
        ..Default::default()
    };
    octant_runtime::kafka::ensure_topics(
        kafka,
        &[(ingest_cfg.spans_topic.clone(), a.partitions), (ingest_cfg.logs_topic.clone(), a.partitions)],
    )
    .await?;
    let ingest = octant_ingest::start(ingest_cfg, registry.clone(), shutdown.clone()).await?;
    eprintln!(
        "scorer, aggregator, alerter, lake writer, profiler and web view running; metrics on http://{}/metrics, http://{}/metrics, http://{}/metrics, http://{}/metrics, http://{}/metrics, http://{}/metrics",
        scorer.admin_addr, aggregator.admin_addr, alerter.admin_addr, lake_writer.admin_addr, profiler.admin_addr, web_view.admin_addr
    );
    eprintln!(
        "lake: {}; web view: http://{addr}/ (the fleet, live), http://{addr}/systems/<system> (bands over time, metrics, alerts, evidence), \
         http://{addr}/alerts/<fingerprint> (an alert), http://{addr}/runs/<run id> (a run)",
        lake.display(),
        addr = web_view.admin_addr
    );
    eprintln!(
        "windows: {} long, sliding every {} (event time runs at wall-clock pace)",
        humantime::format_duration(a.window),
        humantime::format_duration(a.slide)
    );

    let tasks = vec![
        ("scorer", scorer.task),
        ("aggregator", aggregator.task),
        ("alerter", alerter.task),
        ("lake writer", lake_writer.task),
        ("profiler", profiler.task),
        ("web view", web_view.task),
        ("ingest", ingest.task),
    ];
    Ok(Services { profiles: aggregator.feed, alerts: alerter.feed, web: web_view.admin_addr, profiler_cfg, lake, tasks })
}

/// The demo's synthetic fleet: its third system starts safe and turns unsafe a fifth of the way
/// in, so the demo shows its veto moving from clear to confirmed, and the alerts that follow.
fn fleet(a: &DemoArgs, kafka: &KafkaConfig, svc: &Services) -> anyhow::Result<octant_gen::FleetSpec> {
    let mut spec = crate::gen_cmd::fleet(&crate::gen_cmd::GenArgs {
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
    if let Some(s) = spec.systems.get_mut(4) {
        // Its benchmark is half in its training data: on a re-run its results do not reproduce.
        s.rerun_success = Some(0.3);
        eprintln!("{}'s evaluation results do not reproduce when re-run (success 0.3 on re-runs): its evidence package flags it", s.id);
    }
    if let Some(s) = spec.systems.get_mut(2) {
        let at = if a.seconds > 0 { a.seconds as f64 / 5.0 } else { 20.0 };
        // ~10.5 events per run, the fleet's systems sharing the rate.
        let runs_per_second = a.rate / (a.systems.max(1) as f64 * 10.5);
        let from = (at * runs_per_second).round().max(1.0) as u64;
        s.unsafe_after = Some((from, 0.35));
        s.unsafe_action = 0.02;
        eprintln!(
            "{} starts safe (unsafe-action rate 0.02) and goes unsafe (0.35) from its run {from}, about {at:.0} s in; watch it at http://{}/systems/{}",
            s.id,
            svc.web,
            octant_runtime::web::path_segment(&s.id)
        );
    }
    Ok(spec)
}

/// Follows the aggregator's profiles and the alerter's alerts into the tally the view shows
/// (without a terminal, each alert is printed once as it fires).
fn follow_feeds(
    svc: &Services,
    tally: std::sync::Arc<std::sync::Mutex<Tally>>,
    web: String,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let tty = std::io::stdout().is_terminal();
    let (tally, mut profiles, mut alerts, stop) = (tally, svc.profiles.subscribe(), svc.alerts.subscribe(), stop);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                p = profiles.recv() => match p {
                    Ok(p) => { tally.lock().unwrap().profiles.insert((p.record.system_id.clone(), p.record.source), p.record); }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return,
                },
                a = alerts.recv() => match a {
                    Ok(a) => {
                        // Without a terminal, each alert is printed once as it fires.
                        if !tty { println!("ALERT {}", alert_line(&a, Some(&web))); }
                        tally.lock().unwrap().alerts.push(a);
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return,
                },
            }
        }
    })
}

/// The profile of the whole lake once the lake writer has drained, with where its evidence
/// packages are and how to query the lake.
async fn final_profile(profiler_cfg: &octant_profiler::ProfilerConfig, lake: &std::path::Path) -> anyhow::Result<()> {
    // The lake writer drained on shutdown: the lake now holds every record. The final profile.
    let now = octant_runtime::dlq::now_ms();
    let built = octant_profiler::run_once(profiler_cfg, &octant_profiler::periods(profiler_cfg, now), None, now)
        .await
        .context("final profile failed")?;
    let rows = built.iter().map(|b| (format!("{:<10} {:<5}", b.record.system_id, &b.record.source.as_str()[..4]), &b.dimension_profile));
    println!(
        "\n=== profile of the lake (last 24 h, DataFusion over its Delta tables) ===\n{}",
        crate::view::profile_table(rows, &format!("{:<10} {:<5}", "system", "src"))
    );
    println!("lake: {}", lake.display());
    println!("evidence packages (profile.json, profile.md, profile.html):");
    for b in &built {
        println!("  {}", b.record.evidence_uri.as_deref().unwrap_or("?"));
    }
    println!(
        "query the lake:\n  octant sql --lake {} \"SELECT system_id, metric, count(*) AS n, avg(value) AS mean FROM observations GROUP BY 1, 2 ORDER BY 1, 2\"",
        lake.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Before the first event every counter is absent or zero; an empty float sum is -0.0,
    /// which the first frames used to print as "-0".
    #[test]
    fn the_first_frame_prints_no_negative_zero() {
        let reg = prometheus::Registry::new();
        let c = prometheus::IntCounterVec::new(prometheus::Opts::new("octant_scorer_events_consumed_total", "x"), &["topic"]).unwrap();
        reg.register(Box::new(c)).unwrap();
        assert_eq!(counter(&reg, "octant_scorer_events_consumed_total"), 0);
        let truth = octant_gen::FleetSpec::demo(2, 1, 0);
        let frame = render(&Tally::default(), &reg, Duration::ZERO, &truth);
        assert!(!frame.contains("-0"), "{frame}");
        assert!(frame.contains("events in       0"), "{frame}");
    }
}
