//! The aggregator stage in-process (`octant_runtime::pipeline::Driver`, no broker): golden
//! files (observations in → windows and profiles out), bad input, a restart from the commit
//! point, and the gauges of silent systems. Against the real broker:
//! `integration-tests/tests/aggregator.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use octant_contracts::codec::{to_json, to_single_object};
use octant_contracts::{DeadLetter, DimensionProfile, MetricWindow, Source};
use octant_runtime::metrics::samples;
use octant_runtime::pipeline::Driver;

use super::*;

/// 2025-11-30T08:00:00Z, an hour boundary.
const T0: i64 = 1_764_489_600_000;

/// Tumbling one-hour windows (one window per series per hour: readable golden files).
fn config() -> AggregatorConfig {
    let mut c = production_only();
    c.evaluation.window.tumbling = true;
    c.evaluation.window.length = Duration::from_secs(3600);
    // golden-bot is declared against a single-agent baseline: its RCC windows are golden too.
    c.evaluation.single_agent_baselines.insert("golden-bot".into(), 0.9);
    c
}

/// The defaults, with the production topic as the only upstream: [`watermark`] speaks for it.
fn production_only() -> AggregatorConfig {
    AggregatorConfig { upstream_topics: vec![topics::TRAJECTORIES_PRODUCTION.into()], ..AggregatorConfig::default() }
}

fn watermark(t: i64) -> Vec<u8> {
    to_single_object(&Watermark {
        service: "scorer".into(),
        source_topic: "octant.trajectories.production".into(),
        source_partition: 0,
        source_partitions: 1,
        watermark: Some(t),
        idle: false,
        produced_at: 0,
    })
    .unwrap()
}

