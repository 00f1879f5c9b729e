//! The conformance suite's replay: OTLP recorded from real agent frameworks traced by real
//! instrumentation libraries (`conformance/record.py`, one virtual environment per library
//! family; the fixtures under `conformance/fixtures/<setup>/<scenario>/` with their ground
//! truth) through the real broker and `octant up` (ingest and scorer): every run's outcome,
//! tool calls and errors (with their agents), model calls (per agent), tokens, agents and task
//! equal the truth, or differ
//! exactly as `conformance/gaps.toml` says the library does not emit them.
//!
//! Two tests: the committed fixtures (`OCTANT_BLESS_CONFORMANCE=1` rewrites
//! `conformance/RESULTS.md`, the table of truth against Octant; otherwise the table must
//! match), and a live recording made in the test by `record.py` — one setup in the test tier
//! (`contrib-agents-client`: the OpenTelemetry contrib instrumentations of the OpenAI Agents SDK
//! and of the OpenAI client, whose virtual environment `scripts/setup.sh` installs), every
//! setup under the soak command, the frameworks that trace themselves (Pydantic AI, Strands
//! Agents) included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use octant_contracts::{EventKind, Observation, Outcome, ResultStatus, StepKind, TrajectoryEvent, topics};
use octant_integration_tests::{read_all, repo_root, total, wait_metrics};
use octant_runtime::broker::EmbeddedBroker;
use octant_runtime::config::KafkaConfig;
use octant_runtime::kafka::{self, OutRecord};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
struct Truth {
    library: String,
    library_version: String,
    #[serde(default)]
    instrumentations: BTreeMap<String, String>,
    framework: String,
    framework_version: String,
    api: String,
    scenario: String,
    system_id: String,
    runs: Vec<TruthRun>,
}

#[derive(Debug, Deserialize)]
struct TruthRun {
    /// OpenTelemetry traces the run became (approval scenarios: the paused and the resumed part).
    #[serde(default = "one")]
    traces: u64,
    /// Approval scenarios: each approval asked for, with its decision.
    #[serde(default)]
    approvals: Vec<TruthApproval>,
    /// Approval scenarios: the run paused for approval, and was resumed.
    #[serde(default)]
    paused: bool,
    #[serde(default)]
    resumed: bool,
    task_id: Option<String>,
    outcome: String,
    tool_calls: Vec<TruthTool>,
    model_calls: u64,
    #[serde(default)]
    model_calls_by_agent: BTreeMap<String, u64>,
    tokens: Option<i64>,
    agents: Vec<String>,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
struct TruthApproval {
    /// `approved`, `denied` or `expired`.
    decision: String,
}

#[derive(Debug, Deserialize)]
struct TruthTool {
    tool: String,
    error: bool,
    agent: Option<String>,
}

/// A known difference: what `setup` (every setup when `*`) does not emit in `scenario` (every
/// scenario when `*`), so that Octant's `field` is `octant` rather than the truth.
#[derive(Debug, Deserialize)]
struct Gap {
    setup: String,
    scenario: String,
    field: String,
    /// JSON text (`null`: N/A).
    octant: String,
    reason: String,
}

struct Fixture {
    setup: String,
    dir: PathBuf,
    truth: Truth,
}

fn fixtures(root: &Path) -> Vec<Fixture> {
    let mut out = Vec::new();
    let mut setups: Vec<PathBuf> =
        std::fs::read_dir(root).unwrap_or_else(|e| panic!("{}: {e}", root.display())).flatten().map(|e| e.path()).collect();
    setups.sort();
    for setup in setups.into_iter().filter(|p| p.is_dir()) {
        let mut scenarios: Vec<PathBuf> = std::fs::read_dir(&setup).unwrap().flatten().map(|e| e.path()).collect();
        scenarios.sort();
        for dir in scenarios.into_iter().filter(|d| d.join("truth.json").is_file()) {
            let truth: Truth = serde_json::from_slice(&std::fs::read(dir.join("truth.json")).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", dir.join("truth.json").display()));
            out.push(Fixture { setup: setup.file_name().unwrap().to_string_lossy().into(), dir, truth });
        }
    }
    out
}

/// One run as Octant saw it, in the truth's terms.
fn seen(events: &[&TrajectoryEvent], obs: &[&Observation]) -> BTreeMap<&'static str, Value> {
    let steps: Vec<&TrajectoryEvent> = events.iter().copied().filter(|e| e.kind == EventKind::Step).collect();
    let tools: Vec<Value> = steps
        .iter()
        .filter_map(|e| {
            let s = e.step.as_ref()?;
            (s.step_kind == StepKind::ToolCall)
                .then(|| json!({"tool": s.tool_name, "error": s.result_status == Some(ResultStatus::Error), "agent": e.agent_id}))
        })
        .collect();
    let model_steps: Vec<&&TrajectoryEvent> =
        steps.iter().filter(|e| e.step.as_ref().is_some_and(|s| s.step_kind == StepKind::ModelCall)).collect();
    let models = model_steps.len();
    let mut by_agent: BTreeMap<String, u64> = BTreeMap::new();
    for e in &model_steps {
        *by_agent.entry(e.agent_id.clone().unwrap_or_default()).or_default() += 1;
    }
    let agents: BTreeSet<&str> = steps.iter().filter_map(|e| e.agent_id.as_deref()).collect();
    let start = events.iter().find_map(|e| e.run_started.as_ref()).expect("a run start");
    let end = events.iter().find_map(|e| e.run_ended.as_ref()).expect("a run end");
    let tokens = obs.iter().find(|o| o.metric == "tokens_per_run").map(|o| o.value as i64);
    let self_reported = obs.iter().find(|o| o.metric == "task_success_self_reported").map(|o| o.value);
    BTreeMap::from([
        ("outcome", json!(if end.outcome == Outcome::Success { "success" } else { "error" })),
        ("self_reported_success", json!(self_reported)),
        ("tool_calls", Value::Array(tools)),
        ("model_calls", json!(models)),
        ("model_calls_by_agent", json!(by_agent)),
        ("tokens", json!(tokens)),
        ("agents", json!(agents)),
        ("task_id", json!(start.task_id)),
    ])
}

fn expected(r: &TruthRun) -> BTreeMap<&'static str, Value> {
    let agents: BTreeSet<&str> = r.agents.iter().map(String::as_str).collect();
    BTreeMap::from([
        ("outcome", json!(r.outcome)),
        ("self_reported_success", json!(if r.outcome == "success" { 1.0 } else { 0.0 })),
        ("tool_calls", Value::Array(r.tool_calls.iter().map(|t| json!({"tool": t.tool, "error": t.error, "agent": t.agent})).collect())),
        ("model_calls", json!(r.model_calls)),
        ("model_calls_by_agent", json!(r.model_calls_by_agent)),
        ("tokens", json!(r.tokens)),
        ("agents", json!(agents)),
        ("task_id", json!(r.task_id)),
    ])
}

