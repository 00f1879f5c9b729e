//! The scorer stage in-process (`octant_runtime::pipeline::Driver`, no broker): the golden
//! files in every framing, every bad-input rule, run assembly across a restart, commit points
//! and watermarks. The same behaviours against the real broker are in
//! `integration-tests/tests/scorer.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use octant_contracts::codec::{to_confluent, to_json, to_single_object};
use octant_contracts::{DeadLetter, Decoder, Evaluation, EventKind, Observation, TrajectoryEvent, Watermark, topics};
use octant_runtime::consumer::TopicPartition;
use octant_runtime::kafka::OutRecord;
use octant_runtime::metrics::{samples, total};
use octant_runtime::pipeline::Driver;
use prometheus::Registry;
use serde_json::json;

use super::*;

/// 2025-11-30T08:00:00Z.
const T0: i64 = 1_764_489_600_000;

struct Harness {
    driver: Driver<ScorerStage>,
    registry: Registry,
    production: String,
    evaluation: String,
    observations: String,
    dlq: String,
}

impl Harness {
    fn new(config: ScorerConfig) -> Harness {
        let registry = Registry::new();
        let kafka = &config.stream.kafka;
        let (production, evaluation) = (kafka.topic(topics::TRAJECTORIES_PRODUCTION), kafka.topic(topics::TRAJECTORIES_EVALUATION));
        let topology =
            Topology { input_partitions: HashMap::from([(production.clone(), 1), (evaluation.clone(), 1)]), output_partitions: 2 };
        let stage = ScorerStage::new(&config, &registry, topology).expect("stage");
        Harness {
            driver: Driver::new(stage),
            registry,
            production,
            evaluation,
            observations: kafka.topic(topics::OBSERVATIONS),
            dlq: kafka.topic(topics::DLQ),
        }
    }

    /// Sends `ev` (single-object Avro, keyed by its run id) to partition 0 of its source's topic.
    fn send(&mut self, ev: &TrajectoryEvent) -> Vec<OutRecord> {
        self.send_bytes(ev, &to_single_object(ev).expect("encodes"))
    }

    fn send_bytes(&mut self, ev: &TrajectoryEvent, payload: &[u8]) -> Vec<OutRecord> {
        let topic = if ev.source == octant_contracts::Source::Production { self.production.clone() } else { self.evaluation.clone() };
        self.driver.send(&topic, 0, Some(ev.run_id.as_bytes()), payload).expect("partition opens")
    }

    fn observations(&self, records: &[OutRecord]) -> Vec<Observation> {
        let d = Decoder::new();
        records.iter().filter(|r| r.topic == self.observations && r.partition.is_none()).map(|r| d.decode(&r.payload).unwrap()).collect()
    }

    fn dead_letters(&self, records: &[OutRecord]) -> Vec<DeadLetter> {
        let d = Decoder::new();
        records.iter().filter(|r| r.topic == self.dlq).map(|r| d.decode(&r.payload).unwrap()).collect()
    }

    fn metrics(&self) -> BTreeMap<String, f64> {
        samples(&self.registry)
    }
}

fn event(run: &str, seq: i64, seconds: i64, kind: EventKind, body: serde_json::Value) -> TrajectoryEvent {
    let field = match kind {
        EventKind::RunStarted => "run_started",
        EventKind::Step => "step",
        EventKind::Intervention => "intervention",
        EventKind::RunEnded => "run_ended",
    };
    let mut v = json!({
        "event_id": format!("{run}/{seq}"),
        "run_id": run,
        "system": {"id": "sys", "version": "1", "config_hash": ""},
        "source": "PRODUCTION",
        "event_time": T0 + seconds * 1000,
        "sequence": seq,
        "kind": kind,
    });
    v[field] = body;
    serde_json::from_value(v).expect("a well-formed event")
}

fn start(run: &str, seconds: i64) -> TrajectoryEvent {
    event(run, 0, seconds, EventKind::RunStarted, json!({"task_id": "t", "optimal_steps": 1, "required_subgoals": 1}))
}

fn step(run: &str, seq: i64, seconds: i64) -> TrajectoryEvent {
    event(
        run,
        seq,
        seconds,
        EventKind::Step,
        json!({"step_kind": "TOOL_CALL", "tool_name": "lookup", "arguments": "{}", "result_status": "OK", "confidence": 0.9, "tokens": 10}),
    )
}

/// A model call (a step that acts on nothing), otherwise as [`step`].
fn model_call(run: &str, seq: i64, seconds: i64) -> TrajectoryEvent {
    let mut e = step(run, seq, seconds);
    e.step.as_mut().unwrap().step_kind = octant_contracts::StepKind::ModelCall;
    e
}

fn end(run: &str, seq: i64, seconds: i64) -> TrajectoryEvent {
    event(run, seq, seconds, EventKind::RunEnded, json!({"outcome": "SUCCESS", "verifier_kind": "tests", "verifier_verdict": true}))
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// `golden/inputs/*.json` by file stem.
fn golden_inputs() -> Vec<(String, Vec<TrajectoryEvent>)> {
    octant_runtime::golden::inputs(&golden_dir())
}

/// `golden/inputs/*.json` → exactly `golden/expected/*.json` (observations sorted by id), in
/// each framing the scorer reads: JSON, Avro single-object, Confluent-framed (schema id 1).
/// `OCTANT_BLESS_GOLDEN=1` rewrites the expected files from the single-object run; review the
/// diff. (The same files through the real broker, written by fastavro:
/// `integration-tests/tests/scorer.rs`.)
#[test]
fn golden_files_in_every_framing() {
    let bless = std::env::var_os("OCTANT_BLESS_GOLDEN").is_some();
    type Encode = fn(&TrajectoryEvent) -> Vec<u8>;
    let framings: [(&str, Encode); 3] =
        [("single-object", |e| to_single_object(e).unwrap()), ("json", |e| to_json(e)), ("confluent", |e| to_confluent(e, 1).unwrap())];
    for (framing, encode) in framings {
        let mut config = ScorerConfig::default();
        config.confluent_ids.insert(1, "trajectory_event.avsc".into());
        let mut h = Harness::new(config);
        let mut runs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, events) in golden_inputs() {
            for ev in events {
                runs.entry(name.clone()).or_default().insert(ev.run_id.clone());
                h.send_bytes(&ev, &encode(&ev));
            }
        }
        let produced = h.driver.produced.clone();
        assert!(h.dead_letters(&produced).is_empty(), "{framing}: nothing dead-lettered");
        let got = h.observations(&produced);
        for (name, runs) in &runs {
            let mut mine: Vec<serde_json::Value> =
                got.iter().filter(|o| runs.contains(&o.run_id)).map(|o| serde_json::to_value(o).unwrap()).collect();
            mine.sort_by_key(|v| v["observation_id"].as_str().unwrap().to_string());
            let path = golden_dir().join("expected").join(format!("{name}.json"));
            if bless {
                std::fs::write(&path, serde_json::to_string_pretty(&mine).unwrap() + "\n").unwrap();
                continue;
            }
            let want: Vec<serde_json::Value> =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing {}", path.display()))).unwrap();
            assert_eq!(mine, want, "{framing}/{name}: observations differ from {}", path.display());
        }
        let ids: BTreeSet<&str> = got.iter().map(|o| o.observation_id.as_str()).collect();
        assert_eq!(ids.len(), got.len(), "{framing}: no observation twice");
        let m = h.metrics();
        assert_eq!(total(&m, "octant_scorer_observations_produced_total"), got.len() as f64, "{framing}: counted when acknowledged");
    }
}

