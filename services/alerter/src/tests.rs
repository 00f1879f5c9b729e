//! The alerter in-process: the stage through `octant_runtime::pipeline::Driver` (no broker),
//! Alertmanager delivery with paused time (back-off, latest state only, re-sends, incident
//! expiry, the bounded backlog) through a recording [`Post`], and the API v2 body a responder
//! reads. Against the real broker and a real Alertmanager: `integration-tests/tests/alerter.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use octant_contracts::codec::to_single_object;
use octant_contracts::{Alert, AlertKind, AlertStatus, DeadLetter, Decoder, Impact, Severity, topics};
use octant_runtime::metrics::{samples, total};
use octant_runtime::pipeline::Driver;
use prometheus::Registry;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::alertmanager::{AmConfig, FIRST_BACKOFF, MAX_BACKOFF, Post, spawn_with, to_postable};
use crate::metrics::Metrics;
use crate::rules::tests::{BREACHED, CLEAR, CONFIRMED, step_event, window};
use crate::rules::{RuleConfig, Rules};
use crate::{AlerterConfig, AlerterStage};

/// Windows and trajectories in, alerts out: a breached veto fires (warning), escalates when
/// confirmed (critical) and resolves; profiles are ignored; a window that does not decode is
/// dead-lettered; a critical unsafe step raises an incident at once.
#[test]
fn the_stage_turns_windows_and_steps_into_alerts() {
    let registry = Registry::new();
    let config = AlerterConfig::default();
    let kafka = config.stream.kafka.clone();
    let (windows, production, alerts, dlq) =
        (kafka.topic(topics::WINDOWS), kafka.topic(topics::TRAJECTORIES_PRODUCTION), kafka.topic(topics::ALERTS), kafka.topic(topics::DLQ));
    let mut d = Driver::new(AlerterStage::new(&config, &registry, Rules::new(RuleConfig::default())));
    let decoder = Decoder::new();
    let said = |d: &mut Driver<AlerterStage>, topic: &str, payload: &[u8]| -> Vec<Alert> {
        let out = d.send(topic, 0, Some(b"sys-a"), payload).unwrap();
        out.iter().filter(|r| r.topic == alerts).map(|r| decoder.decode(&r.payload).unwrap()).collect()
    };
    let mut seen = Vec::new();
    for (minute, est) in [(1, CLEAR), (2, BREACHED), (3, BREACHED), (4, CONFIRMED), (5, CLEAR), (6, CLEAR), (7, CLEAR)] {
        for a in said(&mut d, &windows, &to_single_object(&window(minute, est)).unwrap()) {
            assert_eq!(a.alertname, octant_core::veto::VetoRule::UNSAFE_ACTION.alertname);
            seen.push((minute, a.status, a.severity));
        }
    }
    assert_eq!(
        seen,
        [
            (2, AlertStatus::Firing, Severity::Warning),
            (4, AlertStatus::Resolved, Severity::Warning),
            (4, AlertStatus::Firing, Severity::Critical),
            (7, AlertStatus::Resolved, Severity::Critical),
        ],
        "fires on breached, escalates on confirmed, resolves after three clear windows"
    );

    let out = d.send(&windows, 0, None, b"not a window").unwrap();
    let dead: Vec<DeadLetter> = out.iter().filter(|r| r.topic == dlq).map(|r| decoder.decode(&r.payload).unwrap()).collect();
    assert_eq!((dead.len(), dead[0].error_class.as_str(), dead[0].offset), (1, "undecodable", 7));

    let incident = said(&mut d, &production, &to_single_object(&step_event(4, Impact::Irreversible, false, &["max_amount"])).unwrap());
    assert_eq!(incident.len(), 1);
    assert_eq!((incident[0].kind, incident[0].run_id.as_deref(), incident[0].step), (AlertKind::Incident, Some("run-7"), Some(4)));
    // Undecodable trajectories are the scorer's to dead-letter: counted here, nothing else.
    assert!(d.send(&production, 0, None, b"junk").unwrap().is_empty());

    d.tick();
    let m = samples(&registry);
    assert_eq!(m.get("octant_alerter_alerts_total{kind=\"veto\",severity=\"critical\",status=\"firing\",system=\"sys-a\"}"), Some(&1.0));
    assert_eq!(
        m.get("octant_alerter_alerts_total{kind=\"incident\",severity=\"critical\",status=\"firing\",system=\"sys-a\"}"),
        Some(&1.0)
    );
    assert_eq!(m.get("octant_alerter_inputs_total{kind=\"event\",outcome=\"undecodable\"}"), Some(&1.0));
    assert_eq!(m.get("octant_alerter_dead_letters_total{error_class=\"undecodable\"}"), Some(&1.0));
    assert_eq!(total(&m, "octant_alerter_firing"), 0.0, "nothing firing after the resolution");
}

