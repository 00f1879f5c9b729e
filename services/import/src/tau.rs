//! τ-bench and τ²-bench result files → evaluation runs.
//!
//! **τ-bench** (sierra-research/tau-bench): a JSON list of `EnvRunResult` — `task_id`,
//! `reward`, `info` (`task.actions` the task expected, `reward_info`, or `error` when the run
//! crashed), `traj` (OpenAI chat messages) and `trial` — as its `historical_trajectories/`
//! files and its run script's checkpoints are written. The files name no agent (`--system` is
//! required) and carry no times: runs are dated from `--start` (default: the file's
//! modification time), one second apart, steps one millisecond apart; latency is not known
//! (none: no latency observation).
//!
//! **τ²-bench** (sierra-research/tau2-bench): a `Results` document — `info` (agent, domain,
//! trials), `tasks` (with `evaluation_criteria.actions`) and `simulations` (`task_id`,
//! `trial`, `start_time`, `end_time`, `termination_reason`, `reward_info`, `messages` with
//! `timestamp`, `usage`, `cost`, and tool messages with an `error` flag).
//!
//! | τ-bench / τ²-bench | Octant |
//! |---|---|
//! | reward (success when \|reward − 1\| ≤ 1e-6, as both run scripts count it) | verifier verdict; an evaluation `reward` with the reward |
//! | task id, trial | task id, attempt (trial + 1) |
//! | assistant messages | model-call steps (τ²: tokens and cost) |
//! | their tool calls, and the tool messages answering them | tool-call steps: tool, arguments, result; error when the tool message says so (τ-bench: content starting `Error:` or `Unknown action`; τ²: `error: true`) |
//! | the task's expected actions (`info.task.actions`, τ²: `evaluation_criteria.actions` of the assistant) | required sub-goals; sub-goals done = expected actions the run called with the same name and arguments |
//! | a crashed run (`info.error`; τ²: `termination_reason` an error) | outcome error (τ-bench counts its reward 0 as a failure, and so does the verdict) |
//! | τ²: `info.agent_info.llm`, `info.environment_info.domain_name` | system, benchmark `tau2-bench/<domain>` |
//!
//! pass^k: τ-bench's run script takes n as the number of distinct trials in the file, τ²'s
//! per task; Octant takes it per task (its attempts), so the three agree when every task has
//! every trial — as both scripts' own runs write them.

use std::path::Path;

use octant_contracts::{Benchmark, Evaluation, EventKind, Outcome, ResultStatus, RunEnded, RunStarted, Step, StepKind, SystemRef};
use serde_json::Value;

use crate::{Import, ImportError, Options, Problem, Run, RunBuilder, id_part, short_id, text_of, time};

/// Whether a reward is a success, as τ-bench's and τ²-bench's scripts decide it.
pub fn is_successful(reward: f64) -> bool {
    (1.0 - 1e-6..=1.0 + 1e-6).contains(&reward)
}

/// Reads and maps the τ-bench or τ²-bench result file at `path`.
pub fn read(path: &Path, opts: &Options) -> Result<Import, ImportError> {
    let name = path.display().to_string();
    let io = |source| ImportError::Io { path: name.clone(), source };
    let bytes = std::fs::read(path).map_err(io)?;
    let doc: Value =
        serde_json::from_slice(&bytes).map_err(|e| ImportError::Format { path: name.clone(), message: format!("not JSON: {e}") })?;
    match doc {
        Value::Array(entries) => {
            let Some(system) = opts.system.clone() else {
                return Err(ImportError::Format {
                    path: name,
                    message: "a τ-bench file does not name the agent: give --system (and --version)".into(),
                });
            };
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            let start = opts
                .start_ms
                .or_else(|| Some(modified?.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as i64))
                .ok_or_else(|| ImportError::Format { path: name.clone(), message: "no time for its runs: give --start".into() })?;
            Ok(tau_bench(&name, path, entries, start, system, opts))
        }
        Value::Object(o) if o.contains_key("simulations") => Ok(tau2_bench(&name, &Value::Object(o), opts)),
        _ => Err(ImportError::Format {
            path: name,
            message: "neither a τ-bench result list nor a τ²-bench results document (with `simulations`)".into(),
        }),
    }
}