/// What the stage published, split by record type.
fn published(records: &[OutRecord]) -> (Vec<MetricWindow>, Vec<DimensionProfile>, Vec<DeadLetter>) {
    let d = Decoder::new();
    let (mut windows, mut profiles, mut dead) = (Vec::new(), Vec::new(), Vec::new());
    for r in records {
        let (_, known, _) = d.writer_of(&r.payload).unwrap();
        match known.unwrap().full_name.as_str() {
            n if n == MetricWindow::FULL_NAME => windows.push(d.decode(&r.payload).unwrap()),
            n if n == DimensionProfile::FULL_NAME => profiles.push(d.decode(&r.payload).unwrap()),
            n if n == DeadLetter::FULL_NAME => dead.push(d.decode(&r.payload).unwrap()),
            other => panic!("unexpected {other}"),
        }
    }
    (windows, profiles, dead)
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn golden_inputs() -> Vec<(String, Vec<Observation>)> {
    octant_runtime::golden::inputs(&golden_dir())
}

/// `golden/inputs/*.json` (observations, made by `golden/make_inputs.py`), then a watermark
/// past their hour → exactly `golden/expected/*.json`: every window (estimate, bootstrap
/// interval, band, N/A reason, veto state and evidence) and every profile, sorted by id.
/// Inputs go half as Avro single-object records and half as JSON. `OCTANT_BLESS_GOLDEN=1`
/// rewrites the expected files; review the diff.
#[test]
fn golden_files() {
    let bless = std::env::var_os("OCTANT_BLESS_GOLDEN").is_some();
    for (name, observations) in golden_inputs() {
        let registry = Registry::new();
        let stage = AggregatorStage::new(&config(), &registry);
        let topic = stage.config.stream.kafka.topic(topics::OBSERVATIONS);
        let mut d = Driver::new(stage);
        for (i, o) in observations.iter().enumerate() {
            let payload = if i % 2 == 0 { to_single_object(o).unwrap() } else { to_json(o) };
            let out = d.send(&topic, 0, Some(o.system_id.as_bytes()), &payload).unwrap();
            assert!(out.is_empty(), "{name}: nothing published before the watermark");
        }
        d.send(&topic, 0, None, &watermark(T0 + 2 * 3600 * 1000)).unwrap();
        let (mut windows, mut profiles, dead) = published(&d.produced);
        assert!(dead.is_empty(), "{name}: nothing dead-lettered");
        windows.sort_by(|a, b| a.window_id.cmp(&b.window_id));
        profiles.sort_by(|a, b| a.profile_id.cmp(&b.profile_id));
        let got = serde_json::json!({"windows": windows, "profiles": profiles});
        let path = golden_dir().join("expected").join(format!("{name}.json"));
        if bless {
            std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
            continue;
        }
        let want: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing {}", path.display()))).unwrap();
        // Compared as JSON values: a difference names the window.
        for (g, w) in got["windows"].as_array().unwrap().iter().zip(want["windows"].as_array().unwrap()) {
            assert_eq!(g, w, "{name}: window {} differs from {}", w["window_id"], path.display());
        }
        assert_eq!(got, want, "{name}: output differs from {}", path.display());
        let m = samples(&registry);
        assert_eq!(m.get("octant_aggregator_windows_emitted_total"), Some(&(windows.len() as f64)), "{name}");
        assert_eq!(m.get("octant_aggregator_profiles_emitted_total"), Some(&(profiles.len() as f64)), "{name}");
    }
}

/// What the golden files say, said plainly: the unsafe-action rate of `production` (one step in
/// two) is a breached, confirmed veto that makes the system unsuitable; the contaminated benchmark of
/// `evaluation` is breached; the small system is N/A, never 0, and carries no veto state.
#[test]
fn golden_verdicts() {
    let dir = golden_dir().join("expected");
    let read = |n: &str| -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(dir.join(n)).unwrap()).unwrap() };
    let (production, evaluation) = (read("production.json"), read("evaluation.json"));
    let find = |v: &serde_json::Value, system: &str, metric: &str, benchmark: Option<&str>| -> serde_json::Value {
        let mut windows = v["windows"].as_array().unwrap().iter();
        windows.find(|w| w["system_id"] == system && w["metric"] == metric && w["benchmark"].as_str() == benchmark).cloned().unwrap()
    };
    let window = |v: &serde_json::Value, system: &str, metric: &str| find(v, system, metric, None);
    let unsafe_ = window(&production, "golden-bot", "unsafe_action_rate");
    assert_eq!(unsafe_["veto_state"], "confirmed", "{unsafe_:#}");
    assert!(unsafe_["evidence_log_e"].as_f64().unwrap() >= (1.0f64 / 1e-3).ln());
    assert_eq!(production["profiles"][0]["unsuitable"], true);
    let contamination = find(&evaluation, "coder", "contamination", Some("swe-mini"));
    assert!(["breached", "confirmed"].contains(&contamination["veto_state"].as_str().unwrap()), "{contamination:#}");
    let void = find(&evaluation, "coder", "pass_at_1", Some("swe-mini"));
    assert!(void["na_reason"].as_str().unwrap().starts_with("void"), "a contaminated benchmark voids its constructs: {void:#}");
    assert_eq!(find(&evaluation, "coder", "contamination", Some("swe-fresh"))["veto_state"], "clear");
    for w in evaluation["windows"].as_array().unwrap().iter().filter(|w| w["system_id"] == "tiny-bot") {
        assert!(w["na_reason"].as_str().unwrap().starts_with("insufficient evidence"), "{w:#}");
        assert!(w["band"].is_null(), "N/A has no band: {w:#}");
        assert!(w["veto_state"].is_null(), "N/A carries no veto state: {w:#}");
    }
    let pass2 = find(&evaluation, "coder", "pass_at_2", Some("swe-fresh"));
    assert_eq!(pass2["units"], 30, "pass@k is derived per task: {pass2:#}");
    assert!(pass2["estimate"].as_f64().is_some() && pass2["band"].as_i64().is_some(), "{pass2:#}");
}

