//! Evaluation harnesses in, end to end: Inspect AI itself (the pinned `inspect-ai` in
//! `.octant/inspect/venv`, installed by `scripts/setup.sh`) runs a small tool-using task with
//! its mock model over 4 epochs and writes its log; a τ-bench result file in its own layout is
//! made by `services/import/fixtures/make_tau_bench.py`. `octant import` sends both to a real
//! broker, `octant up` scores them and writes the lake, and `octant profile` reads it back:
//! Octant's pass@k (k = 1, 2, 4) and success rate equal Inspect's own `pass_at` reducers and
//! accuracy for the same log (read through Inspect's API), its pass^k, success and tool-error
//! rates equal τ-bench's run script's, and tool calls and errors equal the log's. Importing
//! each again sends nothing: no new event, observation or dead letter.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use octant_contracts::{Observation, ResultStatus, StepKind, TrajectoryEvent, topics};
use octant_integration_tests::{read_all, repo_root, total, wait_metrics};
use octant_runtime::broker::EmbeddedBroker;
use octant_runtime::config::KafkaConfig;
use serde_json::Value;

fn octant(args: &[&str]) -> std::process::Output {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_octant")).args(args).env("RUST_LOG", "warn").output().unwrap();
    assert!(out.status.success(), "octant {args:?}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    out
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The profile metric `metric` of system `system` (benchmark `benchmark`).
fn metric<'a>(profiles: &'a [Value], system: &str, name: &str, benchmark: &str) -> &'a Value {
    profiles
        .iter()
        .filter(|p| p["system"]["id"] == system && p["system"]["source"] == "evaluation")
        .flat_map(|p| p["metrics"].as_array().unwrap())
        .find(|m| m["metric"] == name && m["benchmark"] == benchmark)
        .unwrap_or_else(|| panic!("no {name} on {benchmark} for {system}"))
}