/// Expected actions matched by the run's calls: the same name and the same arguments (as JSON
/// values), each call matching one expected action at most.
fn subgoals_done(expected: &[(String, Value)], calls: &[(String, Value)]) -> i32 {
    let mut used = vec![false; calls.len()];
    let mut done = 0;
    for (name, args) in expected {
        if let Some(i) = (0..calls.len()).find(|&i| !used[i] && calls[i].0 == *name && calls[i].1 == *args) {
            used[i] = true;
            done += 1;
        }
    }
    done
}

/// Arguments as a JSON value: τ-bench logs them as a JSON string, τ² as an object.
fn arguments_value(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// The run's end. `counted`: whether the harness counts the run in its success rates (τ²-bench
/// leaves out infrastructure errors: no verdict then).
fn run_ended(
    reward: Option<f64>,
    crashed: bool,
    counted: bool,
    expected: &[(String, Value)],
    calls: &[(String, Value)],
    kind: &str,
) -> RunEnded {
    let verdict = counted.then(|| reward.is_some_and(is_successful));
    let mut evaluations = Vec::new();
    if let Some(r) = reward {
        let mut e = Evaluation::scored("reward", Some(r));
        e.evaluator = Some(kind.to_string());
        e.rater_kind = Some("verifier".into());
        evaluations.push(e);
    }
    let outcome = if crashed {
        Outcome::Error
    } else if verdict == Some(true) {
        Outcome::Success
    } else {
        Outcome::Failure
    };
    RunEnded {
        verifier_kind: verdict.map(|_| kind.to_string()),
        verifier_verdict: verdict,
        subgoals_done: (!expected.is_empty()).then(|| subgoals_done(expected, calls)),
        evaluations,
        ..RunEnded::with_outcome(outcome)
    }
}

fn started(task_id: String, attempt: i32, benchmark: &Benchmark, family: &Option<String>, required: usize) -> RunStarted {
    RunStarted {
        task_id: Some(task_id),
        attempt,
        groups: Vec::new(),
        optimal_steps: None,
        required_subgoals: (required > 0).then_some(required as i32),
        benchmark: Some(benchmark.clone()),
        reproducibility: None,
        task_family: family.clone(),
        approval_channel: Some(false),
        approval_source: None,
        approval_evidence: None,
        rerun_of: None,
    }
}

/// A τ-bench file: the run script rewrites its checkpoint after every task, so the import's
/// identity and the run ids come from the system, its version and the file's name, not its
/// content — the grown file is the same import, and its new runs are the only ones sent.
fn tau_bench(name: &str, path: &Path, entries: Vec<Value>, start: i64, system: String, opts: &Options) -> Import {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("tau-bench").to_string();
    let system =
        SystemRef { id: system, version: opts.version.clone().unwrap_or_else(|| "unversioned".into()), config_hash: String::new() };
    let identity = format!("{}@{}/{stem}", system.id, system.version);
    let file_id = short_id(&identity);
    let benchmark = Benchmark { id: opts.benchmark.clone().unwrap_or_else(|| "tau-bench".into()), contamination: opts.contamination };
    let mut runs = Vec::new();
    let mut problems = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let t0 = start + i as i64 * 1000;
        match tau_bench_run(entry, &file_id[..12], t0, &system, &benchmark, &opts.task_family) {
            Ok(run) => runs.push(run),
            Err(message) => problems.push(Problem { record: format!("[{i}]"), index: i as i64, message }),
        }
    }
    Import::new(format!("tau-bench:{identity}"), "tau-bench", name, runs, problems, Vec::new())
}

