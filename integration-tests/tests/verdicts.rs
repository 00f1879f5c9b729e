//! Verdicts on thin and odd evidence, through the real services (scorer → aggregator →
//! alerter, lake writer → profiler) on a real broker: one verdict per window, made by the
//! aggregator and used as it is everywhere downstream.
//!
//! - `thin`: one production run, one violating step out of four (0.25, which a per-look
//!   interval would call confirmed): its window is N/A with the reason, carries no veto
//!   state, the gauges say "no verdict" (-1) and carry no estimate, nothing is flagged and
//!   nothing pages.
//! - `leaky`: evaluation runs on a benchmark declaring contamination 0.55: the benchmark's
//!   task-success windows are published void (no estimate, band or interval; the reason), and
//!   the gauges say so.
//! - `selfish`: 40 runs whose success only the agent reports: `task_success_self_reported` is
//!   reported, Capability is N/A (only informational instruments), and a gate on task success
//!   is N/A with the reason.
//! - An unknown metric and a derived metric (`pass_at_1`) on `octant.observations` are
//!   dead-lettered with their classes, never dropped silently.

use std::collections::BTreeMap;
use std::time::Duration;

use octant_contracts::codec::to_single_object;
use octant_contracts::{Alert, DeadLetter, Decoder, DimensionProfile, MetricWindow, Observation, Source, topics};
use octant_core::gate::Thresholds;
use octant_integration_tests::*;
use octant_runtime::kafka::{self, OutRecord};
use prometheus::Registry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::aggregator::{T0, aggregator_config};

const SEC: i64 = 1000;

fn event(system: &str, run: &str, source: &str, seq: i64, t: i64, body: serde_json::Value) -> (String, serde_json::Value) {
    let kind = body.as_object().unwrap().keys().next().unwrap().to_uppercase();
    let mut ev = json!({
        "event_id": format!("{run}/{seq}"), "run_id": run, "system": {"id": system, "version": "1.0.0"},
        "source": source, "event_time": t, "sequence": seq, "kind": kind,
    });
    for (k, v) in body.as_object().unwrap() {
        ev[k] = v.clone();
    }
    (run.to_string(), ev)
}

/// The trajectory events of the scenario, (key, JSON) on the production or evaluation topic.
fn scenario() -> Vec<(bool, String, serde_json::Value)> {
    let mut out = Vec::new();
    let mut push = |production: bool, e: (String, serde_json::Value)| out.push((production, e.0, e.1));
    // thin: one run, four low-impact steps, the third violating a constraint.
    push(true, event("thin", "thin-1", "production", 0, T0 + SEC, json!({"run_started": {"task_id": "t"}})));
    for s in 1..=4 {
        let violations: Vec<&str> = if s == 3 { vec!["no_pii_in_logs"] } else { vec![] };
        push(
            true,
            event(
                "thin",
                "thin-1",
                "production",
                s,
                T0 + (1 + s) * SEC,
                json!({"step": {"step_kind": "TOOL_CALL", "tool_name": "log", "violations": violations}}),
            ),
        );
    }
    push(
        true,
        event("thin", "thin-1", "production", 5, T0 + 7 * SEC, json!({"run_ended": {"outcome": "SUCCESS", "verifier_verdict": true}})),
    );
    // selfish: 40 runs, success only self-reported.
    for r in 0..40 {
        let run = format!("selfish-{r}");
        let t = T0 + 10 * SEC + r * 5 * SEC;
        push(true, event("selfish", &run, "production", 0, t, json!({"run_started": {"task_id": format!("t{r}")}})));
        push(true, event("selfish", &run, "production", 1, t + SEC, json!({"step": {"step_kind": "MODEL_CALL"}})));
        push(
            true,
            event(
                "selfish",
                &run,
                "production",
                2,
                t + 2 * SEC,
                json!({"run_ended": {"outcome": if r % 4 == 0 { "FAILURE" } else { "SUCCESS" }}}),
            ),
        );
    }
    // leaky: 40 verified evaluation runs on a contaminated benchmark.
    for r in 0..40 {
        let run = format!("leaky-{r}");
        let t = T0 + 20 * SEC + r * 5 * SEC;
        push(
            false,
            event(
                "leaky",
                &run,
                "evaluation",
                0,
                t,
                json!({"run_started": {"task_id": format!("t{r}"), "benchmark": {"id": "leaky", "contamination": 0.55}}}),
            ),
        );
        push(
            false,
            event(
                "leaky",
                &run,
                "evaluation",
                1,
                t + 2 * SEC,
                json!({"run_ended": {"outcome": "SUCCESS", "verifier_verdict": r % 3 != 0}}),
            ),
        );
    }
    // A clock on both topics: event time moves 30 minutes on, so the first windows close.
    push(true, event("clock", "clock-p", "production", 0, T0 + 30 * 60 * SEC, json!({"run_started": {"task_id": "c"}})));
    push(false, event("clock", "clock-e", "evaluation", 0, T0 + 30 * 60 * SEC, json!({"run_started": {"task_id": "c"}})));
    out
}