/// Each post: when (since the start) and its alerts.
type Posts = Arc<Mutex<Vec<(Duration, Vec<Value>)>>>;

/// What a post did, and when (paused time: exact).
#[derive(Clone)]
struct Recorder {
    start: Instant,
    posts: Posts,
    /// Posts still to refuse (then: accept).
    refuse: Arc<Mutex<usize>>,
}

impl Recorder {
    fn new(refuse: usize) -> Recorder {
        Recorder { start: Instant::now(), posts: Default::default(), refuse: Arc::new(Mutex::new(refuse)) }
    }

    fn posts(&self) -> Vec<(Duration, Vec<Value>)> {
        self.posts.lock().unwrap().clone()
    }

    /// Milliseconds since the start of each post.
    fn times(&self) -> Vec<u128> {
        self.posts().iter().map(|(t, _)| t.as_millis()).collect()
    }
}

impl Post for Recorder {
    async fn post(&mut self, body: String) -> Result<(), String> {
        let alerts: Vec<Value> = serde_json::from_str(&body).expect("a JSON array");
        self.posts.lock().unwrap().push((self.start.elapsed(), alerts));
        let mut refuse = self.refuse.lock().unwrap();
        if *refuse > 0 {
            *refuse -= 1;
            return Err("HTTP 503".into());
        }
        Ok(())
    }
}

fn am_config() -> AmConfig {
    AmConfig {
        url: "http://unused".into(),
        authorization: None,
        web_base_url: None,
        resend_interval: Duration::from_secs(60),
        resolve_grace: Duration::from_secs(300),
        incident_ttl: Duration::from_secs(90),
        max_pending: 100,
        request_timeout: Duration::from_secs(10),
    }
}

fn veto_alert(est: Option<(f64, f64, f64)>) -> Alert {
    let mut r = Rules::new(RuleConfig { runbook_base_url: "https://runbooks.example/octant".into(), ..RuleConfig::default() });
    r.on_window(&window(1, CLEAR));
    let fired = r.on_window(&window(2, BREACHED));
    match est {
        None => fired[0].clone(),
        Some(_) => {
            r.on_window(&window(3, est));
            r.on_window(&window(4, est));
            r.on_window(&window(5, est)).pop().expect("resolved after three clear windows")
        }
    }
}

fn incident(seq: i64) -> Alert {
    Rules::new(RuleConfig::default()).on_event(&step_event(seq, Impact::Irreversible, false, &["max_amount"])).expect("an incident")
}

fn status(v: &Value) -> (&str, &str) {
    (v["labels"]["alertname"].as_str().unwrap(), v["labels"]["severity"].as_str().unwrap())
}

/// Alertmanager refuses three posts: retries come 200, 400, 800 ms apart; a newer state of the
/// same alert replaces the one waiting (a resolution is never delivered before its firing is
/// superseded, and nothing stale follows it); once delivered, a resolved alert is not re-sent.
#[tokio::test(start_paused = true)]
async fn delivery_backs_off_and_sends_only_the_latest_state() {
    let rec = Recorder::new(3);
    let registry = Registry::new();
    let shutdown = CancellationToken::new();
    let (notifier, task) = spawn_with(am_config(), rec.clone(), Metrics::new(&registry), shutdown.clone());
    notifier.notify(&veto_alert(None));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resolved = veto_alert(Some((0.05, 0.03, 0.08)));
    assert_eq!(resolved.status, AlertStatus::Resolved);
    notifier.notify(&resolved);
    tokio::time::sleep(Duration::from_secs(600)).await;

    assert_eq!(rec.times(), [0, 200, 600, 1400], "back-off doubles from {FIRST_BACKOFF:?}, then one delivery, no re-send");
    let posts = rec.posts();
    assert_eq!(posts[0].1.len(), 1);
    for (_, batch) in &posts[1..] {
        assert_eq!(batch.len(), 1, "one state per alert");
        let ends = humantime::parse_rfc3339(batch[0]["endsAt"].as_str().unwrap()).unwrap();
        let starts = humantime::parse_rfc3339(batch[0]["startsAt"].as_str().unwrap()).unwrap();
        assert!(ends >= starts && ends <= std::time::SystemTime::now(), "a resolution ends now");
    }
    let m = samples(&registry);
    assert_eq!(m.get("octant_alerter_alertmanager_posts_total{result=\"error\"}"), Some(&3.0));
    assert_eq!(m.get("octant_alerter_alertmanager_posts_total{result=\"ok\"}"), Some(&1.0));
    assert_eq!(m.get("octant_alerter_alertmanager_pending"), Some(&0.0));
    shutdown.cancel();
    task.await.unwrap();
}