fn tau_bench_run(
    e: &Value,
    file_id: &str,
    t0: i64,
    system: &SystemRef,
    benchmark: &Benchmark,
    family: &Option<String>,
) -> Result<Run, String> {
    let task = e.get("task_id").and_then(text_of).ok_or("an entry without a task_id")?;
    let trial = e.get("trial").map_or(Some(0), Value::as_i64).ok_or("`trial` is not a number")?;
    let reward = match e.get("reward") {
        Some(Value::Number(n)) => n.as_f64(),
        None | Some(Value::Null) => None,
        Some(_) => return Err("`reward` is not a number".into()),
    };
    let expected: Vec<(String, Value)> = e
        .pointer("/info/task/actions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| Some((a.get("name")?.as_str()?.to_string(), a.get("kwargs").cloned().unwrap_or(Value::Null))))
        .filter(|(n, _)| n != "respond")
        .collect();
    let run_id = format!("tau-{file_id}-{}-{trial}", id_part(&task));
    let mut run = RunBuilder::new(run_id, system.clone());
    let attempt = i32::try_from(trial + 1).map_err(|_| format!("trial {trial} out of range"))?;
    run.push(t0, EventKind::RunStarted, |ev| {
        ev.run_started = Some(Box::new(started(task.clone(), attempt, benchmark, family, expected.len())))
    });
    let traj = e.get("traj").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let results = crate::tool_answers(traj, "tool_call_id");
    let mut calls = Vec::new();
    let mut t = t0;
    for m in traj.iter().filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant")) {
        t += 1;
        run.push(t, EventKind::Step, |ev| ev.step = Some(Box::new(Step { step_kind: StepKind::ModelCall, ..Step::default() })));
        for call in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let tool = call.pointer("/function/name").and_then(Value::as_str).unwrap_or("").to_string();
            let raw_args = call.pointer("/function/arguments");
            calls.push((tool.clone(), arguments_value(raw_args)));
            let answer =
                call.get("id").and_then(Value::as_str).and_then(|id| results.get(id)).and_then(|r| r.get("content")).and_then(text_of);
            let status = answer
                .as_deref()
                .map(|a| if a.starts_with("Error:") || a.starts_with("Unknown action") { ResultStatus::Error } else { ResultStatus::Ok });
            let step = Step {
                step_kind: StepKind::ToolCall,
                tool_name: Some(tool).filter(|t| !t.is_empty()),
                arguments: raw_args.and_then(text_of),
                result_status: status,
                result: answer.filter(|a| !a.is_empty()),
                ..Step::default()
            };
            t += 1;
            run.push(t, EventKind::Step, |ev| ev.step = Some(Box::new(step)));
        }
    }
    let crashed = e.pointer("/info/error").is_some_and(|v| !v.is_null());
    let ended = run_ended(reward, crashed, true, &expected, &calls, "tau-bench reward");
    run.push(t + 1, EventKind::RunEnded, |ev| ev.run_ended = Some(Box::new(ended)));
    Ok(run.finish())
}

/// τ²-bench's termination reasons that are the run's own error, not the agent's failure.
const TAU2_ERRORS: &[&str] = &["agent_error", "user_error", "infrastructure_error", "unexpected_error"];

/// A τ²-bench results document: its runs are its simulations (their ids are unique), the
/// import is the run that wrote it (its `timestamp` and `info`), so a grown file is the same
/// import.
fn tau2_bench(name: &str, doc: &Value, opts: &Options) -> Import {
    let identity = short_id(&format!("{}{}", doc.get("timestamp").unwrap_or(&Value::Null), doc.get("info").unwrap_or(&Value::Null)));
    let info = doc.get("info").unwrap_or(&Value::Null);
    let agent = info.get("agent_info").cloned().unwrap_or(Value::Null);
    let config_hash = short_id(&agent.to_string());
    let system = SystemRef {
        id: opts.system.clone().unwrap_or_else(|| agent.get("llm").and_then(Value::as_str).unwrap_or("tau2-agent").to_string()),
        version: opts.version.clone().unwrap_or_else(|| format!("cfg-{}", &config_hash[..8])),
        config_hash,
    };
    let domain = info.pointer("/environment_info/domain_name").and_then(Value::as_str);
    let benchmark = Benchmark {
        id: opts.benchmark.clone().unwrap_or_else(|| domain.map_or("tau2-bench".into(), |d| format!("tau2-bench/{d}"))),
        contamination: opts.contamination,
    };
    let expected: std::collections::BTreeMap<String, Vec<(String, Value)>> = doc
        .get("tasks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let actions = t
                .pointer("/evaluation_criteria/actions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|a| a.get("requestor").and_then(Value::as_str).unwrap_or("assistant") == "assistant")
                .filter_map(|a| Some((a.get("name")?.as_str()?.to_string(), a.get("arguments").cloned().unwrap_or(Value::Null))))
                .collect();
            Some((t.get("id").and_then(text_of)?, actions))
        })
        .collect();
    let mut runs = Vec::new();
    let mut problems = Vec::new();
    let sims = doc.get("simulations").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (i, sim) in sims.iter().enumerate() {
        match tau2_run(sim, &identity[..12], &system, &benchmark, &opts.task_family, &expected) {
            Ok(run) => runs.push(run),
            Err(message) => problems.push(Problem { record: format!("simulations[{i}]"), index: i as i64, message }),
        }
    }
    Import::new(format!("tau2-bench:{identity}"), "tau2-bench", name, runs, problems, Vec::new())
}

