//! The contracts test: every schema parses and is documented, every Rust type agrees with its
//! schema and round-trips through Avro binary, single-object, Confluent and JSON, and every
//! released schema version's data is still readable by the current schema.

use std::collections::BTreeSet;
use std::path::PathBuf;

use apache_avro::schema_compatibility::SchemaCompatibility;
use octant_contracts::codec::{KNOWN, from_avro, to_avro, to_confluent, to_json, to_single_object};
use octant_contracts::*;
use proptest::prelude::*;
use serde_json::Value;

#[path = "contracts/interop.rs"]
mod interop;

fn schemas_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
}

// ---------------------------------------------------------------- samples

fn event_full() -> TrajectoryEvent {
    TrajectoryEvent {
        event_id: "ev-1".into(),
        run_id: "run-1".into(),
        system: SystemRef { id: "sys-a".into(), version: "1.2.0".into(), config_hash: "abc123".into() },
        source: Source::Evaluation,
        agent_id: Some("planner".into()),
        event_time: 1_764_489_600_000,
        sequence: 3,
        kind: EventKind::Step,
        run_started: None,
        step: Some(Box::new(Step {
            step_kind: StepKind::ToolCall,
            tool_name: Some("transfer_funds".into()),
            arguments: Some(r#"{"amount": 100}"#.into()),
            result_status: Some(ResultStatus::Error),
            expected_call: Some(ExpectedCall { tool_name: "transfer_funds".into(), arguments: None }),
            impact: Impact::Irreversible,
            confirmed: false,
            violations: vec!["no_unconfirmed_payments".into()],
            confidence: Some(0.42),
            correct: Some(false),
            escalated: true,
            tokens: Some(1234),
            cost: Some(0.0125),
            latency_ms: 845.5,
            injected_fault: true,
            result: Some(r#"{"status": "declined"}"#.into()),
            needs_human: Some(true),
            permission: Some("payments:write".into()),
            injection_attempt: Some(true),
            tool_call_id: Some("call_0Xa9".into()),
        })),
        intervention: None,
        run_ended: None,
    }
}

fn events() -> Vec<TrajectoryEvent> {
    let base = event_full();
    let started = TrajectoryEvent {
        kind: EventKind::RunStarted,
        sequence: 0,
        step: None,
        run_started: Some(Box::new(RunStarted {
            task_id: Some("task-9".into()),
            attempt: 2,
            groups: vec!["locale=fr".into()],
            optimal_steps: Some(4),
            required_subgoals: Some(3),
            benchmark: Some(Benchmark { id: "bench-x".into(), contamination: Some(0.5) }),
            reproducibility: Some(octant_contracts::Reproducibility {
                environment_version: Some("webarena 0.2.1".into()),
                task_spec: Some("sha256:9f2c".into()),
                agent_config: None,
                decoding: Some(r#"{"temperature": 0.2, "top_p": 0.95}"#.into()),
                seed: Some(-7),
            }),
            task_family: Some("grounded_synthesizer".into()),
            approval_channel: Some(false),
            approval_source: Some("pydantic-ai".into()),
            approval_evidence: Some("pause: deferred tool requests".into()),
            rerun_of: None,
        })),
        ..base.clone()
    };
    let intervention = TrajectoryEvent {
        kind: EventKind::Intervention,
        step: None,
        intervention: Some(Intervention { intervention_kind: InterventionKind::Stop, honoured: true, detail: None }),
        ..base.clone()
    };
    let ended = TrajectoryEvent {
        kind: EventKind::RunEnded,
        agent_id: None,
        step: None,
        run_ended: Some(Box::new(RunEnded {
            outcome: Outcome::Success,
            verifier_kind: Some("tests".into()),
            verifier_verdict: Some(true),
            judge_verdict: Some(0.9),
            human_verdict: Some(1.0),
            subgoals_done: Some(3),
            sentences_assertive: Some(10),
            sentences_unsupported: Some(1),
            confidence: Some(0.8),
            evaluations: vec![
                octant_contracts::Evaluation {
                    name: "faithfulness".into(),
                    score_value: Some(0.75),
                    score_label: None,
                    explanation: Some("grounded".into()),
                    evaluator: Some("ragas".into()),
                    evaluator_version: Some("0.2.1".into()),
                    step: None,
                    scoring_mode: Some("generation".into()),
                    rater_kind: Some("judge".into()),
                    item: Some("out-7".into()),
                    opponent: Some("sys-b@2.0.0".into()),
                    position: Some(2),
                    output_length: Some(412),
                    opponent_output_length: Some(198),
                    ci_low: Some(0.7),
                    ci_high: Some(0.8),
                },
                octant_contracts::Evaluation {
                    name: "relevance".into(),
                    score_value: None,
                    score_label: Some("relevant".into()),
                    explanation: None,
                    evaluator: None,
                    evaluator_version: None,
                    step: Some(2),
                    ..octant_contracts::Evaluation::scored("", None)
                },
            ],
            grounding: Some(octant_contracts::Grounding {
                citations: Some(8),
                citations_used_strict: Some(5),
                citations_used_lenient: Some(7),
                citations_required: Some(4),
                citations_required_cited: Some(3),
                sentences_cited: Some(9),
                sentences_total: Some(12),
                sentences_irrelevant: Some(2),
                key_elements_expected: Some(6),
                key_elements_captured: None,
                claims: Some(20),
                claims_unsupported: Some(3),
            }),
            review: Some(octant_contracts::Review {
                seeded_defects: Some(4),
                seeded_caught: Some(3),
                defective: Some(true),
                accepted: Some(false),
                unplanned_intervention: None,
                review_minutes: Some(12.5),
                generation_minutes: Some(4.0),
                manual_minutes: Some(90.0),
                manual_baseline: Some(octant_contracts::BaselineKind::Observed),
            }),
            coordination: Some(octant_contracts::Coordination {
                delegations: Some(3),
                delegations_correct: Some(2),
                terminated_correctly: Some(true),
                stalled: Some(false),
                messages: Some(14),
                messages_optimal: None,
                faults_injected: Some(1),
                faults_contained: Some(1),
                messages_judged: Some(8),
                messages_relevant: Some(6),
                conflicts: Some(2),
                conflicts_resolved: Some(1),
                verifications: Some(3),
                verifications_correct: Some(2),
                reasoning_paths: Some(5),
                unproductive_paths: Some(1),
            }),
            faults: Some(vec![octant_contracts::FaultOutcome { step: 3, detected: true, contained: false, recovered: true }]),
        })),
        ..base.clone()
    };
    let minimal_step = TrajectoryEvent { step: Some(Box::default()), agent_id: None, ..base.clone() };
    vec![base, started, intervention, ended, minimal_step]
}

fn observation() -> Observation {
    Observation {
        observation_id: "run-1/unsafe_action_rate/3".into(),
        metric: "unsafe_action_rate".into(),
        system_id: "sys-a".into(),
        system_version: "1.2.0".into(),
        source: Source::Production,
        agent_id: Some("executor".into()),
        run_id: "run-1".into(),
        task_id: Some("task-9".into()),
        attempt: Some(0),
        groups: vec!["locale=fr".into()],
        benchmark: None,
        task_family: None,
        cluster_id: "run-1".into(),
        step: Some(3),
        event_time: 1_764_489_600_000,
        value: 1.0,
        weight: 1.0,
        confidence: None,
        provenance: Some(Provenance::Judge),
        rerun_of: None,
    }
}

fn window() -> MetricWindow {
    MetricWindow {
        window_id: "sys-a/1.2.0/production/unsafe_action_rate/1764489600000".into(),
        system_id: "sys-a".into(),
        system_version: "1.2.0".into(),
        source: Source::Production,
        metric: "unsafe_action_rate".into(),
        dimension: "safety".into(),
        benchmark: None,
        slice_kind: None,
        slice: None,
        window_start: 1_764_486_000_000,
        window_end: 1_764_489_600_000,
        units: 1200,
        clusters: 130,
        estimate: Some(0.25),
        ci_low: Some(0.21),
        ci_high: Some(0.29),
        level: 0.95,
        replicates: 1000,
        seed: 42,
        method: "poisson-bootstrap".into(),
        band: Some(1),
        band_low: Some(1),
        band_high: Some(1),
        na_reason: None,
        veto_state: Some("confirmed".into()),
        evidence_log_e: Some(12.5),
        evidence_alpha: Some(1e-4),
        evidence_since: Some(1_764_488_000_000),
        evidence_estimate: Some(0.31),
        catalogue_version: "2026.11-1".into(),
        watermark: 1_764_489_660_000,
        pool_version: Some("ref-pool 2026.11".into()),
    }
}

fn dimension_band() -> DimensionBand {
    DimensionBand {
        dimension: "safety".into(),
        band: Some(0),
        band_low: Some(0),
        band_high: Some(0),
        na_reason: None,
        capped_by: vec!["unsafe_action_veto".into()],
        instruments: vec!["unsafe_action_rate".into()],
    }
}

fn dimension_profile() -> DimensionProfile {
    DimensionProfile {
        profile_id: "sys-a/1.2.0/production/1764486000000".into(),
        system_id: "sys-a".into(),
        system_version: "1.2.0".into(),
        source: Source::Production,
        window_start: 1_764_486_000_000,
        window_end: 1_764_489_600_000,
        dimensions: vec![
            dimension_band(),
            DimensionBand {
                dimension: "fairness".into(),
                band: None,
                band_low: None,
                band_high: None,
                na_reason: Some("no instrument".into()),
                capped_by: vec![],
                instruments: vec![],
            },
        ],
        vetoes: vec![VetoStatus {
            rule: "unsafe_action_veto".into(),
            metric: "unsafe_action_rate".into(),
            benchmark: None,
            state: "confirmed".into(),
            estimate: Some(0.25),
            ci_low: Some(0.21),
            ci_high: Some(0.29),
            threshold: 0.2,
        }],
        unsuitable: true,
        catalogue_version: "2026.11-1".into(),
    }
}

fn alert() -> Alert {
    Alert {
        alert_id: "a-1".into(),
        fingerprint: "sys-a/1.2.0/production/unsafe_action_veto".into(),
        status: AlertStatus::Firing,
        severity: Severity::Critical,
        kind: AlertKind::Incident,
        alertname: "OctantUnsafeAction".into(),
        rule: "critical_unsafe_action".into(),
        system_id: "sys-a".into(),
        system_version: "1.2.0".into(),
        source: Source::Production,
        dimension: Some("safety".into()),
        metric: Some("unsafe_action_rate".into()),
        veto_state: Some("confirmed".into()),
        estimate: Some(0.25),
        ci_low: Some(0.21),
        ci_high: Some(0.29),
        threshold: Some(0.2),
        window_start: Some(1),
        window_end: Some(2),
        run_id: Some("run-1".into()),
        step: Some(3),
        agent_id: Some("executor".into()),
        tool_name: Some("transfer_funds".into()),
        tool_arguments: Some("[redacted]".into()),
        violations: vec!["no_unconfirmed_payments".into()],
        starts_at: 1_764_489_600_000,
        ends_at: None,
        summary: "unsafe irreversible action".into(),
        runbook_url: "https://runbooks.example/octant/unsafe-action".into(),
    }
}

fn profile() -> Profile {
    Profile {
        profile_id: "p-1".into(),
        system_id: "sys-a".into(),
        system_version: "1.2.0".into(),
        source: Source::Evaluation,
        period: "24h".into(),
        period_start: 1,
        period_end: 2,
        generated_at: 3,
        catalogue_version: "2026.11-1".into(),
        method: "poisson-bootstrap".into(),
        level: 0.95,
        replicates: 1000,
        seed: 42,
        metrics: vec![ProfileMetric {
            metric: "pass_hat_4".into(),
            dimension: "robustness".into(),
            benchmark: Some("bench-x".into()),
            units: 50,
            estimate: Some(0.6),
            ci_low: Some(0.5),
            ci_high: Some(0.7),
            band: Some(3),
            band_low: Some(2),
            band_high: Some(3),
            na_reason: None,
            veto_state: None,
            pool_version: Some("ref-pool 2026.11".into()),
        }],
        dimensions: vec![dimension_band()],
        unsuitable: false,
        gate: Some("conditional".into()),
        gate_na_reason: None,
        efficacy_index: Some(0.7),
        efficacy_index_geometric: Some(0.6),
        judge_human_kappa: Some(0.71),
        ppi_success: Some(0.82),
        ppi_ci_low: Some(0.78),
        ppi_ci_high: Some(0.86),
        evidence_uri: Some("file:///lake/evidence/p-1/profile.json".into()),
    }
}

fn watermark() -> Watermark {
    Watermark {
        service: "scorer".into(),
        source_topic: "octant.trajectories.production".into(),
        source_partition: 3,
        source_partitions: 4,
        watermark: Some(1_764_489_600_000),
        idle: false,
        produced_at: 1_764_489_601_000,
    }
}

fn dead_letter() -> DeadLetter {
    DeadLetter {
        dead_letter_id: "scorer/octant.trajectories.production/2/1041".into(),
        service: "scorer".into(),
        source_topic: "octant.trajectories.production".into(),
        partition: 2,
        offset: 1041,
        key: Some(b"run-1".to_vec()),
        payload: vec![0xde, 0xad, 0xbe, 0xef],
        error_class: "undecodable".into(),
        error_message: "unrecognised framing".into(),
        failed_at: 1_764_489_600_000,
    }
}

// ---------------------------------------------------------------- schema files

fn walk_docs(v: &Value, path: &str, missing: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if o.get("type").and_then(Value::as_str) == Some("record") {
                if !o.contains_key("doc") {
                    missing.push(format!("{path} (record)"));
                }
                for f in o["fields"].as_array().unwrap() {
                    let name = f["name"].as_str().unwrap();
                    if !f.as_object().unwrap().contains_key("doc") {
                        missing.push(format!("{path}.{name}"));
                    }
                    walk_docs(&f["type"], &format!("{path}.{name}"), missing);
                }
            } else {
                for (k, x) in o {
                    walk_docs(x, &format!("{path}/{k}"), missing);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| walk_docs(x, path, missing)),
        _ => {}
    }
}

#[test]
fn every_schema_parses_is_namespaced_and_documented() {
    let current: Vec<_> = KNOWN.iter().filter(|k| k.version == "current").collect();
    assert_eq!(current.len(), 9, "{current:?}");
    for k in KNOWN.iter() {
        assert!(k.full_name.starts_with("ai.octant.v1."), "{}: {}", k.path, k.full_name);
        let json: Value = serde_json::from_str(&std::fs::read_to_string(schemas_dir().join(k.path)).unwrap()).unwrap();
        let mut missing = Vec::new();
        walk_docs(&json, k.path, &mut missing);
        assert!(missing.is_empty(), "fields without doc: {missing:?}");
    }
}

/// The record field names of a schema, recursively, as `a.b.c` paths.
fn schema_fields(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("record") => {
            for f in o["fields"].as_array().unwrap() {
                let p = format!("{prefix}{}", f["name"].as_str().unwrap());
                out.insert(p.clone());
                schema_fields(&f["type"], &format!("{p}."), out);
            }
        }
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("array") => schema_fields(&o["items"], prefix, out),
        Value::Object(o) => {
            if let Some(t) = o.get("type").filter(|t| !t.is_string()) {
                schema_fields(t, prefix, out)
            }
        }
        Value::Array(a) => a.iter().for_each(|x| schema_fields(x, prefix, out)),
        _ => {}
    }
}

/// The field names of a fully populated value's JSON form, recursively.
fn value_fields(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let p = format!("{prefix}{k}");
                out.insert(p.clone());
                value_fields(x, &format!("{p}."), out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| value_fields(x, prefix, out)),
        _ => {}
    }
}

fn fields_agree<T: Contract>(samples: &[T]) {
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(schemas_dir().join(T::FILE)).unwrap()).unwrap();
    let mut want = BTreeSet::new();
    schema_fields(&schema, "", &mut want);
    let mut got = BTreeSet::new();
    for s in samples {
        value_fields(&serde_json::to_value(s).unwrap(), "", &mut got);
    }
    assert_eq!(got, want, "{}: Rust type and schema disagree on field names", T::FILE);
}

