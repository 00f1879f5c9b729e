//! The aggregator against a real broker: ground truth through the whole path (generator →
//! scorer → aggregator), and determinism across partitionings.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use octant_aggregator::AggregatorConfig;
use octant_contracts::{Decoder, DimensionProfile, MetricWindow, Source, topics};
use octant_gen::{EvaluationSpec, FleetSpec, SystemSpec};
use octant_integration_tests::*;

use crate::service_command;
use prometheus::Registry;
use tokio_util::sync::CancellationToken;

pub(crate) const T0: i64 = 1_764_489_600_000;

pub fn aggregator_config(env: &TestEnv) -> AggregatorConfig {
    let mut c = AggregatorConfig { stream: env.stream("aggregator"), ..AggregatorConfig::default() };
    c.evaluation.window.length = Duration::from_secs(600);
    c.evaluation.window.slide = Duration::from_secs(60);
    // The default allowed lateness (2 min): the watermark is the minimum over the scorer's
    // partitions, so skew between them (minutes of event time here, where event time runs
    // ~140× faster than the clock) delays windows instead of making data late.
    assert_eq!(c.evaluation.window.allowed_lateness, Duration::from_secs(120));
    // Duplicates recognised 20 min back (default: the window length, 10 min here): a scorer
    // SIGKILLed in these tests replays seconds of input, which at ~140× can span more event
    // time than the window; in a deployment, where event time runs with the clock, the same
    // replay spans seconds of a 1 h window.
    c.evaluation.window.duplicate_horizon = Some(Duration::from_secs(1200));
    c
}

/// System A unsafe at 0.25, B at 0.05, C gated at 0.70, D evaluated on a benchmark with
/// contamination 0.5.
pub(crate) fn truth_fleet() -> FleetSpec {
    let mut a = SystemSpec::new("sys-a");
    a.unsafe_action = 0.25;
    let mut b = SystemSpec::new("sys-b");
    b.unsafe_action = 0.05;
    let mut c = SystemSpec::new("sys-c");
    c.confirmation_gating = 0.70;
    let mut d = SystemSpec::new("sys-d");
    d.evaluation = Some(EvaluationSpec { benchmark: "leaky".into(), contamination: 0.5, attempts: 4, share: 1.0 });
    FleetSpec { systems: vec![a, b, c, d], seed: 17, start_ms: T0, run_spacing_ms: 2_000, poison: 0.0, json_share: 0.2 }
}

/// Every record on the windows topic (read to its end: call once the aggregator has stopped),
/// split by type, deduplicated by id (replays publish identical duplicates).
pub(crate) async fn read_windows(env: &TestEnv) -> (BTreeMap<String, MetricWindow>, BTreeMap<String, DimensionProfile>) {
    let raw = read_all_raw(&env.kafka, &env.topic(topics::WINDOWS)).await;
    let d = Decoder::new();
    let (mut windows, mut profiles) = (BTreeMap::new(), BTreeMap::new());
    for (_, _, _, v) in raw {
        let (_, known, _) = d.writer_of(&v).unwrap();
        match known.unwrap().full_name.as_str() {
            "ai.octant.v1.MetricWindow" => {
                let w: MetricWindow = d.decode(&v).unwrap();
                if let Some(prev) = windows.insert(w.window_id.clone(), w.clone()) {
                    assert_eq!(prev, w, "a re-published window is identical");
                }
            }
            "ai.octant.v1.DimensionProfile" => {
                let p: DimensionProfile = d.decode(&v).unwrap();
                profiles.insert(p.profile_id.clone(), p);
            }
            other => panic!("unexpected record {other} on the windows topic"),
        }
    }
    (windows, profiles)
}

/// The aggregator of [`aggregator_config`] as a child process (killed with SIGKILL by the test).
fn aggregator_process(env: &TestEnv, c: &AggregatorConfig, admin: std::net::SocketAddr) -> std::process::Child {
    let secs = |d: Duration| format!("{}s", d.as_secs());
    service_command("aggregator")
        .env("OCTANT_AGGREGATOR__KAFKA__BROKERS", &env.kafka.brokers)
        .env("OCTANT_AGGREGATOR__KAFKA__TOPIC_PREFIX", &env.kafka.topic_prefix)
        .env("OCTANT_AGGREGATOR__GROUP_ID", c.stream.group_id(&octant_aggregator::ID))
        .env("OCTANT_AGGREGATOR__ADMIN_ADDR", admin.to_string())
        .env("OCTANT_AGGREGATOR__COMMIT_INTERVAL", "200ms")
        .env("OCTANT_AGGREGATOR__EVALUATION__WINDOW__LENGTH", secs(c.evaluation.window.length))
        .env("OCTANT_AGGREGATOR__EVALUATION__WINDOW__SLIDE", secs(c.evaluation.window.slide))
        .env("OCTANT_AGGREGATOR__EVALUATION__WINDOW__TUMBLING", c.evaluation.window.tumbling.to_string())
        .env(
            "OCTANT_AGGREGATOR__EVALUATION__WINDOW__DUPLICATE_HORIZON",
            c.evaluation.window.duplicate_horizon.map_or_else(|| secs(c.evaluation.window.length), secs),
        )
        .spawn()
        .expect("aggregator process starts")
}

/// What a pipeline run leaves: windows and profiles (deduplicated by id), alerts, and the
/// final aggregator's metrics.
pub struct PipelineOutput {
    pub windows: BTreeMap<String, MetricWindow>,
    pub profiles: BTreeMap<String, DimensionProfile>,
    pub alerts: Vec<octant_contracts::Alert>,
    pub metrics: BTreeMap<String, f64>,
    /// Every observation on `octant.observations`, by id: (system, metric, event time, value,
    /// how many copies).
    pub observations: BTreeMap<String, (String, String, i64, f64, u32)>,
}

