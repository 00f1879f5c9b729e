//! Independent re-runs through the real pipeline (seed 000 §IV-G; issue 45, item 8): the
//! profiler service draws a share of the lake's runs and publishes re-run requests on
//! `octant.reruns`; a harness (the synthetic fleet's, `octant_gen::rerun`) reads them from the
//! broker and answers with re-runs on the trajectory topic; the scorer scores them, the lake
//! writer archives everything, and a restarted profiler pairs each re-run with its original,
//! flags the system whose results do not reproduce, and requests nothing twice.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use octant_contracts::{ReRunRequest, topics};
use octant_core::catalogue::ids;
use octant_gen::{EvaluationSpec, FleetSpec, SystemSpec};
use octant_integration_tests::*;
use octant_lake::reader as lakedb;
use octant_profiler::ProfilerConfig;
use octant_report::reruns::{self, ReRunConfig};
use octant_runtime::metrics::total;
use prometheus::Registry;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::aggregator::T0;
use crate::profiler::fill_lake;

/// Two systems on the same kind of evaluation tasks (one attempt each): `steady`, whose
/// re-runs succeed as its originals' tasks do, and `drifty`, whose re-runs succeed at 0.35
/// while its reported runs succeed at about 0.85; and `tiny`, with a handful of evaluation runs
/// (the rest production), none of them in the share: it is re-run once for coverage.
fn fleet() -> FleetSpec {
    let eval = Some(EvaluationSpec { benchmark: "suite".into(), contamination: 0.0, attempts: 1, share: 1.0 });
    let steady = SystemSpec { task_success: 0.85, evaluation: eval.clone(), ..SystemSpec::new("steady") };
    let drifty = SystemSpec { task_success: 0.85, evaluation: eval, rerun_success: Some(0.35), ..SystemSpec::new("drifty") };
    let few = Some(EvaluationSpec { benchmark: "suite".into(), contamination: 0.0, attempts: 1, share: 0.01 });
    let tiny = SystemSpec { evaluation: few, ..SystemSpec::new("tiny") };
    FleetSpec { systems: vec![steady, drifty, tiny], seed: 41, start_ms: T0, run_spacing_ms: 2_000, poison: 0.0, json_share: 0.0 }
}