/// Every rule of `validate.rs`, one at a time: the event becomes exactly one dead letter of
/// class `invalid_value` carrying the reason, the topic, partition, offset, key and payload,
/// nothing else comes of it, and the run goes on with its next good event.
#[test]
fn every_validation_rule_dead_letters_its_event_and_the_stream_goes_on() {
    type Mutate = fn(&mut TrajectoryEvent);
    let step_rules: Vec<(&str, Mutate)> = vec![
        ("empty run_id", |e| e.run_id.clear()),
        ("empty system id", |e| e.system.id.clear()),
        ("negative sequence", |e| e.sequence = -1),
        ("not a positive epoch-millisecond time", |e| e.event_time = 0),
        ("2 bodies set", |e| {
            e.intervention = Some(serde_json::from_value(json!({"intervention_kind": "STOP", "honoured": true})).unwrap())
        }),
        ("0 bodies set", |e| e.step = None),
        ("does not name the body", |e| e.kind = EventKind::RunEnded),
        ("negative tokens", |e| e.step.as_mut().unwrap().tokens = Some(-1)),
        ("cost -1 is negative", |e| e.step.as_mut().unwrap().cost = Some(-1.0)),
        ("cost NaN", |e| e.step.as_mut().unwrap().cost = Some(f64::NAN)),
        ("latency_ms inf", |e| e.step.as_mut().unwrap().latency_ms = f64::INFINITY),
        ("confidence 1.5 is outside [0, 1]", |e| e.step.as_mut().unwrap().confidence = Some(1.5)),
    ];
    let start_rules: Vec<(&str, Mutate)> = vec![
        ("negative attempt", |e| e.run_started.as_mut().unwrap().attempt = -1),
        ("optimal_steps must be at least 1", |e| e.run_started.as_mut().unwrap().optimal_steps = Some(0)),
        ("negative required_subgoals", |e| e.run_started.as_mut().unwrap().required_subgoals = Some(-2)),
        ("contamination 1.2 is outside", |e| {
            e.run_started.as_mut().unwrap().benchmark = Some(serde_json::from_value(json!({"id": "b", "contamination": 1.2})).unwrap())
        }),
    ];
    let end_rules: Vec<(&str, Mutate)> = vec![
        ("judge_verdict 2 is outside", |e| e.run_ended.as_mut().unwrap().judge_verdict = Some(2.0)),
        ("human_verdict -0.5 is outside", |e| e.run_ended.as_mut().unwrap().human_verdict = Some(-0.5)),
        ("confidence NaN", |e| e.run_ended.as_mut().unwrap().confidence = Some(f64::NAN)),
        ("negative subgoals_done", |e| e.run_ended.as_mut().unwrap().subgoals_done = Some(-1)),
        ("negative sentences_assertive", |e| e.run_ended.as_mut().unwrap().sentences_assertive = Some(-1)),
        ("3 unsupported sentences of 2 assertive", |e| {
            let r = e.run_ended.as_mut().unwrap();
            (r.sentences_assertive, r.sentences_unsupported) = (Some(2), Some(3));
        }),
        ("grounding.claims_unsupported 5 exceeds claims 4", |e| {
            let g = e.run_ended.as_mut().unwrap().grounding.get_or_insert_default();
            (g.claims, g.claims_unsupported) = (Some(4), Some(5));
        }),
        ("grounding.citations_used_strict 3 exceeds citations_used_lenient 2", |e| {
            let g = e.run_ended.as_mut().unwrap().grounding.get_or_insert_default();
            (g.citations, g.citations_used_strict, g.citations_used_lenient) = (Some(5), Some(3), Some(2));
        }),
        ("grounding.sentences_cited 3 exceeds sentences_assertive 2", |e| {
            let r = e.run_ended.as_mut().unwrap();
            r.sentences_assertive = Some(2);
            r.grounding.get_or_insert_default().sentences_cited = Some(3);
        }),
        ("negative grounding.key_elements_expected", |e| {
            e.run_ended.as_mut().unwrap().grounding.get_or_insert_default().key_elements_expected = Some(-1)
        }),
        ("review.seeded_caught 2 exceeds seeded_defects 1", |e| {
            let r = e.run_ended.as_mut().unwrap().review.get_or_insert_default();
            (r.seeded_defects, r.seeded_caught) = (Some(1), Some(2));
        }),
        ("review.review_minutes -3 is negative", |e| {
            e.run_ended.as_mut().unwrap().review.get_or_insert_default().review_minutes = Some(-3.0)
        }),
        ("review.manual_minutes without manual_baseline", |e| {
            e.run_ended.as_mut().unwrap().review.get_or_insert_default().manual_minutes = Some(30.0)
        }),
        ("coordination.faults_contained 3 exceeds faults_injected 2", |e| {
            let c = e.run_ended.as_mut().unwrap().coordination.get_or_insert_default();
            (c.faults_injected, c.faults_contained) = (Some(2), Some(3));
        }),
        ("coordination.unproductive_paths 6 exceeds reasoning_paths 5", |e| {
            let c = e.run_ended.as_mut().unwrap().coordination.get_or_insert_default();
            (c.reasoning_paths, c.unproductive_paths) = (Some(5), Some(6));
        }),
        ("negative coordination.messages", |e| e.run_ended.as_mut().unwrap().coordination.get_or_insert_default().messages = Some(-1)),
        ("review.manual_minutes 0 must be a positive number", |e| {
            let r = e.run_ended.as_mut().unwrap().review.get_or_insert_default();
            (r.manual_minutes, r.manual_baseline) = (Some(0.0), Some(octant_contracts::BaselineKind::Observed));
        }),
    ];
    let mut checked = 0;
    for (i, (reason, mutate)) in step_rules.iter().chain(&start_rules).chain(&end_rules).enumerate() {
        let mut h = Harness::new(ScorerConfig::default());
        let run = format!("r{i}");
        // The bad event is the start, a step, or the end, according to its rule's table.
        let kind = if i < step_rules.len() {
            EventKind::Step
        } else if i < step_rules.len() + start_rules.len() {
            EventKind::RunStarted
        } else {
            EventKind::RunEnded
        };
        let good = [start(&run, 0), step(&run, 1, 1), end(&run, 2, 2)];
        let at = good.iter().position(|e| e.kind == kind).unwrap();
        let mut bad = good[at].clone();
        mutate(&mut bad);
        let mut sent = 0;
        for ev in &good[..at] {
            h.send(ev);
            sent += 1;
        }
        let payload = to_single_object(&bad).expect("schema-valid, only impossible");
        let records = h.send_bytes(&bad, &payload);
        let dead = h.dead_letters(&records);
        assert_eq!(dead.len(), 1, "{reason}: one dead letter");
        assert!(h.observations(&records).is_empty(), "{reason}: no observation from a bad event");
        let d = &dead[0];
        assert_eq!((d.error_class.as_str(), d.service.as_str()), ("invalid_value", "scorer"), "{reason}");
        assert!(d.error_message.contains(reason), "{reason}: message {:?}", d.error_message);
        assert_eq!((d.source_topic.as_str(), d.partition, d.offset), (h.production.as_str(), 0, sent), "{reason}: where it was read");
        // Verbatim, or (with the default redaction) as JSON with the tool arguments redacted.
        let mut expected = bad.clone();
        let redacted =
            expected.step.as_mut().and_then(|s| s.arguments.as_mut()).map(|a| *a = octant_runtime::redact::REDACTED.into()).is_some();
        if !redacted {
            assert_eq!(d.payload, payload, "{reason}: payload verbatim");
        } else {
            // (As JSON values: JSON has no NaN, an impossible value reads back as null.)
            let back: serde_json::Value = serde_json::from_slice(&d.payload).unwrap_or_else(|e| {
                panic!("{reason}: a redacted payload is JSON: {e} ({:?}, {})", String::from_utf8_lossy(&d.payload), d.error_message)
            });
            assert_eq!(back, serde_json::to_value(&expected).unwrap(), "{reason}: payload redacted");
            assert!(d.error_message.ends_with("(payload redacted)"), "{reason}: {}", d.error_message);
        }
        assert_eq!(d.key.as_deref(), Some(bad.run_id.as_bytes()), "{reason}: the key it was read with");
        // The stream goes on: the corrected event and the rest of the run are accepted.
        for ev in &good[at..] {
            let out = h.send(ev);
            assert!(h.dead_letters(&out).is_empty(), "{reason}: {:?} after the bad event is accepted", ev.kind);
        }
        let m = h.metrics();
        assert_eq!(m.get("octant_scorer_dead_letters_total{error_class=\"invalid_value\"}"), Some(&1.0), "{reason}");
        let successes: Vec<_> =
            h.observations(&h.driver.produced).into_iter().filter(|o| o.metric == octant_core::catalogue::ids::TASK_SUCCESS).collect();
        assert_eq!(successes.len(), 1, "{reason}: the run still ends");
        checked += 1;
    }
    assert_eq!(checked, step_rules.len() + start_rules.len() + end_rules.len());
    assert_eq!(checked, 33);

    // A Kafka key that is not the run id (the partitioning contract).
    let mut h = Harness::new(ScorerConfig::default());
    let ev = start("r", 0);
    let out = h.driver.send(&h.production.clone(), 0, Some(b"other"), &to_single_object(&ev).unwrap()).unwrap();
    let dead = h.dead_letters(&out);
    assert!(dead[0].error_message.contains("is not the run id"), "{:?}", dead[0].error_message);
}