/// Runs generator → scorer → aggregator → alerter until the aggregator has published windows
/// up to the end of the generated event time. With `kills > 0`, the aggregator first runs as
/// a child process SIGKILLed that many times mid-stream, then in-process to the end.
///
/// The generated trajectories are all on the broker before the scorer starts: every stage
/// reads a backlog, so no upstream partition goes idle while others still have data and
/// nothing depends on how fast the machine is (or on other tests running beside).
async fn pipeline(env: &TestEnv, fleet: &FleetSpec, runs: u64, kills: u32) -> PipelineOutput {
    pipeline_with(env, aggregator_config(env), fleet, runs, kills).await
}

pub(crate) async fn pipeline_with(env: &TestEnv, agg_config: AggregatorConfig, fleet: &FleetSpec, runs: u64, kills: u32) -> PipelineOutput {
    pipeline_scored(env, env.scorer_config(), agg_config, fleet, runs, kills).await
}

/// [`pipeline_with`] with the scorer's configuration given (declared instruments).
pub(crate) async fn pipeline_scored(
    env: &TestEnv,
    scorer_config: octant_scorer::ScorerConfig,
    agg_config: AggregatorConfig,
    fleet: &FleetSpec,
    runs: u64,
    kills: u32,
) -> PipelineOutput {
    let records = octant_gen::generate(fleet, 0, runs);
    octant_gen::produce(&env.kafka, records, None).await.unwrap();
    let shutdown = CancellationToken::new();
    let scorer = octant_scorer::start(scorer_config, Registry::new(), shutdown.clone()).await.unwrap();
    let alerter = octant_alerter::start(crate::alerter::alerter_config(env, None), Registry::new(), shutdown.clone()).await.unwrap();
    let mut emitted_before_kills = 0.0;
    for round in 0..kills {
        let admin: std::net::SocketAddr = format!("127.0.0.1:{}", octant_runtime::broker::free_port()).parse().unwrap();
        let mut child = aggregator_process(env, &agg_config, admin);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            assert!(tokio::time::Instant::now() < deadline, "aggregator process made no progress in round {round}");
            tokio::time::sleep(Duration::from_millis(50)).await;
            if tokio::net::TcpStream::connect(admin).await.is_err() {
                continue;
            }
            let m = scrape(admin).await;
            // Kill once it has published something of its own: windows are mid-flight. An
            // instance that caught up before publishing 20 (the earlier ones left it little) is
            // killed then: waiting for windows that are not coming made this test flaky.
            let caught_up = m.keys().any(|k| k.starts_with("octant_aggregator_consumer_lag_messages{"))
                && total(&m, "octant_aggregator_consumer_lag_messages") == 0.0
                && total(&m, "octant_aggregator_windows_emitted_total") > 0.0;
            if total(&m, "octant_aggregator_windows_emitted_total") >= 20.0 || caught_up {
                emitted_before_kills += total(&m, "octant_aggregator_windows_emitted_total");
                break;
            }
        }
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
    }
    if kills > 0 {
        eprintln!("aggregator SIGKILLed {kills} times after publishing {emitted_before_kills} windows in all");
    }
    let window = agg_config.evaluation.window_spec();
    let agg = octant_aggregator::start(agg_config, Registry::new(), shutdown.clone()).await.unwrap();
    // The last window the data can close ends about (runs × spacing − lateness) after T0.
    let data_end = T0 + runs as i64 * fleet.run_spacing_ms;
    let last_end = data_end - window.lateness_ms - window.slide_ms;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    let mut scorer_metrics;
    let metrics = loop {
        let m = scrape(agg.admin_addr).await;
        let emitted = total(&m, "octant_aggregator_windows_emitted_total");
        let scorer_m = scrape(scorer.admin_addr).await;
        scorer_metrics = scorer_m.clone();
        let caught_up = scorer_m.keys().filter(|k| k.starts_with("octant_scorer_consumer_lag_messages{")).count() > 0
            && total(&scorer_m, "octant_scorer_consumer_lag_messages") == 0.0
            && m.keys().filter(|k| k.starts_with("octant_aggregator_consumer_lag_messages{")).count() > 0
            && total(&m, "octant_aggregator_consumer_lag_messages") == 0.0;
        // And the watermark of every input partition has reached the end of the data (the
        // last windows close on the scorer's last watermarks, which follow its last outputs).
        let watermarks: Vec<f64> =
            m.iter().filter(|(k, _)| k.starts_with("octant_aggregator_watermark_seconds{")).map(|(_, v)| *v).collect();
        let at_end = !watermarks.is_empty() && watermarks.iter().all(|w| *w * 1000.0 >= (data_end - 60_000) as f64);
        if emitted > 0.0 && caught_up && at_end {
            break m;
        }
        assert!(tokio::time::Instant::now() < deadline, "pipeline did not catch up: {m:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Stopped (each stage drains), every output topic is complete.
    shutdown.cancel();
    scorer.task.await.unwrap().unwrap();
    agg.task.await.unwrap().unwrap();
    alerter.task.await.unwrap().unwrap();
    // The scorer's output first: one observation id with two values would make windows depend
    // on which copy a (restarted) aggregator saw first.
    let mut observations = BTreeMap::new();
    for o in read_all::<octant_contracts::Observation>(&env.kafka, &env.topic(topics::OBSERVATIONS)).await {
        let e = observations.entry(o.observation_id.clone()).or_insert((o.system_id.clone(), o.metric.clone(), o.event_time, o.value, 0));
        assert_eq!((e.2, e.3), (o.event_time, o.value), "two observations {} differ", o.observation_id);
        e.4 += 1;
    }
    let (windows, profiles) = read_windows(env).await;
    assert!(windows.values().any(|w| w.window_end >= last_end - 120_000), "windows reach the end of the data");
    // A late evaluation result is counted as historical (an imported log's): none in a live run.
    assert_eq!(metrics.get("octant_aggregator_observations_total{outcome=\"historical\"}").copied().unwrap_or(0.0), 0.0);
    let late = metrics.get("octant_aggregator_observations_total{outcome=\"late\"}").copied().unwrap_or(0.0);
    if late > 0.0 {
        // What was late, and what the scorer and the aggregator said about their inputs.
        let d = Decoder::new();
        let mut by: BTreeMap<(String, i32), (usize, i64, i64, String)> = BTreeMap::new();
        // How many copies of each late observation the scorer produced (0, 1, 2, 3 or more).
        let mut copies_of_late = [0usize; 4];
        let mut late_ids = std::collections::BTreeSet::new();
        for dl in read_all::<octant_contracts::DeadLetter>(&env.kafka, &env.topic(topics::DLQ)).await {
            if dl.error_class != "late_observation" {
                continue;
            }
            let o: octant_contracts::Observation = d.decode(&dl.payload).unwrap();
            late_ids.insert(o.observation_id.clone());
            copies_of_late[observations.get(&o.observation_id).map_or(0, |x: &(String, String, i64, f64, u32)| x.4 as usize).min(3)] += 1;
            let e = by.entry((o.metric.clone(), dl.partition)).or_insert((0, i64::MAX, i64::MIN, dl.error_message.clone()));
            e.0 += 1;
            e.1 = e.1.min(o.event_time);
            e.2 = e.2.max(o.event_time);
        }
        eprintln!("late observations by copies on the observations topic [0, 1, 2, 3+]: {copies_of_late:?}");
        // Where the first late observation of each partition sits among the scorer's
        // watermarks: what each upstream partition had announced before it, in offset order.
        let raw = octant_runtime::topic::read_to_end(&env.kafka, &env.topic(topics::OBSERVATIONS), Duration::from_secs(60)).await.unwrap();
        // (observations partition, upstream topic, upstream partition) → (watermark, idle, offset).
        type Announced = BTreeMap<(i32, String, i32), (Option<i64>, bool, i64)>;
        let mut announced = Announced::new();
        let mut reported = std::collections::BTreeSet::new();
        for r in &raw {
            if let Ok(w) = d.decode::<octant_contracts::Watermark>(&r.payload) {
                let key = (r.partition, w.source_topic.clone(), w.source_partition);
                if announced.get(&key).is_none_or(|a| a.1 != w.idle) && reported.len() < 2 {
                    eprintln!(
                        "  partition {} offset {}: {}[{}] idle {} watermark {:?}",
                        r.partition, r.offset, w.source_topic, w.source_partition, w.idle, w.watermark
                    );
                }
                announced.insert(key, (w.watermark, w.idle, r.offset));
            } else if let Ok(o) = d.decode::<octant_contracts::Observation>(&r.payload)
                && late_ids.contains(&o.observation_id)
                && reported.insert(r.partition)
            {
                eprintln!(
                    "first late observation of partition {} at offset {} (event time {}, run {}); watermarks announced before it:",
                    r.partition, r.offset, o.event_time, o.run_id
                );
                for ((p, topic, sp), (wm, idle, at)) in &announced {
                    if *p == r.partition {
                        eprintln!("  {topic}[{sp}] = {wm:?} idle {idle} (offset {at})");
                    }
                }
            }
        }
        for ((metric, partition), (n, lo, hi, example)) in &by {
            eprintln!("late: {n} × {metric} on observations partition {partition}, event time {lo}..{hi}; e.g. {example}");
        }
        for (k, v) in scorer_metrics.iter().chain(metrics.iter()) {
            if ["abandoned", "gaps", "replays", "duplicate", "dead_letters", "upstream", "watermark", "rebalance", "assigned"]
                .iter()
                .any(|w| k.contains(w))
            {
                eprintln!("  {k} = {v}");
            }
        }
    }
    assert_eq!(late, 0.0, "nothing late");
    let alerts = read_all(&env.kafka, &env.topic(topics::ALERTS)).await;
    PipelineOutput { windows, profiles, alerts, metrics, observations }
}

fn dim<'a>(p: &'a DimensionProfile, d: &str) -> &'a octant_contracts::DimensionBand {
    p.dimensions.iter().find(|x| x.dimension == d).unwrap()
}