/// Scores until the scorer has consumed `events` trajectory events and has no lag.
async fn scored(scorer: &octant_runtime::service::Running, events: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let m = scrape(scorer.admin_addr).await;
        let lag_known = m.keys().any(|k| k.starts_with("octant_scorer_consumer_lag_messages{"));
        if lag_known
            && total(&m, "octant_scorer_consumer_lag_messages") == 0.0
            && total(&m, "octant_scorer_events_consumed_total") >= events as f64
        {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "the scorer did not consume {events} events: {m:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Starts the profiler service and waits for its first run (it runs at start).
async fn profiler(env: &TestEnv, lake: &Path, evidence: &Path, stop: &CancellationToken) -> octant_runtime::service::Running {
    let cfg = ProfilerConfig {
        kafka: env.kafka.clone(),
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        evidence: evidence.to_path_buf(),
        // One cycle covering the fleet's event times.
        periods: vec![Duration::from_secs(3 * 365 * 86_400)],
        every: Duration::from_secs(3600),
        report: octant_report::ReportConfig {
            lake: lake.to_path_buf(),
            // Veto-adjacent runs re-run twice as often as the others.
            reruns: ReRunConfig { share: 0.2, veto_weight: 2.0, ..Default::default() },
            ..Default::default()
        },
        ..Default::default()
    };
    let svc = octant_profiler::start(cfg, Registry::new(), stop.clone()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !svc.health.is_ready() {
        assert!(tokio::time::Instant::now() < deadline, "profiler never finished a run: {}", svc.health.detail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    svc
}

/// The one integer a counting query answers.
async fn count(ctx: &datafusion::prelude::SessionContext, sql: &str) -> usize {
    let (_, b) = lakedb::query(ctx, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    b[0].column(0).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().value(0) as usize
}

/// The first column of a query's rows, as text.
async fn texts(ctx: &datafusion::prelude::SessionContext, sql: &str) -> BTreeSet<String> {
    let (_, batches) = lakedb::query(ctx, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out = BTreeSet::new();
    for b in batches {
        let c = arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
        let c = c.as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
        out.extend(c.iter().flatten().map(str::to_string));
    }
    out
}

/// `profile.json` of every package under `dir`.
fn packages(dir: &Path) -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "profile.json") {
                out.push((p.clone(), serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_reruns_through_the_pipeline() {
    let env = TestEnv::new("reruns", 2).await;
    let fleet = fleet();
    let runs = 150;
    let records = octant_gen::generate(&fleet, 0, runs);
    let originals = records.len();
    octant_gen::produce(&env.kafka, records, None).await.unwrap();
    // The scorer stops before the lake writer is judged caught up (a running scorer keeps
    // sending watermarks); a new one resumes from its commits for the re-runs.
    let stop = CancellationToken::new();
    let scorer = octant_scorer::start(env.scorer_config(), Registry::new(), stop.clone()).await.unwrap();
    scored(&scorer, originals).await;
    stop.cancel();
    scorer.task.await.unwrap().unwrap();
    let lake = fresh_dir("reruns-lake");
    fill_lake(&env, &lake).await;

    // ---- The draw: the profiler publishes the requests on the broker.
    let evidence = lake.with_extension("evidence");
    let first_stop = CancellationToken::new();
    let first = profiler(&env, &lake, &evidence.join("first"), &first_stop).await;
    let ctx = lakedb::open(&lake).await.unwrap();
    // The draw recomputed from the lake by its rule: the ended evaluation runs whose hash is in
    // the share; one run for each system with none; veto-adjacent runs (an unsafe action or an
    // ungated high-impact one, read independently) outside the share whose other hash is in
    // the oversample (weight 2: share × 1).
    let ended = texts(&ctx, "SELECT DISTINCT run_id FROM trajectory_events WHERE kind = 'RUN_ENDED' AND source = 'EVALUATION'").await;
    let adjacent = texts(
        &ctx,
        "SELECT DISTINCT run_id FROM observations WHERE (metric = 'unsafe_action_rate' AND value > 0) \
         OR (metric = 'confirmation_gating' AND weight > 0 AND value < weight)",
    )
    .await;
    let sample: BTreeSet<&String> = ended.iter().filter(|r| reruns::in_share(r, 0.2)).collect();
    let oversample: BTreeSet<&String> =
        ended.iter().filter(|r| adjacent.contains(*r) && !reruns::in_share(r, 0.2) && reruns::in_oversample(r, 0.2, 2.0)).collect();
    let system_of = |run: &str| run.split("-run-").next().unwrap().to_string();
    let uncovered: BTreeSet<String> = ended.iter().map(|r| system_of(r)).filter(|s| !sample.iter().any(|r| system_of(r) == *s)).collect();
    let tiny: Vec<(&String, bool)> = ended.iter().filter(|r| r.starts_with("tiny-")).map(|r| (r, reruns::in_share(r, 0.2))).collect();
    assert_eq!(uncovered, ["tiny".to_string()].into(), "tiny's few evaluation runs are out of the share: {tiny:?}");
    let want = sample.len() + oversample.len() + uncovered.len();
    let requests: Vec<ReRunRequest> = collect(&env.kafka, &env.topic(topics::RERUNS), want, Duration::from_secs(10)).await;
    let m = scrape(first.admin_addr).await;
    first_stop.cancel();
    first.task.await.unwrap().unwrap();
    eprintln!("{} ended evaluation runs ({} veto-adjacent), {} re-run requests", ended.len(), adjacent.len(), requests.len());
    let drawn = |reason: &str| requests.iter().filter(|r| r.reason == reason).map(|r| &r.run_id).collect::<BTreeSet<_>>();
    assert_eq!(drawn("sample"), sample);
    assert_eq!(drawn("veto_adjacent"), oversample);
    assert_eq!(requests.len(), want, "{requests:?}");
    assert_eq!(total(&m, "octant_profiler_rerun_requests_total"), want as f64);
    assert_eq!(requests.iter().map(|r| &r.run_id).collect::<BTreeSet<_>>().len(), want, "a run is requested once");
    let covered: BTreeSet<String> = requests.iter().filter(|r| r.reason == "coverage").map(|r| r.system_id.clone()).collect();
    assert_eq!(covered, uncovered, "every system once per cycle");
    assert!(requests.iter().filter(|r| r.reason == "coverage").all(|r| system_of(&r.run_id) == r.system_id && ended.contains(&r.run_id)));
    for r in &requests {
        assert_eq!(r.request_id, ReRunRequest::id_of(&r.run_id));
        // The original's fixed artefacts travel with the request.
        assert_eq!((r.source.as_str(), r.config_hash.as_str()), ("evaluation", "cfg-1"), "{r:?}");
        assert!(r.task_id.is_some() && r.environment_version.is_some() && r.task_spec.is_some() && r.seed.is_some(), "{r:?}");
    }

    // ---- The harness answers from the broker; the scorer scores the re-runs.
    let mut answers = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        answers.extend(octant_gen::rerun(&fleet, r, T0 + runs as i64 * fleet.run_spacing_ms + 60_000 + i as i64 * 1_000).unwrap());
    }
    let answered = answers.len();
    octant_gen::produce(&env.kafka, answers, None).await.unwrap();
    let stop = CancellationToken::new();
    let scorer = octant_scorer::start(env.scorer_config(), Registry::new(), stop.clone()).await.unwrap();
    scored(&scorer, answered).await;
    stop.cancel();
    scorer.task.await.unwrap().unwrap();
    fill_lake(&env, &lake).await;

    // The re-runs' units name their originals and no window of the profile holds them.
    let ctx = lakedb::open(&lake).await.unwrap();
    assert_eq!(
        count(
            &ctx,
            "SELECT count(DISTINCT run_id) AS n FROM observations WHERE rerun_of IS NOT NULL AND run_id = concat(rerun_of, '-rerun')"
        )
        .await,
        want
    );

    // ---- A restarted profiler (nothing in memory) checks the re-runs and requests nothing twice.
    let second_stop = CancellationToken::new();
    let second = profiler(&env, &lake, &evidence.join("second"), &second_stop).await;
    let m = scrape(second.admin_addr).await;
    second_stop.cancel();
    second.task.await.unwrap().unwrap();
    assert_eq!(total(&m, "octant_profiler_rerun_requests_total"), 0.0, "the lake's requests are not drawn again");
    assert_eq!(read_all::<ReRunRequest>(&env.kafka, &env.topic(topics::RERUNS)).await.len(), want);
    let flagged = |system: &str| {
        m.iter()
            .find(|(k, _)| k.starts_with("octant_profiler_reruns_flagged{") && k.contains(&format!("system=\"{system}\"")))
            .map(|(_, v)| *v)
    };
    // tiny's one re-run is too few to test: no series, and its package says so.
    assert_eq!((flagged("drifty"), flagged("steady"), flagged("tiny")), (Some(1.0), Some(0.0), None), "{m:?}");

    let packages = packages(&evidence.join("second"));
    let (tiny, p) = packages
        .iter()
        .find(|(_, p)| p["profile"]["system_id"] == "tiny" && p["profile"]["source"] == "EVALUATION")
        .expect("an evaluation package of tiny");
    assert_eq!(p["reruns"]["comparison"]["decision"], "not tested: fewer than 10 pairs", "{}", p["reruns"]);
    assert!(std::fs::read_to_string(tiny.with_file_name("profile.md")).unwrap().contains("Not tested yet: fewer than 10 pairs"));
    // The true paired difference: a task's success probability is 0.85 ± 0.15 (uniform) for
    // both systems' originals; drifty's re-runs succeed at 0.35 (−0.50), steady's as the task.
    for (system, diverges, truth) in [("drifty", true, -0.50), ("steady", false, 0.0)] {
        let (path, p) = packages
            .iter()
            .find(|(_, p)| p["profile"]["system_id"] == system && p["profile"]["source"] == "EVALUATION")
            .unwrap_or_else(|| panic!("no evaluation package of {system}"));
        let check = &p["reruns"];
        let requested = requests.iter().filter(|r| r.system_id == system).count() as u64;
        let drawn_for_outcome = requests.iter().filter(|r| r.system_id == system && r.reason == "veto_adjacent").count() as u64;
        assert_eq!((check["requested"].as_u64(), check["returned"].as_u64()), (Some(requested), Some(requested)), "{check}");
        // The test pairs the uniformly drawn; the veto-adjacent oversample is reported apart.
        assert_eq!(
            (check["pairs"].as_u64(), check["veto_adjacent"].as_u64()),
            (Some(requested - drawn_for_outcome), Some(drawn_for_outcome))
        );
        assert!(check["unsafe_again"].as_u64().is_some_and(|n| n <= drawn_for_outcome), "{check}");
        let success = check["comparison"]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == ids::TASK_SUCCESS)
            .unwrap_or_else(|| panic!("task success compared: {check}"));
        eprintln!(
            "{system}: original {} re-run {} difference {} [{}, {}] p (Holm) {} — {}",
            success["baseline"],
            success["candidate"],
            success["difference"],
            success["lo"],
            success["hi"],
            success["p_holm"],
            check["comparison"]["decision"]
        );
        assert_eq!(success["test"], "mcnemar_exact");
        let (lo, hi) = (success["lo"].as_f64().unwrap(), success["hi"].as_f64().unwrap());
        assert!(lo <= truth && truth <= hi, "{system}: the interval [{lo}, {hi}] misses the true difference {truth}");
        let diverged: Vec<&str> = check["diverged"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        if diverges {
            assert_eq!(diverged, [ids::TASK_SUCCESS], "{check}");
            assert!(success["hi"].as_f64().unwrap() < 0.0, "{success}");
        } else {
            assert!(diverged.is_empty(), "{check}");
        }
        let md = std::fs::read_to_string(path.with_file_name("profile.md")).unwrap();
        assert!(md.contains("## Independent re-runs"), "{}", path.display());
        assert_eq!(md.contains("Flagged for resolution: task_success diverged"), diverges);
        // The profile's own task success counts the originals only.
        let units = p["profile"]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == ids::TASK_SUCCESS)
            .and_then(|m| m["units"].as_u64())
            .unwrap_or_else(|| panic!("task success in the profile: {}", p["profile"]["metrics"]));
        let runs = count(&ctx, &format!("SELECT count(DISTINCT run_id) AS n FROM observations WHERE metric = 'task_success' AND system_id = '{system}' AND rerun_of IS NULL")).await as u64;
        assert_eq!(units, runs, "{system}: the re-runs enter no window");
    }
}