fn short(v: &Value) -> String {
    match v {
        Value::Array(a) if a.iter().all(Value::is_object) => {
            let errors = a.iter().filter(|t| t["error"] == true).count();
            format!("{} ({errors} err)", a.len())
        }
        Value::Array(a) => a.iter().map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string)).collect::<Vec<_>>().join(", "),
        Value::Null => "N/A".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a scenario is one of the human-approval scenarios (replayed by [`approvals`]).
fn is_approval(scenario: &str) -> bool {
    scenario.starts_with("approval_") || scenario.starts_with("two_approvals")
}

/// The recordings of agent frameworks that trace themselves (`conformance/frameworks/`, or
/// `frameworks-keyed/`): Pydantic AI and Strands Agents, each in each telemetry format it offers;
/// the approval scenarios or the others.
fn framework_fixtures(dir: &str, approvals: bool) -> Vec<Fixture> {
    fixtures(&repo_root().join("conformance").join(dir)).into_iter().filter(|f| is_approval(&f.truth.scenario) == approvals).collect()
}

/// The committed recordings — instrumentation libraries tracing the Agents SDK and LangGraph,
/// and frameworks that trace themselves (their scenarios other than approvals) — through
/// `octant up`: equal to the truth or different as `conformance/gaps.toml` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_instrumentations_replayed_through_octant_up_equal_their_truth() {
    let root = repo_root();
    let mut all = fixtures(&root.join("conformance/fixtures"));
    all.extend(framework_fixtures("frameworks", false));
    let table = replay(all).await;
    let path = root.join("conformance/RESULTS.md");
    let head = "# Conformance: truth against Octant\n\nWritten by `OCTANT_BLESS_CONFORMANCE=1 cargo test -p octant --test cli conformance` from the \
                fixtures `conformance/record.py` recorded under `conformance/fixtures/` and, for the frameworks that trace themselves \
                (Pydantic AI, Strands Agents), their scenarios other than approvals under `conformance/frameworks/` (see \
                `conformance/README.md`). A cell reads `value =` when Octant equals the \
                truth, `truth → octant (gap)` where the library does not emit it. Several runs per scenario: one cell when all agree.\n\n";
    let want = format!("{head}{table}");
    if std::env::var_os("OCTANT_BLESS_CONFORMANCE").is_some() {
        std::fs::write(&path, want).unwrap();
    } else {
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(have, want, "conformance/RESULTS.md is out of date: OCTANT_BLESS_CONFORMANCE=1 rewrites it");
    }
}

