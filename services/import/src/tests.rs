//! The importers on logs the harnesses wrote: Inspect AI's own eval logs (written by
//! `fixtures/inspect_task.py --fixtures fixtures/inspect` with the pinned inspect-ai; each with
//! Inspect's reading of it beside it), and τ-bench / τ²-bench files in their layouts
//! (`fixtures/make_tau_bench.py fixtures/tau`, with what their run scripts compute).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use octant_contracts::{EventKind, Outcome, ResultStatus, StepKind, TrajectoryEvent};
use octant_core::stats::passk::{pass_at_k, pass_hat_k};
use serde_json::Value;

use crate::ledger::{self, Entry, Plan};
use crate::{Import, ImportError, Options, inspect, tau};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(rel)
}

fn expected(rel: &str) -> Value {
    serde_json::from_slice(&std::fs::read(fixture(rel)).unwrap()).unwrap()
}

fn steps(import: &Import) -> impl Iterator<Item = &octant_contracts::Step> {
    import.runs.iter().flat_map(|r| &r.events).filter_map(|e| e.step.as_deref())
}

fn end(events: &[TrajectoryEvent]) -> &octant_contracts::RunEnded {
    events.last().and_then(|e| e.run_ended.as_deref()).expect("a run ends")
}

fn start(events: &[TrajectoryEvent]) -> &octant_contracts::RunStarted {
    events.first().and_then(|e| e.run_started.as_deref()).expect("a run starts")
}

