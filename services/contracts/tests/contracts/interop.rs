//! Interoperability with an independent Avro implementation: fastavro (Python), installed by
//! `scripts/setup.sh` into `.octant/python`, driven through `tests/avro_interop.py`.
//!
//! - The Parsing Canonical Form and the CRC-64-AVRO fingerprint of every schema file (current
//!   and released) equal fastavro's.
//! - Records of every schema written by fastavro — single-object (header from fastavro's own
//!   fingerprint), Confluent-framed and plain binary — decode in Octant to the same values.
//! - Octant's single-object records of every schema are resolved by fastavro by their
//!   fingerprint and read back to the same values.
//! - Records with the pre-specification (legacy) fingerprint are still read, and counted; no
//!   other implementation can resolve them (which is why Octant stopped writing them).
//!
//! A missing Python or fastavro is a failure that says to run `scripts/setup.sh`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use octant_contracts::FingerprintKind;
use octant_contracts::codec::{KNOWN, to_single_object_with};
use serde_json::{Value, json};

use super::*;

const CONFLUENT_ID: u32 = 4242;

type BytesCheck = Box<dyn Fn(&Decoder, &[u8]) -> Result<(), String> + Send + Sync>;
type JsonCheck = Box<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// One sample of one contract: its JSON for fastavro, and a check of decoded bytes.
struct Case {
    file: &'static str,
    json: Value,
    octant: Vec<u8>,
    check: BytesCheck,
    check_json: JsonCheck,
}

fn case<T: Contract + PartialEq + std::fmt::Debug + Clone + Send + Sync + 'static>(value: T) -> Case {
    let (a, b) = (value.clone(), value.clone());
    Case {
        file: T::FILE,
        json: serde_json::to_value(&value).unwrap(),
        octant: to_single_object_with(&value, FingerprintKind::Standard).unwrap(),
        check: Box::new(move |d, bytes| match d.decode::<T>(bytes) {
            Ok(v) if v == a => Ok(()),
            Ok(v) => Err(format!("decoded to {v:?}, wrote {a:?}")),
            Err(e) => Err(format!("{} {e}", e.class())),
        }),
        check_json: Box::new(move |v| match serde_json::from_value::<T>(v.clone()) {
            Ok(x) if x == b => Ok(()),
            Ok(x) => Err(format!("fastavro read {x:?}, Octant wrote {b:?}")),
            Err(e) => Err(format!("fastavro's value does not fit {}: {e}", T::FULL_NAME)),
        }),
    }
}