fn estimate(m: &Value) -> f64 {
    m["estimate"].as_f64().unwrap_or_else(|| panic!("no estimate: {m}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_tau_bench_logs_imported_once_equal_their_harnesses() {
    let root = repo_root();
    let python = root.join(".octant/inspect/venv/bin/python");
    assert!(python.is_file(), "Inspect AI is not installed ({}): run scripts/setup.sh", python.display());
    let dir = std::env::temp_dir().join(format!("octant-harness-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // Inspect writes its log, and reads it back through its own API.
    let fixtures = root.join("services/import/fixtures");
    let report_path = dir.join("inspect-report.json");
    let status = std::process::Command::new(&python)
        .arg(fixtures.join("inspect_task.py"))
        .args(["--log-dir", dir.join("logs").to_str().unwrap(), "--epochs", "4", "--report", report_path.to_str().unwrap()])
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(status.success(), "inspect_task.py ran");
    let inspect: Value = serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    assert_eq!(inspect["status"], "success");
    let log = inspect["log"].as_str().unwrap().to_string();
    assert!(log.ends_with(".eval") && Path::new(&log).is_file(), "{log}");

    // τ-bench's file in its own layout, and what its run script computes.
    let status = std::process::Command::new("python3").arg(fixtures.join("make_tau_bench.py")).arg(&dir).status().unwrap();
    assert!(status.success(), "make_tau_bench.py ran");
    let tau: Value = serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let tau_file = dir.join("tau_bench_results.json");

    let broker = EmbeddedBroker::start().await.expect("the test broker starts (run scripts/setup.sh)");
    let b = broker.brokers.as_str();
    octant(&["topics", "create", "--brokers", b, "--topic-prefix", "imp.", "--partitions", "2"]);
    let kafka = KafkaConfig { brokers: broker.brokers.clone(), topic_prefix: "imp.".into(), ..KafkaConfig::default() };
    let start = humantime::format_rfc3339_seconds(std::time::SystemTime::now() - std::time::Duration::from_secs(1800)).to_string();
    let import_all = || {
        let a = octant(&["import", "inspect", "--brokers", b, "--topic-prefix", "imp.", "--system", "inspect-agent", &log]);
        let t = octant(&[
            "import",
            "tau-bench",
            "--brokers",
            b,
            "--topic-prefix",
            "imp.",
            "--system",
            "tau-agent",
            "--start",
            &start,
            tau_file.to_str().unwrap(),
        ]);
        (stdout(&a), stdout(&t))
    };
    // An interrupted τ-bench import: its ledger entry says begun, and the first three runs'
    // events reached the topic before the crash.
    let opts = octant_import::Options {
        system: Some("tau-agent".into()),
        start_ms: Some(humantime::parse_rfc3339_weak(&start).unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64),
        ..Default::default()
    };
    let mapped = octant_import::tau::read(&tau_file, &opts).unwrap();
    let evaluation = kafka.topic(topics::TRAJECTORIES_EVALUATION);
    let wait = std::time::Duration::from_secs(30);
    let from = octant_runtime::topic::end_offsets(&kafka, &evaluation, wait).await.unwrap();
    let dlq_from = octant_runtime::topic::end_offsets(&kafka, &kafka.topic(topics::DLQ), wait).await.unwrap();
    let producer = octant_runtime::kafka::producer(&kafka, "crashed-import").unwrap();
    let begun = octant_import::ledger::Entry::begun(&mapped, None, (from, dlq_from), 1, None);
    let mut sent_before = vec![octant_runtime::kafka::OutRecord {
        topic: kafka.topic(octant_import::ledger::TOPIC),
        partition: None,
        key: begun.import_id.clone(),
        payload: serde_json::to_vec(&begun).unwrap(),
    }];
    for e in mapped.runs[..3].iter().flat_map(|r| &r.events) {
        let payload = octant_contracts::codec::to_single_object(e).unwrap();
        sent_before.push(octant_runtime::kafka::OutRecord { topic: evaluation.clone(), partition: None, key: e.run_id.clone(), payload });
    }
    octant_runtime::kafka::send_all(&producer, &sent_before).await.unwrap();
    let already = sent_before.len() - 1;

    let (first_inspect, first_tau) = import_all();
    assert!(first_inspect.contains("20 runs"), "{first_inspect}");
    assert!(first_tau.contains(&format!("resuming an interrupted import: {already} of {} events", mapped.events())), "{first_tau}");
    assert!(first_tau.contains("20 runs"), "{first_tau}");

    // The events on the topic: tool calls and errors as the log has them.
    let events: Vec<TrajectoryEvent> = read_all(&kafka, &evaluation).await;
    let ids: std::collections::BTreeSet<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "every event once, the resumed import's too");
    assert_eq!(events.iter().filter(|e| e.system.id == "tau-agent").count(), mapped.events());
    let tools = |system: &str| -> (i64, i64) {
        let steps: Vec<_> = events
            .iter()
            .filter(|e| e.system.id == system)
            .filter_map(|e| e.step.as_deref())
            .filter(|s| s.step_kind == StepKind::ToolCall)
            .collect();
        (steps.len() as i64, steps.iter().filter(|s| s.result_status == Some(ResultStatus::Error)).count() as i64)
    };
    assert_eq!(tools("inspect-agent"), (inspect["tool_calls"].as_i64().unwrap(), inspect["tool_errors"].as_i64().unwrap()));
    assert_eq!(tools("tau-agent"), (tau["tau_bench"]["tool_calls"].as_i64().unwrap(), tau["tau_bench"]["tool_errors"].as_i64().unwrap()));

    // Scored and written to the lake.
    let lake = dir.join("lake");
    let config = dir.join("octant.toml");
    std::fs::write(
        &config,
        format!(
            "[kafka]\ntopic_prefix = \"imp.\"\n[scorer]\nadmin_addr = \"127.0.0.1:0\"\n[lake_writer]\nadmin_addr = \"127.0.0.1:0\"\nlake = \"{}\"\nmax_file_age = \"500ms\"\n",
            lake.display()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_octant"))
        .args(["up", "--brokers", b, "--config", config.to_str().unwrap(), "--services", "scorer,lake_writer"])
        .env("RUST_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let admin: BTreeMap<String, std::net::SocketAddr> = crate::admin_addresses(&mut child, 2).into_iter().collect();
    wait_metrics(admin["scorer"], "every event scored", |m| total(m, "octant_scorer_events_consumed_total") >= events.len() as f64).await;
    let observations: Vec<Observation> = read_all(&kafka, &kafka.topic(topics::OBSERVATIONS)).await;
    wait_metrics(admin["lake_writer"], "every observation in the lake", |m| {
        m.get("octant_lake_writer_records_total{table=\"observations\"}").copied().unwrap_or(0.0) >= observations.len() as f64
            && total(m, "octant_lake_writer_buffered_records") == 0.0
    })
    .await;
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success(), "octant up stops cleanly");
    let dead: Vec<octant_contracts::DeadLetter> = read_all(&kafka, &kafka.topic(topics::DLQ)).await;
    assert!(dead.is_empty(), "nothing dead-lettered: {dead:?}");

    // Importing again: nothing new anywhere.
    let (again_inspect, again_tau) = import_all();
    assert!(again_inspect.contains("already imported (20 runs") && again_inspect.contains("nothing sent"), "{again_inspect}");
    assert!(again_tau.contains("already imported (20 runs"), "{again_tau}");
    assert_eq!(read_all::<TrajectoryEvent>(&kafka, &evaluation).await.len(), events.len(), "no new event");
    assert_eq!(read_all::<Observation>(&kafka, &kafka.topic(topics::OBSERVATIONS)).await.len(), observations.len());
    assert!(read_all::<octant_contracts::DeadLetter>(&kafka, &kafka.topic(topics::DLQ)).await.is_empty());

    // The profile over the lake against the harnesses' own numbers.
    let evidence = dir.join("evidence");
    let out = octant(&[
        "profile",
        "--lake",
        lake.to_str().unwrap(),
        "--since",
        "3h",
        "--format",
        "json",
        "--evidence",
        evidence.to_str().unwrap(),
    ]);
    let profiles: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    // Octant's window sums are fixed point at 10⁻⁶ per unit (octant_core::stats::bootstrap::SCALE).
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6;
    let acc = &inspect["accuracy"]["match"];
    for k in [1, 2, 4] {
        let ours = estimate(metric(&profiles, "inspect-agent", &format!("pass_at_{k}"), "arith"));
        let theirs = acc[format!("pass_at_{k}")].as_f64().unwrap();
        eprintln!("inspect pass@{k}: octant {ours}, inspect {theirs}");
        assert!(close(ours, theirs), "pass@{k}: octant {ours}, inspect {theirs}");
    }
    let success = estimate(metric(&profiles, "inspect-agent", "task_success", "arith"));
    assert!(close(success, acc["mean"].as_f64().unwrap()), "accuracy: octant {success}, inspect {}", acc["mean"]);
    let t = &tau["tau_bench"];
    // Octant's catalogue has pass^k for k = 1, 2, 4.
    for k in [1, 2, 4] {
        let ours = estimate(metric(&profiles, "tau-agent", &format!("pass_hat_{k}"), "tau-bench"));
        let theirs = t["pass_hat"][k.to_string()].as_f64().unwrap();
        eprintln!("tau-bench pass^{k}: octant {ours}, tau-bench {theirs}");
        assert!(close(ours, theirs), "pass^{k}: octant {ours}, tau-bench {theirs}");
    }
    assert!(close(estimate(metric(&profiles, "tau-agent", "task_success", "tau-bench")), t["success_rate"].as_f64().unwrap()));
    let tool_errors = estimate(metric(&profiles, "tau-agent", "tool_error_rate", "tau-bench"));
    assert!(close(tool_errors, t["tool_error_rate"].as_f64().unwrap()), "tool-error rate {tool_errors}");
    // Inspect's tool errors over its tool calls: model calls are no tool calls.
    let inspect_errors = estimate(metric(&profiles, "inspect-agent", "tool_error_rate", "arith"));
    let theirs = inspect["tool_errors"].as_f64().unwrap() / inspect["tool_calls"].as_f64().unwrap();
    assert!(close(inspect_errors, theirs), "Inspect tool-error rate: octant {inspect_errors}, the log {theirs}");
    // τ-bench logs no timings: no latency observation (N/A), never a measured 0.
    assert!(!observations.iter().any(|o| o.system_id == "tau-agent" && o.metric == "latency_per_run"));
    assert!(observations.iter().any(|o| o.system_id == "inspect-agent" && o.metric == "latency_per_run"));

    // A log with a sample that cannot be read: a dead letter naming the file and the record,
    // the rest imported; once.
    let mut bad: Value = serde_json::from_slice(&std::fs::read(fixtures.join("inspect/arith.json")).unwrap()).unwrap();
    bad["samples"][1] = serde_json::json!({"epoch": "second"});
    let bad_path = dir.join("broken.json");
    std::fs::write(&bad_path, serde_json::to_vec(&bad).unwrap()).unwrap();
    for _ in 0..2 {
        octant(&["import", "inspect", "--brokers", b, "--topic-prefix", "imp.", bad_path.to_str().unwrap()]);
    }
    let dead: Vec<octant_contracts::DeadLetter> = read_all(&kafka, &kafka.topic(topics::DLQ)).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    let d = &dead[0];
    let source = format!("import:inspect:{}", bad["eval"]["task_id"].as_str().unwrap());
    assert_eq!(
        (d.service.as_str(), d.source_topic.as_str(), d.offset, d.error_class.as_str()),
        ("import", source.as_str(), 1, "malformed_record")
    );
    assert_eq!(d.key.as_deref(), Some(b"samples[1]".as_slice()));
    assert!(d.error_message.starts_with("broken.json samples[1]: "), "{}", d.error_message);
    assert!(d.payload.is_empty(), "the transcript stays in the file");

    // Maintenance: `octant lake maintain` on a real lake (its files are few here: the lake
    // writer read everything as one unit per partition; the crash test compacts many units);
    // the independent Delta reader finds the same rows, each offset once, and the profile is
    // unchanged.
    let l = lake.to_str().unwrap();
    let mut tables: Vec<&str> = octant_lake::schema::TABLES.iter().map(|t| t.name).collect();
    tables.push(octant_lake::maintain::ERASURES);
    let files = |r: &BTreeMap<String, Value>| -> usize { r.values().map(|v| v["files"].as_array().map_or(0, Vec::len)).sum() };
    let rows = |r: &BTreeMap<String, Value>, t: &str| r[t]["rows"].as_u64().unwrap_or(0);
    let before = octant_integration_tests::delta_read(&lake, &tables, None);
    let maintained = stdout(&octant(&["lake", "maintain", "--lake", l]));
    let after = octant_integration_tests::delta_read(&lake, &tables, None);
    eprintln!("{maintained}files listed by the tables' logs: {} before compaction, {} after", files(&before), files(&after));
    assert!(files(&after) <= files(&before), "{maintained}");
    for t in octant_lake::schema::TABLES.iter().map(|t| t.name) {
        assert_eq!(rows(&after, t), rows(&before, t), "{t}: the same rows after compaction");
        assert_eq!(after[t]["distinct_offsets"], after[t]["rows"], "{t}: no offset twice after compaction");
    }
    let profile = |evidence: &Path| -> Vec<Value> {
        let out = octant(&["profile", "--lake", l, "--since", "3h", "--format", "json", "--evidence", evidence.to_str().unwrap()]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let compacted = profile(&evidence);
    // Each package records the tables' versions its session read: the cut to read it again at.
    let package = walkdir_profile_json(&evidence.join("tau-agent"));
    let versions = &serde_json::from_slice::<Value>(&std::fs::read(&package).unwrap()).unwrap()["inputs"]["lake_versions"];
    let tables_now = octant_lake::Lake::open(l, &Default::default()).unwrap().tables;
    for t in ["observations", "trajectory_events"] {
        let now = octant_lake::store::block_on(tables_now.log_version(t)).unwrap();
        assert_eq!(versions[t].as_u64(), now, "{t}'s version in {}", package.display());
    }
    for k in [1, 2, 4] {
        let m = format!("pass_hat_{k}");
        assert_eq!(estimate(metric(&compacted, "tau-agent", &m, "tau-bench")), estimate(metric(&profiles, "tau-agent", &m, "tau-bench")));
    }

    // Erasure of one run (a data-protection request): gone from every table and from every
    // Parquet file on disk, listed or not; recorded with who, why and the predicate.
    let run = events.iter().find(|e| e.system.id == "tau-agent").unwrap().run_id.clone();
    let run_events = events.iter().filter(|e| e.run_id == run).count() as u64;
    let run_observations = observations.iter().filter(|o| o.run_id == run).count() as u64;
    assert!(run_events > 0 && run_observations > 0);
    let erased = octant(&[
        "lake",
        "erase",
        "--lake",
        l,
        "--run",
        &run,
        "--by",
        "dpo@example.com",
        "--reason",
        "DSR-7",
        "--evidence",
        evidence.to_str().unwrap(),
    ]);
    let summary: Value = serde_json::from_slice(&erased.stdout).unwrap();
    eprintln!("octant lake erase: {summary}");
    assert_eq!(summary["tables"]["trajectory_events"]["rows"].as_u64(), Some(run_events), "{summary}");
    assert_eq!(summary["tables"]["observations"]["rows"].as_u64(), Some(run_observations), "{summary}");
    let gone = octant_integration_tests::delta_read(&lake, &tables, Some(("run_id", &run)));
    for t in ["trajectory_events", "observations"] {
        assert_eq!((gone[t]["matching"].as_u64(), gone[t]["matching_on_disk"].as_u64()), (Some(0), Some(0)), "{t}: {}", gone[t]);
    }
    assert_eq!(rows(&gone, "trajectory_events"), rows(&after, "trajectory_events") - run_events);
    assert_eq!(rows(&gone, "observations"), rows(&after, "observations") - run_observations);
    let records = gone["erasures"]["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["predicate"], format!("run_id = '{run}'").as_str());
    assert_eq!((records[0]["erased_by"].as_str(), records[0]["reason"].as_str()), (Some("dpo@example.com"), Some("DSR-7")));
    assert_eq!(records[0]["rows"].as_u64(), Some(run_events + run_observations));
    let sql = stdout(&octant(&["sql", "--lake", l, "SELECT erased_by, predicate FROM erasures"]));
    assert!(sql.contains("dpo@example.com") && sql.contains(&run), "{sql}");
    // The profile no longer counts the run.
    let without = profile(&evidence);
    let runs = |p: &[Value]| metric(p, "tau-agent", "task_success", "tau-bench")["units"].as_u64();
    assert_eq!(runs(&without).map(|n| n + 1), runs(&compacted), "one run fewer");

    // Erasure of a whole system: every table, its evidence packages, its profile.
    let system_dir = evidence.join(octant_lake::lake::escape("inspect-agent"));
    assert!(system_dir.is_dir(), "the profile wrote inspect-agent's evidence");
    let erased = octant(&[
        "lake",
        "erase",
        "--lake",
        l,
        "--system",
        "inspect-agent",
        "--by",
        "dpo@example.com",
        "--evidence",
        evidence.to_str().unwrap(),
    ]);
    let summary: Value = serde_json::from_slice(&erased.stdout).unwrap();
    eprintln!("octant lake erase --system: {summary}");
    assert!(summary["evidence_packages_removed"].as_u64() >= Some(1) && !system_dir.exists(), "{summary}");
    let gone = octant_integration_tests::delta_read(&lake, &tables, Some(("system_id", "inspect-agent")));
    for t in octant_lake::schema::TABLES.iter().map(|t| t.name) {
        if !gone[t].is_null() {
            assert_eq!((gone[t]["matching"].as_u64(), gone[t]["matching_on_disk"].as_u64()), (Some(0), Some(0)), "{t}: {}", gone[t]);
        }
    }
    assert!(gone["observations"]["rows"].as_u64() > Some(0), "the other system's rows stay");
    assert_eq!(gone["erasures"]["records"].as_array().map(Vec::len), Some(2));
    let left = profile(&dir.join("evidence-after"));
    assert!(left.iter().all(|p| p["system"]["id"] != "inspect-agent"), "no profile of the erased system");
    assert!(left.iter().any(|p| p["system"]["id"] == "tau-agent"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first `profile.json` under `dir`.
fn walkdir_profile_json(dir: &Path) -> std::path::PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "profile.json") {
                return p;
            }
        }
    }
    panic!("no profile.json under {}", dir.display())
}