/// Mean over tasks of the per-task estimator, over the runs' verifier verdicts.
fn per_task(import: &Import, k: u64, f: fn(u64, u64, u64) -> Option<f64>) -> f64 {
    let mut tasks: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in &import.runs {
        if let Some(v) = end(&r.events).verifier_verdict {
            let t = tasks.entry(start(&r.events).task_id.clone().unwrap()).or_default();
            t.0 += 1;
            t.1 += u64::from(v);
        }
    }
    let vals: Vec<f64> = tasks.values().filter_map(|(n, c)| f(*n, *c, k)).collect();
    vals.iter().sum::<f64>() / vals.len() as f64
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn inspect_logs_in_every_format_map_to_what_inspect_reads() {
    for name in ["arith.eval", "arith-deflate.eval", "arith.json"] {
        let import = inspect::read(&fixture(&format!("inspect/{name}")), &Options::default()).unwrap();
        let want = expected(&format!("inspect/{name}.expected.json"));
        let samples = want["samples"].as_array().unwrap();
        assert_eq!(import.runs.len(), samples.len(), "{name}: a run per sample and epoch");
        assert!(import.problems.is_empty(), "{name}: {:?}", import.problems);
        assert_eq!(import.id, format!("inspect:{}", want["task_id"].as_str().unwrap()));
        // Each run: the sample's id as task, its epoch as attempt, the deterministic scorer's
        // verdict (`match`: C is success) from the verifier.
        for s in samples {
            let (id, epoch) = (s["id"].as_str().unwrap(), s["epoch"].as_i64().unwrap());
            let run = import
                .runs
                .iter()
                .find(|r| start(&r.events).task_id.as_deref() == Some(id) && start(&r.events).attempt as i64 == epoch)
                .unwrap_or_else(|| panic!("{name}: no run for {id} epoch {epoch}"));
            let e = end(&run.events);
            assert_eq!(e.verifier_verdict, Some(s["scores"]["match"] == "C"), "{name} {id}/{epoch}");
            assert_eq!(e.verifier_kind.as_deref(), Some("inspect match"));
            assert_eq!(e.outcome, if s["scores"]["match"] == "C" { Outcome::Success } else { Outcome::Failure });
            let includes = e.evaluations.iter().find(|v| v.name == "includes").unwrap();
            assert_eq!(includes.rater_kind.as_deref(), Some("verifier"));
            assert_eq!(includes.score_label.as_deref(), s["scores"]["includes"].as_str());
            let graded = e.evaluations.iter().find(|v| v.name == "model_graded_qa").unwrap();
            assert_eq!(graded.rater_kind.as_deref(), Some("judge"));
            assert_eq!(e.judge_verdict, None, "the success scorer is match: no judge verdict");
            let st = start(&run.events);
            assert_eq!(st.benchmark.as_ref().unwrap().id, "arith");
            assert_eq!(run.events[0].system.id, "mockllm/model");
            assert!(run.events[0].system.version.starts_with("cfg-"));
            let rep = st.reproducibility.as_ref().unwrap();
            assert_eq!(rep.environment_version.as_deref(), Some("inspect_ai 0.3.285"));
            assert_eq!(st.approval_channel, Some(false), "no approval policy: gating is N/A");
        }
        // Tool calls and their errors, the agent's model calls and tokens (not the grader's, in
        // the scorers' span): as the log's events say. A model call has no result status (it
        // is no tool call).
        let tools: Vec<_> = steps(&import).filter(|s| s.step_kind == StepKind::ToolCall).collect();
        assert_eq!(tools.len() as i64, want["tool_calls"].as_i64().unwrap(), "{name}");
        let errors = tools.iter().filter(|s| s.result_status == Some(ResultStatus::Error)).count();
        assert_eq!(errors as i64, want["tool_errors"].as_i64().unwrap(), "{name}");
        assert!(tools.iter().all(|s| s.tool_name.as_deref() == Some("add") && s.arguments.as_deref().unwrap().contains("\"x\"")));
        let models: Vec<_> = steps(&import).filter(|s| s.step_kind == StepKind::ModelCall).collect();
        assert!(models.iter().all(|s| s.result_status.is_none()));
        assert_eq!(models.len() as i64, want["model_calls"].as_i64().unwrap());
        assert_eq!(models.iter().map(|s| s.tokens.unwrap()).sum::<i64>(), want["tokens"].as_i64().unwrap());
        // pass@k over epochs, the unbiased estimator Octant's windows use, equals Inspect's
        // pass_at reducers' accuracy; the mean reducer's accuracy is the success rate.
        let acc = &want["accuracy"]["match"];
        for k in [1u64, 2] {
            let inspect_k = acc[format!("pass_at_{k}")].as_f64().unwrap();
            assert!(close(per_task(&import, k, pass_at_k), inspect_k), "{name} pass@{k}");
        }
        let rate = import.runs.iter().filter(|r| end(&r.events).verifier_verdict == Some(true)).count() as f64 / import.runs.len() as f64;
        assert!(close(rate, acc["mean"].as_f64().unwrap()), "{name} accuracy");
        // Times: each run within the eval, events in order.
        for r in &import.runs {
            assert!(r.events.windows(2).all(|w| w[0].event_time <= w[1].event_time && w[0].sequence + 1 == w[1].sequence));
            assert!(r.events.iter().all(|e| e.event_id == format!("{}/{}", r.run_id, e.sequence)));
            assert!(r.events[0].event_time > 1_700_000_000_000);
        }
    }
}

/// The model-graded scorer as the success scorer: a judge verdict (its value), no verifier.
#[test]
fn a_judge_scorer_gives_judge_verdicts() {
    let want = expected("inspect/arith.eval.expected.json");
    let opts = Options { success_scorer: Some("model_graded_qa".into()), ..Options::default() };
    let import = inspect::read(&fixture("inspect/arith.eval"), &opts).unwrap();
    for r in &import.runs {
        let (st, e) = (start(&r.events), end(&r.events));
        let s = want["samples"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"].as_str() == st.task_id.as_deref() && s["epoch"].as_i64() == Some(st.attempt as i64))
            .unwrap();
        let graded = s["scores"]["model_graded_qa"] == "C";
        assert_eq!((e.verifier_verdict, e.judge_verdict), (None, Some(if graded { 1.0 } else { 0.0 })));
        assert_eq!(e.outcome, if graded { Outcome::Success } else { Outcome::Failure });
    }
    // A custom scorer named as a judge with a score outside [0, 1]: no verdict, a note.
    let mut log: Value = serde_json::from_slice(&std::fs::read(fixture("inspect/arith.json")).unwrap()).unwrap();
    for s in log["samples"].as_array_mut().unwrap() {
        s["scores"]["rubric"] = serde_json::json!({"value": 7});
    }
    let dir = tempdir("judge");
    let path = dir.join("rubric.json");
    std::fs::write(&path, serde_json::to_vec(&log).unwrap()).unwrap();
    let opts = Options {
        success_scorer: Some("rubric".into()),
        scorer_kinds: BTreeMap::from([("rubric".into(), crate::Rater::Judge)]),
        ..Options::default()
    };
    let import = inspect::read(&path, &opts).unwrap();
    assert!(import.runs.iter().all(|r| end(&r.events).judge_verdict.is_none() && end(&r.events).outcome == Outcome::Success));
    assert!(import.notes.iter().any(|n| n.contains("outside [0, 1]")), "{:?}", import.notes);
    // An unknown scorer: the outcome from its value, no verdict, and the command says so.
    let opts = Options { success_scorer: Some("rubric".into()), ..Options::default() };
    let import = inspect::read(&path, &opts).unwrap();
    assert!(import.runs.iter().all(|r| end(&r.events).verifier_verdict.is_none() && end(&r.events).judge_verdict.is_none()));
    assert!(import.notes.iter().any(|n| n.contains("--scorer rubric=verifier")), "{:?}", import.notes);
    let _ = std::fs::remove_dir_all(dir);
}

/// Seed 001's error rate reads ERROR as an exception: a sample's error ends its run as an
/// error, a limit it hit and a missing score as a failure (neither raised).
#[test]
fn only_a_sample_error_ends_a_run_as_an_error() {
    let mut log: Value = serde_json::from_slice(&std::fs::read(fixture("inspect/arith.json")).unwrap()).unwrap();
    let samples = log["samples"].as_array_mut().unwrap();
    assert!(samples.len() >= 3);
    samples[0]["error"] = serde_json::json!({"message": "RuntimeError: the sandbox died", "traceback": ""});
    samples[1]["limit"] = serde_json::json!({"type": "message", "limit": 10});
    samples[2]["scores"] = serde_json::json!({});
    let ids: Vec<(String, i64)> =
        samples.iter().take(3).map(|s| (s["id"].to_string().trim_matches('"').to_string(), s["epoch"].as_i64().unwrap_or(1))).collect();
    let dir = tempdir("errors");
    let path = dir.join("errors.json");
    std::fs::write(&path, serde_json::to_vec(&log).unwrap()).unwrap();
    let import = inspect::read(&path, &Options::default()).unwrap();
    let outcome = |k: usize| {
        let r = import
            .runs
            .iter()
            .find(|r| start(&r.events).task_id.as_deref() == Some(ids[k].0.as_str()) && start(&r.events).attempt as i64 == ids[k].1)
            .unwrap();
        (end(&r.events).outcome, end(&r.events).verifier_verdict)
    };
    assert_eq!(outcome(0).0, Outcome::Error, "a sample's error");
    assert_eq!(outcome(1).0, Outcome::Failure, "a limit");
    assert_eq!(outcome(2), (Outcome::Failure, None), "no score: a failure without a verdict");
    assert_eq!(import.runs.iter().filter(|r| end(&r.events).outcome == Outcome::Error).count(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_repository_address_loses_its_credentials() {
    assert_eq!(
        inspect::without_credentials("https://x-access-token:ghp_secret@github.com/org/evals.git"),
        "https://github.com/org/evals.git"
    );
    assert_eq!(inspect::without_credentials("https://github.com/org/evals.git"), "https://github.com/org/evals.git");
    assert_eq!(inspect::without_credentials("git@github.com:org/evals.git"), "git@github.com:org/evals.git");
}

#[test]
fn the_same_log_maps_to_the_same_events() {
    let path = fixture("inspect/arith.eval");
    let (a, b) = (inspect::read(&path, &Options::default()).unwrap(), inspect::read(&path, &Options::default()).unwrap());
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.runs.iter().flat_map(|r| &r.events).collect::<Vec<_>>(), b.runs.iter().flat_map(|r| &r.events).collect::<Vec<_>>());
    let opts =
        Options { system: Some("agent".into()), version: Some("v2".into()), benchmark: Some("arithmetic".into()), ..Options::default() };
    let c = inspect::read(&path, &opts).unwrap();
    assert_ne!(a.digest, c.digest, "overrides change the events");
    assert_eq!((c.runs[0].events[0].system.id.as_str(), c.runs[0].events[0].system.version.as_str()), ("agent", "v2"));
    assert_eq!(start(&c.runs[0].events).benchmark.as_ref().unwrap().id, "arithmetic");
}

/// A log with a sample Octant cannot read: that sample is a problem named by its record, the
/// others are imported.
#[test]
fn a_malformed_sample_is_reported_and_the_rest_goes_on() {
    let mut log: Value = serde_json::from_slice(&std::fs::read(fixture("inspect/arith.json")).unwrap()).unwrap();
    let n = log["samples"].as_array().unwrap().len();
    log["samples"][1] = serde_json::json!({"epoch": "second", "scores": {}});
    let dir = tempdir("malformed");
    let path = dir.join("bad.json");
    std::fs::write(&path, serde_json::to_vec(&log).unwrap()).unwrap();
    let import = inspect::read(&path, &Options::default()).unwrap();
    assert_eq!(import.runs.len(), n - 1);
    assert_eq!(import.problems.len(), 1);
    assert_eq!((import.problems[0].record.as_str(), import.problems[0].index), ("samples[1]", 1));
    assert!(import.problems[0].message.contains("without an id"), "{:?}", import.problems[0]);

    // Not a log at all, and a log still being written: refused with the file named.
    std::fs::write(dir.join("x.json"), b"[1, 2").unwrap();
    let err = inspect::read(&dir.join("x.json"), &Options::default()).unwrap_err();
    assert!(matches!(err, ImportError::Format { .. }) && err.to_string().contains("x.json"), "{err}");
    let running = dir.join("running.eval");
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&running).unwrap());
        z.start_file("_journal/start.json", zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored))
            .unwrap();
        std::io::Write::write_all(&mut z, b"{\"version\": 2}").unwrap();
        z.finish().unwrap();
    }
    let err = inspect::read(&running, &Options::default()).unwrap_err();
    assert!(matches!(&err, ImportError::Incomplete { status, .. } if status == "started"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Samples logged without events (older logs, or `log_samples` trimmed): the steps come from
/// the messages, with the same tool calls and errors.
#[test]
fn samples_without_events_map_from_their_messages() {
    let mut log: Value = serde_json::from_slice(&std::fs::read(fixture("inspect/arith.json")).unwrap()).unwrap();
    for s in log["samples"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("events");
    }
    let dir = tempdir("messages");
    let path = dir.join("no-events.json");
    std::fs::write(&path, serde_json::to_vec(&log).unwrap()).unwrap();
    let import = inspect::read(&path, &Options::default()).unwrap();
    let want = expected("inspect/arith.json.expected.json");
    let tools: Vec<_> = steps(&import).filter(|s| s.step_kind == StepKind::ToolCall).collect();
    assert_eq!(tools.len() as i64, want["tool_calls"].as_i64().unwrap());
    assert_eq!(tools.iter().filter(|s| s.result_status == Some(ResultStatus::Error)).count() as i64, want["tool_errors"].as_i64().unwrap());
    assert_eq!(steps(&import).filter(|s| s.step_kind == StepKind::ModelCall).count() as i64, want["model_calls"].as_i64().unwrap());
    assert!(steps(&import).all(|s| s.tokens.is_none()), "no usage without the model events: none, never 0");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn scores_read_as_inspect_reads_them() {
    use serde_json::json;
    for (v, x) in
        [(json!("C"), Some(1.0)), (json!("P"), Some(0.5)), (json!("I"), Some(0.0)), (json!(true), Some(1.0)), (json!("yes"), Some(1.0))]
    {
        assert_eq!(inspect::value_to_float(&v), x, "{v}");
    }
    assert_eq!(inspect::value_to_float(&json!(0.25)), Some(0.25));
    assert_eq!(inspect::value_to_float(&json!({"a": 1})), None);
    assert_eq!(inspect::value_to_float(&json!("maybe")), None);
    let declared = BTreeMap::from([("mine/rubric".to_string(), crate::Rater::Judge)]);
    assert_eq!(inspect::rater_of("inspect_ai/match", &declared), Some(crate::Rater::Verifier));
    assert_eq!(inspect::rater_of("model_graded_qa", &declared), Some(crate::Rater::Judge));
    assert_eq!(inspect::rater_of("mine/rubric", &declared), Some(crate::Rater::Judge));
    assert_eq!(inspect::rater_of("mine/other", &declared), None);
}

#[test]
fn tau_bench_results_map_to_its_own_metrics() {
    let want = expected("tau/expected.json");
    let err = tau::read(&fixture("tau/tau_bench_results.json"), &Options::default()).unwrap_err();
    assert!(err.to_string().contains("--system"), "τ-bench files name no agent: {err}");
    let opts = Options { system: Some("airline-agent".into()), start_ms: Some(1_796_000_000_000), ..Options::default() };
    let import = tau::read(&fixture("tau/tau_bench_results.json"), &opts).unwrap();
    let w = &want["tau_bench"];
    assert_eq!(import.runs.len() as i64, w["runs"].as_i64().unwrap());
    assert!(import.problems.is_empty());
    assert_eq!(import.id, "tau-bench:airline-agent@unversioned/tau_bench_results");
    for k in 1..=4u64 {
        assert!(close(per_task(&import, k, pass_hat_k), w["pass_hat"][k.to_string()].as_f64().unwrap()), "pass^{k}");
    }
    let tools: Vec<_> = steps(&import).filter(|s| s.step_kind == StepKind::ToolCall).collect();
    assert_eq!(tools.len() as i64, w["tool_calls"].as_i64().unwrap());
    assert_eq!(tools.iter().filter(|s| s.result_status == Some(ResultStatus::Error)).count() as i64, w["tool_errors"].as_i64().unwrap());
    // The expected actions: two per task; a successful run called both as expected.
    for r in &import.runs {
        let (st, e) = (start(&r.events), end(&r.events));
        assert_eq!(st.required_subgoals, Some(2));
        if e.verifier_verdict == Some(true) {
            assert_eq!(e.subgoals_done, Some(2), "{}", r.run_id);
        }
        assert!(steps_of(r).all(|s| s.tokens.is_none() && s.cost.is_none()), "τ-bench logs no usage: none, never 0");
    }
    // Stable: the same file, the same ids.
    assert_eq!(tau::read(&fixture("tau/tau_bench_results.json"), &opts).unwrap().digest, import.digest);
}

fn steps_of(r: &crate::Run) -> impl Iterator<Item = &octant_contracts::Step> {
    r.events.iter().filter_map(|e| e.step.as_deref())
}

#[test]
fn tau2_bench_results_map_to_its_own_metrics() {
    let want = &expected("tau/expected.json")["tau2_bench"];
    let import = tau::read(&fixture("tau/tau2_results.json"), &Options::default()).unwrap();
    assert_eq!(import.runs.len() as i64, want["runs"].as_i64().unwrap());
    let sys = &import.runs[0].events[0].system;
    assert_eq!(sys.id, "gpt-4.1-mini");
    assert_eq!(start(&import.runs[0].events).benchmark.as_ref().unwrap().id, "tau2-bench/airline");
    for k in 1..=2u64 {
        assert!(close(per_task(&import, k, pass_hat_k), want["pass_hat"][k.to_string()].as_f64().unwrap()), "pass^{k}");
    }
    // The infrastructure error has no verdict (τ² leaves it out) and ends as an error.
    let crashed: Vec<_> = import.runs.iter().filter(|r| end(&r.events).verifier_verdict.is_none()).collect();
    assert_eq!(crashed.len(), 1);
    assert_eq!(end(&crashed[0].events).outcome, Outcome::Error);
    let tools: Vec<_> = steps(&import).filter(|s| s.step_kind == StepKind::ToolCall).collect();
    assert_eq!(tools.len() as i64, want["tool_calls"].as_i64().unwrap());
    assert_eq!(tools.iter().filter(|s| s.result_status == Some(ResultStatus::Error)).count() as i64, want["tool_errors"].as_i64().unwrap());
    let model = steps(&import).find(|s| s.step_kind == StepKind::ModelCall).unwrap();
    assert_eq!((model.tokens, model.cost), (Some(320), Some(0.002)));
    assert!(import.runs.iter().all(|r| r.events.iter().any(|e| e.kind == EventKind::RunEnded)));
}

#[test]
fn the_ledger_sends_each_run_once() {
    let import = inspect::read(&fixture("inspect/arith.eval"), &Options::default()).unwrap();
    let none = HashSet::new();
    let mut book = BTreeMap::new();
    assert_eq!(ledger::plan(&book, &import), Plan::Fresh);
    let offsets = (BTreeMap::from([(0, 10), (1, 7)]), BTreeMap::from([(0, 3)]));
    let begun = Entry::begun(&import, None, offsets, 1, Some("ops".into()));
    assert_eq!(begun.file, "arith.eval", "no directory in the ledger");
    let key = Some(begun.import_id.clone().into_bytes());
    let payloads = vec![(key.clone(), serde_json::to_vec(&begun).unwrap())];
    book = ledger::latest(payloads.clone()).unwrap();
    // An entry this version cannot read stops the import (skipped, its log would look new).
    let err = ledger::latest([(key.clone(), b"not an entry".to_vec())]).unwrap_err();
    assert!(err.contains("cannot be read"), "{err}");
    let Plan::Resume { entry } = ledger::plan(&book, &import) else { panic!("an interrupted import resumes") };
    assert_eq!(entry.from_offsets[&1], 7);
    // Interrupted after the first run's events: only the rest go.
    let present: HashSet<String> = import.runs[0].events.iter().map(|e| e.event_id.clone()).collect();
    let rest = ledger::to_send(&import, Some(&entry), &present);
    assert_eq!(rest.runs.len(), import.runs.len(), "every run of the part");
    assert_eq!(rest.events.len(), import.events() - import.runs[0].events.len());
    let done = entry.done(&import, &ledger::to_send(&import, None, &none), 2);
    assert_eq!(done.runs_done.len(), import.runs.len());
    book = ledger::latest(payloads.into_iter().chain([(key, serde_json::to_vec(&done).unwrap())])).unwrap();
    assert_eq!(ledger::plan(&book, &import), Plan::Done { entry: done.clone(), changed: false });
    let rescored = Import { digest: "other".into(), ..import.clone() };
    assert!(matches!(ledger::plan(&book, &rescored), Plan::Done { changed: true, .. }));
    // The log grew (a retried eval, a rewritten checkpoint): only its new runs go.
    let mut grown = import.clone();
    let mut extra = import.runs[0].clone();
    extra.run_id.push_str("-more");
    grown.runs.push(extra);
    let Plan::Grown { entry } = ledger::plan(&book, &grown) else { panic!("a grown log sends its new runs") };
    let part = ledger::to_send(&grown, Some(&entry), &none);
    assert_eq!(part.runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), [grown.runs.last().unwrap().run_id.as_str()]);
    // A grown log whose only new record is unreadable: not done, its dead letter goes; a dead
    // letter found on the topic when resuming is done all the same.
    let mut broken = import.clone();
    broken.problems.push(crate::Problem { record: "samples/x_epoch_1.json".into(), index: 12, message: "not JSON".into() });
    let Plan::Grown { entry } = ledger::plan(&book, &broken) else { panic!("a new unreadable record is not done") };
    let found: HashSet<String> = [ledger::dead_letter_id(&broken, &broken.problems[0])].into();
    let part = ledger::to_send(&broken, Some(&entry), &found);
    assert_eq!((part.runs.len(), part.problems.len(), part.dead_letters.len()), (0, 1, 0));
    let done = entry.done(&broken, &part, 3);
    assert!(done.dead_letters_done.contains("samples/x_epoch_1.json"));
    let book = BTreeMap::from([(done.import_id.clone(), done)]);
    assert!(matches!(ledger::plan(&book, &broken), Plan::Done { changed: false, .. }));
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("octant-import-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