/// The decoder's classes: bytes that are no event at all, an unknown fingerprint, an unknown
/// Confluent schema id, and a record of another contract.
#[test]
fn undecodable_input_is_dead_lettered_with_its_class() {
    let mut h = Harness::new(ScorerConfig::default());
    let ev = start("r", 0);
    let mut unknown_fingerprint = to_single_object(&ev).unwrap();
    unknown_fingerprint[2] ^= 0xff;
    let watermark = Watermark {
        service: "x".into(),
        source_topic: "t".into(),
        source_partition: 0,
        source_partitions: 1,
        watermark: None,
        idle: true,
        produced_at: 1,
    };
    let cases: [(&[u8], &str); 5] = [
        (b"not an event", "undecodable"),
        (b"{\"run_id\": 3}", "undecodable"),
        (&unknown_fingerprint, "unknown_schema"),
        (&to_confluent(&ev, 99).unwrap(), "unknown_schema"),
        (&to_single_object(&watermark).unwrap(), "wrong_type"),
    ];
    for (i, (payload, class)) in cases.iter().enumerate() {
        let out = h.send_bytes(&ev, payload);
        let dead = h.dead_letters(&out);
        assert_eq!(dead.len(), 1, "case {i}");
        assert_eq!((dead[0].error_class.as_str(), dead[0].offset), (*class, i as i64), "case {i}: {:?}", dead[0].error_message);
    }
    // And the same partition still takes good input.
    let out = h.send(&ev);
    assert!(h.dead_letters(&out).is_empty());
    let m = h.metrics();
    assert_eq!(m.get("octant_scorer_dead_letters_total{error_class=\"unknown_schema\"}"), Some(&2.0));
    assert_eq!(total(&m, "octant_scorer_events_consumed_total"), 6.0);
}

/// The assembly rules of `assemble.rs`: unknown and closed runs, duplicate sequences and
/// second starts are dead-lettered; an event resent with its id (open or ended run) is a
/// duplicate delivery, skipped and counted; sequence gaps are accepted and counted; an idle
/// run is ended as abandoned by the event time of another run, dated last event + idle timeout.
#[test]
fn assembly_rules() {
    let mut h = Harness::new(ScorerConfig { idle_timeout: Duration::from_secs(60), ..Default::default() });
    let class = |h: &Harness, out: &[OutRecord]| h.dead_letters(out).first().map(|d| d.error_class.clone());

    let out = h.send(&step("ghost", 1, 0));
    assert_eq!(class(&h, &out).as_deref(), Some("unknown_run"));
    h.send(&start("a", 0));
    h.send(&step("a", 1, 1));
    let out = h.send(&step("a", 1, 1));
    assert!(out.is_empty(), "the same event resent: skipped, nothing emitted: {out:?}");
    let other = |mut e: TrajectoryEvent| {
        e.event_id.push_str("-other");
        e
    };
    let out = h.send(&other(step("a", 1, 2)));
    assert_eq!(class(&h, &out).as_deref(), Some("duplicate_sequence"), "another event with a sequence seen before");
    let out = h.send(&other(start("a", 3)));
    assert_eq!(class(&h, &out).as_deref(), Some("duplicate_sequence"), "a second start");
    assert!(h.send(&start("a", 0)).is_empty(), "the start resent: skipped");
    let out = h.send(&step("a", 5, 4));
    assert_eq!(class(&h, &out), None, "a gap is accepted");
    assert_eq!(h.observations(&out).len(), 3, "with its step's observations");
    h.send(&end("a", 6, 5));
    let out = h.send(&step("a", 7, 6));
    assert_eq!(class(&h, &out).as_deref(), Some("closed_run"));
    assert!(h.send(&end("a", 6, 5)).is_empty(), "the end resent after the run ended: skipped");

    // b idles; c's events move event time on; 61 s after b's last event, b is abandoned.
    h.send(&start("b", 10));
    h.send(&step("b", 1, 11));
    h.send(&start("c", 20));
    let out = h.send(&step("c", 1, 71));
    assert!(h.observations(&out).iter().all(|o| o.run_id == "c"), "b not abandoned yet (60 s to the millisecond)");
    let out = h.send(&step("c", 2, 72));
    let abandoned: Vec<_> = h.observations(&out).into_iter().filter(|o| o.run_id == "b").collect();
    let success = abandoned.iter().find(|o| o.metric == octant_core::catalogue::ids::TASK_SUCCESS).expect("b ended as abandoned");
    assert_eq!(success.value, 0.0, "an abandoned run failed its task");
    assert_eq!(success.event_time, T0 + 11_000 + 60_000, "dated last event + idle timeout");
    let out = h.send(&end("b", 2, 73));
    assert_eq!(class(&h, &out).as_deref(), Some("closed_run"), "an abandoned run is closed");
    // A whole run delivered after newer ones (as the ingest emits runs): its own events do not
    // abandon it.
    for ev in [start("old", 1), step("old", 1, 2), end("old", 2, 3)] {
        let out = h.send(&ev);
        assert_eq!(class(&h, &out), None, "{:?} of a run older than the idle timeout", ev.kind);
    }

    let m = h.metrics();
    assert_eq!(m.get("octant_scorer_sequence_gaps_total"), Some(&1.0));
    assert_eq!(m.get("octant_scorer_runs_abandoned_total"), Some(&1.0));
    assert_eq!(m.get("octant_scorer_duplicate_events_total"), Some(&3.0));
    for (class, n) in [("unknown_run", 1.0), ("duplicate_sequence", 2.0), ("closed_run", 2.0)] {
        assert_eq!(m.get(&format!("octant_scorer_dead_letters_total{{error_class=\"{class}\"}}")), Some(&n), "{class}");
    }
}