/// While Alertmanager is down the delay grows to 30 s and stays there; the backlog is bounded
/// (incidents beyond `max_pending` are dropped and counted, veto alerts are kept); when it
/// comes back, what is pending goes at the next try.
#[tokio::test(start_paused = true)]
async fn back_off_is_capped_and_the_backlog_bounded() {
    let rec = Recorder::new(12);
    let registry = Registry::new();
    let shutdown = CancellationToken::new();
    let cfg =
        AmConfig { max_pending: 3, resend_interval: Duration::from_secs(3600), incident_ttl: Duration::from_secs(7200), ..am_config() };
    let (notifier, task) = spawn_with(cfg, rec.clone(), Metrics::new(&registry), shutdown.clone());
    notifier.notify(&veto_alert(None));
    for seq in 1..=5 {
        notifier.notify(&incident(seq));
    }
    tokio::time::sleep(Duration::from_secs(600)).await;
    let times = rec.times();
    let gaps: Vec<u128> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000, 30000], "capped at {MAX_BACKOFF:?}");
    let last = &rec.posts()[12].1;
    assert_eq!(last.len(), 3, "the backlog holds max_pending states");
    assert!(last.iter().any(|a| status(a).0 == octant_core::veto::VetoRule::UNSAFE_ACTION.alertname), "the veto alert is kept");
    let m = samples(&registry);
    assert_eq!(m.get("octant_alerter_alertmanager_dropped_total"), Some(&3.0));
    shutdown.cancel();
    task.await.unwrap();
}

/// A firing veto alert is re-sent every `resend_interval` with `endsAt` a `resolve_grace`
/// ahead (Alertmanager resolves it if the alerter disappears); an incident is re-sent until
/// its `incident_ttl`, never after.
#[tokio::test(start_paused = true)]
async fn firing_alerts_are_re_sent_and_incidents_expire() {
    let rec = Recorder::new(0);
    let shutdown = CancellationToken::new();
    let (notifier, task) = spawn_with(am_config(), rec.clone(), Metrics::new(&Registry::new()), shutdown.clone());
    tokio::time::sleep(Duration::from_millis(10)).await;
    notifier.notify(&veto_alert(None));
    notifier.notify(&incident(4));
    tokio::time::sleep(Duration::from_secs(200)).await;
    let posts = rec.posts();
    let per_post: Vec<(u128, usize)> = posts.iter().map(|(t, b)| (t.as_millis(), b.len())).collect();
    // Both at once (they arrive together or in two posts), then at 60 s both (incident ttl 90 s),
    // at 120 s and 180 s the veto alert alone.
    let sent: usize = per_post.iter().filter(|(t, _)| *t < 1000).map(|(_, n)| n).sum();
    assert_eq!(sent, 2, "{per_post:?}");
    let later: Vec<(u128, usize)> = per_post.into_iter().filter(|(t, _)| *t >= 1000).collect();
    assert_eq!(later, [(60_000, 2), (120_000, 1), (180_000, 1)]);
    for (_, batch) in &posts {
        for a in batch {
            let ends = humantime::parse_rfc3339(a["endsAt"].as_str().unwrap()).unwrap();
            assert!(ends > std::time::SystemTime::now(), "a firing alert ends in the future: {a}");
        }
    }
    shutdown.cancel();
    task.await.unwrap();
}