/// Bad input: bytes that are no observation, an unknown metric, a derived metric sent as an
/// observation, and an observation older than published windows each become one dead letter
/// with their class and source; duplicates are dropped and counted; the stream goes on.
#[test]
fn bad_input_is_dead_lettered_and_the_stream_goes_on() {
    let registry = Registry::new();
    let stage = AggregatorStage::new(&config(), &registry);
    let topic = stage.config.stream.kafka.topic(topics::OBSERVATIONS);
    let mut d = Driver::new(stage);
    let good = obs("s", 1, T0 + 1000);
    let mut unknown = obs("s", 2, T0 + 2000);
    unknown.metric = "vibes".into();
    let mut derived = obs("s", 3, T0 + 3000);
    derived.metric = octant_core::catalogue::ids::PASS_AT_2.into();
    let payloads = [
        (to_single_object(&good).unwrap(), None),
        (b"garbage".to_vec(), Some("undecodable")),
        (to_single_object(&unknown).unwrap(), Some("unknown_metric")),
        (to_single_object(&derived).unwrap(), Some("derived_metric")),
        (to_single_object(&good).unwrap(), None), // a duplicate
        (watermark(T0 + 2 * 3600 * 1000), None),
        (to_single_object(&obs("s", 4, T0 + 5000)).unwrap(), Some("late_observation")),
        (to_single_object(&obs("s", 5, T0 + 3 * 3600 * 1000)).unwrap(), None),
        // An evaluation result as old: an imported harness log's, counted as historical.
        (to_single_object(&Observation { source: Source::Evaluation, ..obs("s", 6, T0 + 5000) }).unwrap(), None),
        // A re-run's unit: no window (it would weigh its original twice), no dead letter.
        (to_single_object(&Observation { rerun_of: Some("s-run-5".into()), ..obs("s", 7, T0 + 3 * 3600 * 1000 + 1) }).unwrap(), None),
    ];
    for (offset, (payload, class)) in payloads.iter().enumerate() {
        let out = d.send(&topic, 0, Some(b"s"), payload).unwrap();
        let (_, _, dead) = published(&out);
        match class {
            None => assert!(dead.is_empty(), "offset {offset}: accepted: {dead:?}"),
            Some(class) => {
                assert_eq!(dead.len(), 1, "offset {offset}");
                let dl = &dead[0];
                assert_eq!((dl.error_class.as_str(), dl.offset, dl.source_topic.as_str()), (*class, offset as i64, topic.as_str()));
                assert_eq!(&dl.payload, payload, "verbatim");
                assert!(!dl.error_message.is_empty());
            }
        }
    }
    let m = samples(&registry);
    for (outcome, n) in [
        ("accepted", 2.0),
        ("duplicate", 1.0),
        ("late", 1.0),
        ("historical", 1.0),
        ("rerun", 1.0),
        ("unknown", 1.0),
        ("derived", 1.0),
        ("undecodable", 1.0),
    ] {
        assert_eq!(m.get(&format!("octant_aggregator_observations_total{{outcome=\"{outcome}\"}}")), Some(&n), "{outcome}");
    }
    assert_eq!(octant_runtime::metrics::total(&m, "octant_aggregator_dead_letters_total"), 4.0);
}

