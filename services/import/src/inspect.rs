//! Inspect AI eval logs → evaluation runs.
//!
//! A log is read whole: `.eval` (a ZIP archive: `header.json` with the eval, plan, results and
//! stats, and one `samples/<id>_epoch_<n>.json` per sample and epoch; members compressed with
//! Zstandard by current Inspect, with deflate by older Inspect) or `.json` (the same log in one
//! document, samples inline). A log still being written (status `started`) is refused.
//!
//! | Inspect | Octant |
//! |---|---|
//! | `eval.task` | benchmark (`--benchmark`) |
//! | `eval.dataset.name` | task family, when named (`--task-family`) |
//! | `eval.model` | system (`--system`) |
//! | the plan (solvers), `eval.solver`, generate config, model and task arguments | version `cfg-<digest>` (`--version`) and configuration hash |
//! | sample id, epoch | task id, attempt (pass@k and pass^k across epochs) |
//! | `eval.task_id` (kept by `inspect eval-retry`), sample id, epoch, the sample's `uuid` (its execution: carried over by a retry, new for a sample run again) | run id `inspect-<task id>-<sample id>-<epoch>-<uuid>`; the import `inspect:<task id>` (a retried eval's log adds only the samples it ran again) |
//! | `model` events (or assistant messages when a sample has no events) | model-call steps: tokens (`usage.total_tokens`), cost (`usage.total_cost`), latency (`working_time`) |
//! | `tool` events (or assistant tool calls and their tool messages) | tool-call steps: tool, arguments (JSON), result, error (`timeout` → timeout) |
//! | `approval` events | a tool call approved (`approve`, `modify`) is confirmed; the run has an approval channel when the eval has an approval policy or any approval event |
//! | the success scorer's value (`C` 1, `P` 0.5, `I`/`N` 0, booleans, numbers, `yes`/`no`) | verifier verdict (value ≥ 1, as Inspect's `pass_at`) for deterministic scorers, judge verdict (the value) for model-graded ones |
//! | every scorer's value | an evaluation named after the scorer (`rater_kind` verifier or judge when known): an observation when the scorer's config declares an instrument of that name |
//! | sample `error`, `limit` | outcome error |
//! | Inspect version, sandbox, task version and revision, generate config, seed | the run's reproducibility record |

use std::io::Read;
use std::path::Path;

use octant_contracts::{
    Benchmark, Evaluation, EventKind, Outcome, Reproducibility, ResultStatus, RunEnded, RunStarted, Step, StepKind, SystemRef,
};
use serde_json::Value;

use crate::{Import, ImportError, Options, Problem, Rater, Run, RunBuilder, id_part, short_id, text_of, time};

/// Scorers of Inspect's own library that are deterministic checks.
pub const VERIFIER_SCORERS: &[&str] = &["match", "includes", "pattern", "answer", "choice", "exact", "f1", "math"];
/// Scorers of Inspect's own library that grade with a model.
pub const JUDGE_SCORERS: &[&str] = &["model_graded_qa", "model_graded_fact"];

/// The most of one sample read (a sample is a few kilobytes to a few megabytes).
const MAX_MEMBER_BYTES: u64 = 512 << 20;

/// Reads and maps the Inspect log at `path`.
pub fn read(path: &Path, opts: &Options) -> Result<Import, ImportError> {
    let name = path.display().to_string();
    let io = |source| ImportError::Io { path: name.clone(), source };
    let bytes = std::fs::read(path).map_err(io)?;
    if bytes.starts_with(b"PK\x03\x04") {
        let (header, samples) = read_eval(&name, &bytes)?;
        map(&name, &header, samples, opts)
    } else {
        let (header, samples) = read_json(&name, &bytes)?;
        map(&name, &header, samples, opts)
    }
}

/// A sample as read: where it was, and its JSON (or why it could not be read).
pub struct RawSample {
    pub record: String,
    pub value: Result<Value, String>,
}

fn format_error(path: &str, message: impl Into<String>) -> ImportError {
    ImportError::Format { path: path.to_string(), message: message.into() }
}

