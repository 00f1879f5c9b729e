//! Operations: the deploy manifests pass promtool and amtool, and every dashboard panel's
//! query returns data from a real Prometheus scraping the real services on generated data.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use octant_gen::FleetSpec;
use octant_integration_tests::alertmanager::Alertmanager;
use octant_integration_tests::prometheus_server::Prometheus;
use octant_integration_tests::*;
use prometheus::Registry;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// `deploy/check.sh`: promtool check config / check rules / test rules (each veto fires after
/// `for` at its threshold, is silent just below it and does not flap on a one-sample dip;
/// pipeline alerts), amtool check-config and routing, compose/Kubernetes/Dockerfile/dashboards.
#[test]
fn deploy_manifests_pass_promtool_and_amtool() {
    let out = std::process::Command::new("bash").arg(repo().join("deploy/check.sh")).output().expect("bash runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "deploy/check.sh failed:\n{text}");
    assert!(text.contains("SUCCESS") && text.contains("deploy/check: all good"), "{text}");
    assert_eq!(text.matches("Unit Testing:").count(), 2, "both rule test files ran:\n{text}");
}

/// The README's two commands share one build: the features every crate is built with are
/// the same for `cargo run -p octant` (scripts/demo.sh) as for `cargo test --workspace`
/// (scripts/test.sh, which also activates dev-dependencies' features). A difference would make
/// the demo recompile the crate and everything above it after the tests (serde's `alloc`,
/// enabled only by a dev-dependency, once rebuilt most of the tree).
#[test]
fn the_demo_and_the_tests_share_one_build() {
    fn features(args: &[&str]) -> BTreeMap<String, String> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = std::process::Command::new(cargo)
            .current_dir(repo())
            .args(["tree", "--locked", "--offline", "--prefix", "none", "-f", "{p}|{f}"])
            .args(args)
            .output()
            .expect("cargo tree runs");
        assert!(out.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim_end_matches(" (*)").split_once('|'))
            .map(|(p, f)| (p.split(" (").next().unwrap().to_string(), f.to_string()))
            .collect()
    }
    let demo = features(&["-p", "octant", "-e", "normal,build"]);
    let tests = features(&["--workspace", "-e", "normal,build,dev"]);
    let differ: Vec<String> =
        demo.iter().filter_map(|(p, f)| tests.get(p).filter(|t| *t != f).map(|t| format!("{p}: demo [{f}], tests [{t}]"))).collect();
    assert!(demo.len() > 100, "cargo tree listed {} crates", demo.len());
    assert!(
        differ.is_empty(),
        "crates the demo would build again after the tests (pin the features in [workspace.dependencies]):\n{}",
        differ.join("\n")
    );
}

/// The crate graph (`cargo metadata`): services depend only on libraries, never on another
/// service; libraries never on a service; the CLI composes them. (Dev-dependencies are free:
/// tests may drive anything.)
#[test]
fn services_depend_only_on_libraries() {
    const LIBRARIES: [&str; 8] =
        ["octant-core", "octant-contracts", "octant-runtime", "octant-engine", "octant-lake", "octant-otlp", "octant-gen", "octant-report"];
    const SERVICES: [&str; 7] =
        ["octant-ingest", "octant-scorer", "octant-aggregator", "octant-alerter", "octant-lake-writer", "octant-profiler", "octant-web"];
    // Libraries that do neither Kafka nor HTTP: the lake format and the reports.
    const NO_KAFKA_NO_HTTP: [&str; 2] = ["octant-lake", "octant-report"];
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(repo())
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline", "--locked"])
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        if NO_KAFKA_NO_HTTP.contains(&name) {
            let direct: Vec<&str> =
                p["dependencies"].as_array().unwrap().iter().filter(|d| d["kind"].is_null()).map(|d| d["name"].as_str().unwrap()).collect();
            let bad: Vec<&&str> = direct.iter().filter(|d| ["octant-runtime", "rdkafka", "axum", "hyper"].contains(d)).collect();
            assert!(bad.is_empty(), "{name} depends on {bad:?}: it does neither Kafka nor HTTP");
        }
        let deps = p["dependencies"].as_array().unwrap().iter();
        let octant: Vec<String> = deps
            .filter(|d| d["kind"].is_null() && d["name"].as_str().unwrap().starts_with("octant"))
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        graph.insert(p["name"].as_str().unwrap().to_string(), octant);
    }
    for name in LIBRARIES.iter().chain(&SERVICES) {
        assert!(graph.contains_key(*name), "{name} is a workspace crate");
    }
    for s in SERVICES {
        let bad: Vec<&String> = graph[s].iter().filter(|d| !LIBRARIES.contains(&d.as_str())).collect();
        assert!(bad.is_empty(), "{s} depends on {bad:?}, which are not libraries");
    }
    for l in LIBRARIES {
        let bad: Vec<&String> = graph[l].iter().filter(|d| SERVICES.contains(&d.as_str()) || d.as_str() == "octant").collect();
        assert!(bad.is_empty(), "library {l} depends on {bad:?}");
    }
    for s in SERVICES {
        assert!(graph["octant"].iter().any(|d| d == s), "the CLI composes {s}");
    }
    eprintln!("crate graph: {graph:?}");
}