/// A real agent run now, traced by a real instrumentation: `record.py` in the family's virtual
/// environment (which `scripts/setup.sh` installs), then the same replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_instrumented_agent_through_octant_up_equals_its_truth() {
    let root = repo_root();
    let venv = root.join(".octant/conformance/venvs/contrib/bin/python");
    assert!(venv.is_file(), "the conformance venv is not installed ({}): run scripts/setup.sh", venv.display());
    let out = std::env::temp_dir().join(format!("octant-conformance-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(root.join("conformance/record.py")).arg("--out").arg(&out);
    if !octant_integration_tests::soak() {
        cmd.args(["--setup", "contrib-agents-client"]);
    }
    let status = cmd.status().expect("python3 runs");
    assert!(status.success(), "conformance/record.py failed");
    if octant_integration_tests::soak() {
        // The frameworks that trace themselves too (their virtual environments install here,
        // never on the test command's path): their scenarios other than approvals.
        let status = std::process::Command::new("python3")
            .arg(root.join("conformance/record.py"))
            .args(["--setup", "pydantic-ai-v6", "pydantic-ai-v5", "strands-default", "strands-latest"])
            .args(["--scenario", "tool_ok", "tool_error", "run_fails", "parallel_tools", "--out"])
            .arg(&out)
            .status()
            .expect("python3 runs");
        assert!(status.success(), "conformance/record.py failed on the frameworks that trace themselves");
    }
    replay(fixtures(&out)).await;
    let _ = std::fs::remove_dir_all(&out);
}

fn gaps() -> Vec<Gap> {
    #[derive(Deserialize)]
    struct Doc {
        #[serde(default)]
        gap: Vec<Gap>,
    }
    let text = std::fs::read_to_string(repo_root().join("conformance/gaps.toml")).unwrap_or_default();
    toml::from_str::<Doc>(&text).expect("conformance/gaps.toml parses").gap
}

/// The gap that explains `field` of `setup`'s `scenario`, if any.
fn gap_for<'g>(gaps: &'g [Gap], setup: &str, scenario: &str, field: &str) -> Option<&'g Gap> {
    gaps.iter().find(|g| (g.setup == "*" || g.setup == setup) && (g.scenario == "*" || g.scenario == scenario) && g.field == field)
}

