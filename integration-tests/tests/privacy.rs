//! Personal data and secrets (issue 15 §6–7).
//!
//! 1,000 canaries — e-mail addresses, card numbers (Luhn-valid, in three spellings) and API
//! keys (six shapes) — are placed in tool arguments, tool results, expected calls' arguments,
//! violations, intervention details and evaluation explanations of a generated stream, and in
//! poison records of four kinds (truncated JSON, an impossible value, an unknown enum value the
//! decoder's error quotes, bytes that are no record at all, one keyed by a canary). Scorer,
//! aggregator, alerter (delivering to a real Alertmanager, with a bearer token) and lake writer
//! run as processes logging at debug level; then the profiler writes evidence packages (its
//! configuration holding an S3 secret). With the default `[redaction]`, no canary appears in
//! the lake, the dead-letter topic, the alerts topic, Alertmanager's notifications and alerts,
//! the evidence packages, any service's `/metrics`, or any log line — while the input topics
//! hold every one (the control), and the redaction markers show where they were.

use std::path::Path;
use std::time::Duration;

use arrow::json::LineDelimitedWriter;
use octant_contracts::codec::{to_json, to_single_object};
use octant_contracts::*;
use octant_integration_tests::alertmanager::Alertmanager;
use octant_integration_tests::*;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::aggregator::{aggregator_config, truth_fleet};
use crate::lake::{assert_exactly_once, topic_offsets};
use crate::reliability::{Group, walk};

/// One canary: the text placed, and the strings that must appear nowhere downstream.
struct Canary {
    text: String,
    needles: Vec<String>,
}

fn luhn(digits: &str) -> bool {
    let sum: u32 = digits
        .bytes()
        .rev()
        .map(|c| u32::from(c - b'0'))
        .enumerate()
        .map(|(i, d)| if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { d })
        .sum();
    sum.is_multiple_of(10)
}

fn grouped(digits: &str, sep: char) -> String {
    digits.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(&sep.to_string())
}

fn canary(i: usize) -> Canary {
    match i % 3 {
        0 => {
            let t = format!("canary.{i}@pii-test.example");
            Canary { needles: vec![t.clone()], text: t }
        }
        1 => {
            let base = format!("4{:014}", (i as u64).wrapping_mul(982_451_653) % 100_000_000_000_000);
            let digits = (0..10).map(|d| format!("{base}{d}")).find(|n| luhn(n)).unwrap();
            let text = match (i / 3) % 3 {
                0 => digits.clone(),
                1 => grouped(&digits, ' '),
                _ => grouped(&digits, '-'),
            };
            Canary { needles: vec![digits, text.clone()], text }
        }
        _ => {
            let shape = (i / 3) % 6;
            let key = match shape {
                0 => format!("sk-canary{i:06}abcdefghijklmnop"),
                1 => format!("AKIAC4NARY{i:010}"),
                2 => format!("ghp_canary{i:026}"),
                3 => format!("xoxb-{i:012}-canarytoken"),
                4 => format!("AIzaCanary{i:025}abcdefghij"),
                _ => format!("canary{i:06}secretvalue"),
            };
            let text = if shape == 5 { format!("api_key={key}") } else { key.clone() };
            Canary { needles: vec![key], text }
        }
    }
}

/// Hands out canaries until `limit` are placed.
struct Placer {
    placed: Vec<Canary>,
    limit: usize,
}

impl Placer {
    fn take(&mut self) -> Option<String> {
        (self.placed.len() < self.limit).then(|| {
            let c = canary(self.placed.len());
            let t = c.text.clone();
            self.placed.push(c);
            t
        })
    }
}