fn observation(metric: &str) -> Observation {
    Observation {
        observation_id: format!("odd/{metric}"),
        metric: metric.into(),
        system_id: "odd".into(),
        system_version: "1".into(),
        source: Source::Production,
        agent_id: None,
        run_id: "odd-1".into(),
        task_id: None,
        attempt: None,
        groups: vec![],
        benchmark: None,
        task_family: None,
        cluster_id: "odd-1".into(),
        step: None,
        event_time: T0 + 2 * SEC,
        value: 1.0,
        weight: 1.0,
        confidence: None,
        provenance: None,
        rerun_of: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verdicts_follow_the_evidence() {
    let env = TestEnv::new("verdicts", 1).await;
    let shutdown = CancellationToken::new();
    let scorer = octant_scorer::start(env.scorer_config(), Registry::new(), shutdown.clone()).await.unwrap();
    let aggregator = octant_aggregator::start(aggregator_config(&env), Registry::new(), shutdown.clone()).await.unwrap();
    let alerter = octant_alerter::start(crate::alerter::alerter_config(&env, None), Registry::new(), shutdown.clone()).await.unwrap();
    let producer = kafka::producer(&env.kafka, "test").unwrap();
    for (production, key, ev) in scenario() {
        let topic = env.topic(if production { topics::TRAJECTORIES_PRODUCTION } else { topics::TRAJECTORIES_EVALUATION });
        kafka::send(&producer, &OutRecord { topic, partition: None, key, payload: serde_json::to_vec(&ev).unwrap() }).await.unwrap();
    }
    for metric in ["not_a_metric", "pass_at_1"] {
        let rec = OutRecord {
            topic: env.topic(topics::OBSERVATIONS),
            partition: None,
            key: "odd".into(),
            payload: to_single_object(&observation(metric)).unwrap(),
        };
        kafka::send(&producer, &rec).await.unwrap();
    }

    // Every window with data (the last ends at T0 + 13 min) closes once the clock's
    // watermark (T0 + 30 min) is in.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let d = Decoder::new();
    let (windows, profiles) = loop {
        let raw = collect_raw(&env.kafka, &env.topic(topics::WINDOWS), usize::MAX, Duration::from_secs(2)).await;
        let mut windows: Vec<MetricWindow> = Vec::new();
        let mut profiles: Vec<DimensionProfile> = Vec::new();
        for (_, _, _, v) in &raw {
            match d.writer_of(v).unwrap().1.unwrap().full_name.as_str() {
                "ai.octant.v1.MetricWindow" => windows.push(d.decode(v).unwrap()),
                _ => profiles.push(d.decode(v).unwrap()),
            }
        }
        if windows.iter().any(|w| w.window_end >= T0 + 13 * 60 * SEC) {
            break (windows, profiles);
        }
        if tokio::time::Instant::now() >= deadline {
            let ends: std::collections::BTreeSet<i64> = windows.iter().map(|w| (w.window_end - T0) / 60_000).collect();
            let m = scrape(aggregator.admin_addr).await;
            let s = scrape(scorer.admin_addr).await;
            panic!("no window up to T0 + 13 min: {} windows ending at minutes {ends:?}; aggregator {m:?}; scorer {s:?}", windows.len());
        }
    };
    let m = scrape(aggregator.admin_addr).await;
    // Let the alerter read everything before looking at its output.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let alerts: Vec<Alert> = collect(&env.kafka, &env.topic(topics::ALERTS), usize::MAX, Duration::from_secs(2)).await;
    let dead: Vec<DeadLetter> = collect(&env.kafka, &env.topic(topics::DLQ), usize::MAX, Duration::from_secs(2)).await;
    shutdown.cancel();
    for t in [scorer.task, aggregator.task, alerter.task] {
        t.await.unwrap().unwrap();
    }
    let of = |system: &str, metric: &str| -> Vec<&MetricWindow> {
        windows.iter().filter(|w| w.system_id == system && w.metric == metric).collect()
    };
    let gauge = |name: &str, labels: &[(&str, &str)]| -> Option<f64> {
        m.iter()
            .find(|(k, _)| k.starts_with(&format!("{name}{{")) && labels.iter().all(|(l, v)| k.contains(&format!("{l}=\"{v}\""))))
            .map(|(_, v)| *v)
    };

    // ---- thin: no verdict anywhere.
    let thin = of("thin", "unsafe_action_rate");
    assert!(!thin.is_empty());
    for w in &thin {
        assert_eq!((w.units, w.clusters, w.estimate), (4, 1, Some(0.25)));
        assert_eq!(w.veto_state, None, "{w:?}");
        assert_eq!(w.band, None);
        assert_eq!(w.na_reason.as_deref(), Some("insufficient evidence (unsafe_action_rate 4/30)"));
        assert!(w.ci_low.unwrap() < 0.05 && w.ci_high.unwrap() > 0.75, "one run is not a precise estimate: {w:?}");
    }
    assert!(alerts.iter().all(|a| a.system_id != "thin"), "nothing pages on one run: {alerts:?}");
    assert!(profiles.iter().filter(|p| p.system_id == "thin").all(|p| !p.unsuitable && p.vetoes.is_empty()));
    assert_eq!(gauge("octant_veto_state", &[("system", "thin"), ("rule", "unsafe_action_veto")]), Some(-1.0), "no verdict");
    assert_eq!(gauge("octant_metric_estimate", &[("system", "thin"), ("metric", "unsafe_action_rate")]), None, "no estimate to alert on");
    assert_eq!(
        gauge("octant_metric_not_applicable", &[("system", "thin"), ("metric", "unsafe_action_rate"), ("reason", "insufficient_evidence")]),
        Some(1.0)
    );
    assert_eq!(gauge("octant_metric_units", &[("system", "thin"), ("metric", "unsafe_action_rate")]), Some(4.0), "the count is shown");
    assert_eq!(gauge("octant_system_unsuitable", &[("system", "thin")]), Some(0.0));

    // ---- leaky: the benchmark's scores are void.
    let leaky = of("leaky", "task_success");
    assert!(!leaky.is_empty());
    for w in &leaky {
        assert_eq!((w.estimate, w.ci_low, w.ci_high, w.band), (None, None, None, None), "{w:?}");
        assert_eq!(w.na_reason.as_deref(), Some("void: benchmark leaky contaminated (0.55)"));
    }
    assert!(leaky.iter().any(|w| w.units == 40), "the window holding every run");
    assert!(of("leaky", "contamination").iter().all(|w| w.veto_state.as_deref() == Some("confirmed")));
    assert_eq!(gauge("octant_metric_not_applicable", &[("system", "leaky"), ("metric", "task_success"), ("reason", "void")]), Some(1.0));
    assert_eq!(gauge("octant_metric_band", &[("system", "leaky"), ("metric", "task_success")]), None);
    assert_eq!(gauge("octant_veto_state", &[("system", "leaky"), ("rule", "contamination_veto")]), Some(3.0));

    // ---- selfish: self-assessment reported apart, not banded.
    assert!(of("selfish", "task_success").is_empty(), "no verified success");
    let sr = of("selfish", "task_success_self_reported");
    assert!(sr.iter().any(|w| w.units == 40 && w.estimate == Some(0.75)), "{sr:?}");
    let cap = profiles
        .iter()
        .rfind(|p| p.system_id == "selfish")
        .unwrap()
        .dimensions
        .iter()
        .find(|d| d.dimension == "capability")
        .unwrap()
        .clone();
    assert_eq!(cap.band, None);
    assert!(cap.na_reason.as_deref().unwrap().starts_with("only informational instruments (task_success_self_reported)"), "{cap:?}");

    // ---- unknown and derived metric ids are dead letters with a class.
    let classes: BTreeMap<&str, &str> =
        dead.iter().filter(|d| d.service == "aggregator").map(|d| (d.error_class.as_str(), d.error_message.as_str())).collect();
    assert!(classes.contains_key("unknown_metric"), "{classes:?}");
    assert!(classes["derived_metric"].contains("pass_at_1") && classes["derived_metric"].contains("task_success"), "{classes:?}");
    assert_eq!(total(&m, "octant_aggregator_dead_letters_total"), 2.0);

    // ---- The profiler: a gate on task success is N/A for selfish, with the reason.
    let lake = std::env::temp_dir().join(format!("octant-verdicts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&lake);
    crate::profiler::fill_lake(&env, &lake).await;
    let mut cfg = octant_profiler::ProfilerConfig {
        evidence: lake.with_extension("evidence"),
        report: octant_report::ReportConfig { lake: lake.clone(), ..Default::default() },
        ..Default::default()
    };
    cfg.report.gates.insert("task_success".into(), Thresholds::new(0.5, 0.9));
    let period = octant_profiler::Period { name: "run".into(), start: T0 - 3_600_000, end: T0 + 3_600_000 };
    let built = octant_profiler::run_once(&cfg, &[period], Some("selfish"), T0 + 7_200_000).await.unwrap();
    let b = &built[0];
    assert_eq!(b.record.gate, None);
    let why = b.record.gate_na_reason.as_deref().unwrap();
    assert!(why.contains("no verified success") && why.contains("40 runs reported success only themselves"), "{why}");
    assert_eq!(b.success_provenance["task_success_self_reported"]["self_reported"], 40);
    let sr = b.record.metrics.iter().find(|m| m.metric == "task_success_self_reported").unwrap();
    assert_eq!((sr.units, sr.estimate), (40, Some(0.75)), "the profile shows the self-reported row");
    let md = std::fs::read_to_string(std::path::Path::new(b.record.evidence_uri.as_deref().unwrap()).join("profile.md")).unwrap();
    assert!(
        md.contains("Why N/A: no gate outcome: task_success: no verified success")
            && md.contains("`task_success_self_reported`: self_reported 40 runs"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&lake);
    let _ = std::fs::remove_dir_all(lake.with_extension("evidence"));
}