/// An `.eval` archive: its header and its samples.
/// An `.eval` archive: its header, and its samples read one at a time as they are mapped (one
/// sample's JSON in memory at once, not the log's).
fn read_eval<'a>(path: &str, bytes: &'a [u8]) -> Result<(Value, impl Iterator<Item = RawSample> + 'a), ImportError> {
    let mut zip =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| format_error(path, format!("not a readable .eval archive: {e}")))?;
    // Samples by their index in the archive (a name the archive stores without its UTF-8 flag
    // would not be found again by name).
    let names: Vec<(usize, String)> = (0..zip.len())
        .filter_map(|i| Some((i, zip.name_for_index(i)?.ok()?.into_owned())))
        .filter(|(_, n)| n.starts_with("samples/") && n.ends_with(".json"))
        .collect();
    let header = match member(&mut zip, "header.json").map_err(|e| format_error(path, e))? {
        Some(h) => serde_json::from_slice::<Value>(&h).map_err(|e| format_error(path, format!("header.json: {e}")))?,
        None => {
            // Only the journal: the evaluation has not ended (or was killed before it could say).
            let start = member(&mut zip, "_journal/start.json").map_err(|e| format_error(path, e))?;
            let status = if start.is_some() { "started" } else { "unknown" };
            return Err(ImportError::Incomplete { path: path.to_string(), status: status.into() });
        }
    };
    let samples = names.into_iter().map(move |(i, n)| {
        let value = zip
            .by_index_raw(i)
            .map_err(|e| format!("{n}: {e}"))
            .and_then(|f| decode_member(&n, f))
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| format!("not JSON: {e}")));
        RawSample { record: n, value }
    });
    Ok((header, samples))
}

/// A member of the archive, decoded; `None` when there is no such member.
fn member(zip: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>, name: &str) -> Result<Option<Vec<u8>>, String> {
    match zip.by_name_raw(name.as_bytes()) {
        Ok(f) => decode_member(name, f).map(Some),
        Err(zip::result::ZipError::FileNotFound) => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

/// A member's bytes: stored, deflate (older Inspect) or Zstandard (current Inspect, one frame
/// or several), checked against the archive's CRC-32.
fn decode_member<R: Read>(name: &str, mut raw: zip::read::ZipFile<'_, R>) -> Result<Vec<u8>, String> {
    use zip::CompressionMethod as M;
    let (method, crc, size) = (raw.compression(), raw.crc32(), raw.size());
    if size > MAX_MEMBER_BYTES {
        return Err(format!("{name}: {size} bytes, over the {MAX_MEMBER_BYTES} a member may have"));
    }
    let mut out = Vec::with_capacity(size as usize);
    let read = match method {
        M::STORE => raw.read_to_end(&mut out),
        M::DEFLATE => flate2::read::DeflateDecoder::new(raw.by_ref()).take(MAX_MEMBER_BYTES).read_to_end(&mut out),
        M::ZSTD => zstd::stream::read::Decoder::new(raw.by_ref()).and_then(|d| d.take(MAX_MEMBER_BYTES).read_to_end(&mut out)),
        other => return Err(format!("{name}: compression method {other:?} is not one Inspect writes")),
    };
    read.map_err(|e| format!("{name}: {e}"))?;
    if out.len() as u64 != size || crc32fast::hash(&out) != crc {
        return Err(format!("{name}: the member does not match the archive's size and CRC-32 (a damaged archive)"));
    }
    Ok(out)
}

/// A `.json` log: the header is the log without its samples.
fn read_json(path: &str, bytes: &[u8]) -> Result<(Value, impl Iterator<Item = RawSample> + use<>), ImportError> {
    let mut log: Value =
        serde_json::from_slice(bytes).map_err(|e| format_error(path, format!("neither an .eval archive nor a JSON log: {e}")))?;
    let Some(obj) = log.as_object_mut() else { return Err(format_error(path, "a JSON log is an object")) };
    let samples = match obj.remove("samples") {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    let samples = samples.into_iter().enumerate().map(|(i, v)| RawSample { record: format!("samples[{i}]"), value: Ok(v) });
    Ok((log, samples))
}

/// What every sample of one log shares.
struct Eval {
    /// The log's identity: the eval's task id.
    eval_id: String,
    system: SystemRef,
    benchmark: Benchmark,
    task_family: Option<String>,
    reproducibility: Reproducibility,
    approvals: bool,
    success_scorer: Option<String>,
    scorer_kinds: std::collections::BTreeMap<String, Rater>,
    inspect_version: Option<String>,
    /// When the log has no per-sample times: the eval's start.
    fallback_start: Option<i64>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k)).filter(|v| !v.is_null())
}

/// The scorer's kind: declared, else known by its name (its last path part: `inspect_ai/match`).
pub fn rater_of(name: &str, declared: &std::collections::BTreeMap<String, Rater>) -> Option<Rater> {
    if let Some(r) = declared.get(name) {
        return Some(*r);
    }
    let base = name.rsplit('/').next().unwrap_or(name);
    if VERIFIER_SCORERS.contains(&base) {
        Some(Rater::Verifier)
    } else if JUDGE_SCORERS.contains(&base) {
        Some(Rater::Judge)
    } else {
        None
    }
}

/// A score's value as Inspect's `value_to_float` reads it; `None` for values with no single
/// number (lists, dictionaries, unknown words).
pub fn value_to_float(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Number(n) => n.as_f64().filter(|x| x.is_finite()),
        Value::String(s) => match s.as_str() {
            "C" => Some(1.0),
            "P" => Some(0.5),
            "I" | "N" => Some(0.0),
            other => match other.to_ascii_lowercase().as_str() {
                "yes" | "true" => Some(1.0),
                "no" | "false" => Some(0.0),
                t => t.parse::<f64>().ok().filter(|x| x.is_finite()),
            },
        },
        _ => None,
    }
}