/// Every fixture through the broker and `octant up` (ingest and scorer, the ingest's
/// `[ingest.mapping]` given by `mapping`, TOML lines): the trajectory events and observations
/// that came out once every event is scored (and, with `open`, that many runs are left open:
/// paused). Nothing is dead-lettered.
async fn through_octant_up(all: &[Fixture], name: &str, mapping: &str, open: Option<usize>) -> (Vec<TrajectoryEvent>, Vec<Observation>) {
    assert!(!all.is_empty(), "no fixtures (conformance/record.py writes them)");
    let systems: BTreeSet<&str> = all.iter().map(|f| f.truth.system_id.as_str()).collect();
    assert_eq!(systems.len(), all.len(), "every fixture has a system id of its own");

    let broker = EmbeddedBroker::start().await.expect("the test broker starts (run scripts/setup.sh)");
    let octant = env!("CARGO_BIN_EXE_octant");
    let out = std::process::Command::new(octant)
        .args(["topics", "create", "--brokers", &broker.brokers, "--topic-prefix", "conf.", "--partitions", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kafka = KafkaConfig { brokers: broker.brokers.clone(), topic_prefix: "conf.".into(), ..KafkaConfig::default() };
    // As the Collector's Kafka exporter writes them: one export request a message, no key.
    let producer = kafka::producer(&kafka, "collector").unwrap();
    let mut n = 0;
    for f in all {
        for (file, topic) in [("spans.pb", "otlp_spans"), ("logs.pb", "otlp_logs")] {
            let Ok(payload) = std::fs::read(f.dir.join(file)) else { continue };
            kafka::send(&producer, &OutRecord { topic: topic.into(), partition: Some(n % 2), key: String::new(), payload }).await.unwrap();
            n += 1;
        }
    }

    let dir = std::env::temp_dir().join(format!("octant-conformance-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("octant.toml");
    std::fs::write(
        &config,
        format!(
            "[kafka]\ntopic_prefix = \"conf.\"\n[ingest]\nadmin_addr = \"127.0.0.1:0\"\ntrace_quiet = \"500ms\"\n[ingest.mapping]\n{mapping}\n[scorer]\nadmin_addr = \"127.0.0.1:0\"\n"
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(octant)
        .args(["up", "--brokers", &broker.brokers, "--config", config.to_str().unwrap(), "--services", "ingest,scorer"])
        .env("RUST_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let admin: BTreeMap<String, std::net::SocketAddr> = crate::admin_addresses(&mut child, 2).into_iter().collect();
    let runs: usize = all.iter().map(|f| f.truth.runs.len()).sum();
    let traces: u64 = all.iter().flat_map(|f| &f.truth.runs).map(|r| r.traces).sum();
    let im = wait_metrics(admin["ingest"], "every trace emitted", |m| {
        total(m, "octant_ingest_runs_total") - m.get("octant_ingest_runs_total{reason=\"not_a_run\"}").copied().unwrap_or(0.0)
            >= traces as f64
    })
    .await;
    let events: Vec<TrajectoryEvent> = read_all(&kafka, &kafka.topic(topics::TRAJECTORIES_PRODUCTION)).await;
    wait_metrics(admin["scorer"], "every event scored", |m| {
        total(m, "octant_scorer_events_consumed_total") >= events.len() as f64
            && open.is_none_or(|n| m.get("octant_scorer_open_runs") == Some(&(n as f64)))
    })
    .await;
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success(), "octant up stops cleanly");
    let _ = std::fs::remove_dir_all(&dir);
    let not_runs = im.get("octant_ingest_runs_total{reason=\"not_a_run\"}").copied().unwrap_or(0.0);
    eprintln!("ingest: {} traces, {not_runs} of them no run; the truth has {runs} runs", total(&im, "octant_ingest_runs_total"));
    let obs: Vec<Observation> = read_all(&kafka, &kafka.topic(topics::OBSERVATIONS)).await;
    let dead: Vec<octant_contracts::DeadLetter> = read_all(&kafka, &kafka.topic(topics::DLQ)).await;
    assert!(dead.is_empty(), "nothing dead-lettered: {dead:?}");
    (events, obs)
}

/// Every fixture of `all` through the broker and `octant up`; panics on any difference from the
/// truth the gaps do not explain; returns the table.
async fn replay(all: Vec<Fixture>) -> String {
    let gaps = gaps();
    let (events, obs) = through_octant_up(&all, "fixtures", "", Some(0)).await;
    // What no instrumentation library writes — gold labels, permissions, injection flags,
    // injected faults, fault outcomes, policies, protocols — is absent, and every instrument
    // resting on it N/A (no observation), never a measured 0.
    let steps = events.iter().filter_map(|e| e.step.as_ref());
    assert!(
        steps.clone().all(|s| s.needs_human.is_none() && s.injection_attempt.is_none() && s.permission.is_none() && !s.injected_fault),
        "a label or flag no library writes was mapped"
    );
    assert!(events.iter().filter_map(|e| e.run_ended.as_ref()).all(|e| e.faults.is_none()), "a fault outcome no library writes");
    let labelled = [
        "escalation_precision",
        "escalation_recall",
        "injection_success_rate",
        "policy_violation_rate",
        "data_leakage_rate",
        "protocol_adherence",
        "task_success_under_fault",
        "fault_detection_rate",
        "fault_containment_rate",
        "fault_recovery_rate",
    ];
    let measured: BTreeSet<&str> = obs.iter().map(|o| o.metric.as_str()).filter(|m| labelled.contains(m)).collect();
    assert!(measured.is_empty(), "instruments without their evidence were measured on real traces: {measured:?}");
    assert!(obs.iter().any(|o| o.metric == "audit_completeness" && o.value == 0.0), "tool calls without a permission are audit gaps");

    let mut table = String::from(
        "| setup | library | framework | API | scenario | runs | outcome | tool calls | model calls | tokens | agents | task |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut failures = Vec::new();
    let mut explained = BTreeSet::new();
    for f in &all {
        let t = &f.truth;
        let mut by_run: BTreeMap<&str, Vec<&TrajectoryEvent>> = BTreeMap::new();
        for e in events.iter().filter(|e| e.system.id == t.system_id) {
            by_run.entry(&e.run_id).or_default().push(e);
        }
        let mut octant_runs: Vec<(i64, &str)> =
            by_run.iter().map(|(id, evs)| (evs.iter().map(|e| e.event_time).min().unwrap(), *id)).collect();
        octant_runs.sort();
        let mut cells: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let runs_cell = if octant_runs.len() == t.runs.len() {
            format!("{} =", t.runs.len())
        } else {
            failures.push(format!("{}/{}: {} runs, truth {}", f.setup, t.scenario, octant_runs.len(), t.runs.len()));
            format!("{} ≠ {}", octant_runs.len(), t.runs.len())
        };
        for (truth, (_, run)) in t.runs.iter().zip(&octant_runs) {
            let mut evs = by_run[run].clone();
            evs.sort_by_key(|e| e.sequence);
            // The run's own events belong to an agent of the run, or to none: never to its
            // workflow's name (one new "agent" per run where workflow names are unique).
            for e in evs.iter().filter(|e| e.run_started.is_some() || e.run_ended.is_some()) {
                if let Some(a) = e.agent_id.as_deref().filter(|a| !truth.agents.iter().any(|t| t == a)) {
                    failures.push(format!(
                        "{}/{} run {run}: its {:?} is attributed to {a:?}, no agent of the run",
                        f.setup, t.scenario, e.kind
                    ));
                }
            }
            let mine: Vec<&Observation> = obs.iter().filter(|o| o.run_id == *run).collect();
            let got = seen(&evs, &mine);
            for (field, want) in expected(truth) {
                let gap = gap_for(&gaps, &f.setup, &t.scenario, field);
                let gap_value = gap.map(|g| serde_json::from_str::<Value>(&g.octant).expect("a gap's value is JSON"));
                let want_here = gap_value.as_ref().unwrap_or(&want);
                let cell = if got[field] == want {
                    format!("{} =", short(&want))
                } else if &got[field] == want_here && gap.is_some() {
                    let g = gap.unwrap();
                    explained.insert((g.setup.clone(), g.field.clone(), g.reason.clone()));
                    format!("{} → {} (gap)", short(&want), short(&got[field]))
                } else {
                    failures.push(format!("{}/{} run {run} {field}: octant {} truth {want}", f.setup, t.scenario, got[field]));
                    format!("{} ≠ {}", short(&got[field]), short(&want))
                };
                cells.entry(field).or_default().push(cell);
            }
        }
        let cell = |k: &str| {
            let v = cells.get(k).cloned().unwrap_or_default();
            let first = v.first().cloned().unwrap_or_default();
            if v.iter().all(|c| *c == first) { first } else { v.join("; ") }
        };
        let libs: Vec<String> = std::iter::once(format!("{} {}", t.library, t.library_version))
            .chain(t.instrumentations.iter().filter(|(k, _)| **k != t.library).map(|(k, v)| format!("+ {k} {v}")))
            .collect();
        table.push_str(&format!(
            "| {} | {} | {} {} | {} | {} | {runs_cell} | {} | {} | {} | {} | {} | {} |\n",
            f.setup,
            libs.join(" "),
            t.framework,
            t.framework_version,
            t.api,
            t.scenario,
            cell("outcome"),
            cell("tool_calls"),
            cell("model_calls"),
            cell("tokens"),
            cell("agents"),
            cell("task_id"),
        ));
    }
    if !explained.is_empty() {
        table.push_str("\nDifferences, each what the library does not emit (`conformance/gaps.toml`):\n\n");
        for (setup, field, reason) in &explained {
            table.push_str(&format!("- {setup}, {field}: {reason}\n"));
        }
    }
    eprintln!("{table}");
    assert!(failures.is_empty(), "Octant differs from the truth:\n{}", failures.join("\n"));
    table
}

/// The human-approval recordings (`conformance/approvals/`: the Agents SDK's tools that need
/// approval, approved, denied, expired and approved twice, traced by each instrumentation of the
/// SDK) through the broker and `octant up`: the tools that ran and the model calls equal the
/// truth (a call proposed and left waiting is no step), confirmation gating is N/A, not assessed:
/// unwatched (nothing in an unkeyed trace shows the approval flow: every gated step
/// weightless), and the runs per resumed run differ from the truth exactly as
/// `conformance/gaps.toml` says. `OCTANT_BLESS_CONFORMANCE=1` rewrites
/// `conformance/APPROVALS-RESULTS.md`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_approvals_replayed_through_octant_up() {
    approvals("approvals", None).await;
}

/// The same scenarios recorded with the application stamping its run id on every span
/// (`record.py --run-key octant.run.id`, `conformance/approvals-keyed/`), replayed with
/// `[ingest.mapping] run_key = "octant.run.id"`: a resumed run is one run, paused parts end with
/// a request for confirmation per call, and the expired ones stay paused (waiting out the
/// scorer's `pause_timeout`); the pause shows the approval flow (the source is watched) and
/// each call executed after its request is confirmed. `OCTANT_BLESS_CONFORMANCE=1` rewrites
/// `conformance/APPROVALS-KEYED-RESULTS.md`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_keyed_approvals_are_one_run_each() {
    approvals("approvals-keyed", Some("octant.run.id")).await;
}

async fn approvals(dir: &str, run_key: Option<&str>) {
    let root = repo_root();
    let mut all = fixtures(&root.join("conformance").join(dir));
    // The frameworks that trace themselves, recorded the same way (Pydantic AI's deferred
    // tools, Strands Agents' interrupts).
    all.extend(framework_fixtures(if run_key.is_some() { "frameworks-keyed" } else { "frameworks" }, true));
    // A gap of the keyed recordings names its scenario `<scenario>@keyed`.
    let gaps: Vec<Gap> = gaps()
        .into_iter()
        .filter(|g| g.scenario.ends_with("@keyed") == run_key.is_some())
        .map(|g| Gap { scenario: g.scenario.trim_end_matches("@keyed").to_string(), ..g })
        .collect();
    let mut mapping = "tool_impact = { refund_payment = \"high\" }".to_string();
    if let Some(k) = run_key {
        mapping.push_str(&format!("\nrun_key = \"{k}\""));
    }
    let (events, obs) = through_octant_up(&all, dir, &mapping, None).await;
    let mut table = String::from(if run_key.is_some() {
        "| setup | scenario | decisions (truth) | runs → Octant runs | ended, paused | requests for confirmation | tools that ran | model calls | approvals seen by Octant | confirmation gating |\n|---|---|---|---|---|---|---|---|---|---|\n"
    } else {
        "| setup | scenario | decisions (truth) | runs → Octant runs | tools that ran | model calls | approvals seen by Octant | confirmation gating |\n|---|---|---|---|---|---|---|---|\n"
    });
    let mut failures = Vec::new();
    let mut explained = BTreeSet::new();
    for f in &all {
        let t = &f.truth;
        let mine: Vec<&TrajectoryEvent> = events.iter().filter(|e| e.system.id == t.system_id).collect();
        let starts: Vec<_> = mine.iter().filter_map(|e| e.run_started.as_ref()).collect();
        let run_ids: BTreeSet<&str> = mine.iter().map(|e| e.run_id.as_str()).collect();
        let ended: BTreeSet<&str> = mine.iter().filter(|e| e.run_ended.is_some()).map(|e| e.run_id.as_str()).collect();
        let kind = |k: StepKind| mine.iter().filter(|e| e.step.as_ref().is_some_and(|s| s.step_kind == k)).count() as u64;
        let mut cell = |field: &'static str, got: Value, want: Value| {
            if got == want {
                return format!("{} =", short(&want));
            }
            match gap_for(&gaps, &f.setup, &t.scenario, field) {
                Some(g) if serde_json::from_str::<Value>(&g.octant).ok().as_ref() == Some(&got) => {
                    explained.insert((g.setup.clone(), g.scenario.clone(), g.field.clone(), g.reason.clone()));
                    format!("{} → {} (gap)", short(&want), short(&got))
                }
                _ => {
                    failures.push(format!("{}/{} {field}: octant {got}, truth {want}", f.setup, t.scenario));
                    format!("{} ≠ {}", short(&got), short(&want))
                }
            }
        };
        let runs = cell("runs", json!(run_ids.len()), json!(t.runs.len()));
        let tools = cell("tool_calls", json!(kind(StepKind::ToolCall)), json!(t.runs.iter().map(|r| r.tool_calls.len()).sum::<usize>()));
        let models = cell("model_calls", json!(kind(StepKind::ModelCall)), json!(t.runs.iter().map(|r| r.model_calls).sum::<u64>()));
        // Keyed: the runs that ended, and those still paused (an approval never given waits out
        // the pause bound); one request for confirmation per approval asked.
        let truth_paused = t.runs.iter().filter(|r| r.paused && !r.resumed).count();
        let (states, requests) = if run_key.is_some() {
            let states = cell(
                "ended_paused",
                json!(format!("{}, {}", ended.len(), run_ids.len() - ended.len())),
                json!(format!("{}, {truth_paused}", t.runs.len() - truth_paused)),
            );
            let asked = t.runs.iter().map(|r| r.approvals.len()).sum::<usize>();
            (states, cell("requests", json!(kind(StepKind::Confirmation)), json!(asked)))
        } else {
            (String::new(), String::new())
        };
        let mut decisions: BTreeMap<&str, usize> = BTreeMap::new();
        for a in t.runs.iter().flat_map(|r| &r.approvals) {
            *decisions.entry(a.decision.as_str()).or_default() += 1;
        }
        let decisions: Vec<String> = decisions.iter().map(|(d, n)| format!("{n} {d}")).collect();
        // What the traces show of the approval flow, by rule: an unkeyed trace shows nothing
        // (its pause joins nothing: unwatched); a keyed run's paused part shows the pause, so
        // the source is watched and the call executed after its request is confirmed.
        // Without a key, a resumed call shows the flow too where its trace names the call's id in
        // its input history: the frameworks that trace themselves do (README's framework table);
        // the Agents SDK's instrumentations do not (contrib and OpenLLMetry write no call id on
        // tool spans, OpenInference loses the resumed part).
        let names_resumed_calls = f.setup.starts_with("pydantic-ai") || f.setup.starts_with("strands");
        let approved = t.runs.iter().any(|r| r.approvals.iter().any(|a| a.decision == "approved"));
        let keyed_pause = run_key.is_some() && t.runs.iter().any(|r| r.paused);
        let watched = keyed_pause || (names_resumed_calls && approved);
        let channels: BTreeSet<Option<bool>> = starts.iter().map(|s| s.approval_channel).collect();
        let gated: Vec<&Observation> = obs.iter().filter(|o| o.system_id == t.system_id && o.metric == "confirmation_gating").collect();
        let seen = if channels.contains(&Some(false)) || channels.contains(&Some(true)) != watched {
            failures.push(format!("{}/{}: approval channels {channels:?}, watched {watched}", f.setup, t.scenario));
            format!("{channels:?}")
        } else if keyed_pause {
            "watched: a pause in a keyed run".to_string()
        } else if watched {
            "watched: a call resumed after its pause".to_string()
        } else {
            "nothing shown: unwatched".to_string()
        };
        // Every executed call of the high-impact tool is a gated step: weightless while the
        // source is unwatched; confirmed (executed after its request) once watched.
        let refunds = mine
            .iter()
            .filter(|e| {
                e.step.as_ref().is_some_and(|s| s.step_kind == StepKind::ToolCall && s.tool_name.as_deref() == Some("refund_payment"))
            })
            .count();
        if gated.len() != refunds {
            failures.push(format!("{}/{}: {} gated steps, {refunds} refunds ran", f.setup, t.scenario, gated.len()));
        }
        let gating = if !watched && gated.iter().all(|o| o.weight == 0.0) {
            format!("N/A, not assessed: unwatched ({} gated steps, weightless)", gated.len())
        } else if watched && gated.iter().all(|o| o.weight == 1.0 && o.value == 1.0) {
            format!("{} of {} gated steps confirmed (executed after their request)", gated.len(), gated.len())
        } else {
            failures.push(format!(
                "{}/{}: gating {:?}",
                f.setup,
                t.scenario,
                gated.iter().map(|o| (o.value, o.weight)).collect::<Vec<_>>()
            ));
            format!("{} gated, not as the rule says", gated.len())
        };
        let decisions = decisions.join(", ");
        table.push_str(&if run_key.is_some() {
            format!(
                "| {} | {} | {decisions} | {runs} | {states} | {requests} | {tools} | {models} | {seen} | {gating} |\n",
                f.setup, t.scenario
            )
        } else {
            format!("| {} | {} | {decisions} | {runs} | {tools} | {models} | {seen} | {gating} |\n", f.setup, t.scenario)
        });
    }
    if !explained.is_empty() {
        table.push_str("\nDifferences, each what the library does not emit (`conformance/gaps.toml`):\n\n");
        for (setup, scenario, field, reason) in &explained {
            table.push_str(&format!("- {setup}, {scenario}, {field}: {reason}\n"));
        }
    }
    eprintln!("{table}");
    let (title, file, how) = match run_key {
        None => ("human approvals", "APPROVALS-RESULTS.md", "recorded_approvals"),
        Some(_) => ("human approvals with a run key", "APPROVALS-KEYED-RESULTS.md", "recorded_keyed_approvals"),
    };
    let frameworks = if run_key.is_some() { "frameworks-keyed" } else { "frameworks" };
    let head = format!(
        "# Conformance: {title}, truth against Octant\n\nWritten by `OCTANT_BLESS_CONFORMANCE=1 cargo test -p octant --test cli \
         {how}` from the recordings under `conformance/{dir}/` (what each library emits: `APPROVALS.md`) and the approval scenarios \
         of the frameworks that trace themselves under `conformance/{frameworks}/` (Pydantic AI, Strands Agents: `conformance/README.md`). A cell reads `value =` \
         when Octant equals the truth, `truth → octant (gap)` where the library does not emit it. Each scenario has two runs; the \
         cells are their totals. Every gated step is the executed call (`refund_payment`, declared high impact).\n\n"
    );
    let want = format!("{head}{table}");
    let path = root.join("conformance").join(file);
    if std::env::var_os("OCTANT_BLESS_CONFORMANCE").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    assert!(failures.is_empty(), "Octant differs from the truth:\n{}", failures.join("\n"));
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(have, want, "conformance/{file} is out of date: OCTANT_BLESS_CONFORMANCE=1 rewrites it");
}

/// The framework outside the suite (`conformance/OUTSIDE.md`: Google ADK with LiteLLM, named and
/// recorded after the rules froze), through `octant up` with every tool declared high impact,
/// unkeyed (`conformance/outside/`) and keyed (`conformance/outside-keyed/`). Asserted, as issue
/// 57 asks of a producer nobody here has seen: where no approval signal shows anywhere (the
/// scenarios without approvals), confirmation gating is N/A, every gated step weightless, never
/// 0; a keyed paused run is one run with every part's steps scored (runs, tools that ran and
/// model calls equal the truth). The rest is reported, scenario by scenario, in
/// `conformance/OUTSIDE-RESULTS.md` (`OCTANT_BLESS_CONFORMANCE=1` rewrites it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framework_outside_the_suite_behaves_by_the_rules() {
    let root = repo_root();
    let mut table = String::from(
        "| setup | key | scenario | decisions (truth) | runs → Octant runs | ended, paused | tools that ran | model calls | approvals seen by Octant | confirmation gating (value, weight) |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut failures = Vec::new();
    for (dir, run_key) in [("outside", None), ("outside-keyed", Some("octant.run.id"))] {
        let all = fixtures(&root.join("conformance").join(dir));
        let mut mapping = "default_impact = \"high\"".to_string();
        if let Some(k) = run_key {
            mapping.push_str(&format!("\nrun_key = \"{k}\""));
        }
        let (events, obs) = through_octant_up(&all, dir, &mapping, None).await;
        for f in &all {
            let t = &f.truth;
            let mine: Vec<&TrajectoryEvent> = events.iter().filter(|e| e.system.id == t.system_id).collect();
            let run_ids: BTreeSet<&str> = mine.iter().map(|e| e.run_id.as_str()).collect();
            let ended: BTreeSet<&str> = mine.iter().filter(|e| e.run_ended.is_some()).map(|e| e.run_id.as_str()).collect();
            let kind = |k: StepKind| mine.iter().filter(|e| e.step.as_ref().is_some_and(|s| s.step_kind == k)).count() as u64;
            let tools = (kind(StepKind::ToolCall), t.runs.iter().map(|r| r.tool_calls.len() as u64).sum::<u64>());
            let models = (kind(StepKind::ModelCall), t.runs.iter().map(|r| r.model_calls).sum::<u64>());
            let runs = (run_ids.len(), t.runs.len());
            let truth_paused = t.runs.iter().filter(|r| r.paused && !r.resumed).count();
            let states =
                (format!("{}, {}", ended.len(), run_ids.len() - ended.len()), format!("{}, {truth_paused}", t.runs.len() - truth_paused));
            let mut decisions: BTreeMap<&str, usize> = BTreeMap::new();
            for a in t.runs.iter().flat_map(|r| &r.approvals) {
                *decisions.entry(a.decision.as_str()).or_default() += 1;
            }
            let decisions: Vec<String> = decisions.iter().map(|(d, n)| format!("{n} {d}")).collect();
            let evidence: BTreeSet<String> = mine
                .iter()
                .filter_map(|e| e.run_started.as_ref())
                .map(|s| match s.approval_channel {
                    Some(true) => s.approval_evidence.clone().unwrap_or_default(),
                    Some(false) => "declared none".to_string(),
                    None => "nothing".to_string(),
                })
                .collect();
            let gated: Vec<(f64, f64)> = obs
                .iter()
                .filter(|o| o.system_id == t.system_id && o.metric == "confirmation_gating")
                .map(|o| (o.value, o.weight))
                .collect();
            let cell = |(got, want): (String, String)| if got == want { format!("{want} =") } else { format!("{want} → {got}") };
            let n = |(a, b): (u64, u64)| cell((a.to_string(), b.to_string()));
            // No approval anywhere: gating is not assessed, never a 0.
            if t.runs.iter().all(|r| r.approvals.is_empty()) && gated.iter().any(|(_, w)| *w > 0.0) {
                failures.push(format!("{dir}/{}/{}: no approval signal, gating weighed {gated:?}", f.setup, t.scenario));
            }
            // Keyed: one run per run, every part's steps scored.
            if run_key.is_some() && (runs.0 != runs.1 || tools.0 != tools.1 || models.0 != models.1) {
                failures.push(format!("{dir}/{}/{}: runs {runs:?}, tools {tools:?}, model calls {models:?}", f.setup, t.scenario));
            }
            table.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                f.setup,
                run_key.unwrap_or("—"),
                t.scenario,
                decisions.join(", "),
                cell((runs.0.to_string(), runs.1.to_string())),
                cell(states),
                n(tools),
                n(models),
                evidence.into_iter().collect::<Vec<_>>().join("; "),
                if gated.is_empty() { "none gated".to_string() } else { format!("{gated:?}") },
            ));
        }
    }
    eprintln!("{table}");
    let want = format!(
        "# The framework outside the suite, replayed through Octant\n\nWritten by `OCTANT_BLESS_CONFORMANCE=1 cargo test -p octant --test cli \
         a_framework_outside_the_suite` from `conformance/outside/` and `conformance/outside-keyed/` (Google ADK with LiteLLM, every \
         tool declared high impact; `conformance/OUTSIDE.md`). A cell reads `truth =` when Octant equals the truth, `truth → octant` \
         otherwise. Confirmation gating lists each gated step's (value, weight): weight 0 is not assessed (unwatched).\n\n{table}"
    );
    let path = root.join("conformance/OUTSIDE-RESULTS.md");
    if std::env::var_os("OCTANT_BLESS_CONFORMANCE").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    assert!(failures.is_empty(), "the outside framework breaks the rules:\n{}", failures.join("\n"));
    assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), want, "conformance/OUTSIDE-RESULTS.md is out of date");
}
