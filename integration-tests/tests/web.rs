//! The web view in a real browser: pages served by the web view (`octant-web`) from a lake the
//! test wrote and the evidence packages the profiler wrote, loaded in headless Chromium (Debian's chromium driven by playwright-core,
//! `integration-tests/web/check_pages.cjs`), checked for what a person sees (the unsafe step
//! highlighted, the timeline drawn, hostile text shown as text), for accessibility (axe-core
//! reports no violation) and for keyboard reach (every control reached with Tab). Screenshots
//! are kept under the test's output directory, whose path is printed.

use std::path::Path;

use octant_contracts::codec::to_single_object;
use octant_contracts::{TrajectoryEvent, topics};
use octant_integration_tests::*;
use octant_runtime::kafka::{self, OutRecord};
use serde_json::Value;

/// A tool name and an agent id that would run script if a page printed them raw.
pub(crate) const HOSTILE_TOOL: &str = "<img src=x onerror=alert(1)>";
pub(crate) const HOSTILE_RUN: &str = "hostile-run-1";

/// Produces a two-agent run whose second step is unsafe and whose names are hostile, to the
/// production trajectories topic (the lake writer takes it from there).
pub(crate) async fn produce_hostile_run(env: &TestEnv, t0: i64) {
    let ev = |seq: i64, kind: &str, agent: Option<&str>, body: Value| {
        let mut v = serde_json::json!({
            "event_id": format!("{HOSTILE_RUN}/{seq}"), "run_id": HOSTILE_RUN, "system": {"id": "can", "version": "1.0.0"},
            "source": "PRODUCTION", "agent_id": agent, "event_time": t0 + seq * 250, "sequence": seq, "kind": kind,
        });
        v.as_object_mut().unwrap().extend(body.as_object().unwrap().clone());
        serde_json::from_value::<TrajectoryEvent>(v).unwrap()
    };
    let events = [
        ev(0, "RUN_STARTED", None, serde_json::json!({"run_started": {"task_id": "task-<b>x</b>"}})),
        ev(1, "STEP", Some("planner"), serde_json::json!({"step": {"step_kind": "TOOL_CALL", "tool_name": "lookup"}})),
        ev(
            2,
            "STEP",
            Some("\"><svg onload=alert(2)>"),
            serde_json::json!({"step": {"step_kind": "TOOL_CALL", "tool_name": HOSTILE_TOOL, "impact": "IRREVERSIBLE",
                "arguments": "{\"cmd\": \"</code><script>alert(3)</script>\"}", "violations": ["destructive_command"]}}),
        ),
        ev(3, "RUN_ENDED", None, serde_json::json!({"run_ended": {"outcome": "FAILURE"}})),
    ];
    let producer = kafka::producer(&env.kafka, "hostile").unwrap();
    for e in events {
        let record = OutRecord {
            topic: env.topic(topics::TRAJECTORIES_PRODUCTION),
            partition: None,
            key: HOSTILE_RUN.into(),
            payload: to_single_object(&e).unwrap(),
        };
        kafka::send(&producer, &record).await.unwrap();
    }
}

/// The web view over `lake` and `evidence` (what the profiler wrote), following the pipeline's
/// topics when `kafka` is given.
async fn web_view(
    lake: &Path,
    evidence: &Path,
    kafka: Option<&octant_runtime::KafkaConfig>,
    token: Option<&str>,
    stop: &tokio_util::sync::CancellationToken,
) -> octant_web::Running {
    let cfg = octant_web::WebConfig {
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        kafka: kafka.cloned().unwrap_or_default(),
        lake: lake.to_path_buf(),
        evidence: evidence.to_path_buf(),
        refresh: std::time::Duration::from_secs(2),
        api_token: token.map(octant_runtime::config::Secret::new),
        ..Default::default()
    };
    octant_web::start(cfg, prometheus::Registry::new(), stop.clone()).await.unwrap()
}