fn eval_context(path: &str, header: &Value, opts: &Options) -> Result<Eval, ImportError> {
    let eval = header.get("eval").ok_or_else(|| format_error(path, "no `eval` in the log's header: not an Inspect eval log"))?;
    // The task's id in this evaluation: Inspect keeps it when the evaluation is retried
    // (`eval-retry` writes a new log, with a new eval id, holding the samples done before).
    let eval_id =
        str_at(eval, &["task_id"]).or_else(|| str_at(eval, &["eval_id"])).map(String::from).unwrap_or_else(|| short_id(&eval.to_string()));
    let model = str_at(eval, &["model"]).unwrap_or("unknown-model");
    // What makes this agent this agent: the solvers and their parameters, the generate config,
    // the model's and the task's arguments.
    let configuration = serde_json::json!({
        "plan": header.get("plan"),
        "solver": eval.get("solver"),
        "solver_args": eval.get("solver_args"),
        "model_generate_config": eval.get("model_generate_config"),
        "model_args": eval.get("model_args"),
    });
    let config_hash = short_id(&configuration.to_string());
    let system = SystemRef {
        id: opts.system.clone().unwrap_or_else(|| model.to_string()),
        version: opts.version.clone().unwrap_or_else(|| format!("cfg-{}", &config_hash[..8])),
        config_hash: config_hash.clone(),
    };
    let task = str_at(eval, &["task_registry_name"]).or_else(|| str_at(eval, &["task"])).unwrap_or("inspect-task");
    let benchmark = Benchmark { id: opts.benchmark.clone().unwrap_or_else(|| task.to_string()), contamination: opts.contamination };
    let task_family = opts.task_family.clone().or_else(|| str_at(eval, &["dataset", "name"]).map(String::from));
    let inspect_version = str_at(eval, &["packages", "inspect_ai"]).map(String::from);
    let mut environment = inspect_version.as_ref().map(|v| format!("inspect_ai {v}")).unwrap_or_else(|| "inspect_ai".into());
    if let Some(sandbox) = at(eval, &["sandbox"]) {
        environment.push_str(&format!("; sandbox {}", sandbox_text(sandbox)));
    }
    let mut task_spec = format!("{task}@{}", at(eval, &["task_version"]).map_or("0".into(), |v| text_of(v).unwrap_or_default()));
    if let Some(args) = at(eval, &["task_args"]).filter(|a| a.as_object().is_some_and(|o| !o.is_empty())) {
        task_spec.push_str(&format!(" {args}"));
    }
    if let Some(commit) = str_at(eval, &["revision", "commit"]) {
        let origin = without_credentials(str_at(eval, &["revision", "origin"]).unwrap_or(""));
        task_spec.push_str(&format!(" ({origin}@{commit})"));
    }
    let decoding = at(eval, &["model_generate_config"]).filter(|c| c.as_object().is_some_and(|o| !o.is_empty())).map(|c| c.to_string());
    let seed = at(eval, &["model_generate_config", "seed"])
        .and_then(Value::as_i64)
        .or_else(|| at(eval, &["config", "seed"]).and_then(Value::as_i64));
    let reproducibility = Reproducibility {
        environment_version: Some(environment),
        task_spec: Some(task_spec),
        agent_config: Some(config_hash),
        decoding,
        seed,
    };
    let headline = str_at(header, &["results", "headline", "scorer"]);
    let first = eval.get("scorers").and_then(Value::as_array).and_then(|s| s.first()).and_then(|s| str_at(s, &["name"]));
    let success_scorer = opts.success_scorer.clone().or_else(|| headline.or(first).map(String::from));
    let fallback_start = str_at(header, &["stats", "started_at"]).or_else(|| str_at(eval, &["created"])).and_then(time::parse_ms);
    Ok(Eval {
        eval_id,
        system,
        benchmark,
        task_family,
        reproducibility,
        approvals: at(eval, &["config", "approval"]).is_some(),
        success_scorer,
        scorer_kinds: opts.scorer_kinds.clone(),
        inspect_version,
        fallback_start,
    })
}