/// Ground truth through the pipeline: A's unsafe-action veto is confirmed, Safety 0 and
/// unsuitable; B's never goes past at risk; C's Oversight is capped at 1; D's contaminated
/// benchmark voids its construct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ground_truth_through_the_pipeline() {
    let env = TestEnv::new("truth", 4).await;
    let fleet = truth_fleet();
    let PipelineOutput { windows, profiles, alerts, metrics: m, .. } = pipeline(&env, &fleet, 900, 0).await;
    let of = |sys: &str, src: Source| -> Vec<&DimensionProfile> {
        let mut v: Vec<_> = profiles.values().filter(|p| p.system_id == sys && p.source == src).collect();
        v.sort_by_key(|p| p.window_end);
        v
    };

    // A: confirmed, Safety 0, unsuitable. After how many runs?
    let a = of("sys-a", Source::Production);
    let first = a
        .iter()
        .find(|p| p.vetoes.iter().any(|v| v.rule == "unsafe_action_veto" && v.state == "confirmed"))
        .expect("A's unsafe-action veto is confirmed");
    assert_eq!(dim(first, "safety").band, Some(0));
    assert!(first.unsuitable);
    let runs_at_confirmation = (first.window_end - T0) / fleet.run_spacing_ms;
    let w = &windows
        [&octant_engine::verdicts::window_id("sys-a", "1.0.0", Source::Production, "unsafe_action_rate", None, None, first.window_end)];
    eprintln!(
        "system A confirmed unsafe in the window ending {} min after the start: ~{runs_at_confirmation} runs generated, {} runs ({} steps) in the window, estimate {:.3} [{:.3}, {:.3}]",
        (first.window_end - T0) / 60_000,
        w.clusters,
        w.units,
        w.estimate.unwrap(),
        w.ci_low.unwrap(),
        w.ci_high.unwrap()
    );
    let late = a.iter().rfind(|p| dim(p, "safety").band.is_some()).unwrap();
    assert!(late.unsuitable && dim(late, "safety").band == Some(0));

    // B: never breached or confirmed.
    for p in of("sys-b", Source::Production) {
        for v in p.vetoes.iter().filter(|v| v.rule == "unsafe_action_veto") {
            assert!(v.state == "clear" || v.state == "at_risk", "B at {}: {v:?}", p.window_end);
        }
        assert!(!p.unsuitable);
    }

    // C: Oversight capped at 1 once the gating evidence suffices.
    let c = of("sys-c", Source::Production);
    let capped = c.iter().filter(|p| dim(p, "oversight").capped_by.iter().any(|r| r == "confirmation_gating_veto")).count();
    assert!(capped > 0, "C's oversight is capped");
    for p in c.iter().filter(|p| !dim(p, "oversight").capped_by.is_empty()) {
        assert!(dim(p, "oversight").band.unwrap() <= 1);
    }

    // D: the contaminated benchmark's construct is void.
    let d = of("sys-d", Source::Evaluation);
    let last = d.last().expect("D has evaluation profiles");
    assert!(
        last.vetoes.iter().any(|v| v.rule == "contamination_veto" && v.state == "confirmed" && v.benchmark.as_deref() == Some("leaky"))
    );
    let cap = dim(last, "capability");
    assert_eq!(cap.band, None, "capability measured only on the void benchmark is N/A: {cap:?}");
    assert!(cap.na_reason.as_deref().unwrap_or("").contains("void"), "{cap:?}");
    // Its scores are published void: pass@k, pass^k and task success on it have no estimate,
    // interval or band, and say why.
    for metric in ["pass_at_4", "pass_hat_4", "task_success"] {
        let last = windows.values().filter(|w| w.system_id == "sys-d" && w.metric == metric).max_by_key(|w| w.window_end).unwrap();
        assert_eq!((last.estimate, last.ci_low, last.band), (None, None, None), "{last:?}");
        assert_eq!(last.na_reason.as_deref(), Some("void: benchmark leaky contaminated (0.50)"), "{last:?}");
    }

    // Gauges.
    assert!(m.keys().any(|k| k.starts_with("octant_metric_estimate{") && k.contains("sys-a") && k.contains("unsafe_action_rate")));
    assert!(m.keys().any(|k| k.starts_with("octant_dimension_band{") && k.contains("sys-a") && k.contains("safety")));
    assert_eq!(m.iter().find(|(k, _)| k.starts_with("octant_system_unsuitable{") && k.contains("sys-a")).map(|(_, v)| *v), Some(1.0));
    assert!(total(&m, "octant_aggregator_observations_total") > 0.0);
    let late = m.get("octant_aggregator_observations_total{outcome=\"late\"}").copied().unwrap_or(0.0);
    if late > 0.0 {
        let dead: Vec<octant_contracts::DeadLetter> = collect(&env.kafka, &env.topic(topics::DLQ), 5, Duration::from_secs(5)).await;
        let d = Decoder::new();
        for x in &dead {
            let o: octant_contracts::Observation = d.decode(&x.payload).unwrap();
            eprintln!(
                "LATE {} {} t={} p={} o={} : {}",
                o.observation_id, o.system_id, o.event_time, x.partition, x.offset, x.error_message
            );
        }
    }
    assert_eq!(late, 0.0, "nothing late");

    // Alerts: A is paged (critical), B never; C's gating veto fires too.
    let veto = |sys: &str, rule: &str| -> Vec<&octant_contracts::Alert> {
        alerts.iter().filter(|a| a.system_id == sys && a.rule == rule && a.kind == octant_contracts::AlertKind::Veto).collect()
    };
    let a_alerts = veto("sys-a", "unsafe_action_veto");
    let paged = a_alerts
        .iter()
        .find(|a| a.severity == octant_contracts::Severity::Critical && a.status == octant_contracts::AlertStatus::Firing)
        .expect("A is paged");
    eprintln!("system A paged: {} (window ending {} min after the start)", paged.summary, (paged.window_end.unwrap() - T0) / 60_000);
    assert!(paged.window_end.unwrap() <= first.window_end, "paged no later than the profile shows confirmed");
    assert!(veto("sys-b", "unsafe_action_veto").is_empty(), "B is never paged: {:?}", veto("sys-b", "unsafe_action_veto"));
    assert!(!veto("sys-c", "confirmation_gating_veto").is_empty(), "C's gating veto alerts");
    // The generator's critical unsafe actions raise incidents with the run and step.
    let incidents: Vec<_> = alerts.iter().filter(|a| a.kind == octant_contracts::AlertKind::Incident).collect();
    assert!(!incidents.is_empty());
    assert!(incidents.iter().all(|i| i.run_id.is_some() && i.step.is_some() && !i.violations.is_empty()));
    eprintln!("{} incidents, {} veto alerts", incidents.len(), alerts.len() - incidents.len());
}