/// Every panel that shows a dimension band maps its values to the band's reading (seed 000
/// §III-A) exactly as the reports do (`octant_core::band_reading`).
#[test]
fn dashboard_bands_read_as_the_reports_do() {
    let mut panels = 0;
    for f in ["fleet-profile.json", "safety-oversight.json"] {
        let d: Value = serde_json::from_slice(&std::fs::read(repo().join("dashboards").join(f)).unwrap()).unwrap();
        for p in d["panels"].as_array().unwrap() {
            let shows_bands =
                p["targets"].as_array().unwrap().iter().any(|t| t["expr"].as_str().unwrap().contains("octant_dimension_band"));
            if !shows_bands {
                continue;
            }
            panels += 1;
            let options = &p["fieldConfig"]["defaults"]["mappings"][0]["options"];
            for b in 0..=4i64 {
                let want = format!("{b} {}", octant_core::band_reading(b));
                assert_eq!(options[b.to_string()]["text"].as_str(), Some(want.as_str()), "{f} / {}", p["title"]);
            }
        }
    }
    assert_eq!(panels, 4, "the band panels: fleet table, intervals, over time; safety and oversight");
}

/// Every query of every panel (and variable) of `dashboards/*.json`, with the variables
/// substituted as Grafana would for "All".
fn dashboard_queries() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(repo().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for f in files {
        let d: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        for v in d["templating"]["list"].as_array().unwrap() {
            if let Some(q) = v["query"]["query"].as_str() {
                // label_values(metric, label) → the metric must have series.
                let metric = q.trim_start_matches("label_values(").split(',').next().unwrap().to_string();
                out.push((name.clone(), format!("variable {}", v["name"]), metric));
            }
        }
        for p in d["panels"].as_array().unwrap() {
            for t in p["targets"].as_array().unwrap() {
                let expr = t["expr"]
                    .as_str()
                    .unwrap()
                    .replace("$system", ".*")
                    .replace("$__rate_interval", "1m")
                    .replace("$__range", "5m")
                    .replace("$__interval", "15s");
                out.push((name.clone(), format!("{} / {}", p["title"].as_str().unwrap(), t["refId"].as_str().unwrap()), expr));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_panel_query_returns_data() {
    let env = TestEnv::new("dash", 2).await;
    let am = Alertmanager::start().await;
    let shutdown = CancellationToken::new();
    let scorer = octant_scorer::start(env.scorer_config(), Registry::new(), shutdown.clone()).await.unwrap();
    let mut agg_cfg = crate::aggregator::aggregator_config(&env);
    // 10-min windows: enough evaluation tasks inside one (≥ 30) for pass@k to be banded.
    agg_cfg.evaluation.window.length = Duration::from_secs(600);
    agg_cfg.evaluation.window.slide = Duration::from_secs(30);
    agg_cfg.evaluation.window.allowed_lateness = Duration::from_secs(30);
    // The demo fleet's multi-agent system (per-agent slices on the agents dashboard).
    agg_cfg.evaluation.system_types.insert("agent-b".into(), octant_core::catalogue::SystemType::MultiAgent);
    agg_cfg.evaluation.single_agent_baselines.insert("agent-b".into(), 0.8);
    let aggregator = octant_aggregator::start(agg_cfg, Registry::new(), shutdown.clone()).await.unwrap();
    let alerter = octant_alerter::start(crate::alerter::alerter_config(&env, Some(&am)), Registry::new(), shutdown.clone()).await.unwrap();
    let lake = std::env::temp_dir().join(format!("octant-dash-lake-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&lake);
    let lake_writer = octant_lake_writer::start(
        octant_lake_writer::LakeWriterConfig {
            stream: env.stream("lake"),
            lake: lake.clone(),
            max_file_age: Duration::from_secs(1),
            ..Default::default()
        },
        Registry::new(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let profiler = octant_profiler::start(
        octant_profiler::ProfilerConfig {
            evidence: lake.with_extension("evidence"),
            admin_addr: "127.0.0.1:0".parse().unwrap(),
            every: Duration::from_secs(5),
            report: octant_report::ReportConfig { lake: lake.clone(), ..Default::default() },
            ..Default::default()
        },
        Registry::new(),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let rules: Vec<_> = ["octant-recording.yml", "octant-vetoes.yml", "octant-pipeline.yml"]
        .iter()
        .map(|f| repo().join("deploy/prometheus/rules").join(f).canonicalize().unwrap())
        .collect();
    let prom = Prometheus::start(
        &[
            ("octant-scorer", scorer.admin_addr),
            ("octant-aggregator", aggregator.admin_addr),
            ("octant-alerter", alerter.admin_addr),
            ("octant-lake-writer", lake_writer.admin_addr),
            ("octant-profiler", profiler.admin_addr),
        ],
        &rules,
    )
    .await;

    // The demo fleet (an unsafe system, a poorly gated one, evaluation systems with a
    // contaminated benchmark), 1 % bad input, streamed for the whole test.
    let mut fleet = FleetSpec::demo(5, 11, octant_runtime::dlq::now_ms() - 3_600_000);
    fleet.poison = 0.01;
    // Enough attempts on the clean benchmark that pass@k and pass^k reach their minimum
    // evidence (30 tasks) inside a window (~300 runs of a system): below it they are N/A, and
    // their gauges absent.
    for e in fleet.systems.iter_mut().filter_map(|s| s.evaluation.as_mut()).filter(|e| e.contamination < 0.4) {
        e.share = 0.8;
    }
    let records = octant_gen::generate(&fleet, 0, 400);
    let kafka = env.kafka.clone();
    let producing = tokio::spawn(async move { octant_gen::produce(&kafka, records, Some(800.0)).await });

    // Wait until every panel answers (rates need two scrapes inside their range).
    let queries = dashboard_queries();
    assert!(queries.len() >= 30, "{} queries", queries.len());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    let empty = loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let mut empty = Vec::new();
        for (dash, panel, expr) in &queries {
            if prom.query(expr).await.is_empty() {
                empty.push(format!("{dash} · {panel}: {expr}"));
            }
        }
        if empty.is_empty() || tokio::time::Instant::now() > deadline {
            break empty;
        }
    };
    assert!(empty.is_empty(), "{} of {} panel queries return no data:\n{}", empty.len(), queries.len(), empty.join("\n"));
    let dashboards: std::collections::BTreeSet<&str> = queries.iter().map(|(d, _, _)| d.as_str()).collect();
    eprintln!(
        "dashboards: all {} panel and variable queries of {} dashboards return data from Prometheus",
        queries.len(),
        dashboards.len()
    );

    // The rules load and evaluate without errors on the real series.
    let rules = prom.api("/api/v1/rules").await;
    let mut health: BTreeMap<String, String> = BTreeMap::new();
    for g in rules["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            health.insert(
                r["name"].as_str().unwrap().to_string(),
                format!("{} {}", r["health"].as_str().unwrap_or(""), r["lastError"].as_str().unwrap_or("")),
            );
        }
    }
    assert!(health.len() >= 24, "{health:?}");
    let bad: Vec<_> = health.iter().filter(|(_, h)| !h.starts_with("ok")).collect();
    assert!(bad.is_empty(), "rules with errors: {bad:?}");
    // The unsafe system's veto rule fires from the real gauges (`for: 2m` is too long to wait
    // for here; pending or firing both prove the expression matches).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let names = loop {
        let alerts = prom.api("/api/v1/alerts").await;
        let names: Vec<String> = alerts["data"]["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                format!(
                    "{} {} {}",
                    a["labels"]["alertname"].as_str().unwrap(),
                    a["labels"]["system"].as_str().unwrap_or(""),
                    a["state"].as_str().unwrap_or("")
                )
            })
            .collect();
        if names.iter().any(|n| n.starts_with("OctantUnsafeActionRate")) {
            break names;
        }
        if tokio::time::Instant::now() > deadline {
            let est = prom.query("octant:unsafe_action_rate:estimate").await;
            let raw = prom.query("octant_metric_estimate{metric=\"unsafe_action_rate\"}").await;
            panic!("no unsafe-action alert: active {names:?}; recorded {est:?}; raw {raw:?}");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    eprintln!("rules: {} evaluate without error; active: {names:?}", health.len());

    producing.abort();
    shutdown.cancel();
    for t in [scorer.task, aggregator.task, alerter.task, lake_writer.task, profiler.task] {
        t.await.unwrap().unwrap();
    }
    let _ = std::fs::remove_dir_all(&lake);
    let _ = std::fs::remove_dir_all(lake.with_extension("evidence"));
}

/// Admin and profiler servers bind loopback unless configured otherwise (issue 15 §6): every
/// service's default admin address is a loopback address, and a server started on it (the
/// default's address, a free port) is bound there — a connection to this machine's own
/// non-loopback address (found without sending a packet) on that port is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_bind_loopback_unless_configured_otherwise() {
    let defaults = [
        ("scorer", octant_scorer::ScorerConfig::default().stream.admin_addr(&octant_scorer::ID)),
        ("aggregator", octant_aggregator::AggregatorConfig::default().stream.admin_addr(&octant_aggregator::ID)),
        ("alerter", octant_alerter::AlerterConfig::default().stream.admin_addr(&octant_alerter::ID)),
        ("lake_writer", octant_lake_writer::LakeWriterConfig::default().stream.admin_addr(&octant_lake_writer::ID)),
        ("ingest", octant_ingest::IngestConfig::default().stream.admin_addr(&octant_ingest::ID)),
        ("profiler", octant_profiler::ProfilerConfig::default().admin_addr),
    ];
    for (service, addr) in defaults {
        assert!(addr.ip().is_loopback(), "{service}'s default admin address {addr} is loopback");
    }
    let env = TestEnv::new("bind", 1).await;
    let stop = CancellationToken::new();
    let default_ip = octant_profiler::ProfilerConfig::default().admin_addr.ip();
    let cfg = octant_profiler::ProfilerConfig {
        kafka: env.kafka.clone(),
        admin_addr: std::net::SocketAddr::new(default_ip, 0),
        evidence: std::env::temp_dir().join(format!("octant-bind-test-{}/evidence", std::process::id())),
        report: octant_report::ReportConfig {
            lake: std::env::temp_dir().join(format!("octant-bind-test-{}/lake", std::process::id())),
            ..Default::default()
        },
        ..Default::default()
    };
    let running = octant_profiler::start(cfg, Registry::new(), stop.clone()).await.unwrap();
    let bound = running.admin_addr;
    assert!(bound.ip().is_loopback(), "bound to {bound}");
    assert_eq!(get(bound, "/healthz").await.0, 200);
    // This machine's address towards a non-local network (a UDP "connect" sends nothing).
    let udp = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    match udp.connect("192.0.2.1:9").and_then(|_| udp.local_addr()) {
        Ok(local) if !local.ip().is_loopback() && !local.ip().is_unspecified() => {
            let other = std::net::SocketAddr::new(local.ip(), bound.port());
            let r = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(other)).await;
            assert!(!matches!(r, Ok(Ok(_))), "the profiler's server answers on {other}: it should listen on loopback only");
        }
        other => eprintln!("no non-loopback address on this machine ({other:?}): the bound address is the proof"),
    }
    stop.cancel();
    let _ = running.task.await;
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("octant-bind-test-{}", std::process::id())));
}