/// Every schema with at least one sample (every optional part set in one of them).
fn cases() -> Vec<Case> {
    let mut out: Vec<Case> = events().into_iter().map(case).collect();
    // What real producers leave out: no task id, no usage (nullable since issue 38), no cost
    // (nullable since issue 40), no gold label, no permission (issue 45).
    for e in events() {
        if let Some(s) = &e.run_started {
            out.push(case(TrajectoryEvent { run_started: Some(Box::new(RunStarted { task_id: None, ..(**s).clone() })), ..e.clone() }));
            // A harness's answer to a re-run request (added after v1).
            out.push(case(TrajectoryEvent {
                run_started: Some(Box::new(RunStarted { rerun_of: Some("run-7".into()), ..(**s).clone() })),
                ..e.clone()
            }));
            // No approval source or evidence (added after v1: producers writing Octant's schema).
            out.push(case(TrajectoryEvent {
                run_started: Some(Box::new(RunStarted { approval_source: None, approval_evidence: None, ..(**s).clone() })),
                ..e.clone()
            }));
        }
        if let Some(end) = &e.run_ended {
            // No fault outcome reported (added after v1).
            out.push(case(TrajectoryEvent { run_ended: Some(Box::new(RunEnded { faults: None, ..(**end).clone() })), ..e.clone() }));
        }
        if let Some(st) = &e.step {
            out.push(case(TrajectoryEvent { step: Some(Box::new(Step { tokens: None, ..(**st).clone() })), ..e.clone() }));
            out.push(case(TrajectoryEvent { step: Some(Box::new(Step { cost: None, ..(**st).clone() })), ..e.clone() }));
            // Unlabelled (the gold "needs a human" label, added after v1).
            out.push(case(TrajectoryEvent { step: Some(Box::new(Step { needs_human: None, ..(**st).clone() })), ..e.clone() }));
            // No permission logged (added after v1).
            out.push(case(TrajectoryEvent { step: Some(Box::new(Step { permission: None, ..(**st).clone() })), ..e.clone() }));
            // Nobody looked for a prompt-injection attempt (added after v1).
            out.push(case(TrajectoryEvent { step: Some(Box::new(Step { injection_attempt: None, ..(**st).clone() })), ..e.clone() }));
            // No tool call id logged (added after v1).
            out.push(case(TrajectoryEvent { step: Some(Box::new(Step { tool_call_id: None, ..(**st).clone() })), ..e.clone() }));
        }
    }
    out.push(case(observation()));
    out.push(case(Observation { task_family: Some("verifiable_executor".into()), agent_id: Some("planner".into()), ..observation() }));
    out.push(case(window()));
    out.push(case(MetricWindow { slice_kind: Some("agent".into()), slice: Some("planner".into()), ..window() }));
    out.push(case(dimension_profile()));
    out.push(case(alert()));
    out.push(case(profile()));
    out.push(case(watermark()));
    out.push(case(Watermark { watermark: None, idle: true, ..watermark() }));
    out.push(case(dead_letter()));
    // A re-run's unit (added after v1) and the request for a re-run, with every optional part
    // set and with none.
    out.push(case(Observation { rerun_of: Some("run-7".into()), ..observation() }));
    let request = ReRunRequest {
        request_id: ReRunRequest::id_of("run-7"),
        run_id: "run-7".into(),
        system_id: "agent-a".into(),
        system_version: "1.2.0".into(),
        config_hash: "cfg-1".into(),
        source: "evaluation".into(),
        task_id: Some("webtasks-v2-task-3".into()),
        benchmark: Some("webtasks-v2".into()),
        environment_version: Some("webtasks-v2-env 1.2.0".into()),
        task_spec: Some("webtasks-v2-task-3@v2".into()),
        agent_config: Some("prompt@4".into()),
        decoding: Some(r#"{"temperature":0.2}"#.into()),
        seed: Some(42),
        reason: "veto_adjacent".into(),
        period: "24h".into(),
        run_time: 1_764_000_000_000,
        requested_at: 1_764_000_100_000,
    };
    out.push(case(request.clone()));
    out.push(case(ReRunRequest {
        task_id: None,
        benchmark: None,
        environment_version: None,
        task_spec: None,
        agent_config: None,
        decoding: None,
        seed: None,
        ..request
    }));
    out
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the fastavro side once for every test of this module.
struct Fastavro {
    cases: Vec<Case>,
    answer: Value,
}

static FASTAVRO: LazyLock<Fastavro> = LazyLock::new(|| {
    let site = repo_root().join(".octant/python");
    assert!(
        site.join("fastavro").is_dir(),
        "fastavro is not installed in {}: run scripts/setup.sh (it installs PyPI fastavro for the interoperability tests)",
        site.display()
    );
    let cases = cases();
    let request = json!({
        "schemas_dir": schemas_dir(),
        "write": cases.iter().map(|c| json!({"file": c.file, "json": c.json, "confluent_id": CONFLUENT_ID})).collect::<Vec<_>>(),
        "read": cases.iter().map(|c| hex(&c.octant)).collect::<Vec<_>>(),
    });
    let mut child = Command::new("python3")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/avro_interop.py"))
        .env("PYTHONPATH", &site)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (the interoperability tests need Python 3 and fastavro: scripts/setup.sh)");
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "avro_interop.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("avro_interop.py answers JSON");
    eprintln!("independent implementation: fastavro {}", answer["fastavro"]);
    Fastavro { cases, answer }
});

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn canonical_forms_and_fingerprints_equal_fastavros() {
    let fa = &*FASTAVRO;
    assert_eq!(KNOWN.len(), fa.answer["canonical"].as_object().unwrap().len(), "both saw every schema file");
    for k in KNOWN.iter() {
        assert_eq!(fa.answer["canonical"][k.path].as_str(), Some(k.canonical_form.as_str()), "canonical form of schemas/{}", k.path);
        assert_eq!(fa.answer["fingerprint"][k.path].as_str(), Some(hex(&k.fingerprint).as_str()), "fingerprint of schemas/{}", k.path);
    }
}

#[test]
fn records_written_by_fastavro_decode_in_every_framing() {
    let fa = &*FASTAVRO;
    let written = fa.answer["written"].as_array().unwrap();
    let mut failures = Vec::new();
    for (c, w) in fa.cases.iter().zip(written) {
        let framed = Decoder::new().with_confluent_id(CONFLUENT_ID, c.file).unwrap();
        let plain = Decoder::new().with_plain_binary(c.file).unwrap();
        for (framing, decoder, bytes) in [
            ("single-object", &framed, unhex(w["single_object"].as_str().unwrap())),
            ("Confluent", &framed, unhex(w["confluent"].as_str().unwrap())),
            ("plain binary", &plain, unhex(w["plain"].as_str().unwrap())),
        ] {
            if let Err(e) = (c.check)(decoder, &bytes) {
                failures.push(format!("{} {framing}: {e}", c.file));
            }
        }
        // fastavro's single-object header is the standard one, not a legacy one.
        let so = unhex(w["single_object"].as_str().unwrap());
        assert!(matches!(framed.writer_of(&so).unwrap().0, Framing::SingleObject), "{}", c.file);
    }
    assert!(failures.is_empty(), "{} of {} fastavro records not read:\n{}", failures.len(), 3 * fa.cases.len(), failures.join("\n"));
}

#[test]
fn octant_records_are_resolved_by_fastavro_by_fingerprint() {
    let fa = &*FASTAVRO;
    let read = fa.answer["read"].as_array().unwrap();
    let mut failures = Vec::new();
    for (c, r) in fa.cases.iter().zip(read) {
        match r["path"].as_str() {
            Some(path) if path == c.file => {
                if let Err(e) = (c.check_json)(&r["json"]) {
                    failures.push(format!("{}: {e}", c.file));
                }
            }
            other => failures.push(format!("{}: fastavro resolved the fingerprint to {other:?}", c.file)),
        }
    }
    assert!(failures.is_empty(), "{} of {} Octant records not read by fastavro:\n{}", failures.len(), fa.cases.len(), failures.join("\n"));
}

#[test]
fn legacy_fingerprints_are_read_counted_and_unknown_elsewhere() {
    let fa = &*FASTAVRO;
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let d = Decoder::new().on_legacy(Arc::new(move || {
        counter.fetch_add(1, Ordering::Relaxed);
    }));
    let standard_fps: Vec<&str> = fa.answer["fingerprint"].as_object().unwrap().values().filter_map(Value::as_str).collect();
    for c in &fa.cases {
        let known = KNOWN.iter().find(|k| k.path == c.file).unwrap();
        assert_ne!(known.legacy_fingerprint, known.fingerprint, "{}: every Octant schema has a logical type", c.file);
        // No other implementation knows the legacy fingerprint.
        assert!(!standard_fps.contains(&hex(&known.legacy_fingerprint).as_str()), "{}", c.file);
        let mut legacy = c.octant.clone();
        legacy[2..10].copy_from_slice(&known.legacy_fingerprint);
        assert!(matches!(d.writer_of(&legacy).unwrap().0, Framing::SingleObjectLegacy));
        (c.check)(&d, &legacy).unwrap_or_else(|e| panic!("{} legacy: {e}", c.file));
        (c.check)(&d, &c.octant).unwrap_or_else(|e| panic!("{} standard: {e}", c.file));
    }
    assert_eq!(seen.load(Ordering::Relaxed), fa.cases.len(), "one count per legacy record, none for standard ones");
}

#[test]
fn writers_use_the_standard_fingerprint_unless_told_otherwise() {
    let o = observation();
    let known = Observation::known();
    assert_eq!(&to_single_object(&o).unwrap()[2..10], &known.fingerprint, "the default");
    assert_eq!(&to_single_object_with(&o, FingerprintKind::Legacy).unwrap()[2..10], &known.legacy_fingerprint);
}