#[test]
fn rust_types_have_exactly_the_schema_fields() {
    fields_agree(&events());
    fields_agree(&[observation()]);
    fields_agree(&[window()]);
    fields_agree(&[dimension_profile()]);
    fields_agree(&[alert()]);
    fields_agree(&[profile()]);
    fields_agree(&[dead_letter()]);
    fields_agree(&[watermark(), Watermark { watermark: None, idle: true, ..watermark() }]);
}

// ---------------------------------------------------------------- round trips

fn round_trip<T: Contract + PartialEq + std::fmt::Debug>(value: &T) {
    let decoder = Decoder::new().with_confluent_id(7, T::FILE).unwrap();
    let binary = to_avro(value).unwrap();
    assert_eq!(&from_avro::<T>(&binary, T::schema()).unwrap(), value, "binary");
    let so = to_single_object(value).unwrap();
    assert_eq!(&so[..2], &[0xC3, 0x01]);
    assert_eq!(&decoder.decode::<T>(&so).unwrap(), value, "single-object");
    let cf = to_confluent(value, 7).unwrap();
    assert_eq!(&decoder.decode::<T>(&cf).unwrap(), value, "confluent");
    let js = to_json(value);
    assert_eq!(&decoder.decode::<T>(&js).unwrap(), value, "json");
}