fn tau2_run(
    sim: &Value,
    file_id: &str,
    system: &SystemRef,
    benchmark: &Benchmark,
    family: &Option<String>,
    expected: &std::collections::BTreeMap<String, Vec<(String, Value)>>,
) -> Result<Run, String> {
    let task = sim.get("task_id").and_then(text_of).ok_or("a simulation without a task_id")?;
    let trial = sim.get("trial").map_or(Some(0), Value::as_i64).ok_or("`trial` is not a number")?;
    let start = sim.get("start_time").and_then(Value::as_str).and_then(time::parse_ms).ok_or("no readable `start_time`")?;
    let sim_id = sim.get("id").and_then(text_of).map_or_else(|| format!("{file_id}-{}-{trial}", id_part(&task)), |s| id_part(&s));
    let expected = expected.get(&task).map(Vec::as_slice).unwrap_or_default();
    let attempt = i32::try_from(trial + 1).map_err(|_| format!("trial {trial} out of range"))?;
    let mut run = RunBuilder::new(format!("tau2-{sim_id}"), system.clone());
    run.push(start, EventKind::RunStarted, |ev| {
        ev.run_started = Some(Box::new(started(task.clone(), attempt, benchmark, family, expected.len())))
    });
    let messages = sim.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let results = crate::tool_answers(messages, "id");
    let mut calls = Vec::new();
    for m in messages.iter().filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant")) {
        let t = m.get("timestamp").and_then(Value::as_str).and_then(time::parse_ms).unwrap_or_else(|| run.last_time());
        let usage = m.get("usage");
        let tokens = usage.and_then(|u| Some(u.get("prompt_tokens")?.as_i64()? + u.get("completion_tokens")?.as_i64()?));
        let step = Step {
            step_kind: StepKind::ModelCall,
            tokens,
            cost: m.get("cost").and_then(Value::as_f64),
            latency_ms: seconds(m.get("generation_time_seconds")).unwrap_or(0.0),
            ..Step::default()
        };
        run.push(t, EventKind::Step, |ev| ev.step = Some(Box::new(step)));
        for call in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let tool = call.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            calls.push((tool.clone(), arguments_value(call.get("arguments"))));
            let answer = call.get("id").and_then(Value::as_str).and_then(|id| results.get(id));
            let step = Step {
                step_kind: StepKind::ToolCall,
                tool_name: Some(tool).filter(|t| !t.is_empty()),
                arguments: call.get("arguments").and_then(text_of),
                result_status: answer
                    .map(|a| if a.get("error").and_then(Value::as_bool) == Some(true) { ResultStatus::Error } else { ResultStatus::Ok }),
                result: answer.and_then(|a| a.get("content")).and_then(text_of).filter(|a| !a.is_empty()),
                ..Step::default()
            };
            let t = answer.and_then(|a| a.get("timestamp")).and_then(Value::as_str).and_then(time::parse_ms).unwrap_or(t);
            run.push(t, EventKind::Step, |ev| ev.step = Some(Box::new(step)));
        }
    }
    let reward = sim.pointer("/reward_info/reward").and_then(Value::as_f64);
    let termination = sim.get("termination_reason").and_then(Value::as_str).unwrap_or("");
    let ended =
        run_ended(reward, TAU2_ERRORS.contains(&termination), termination != "infrastructure_error", expected, &calls, "tau2-bench reward");
    let end = sim.get("end_time").and_then(Value::as_str).and_then(time::parse_ms).unwrap_or_else(|| run.last_time());
    run.push(end, EventKind::RunEnded, |ev| ev.run_ended = Some(Box::new(ended)));
    Ok(run.finish())
}

fn seconds(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite() && *x >= 0.0).map(|x| x * 1000.0)
}