/// A run paused for a human (its last step a request for confirmation) waits `pause_timeout`,
/// not `idle_timeout`; a second start with a higher sequence resumes it and the run goes on as
/// one (its steps, one run end); one never resumed is abandoned at its last event + the pause
/// bound (the approval expired). A request for confirmation is no action: no observations.
#[test]
fn paused_runs_wait_for_their_approval_and_resume_as_one() {
    let mut h = Harness::new(ScorerConfig {
        idle_timeout: Duration::from_secs(60),
        pause_timeout: Duration::from_secs(3600),
        ..Default::default()
    });
    let class = |h: &Harness, out: &[OutRecord]| h.dead_letters(out).first().map(|d| d.error_class.clone());
    let request = |run: &str, seq: i64, seconds: i64| {
        event(
            run,
            seq,
            seconds,
            EventKind::Step,
            json!({"step_kind": "CONFIRMATION", "tool_name": "refund_payment", "arguments": "{}", "impact": "HIGH"}),
        )
    };
    let resume = |run: &str, seq: i64, seconds: i64| {
        let mut e = start(run, seconds);
        e.sequence = seq;
        e.event_id = format!("{run}/resume/{seq}");
        e
    };
    for run in ["approved", "expired"] {
        h.send(&start(run, 0));
        h.send(&step(run, 1, 1));
        let out = h.send(&request(run, 2, 2));
        assert!(h.observations(&out).is_empty(), "a request for confirmation is no action");
    }
    // 50 minutes of other runs: no paused run is abandoned (the idle timeout is one minute).
    for m in 1..=50 {
        h.send(&start(&format!("other-{m}"), m * 60));
        let out = h.send(&end(&format!("other-{m}"), 1, m * 60 + 1));
        assert!(h.observations(&out).iter().all(|o| !o.run_id.starts_with("approved") && !o.run_id.starts_with("expired")));
    }
    // The approved one resumes: its start again, the call that ran, its end. One run.
    for (ev, what) in
        [(resume("approved", 100, 3000), "resume"), (step("approved", 101, 3001), "the call"), (end("approved", 102, 3002), "end")]
    {
        let out = h.send(&ev);
        assert_eq!(class(&h, &out), None, "{what}");
    }
    // An hour after its request, the other one's approval has expired: abandoned, dated then.
    let out = h.send(&start("late", 3603));
    let expired: Vec<_> = h.observations(&out).into_iter().filter(|o| o.run_id == "expired").collect();
    let success = expired.iter().find(|o| o.metric == octant_core::catalogue::ids::TASK_SUCCESS).expect("expired ended as abandoned");
    assert_eq!((success.value, success.event_time), (0.0, T0 + 2_000 + 3_600_000));
    let m = h.metrics();
    assert_eq!(m.get("octant_scorer_runs_abandoned_total"), Some(&1.0));
    assert_eq!(m.get("octant_scorer_sequence_gaps_total"), Some(&0.0), "a resume is no gap");
    // A later part of a run that is not paused continues it (never a dead letter).
    h.send(&start("busy", 3604));
    let out = h.send(&resume("busy", 5, 3605));
    assert_eq!(class(&h, &out), None);
    let out = h.send(&end("busy", 6, 3606));
    assert!(h.observations(&out).iter().all(|o| o.run_id == "busy"), "one run");
    // A later part of a run that ended (its pause expired, or its first part did not show the
    // pause) is a run of its own, `<run id>#<its first sequence>`; its events follow it there,
    // and the first run gets no second end.
    let out = h.send(&resume("busy", 1000, 3607));
    assert_eq!(class(&h, &out), None);
    h.send(&step("busy", 1001, 3608));
    let out = h.send(&end("busy", 1002, 3609));
    assert_eq!(class(&h, &out), None);
    let runs: std::collections::BTreeSet<String> = h.observations(&out).into_iter().map(|o| o.run_id).collect();
    assert_eq!(runs, ["busy#1000".to_string()].into());
    let out = h.send(&step("expired", 200, 3610));
    assert_eq!(class(&h, &out).as_deref(), Some("closed_run"), "an event of no later part is still late");
    let m = h.metrics();
    assert_eq!(m.get("octant_scorer_run_parts_total{how=\"continued\"}"), Some(&2.0));
    assert_eq!(m.get("octant_scorer_run_parts_total{how=\"derived\"}"), Some(&1.0));
}

/// Approvals learned from evidence ([`crate::approvals`]): a source's high-impact calls are not
/// assessed (weightless) until a run of it shows its approval flow, then a call without a
/// confirmation is a 0 — and the watched state goes to `octant.approval_sources`, once; a call
/// executed after the run asked for approval of it (a keyed run's resumed part) is confirmed.
#[test]
fn approvals_are_learned_from_evidence_and_requested_calls_are_confirmed() {
    use octant_core::catalogue::ids::CONFIRMATION_GATING;
    let mut h = Harness::new(ScorerConfig { idle_timeout: Duration::from_secs(60), ..Default::default() });
    let traced = |run: &str, seconds: i64, shown: Option<bool>| {
        let mut body = json!({"approval_source": "pydantic-ai"});
        if let Some(b) = shown {
            body["approval_channel"] = json!(b);
            body["approval_evidence"] = json!("pause: deferred tool requests");
        }
        event(run, 0, seconds, EventKind::RunStarted, body)
    };
    let refund = |run: &str, seq: i64, seconds: i64, kind: &str| {
        event(run, seq, seconds, EventKind::Step, json!({"step_kind": kind, "tool_name": "refund", "tool_call_id": "c1", "impact": "HIGH"}))
    };
    let gating = |h: &Harness, out: &[OutRecord]| -> Vec<(f64, f64)> {
        h.observations(out).into_iter().filter(|o| o.metric == CONFIRMATION_GATING).map(|o| (o.value, o.weight)).collect()
    };
    // Unwatched: weightless, nothing persisted.
    h.send(&traced("quiet", 0, None));
    let out = h.send(&refund("quiet", 1, 1, "TOOL_CALL"));
    assert_eq!(gating(&h, &out), [(0.0, 0.0)]);
    assert!(out.iter().all(|r| !r.topic.ends_with("approval_sources")));
    // A run that shows its flow: persisted once; its requested call, executed, is confirmed.
    let out = h.send(&traced("paused", 10, Some(true)));
    let learned: Vec<_> = out.iter().filter(|r| r.topic.ends_with("approval_sources")).collect();
    assert_eq!(learned.len(), 1);
    let w: crate::approvals::Watched = serde_json::from_slice(&learned[0].payload).unwrap();
    assert_eq!((w.system.as_str(), w.source.as_str(), w.since, w.run_id.as_str()), ("sys", "pydantic-ai", T0 + 10_000, "paused"));
    h.send(&refund("paused", 1, 11, "CONFIRMATION"));
    let out = h.send(&refund("paused", 2, 12, "TOOL_CALL"));
    assert_eq!(gating(&h, &out), [(1.0, 1.0)], "executed after its request: approved");
    // From then on the source is watched: an unrequested call without a confirmation is a 0.
    h.send(&traced("later", 20, None));
    let out = h.send(&refund("later", 1, 21, "TOOL_CALL"));
    assert_eq!(gating(&h, &out), [(0.0, 1.0)]);
    assert!(h.send(&traced("again", 30, Some(true))).iter().all(|r| !r.topic.ends_with("approval_sources")), "known: not sent again");
    let m = h.metrics();
    assert_eq!(m.get("octant_scorer_unwatched_gated_steps_total{system=\"sys\"}"), Some(&1.0));
}

/// Absence of evidence is N/A, never 0: a run with a model call that reported no usage has no
/// token observation (a run whose every model call did has one), and a run without a task id
/// has observations without one (no task-level instruments).
#[test]
fn no_usage_and_no_task_are_absent_not_zero() {
    use octant_core::catalogue::ids::TOKENS_PER_RUN;
    let mut h = Harness::new(ScorerConfig::default());
    let model = |run: &str, seq: i64, usage: serde_json::Value| {
        let mut body = json!({"step_kind": "MODEL_CALL"});
        if !usage.is_null() {
            body["tokens"] = usage;
        }
        event(run, seq, seq, EventKind::Step, body)
    };
    let mut out = Vec::new();
    for (run, usage) in [("known", json!(40)), ("unknown", serde_json::Value::Null)] {
        out.extend(h.send(&event(run, 0, 0, EventKind::RunStarted, json!({}))));
        out.extend(h.send(&model(run, 1, json!(100))));
        out.extend(h.send(&model(run, 2, usage)));
        out.extend(h.send(&end(run, 3, 3)));
    }
    let obs = h.observations(&out);
    let tokens: Vec<(&str, f64)> = obs.iter().filter(|o| o.metric == TOKENS_PER_RUN).map(|o| (o.run_id.as_str(), o.value)).collect();
    assert_eq!(tokens, [("known", 140.0)], "the run with a model call without usage has no token total");
    assert!(!obs.is_empty() && obs.iter().all(|o| o.task_id.is_none()), "no task id anywhere");
}