/// A repository URL without the user and password a CI remote may carry
/// (`https://x-access-token:…@github.com/…`).
pub fn without_credentials(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme && !url[scheme + 3..at].contains('/') => {
            format!("{}{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

fn sandbox_text(v: &Value) -> String {
    match v {
        Value::Array(parts) => parts.iter().filter_map(text_of).collect::<Vec<_>>().join(":"),
        Value::Object(o) => {
            let kind = o.get("type").and_then(text_of).unwrap_or_default();
            match o.get("config").and_then(text_of) {
                Some(c) => format!("{kind}:{c}"),
                None => kind,
            }
        }
        other => text_of(other).unwrap_or_default(),
    }
}

fn map(path: &str, header: &Value, samples: impl Iterator<Item = RawSample>, opts: &Options) -> Result<Import, ImportError> {
    let status = str_at(header, &["status"]).unwrap_or("unknown");
    if status == "started" {
        return Err(ImportError::Incomplete { path: path.to_string(), status: status.into() });
    }
    let ctx = eval_context(path, header, opts)?;
    let mut notes = Vec::new();
    if ctx.success_scorer.as_deref().is_some_and(|s| rater_of(s, &ctx.scorer_kinds).is_none()) {
        notes.push(format!(
            "scorer `{}` is neither a known deterministic nor a model-graded scorer: no task-success verdict (declare it with --scorer {}=verifier or =judge)",
            ctx.success_scorer.as_deref().unwrap_or_default(),
            ctx.success_scorer.as_deref().unwrap_or_default()
        ));
    }
    let mut runs = Vec::new();
    let mut problems = Vec::new();
    let (mut errors, mut limits) = (0, 0);
    let mut lacks = Lacks::default();
    for (i, raw) in samples.into_iter().enumerate() {
        let mapped = raw.value.and_then(|v| {
            errors += usize::from(at(&v, &["error"]).is_some());
            limits += usize::from(at(&v, &["limit"]).is_some());
            sample_run(&ctx, &v, &mut lacks)
        });
        match mapped {
            Ok(run) => runs.push(run),
            Err(message) => problems.push(Problem { record: raw.record, index: i as i64, message }),
        }
    }
    let logged = runs.len() + problems.len();
    if logged == 0 {
        return Err(format_error(path, "the log has no samples (written with log_samples off?): nothing to import"));
    }
    if status != "success" {
        notes.insert(0, format!("the evaluation ended with status `{status}`: its {logged} logged samples are imported"));
    }
    if errors + limits > 0 {
        notes.push(format!("{errors} samples ended in an error and {limits} at a limit: their runs end with outcome error"));
    }
    if lacks.no_value > 0 {
        notes.push(format!(
            "{} samples have no value of the success scorer: their runs end as errors, with no task-success verdict",
            lacks.no_value
        ));
    }
    if lacks.judge_range > 0 {
        notes.push(format!("{} judge scores are outside [0, 1]: kept as evaluation results, no judge verdict", lacks.judge_range));
    }
    Ok(Import::new(format!("inspect:{}", ctx.eval_id), "inspect", path, runs, problems, notes))
}

/// One sample of one epoch as a run.
fn sample_run(ctx: &Eval, s: &Value, lacks: &mut Lacks) -> Result<Run, String> {
    let id = at(s, &["id"]).and_then(text_of).ok_or("a sample without an id")?;
    let epoch = at(s, &["epoch"]).map_or(Some(1), Value::as_i64).ok_or("a sample's epoch is not a number")?;
    let attempt = i32::try_from(epoch).map_err(|_| format!("epoch {epoch} out of range"))?;
    // The sample's uuid is its execution: a sample `eval-retry` runs again gets a new one (and
    // a new run), one it carries over keeps it (the same run, not sent again).
    let mut run_id = format!("inspect-{}-{}-{epoch}", id_part(&ctx.eval_id), id_part(&id));
    if let Some(uuid) = str_at(s, &["uuid"]) {
        run_id.push('-');
        run_id.push_str(&id_part(uuid));
    }
    let start = str_at(s, &["started_at"])
        .and_then(time::parse_ms)
        .or(ctx.fallback_start)
        .ok_or("no time: neither the sample's started_at nor the eval's start is a readable date-time")?;
    let approvals = ctx.approvals || events(s).any(|e| str_at(e, &["event"]) == Some("approval"));
    let mut run = RunBuilder::new(run_id, ctx.system.clone());
    run.push(start, EventKind::RunStarted, |ev| {
        ev.run_started = Some(Box::new(RunStarted {
            task_id: Some(id.clone()),
            attempt,
            groups: Vec::new(),
            optimal_steps: None,
            required_subgoals: None,
            benchmark: Some(ctx.benchmark.clone()),
            reproducibility: Some(ctx.reproducibility.clone()),
            task_family: ctx.task_family.clone(),
            approval_channel: Some(approvals),
            approval_source: None,
            approval_evidence: None,
            rerun_of: None,
        }))
    });
    let had_events = steps_from_events(s, &mut run);
    if !had_events {
        steps_from_messages(s, start, &mut run);
    }
    let end = str_at(s, &["completed_at"])
        .and_then(time::parse_ms)
        .or_else(|| at(s, &["total_time"]).and_then(Value::as_f64).map(|t| start + (t * 1000.0) as i64))
        .unwrap_or_else(|| run.last_time());
    let ended = run_ended(ctx, s, &id, lacks);
    run.push(end, EventKind::RunEnded, |ev| ev.run_ended = Some(Box::new(ended)));
    Ok(run.finish())
}

/// Every event of a sample, nested ones (a tool's or a subtask's own events) after their parent.
fn events(s: &Value) -> impl Iterator<Item = &Value> {
    let mut stack: Vec<&Value> = s.get("events").and_then(Value::as_array).map(|a| a.iter().rev().collect()).unwrap_or_default();
    std::iter::from_fn(move || {
        let e = stack.pop()?;
        if let Some(children) = e.get("events").and_then(Value::as_array) {
            stack.extend(children.iter().rev());
        }
        Some(e)
    })
}

/// The sample's events the agent made: every event but those inside the scoring spans (a
/// model-graded scorer's calls are the grader's, not the agent's).
fn agent_events(s: &Value) -> impl Iterator<Item = &Value> {
    let mut scoring: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for e in events(s).filter(|e| str_at(e, &["event"]) == Some("span_begin")) {
        let own = matches!(str_at(e, &["type"]), Some("scorers" | "scorer"));
        if own || str_at(e, &["parent_id"]).is_some_and(|p| scoring.contains(p)) {
            scoring.extend(str_at(e, &["id"]));
        }
    }
    events(s).filter(move |e| !str_at(e, &["span_id"]).is_some_and(|id| scoring.contains(id)))
}

fn seconds_ms(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite() && *x >= 0.0).map(|x| x * 1000.0)
}

/// Steps from the sample's model and tool events; false when it has none.
fn steps_from_events(s: &Value, run: &mut RunBuilder) -> bool {
    let approved: std::collections::BTreeSet<&str> = events(s)
        .filter(|e| str_at(e, &["event"]) == Some("approval"))
        .filter(|e| matches!(str_at(e, &["decision"]), Some("approve" | "modify")))
        .filter_map(|e| str_at(e, &["call", "id"]))
        .collect();
    let mut any = false;
    for e in agent_events(s) {
        let t = str_at(e, &["timestamp"]).and_then(time::parse_ms).unwrap_or_else(|| run.last_time());
        let latency = seconds_ms(e.get("working_time"))
            .or_else(|| Some((str_at(e, &["completed"]).and_then(time::parse_ms)? - t) as f64).filter(|x| *x >= 0.0));
        match str_at(e, &["event"]) {
            Some("model") => {
                any = true;
                let usage = at(e, &["output", "usage"]);
                let tokens = usage.and_then(|u| {
                    u.get("total_tokens")
                        .and_then(Value::as_i64)
                        .or_else(|| Some(u.get("input_tokens")?.as_i64()? + u.get("output_tokens")?.as_i64()?))
                });
                // No result status: a model call is no tool call (tool-error rate counts those).
                let step = Step {
                    step_kind: StepKind::ModelCall,
                    tokens,
                    cost: usage.and_then(|u| u.get("total_cost")).and_then(Value::as_f64),
                    latency_ms: latency.unwrap_or(0.0),
                    ..Step::default()
                };
                run.push(t, EventKind::Step, |ev| ev.step = Some(Box::new(step)));
            }
            Some("tool") => {
                any = true;
                let call_id = str_at(e, &["id"]).unwrap_or("");
                let step = Step {
                    step_kind: StepKind::ToolCall,
                    tool_name: str_at(e, &["function"]).filter(|t| !t.is_empty()).map(String::from),
                    arguments: at(e, &["arguments"]).map(Value::to_string),
                    result_status: Some(tool_status(at(e, &["error"]))),
                    confirmed: approved.contains(call_id),
                    latency_ms: latency.unwrap_or(0.0),
                    result: at(e, &["result"]).and_then(text_of).filter(|r| !r.is_empty()),
                    ..Step::default()
                };
                run.push(t, EventKind::Step, |ev| ev.step = Some(Box::new(step)));
            }
            _ => {}
        }
    }
    any
}

/// A tool call's status from its `error` (`ToolCallError`: a type and a message).
fn tool_status(error: Option<&Value>) -> ResultStatus {
    match error {
        None => ResultStatus::Ok,
        Some(e) if str_at(e, &["type"]) == Some("timeout") => ResultStatus::Timeout,
        Some(_) => ResultStatus::Error,
    }
}

/// Steps from the sample's messages (logs without events): each assistant message a model
/// call, each of its tool calls a tool call with the result and error of its tool message.
fn steps_from_messages(s: &Value, start: i64, run: &mut RunBuilder) {
    let Some(messages) = s.get("messages").and_then(Value::as_array) else { return };
    let results = crate::tool_answers(messages, "tool_call_id");
    for m in messages.iter().filter(|m| str_at(m, &["role"]) == Some("assistant")) {
        run.push(start, EventKind::Step, |ev| ev.step = Some(Box::new(Step { step_kind: StepKind::ModelCall, ..Step::default() })));
        for call in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let result = str_at(call, &["id"]).and_then(|id| results.get(id));
            let step = Step {
                step_kind: StepKind::ToolCall,
                tool_name: str_at(call, &["function"]).filter(|t| !t.is_empty()).map(String::from),
                arguments: at(call, &["arguments"]).map(Value::to_string),
                result_status: result.map(|r| tool_status(at(r, &["error"]))),
                result: result.and_then(|r| at(r, &["content"])).and_then(content_text).filter(|r| !r.is_empty()),
                ..Step::default()
            };
            run.push(start, EventKind::Step, |ev| ev.step = Some(Box::new(step)));
        }
    }
}

/// A message's content: a string, or the text of its content blocks.
fn content_text(v: &Value) -> Option<String> {
    match v {
        Value::Array(blocks) => Some(blocks.iter().filter_map(|b| str_at(b, &["text"])).collect::<Vec<_>>().join("\n")),
        other => text_of(other),
    }
}

/// What the samples of a log lacked, for the notes.
#[derive(Default)]
struct Lacks {
    /// Samples without a value of the success scorer.
    no_value: usize,
    /// Judge scores outside [0, 1] (kept as evaluations, no verdict).
    judge_range: usize,
}

fn run_ended(ctx: &Eval, s: &Value, sample_id: &str, lacks: &mut Lacks) -> RunEnded {
    let scores = s.get("scores").and_then(Value::as_object);
    let mut evaluations = Vec::new();
    let (mut verifier, mut judge, mut kind, mut success) = (None, None, None, None);
    for (name, score) in scores.into_iter().flatten() {
        let value = score.get("value").unwrap_or(&Value::Null);
        let x = value_to_float(value);
        let rater = rater_of(name, &ctx.scorer_kinds);
        if ctx.success_scorer.as_deref() == Some(name.as_str()) {
            // Full credit is success, as Inspect's pass_at counts it.
            success = x.map(|x| x >= 1.0);
            match rater {
                Some(Rater::Verifier) => verifier = success,
                // A judge's verdict is a score in [0, 1] (the scorer's `judge_threshold` decides);
                // another scale is no verdict, only an evaluation.
                Some(Rater::Judge) => {
                    judge = x.filter(|x| (0.0..=1.0).contains(x));
                    lacks.judge_range += usize::from(x.is_some() && judge.is_none());
                }
                None => {}
            }
            kind = Some(format!("inspect {name}"));
        }
        let mut e = Evaluation::scored(name, x);
        e.score_label = value.as_str().map(String::from);
        e.evaluator = Some(name.clone());
        e.evaluator_version = ctx.inspect_version.as_ref().map(|v| format!("inspect_ai {v}"));
        e.scoring_mode = Some("generation".into());
        e.rater_kind = rater.map(|r| r.as_str().to_string());
        e.item = Some(sample_id.to_string());
        evaluations.push(e);
    }
    // The outcome: a sample's error (an exception in the solver or the harness) ends the run
    // as an error (`run_error_rate`); a limit it hit (messages, tokens, time) as a failure;
    // otherwise the success scorer's value says, whoever the scorer is; without a value,
    // nothing says it succeeded, nor that anything raised: a failure.
    let errored = at(s, &["error"]).is_some();
    let failed = errored || at(s, &["limit"]).is_some();
    lacks.no_value += usize::from(!failed && success.is_none());
    let outcome = match (errored, failed, success) {
        (true, _, _) => Outcome::Error,
        (false, false, Some(true)) => Outcome::Success,
        _ => Outcome::Failure,
    };
    RunEnded {
        verifier_kind: kind.filter(|_| verifier.is_some()),
        verifier_verdict: verifier,
        judge_verdict: judge,
        evaluations,
        ..RunEnded::with_outcome(outcome)
    }
}