/// The same generated input through 1 partition, through 4, and through 4 with the aggregator
/// SIGKILLed three times mid-stream yields identical windows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_do_not_depend_on_partitioning_or_crashes() {
    let mut fleet = truth_fleet();
    fleet.systems.truncate(2);
    let one = TestEnv::new("part1", 1).await;
    let out1 = pipeline(&one, &fleet, 700, 0).await;
    drop(one);
    let four = TestEnv::new("part4", 4).await;
    let out4 = pipeline(&four, &fleet, 700, 0).await;
    drop(four);
    let killed = TestEnv::new("killed", 4).await;
    let outk = pipeline(&killed, &fleet, 700, 3).await;
    assert_eq!(outk.metrics.get("octant_aggregator_observations_total{outcome=\"late\"}").copied().unwrap_or(0.0), 0.0);
    assert_eq!(outk.metrics.get("octant_aggregator_observations_total{outcome=\"historical\"}").copied().unwrap_or(0.0), 0.0);
    let (w1, w4, wk) = (&out1.windows, &out4.windows, &outk.windows);
    assert!(w1.len() > 100, "{} windows", w1.len());
    for (name, other, out) in [("4 partitions", w4, &out4), ("4 partitions with 3 crashes", wk, &outk)] {
        // The scorer's output is the same input to both aggregators (else a difference is the
        // scorer's, not the windows').
        let ids = |o: &PipelineOutput| o.observations.iter().map(|(k, v)| (k.clone(), (v.2, v.3))).collect::<BTreeMap<_, _>>();
        let (a, b) = (ids(&out1), ids(out));
        let differ: Vec<_> = a
            .iter()
            .filter(|(k, v)| b.get(*k) != Some(v))
            .map(|(k, _)| k)
            .chain(b.keys().filter(|k| !a.contains_key(*k)))
            .take(10)
            .collect();
        assert!(differ.is_empty(), "{name}: the scorer's observations differ: {differ:?}");
        // Compare the windows both runs closed (the first and last few depend on where each
        // run started and stopped).
        let common: Vec<&String> = w1.keys().filter(|k| other.contains_key(*k)).collect();
        assert!(common.len() as f64 > 0.9 * w1.len() as f64, "{name}: {} of {} windows in common", common.len(), w1.len());
        let differing: Vec<_> = common.iter().filter(|k| w1[**k] != other[**k]).collect();
        for k in differing.iter().take(3) {
            let (a, b) = (&w1[**k], &other[**k]);
            eprintln!(
                "DIFF {k}: units {} vs {}, clusters {} vs {}, est {:?} vs {:?}",
                a.units, b.units, a.clusters, b.clusters, a.estimate, b.estimate
            );
            // What the window holds by the observations topic (deduplicated by id).
            let held = out1
                .observations
                .values()
                .filter(|o| o.0 == a.system_id && o.1 == a.metric && o.2 >= a.window_start && o.2 < a.window_end)
                .fold((0u32, 0.0), |(n, s), o| (n + 1, s + o.3));
            eprintln!("  by the topic: {} units, mean {:.4}", held.0, held.1 / held.0 as f64);
        }
        assert!(differing.is_empty(), "{} of {} windows differ between 1 partition and {name}", differing.len(), common.len());
        eprintln!("{} windows identical between 1 partition and {name}", common.len());
    }
}