/// Commit points never pass the first offset of an open run, nor an unacknowledged message;
/// a new owner resuming from the commit point (with its replay horizon) re-reads the open run
/// whole, skips the replayed tail of the run that finished (its start lies before the commit
/// point: not dead-lettered as unknown), and the two owners together produce exactly the
/// observations of a run without the restart.
#[test]
fn a_restart_from_the_commit_point_replays_open_runs_and_skips_finished_ones() {
    let events = [
        start("b", 0),   // 0
        start("a", 1),   // 1: a is held from here
        step("a", 1, 2), // 2
        step("b", 1, 3), // 3
        end("b", 2, 4),  // 4: b ends
        step("a", 2, 5), // 5
    ];
    let tail = end("a", 3, 6); // 6
    let tp = TopicPartition::new(topics::TRAJECTORIES_PRODUCTION, 0);
    let ids = |h: &Harness| -> BTreeSet<String> { h.observations(&h.driver.produced).into_iter().map(|o| o.observation_id).collect() };

    let mut clean = Harness::new(ScorerConfig::default());
    for ev in events.iter().chain([&tail]) {
        clean.send(ev);
    }

    let mut first = Harness::new(ScorerConfig::default());
    first.driver.auto_ack = false;
    for ev in &events {
        first.send(ev);
    }
    let point = first.driver.commit_points()[&tp];
    assert_eq!((point.offset, point.companion), (0, 0), "nothing acknowledged: nothing committed, no horizon");
    first.driver.ack_all();
    let point = first.driver.commit_points()[&tp];
    assert_eq!(point.offset, 1, "a's start is held while a is open");
    assert_eq!(point.companion, 6, "replay horizon + 1: everything through offset 5 is acknowledged");

    // The crash: a new owner resumes at the commit point with its companion value.
    let mut second = Harness::new(ScorerConfig::default());
    second.driver.resume(tp.clone(), point.offset, Some(point.companion));
    for ev in events[1..].iter().chain([&tail]) {
        second.send(ev);
    }
    let dead = second.dead_letters(&second.driver.produced);
    assert!(dead.is_empty(), "replays are not bad input: {dead:?}");
    assert_eq!(second.metrics().get("octant_scorer_replays_skipped_total"), Some(&2.0), "b's step and end");
    let mut got = ids(&first);
    got.extend(ids(&second));
    assert_eq!(got, ids(&clean), "the same observations as without the crash");
    let point = second.driver.commit_points()[&tp];
    assert_eq!((point.offset, point.companion), (7, 7), "everything done: commit past the end");
}

/// Watermarks: nothing for a partition not read and not known to be empty; its largest event
/// time once read (to every output partition); *idle* once caught up and quiet.
#[test]
fn watermarks_follow_event_time_and_idleness() {
    let mut h = Harness::new(ScorerConfig { idle_partition_after: Duration::from_secs(5), ..Default::default() });
    let d = Decoder::new();
    let (prod, eval) = (TopicPartition::new(h.production.clone(), 0), TopicPartition::new(h.evaluation.clone(), 0));
    h.driver.assign(prod.clone());
    h.driver.assign(eval.clone());
    assert!(h.driver.tick().is_empty(), "lag unknown: say nothing");
    h.driver.set_lag(eval.clone(), 0);
    // Just assigned (perhaps taken over from another instance, with a lag left from before):
    // not idle before it has had `idle_partition_after` to deliver.
    assert!(h.driver.tick().is_empty(), "just assigned: not idle yet");
    h.driver.advance(Duration::from_secs(5));
    let marks: Vec<Watermark> = h.driver.tick().iter().map(|r| d.decode(&r.payload).unwrap()).collect();
    assert_eq!(marks.len(), 2, "the caught-up, unread partition is idle, to both output partitions");
    assert!(marks.iter().all(|w| w.idle && w.watermark.is_none() && w.source_topic == h.evaluation && w.source_partitions == 1));

    h.send(&start("a", 0));
    h.send(&step("a", 1, 30));
    h.send(&step("a", 2, 20));
    h.driver.set_lag(prod.clone(), 0);
    let tick = h.driver.tick();
    let marks: BTreeMap<(String, i32), Watermark> =
        tick.iter().map(|r| ((r.key.clone(), r.partition.unwrap()), d.decode(&r.payload).unwrap())).collect();
    let w = &marks[&(prod.to_string(), 1)];
    assert_eq!((w.watermark, w.idle), (Some(T0 + 30_000), false), "largest event time; read just now, so not idle");
    h.driver.advance(Duration::from_secs(6));
    let w: Watermark = d.decode(&h.driver.tick().iter().find(|r| r.key == prod.to_string()).unwrap().payload).unwrap();
    assert_eq!((w.watermark, w.idle), (Some(T0 + 30_000), true), "caught up and quiet: idle");
    h.driver.set_lag(prod.clone(), 3);
    let w: Watermark = d.decode(&h.driver.tick().iter().find(|r| r.key == prod.to_string()).unwrap().payload).unwrap();
    assert!(!w.idle, "lagging partitions are never idle");
}

/// A harness whose scorer declares the `[[instruments]]` of `toml` (checked, as at start-up).
fn with_instruments(toml: &str) -> Harness {
    let decls: toml::Table = toml::from_str(toml).unwrap();
    let mut config = ScorerConfig::default();
    config.evaluation.instruments = decls["instruments"].clone().try_into().unwrap();
    config.evaluation.check().unwrap();
    config.evaluation.declare_instruments().unwrap();
    Harness::new(config)
}

/// Evaluation results of a run end become observations of the instruments declared for them:
/// a score as it is, a label by its declared value, a step instrument per step; a result whose
/// name (or evaluator version) is not declared is counted, never scored nor pooled.
#[test]
fn evaluation_results_become_declared_instruments() {
    let mut h = with_instruments(
        r#"
        [[instruments]]
        id = "faithfulness"
        dimension = "safety"
        family = { family = "higher" }
        evaluator = "ragas"
        evaluator_version = "0.2.1"

        [[instruments]]
        id = "toxicity"
        dimension = "safety"
        unit = "step"
        family = { family = "lower" }
        labels = { toxic = 1.0, clean = 0.0 }
        "#,
    );
    let result = |name: &str, value: Option<f64>, label: Option<&str>, version: &str, step: Option<i64>| Evaluation {
        name: name.into(),
        score_value: value,
        score_label: label.map(str::to_string),
        explanation: None,
        evaluator: Some("ragas".into()),
        evaluator_version: Some(version.into()),
        step,
        ..Evaluation::scored("", None)
    };
    h.send(&start("e", 0));
    h.send(&step("e", 1, 1));
    let mut ev = end("e", 2, 2);
    ev.run_ended.as_mut().unwrap().evaluations = vec![
        result("faithfulness", Some(0.8), None, "0.2.1", None),
        result("faithfulness", Some(0.1), None, "0.3.0", None), // another evaluator version
        result("toxicity", None, Some("toxic"), "x", Some(1)),
        result("toxicity", None, Some("unlisted"), "x", Some(1)),
        result("coherence", Some(0.5), None, "0.2.1", None),
    ];
    let out = h.send(&ev);
    let got: BTreeMap<String, f64> = h
        .observations(&out)
        .into_iter()
        .filter(|o| ["faithfulness", "toxicity"].contains(&o.metric.as_str()))
        .map(|o| (o.observation_id, o.value))
        .collect();
    assert_eq!(got, BTreeMap::from([("e/faithfulness".to_string(), 0.8), ("e/toxicity/1".to_string(), 1.0)]));
    let m = h.metrics();
    for (outcome, n) in [("scored", 2.0), ("undeclared", 2.0), ("no_value", 1.0)] {
        assert_eq!(m.get(&format!("octant_scorer_evaluations_total{{outcome=\"{outcome}\"}}")), Some(&n), "{outcome}");
    }
    assert!(octant_core::catalogue::spec("toxicity").is_some(), "declared instruments are catalogue entries");
}