/// A new owner resuming from the commit point (with its window frontier) re-emits exactly the
/// windows a run without the restart emits from there on: same ids, same values.
#[test]
fn a_restart_from_the_commit_point_emits_the_same_windows() {
    let c = production_only(); // sliding: 1 h every minute
    let topic = c.stream.kafka.topic(topics::OBSERVATIONS);
    let tp = TopicPartition::new(topic.clone(), 0);
    // Observations every 15 s for 2 h, a watermark every minute.
    let mut input = Vec::new();
    for i in 0..480 {
        let t = T0 + i * 15_000;
        input.push(to_single_object(&obs("s", i, t)).unwrap());
        if i % 4 == 3 {
            input.push(watermark(t));
        }
    }
    let run = |from: usize, companion: Option<i64>, stop: Option<usize>| {
        let mut d = Driver::new(AggregatorStage::new(&c, &Registry::new()));
        if from > 0 || companion.is_some() {
            d.resume(tp.clone(), from as i64, companion);
        }
        let mut by_offset = Vec::new();
        for (i, p) in input.iter().enumerate().skip(from) {
            by_offset.push((i, d.send(&topic, 0, None, p).unwrap()));
            if Some(i) == stop {
                return (by_offset, d.commit_points().get(&tp).copied());
            }
        }
        (by_offset, None)
    };
    let (clean, _) = run(0, None, None);
    let clean: BTreeMap<String, MetricWindow> = clean.iter().flat_map(|(_, r)| published(r).0).map(|w| (w.window_id.clone(), w)).collect();
    let (first, point) = run(0, None, Some(400));
    let point = point.expect("a commit point");
    assert!(point.offset < 400 && point.companion > 0, "replays from before the crash with the frontier: {point:?}");
    let (second, _) = run(point.offset as usize, Some(point.companion), None);
    let mut seen = BTreeSet::new();
    for (_, records) in first.iter().chain(&second) {
        for w in published(records).0 {
            assert_eq!(clean.get(&w.window_id), Some(&w), "a re-emitted window is identical");
            seen.insert(w.window_id);
        }
    }
    assert_eq!(seen.len(), clean.len(), "every window is emitted by one owner or the other");
}

fn stage(registry: &Registry) -> AggregatorStage {
    AggregatorStage::new(&production_only(), registry)
}

fn obs(system: &str, i: i64, t: i64) -> Observation {
    Observation {
        observation_id: format!("{system}/{i}"),
        metric: "unsafe_action_rate".into(),
        system_id: system.into(),
        system_version: "1".into(),
        source: Source::Production,
        agent_id: None,
        run_id: format!("{system}-run-{i}"),
        task_id: None,
        attempt: None,
        groups: vec![],
        benchmark: None,
        task_family: None,
        cluster_id: format!("{system}-run-{i}"),
        step: Some(1),
        event_time: t,
        value: (i % 4 == 0) as u8 as f64,
        weight: 1.0,
        confidence: None,
        provenance: None,
        rerun_of: None,
    }
}

fn systems_with(registry: &Registry, name: &str) -> std::collections::BTreeSet<String> {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| {
            f.get_metric()
                .iter()
                .flat_map(|m| m.get_label().iter().filter(|l| l.name() == "system").map(|l| l.value().to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A system that stops reporting leaves the gauges two window lengths later.
#[test]
fn gauges_of_silent_systems_expire() {
    let registry = Registry::new();
    let st = stage(&registry);
    let mut w = Windows::new(st.config.evaluation.window_spec(), st.config.evaluation.bootstrap_spec(), None);
    const T0: i64 = 1_764_489_600_000;
    let mut offset = 0;
    let mut feed = |w: &mut Windows, o: &Observation, st: &AggregatorStage| {
        w.add(o, offset);
        for e in w.advance_to(o.event_time, offset) {
            st.publish_gauges(&verdicts::build(&e, &st.config.evaluation));
        }
        offset += 1;
    };
    // Both systems for 70 minutes, then only "new" for 4 more hours ("old" is in windows up
    // to 130 min, and expires two window lengths after that).
    for i in 0..(70 * 4) {
        feed(&mut w, &obs("old", i, T0 + i * 15_000), &st);
        feed(&mut w, &obs("new", i, T0 + i * 15_000 + 1), &st);
    }
    assert!(systems_with(&registry, "octant_metric_estimate").contains("old"));
    for i in (70 * 4)..(310 * 4) {
        feed(&mut w, &obs("new", i, T0 + i * 15_000 + 1), &st);
    }
    for name in ["octant_metric_estimate", "octant_metric_units", "octant_dimension_band", "octant_veto_state", "octant_system_unsuitable"]
    {
        assert_eq!(systems_with(&registry, name), ["new".to_string()].into(), "{name}");
    }
}
