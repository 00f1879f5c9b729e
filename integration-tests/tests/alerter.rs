//! The alerter against a real broker and a real Alertmanager: veto alerts fire, escalate and
//! resolve with hysteresis; an incident carries the run, step, agent and tool with arguments
//! redacted; Alertmanager being down delays only Alertmanager; a restart re-raises nothing.

use std::time::Duration;

use octant_alerter::AlerterConfig;
use octant_contracts::codec::to_single_object;
use octant_contracts::*;
use octant_integration_tests::alertmanager::Alertmanager;
use octant_integration_tests::*;
use octant_runtime::kafka::OutRecord;
use prometheus::Registry;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const MIN: i64 = 60_000;
const T0: i64 = 1_764_489_600_000;

pub fn alerter_config(env: &TestEnv, am: Option<&Alertmanager>) -> AlerterConfig {
    AlerterConfig {
        stream: env.stream("alerter"),
        alertmanager_url: am.map(|a| a.url.clone()),
        web_base_url: Some("https://octant.example/".into()),
        resend_interval: Duration::from_secs(1),
        resolve_grace: Duration::from_secs(30),
        alertmanager_timeout: Duration::from_millis(500),
        ..AlerterConfig::default()
    }
}

fn window(system: &str, minute: i64, est: (f64, f64, f64)) -> MetricWindow {
    MetricWindow {
        window_id: format!("{system}/1/production/unsafe_action_rate/{minute}"),
        system_id: system.into(),
        system_version: "1".into(),
        source: Source::Production,
        metric: "unsafe_action_rate".into(),
        dimension: "safety".into(),
        benchmark: None,
        slice_kind: None,
        slice: None,
        window_start: T0 + (minute - 60) * MIN,
        window_end: T0 + minute * MIN,
        units: 800,
        clusters: 100,
        estimate: Some(est.0),
        ci_low: Some(est.1),
        ci_high: Some(est.2),
        level: 0.95,
        replicates: 1000,
        seed: 1,
        method: "poisson-bootstrap".into(),
        band: None,
        band_low: None,
        band_high: None,
        na_reason: None,
        // The verdict the aggregator would give this estimate and interval (looked at once).
        veto_state: Some(octant_core::VetoRule::UNSAFE_ACTION.state(est.0, est.1, est.2).as_str().to_string()),
        evidence_log_e: None,
        evidence_alpha: None,
        evidence_since: None,
        evidence_estimate: None,
        catalogue_version: "test".into(),
        watermark: T0 + minute * MIN,
        pool_version: None,
    }
}

async fn send_windows(env: &TestEnv, windows: &[MetricWindow]) {
    let p = octant_runtime::kafka::producer(&env.kafka, "test").unwrap();
    for w in windows {
        let rec = OutRecord {
            topic: env.topic(topics::WINDOWS),
            partition: None,
            key: w.system_id.clone(),
            payload: to_single_object(w).unwrap(),
        };
        octant_runtime::kafka::send(&p, &rec).await.unwrap();
    }
}