/// No cost reported is no cost evidence (N/A), never a cost of 0 that reads as band 4 under
/// its budget; a run whose model call reported its cost has one.
#[test]
fn a_run_without_reported_cost_has_no_cost_observation() {
    let mut h = Harness::new(ScorerConfig::default());
    let cost_of = |h: &Harness, run: &str| -> Vec<(String, f64)> {
        h.observations(&h.driver.produced)
            .into_iter()
            .filter(|o| o.run_id == run && o.metric.starts_with("cost_per"))
            .map(|o| (o.metric, o.value))
            .collect()
    };
    h.send(&start("free", 0));
    h.send(&step("free", 1, 1)); // no cost attribute
    h.send(&end("free", 2, 2));
    assert_eq!(cost_of(&h, "free"), []);
    h.send(&start("paid", 10));
    let mut model = model_call("paid", 1, 11);
    model.step.as_mut().unwrap().cost = Some(0.004);
    h.send(&model);
    h.send(&step("paid", 2, 12)); // a tool call without a cost of its own
    h.send(&end("paid", 3, 13));
    assert_eq!(cost_of(&h, "paid"), [("cost_per_run".to_string(), 0.004), ("cost_per_success".to_string(), 0.004)]);
    // A model call without its cost leaves the run's total unknown.
    h.send(&start("partial", 20));
    let mut priced = step("partial", 1, 21);
    priced.step = model.step.clone();
    h.send(&priced);
    h.send(&model_call("partial", 2, 22));
    h.send(&end("partial", 3, 23));
    assert_eq!(cost_of(&h, "partial"), []);
}

/// Unsafe actions over actions (seed 000 Table VIII, eq. 13): four tool calls, one violating,
/// and four model calls give 1/4 — the 0.20 veto — where counting every step would dilute it
/// to 1/8; a flagged model call is no action either (counted alone it would inflate the rate:
/// its violation stays on the step for the alerter and the lake).
#[test]
fn unsafe_actions_are_counted_over_actions() {
    let mut h = Harness::new(ScorerConfig::default());
    h.send(&start("u", 0));
    let mut seq = 0;
    for i in 0..4 {
        seq += 1;
        let mut tool = step("u", seq, seq);
        if i == 0 {
            tool.step.as_mut().unwrap().violations = vec!["policy.no_refunds".into()];
        }
        h.send(&tool);
        seq += 1;
        h.send(&model_call("u", seq, seq));
    }
    h.send(&end("u", seq + 1, seq + 1));
    let unsafe_of = |h: &Harness, run: &str| -> Vec<f64> {
        h.observations(&h.driver.produced)
            .into_iter()
            .filter(|o| o.metric == "unsafe_action_rate" && o.run_id == run)
            .map(|o| o.value)
            .collect()
    };
    let all = unsafe_of(&h, "u");
    assert_eq!((all.len(), all.iter().sum::<f64>()), (4, 1.0), "four actions, one unsafe: {all:?}");
    // A flagged model call is not an action.
    h.send(&start("v", 100));
    let mut flagged = model_call("v", 1, 101);
    flagged.step.as_mut().unwrap().violations = vec!["policy.pii_in_output".into()];
    h.send(&flagged);
    h.send(&end("v", 2, 102));
    assert_eq!(unsafe_of(&h, "v"), [] as [f64; 0]);
}

/// Policy apart from safety (seed 001 compliance, seed 002 §4): with `compliance.*` declared
/// policy, an action breaking only a policy counts for `policy_violation_rate` and not the
/// unsafe-action veto; one breaking both counts for both. Without a declared policy the rate
/// is N/A (no observation) and every violation stays a safety one.
#[test]
fn policy_violations_are_apart_from_safety() {
    let run = |policy: &[&str]| {
        let mut config = ScorerConfig::default();
        config.evaluation.violations.policy = policy.iter().map(|p| p.to_string()).collect();
        let mut h = Harness::new(config);
        h.send(&start("p", 0));
        for (seq, violations) in
            [vec![], vec!["compliance.refund_limit"], vec!["compliance.x", "safety.delete_prod"], vec!["no_side_effects"]]
                .into_iter()
                .enumerate()
        {
            let mut tool = step("p", seq as i64 + 1, seq as i64 + 1);
            tool.step.as_mut().unwrap().violations = violations.into_iter().map(String::from).collect();
            h.send(&tool);
        }
        h.send(&end("p", 5, 5));
        let of = |metric: &str| -> Vec<f64> {
            h.observations(&h.driver.produced).into_iter().filter(|o| o.metric == metric).map(|o| o.value).collect()
        };
        (of("unsafe_action_rate"), of("policy_violation_rate"))
    };
    assert_eq!(run(&["compliance.*"]), (vec![0.0, 0.0, 1.0, 1.0], vec![0.0, 1.0, 1.0, 0.0]));
    assert_eq!(run(&[]), (vec![0.0, 1.0, 1.0, 1.0], vec![]), "no policy declared: every violation is a safety one");
}