/// Coverage through the whole pipeline: over many tumbling windows of generated data with
/// known rates, the emitted 95 % intervals cover the true rate about 95 % of the time.
/// Accepted band: 92–98 % (about ±3 binomial standard errors at ~500 trials). Measured with
/// seed 23 (chosen before the first run), 2026-12-02, with per-agent unsafe rates on cov-1 and
/// task families on cov-4: 95.4 % overall (435 of 456 windows; 95.0 %, 433, before those two
/// were added); 95.2 % (434 of 456) since cov-5's injected faults (2026-12-06). The
/// grounded-drafting, review and coordination instruments (22, drawn from a stream of their
/// own), RCC (cov-0 against a declared single-agent baseline), the run error rate (issue 45:
/// errors among the failures, a stream of their own), graceful degradation with its two
/// success series (cov-5: faults in 40 % of runs keep 60 % of their success) and escalation
/// precision and recall against gold labels (cov-2, cov-3) and cov-3's compliance signals
/// (policy violations, leakage, a harm classifier, a protocol) and prompt-injection attacks
/// are a second group, accepted at 90–99 %: 95.1 % (1,464 of 1,539 windows, 2026-12-06, with
/// policy_violation_rate 94.7 %, protocol_adherence and data_leakage_rate 100 %,
/// harmful_output_rate and injection_success_rate 89.5 % of 19 each; the attacks' extra
/// calls take cov-3's unsafe-action rate out of the first group: 95.0 %, 415 of 437); before
/// them 95.2 % (1,374 of 1,444, with the fault outcomes of cov-5:
/// detection 94.7 %, containment and recovery 100 % of 19; escalation precision and recall
/// 97.4 % of 38 each, run_error_rate 96.5 % of 114, graceful_degradation 94.7 % of 19,
/// task_success_under_fault 94.7 % of 19,
/// task_success_fault_free 93.0 % of 114, review_burden 87.7 % of 57; the engine's simulation
/// test covers graceful degradation's interval over 2,100 windows). Before 2026-12-05's fix of
/// weightless units, review_burden covered its true value in 29.8 % of windows (a failed run's
/// minutes were left out of the numerator since 2026-12-04). The per-agent and per-family
/// slices are a third, accepted at 90–99 %: 92.9 % (247 of 266), with the pooled slice rates
/// naming the agent and the family that drive the joint rate (executor 0.134 vs planner 0.049,
/// true 0.15 / 0.05; families 0.682 vs 0.291, true 0.7 / 0.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intervals_cover_the_true_rates() {
    let env = TestEnv::new("coverage", 4).await;
    let rates = [
        (0.05, 0.95, 0.9, 0.05),
        (0.10, 0.85, 0.8, 0.10),
        (0.15, 0.75, 0.7, 0.15),
        (0.20, 0.65, 0.6, 0.20),
        (0.25, 0.90, 0.5, 0.08),
        (0.30, 0.70, 0.85, 0.12),
    ];
    let systems: Vec<SystemSpec> = rates
        .iter()
        .enumerate()
        .map(|(i, (u, g, s, e))| {
            let mut x = SystemSpec::new(&format!("cov-{i}"));
            (x.unsafe_action, x.confirmation_gating, x.task_success, x.tool_error) = (*u, *g, *s, *e);
            // Errors among the failures, from a stream of their own (outcome ERROR instead of
            // FAILURE: nothing else in the data moves).
            x.run_error = 0.2 + 0.1 * i as f64;
            // Grounded drafting on three systems, a human review on the other three (one
            // against an estimated baseline): drawn from a stream of their own, so the data
            // of the four metrics above is what it was without them.
            if i < 2 {
                // Two multi-agent systems' coordination (Table IX).
                x.agents = vec!["planner".into(), "executor".into()];
                x.coordination = Some(octant_gen::CoordinationSpec::typical());
            }
            if i == 1 {
                // Its executor takes three times as many unsafe steps as its planner (the joint
                // rate stays within 0.003 of 0.10: the planner takes slightly more steps).
                x.unsafe_by_agent = Some(vec![0.05, 0.15]);
            }
            if i == 2 || i == 3 {
                // Gold "needs a human" labels on every step, and escalations against them at
                // these precision and recall (a stream of their own).
                x.escalation = Some(if i == 2 {
                    octant_gen::EscalationSpec { needed: 0.2, recall: 0.7, precision: 0.8 }
                } else {
                    octant_gen::EscalationSpec { needed: 0.3, recall: 0.9, precision: 0.6 }
                });
            }
            if i == 5 {
                // Faults injected into 40 % of its runs keep 60 % of their success (graceful
                // degradation 0.6; success under fault 0.51, without 0.85, overall 0.714), from
                // a stream of their own.
                // Its harness reports each fault's outcome: 70 % detected, 60 % contained, 40 %
                // recovered.
                x.faults = Some(octant_gen::FaultSpec { share: 0.4, success_factor: 0.6, outcomes: Some((0.7, 0.6, 0.4)) });
            }
            if i == 3 {
                // Policy violations on 10 % of its tool calls, an e-mail address sent out in 5 %
                // of those with arguments, a harm classifier flagging 15 % of its outputs, and the
                // refunds protocol followed in order in 70 % of its runs (adherence 0.8), from a
                // stream of their own.
                x.compliance = Some(octant_gen::ComplianceSpec { policy_violation: 0.1, leakage: 0.05, harmful: 0.15, protocol: 0.7 });
                // Prompt-injection attacks on 60 % of its runs, followed in 35 % of them (its
                // unsafe-action rate is no longer the declared one: not in the first group).
                x.injection = Some(octant_gen::InjectionSpec { attacked: 0.6, success: 0.35 });
            }
            if i == 4 {
                // Two task families around its 0.5: each family's windows recover its own rate.
                x.task_families = vec![("emergent_planner".into(), 0.3), ("verifiable_executor".into(), 0.7)];
            }
            if i < 3 {
                let mut d = octant_gen::DraftingSpec::grounded();
                d.citation_precision_strict -= 0.1 * i as f64;
                d.irrelevance += 0.05 * i as f64;
                x.drafting = Some(d);
            } else {
                let mut r = octant_gen::ReviewSpec::observed();
                r.catch_rate -= 0.1 * (i - 3) as f64;
                if i == 5 {
                    r.baseline = octant_contracts::BaselineKind::Estimated;
                    r.manual_minutes = 40.0;
                }
                x.review = Some(r);
            }
            x
        })
        .collect();
    let truth = |sys: &str, metric: &str| -> Option<f64> {
        let x = systems.iter().find(|s| s.id == sys)?;
        match metric {
            "unsafe_action_rate" => x.true_value("unsafe_action_rate"),
            "confirmation_gating" => Some(x.confirmation_gating),
            "task_success" => x.true_value("task_success"),
            "tool_error_rate" => Some(x.tool_error),
            _ => None,
        }
    };
    let fleet = FleetSpec { systems: systems.clone(), seed: 23, start_ms: T0, run_spacing_ms: 2_000, poison: 0.0, json_share: 0.2 };
    let mut cfg = aggregator_config(&env);
    cfg.evaluation.window.length = Duration::from_secs(120);
    cfg.evaluation.window.tumbling = true;
    for s in ["cov-0", "cov-1"] {
        cfg.evaluation.system_types.insert(s.into(), octant_core::catalogue::SystemType::MultiAgent);
    }
    // cov-0 against a single-agent baseline of 0.95: RCC = 1 − 0.9 / 0.95.
    cfg.evaluation.single_agent_baselines.insert("cov-0".into(), 0.95);
    // cov-3's compliance: its policy, its protocol and its harm classifier declared.
    let compliance: octant_engine::config::EvaluationConfig = toml::from_str(octant_gen::COMPLIANCE_DECLARATIONS).unwrap();
    compliance.check().unwrap();
    compliance.declare_instruments().unwrap();
    cfg.evaluation.adopt(&compliance);
    let mut scorer = env.scorer_config();
    scorer.evaluation = cfg.evaluation.clone();
    let out = pipeline_scored(&env, scorer, cfg, &fleet, 1200, 0).await;
    let (mut trials, mut covered) = (0u32, 0u32);
    let mut by_metric: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for w in out.windows.values() {
        // Whole windows only (the first starts before the data); joint series (slices below).
        if w.window_start < T0 || w.slice_kind.is_some() {
            continue;
        }
        let (Some(t), Some(lo), Some(hi)) = (truth(&w.system_id, &w.metric), w.ci_low, w.ci_high) else { continue };
        let hit = lo <= t && t <= hi;
        if std::env::var_os("OCTANT_DEBUG_COVERAGE").is_some() && w.metric == "unsafe_action_rate" {
            eprintln!(
                "{} {} t={t} est={:.4} [{lo:.4}, {hi:.4}] units={} clusters={} {}",
                w.system_id,
                (w.window_end - T0) / 60_000,
                w.estimate.unwrap(),
                w.units,
                w.clusters,
                if hit { "" } else { "MISS" }
            );
        }
        trials += 1;
        covered += hit as u32;
        let e = by_metric
            .entry(match w.metric.as_str() {
                "unsafe_action_rate" => "unsafe_action_rate",
                "confirmation_gating" => "confirmation_gating",
                "task_success" => "task_success",
                _ => "tool_error_rate",
            })
            .or_default();
        e.0 += 1;
        e.1 += hit as u32;
    }
    let rate = covered as f64 / trials as f64;
    eprintln!(
        "coverage through the pipeline: {covered}/{trials} = {:.1} % (tumbling 2-min windows, 6 systems, B = 1000); by metric: {}",
        100.0 * rate,
        by_metric.iter().map(|(m, (n, c))| format!("{m} {:.1} % of {n}", 100.0 * *c as f64 / *n as f64)).collect::<Vec<_>>().join(", ")
    );
    assert!(trials >= 400, "{trials} trials");
    assert!((0.92..=0.98).contains(&rate), "coverage {rate:.3} outside 92–98 %");

    // The drafting, review and coordination instruments against the generator's true values.
    let (mut new_trials, mut new_covered) = (0u32, 0u32);
    let mut new_by_metric: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for w in out.windows.values().filter(|w| w.window_start >= T0 && w.slice_kind.is_none()) {
        let rcc = (w.metric == "relative_coordination_cost").then(|| 1.0 - truth(&w.system_id, "task_success").unwrap() / 0.95);
        let Some(t) = systems.iter().find(|s| s.id == w.system_id).and_then(|s| s.true_value(&w.metric)).or(rcc) else { continue };
        if truth(&w.system_id, &w.metric).is_some() {
            continue;
        }
        let (Some(lo), Some(hi)) = (w.ci_low, w.ci_high) else { continue };
        let hit = lo <= t && t <= hi;
        new_trials += 1;
        new_covered += hit as u32;
        let e = new_by_metric.entry(octant_core::spec(&w.metric).unwrap().id).or_default();
        e.0 += 1;
        e.1 += hit as u32;
    }
    eprintln!(
        "drafting, review and coordination coverage: {new_covered}/{new_trials} = {:.1} %; by metric: {}",
        100.0 * new_covered as f64 / new_trials as f64,
        new_by_metric.iter().map(|(m, (n, c))| format!("{m} {:.1} % of {n}", 100.0 * *c as f64 / *n as f64)).collect::<Vec<_>>().join(", ")
    );
    assert_eq!(
        new_by_metric.len(),
        37,
        "every drafting, review, coordination, run-error, graceful-degradation, escalation, compliance and injection instrument windowed: {new_by_metric:?}"
    );
    assert!(new_trials >= 500, "{new_trials} trials");
    let new_rate = new_covered as f64 / new_trials as f64;
    assert!((0.90..=0.99).contains(&new_rate), "drafting, review and coordination coverage {new_rate:.3} outside 90–99 %");

    // Slices: per agent for the two systems declared multi-agent only, per family where runs
    // declare one; each slice's interval covers its own true rate, and the units of a
    // metric's slices add up to its joint series'.
    // (system, slice, metric) → (windows with a truth, covered, Σ units·estimate, Σ units)
    type Tally = (u32, u32, f64, f64);
    let mut slices: BTreeMap<(String, String, String), Tally> = BTreeMap::new();
    for w in out.windows.values().filter(|w| w.slice_kind.is_some()) {
        let (kind, value) = (w.slice_kind.clone().unwrap(), w.slice.clone().unwrap());
        let x = systems.iter().find(|s| s.id == w.system_id).unwrap();
        assert_eq!(w.veto_state, None, "a slice has no veto state: {w:?}");
        let joint = out
            .windows
            .values()
            .find(|j| j.slice_kind.is_none() && j.system_id == w.system_id && j.metric == w.metric && j.window_end == w.window_end)
            .expect("a slice's joint series");
        let siblings: i64 = out
            .windows
            .values()
            .filter(|s| {
                s.slice_kind.as_deref() == Some(&kind) && s.system_id == w.system_id && s.metric == w.metric && s.window_end == w.window_end
            })
            .map(|s| s.units)
            .sum();
        assert_eq!(siblings, joint.units, "{}'s {kind} slices of {} add up to the joint units", w.system_id, w.metric);
        let truth = match (kind.as_str(), w.metric.as_str()) {
            ("agent", "unsafe_action_rate") if x.unsafe_by_agent.is_some() => {
                Some(x.unsafe_by_agent.as_ref().unwrap()[x.agents.iter().position(|a| *a == value).unwrap()])
            }
            ("agent", m) => truth(&w.system_id, m),
            ("task_family", "task_success") => x.family_success(&value),
            _ => None,
        };
        let e = slices.entry((w.system_id.clone(), format!("{kind}={value}"), w.metric.clone())).or_default();
        e.2 += w.units as f64 * w.estimate.unwrap_or(0.0);
        e.3 += w.units as f64;
        let (Some(t), Some(lo), Some(hi)) = (truth, w.ci_low, w.ci_high) else { continue };
        if w.window_start < T0 {
            continue;
        }
        e.0 += 1;
        e.1 += (lo <= t && t <= hi) as u32;
    }
    let systems_sliced: BTreeSet<(&str, &str)> = slices.keys().map(|(s, k, _)| (s.as_str(), k.split('=').next().unwrap())).collect();
    assert_eq!(
        systems_sliced,
        [("cov-0", "agent"), ("cov-1", "agent"), ("cov-3", "task_family"), ("cov-4", "task_family")].into(),
        "agents of the declared multi-agent systems, the families of the systems with families (cov-3's runs are all of the refunds family)"
    );
    let (n, c) = slices.values().fold((0, 0), |(n, c), e| (n + e.0, c + e.1));
    eprintln!(
        "slices: {c}/{n} = {:.1} % of windows cover their slice's true rate; pooled: {}",
        100.0 * c as f64 / n as f64,
        slices
            .iter()
            .filter(|((s, _, m), _)| (s == "cov-1" && m == "unsafe_action_rate") || m == "task_success")
            .map(|((s, k, m), e)| format!("{s} {k} {m} {:.3}", e.2 / e.3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(n >= 150, "{n} slice windows with a true value");
    assert!((0.90..=0.99).contains(&(c as f64 / n as f64)), "slice coverage {c}/{n} outside 90–99 %");
    let pooled = |k: &str, m: &str| {
        let e = slices[&(if k.starts_with("agent") { "cov-1" } else { "cov-4" }.to_string(), k.to_string(), m.to_string())];
        e.2 / e.3
    };
    // Which agent drives the rate, and which family regressed, visible in the slices.
    assert!(pooled("agent=executor", "unsafe_action_rate") > pooled("agent=planner", "unsafe_action_rate") + 0.05);
    assert!(pooled("task_family=verifiable_executor", "task_success") > pooled("task_family=emergent_planner", "task_success") + 0.25);
}

/// Late data is never silently lost: an observation older than the window frontier goes to the
/// dead-letter topic with its reason and is counted; one before it in time but not late is
/// windowed. (Observations and watermarks written directly, as the scorer would.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_observations_are_dead_lettered() {
    use octant_contracts::codec::to_single_object;
    use octant_contracts::{Observation, Watermark};
    use octant_runtime::kafka::{OutRecord, producer, send};
    let env = TestEnv::new("late", 1).await;
    let shutdown = CancellationToken::new();
    let cfg = AggregatorConfig { upstream_topics: vec!["upstream".into()], ..aggregator_config(&env) };
    let agg = octant_aggregator::start(cfg, Registry::new(), shutdown.clone()).await.unwrap();
    let p = producer(&env.kafka, "test").unwrap();
    let obs = |i: i64, t: i64| Observation {
        observation_id: format!("run-{i}/unsafe_action_rate/1"),
        metric: "unsafe_action_rate".into(),
        system_id: "sys-late".into(),
        system_version: "1".into(),
        source: Source::Production,
        agent_id: None,
        run_id: format!("run-{i}"),
        task_id: None,
        attempt: None,
        groups: vec![],
        benchmark: None,
        task_family: None,
        cluster_id: format!("run-{i}"),
        step: Some(1),
        event_time: t,
        value: (i % 5 == 0) as u8 as f64,
        weight: 1.0,
        confidence: None,
        provenance: None,
        rerun_of: None,
    };
    let wm = |t: i64| Watermark {
        service: "scorer".into(),
        source_topic: env.topic("upstream"),
        source_partition: 0,
        source_partitions: 1,
        watermark: Some(t),
        idle: false,
        produced_at: 0,
    };
    let topic = env.topic(topics::OBSERVATIONS);
    let put = |payload: Vec<u8>| OutRecord { topic: topic.clone(), partition: Some(0), key: "sys-late".into(), payload };
    // 40 observations over 20 minutes, then the watermark at 20 min: windows up to 18 min close.
    for i in 0..40 {
        send(&p, &put(to_single_object(&obs(i, T0 + i * 30_000)).unwrap())).await.unwrap();
    }
    send(&p, &put(to_single_object(&wm(T0 + 20 * 60_000)).unwrap())).await.unwrap();
    // Late: 10 min old. Not late: 19 min (after the frontier at 18 min).
    send(&p, &put(to_single_object(&obs(100, T0 + 10 * 60_000)).unwrap())).await.unwrap();
    send(&p, &put(to_single_object(&obs(101, T0 + 19 * 60_000)).unwrap())).await.unwrap();
    let dead: Vec<octant_contracts::DeadLetter> = collect(&env.kafka, &env.topic(topics::DLQ), 1, Duration::from_secs(30)).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    let d = &dead[0];
    assert_eq!((d.error_class.as_str(), d.source_topic.as_str(), d.partition, d.offset), ("late_observation", topic.as_str(), 0, 41));
    assert!(d.error_message.contains("frontier"), "{}", d.error_message);
    let late: Observation = Decoder::new().decode(&d.payload).unwrap();
    assert_eq!(late.observation_id, "run-100/unsafe_action_rate/1");
    let m = scrape(agg.admin_addr).await;
    assert_eq!(m["octant_aggregator_observations_total{outcome=\"late\"}"], 1.0);
    assert_eq!(m["octant_aggregator_dead_letters_total{error_class=\"late_observation\"}"], 1.0);
    assert_eq!(m["octant_aggregator_observations_total{outcome=\"accepted\"}"], 41.0);
    shutdown.cancel();
    agg.task.await.unwrap().unwrap();
    let (windows, _) = read_windows(&env).await;
    // The window ending at 18 min (10 min long) holds the 20 observations of [8, 18) min and
    // not the late one at 10 min.
    let w = windows.values().find(|w| w.window_end == T0 + 18 * 60_000).expect("window ending at 18 min");
    assert_eq!(w.units, 20);
}
