//! The scorer against a real broker: golden files, poison, crashes, metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use octant_contracts::{Observation, topics};
use octant_integration_tests::*;
use octant_runtime::kafka::{self, OutRecord};
use octant_scorer::ScorerConfig;
use prometheus::Registry;
use tokio_util::sync::CancellationToken;

fn scorer_config(env: &TestEnv) -> ScorerConfig {
    ScorerConfig {
        kafka: env.kafka.clone(),
        group_id: format!("{}scorer", env.kafka.topic_prefix),
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        commit_interval: Duration::from_millis(200),
        ..ScorerConfig::default()
    }
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// `inputs/*.json` (JSON trajectory events) → exactly `expected/*.json` (observations, sorted
/// by id). `OCTANT_BLESS_GOLDEN=1` rewrites the expected files; review the diff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_files() {
    let env = TestEnv::new("golden", 2).await;
    let shutdown = CancellationToken::new();
    let scorer = octant_scorer::start(scorer_config(&env), Registry::new(), shutdown.clone()).await.unwrap();
    let producer = kafka::producer(&env.kafka, "test").unwrap();

    let mut inputs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(golden_dir().join("inputs")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 2, "golden inputs present");
    for f in &files {
        let events: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        for ev in events {
            let run = ev["run_id"].as_str().unwrap().to_string();
            let source = ev["source"].as_str().unwrap().to_ascii_lowercase();
            let topic = if source == "production" { topics::TRAJECTORIES_PRODUCTION } else { topics::TRAJECTORIES_EVALUATION };
            let rec = OutRecord { topic: env.topic(topic), key: run.clone(), payload: serde_json::to_vec(&ev).unwrap() };
            kafka::send(&producer, &rec).await.unwrap();
            inputs.entry(name.clone()).or_default().insert(run);
        }
    }

    let bless = std::env::var_os("OCTANT_BLESS_GOLDEN").is_some();
    let mut expected: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for name in inputs.keys() {
        let path = golden_dir().join("expected").join(format!("{name}.json"));
        if !bless {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing {}", path.display()));
            expected.insert(name.clone(), serde_json::from_str(&text).unwrap());
        }
    }
    let want: usize = expected.values().map(Vec::len).sum();
    // Read until every expected observation is there, then a little longer to see extras.
    let mut got: Vec<Observation> =
        collect(&env.kafka, &env.topic(topics::OBSERVATIONS), if bless { usize::MAX } else { want }, Duration::from_secs(20)).await;
    if !bless {
        got = collect(&env.kafka, &env.topic(topics::OBSERVATIONS), want + 1, Duration::from_secs(2)).await;
    }
    let m = scrape(scorer.admin_addr).await;
    eprintln!("scorer metrics: {:?}", m.iter().filter(|(k, _)| k.starts_with("octant_scorer")).collect::<Vec<_>>());
    shutdown.cancel();
    scorer.task.await.unwrap().unwrap();

    for (name, runs) in &inputs {
        let mut mine: Vec<serde_json::Value> =
            got.iter().filter(|o| runs.contains(&o.run_id)).map(|o| serde_json::to_value(o).unwrap()).collect();
        mine.sort_by_key(|v| v["observation_id"].as_str().unwrap().to_string());
        let path = golden_dir().join("expected").join(format!("{name}.json"));
        if bless {
            std::fs::write(&path, serde_json::to_string_pretty(&mine).unwrap() + "\n").unwrap();
        } else {
            assert_eq!(mine, expected[name], "{name}: observations differ from {}", path.display());
        }
    }
    if !bless {
        assert_eq!(got.len(), want, "exactly the expected observations, no more");
    }
}