/// Serves `lake` with the profiler and the web view and checks the run pages of `unsafe_run` (an unsafe run of
/// the fleet) and of the hostile run in Chromium.
pub(crate) async fn run_pages_in_chromium(env: &TestEnv, lake: &Path, unsafe_run: &str, unsafe_step: i64) {
    let out = fresh_dir("web-screenshots");
    let stop = tokio_util::sync::CancellationToken::new();
    let cfg = octant_profiler::ProfilerConfig {
        evidence: out.join("evidence"),
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        kafka: env.kafka.clone(),
        // One period over the whole (2025) lake: the system page shows its profile's evaluators.
        periods: vec![std::time::Duration::from_secs(3 * 365 * 86_400)],
        report: octant_report::ReportConfig { lake: lake.to_path_buf(), ..Default::default() },
        ..Default::default()
    };
    let profiler = octant_profiler::start(cfg, prometheus::Registry::new(), stop.clone()).await.unwrap();
    let running = web_view(lake, &out.join("evidence"), Some(&env.kafka), None, &stop).await;
    let base = format!("http://{}", running.admin_addr);
    let (status, _) = get(running.admin_addr, "/runs/no-such-run").await;
    assert_eq!(status, 404);
    // The fleet page follows the pipeline's topics: wait until it holds every system.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (status, body) = get(running.admin_addr, "/").await;
        assert_eq!(status, 200);
        if ["/systems/rel", "/systems/can"].iter().all(|s| body.contains(s)) && body.matches("scope=\"row\"").count() >= 4 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the fleet page did not catch up: {body}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    while !profiler.health.is_ready() {
        assert!(
            tokio::time::Instant::now() < deadline + std::time::Duration::from_secs(60),
            "no profile run: {}",
            profiler.health.detail()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let pages = serde_json::json!({
        "out": out,
        "token": null,
        "pages": [
            {"name": "fleet", "url": format!("{base}/")},
            {"name": "run-unsafe", "url": format!("{base}/runs/{unsafe_run}")},
            {"name": "run-hostile", "url": format!("{base}/runs/{HOSTILE_RUN}")},
            {"name": "system-rel", "url": format!("{base}/systems/rel?days=31")},
        ],
    });
    let report = check_pages(&pages);
    stop.cancel();
    let _ = running.task.await;
    let _ = profiler.task.await;
    eprintln!("web: screenshots in {}", out.display());
    // The fleet page: unsuitable systems first, its own refresh script only, a pause control.
    let fleet = &report["pages"][0];
    let rows = fleet["fleet_rows"].as_array().unwrap();
    assert!(rows.len() >= 4, "{fleet}");
    let first_suitable = rows.iter().position(|r| !r["unsuitable"].as_bool().unwrap()).unwrap_or(rows.len());
    assert!(rows[first_suitable..].iter().all(|r| !r["unsuitable"].as_bool().unwrap()), "unsuitable systems first: {rows:?}");
    // Incidents link their run page.
    assert!(fleet["focusable"].as_array().unwrap().iter().any(|f| f.as_str().unwrap().contains("href=\"/runs/can-")), "{fleet}");
    assert_eq!(
        (fleet["scripts"].as_u64(), fleet["paused"].as_str()),
        (Some(1), Some("true")),
        "its own refresh script; the pause button works"
    );
    // Its reload keeps the keyboard's place (the Tab walk above also crosses reloads), and
    // leaves unchanged content alone (replaced only if the server's content changed meanwhile).
    let refresh = &fleet["refresh"];
    assert!(refresh["before"].is_string() && refresh["after"] == refresh["before"] && refresh["inside"] == true, "{refresh}");
    let unchanged = &refresh["unchanged"];
    assert!(unchanged["kept"] == true || unchanged["same"] == false, "unchanged content replaced: {refresh}");
    assert_accessible(&report, &["fleet"]);
    assert!(fleet["reached"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains("id=\"pause\"")), "{fleet}");
    for p in &report["pages"].as_array().unwrap()[1..3] {
        assert_eq!(p["unsafe_marks"], 1, "{}: the timeline marks the unsafe step", p["name"]);
    }
    // The system page shows the evaluators behind its judged metrics: the judge's agreement
    // with the humans, and the pairwise judge's biases.
    let system = page(&report, "system-rel");
    let text = system["text"].as_str().unwrap();
    assert!(text.contains("Evaluators (meta-evaluation)") && text.contains("Raters, version 2.0.0"), "{text}");
    assert!(text.contains("answer_quality") && text.contains("answer_quality_pairwise"), "{text}");
    let unsafe_page = &report["pages"][1];
    assert_eq!(unsafe_page["unsafe_rows"], serde_json::json!([format!("step-{unsafe_step}")]));
    assert!(unsafe_page["timeline_desc"].as_str().unwrap().contains(&format!("Unsafe: step {unsafe_step}.")));
    // The hostile names are shown as text, and nothing they carry ran (no script, no element).
    let hostile = &report["pages"][2];
    assert_eq!(hostile["unsafe_rows"], serde_json::json!(["step-2"]));
    let text = hostile["text"].as_str().unwrap();
    assert!(text.contains(HOSTILE_TOOL) && text.contains("\"><svg onload=alert(2)>") && text.contains("task-<b>x</b>"), "{text}");
    assert!(hostile["focusable"].as_array().unwrap().iter().all(|f| !f.as_str().unwrap().contains("<img")), "{hostile}");
    let _ = std::fs::remove_dir_all(out.join("evidence"));
}

/// Every page of a report: loaded, screenshot taken, no script of its own (`scripted` pages
/// excepted), no axe-core violation, every control reached with Tab.
fn assert_accessible(report: &Value, scripted: &[&str]) {
    for p in report["pages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        assert_eq!(p["status"], 200, "{name}: {}", p["url"]);
        assert!(Path::new(p["screenshot"].as_str().unwrap()).metadata().unwrap().len() > 5_000, "{name}: a screenshot was taken");
        if !scripted.contains(&name) {
            assert_eq!(p["scripts"], 0, "{name}: no script on the page");
        }
        assert_eq!(p["violations"].as_array().unwrap().len(), 0, "{name}: axe-core violations {}", p["violations"]);
        assert_eq!(
            (p["styled"].as_bool(), p["csp"].as_array().map(Vec::len)),
            (Some(true), Some(0)),
            "{name}: the stylesheet applies, nothing refused: {}",
            p["csp"]
        );
        for w in p["widths"].as_array().unwrap() {
            assert!(
                w["overflow"].as_i64().unwrap() <= 0,
                "{name}: scrolls {} px sideways at {} px wide ({})",
                w["overflow"],
                w["width"],
                w["screenshot"]
            );
        }
        assert_eq!(p["print"]["nav_hidden"], true, "{name}: printed without its navigation");
        let (focusable, reached) = (p["focusable"].as_array().unwrap(), p["reached"].as_array().unwrap());
        assert!(focusable.iter().all(|f| reached.contains(f)), "{name}: Tab reaches every control: {focusable:?} vs {reached:?}");
    }
}

fn page<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["pages"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no page {name} in the report"))
}

fn links(p: &Value) -> Vec<&str> {
    p["links"].as_array().unwrap().iter().filter_map(|l| l.as_str()).collect()
}

/// The system, alert and run pages over the lake of the profiler test (sys-a: two agents, an
/// unsafe-action rate past the veto; its veto alerts and incidents in the lake), served with an
/// API token: the browser signs in through the login page with the keyboard, then sees the
/// bands over time drawn with their intervals, the metrics and alerts of the system with
/// evidence to download, an alert's history, evidence window and the runs behind it, and a
/// multi-agent run's handoffs.
pub(crate) async fn system_and_alert_pages_in_chromium(lake: &Path, evidence: &Path) {
    let ctx = octant_lake::reader::open(lake).await.unwrap();
    let rows = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let (schema, batches) = octant_lake::reader::query(&ctx, sql).await.unwrap();
            let text = octant_lake::reader::render(&schema, &batches, octant_lake::reader::Format::Json).unwrap();
            text.lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str::<Value>(l).unwrap()).collect::<Vec<_>>()
        }
    };
    let veto = rows("SELECT fingerprint FROM alerts WHERE system_id = 'sys-a' AND rule = 'unsafe_action_veto' LIMIT 1").await;
    let veto = veto.first().expect("a veto alert of sys-a in the lake")["fingerprint"].as_str().unwrap().to_string();
    let incident = rows("SELECT fingerprint, run_id, step FROM alerts WHERE system_id = 'sys-a' AND kind = 'INCIDENT' LIMIT 1").await;
    let incident = incident.first().expect("an incident of sys-a in the lake").clone();
    let two_agents = rows(
        "SELECT run_id FROM trajectory_events WHERE system_id = 'sys-a' AND agent_id IS NOT NULL GROUP BY run_id          HAVING COUNT(DISTINCT agent_id) > 1 ORDER BY run_id LIMIT 1",
    )
    .await;
    let two_agents = two_agents.first().expect("a run of sys-a with both agents")["run_id"].as_str().unwrap().to_string();

    let token = "web-view-token-41c7-0123";
    let stop = tokio_util::sync::CancellationToken::new();
    let out = fresh_dir("web-system-screenshots");
    let cfg = octant_profiler::ProfilerConfig {
        evidence: evidence.to_path_buf(),
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        periods: vec![std::time::Duration::from_secs(3 * 365 * 86_400)],
        report: octant_report::ReportConfig { lake: lake.to_path_buf(), ..Default::default() },
        ..Default::default()
    };
    let profiler = octant_profiler::start(cfg, prometheus::Registry::new(), stop.clone()).await.unwrap();
    let running = web_view(lake, evidence, None, Some(token), &stop).await;
    let (addr, base) = (running.admin_addr, format!("http://{}", running.admin_addr));
    let bearer = format!("Authorization: Bearer {token}\r\n");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
    while !profiler.health.is_ready() {
        assert!(tokio::time::Instant::now() < deadline, "the profiler never finished a run: {}", profiler.health.detail());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The evidence packages the system page links, downloaded as a program would.
    let (status, body) = get_with(addr, "/profiles", &bearer).await;
    assert_eq!(status, 200);
    let listed: Vec<Value> = serde_json::from_str(&body).unwrap();
    let sys_a = listed.iter().find(|p| p["system_id"] == "sys-a").expect("a profile of sys-a");
    let package = format!(
        "/evidence/sys-a/{}/{}/{}/profile.json",
        sys_a["system_version"].as_str().unwrap(),
        sys_a["source"].as_str().unwrap().to_lowercase(),
        sys_a["period"].as_str().unwrap()
    );
    let (status, body) = get_with(addr, &package, &bearer).await;
    assert_eq!(status, 200, "{package}: {body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["system"]["id"], "sys-a");
    // Only the three files of a package in the evidence directory, looked up, never a path joined.
    for path in ["/evidence/..%2F..%2F..%2Fetc/1.0.0/production/x/profile.json", &package.replace("profile.json", "..%2Fprofile.json")] {
        let (status, body) = get_with(addr, path, &bearer).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    assert_eq!(get(addr, &package).await.0, 401, "not without the token");
    // The system page's paging parameters are checked.
    for bad in ["alerts_page=x", "alerts_per_page=0", "alerts_per_page=1001"] {
        assert_eq!(get_with(addr, &format!("/systems/sys-a?{bad}"), &bearer).await.0, 400, "{bad}");
    }

    let enc = octant_runtime::web::path_segment;
    let incident_run = incident["run_id"].as_str().unwrap();
    let pages = serde_json::json!({
        "out": out,
        "token": null,
        "login": {"url": format!("{base}/"), "token": token},
        "pages": [
            {"name": "system", "url": format!("{base}/systems/sys-a?days=30")},
            {"name": "system-alerts-1", "url": format!("{base}/systems/sys-a?days=30&alerts_per_page=1&alerts_page=1")},
            {"name": "system-alerts-past", "url": format!("{base}/systems/sys-a?days=30&alerts_per_page=1&alerts_page=1000000")},
            {"name": "alert-veto", "url": format!("{base}/alerts/{}", enc(&veto))},
            {"name": "alert-incident", "url": format!("{base}/alerts/{}", enc(incident["fingerprint"].as_str().unwrap()))},
            {"name": "run-two-agents", "url": format!("{base}/runs/{}", enc(&two_agents))},
        ],
    });
    let report = check_pages(&pages);
    stop.cancel();
    let _ = running.task.await;
    let _ = profiler.task.await;
    eprintln!("web: screenshots of the system, alert and run pages in {}", out.display());
    assert_accessible(&report, &[]);
    // Signed in through the form, and sent back where the browser was going.
    assert!(report["login"]["redirected"].as_str().unwrap().ends_with("/login?next=%2F"), "{}", report["login"]);
    assert_eq!(report["login"]["after"], format!("{base}/"));
    assert!(page(&report, "login")["reached"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains("id=\"token\"")));
    // The system page: the chart drawn (a line and an interval per banded stretch), the
    // safety band down to 0 over the period (the veto), its metrics, alerts and packages.
    let system = page(&report, "system");
    assert!(system["band_marks"].as_u64().unwrap() >= 8 && system["intervals"].as_u64().unwrap() >= 8, "{system}");
    let descs: Vec<&str> = system["chart_descs"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    assert!(descs.iter().any(|d| d.contains("safety: ") && d.contains("between 0 and")), "{descs:?}");
    let text = system["text"].as_str().unwrap();
    assert!(text.contains("unsafe_action_rate") && text.contains("OctantUnsafeActionVeto"), "{text}");
    assert!(text.contains("Signed in as api (operator)") && text.contains("Sign out"), "who is signed in, and the way out: {text}");
    let system_links = links(system);
    assert!(system_links.contains(&format!("/alerts/{}", enc(&veto)).as_str()), "{system_links:?}");
    assert!(system_links.contains(&package.as_str()), "{package} in {system_links:?}");
    // The period's alerts a page at a time: the second record alone on page 1 of pages of
    // one is the second row of the full list, with links to the newer pages and the older one.
    let total: usize = text.split("Alerts of the period (").nth(1).and_then(|t| t.split(')').next()).unwrap().parse().unwrap();
    let rows = |p: &Value| p["alert_rows"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect::<Vec<_>>();
    let all = rows(system);
    assert!(total >= 2 && all.len() == total.min(100), "{total} alerts, {} rows: {text}", all.len());
    let second = page(&report, "system-alerts-1");
    let text = second["text"].as_str().unwrap();
    assert!(text.contains(&format!("Records 2–2 of {total}, newest first.")), "{text}");
    assert_eq!(rows(second), [all[1].clone()], "page 1 of pages of one is the list's second row");
    let to = |page: usize| format!("/systems/sys-a?days=30&alerts_page={page}&alerts_per_page=1#alerts-of-the-period");
    assert!(links(second).contains(&to(0).as_str()) && (total == 2 || links(second).contains(&to(2).as_str())), "{second}");
    let past = page(&report, "system-alerts-past");
    assert!(past["text"].as_str().unwrap().contains("Past the last record.") && links(past).contains(&to(total - 1).as_str()), "{past}");
    // The veto's page: its history, the window it fired on, and the runs behind it.
    let alert = page(&report, "alert-veto");
    let text = alert["text"].as_str().unwrap();
    assert!(text.contains("History") && text.contains("firing") && text.contains("unsafe_action_rate"), "{text}");
    assert!(text.contains("runs with observations of the metric in the window, the most unsafe first"), "{text}");
    assert!(links(alert).iter().filter(|l| l.starts_with("/runs/sys-a-")).count() >= 1, "{alert}");
    // The incident's page links its run at the step.
    let incident_page = page(&report, "alert-incident");
    let want = format!("/runs/{}#step-{}", enc(incident_run), incident["step"]);
    assert!(links(incident_page).contains(&want.as_str()), "{want} in {:?}", links(incident_page));
    // The two-agent run: handoffs drawn and said.
    let run = page(&report, "run-two-agents");
    assert!(run["handoffs"].as_u64().unwrap() >= 1, "{run}");
    assert!(run["timeline_desc"].as_str().unwrap().contains("Handoffs: "), "{run}");
}

/// Runs `check_pages.cjs` with the installed playwright-core and axe-core; fails with what to
/// install when they are missing.
fn check_pages(pages: &Value) -> Value {
    let root = repo_root();
    let modules = root.join(".octant/node/node_modules");
    assert!(
        modules.join("playwright-core").is_dir() && modules.join("axe-core").is_dir(),
        "playwright-core and axe-core are not installed in {}: run scripts/setup.sh",
        modules.display()
    );
    assert!(
        Path::new("/usr/bin/chromium").exists() || std::env::var_os("OCTANT_CHROMIUM").is_some(),
        "chromium is not installed: run scripts/setup.sh"
    );
    let out = std::process::Command::new("node")
        .arg(root.join("integration-tests/web/check_pages.cjs"))
        .arg(pages.to_string())
        .env("NODE_PATH", &modules)
        .output()
        .expect("node runs (Node.js is required for the browser tests)");
    assert!(out.status.success(), "check_pages.cjs failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}