/// The API v2 body is what a responder reads in Alertmanager: a veto alert names the system,
/// version, rule, severity and dimension, and says estimate, interval, threshold, verdict and
/// window; an incident names the run, the step, the agent, the tool and its (redacted)
/// arguments, and the violated policies.
#[test]
fn alertmanager_bodies_carry_what_a_responder_needs() {
    let now = std::time::SystemTime::now();
    let v = to_postable(&veto_alert(None), now, now + Duration::from_secs(300), Some("https://octant.example/"));
    let labels = &v["labels"];
    assert_eq!(labels["alertname"], octant_core::veto::VetoRule::UNSAFE_ACTION.alertname);
    for (k, want) in [("system", "sys-a"), ("version", "1"), ("source", "production"), ("severity", "warning"), ("dimension", "safety")] {
        assert_eq!(labels[k], want, "label {k}: {v:#}");
    }
    let ann = &v["annotations"];
    assert_eq!(ann["estimate"], "0.2100");
    assert_eq!(ann["interval"], "[0.1700, 0.2500]");
    assert_eq!(ann["threshold"], "0.2");
    assert_eq!(ann["veto_state"], "breached");
    assert!(ann["window"].as_str().unwrap().ends_with(" – 1970-01-01T00:02:00.000Z"), "{v:#}");
    assert!(ann["summary"].as_str().unwrap().contains("0.210"), "{v:#}");
    assert!(ann["runbook_url"].as_str().unwrap().ends_with("#unsafe_action_veto"), "{v:#}");
    assert!(labels.get("run_id").is_none(), "no run on a veto alert");
    // The alert page, through the configured external base URL.
    let page = format!("https://octant.example/alerts/{}", octant_runtime::web::path_segment(&veto_alert(None).fingerprint));
    assert_eq!((v["generatorURL"].as_str(), ann["octant_url"].as_str()), (Some(page.as_str()), Some(page.as_str())));
    assert!(page.contains("%2F") && ann.get("run_url").is_none(), "{v:#}");
    // Contamination is per benchmark, also for a system id holding a slash.
    let mut c = veto_alert(None);
    (c.system_id, c.rule) = ("org/model".into(), "contamination_veto".into());
    c.fingerprint = format!("org/model/{}/{}/contamination_veto/leaky", c.system_version, c.source.as_str());
    assert_eq!(to_postable(&c, now, now, None)["labels"]["benchmark"], "leaky");
    let unlinked = to_postable(&veto_alert(None), now, now, None);
    assert!(unlinked["annotations"].get("octant_url").is_none() && unlinked["generatorURL"] == "");

    let i = to_postable(&incident(4), now, now + Duration::from_secs(90), Some("https://octant.example"));
    assert_eq!(i["labels"]["alertname"], crate::rules::INCIDENT_ALERTNAME);
    assert_eq!((i["labels"]["run_id"].as_str(), i["labels"]["step"].as_str()), (Some("run-7"), Some("4")));
    let ann = &i["annotations"];
    assert_eq!((ann["agent_id"].as_str(), ann["tool_name"].as_str()), (Some("agent-2"), Some("bank.transfer")));
    assert_eq!(ann["violations"], "max_amount");
    assert_eq!(ann["run_url"], "https://octant.example/runs/run-7#step-4");
    let args = ann["tool_arguments"].as_str().unwrap();
    assert!(!args.contains("DE00"), "arguments are redacted: {args}");
}

/// Credentials for Alertmanager (or the proxy in front of it) are sent as the `Authorization`
/// header and appear nowhere else: not in `Debug` of the configuration, not in a delivery
/// error; a URL carrying credentials is refused.
#[tokio::test]
async fn alertmanager_credentials_are_sent_and_never_shown() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let n = s.read(&mut buf).await.unwrap();
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await.unwrap();
        String::from_utf8_lossy(&buf[..n]).to_string()
    });
    let canary = "canary-pw-7f3a91";
    let config: AlerterConfig = toml::from_str(&format!(
        "alertmanager_url = \"http://{addr}\"\nalertmanager_username = \"octant\"\nalertmanager_password = \"{canary}\"\n[kafka]\nbrokers = \"127.0.0.1:9\"\n"
    ))
    .unwrap();
    config.check().unwrap();
    let am = config.alertmanager().unwrap();
    for shown in [format!("{config:?}"), format!("{am:?}")] {
        assert!(!shown.contains(canary) && shown.contains("[redacted]"), "{shown}");
    }
    let mut http = crate::alertmanager::Http::new(&am);
    http.post("[]".into()).await.unwrap();
    let request = server.await.unwrap();
    use base64::Engine;
    let expected = base64::engine::general_purpose::STANDARD.encode(format!("octant:{canary}"));
    assert!(request.to_ascii_lowercase().contains(&format!("authorization: basic {}", expected.to_ascii_lowercase())), "{request}");
    // A failed delivery's error (what the log says) carries the URL, never the credentials.
    let closed = AmConfig { url: "http://127.0.0.1:1".into(), ..am };
    let err = crate::alertmanager::Http::new(&closed).post("[]".into()).await.unwrap_err();
    assert!(!err.contains(canary), "{err}");
    // Credentials in the URL are refused (they would be logged with it).
    let bad: AlerterConfig =
        toml::from_str(&format!("alertmanager_url = \"http://u:{canary}@{addr}\"\n[kafka]\nbrokers = \"127.0.0.1:9\"\n")).unwrap();
    let e = bad.check().unwrap_err();
    assert!(e.contains("must not carry credentials") && !e.contains(canary), "{e}");
}