/// Canaries into the free text and tool fields of one event; true if any was placed.
fn place(ev: &mut TrajectoryEvent, p: &mut Placer) -> bool {
    let before = p.placed.len();
    if let Some(s) = ev.step.as_mut() {
        if s.tool_name.is_some() {
            if let Some(c) = p.take() {
                s.arguments = Some(format!(r#"{{"recipient": "{c}", "amount": 12}}"#));
            }
            if let Some(c) = p.take() {
                s.result = Some(format!("delivered to {c}"));
            }
        }
        if let Some(e) = s.expected_call.as_mut()
            && let Some(c) = p.take()
        {
            e.arguments = Some(format!(r#"{{"recipient": "{c}"}}"#));
        }
        if !s.violations.is_empty()
            && let Some(c) = p.take()
        {
            s.violations.push(format!("leaked {c} to a third party"));
        }
    }
    if let Some(i) = ev.intervention.as_mut()
        && let Some(c) = p.take()
    {
        i.detail = Some(format!("operator saw {c}"));
    }
    if let Some(e) = ev.run_ended.as_mut()
        && let Some(c) = p.take()
    {
        e.evaluations.push(Evaluation {
            name: "pii_probe".into(),
            score_value: Some(1.0),
            score_label: None,
            explanation: Some(format!("the answer quoted {c}")),
            evaluator: Some("probe".into()),
            evaluator_version: Some("1".into()),
            ..Evaluation::scored("", None)
        });
    }
    p.placed.len() > before
}

/// Poison records carrying canaries: `k` of each of four kinds.
fn poison(template: &TrajectoryEvent, k: usize, p: &mut Placer) -> Vec<octant_gen::GenRecord> {
    let mut out = Vec::new();
    let mut push = |key: String, payload: Vec<u8>| {
        out.push(octant_gen::GenRecord {
            topic: topics::TRAJECTORIES_PRODUCTION,
            key,
            payload,
            event_time: template.event_time,
            system: template.system.id.clone(),
            poison: Some("pii"),
        })
    };
    for j in 0..k {
        // Truncated JSON.
        let c = p.take().unwrap();
        push(format!("poison-json-{j}"), format!(r#"{{"event_id": "poison-{j}", "step": {{"arguments": "{c}", "#).into_bytes());
        // An impossible value (confidence 2) in a schema-valid Avro record.
        let mut ev = template.clone();
        ev.run_id = format!("poison-run-{j}");
        ev.event_id = format!("poison-run-{j}/1");
        let step = ev.step.get_or_insert_with(Box::default);
        step.confidence = Some(2.0);
        step.arguments = Some(format!(r#"{{"card": "{}"}}"#, p.take().unwrap()));
        step.violations = vec![format!("leaked {}", p.take().unwrap())];
        push(ev.run_id.clone(), to_single_object(&ev).unwrap());
        // An unknown enum value, which the decoder's error message quotes.
        let mut v = serde_json::to_value(template).unwrap();
        v["kind"] = serde_json::Value::String(p.take().unwrap());
        push(format!("poison-enum-{j}"), serde_json::to_vec(&v).unwrap());
        // No record at all, keyed by a canary.
        let key = p.take().unwrap();
        let mut bytes = b"\x00\x07garbage ".to_vec();
        bytes.extend_from_slice(p.take().unwrap().as_bytes());
        bytes.extend_from_slice(b" \xff\xfe");
        push(key, bytes);
    }
    out
}

/// Every row of every Parquet file under `lake`, as JSON lines.
fn lake_text(lake: &Path) -> String {
    let mut out = Vec::new();
    for f in walk(lake).into_iter().filter(|p| p.extension().is_some_and(|e| e == "parquet")) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&f).unwrap()).unwrap().build().unwrap();
        let mut w = LineDelimitedWriter::new(&mut out);
        for batch in reader {
            w.write(&batch.unwrap()).unwrap();
        }
        w.finish().unwrap();
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn raw_text(records: &[(i32, i64, Vec<u8>, Vec<u8>)]) -> String {
    let mut s = String::new();
    for (_, _, key, payload) in records {
        s.push_str(&String::from_utf8_lossy(key));
        s.push('\n');
        s.push_str(&String::from_utf8_lossy(payload));
        s.push('\n');
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_data_and_secrets_never_leave_octant() {
    let env = TestEnv::new("pii", 4).await;
    let am = Alertmanager::start().await;
    let dir = fresh_dir("pii");
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let lake = dir.join("lake");
    const S3_SECRET: &str = "s3-secret-canary-Zq9xW2";
    const AM_TOKEN: &str = "am-token-canary-Hk3vB7";

    // The input: a generated stream (A unsafe at 0.25, B at 0.05) with canaries placed.
    let mut fleet = truth_fleet();
    fleet.systems.truncate(2);
    let canaries = sized(1_000, 10_000);
    let mut records = octant_gen::generate(&fleet, 0, sized(150, 1_500));
    let decoder = Decoder::new();
    let template: TrajectoryEvent = records
        .iter()
        .map(|r| decoder.decode::<TrajectoryEvent>(&r.payload).unwrap())
        .find(|e| e.step.as_ref().is_some_and(|s| s.tool_name.is_some()))
        .unwrap();
    let mut placer = Placer { placed: Vec::new(), limit: canaries };
    let poisons = poison(&template, 5, &mut placer);
    let n_poison = poisons.len();
    // Spread over the whole stream (every `stride`-th event that can hold one), then a
    // second pass from the start for the rest.
    let slots = records
        .iter()
        .filter(|r| place(&mut decoder.decode(&r.payload).unwrap(), &mut Placer { placed: Vec::new(), limit: usize::MAX }))
        .count();
    let stride = (slots / (canaries - placer.placed.len())).max(1);
    let mut done = std::collections::HashSet::new();
    for pass in 0..2 {
        let mut eligible = 0;
        for (i, r) in records.iter_mut().enumerate() {
            if done.contains(&i) {
                continue;
            }
            let json = r.payload.first() == Some(&b'{');
            let mut ev: TrajectoryEvent = decoder.decode(&r.payload).unwrap();
            if !place(&mut ev.clone(), &mut Placer { placed: Vec::new(), limit: usize::MAX }) {
                continue;
            }
            eligible += 1;
            // Every unsafe step (its incident carries the violations), and a spread of the rest.
            let unsafe_step = ev.step.as_ref().is_some_and(|s| !s.violations.is_empty());
            if (pass == 1 || unsafe_step || eligible % stride == 0) && place(&mut ev, &mut placer) {
                done.insert(i);
                r.payload = if json { to_json(&ev) } else { to_single_object(&ev).unwrap() };
            }
        }
    }
    assert_eq!(placer.placed.len(), canaries, "every canary placed ({} records)", records.len());
    records.extend(poisons);

    let log = |s: &str| Some(dir.join("logs").join(format!("{s}.log")));
    let mut groups = [
        Group::new(&dir, "scorer", &env.scorer_config()),
        Group::new(&dir, "aggregator", &aggregator_config(&env)),
        Group::new(
            &dir,
            "alerter",
            &octant_alerter::AlerterConfig {
                alertmanager_bearer_token: Some(octant_runtime::config::Secret::new(AM_TOKEN)),
                ..crate::alerter::alerter_config(&env, Some(&am))
            },
        ),
        Group::new(
            &dir,
            "lake_writer",
            &octant_lake_writer::LakeWriterConfig {
                stream: env.stream("lake"),
                lake: lake.clone(),
                max_file_age: Duration::from_millis(700),
                ..Default::default()
            },
        ),
    ];
    for g in &mut groups {
        g.log = log(g.service);
        g.start();
    }
    for g in &groups {
        g.wait_ready("at start").await;
    }
    octant_gen::produce(&env.kafka, records, None).await.unwrap();

    // Every poison record dead-lettered; the alerts settled (the alerter caught up, the
    // count unchanged) and at Alertmanager.
    let dlq = collect_raw(&env.kafka, &env.topic(topics::DLQ), n_poison, Duration::from_secs(90)).await;
    assert_eq!(dlq.len(), n_poison, "every poison record is a dead letter");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let n = read_all_raw(&env.kafka, &env.topic(topics::ALERTS)).await.len();
        let lag = total(&groups[2].metrics().await, "octant_alerter_consumer_lag_messages");
        if n == last && n > 0 && lag == 0.0 && !am.notified.lock().unwrap().is_empty() {
            break;
        }
        last = n;
        assert!(tokio::time::Instant::now() < deadline, "alerts did not settle ({n} on the topic, lag {lag})");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut metrics_text = String::new();
    for g in &groups {
        for inst in &g.instances {
            metrics_text.push_str(&get(inst.admin, "/metrics").await.1);
        }
    }
    for g in groups.iter_mut().take(3) {
        g.stop(0).await;
    }
    // The lake writer writes everything, then stops.
    let offsets = topic_offsets(&env).await;
    let want: usize = offsets.values().map(|s| s.len()).sum();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let m = groups[3].metrics().await;
        if total(&m, "octant_lake_writer_records_total") as usize >= want && total(&m, "octant_lake_writer_buffered_records") == 0.0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the lake writer did not write {want} records: {m:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    metrics_text.push_str(&get(groups[3].instances[0].admin, "/metrics").await.1);
    groups[3].stop(0).await;
    assert_exactly_once(&lake, &offsets);

    // Evidence packages, by a profiler whose configuration holds an S3 secret.
    let evidence = dir.join("evidence");
    let mut profiler = Group::new(
        &dir,
        "profiler",
        &octant_profiler::ProfilerConfig {
            kafka: env.kafka.clone(),
            evidence: evidence.clone(),
            periods: vec![Duration::from_secs(3 * 365 * 86_400)],
            every: Duration::from_millis(500),
            report: octant_report::ReportConfig {
                lake: lake.clone(),
                storage: octant_lake::StorageOptions([("aws_secret_access_key".to_string(), S3_SECRET.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    profiler.log = log("profiler");
    profiler.start();
    let admin = profiler.instances[0].admin;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !(tokio::net::TcpStream::connect(admin).await.is_ok() && total(&scrape(admin).await, "octant_profiler_runs_total") >= 1.0) {
        assert!(tokio::time::Instant::now() < deadline, "the profiler made no run");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    metrics_text.push_str(&get(admin, "/metrics").await.1);
    profiler.stop(0).await;

    // Where they must not be.
    let lake_text = lake_text(&lake);
    let dlq_text = raw_text(&read_all_raw(&env.kafka, &env.topic(topics::DLQ)).await);
    let alerts_text = raw_text(&read_all_raw(&env.kafka, &env.topic(topics::ALERTS)).await);
    let notified = serde_json::to_string(&*am.notified.lock().unwrap()).unwrap();
    let am_alerts = serde_json::to_string(&am.alerts().await).unwrap();
    let mut evidence_text = String::new();
    let files: Vec<_> = walk(&evidence).into_iter().filter(|p| p.is_file()).collect();
    for f in &files {
        evidence_text.push_str(&String::from_utf8_lossy(&std::fs::read(f).unwrap()));
    }
    let logs: Vec<(String, String)> = walk(&dir.join("logs"))
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    let mut sinks: Vec<(String, &str)> = vec![
        ("lake".into(), &lake_text),
        ("dead-letter topic".into(), &dlq_text),
        ("alerts topic".into(), &alerts_text),
        ("Alertmanager notifications".into(), &notified),
        ("Alertmanager alerts".into(), &am_alerts),
        ("evidence packages".into(), &evidence_text),
        ("/metrics".into(), &metrics_text),
    ];
    for (name, text) in &logs {
        sinks.push((format!("log {name}"), text));
    }
    let mut needles: Vec<String> = placer.placed.iter().flat_map(|c| c.needles.iter().cloned()).collect();
    needles.extend([S3_SECRET.to_string(), AM_TOKEN.to_string()]);
    let finder = regex::Regex::new(&needles.iter().map(|n| regex::escape(n)).collect::<Vec<_>>().join("|")).unwrap();

    // The control: the input holds every canary.
    let mut input = String::new();
    for t in [topics::TRAJECTORIES_PRODUCTION, topics::TRAJECTORIES_EVALUATION] {
        input.push_str(&raw_text(&read_all_raw(&env.kafka, &env.topic(t)).await));
    }
    let found: std::collections::BTreeSet<&str> = finder.find_iter(&input).map(|m| m.as_str()).collect();
    let missing = placer.placed.iter().filter(|c| !c.needles.iter().any(|n| found.contains(n.as_str()))).count();
    assert_eq!(missing, 0, "the input topics hold every canary");

    let mut leaks = Vec::new();
    for (name, text) in &sinks {
        let hits: Vec<&str> = finder.find_iter(text).map(|m| m.as_str()).collect();
        if !hits.is_empty() {
            leaks.push(format!("{name}: {} (e.g. {:?})", hits.len(), &hits[..hits.len().min(3)]));
        }
    }
    assert!(leaks.is_empty(), "personal data or secrets leaked:\n{}", leaks.join("\n"));

    // And the markers show where they were: the sinks held the fields, redacted.
    for marker in ["[redacted]", "[redacted:email]", "[redacted:card_number]", "[redacted:api_key]"] {
        assert!(lake_text.contains(marker), "the lake holds {marker}");
    }
    assert!(dlq_text.contains("(payload redacted)") && dlq_text.contains("[redacted:"), "dead letters are redacted, not dropped");
    assert!(alerts_text.contains("[redacted:") && notified.contains("[redacted:"), "incidents carry the violations, redacted");
    assert!(!files.is_empty(), "evidence packages were written");
    let scorer_log = &logs.iter().find(|(n, _)| n == "scorer.log").unwrap().1;
    assert!(scorer_log.contains("dead letter"), "the scorer logged its dead letters at debug level");
    eprintln!(
        "{canaries} canaries ({n_poison} poison records) through scorer, aggregator, alerter, lake writer and profiler: none in {} sinks ({} bytes of lake rows, {} of logs)",
        sinks.len(),
        lake_text.len(),
        logs.iter().map(|(_, t)| t.len()).sum::<usize>()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