fn unsafe_step(run: &str, seq: i64) -> TrajectoryEvent {
    TrajectoryEvent {
        event_id: format!("{run}/{seq}"),
        run_id: run.into(),
        system: SystemRef { id: "sys-a".into(), version: "1".into(), config_hash: String::new() },
        source: Source::Production,
        agent_id: Some("agent-1".into()),
        event_time: T0,
        sequence: seq,
        kind: EventKind::Step,
        run_started: None,
        step: Some(Box::new(Step {
            tool_name: Some("payments.transfer".into()),
            arguments: Some(r#"{"account":"DE89 3704 0044","amount":9000}"#.into()),
            impact: Impact::Irreversible,
            confirmed: false,
            violations: vec!["max_transfer_amount".into()],
            ..Step::default()
        })),
        intervention: None,
        run_ended: None,
    }
}

async fn wait_for<T>(what: &str, secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn label<'a>(a: &'a Value, k: &str) -> &'a str {
    a["labels"][k].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn veto_alerts_and_incidents_reach_alertmanager() {
    let env = TestEnv::new("alerter", 2).await;
    let am = Alertmanager::start().await;
    let registry = Registry::new();
    let shutdown = CancellationToken::new();
    let alerter = octant_alerter::start(alerter_config(&env, Some(&am)), registry, shutdown.clone()).await.unwrap();

    // A: clear → breached (warning) → confirmed (critical, the warning resolves). B: clear.
    let clear = (0.05, 0.03, 0.08);
    let breached = (0.21, 0.17, 0.25);
    let confirmed = (0.26, 0.22, 0.30);
    let mut ws = vec![window("sys-a", 1, clear), window("sys-a", 2, breached)];
    ws.extend((1..=6).map(|m| window("sys-b", m, clear)));
    send_windows(&env, &ws).await;
    // The warning is notified before the escalation is sent: a warning that Alertmanager
    // receives and sees resolved within the same group flush is (rightly) never notified, so
    // sending all windows at once made the "warning fired first" check below a race.
    wait_for("the warning notified by Alertmanager", 60, async || {
        am.notified
            .lock()
            .unwrap()
            .iter()
            .any(|a| a["status"] == "firing" && label(a, "system") == "sys-a" && label(a, "severity") == "warning")
            .then_some(())
    })
    .await;
    send_windows(&env, &[window("sys-a", 3, confirmed), window("sys-a", 4, confirmed)]).await;

    let held = wait_for("the critical alert in Alertmanager", 60, async || {
        am.alerts().await.into_iter().find(|a| label(a, "system") == "sys-a" && label(a, "severity") == "critical")
    })
    .await;
    assert_eq!(label(&held, "alertname"), "OctantUnsafeActionVeto");
    assert_eq!(label(&held, "dimension"), "safety");
    assert_eq!(label(&held, "rule"), "unsafe_action_veto");
    let ann = &held["annotations"];
    assert_eq!(ann["estimate"], "0.2600");
    assert_eq!(ann["interval"], "[0.2200, 0.3000]");
    assert_eq!(ann["threshold"], "0.2");
    assert_eq!(ann["veto_state"], "confirmed");
    assert!(ann["window"].as_str().unwrap().contains("2025-11-30T08:03:00"), "{ann}");
    assert!(ann["runbook_url"].as_str().unwrap().ends_with("#unsafe_action_veto"));
    // The alert page, through the configured external base URL, as Alertmanager holds it.
    let page = "https://octant.example/alerts/sys-a%2F1%2Fproduction%2Funsafe_action_veto";
    assert_eq!((held["generatorURL"].as_str(), ann["octant_url"].as_str()), (Some(page), Some(page)), "{held}");
    assert!(am.alerts().await.iter().all(|a| label(a, "system") != "sys-b"), "B is never paged");

    // Alertmanager down: the stream goes on (alerts reach Kafka), delivery is retried.
    am.pause();
    send_windows(&env, &(5..=7).map(|m| window("sys-a", m, clear)).collect::<Vec<_>>()).await;
    let p = octant_runtime::kafka::producer(&env.kafka, "test").unwrap();
    let ev = unsafe_step("run-42", 7);
    let rec = OutRecord {
        topic: env.topic(topics::TRAJECTORIES_PRODUCTION),
        partition: None,
        key: ev.run_id.clone(),
        payload: to_single_object(&ev).unwrap(),
    };
    octant_runtime::kafka::send(&p, &rec).await.unwrap();
    // warning firing, warning resolved, critical firing, critical resolved, incident.
    let on_kafka: Vec<Alert> = collect(&env.kafka, &env.topic(topics::ALERTS), 5, Duration::from_secs(30)).await;
    assert_eq!(on_kafka.len(), 5, "{on_kafka:#?}");
    let incident = on_kafka.iter().find(|a| a.kind == AlertKind::Incident).expect("incident on octant.alerts");
    assert_eq!(incident.tool_arguments.as_deref(), Some("[redacted]"));
    let m = wait_for("failed deliveries", 30, async || {
        let m = scrape(alerter.admin_addr).await;
        (m.get("octant_alerter_alertmanager_posts_total{result=\"error\"}").copied().unwrap_or(0.0) > 0.0).then_some(m)
    })
    .await;
    assert!(m["octant_alerter_alertmanager_pending"] >= 1.0);
    am.resume();

    // Delivered after the back-off: Alertmanager notifies the resolution and the incident.
    let notified = wait_for("resolved and incident notifications", 90, async || {
        let n = am.notified.lock().unwrap().clone();
        let resolved = n.iter().any(|a| a["status"] == "resolved" && label(a, "system") == "sys-a" && label(a, "severity") == "critical");
        let incident = n.iter().any(|a| label(a, "alertname") == "OctantCriticalUnsafeAction");
        (resolved && incident).then_some(n)
    })
    .await;
    let inc = notified.iter().find(|a| label(a, "alertname") == "OctantCriticalUnsafeAction").unwrap();
    assert_eq!((label(inc, "run_id"), label(inc, "step"), label(inc, "severity")), ("run-42", "7", "critical"));
    assert_eq!(inc["annotations"]["tool_name"], "payments.transfer");
    assert_eq!(inc["annotations"]["agent_id"], "agent-1");
    assert_eq!(inc["annotations"]["violations"], "max_transfer_amount");
    assert_eq!(inc["annotations"]["run_url"], "https://octant.example/runs/run-42#step-7");
    assert!(!inc.to_string().contains("DE89"), "arguments are redacted: {inc}");
    assert!(notified.iter().any(|a| a["status"] == "firing" && label(a, "severity") == "warning"), "the warning fired first");
    eprintln!(
        "Alertmanager notified {} alert states: {:?}",
        notified.len(),
        notified.iter().map(|a| format!("{}/{}/{}", label(a, "system"), label(a, "severity"), a["status"])).collect::<Vec<_>>()
    );

    let m = scrape(alerter.admin_addr).await;
    assert_eq!(m["octant_alerter_alerts_total{kind=\"veto\",severity=\"critical\",status=\"firing\",system=\"sys-a\"}"], 1.0);
    assert_eq!(m["octant_alerter_alerts_total{kind=\"incident\",severity=\"critical\",status=\"firing\",system=\"sys-a\"}"], 1.0);
    assert!(m["octant_alerter_alertmanager_posts_total{result=\"ok\"}"] >= 2.0);
    assert_eq!(total(&m, "octant_alerter_firing"), 0.0);

    // Restart: the history is read back; replayed windows and events raise nothing new.
    shutdown.cancel();
    alerter.task.await.unwrap().unwrap();
    let shutdown = CancellationToken::new();
    let mut cfg = alerter_config(&env, Some(&am));
    cfg.stream.group_id = Some(format!("{}-second", cfg.stream.group_id(&octant_alerter::ID)));
    let again = octant_alerter::start(cfg, Registry::new(), shutdown.clone()).await.unwrap();
    wait_for("the second alerter to read everything", 60, async || {
        let m = scrape(again.admin_addr).await;
        (total(&m, "octant_alerter_inputs_total") >= 11.0).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after: Vec<Alert> = collect(&env.kafka, &env.topic(topics::ALERTS), 6, Duration::from_secs(3)).await;
    assert_eq!(after.len(), 5, "a new consumer group re-reading every input raises nothing again");
    shutdown.cancel();
    again.task.await.unwrap().unwrap();
}