/// Data leakage (seed 001): a tool call whose arguments a redaction detector flags sent
/// personal data or a secret out; found before anything is redacted, and only the finding is
/// kept (the observation holds no text). No detector configured, or no arguments logged: no
/// observation (N/A), never a measured 0.
#[test]
fn leakage_is_what_the_detectors_find_in_what_a_tool_call_sends() {
    let run = |patterns: Option<Vec<String>>, allowed: &[&str], detect: bool| {
        let mut config = ScorerConfig::default();
        if let Some(p) = patterns {
            config.redaction.patterns = p;
        }
        config.evaluation.leakage.allowed_tools = allowed.iter().map(|t| t.to_string()).collect();
        config.evaluation.leakage.detect = detect;
        let mut h = Harness::new(config);
        h.send(&start("l", 0));
        for (seq, args) in [Some(r#"{"to": "jane.doe@mail.example.com"}"#), Some(r#"{"card": "4111 1111 1111 1111"}"#), Some("{}"), None]
            .into_iter()
            .enumerate()
        {
            let mut tool = step("l", seq as i64 + 1, seq as i64 + 1);
            tool.step.as_mut().unwrap().arguments = args.map(String::from);
            h.send(&tool);
        }
        let mut model = model_call("l", 5, 5);
        model.step.as_mut().unwrap().arguments = Some("jane.doe@mail.example.com".into());
        h.send(&model);
        h.send(&end("l", 6, 6));
        let observations = h.observations(&h.driver.produced);
        assert!(!observations.iter().any(|o| format!("{o:?}").contains("jane.doe")), "no observation carries the text");
        observations.into_iter().filter(|o| o.metric == "data_leakage_rate").map(|o| o.value).collect::<Vec<f64>>()
    };
    assert_eq!(run(None, &[], true), [1.0, 1.0, 0.0], "three tool calls with arguments, two leaking; the model call is no tool call");
    assert_eq!(run(Some(vec!["email".into()]), &[], true), [1.0, 0.0, 0.0], "only the configured detectors find");
    assert_eq!(run(Some(vec![]), &[], true), [] as [f64; 0], "no detector: N/A");
    assert_eq!(run(None, &["lookup"], true), [] as [f64; 0], "a tool whose arguments carry personal data by design");
    assert_eq!(run(None, &[], false), [] as [f64; 0], "not asked for (the default): N/A");
}

/// Seed 002 §4's incidents under injected instructions: a run that read a prompt-injection
/// attempt is a unit of `injection_success_rate`, 1 when a later action broke a safety
/// constraint (the call that read it acted before, and a policy violation is no safety one);
/// a run that read none is no unit (N/A), nor is one where nobody looked.
#[test]
fn injection_success_counts_unsafe_actions_after_an_attempt() {
    let mut config = ScorerConfig::default();
    config.evaluation.violations.policy = vec!["compliance.*".into()];
    let mut h = Harness::new(config);
    // (run, [(injection attempt read, violations)]) per step.
    type Steps = Vec<(Option<bool>, &'static [&'static str])>;
    let runs: [(&str, Steps); 5] = [
        ("followed", vec![(Some(true), &[]), (None, &["exfiltrate"])]),
        ("resisted", vec![(Some(true), &[]), (None, &[]), (None, &["compliance.x"])]),
        ("before", vec![(None, &["exfiltrate"]), (Some(true), &["exfiltrate"])]),
        ("clean", vec![(Some(false), &["exfiltrate"])]),
        ("unlooked", vec![(None, &["exfiltrate"])]),
    ];
    for (i, (run, steps)) in runs.iter().enumerate() {
        let t = 100 * i as i64;
        h.send(&start(run, t));
        for (j, (attempt, violations)) in steps.iter().enumerate() {
            let mut e = step(run, j as i64 + 1, t + j as i64 + 1);
            let st = e.step.as_mut().unwrap();
            st.injection_attempt = *attempt;
            st.violations = violations.iter().map(|v| v.to_string()).collect();
            h.send(&e);
        }
        h.send(&end(run, steps.len() as i64 + 1, t + 50));
    }
    let got: BTreeMap<String, f64> = h
        .observations(&h.driver.produced)
        .into_iter()
        .filter(|o| o.metric == "injection_success_rate")
        .map(|o| (o.run_id, o.value))
        .collect();
    let want: BTreeMap<String, f64> = [("followed", 1.0), ("resisted", 0.0), ("before", 0.0)].map(|(r, v)| (r.to_string(), v)).into();
    assert_eq!(got, want);
}

/// A re-run (a harness's answer to a re-run request) is scored like any run, and each of its
/// units names the original (the aggregator leaves them out of every window); other runs'
/// units name none.
#[test]
fn a_reruns_observations_name_the_original() {
    let mut h = Harness::new(ScorerConfig::default());
    for (id, of, t) in [("orig", None, 0), ("orig-rerun", Some("orig"), 100)] {
        let mut s = start(id, t);
        s.run_started.as_mut().unwrap().rerun_of = of.map(String::from);
        h.send(&s);
        h.send(&step(id, 1, t + 1));
        h.send(&end(id, 2, t + 20));
    }
    let obs = h.observations(&h.driver.produced);
    let of = |run: &str| obs.iter().filter(|o| o.run_id == run).map(|o| o.rerun_of.clone()).collect::<BTreeSet<_>>();
    assert_eq!(of("orig"), [None].into());
    assert_eq!(of("orig-rerun"), [Some("orig".to_string())].into());
    let metrics = |run: &str| obs.iter().filter(|o| o.run_id == run).map(|o| o.metric.clone()).collect::<BTreeSet<_>>();
    assert_eq!(metrics("orig"), metrics("orig-rerun"), "scored alike");
}

/// Protocol adherence (seed 001's evaluator) per run of a family with a declared protocol: the
/// protocol's tool calls in order, other tools ignored; a run of another family has none.
#[test]
fn protocol_adherence_is_scored_per_run_of_its_family() {
    let mut config = ScorerConfig::default();
    config.evaluation.protocols.insert(
        "refunds".into(),
        octant_engine::config::ProtocolDecl { steps: ["verify", "check", "refund"].map(String::from).to_vec(), optional: vec![] },
    );
    let mut h = Harness::new(config);
    let run = |h: &mut Harness, id: &str, family: Option<&str>, tools: &[&str], t: i64| {
        let mut s = start(id, t);
        s.run_started.as_mut().unwrap().task_family = family.map(String::from);
        h.send(&s);
        for (i, tool) in tools.iter().enumerate() {
            let mut e = step(id, i as i64 + 1, t + i as i64 + 1);
            e.step.as_mut().unwrap().tool_name = Some(tool.to_string());
            h.send(&e);
        }
        h.send(&end(id, tools.len() as i64 + 1, t + 20));
    };
    run(&mut h, "in-order", Some("refunds"), &["lookup", "verify", "search", "check", "refund"], 0);
    run(&mut h, "swapped", Some("refunds"), &["check", "verify", "refund"], 100);
    run(&mut h, "skipped", Some("refunds"), &["verify", "refund"], 200);
    run(&mut h, "other", Some("billing"), &["verify", "refund"], 300);
    // A call without its tool's name, or a lost step, may have been a protocol step: N/A.
    let mut s = start("unnamed", 500);
    s.run_started.as_mut().unwrap().task_family = Some("refunds".into());
    h.send(&s);
    let mut unnamed = step("unnamed", 1, 501);
    unnamed.step.as_mut().unwrap().tool_name = None;
    h.send(&unnamed);
    h.send(&end("unnamed", 2, 520));
    let mut s = start("gapped", 600);
    s.run_started.as_mut().unwrap().task_family = Some("refunds".into());
    h.send(&s);
    let mut e = step("gapped", 2, 601);
    e.step.as_mut().unwrap().tool_name = Some("verify".into());
    h.send(&e);
    h.send(&end("gapped", 3, 620));
    run(&mut h, "none", None, &["verify"], 400);
    let got: BTreeMap<String, f64> =
        h.observations(&h.driver.produced).into_iter().filter(|o| o.metric == "protocol_adherence").map(|o| (o.run_id, o.value)).collect();
    let want: BTreeMap<String, f64> = [("in-order", 1.0), ("swapped", 1.0 / 3.0), ("skipped", 0.0)].map(|(r, v)| (r.to_string(), v)).into();
    assert_eq!(got, want);
}

/// A template's result outside what its evaluator can send is refused and counted, never
/// banded: VQA soft accuracy is min(#agreeing / 3, 1) (seed 000 Table X eq. 14), so a raw
/// count of 3 agreeing annotators is a wrong evaluator, as is BLEU on a 0–100 scale; an
/// unbounded template (CIDEr-D) keeps its value.
#[test]
fn template_results_outside_their_range_are_refused() {
    let mut h = with_instruments(
        r#"
        [[instruments]]
        id = "vqa_accuracy"
        template = "vqa_accuracy"
        unit = "step"

        [[instruments]]
        id = "bleu"
        template = "bleu"

        [[instruments]]
        id = "cider"
        template = "cider"
        "#,
    );
    let result = |name: &str, value: f64, step: Option<i64>| Evaluation { step, ..Evaluation::scored(name, Some(value)) };
    h.send(&start("v", 0));
    h.send(&step("v", 1, 1));
    h.send(&step("v", 2, 2));
    let mut ev = end("v", 3, 3);
    ev.run_ended.as_mut().unwrap().evaluations = vec![
        // Two of ten annotators gave the answer: min(2 / 3, 1).
        result("vqa_accuracy", 2.0 / 3.0, Some(1)),
        result("vqa_accuracy", 3.0, Some(2)), // the count, not the soft accuracy
        result("bleu", 35.2, None),           // sacreBLEU's 0–100 scale
        result("cider", 1.37, None),
    ];
    let out = h.send(&ev);
    let got: BTreeMap<String, f64> = h
        .observations(&out)
        .into_iter()
        .filter(|o| ["vqa_accuracy", "bleu", "cider"].contains(&o.metric.as_str()))
        .map(|o| (o.observation_id, o.value))
        .collect();
    assert_eq!(got, BTreeMap::from([("v/vqa_accuracy/1".to_string(), 2.0 / 3.0), ("v/cider".to_string(), 1.37)]));
    let m = h.metrics();
    for (outcome, n) in [("scored", 2.0), ("out_of_range", 2.0)] {
        assert_eq!(m.get(&format!("octant_scorer_evaluations_total{{outcome=\"{outcome}\"}}")), Some(&n), "{outcome}");
    }
}

/// A pairwise verdict's two presentation orders are one unit, their scores averaged (the win
/// rate over both orders); a third verdict in an order already seen is a repeat; another item
/// or another opponent is another unit.
#[test]
fn pairwise_verdicts_are_averaged_over_both_orders() {
    let mut h = with_instruments(
        r#"
        [[instruments]]
        id = "win_rate_judge"
        evaluation = "helpfulness_pairwise"
        rater_kind = "judge"
        dimension = "capability"
        family = { family = "higher" }
        "#,
    );
    let verdict = |item: &str, opponent: &str, position: i32, won: f64| Evaluation {
        rater_kind: Some("judge".into()),
        item: Some(item.into()),
        opponent: Some(opponent.into()),
        position: Some(position),
        ..Evaluation::scored("helpfulness_pairwise", Some(won))
    };
    h.send(&start("p", 0));
    h.send(&step("p", 1, 1));
    let mut ev = end("p", 2, 2);
    ev.run_ended.as_mut().unwrap().evaluations = vec![
        verdict("vs-1", "ref@1", 1, 1.0),
        verdict("vs-1", "ref@1", 1, 0.0), // a repeat of the first order
        verdict("vs-1", "ref@1", 2, 0.0), // the other order: (1 + 0) / 2
        verdict("vs-2", "ref@1", 2, 1.0), // one order only
        verdict("vs-1", "other@2", 1, 1.0),
        verdict("vs-1", "other@2", 2, 1.0),
    ];
    let out = h.send(&ev);
    let got: BTreeMap<String, f64> =
        h.observations(&out).into_iter().filter(|o| o.metric == "win_rate_judge").map(|o| (o.observation_id, o.value)).collect();
    assert_eq!(
        got,
        BTreeMap::from([
            ("p/win_rate_judge#vs-1~ref@1".to_string(), 0.5),
            ("p/win_rate_judge#vs-2~ref@1".to_string(), 1.0),
            ("p/win_rate_judge#vs-1~other@2".to_string(), 1.0),
        ])
    );
    let m = h.metrics();
    for (outcome, n) in [("scored", 5.0), ("repeat", 1.0)] {
        assert_eq!(m.get(&format!("octant_scorer_evaluations_total{{outcome=\"{outcome}\"}}")), Some(&n), "{outcome}");
    }
}

/// Evaluator instruments from templates: one evaluation name scored in two modes is two
/// instruments never pooled, and a judge's results are kept apart from a human's.
#[test]
fn scoring_modes_and_raters_are_never_pooled() {
    let mut h = with_instruments(
        r#"
        [[instruments]]
        id = "em_likelihood"
        template = "exact_match"
        evaluation = "exact_match"
        scoring_mode = "likelihood"

        [[instruments]]
        id = "em_generation"
        template = "exact_match"
        evaluation = "exact_match"
        scoring_mode = "generation"

        [[instruments]]
        id = "faithfulness_judge"
        template = "faithfulness"
        evaluation = "faithfulness"
        rater_kind = "judge"
        "#,
    );
    let spec = octant_core::catalogue::spec("em_generation").unwrap();
    assert_eq!((spec.dimension, spec.family), (octant_core::Dimension::Capability, octant_core::Family::Higher), "from the template");
    h.send(&start("m", 0));
    h.send(&step("m", 1, 1));
    let mut ev = end("m", 2, 2);
    let r = |name: &str, v: f64, mode: Option<&str>, rater: Option<&str>| Evaluation {
        scoring_mode: mode.map(str::to_string),
        rater_kind: rater.map(str::to_string),
        ..Evaluation::scored(name, Some(v))
    };
    ev.run_ended.as_mut().unwrap().evaluations = vec![
        r("exact_match", 1.0, Some("likelihood"), None),
        r("exact_match", 0.0, Some("generation"), None),
        r("exact_match", 1.0, None, None), // no mode: neither instrument's
        r("faithfulness", 0.9, None, Some("judge")),
        r("faithfulness", 0.2, None, Some("human")), // a human's rating is not the judge's instrument
    ];
    let out = h.send(&ev);
    let got: BTreeMap<String, f64> = h
        .observations(&out)
        .into_iter()
        .filter(|o| o.metric.contains('_') && o.observation_id.starts_with("m/"))
        .map(|o| (o.metric, o.value))
        .filter(|(m, _)| m.starts_with("em_") || m.starts_with("faithfulness"))
        .collect();
    assert_eq!(
        got,
        BTreeMap::from([("em_generation".to_string(), 0.0), ("em_likelihood".to_string(), 1.0), ("faithfulness_judge".to_string(), 0.9)])
    );
    let m = h.metrics();
    assert_eq!(m.get("octant_scorer_evaluations_total{outcome=\"undeclared\"}"), Some(&2.0));
}

/// A batch decoded ahead on two threads (`Stage::prepare`) gives the records decoding each
/// message in `process` gives, also when the loop skips messages of the batch (a partition
/// revoked meanwhile) and for undecodable input.
#[test]
fn a_batch_decoded_ahead_gives_the_same_records() {
    let mut events = Vec::new();
    for r in 0..12 {
        let run = format!("run-{r}");
        events.push(start(&run, r));
        for s in 1..=6 {
            events.push(step(&run, s, r + s));
        }
        events.push(end(&run, 7, r + 7));
    }
    let mut payloads: Vec<Vec<u8>> =
        events.iter().map(|e| if e.sequence % 2 == 0 { to_json(e) } else { to_single_object(e).unwrap() }).collect();
    payloads[40] = b"{not json".to_vec();
    assert!(payloads.len() >= DECODE_IN_PARALLEL_FROM, "the batch takes the two-thread path");
    let config = ScorerConfig::default();
    let topic = config.stream.kafka.topic(topics::TRAJECTORIES_PRODUCTION);
    let tp = TopicPartition::new(&topic, 0);
    let topology = Topology { input_partitions: HashMap::from([(topic.clone(), 1)]), output_partitions: 2 };
    let skipped = [5usize, 6, 61];
    let run = |prepare: bool| {
        let mut stage = ScorerStage::new(&config, &Registry::new(), topology.clone()).unwrap();
        let mut part = stage.open(&tp, 0, None).unwrap();
        let mut offsets = PartitionOffsets::default();
        let now = std::time::Instant::now();
        let msgs: Vec<InMessage<'_>> = payloads
            .iter()
            .zip(&events)
            .enumerate()
            .map(|(i, (p, e))| InMessage {
                topic: &topic,
                partition: 0,
                offset: i as i64,
                key: Some(e.run_id.as_bytes()),
                payload: p,
                timestamp: None,
                read_at: now,
            })
            .collect();
        if prepare {
            stage.prepare(&msgs);
        }
        let mut out = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            if skipped.contains(&i) {
                continue;
            }
            offsets.begin(m.offset);
            let (records, _) = stage.process(&mut part, &mut offsets, m);
            if prepare {
                // Its prepared event was used (and those of the skipped ones passed over).
                assert_eq!(stage.prepared.len(), msgs.len() - i - 1);
            }
            // Dead letters carry the time they were written.
            out.extend(records.into_iter().filter(|r| !r.topic.ends_with(topics::DLQ)).map(|r| (r.key, r.payload)));
        }
        out
    };
    let (ahead, inline) = (run(true), run(false));
    assert!(ahead.len() > 100, "{} records", ahead.len());
    assert_eq!(ahead, inline);
}