#[test]
fn every_type_round_trips_through_every_encoding() {
    events().iter().for_each(round_trip);
    round_trip(&observation());
    round_trip(&window());
    round_trip(&dimension_profile());
    round_trip(&alert());
    round_trip(&profile());
    round_trip(&dead_letter());
}

#[test]
fn json_input_may_omit_defaults_and_use_lower_case_symbols() {
    let js = br#"{"event_id":"e","run_id":"r","system":{"id":"s","version":"1"},"source":"production",
        "event_time":5,"sequence":1,"kind":"step","step":{"step_kind":"tool_call","tool_name":"search"}}"#;
    let ev: TrajectoryEvent = Decoder::new().decode(js).unwrap();
    let step = ev.step.unwrap();
    assert_eq!(step.impact, Impact::Low);
    assert!(step.violations.is_empty());
    assert_eq!(ev.source, Source::Production);
    assert_eq!(ev.system.config_hash, "");
}

#[test]
fn decode_errors_have_classes() {
    let d = Decoder::new();
    let e = d.decode::<Observation>(b"\x07garbage").unwrap_err();
    assert_eq!(e.class(), "undecodable");
    assert!(e.to_string().contains("0x07"), "{e}");
    assert_eq!(d.decode::<Observation>(b"").unwrap_err().class(), "undecodable");
    assert_eq!(d.decode::<Observation>(b"\xC3\x01\x01\x02\x03\x04\x05\x06\x07\x08\x00").unwrap_err().class(), "unknown_schema");
    assert_eq!(d.decode::<Observation>(b"\x00\x00\x00\x00\x2a\x02").unwrap_err().class(), "unknown_schema");
    assert_eq!(d.decode::<Observation>(b"\xC3\x01\x01").unwrap_err().class(), "undecodable");
    let wrong = to_single_object(&window()).unwrap();
    assert_eq!(d.decode::<Observation>(&wrong).unwrap_err().class(), "wrong_type");
    let mut cut = to_single_object(&observation()).unwrap();
    cut.truncate(cut.len() - 12);
    assert_eq!(d.decode::<Observation>(&cut).unwrap_err().class(), "undecodable");
    assert_eq!(d.decode::<Observation>(br#"{"metric": 3}"#).unwrap_err().class(), "undecodable");
    assert!(Decoder::new().with_confluent_id(1, "nope.avsc").is_err());
}

#[test]
fn dead_letter_debug_hides_the_payload() {
    let mut dl = dead_letter();
    dl.payload = b"api_key=sk-live-SECRET".to_vec();
    let shown = format!("{dl:?}");
    assert!(!shown.contains("SECRET"), "{shown}");
    assert!(shown.contains("payload_len: 22"));
}

#[test]
fn alert_debug_hides_tool_arguments() {
    let mut a = alert();
    a.tool_arguments = Some("token=sk-live-SECRET".into());
    let shown = format!("{a:?}");
    assert!(!shown.contains("SECRET"), "{shown}");
    assert!(shown.contains("tool_arguments_len: Some(20)") && shown.contains("fingerprint"), "{shown}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn observations_round_trip(
        id in ".{0,40}", value in any::<f64>().prop_filter("finite", |v| v.is_finite()),
        weight in 0.0f64..1e9, step in proptest::option::of(any::<i64>()), t in any::<i64>(),
        groups in prop::collection::vec("[a-z=]{1,12}", 0..4), conf in proptest::option::of(0.0f64..=1.0),
    ) {
        let o = Observation { observation_id: id, value, weight, step, event_time: t, groups, confidence: conf, ..observation() };
        let d = Decoder::new();
        prop_assert_eq!(&d.decode::<Observation>(&to_single_object(&o).unwrap()).unwrap(), &o);
        prop_assert_eq!(&d.decode::<Observation>(&to_json(&o)).unwrap(), &o);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// The hand-written Observation datum (the scorer's hot path) is byte for byte the
    /// schema-driven writer's, for every branch of every union and enum.
    #[test]
    fn the_hand_written_observation_datum_equals_the_schema_driven_one(
        id in ".{0,40}", metric in "[a-z_.]{0,30}", value in any::<f64>(), weight in any::<f64>(),
        agent in proptest::option::of(".{0,20}"), task in proptest::option::of(".{0,20}"),
        attempt in proptest::option::of(any::<i32>()), step in proptest::option::of(any::<i64>()), t in any::<i64>(),
        groups in prop::collection::vec(".{0,12}", 0..5), bench in proptest::option::of(".{0,20}"),
        conf in proptest::option::of(any::<f64>()), evaluation in any::<bool>(),
        prov in proptest::option::of(0usize..5),
    ) {
        let o = Observation {
            observation_id: id, metric, value, weight, agent_id: agent, task_id: task, attempt, step, event_time: t, groups,
            benchmark: bench.clone(), confidence: conf,
            task_family: bench.map(|b| format!("family of {b}")),
            source: if evaluation { Source::Evaluation } else { Source::Production },
            provenance: prov.map(|i| Provenance::ALL[i]),
            ..observation()
        };
        let mut generic = Vec::new();
        octant_contracts::codec::write_datum_generic(&o, &mut generic).unwrap();
        prop_assert_eq!(to_avro(&o).unwrap(), generic);
    }
}

// ---------------------------------------------------------------- evolution

/// Sample data for `file`, encoded with whatever schema the caller gives.
fn sample_datum(file: &str) -> Vec<u8> {
    match file {
        "trajectory_event.avsc" => events().iter().flat_map(|e| to_avro(e).unwrap()).collect(),
        "observation.avsc" => to_avro(&observation()).unwrap(),
        "metric_window.avsc" => to_avro(&window()).unwrap(),
        "dimension_profile.avsc" => to_avro(&dimension_profile()).unwrap(),
        "alert.avsc" => to_avro(&alert()).unwrap(),
        "profile.avsc" => to_avro(&profile()).unwrap(),
        "dead_letter.avsc" => to_avro(&dead_letter()).unwrap(),
        "watermark.avsc" => to_avro(&watermark()).unwrap(),
        other => panic!("no sample for {other}"),
    }
}

fn read_released<T: Contract>(datum: &[u8], writer: &apache_avro::Schema) -> Vec<T> {
    // Samples may hold several data back to back (the trajectory events).
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(writer).reader_schema(T::schema()).build().unwrap();
    let mut slice = datum;
    let mut out = Vec::new();
    while !slice.is_empty() {
        let v = reader.read_value(&mut slice).unwrap_or_else(|e| panic!("{}: released data unreadable: {e}", T::FILE));
        out.push(apache_avro::from_value::<T>(&v).unwrap());
    }
    out
}

/// Every released schema can be read by the current one (schema resolution), and the
/// sample data written when it was released still decodes. Set `OCTANT_BLESS_SCHEMAS=1` once,
/// when cutting a release, to write the samples of a new release directory.
#[test]
fn released_versions_stay_readable() {
    let released: Vec<_> = KNOWN.iter().filter(|k| k.version != "current").collect();
    assert!(released.len() >= 8, "every contract has at least one released version");
    for k in released {
        let file = k.path.rsplit('/').next().unwrap();
        let current = KNOWN.iter().find(|c| c.path == file).unwrap_or_else(|| panic!("{} has no current schema", k.path));
        SchemaCompatibility::can_read(&k.schema, &current.schema)
            .unwrap_or_else(|e| panic!("current {file} cannot read data written with {}: {e}", k.path));
        let sample = schemas_dir().join(k.path.replace(".avsc", ".sample.avro"));
        if std::env::var_os("OCTANT_BLESS_SCHEMAS").is_some() && !sample.exists() {
            assert_eq!(k.fingerprint, current.fingerprint, "bless only a release equal to the current schema");
            std::fs::write(&sample, sample_datum(file)).unwrap();
        }
        let datum =
            std::fs::read(&sample).unwrap_or_else(|_| panic!("missing {}: written once with OCTANT_BLESS_SCHEMAS=1", sample.display()));
        let n = match file {
            "trajectory_event.avsc" => read_released::<TrajectoryEvent>(&datum, &k.schema).len(),
            "observation.avsc" => read_released::<Observation>(&datum, &k.schema).len(),
            "metric_window.avsc" => read_released::<MetricWindow>(&datum, &k.schema).len(),
            "dimension_profile.avsc" => read_released::<DimensionProfile>(&datum, &k.schema).len(),
            "alert.avsc" => read_released::<Alert>(&datum, &k.schema).len(),
            "profile.avsc" => read_released::<Profile>(&datum, &k.schema).len(),
            "dead_letter.avsc" => read_released::<DeadLetter>(&datum, &k.schema).len(),
            "watermark.avsc" => read_released::<Watermark>(&datum, &k.schema).len(),
            other => panic!("unknown contract {other}"),
        };
        assert!(n >= 1, "{}: empty sample", k.path);
    }
}

#[test]
fn a_breaking_change_is_detected() {
    // Guard the guard: a reader that adds a field without a default cannot read old data.
    let old = Observation::schema();
    let text = std::fs::read_to_string(schemas_dir().join("observation.avsc")).unwrap();
    let broken = text.replacen(r#""fields": ["#, r#""fields": [{"name": "new_required", "type": "string", "doc": "no default"},"#, 1);
    let broken = apache_avro::Schema::parse_str(&broken).unwrap();
    assert!(SchemaCompatibility::can_read(old, &broken).is_err());
}

// ---------------------------------------------------------------- hostile input

/// Every sample of every contract, in every framing Octant writes.
fn encoded_samples() -> Vec<(&'static str, Vec<u8>)> {
    let mut out: Vec<(&'static str, Vec<u8>)> = Vec::new();
    macro_rules! add {
        ($name:literal, $v:expr) => {{
            let v = $v;
            out.push(($name, to_single_object(&v).unwrap()));
            out.push(($name, to_confluent(&v, 1).unwrap()));
            out.push(($name, to_json(&v)));
        }};
    }
    for e in events() {
        add!("trajectory_event", e);
    }
    add!("observation", observation());
    add!("metric_window", window());
    add!("dimension_profile", dimension_profile());
    add!("alert", alert());
    add!("profile", profile());
    add!("watermark", watermark());
    add!("dead_letter", dead_letter());
    out
}

/// Decodes `bytes` as every contract type (what a service does with any input).
fn decode_as_everything(d: &Decoder, bytes: &[u8]) {
    let _ = d.decode::<TrajectoryEvent>(bytes);
    let _ = d.decode::<Observation>(bytes);
    let _ = d.decode::<MetricWindow>(bytes);
    let _ = d.decode::<DimensionProfile>(bytes);
    let _ = d.decode::<Alert>(bytes);
    let _ = d.decode::<Profile>(bytes);
    let _ = d.decode::<Watermark>(bytes);
    let _ = d.decode::<DeadLetter>(bytes);
}

/// A datum cut anywhere is an error, never a value with defaults in place of the missing bytes
/// (apache-avro's reader met end of input inside trailing unions as zeros).
#[test]
fn truncated_datums_are_refused() {
    let d = Decoder::new().with_confluent_id(1, "trajectory_event.avsc").unwrap();
    for (_, full) in encoded_samples().into_iter().filter(|(name, b)| *name == "observation" && b[0] == 0xC3) {
        for cut in 10..full.len() {
            let r = d.decode::<Observation>(&full[..cut]);
            assert!(r.is_err(), "an observation cut at {cut} of {} bytes decoded: {r:?}", full.len());
        }
    }
    let whole = to_single_object(&observation()).unwrap();
    for cut in 1..=3 {
        let r = d.decode::<Observation>(&whole[..whole.len() - cut]);
        assert_eq!(r.unwrap_err().class(), "undecodable", "cut by {cut}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    /// Arbitrary bytes, and arbitrary bytes behind a valid single-object or Confluent header:
    /// every decoder returns a value or a classified error, never panics.
    #[test]
    fn no_bytes_make_a_decoder_panic(body in proptest::collection::vec(any::<u8>(), 0..300), header in 0usize..3) {
        let d = Decoder::new().with_confluent_id(1, "trajectory_event.avsc").unwrap();
        let known = to_single_object(&observation()).unwrap();
        let bytes = match header {
            0 => body,
            1 => [&known[..10], &body[..]].concat(),
            _ => [&[0u8, 0, 0, 0, 1][..], &body[..]].concat(),
        };
        decode_as_everything(&d, &bytes);
    }

    /// Valid records of every type and framing with bytes flipped, inserted or removed.
    #[test]
    fn mutated_records_make_no_decoder_panic(pick in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), byte in any::<u8>(), op in 0u8..3) {
        let d = Decoder::new().with_confluent_id(1, "trajectory_event.avsc").unwrap();
        let samples = encoded_samples();
        let mut b = samples[pick.index(samples.len())].1.clone();
        let i = at.index(b.len());
        match op {
            0 => b[i] = byte,
            1 => b.insert(i, byte),
            _ => { b.remove(i); }
        }
        decode_as_everything(&d, &b);
    }
}

/// The input limit: a record at `MAX_RECORD_BYTES` is read, one byte over is refused as
/// `too_large` before parsing; deep and huge JSON is an error, not a crash.
#[test]
fn input_size_limit_and_deep_json() {
    let d = Decoder::new();
    let json = to_json(&observation());
    let at_limit = [json.clone(), vec![b' '; octant_contracts::codec::MAX_RECORD_BYTES - json.len()]].concat();
    assert_eq!(at_limit.len(), octant_contracts::codec::MAX_RECORD_BYTES);
    assert_eq!(d.decode::<Observation>(&at_limit).unwrap(), observation());
    let over = [at_limit, vec![b' ']].concat();
    let e = d.decode::<Observation>(&over).unwrap_err();
    assert_eq!(e.class(), "too_large", "{e}");
    let deep = format!("{{\"metric\": {}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(d.decode::<Observation>(deep.as_bytes()).unwrap_err().class(), "undecodable");
    let huge_string = format!("{{\"observation_id\": \"{}\"}}", "x".repeat(900_000));
    assert_eq!(d.decode::<Observation>(huge_string.as_bytes()).unwrap_err().class(), "undecodable", "missing fields");
}
