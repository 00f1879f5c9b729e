//! Rust types of the Avro contracts in `schemas/`. Field names and enum symbols are the
//! schemas'; JSON input uses the same names (enum symbols also accepted in lower case).
//! `tests/contracts.rs` proves each type round-trips through its schema.

use serde::{Deserialize, Serialize};

/// Production traffic or an evaluation harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Source {
    #[serde(rename = "PRODUCTION", alias = "production")]
    Production,
    #[serde(rename = "EVALUATION", alias = "evaluation")]
    Evaluation,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Production => "production",
            Source::Evaluation => "evaluation",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SystemRef {
    pub id: String,
    pub version: String,
    #[serde(default)]
    pub config_hash: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "RUN_STARTED", alias = "run_started")]
    RunStarted,
    #[serde(rename = "STEP", alias = "step")]
    Step,
    #[serde(rename = "INTERVENTION", alias = "intervention")]
    Intervention,
    #[serde(rename = "RUN_ENDED", alias = "run_ended")]
    RunEnded,
}

/// One event of a trajectory (schema `TrajectoryEvent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryEvent {
    pub event_id: String,
    pub run_id: String,
    pub system: SystemRef,
    pub source: Source,
    #[serde(default)]
    pub agent_id: Option<String>,
    pub event_time: i64,
    pub sequence: i64,
    pub kind: EventKind,
    // The bodies are boxed: an event holds one of them, and by value all four made an event
    // 1,048 bytes, copied each time the scorer moved it (BENCHMARKS.md, issue 16); boxed, it
    // moves as ~220 bytes.
    #[serde(default)]
    pub run_started: Option<Box<RunStarted>>,
    #[serde(default)]
    pub step: Option<Box<Step>>,
    #[serde(default)]
    pub intervention: Option<Intervention>,
    #[serde(default)]
    pub run_ended: Option<Box<RunEnded>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Benchmark {
    pub id: String,
    #[serde(default)]
    pub contamination: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunStarted {
    /// The task attempted; `None` when the producer has none (no task-level instruments then).
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub attempt: i32,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub optimal_steps: Option<i32>,
    #[serde(default)]
    pub required_subgoals: Option<i32>,
    #[serde(default)]
    pub benchmark: Option<Benchmark>,
    /// What reproducing this trajectory takes (seed 000 §IV-B2); added after v1 with a default.
    #[serde(default)]
    pub reproducibility: Option<Reproducibility>,
    /// The task's family (seed 001's paradigms `latent_space_reasoner`, `grounded_synthesizer`,
    /// `emergent_planner`, `verifiable_executor`, or the team's own); profiles report each
    /// family apart. Added after v1 with a default.
    #[serde(default)]
    pub task_family: Option<String>,
    /// What this run (or this part of a paused run) shows of its approval flow: `Some(true)`
    /// when it shows the flow is traced (a pause for approval, a decision, a denial, a
    /// confirmation attribute, a declared approval event) — its source is watched from then on;
    /// `Some(false)` when its source is declared without an approval channel (confirmation
    /// gating N/A, never 0); `None` when it shows nothing: the source's learned state decides
    /// (see `approval_source`). Added after v1 with a default.
    #[serde(default)]
    pub approval_channel: Option<bool>,
    /// Where the run's tool calls were traced (the instrumentation scope names of its tool spans,
    /// or of its root when it has none, for OTLP): with the system, the source whose approval flow is learned — unwatched until a
    /// run of it shows an approval signal, watched for good after. `None` for producers writing
    /// Octant's schema, whose `confirmed` field is their channel. Added after v1 with a default.
    #[serde(default)]
    pub approval_source: Option<String>,
    /// What showed the approval flow when `approval_channel` is `Some(true)` (e.g. `pause:
    /// deferred tool requests`). Added after v1 with a default.
    #[serde(default)]
    pub approval_evidence: Option<String>,
    /// The run this run re-executes, when a harness answers a re-run request (topic
    /// `octant.reruns`, seed 000 §IV-G); `None` for every other run. Added after v1 with a default.
    #[serde(default)]
    pub rerun_of: Option<String>,
}

/// The five artefacts a trajectory is reproducible from (seed 000 §IV-B2, schema
/// `Reproducibility` inside `RunStarted`); each may be absent, and a profile's evidence
/// package reports how many runs recorded each.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Reproducibility {
    /// The environment (sandbox, simulator, harness) and its version.
    #[serde(default)]
    pub environment_version: Option<String>,
    /// The task specification: an id with version, or a content hash.
    #[serde(default)]
    pub task_spec: Option<String>,
    /// The agent configuration (prompts, tools, guardrails): a hash or version; when absent,
    /// the system's `config_hash` stands for it.
    #[serde(default)]
    pub agent_config: Option<String>,
    /// Decoding parameters as logged (JSON text, e.g. `{"temperature": 0.2, "top_p": 0.95}`).
    #[serde(default)]
    pub decoding: Option<String>,
    /// The random seed.
    #[serde(default)]
    pub seed: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum StepKind {
    #[serde(rename = "MODEL_CALL", alias = "model_call")]
    ModelCall,
    #[serde(rename = "TOOL_CALL", alias = "tool_call")]
    ToolCall,
    #[serde(rename = "CONFIRMATION", alias = "confirmation")]
    Confirmation,
    #[serde(rename = "MESSAGE", alias = "message")]
    Message,
    #[default]
    #[serde(rename = "OTHER", alias = "other")]
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResultStatus {
    #[serde(rename = "OK", alias = "ok")]
    Ok,
    #[serde(rename = "ERROR", alias = "error")]
    Error,
    #[serde(rename = "TIMEOUT", alias = "timeout")]
    Timeout,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedCall {
    pub tool_name: String,
    #[serde(default)]
    pub arguments: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub enum Impact {
    #[default]
    #[serde(rename = "LOW", alias = "low")]
    Low,
    #[serde(rename = "HIGH", alias = "high")]
    High,
    #[serde(rename = "IRREVERSIBLE", alias = "irreversible")]
    Irreversible,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Step {
    #[serde(default)]
    pub step_kind: StepKind,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
    #[serde(default)]
    pub result_status: Option<ResultStatus>,
    #[serde(default)]
    pub expected_call: Option<ExpectedCall>,
    #[serde(default)]
    pub impact: Impact,
    #[serde(default)]
    pub confirmed: bool,
    #[serde(default)]
    pub violations: Vec<String>,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub correct: Option<bool>,
    #[serde(default)]
    pub escalated: bool,
    /// Tokens the step consumed; `None` when no usage was reported (no token observation).
    #[serde(default)]
    pub tokens: Option<i64>,
    /// Cost of the step; `None` when no cost was reported (no cost observation, never 0).
    #[serde(default)]
    pub cost: Option<f64>,
    #[serde(default)]
    pub latency_ms: f64,
    #[serde(default)]
    pub injected_fault: bool,
    /// What the tool returned, as logged (schema field added with a default: older records read
    /// as none). Redacted in the lake by default.
    #[serde(default)]
    pub result: Option<String>,
    /// Gold label: whether this step needed a human (a reference's or a reviewer's), against
    /// which `escalated` is scored; `None` when unlabelled (no escalation observation).
    #[serde(default)]
    pub needs_human: Option<bool>,
    /// The permission the call ran under (a scope, a role, a granted capability), as logged;
    /// `None` when not logged — a tool call without it is not fully audited.
    #[serde(default)]
    pub permission: Option<String>,
    /// Whether what the step read (a tool result, a retrieved page) carried a prompt-injection
    /// attempt — an adversarial suite's label or a detector's finding; `None` when nobody
    /// looked.
    #[serde(default)]
    pub injection_attempt: Option<bool>,
    /// The tool call's id as the model or framework gave it (`gen_ai.tool.call.id`), for tool
    /// calls and requests for confirmation: a call executed after a request for approval of it
    /// is confirmed, joined by this id across a paused run's parts. `None` when not logged.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InterventionKind {
    #[serde(rename = "STOP", alias = "stop")]
    Stop,
    #[serde(rename = "OVERRIDE", alias = "override")]
    Override,
    #[serde(rename = "HELP_REQUEST", alias = "help_request")]
    HelpRequest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intervention {
    pub intervention_kind: InterventionKind,
    pub honoured: bool,
    #[serde(default)]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    #[serde(rename = "SUCCESS", alias = "success")]
    Success,
    #[serde(rename = "FAILURE", alias = "failure")]
    Failure,
    #[serde(rename = "ERROR", alias = "error")]
    Error,
    #[serde(rename = "ABANDONED", alias = "abandoned")]
    Abandoned,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnded {
    pub outcome: Outcome,
    #[serde(default)]
    pub verifier_kind: Option<String>,
    #[serde(default)]
    pub verifier_verdict: Option<bool>,
    #[serde(default)]
    pub judge_verdict: Option<f64>,
    #[serde(default)]
    pub human_verdict: Option<f64>,
    #[serde(default)]
    pub subgoals_done: Option<i32>,
    #[serde(default)]
    pub sentences_assertive: Option<i32>,
    #[serde(default)]
    pub sentences_unsupported: Option<i32>,
    #[serde(default)]
    pub confidence: Option<f64>,
    /// Evaluation results about the run (schema field added with a default: older records
    /// read as none).
    #[serde(default)]
    pub evaluations: Vec<Evaluation>,
    /// Grounded-drafting judgements of the final answer, as counts per class (seed 002 §4);
    /// added after v1 with a default, so older records read as none.
    #[serde(default)]
    pub grounding: Option<Grounding>,
    /// The human review of the run's output (seed 002 §4, §6); added after v1 with a default.
    #[serde(default)]
    pub review: Option<Review>,
    /// How the agents of a multi-agent run coordinated (seed 000 Table IX); added after v1
    /// with a default.
    #[serde(default)]
    pub coordination: Option<Coordination>,
    /// What became of each injected fault, one record per faulted step (seed 000 §IV-B2);
    /// added after v1 with a default.
    #[serde(default)]
    pub faults: Option<Vec<FaultOutcome>>,
}

/// The outcome of one fault a harness injected (seed 000 §IV-B2: detected, contained or
/// propagated, recovered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultOutcome {
    /// Sequence number of the step the fault was injected at.
    pub step: i64,
    pub detected: bool,
    /// `false`: the fault propagated to later steps or the outcome.
    pub contained: bool,
    pub recovered: bool,
}

impl RunEnded {
    /// A run end with `outcome` and nothing else known.
    pub fn with_outcome(outcome: Outcome) -> RunEnded {
        RunEnded {
            outcome,
            verifier_kind: None,
            verifier_verdict: None,
            judge_verdict: None,
            human_verdict: None,
            subgoals_done: None,
            sentences_assertive: None,
            sentences_unsupported: None,
            confidence: None,
            evaluations: Vec::new(),
            grounding: None,
            review: None,
            coordination: None,
            faults: None,
        }
    }
}

/// Coordination of a multi-agent run (schema `Coordination`, inside `RunEnded`), judged by the
/// harness or an oracle; every field may be absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Coordination {
    /// Subtasks delegated to another agent, and of those the ones given to the right agent.
    #[serde(default)]
    pub delegations: Option<i32>,
    #[serde(default)]
    pub delegations_correct: Option<i32>,
    /// Whether the run terminated correctly (neither prematurely nor never), by a terminal
    /// oracle.
    #[serde(default)]
    pub terminated_correctly: Option<bool>,
    /// Whether the run stalled (deadlock) or looped without progress (livelock).
    #[serde(default)]
    pub stalled: Option<bool>,
    /// Messages the agents exchanged, and the number a reference trace needs.
    #[serde(default)]
    pub messages: Option<i32>,
    #[serde(default)]
    pub messages_optimal: Option<i32>,
    /// Faults injected into one agent, and of those the ones that did not cascade to another.
    #[serde(default)]
    pub faults_injected: Option<i32>,
    #[serde(default)]
    pub faults_contained: Option<i32>,
    /// Messages judged against a communication rubric, and of those the relevant, grounded ones.
    #[serde(default)]
    pub messages_judged: Option<i32>,
    #[serde(default)]
    pub messages_relevant: Option<i32>,
    /// Disagreements between agents induced by the harness, and of those the ones reconciled
    /// correctly.
    #[serde(default)]
    pub conflicts: Option<i32>,
    #[serde(default)]
    pub conflicts_resolved: Option<i32>,
    /// Outcomes an agent verified, and of those the verdicts an oracle confirms.
    #[serde(default)]
    pub verifications: Option<i32>,
    #[serde(default)]
    pub verifications_correct: Option<i32>,
    /// Reasoning paths of the communication graph, and of those the non-contributing ones.
    #[serde(default)]
    pub reasoning_paths: Option<i32>,
    #[serde(default)]
    pub unproductive_paths: Option<i32>,
}

/// Grounded-drafting judgements of a run's output (schema `Grounding`, inside `RunEnded`):
/// counts per class, judged outside Octant (graders, a judge); every field may be absent.
/// Assertive sentences and unsupported ones stay in `RunEnded` (`sentences_*`, v1).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Grounding {
    /// Cited source chunks in the output, |C(y)|.
    #[serde(default)]
    pub citations: Option<i32>,
    /// Cited chunks whose content the citing paragraph actually uses (strict: the claim rests
    /// on it).
    #[serde(default)]
    pub citations_used_strict: Option<i32>,
    /// Cited chunks any part of which is reflected in the citing paragraph (lenient).
    #[serde(default)]
    pub citations_used_lenient: Option<i32>,
    /// Source chunks a complete answer must cite (the gold set).
    #[serde(default)]
    pub citations_required: Option<i32>,
    /// Of those, the ones the output cites.
    #[serde(default)]
    pub citations_required_cited: Option<i32>,
    /// Assertive sentences carrying at least one citation.
    #[serde(default)]
    pub sentences_cited: Option<i32>,
    /// All sentences of the output, |y|.
    #[serde(default)]
    pub sentences_total: Option<i32>,
    /// Sentences not relevant to the request.
    #[serde(default)]
    pub sentences_irrelevant: Option<i32>,
    /// Key elements the expert answer holds, |K(g)|.
    #[serde(default)]
    pub key_elements_expected: Option<i32>,
    /// Of those, the ones the output captures.
    #[serde(default)]
    pub key_elements_captured: Option<i32>,
    /// Atomic claims of the assertive sentences (the calibration subset).
    #[serde(default)]
    pub claims: Option<i32>,
    /// Atomic claims unsupported by the permitted sources.
    #[serde(default)]
    pub claims_unsupported: Option<i32>,
}

/// How a manual-time baseline was obtained (schema `BaselineKind`). Value claims need an
/// observed one; the two are never pooled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BaselineKind {
    /// Practitioner recall: adequate for prioritisation.
    #[serde(rename = "ESTIMATED", alias = "estimated")]
    Estimated,
    /// Timed matched tasks.
    #[serde(rename = "OBSERVED", alias = "observed")]
    Observed,
}

/// The human review of a run's output (schema `Review`, inside `RunEnded`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Review {
    /// Defects deliberately seeded into the output before review.
    #[serde(default)]
    pub seeded_defects: Option<i32>,
    /// Of those, the ones the reviewer caught.
    #[serde(default)]
    pub seeded_caught: Option<i32>,
    /// Whether the output was defective (by adjudication), when known.
    #[serde(default)]
    pub defective: Option<bool>,
    /// Whether the reviewer accepted the output.
    #[serde(default)]
    pub accepted: Option<bool>,
    /// Whether the run needed a human intervention outside its planned checkpoints.
    #[serde(default)]
    pub unplanned_intervention: Option<bool>,
    /// Reviewer minutes spent on the output.
    #[serde(default)]
    pub review_minutes: Option<f64>,
    /// Minutes the system took to produce the output (t_gen).
    #[serde(default)]
    pub generation_minutes: Option<f64>,
    /// Minutes the task takes by hand: the baseline declared for the run's task type.
    #[serde(default)]
    pub manual_minutes: Option<f64>,
    /// How `manual_minutes` was obtained.
    #[serde(default)]
    pub manual_baseline: Option<BaselineKind>,
}

/// One evaluation result (schema `Evaluation`, inside `RunEnded`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub name: String,
    #[serde(default)]
    pub score_value: Option<f64>,
    #[serde(default)]
    pub score_label: Option<String>,
    #[serde(default)]
    pub explanation: Option<String>,
    #[serde(default)]
    pub evaluator: Option<String>,
    #[serde(default)]
    pub evaluator_version: Option<String>,
    #[serde(default)]
    pub step: Option<i64>,
    /// `likelihood` or `generation`; results of different modes are never pooled.
    #[serde(default)]
    pub scoring_mode: Option<String>,
    /// `human`, `judge`, `reference`, `classifier` or `verifier`.
    #[serde(default)]
    pub rater_kind: Option<String>,
    /// What was rated (matches raters, repeats and presentation orders of one item).
    #[serde(default)]
    pub item: Option<String>,
    /// Pairwise: the other system, `id@version`.
    #[serde(default)]
    pub opponent: Option<String>,
    /// Pairwise: where this run's output was shown, 1 or 2.
    #[serde(default)]
    pub position: Option<i32>,
    /// Pairwise: this run's output's length and the opponent's, in one unit the evaluator
    /// chooses (tokens or characters), for the judge's verbosity bias.
    #[serde(default)]
    pub output_length: Option<i64>,
    #[serde(default)]
    pub opponent_output_length: Option<i64>,
    /// A set-level score's interval, as its evaluator reports it.
    #[serde(default)]
    pub ci_low: Option<f64>,
    #[serde(default)]
    pub ci_high: Option<f64>,
}

impl Evaluation {
    /// A result with a name and a score, every other field empty.
    pub fn scored(name: &str, score: Option<f64>) -> Evaluation {
        Evaluation {
            name: name.to_string(),
            score_value: score,
            score_label: None,
            explanation: None,
            evaluator: None,
            evaluator_version: None,
            step: None,
            scoring_mode: None,
            rater_kind: None,
            item: None,
            opponent: None,
            position: None,
            output_length: None,
            opponent_output_length: None,
            ci_low: None,
            ci_high: None,
        }
    }
}

impl TrajectoryEvent {
    /// An event of `kind` with no body yet (set the one `kind` names) and no agent.
    pub fn bare(
        event_id: String,
        run_id: String,
        system: SystemRef,
        source: Source,
        event_time: i64,
        sequence: i64,
        kind: EventKind,
    ) -> Self {
        TrajectoryEvent {
            event_id,
            run_id,
            system,
            source,
            agent_id: None,
            event_time,
            sequence,
            kind,
            run_started: None,
            step: None,
            intervention: None,
            run_ended: None,
        }
    }
}

/// One unit of one instrument (schema `Observation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub observation_id: String,
    pub metric: String,
    pub system_id: String,
    pub system_version: String,
    pub source: Source,
    #[serde(default)]
    pub agent_id: Option<String>,
    pub run_id: String,
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub attempt: Option<i32>,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub benchmark: Option<String>,
    #[serde(default)]
    pub task_family: Option<String>,
    pub cluster_id: String,
    #[serde(default)]
    pub step: Option<i64>,
    pub event_time: i64,
    pub value: f64,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub provenance: Option<Provenance>,
    /// The original run, when this unit comes from a re-run (`RunStarted::rerun_of`): it
    /// enters no window or profile; the profiler pairs it with the original's units.
    #[serde(default)]
    pub rerun_of: Option<String>,
}

/// Where a success verdict came from (schema `Provenance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Provenance {
    #[serde(rename = "VERIFIER", alias = "verifier")]
    Verifier,
    #[serde(rename = "HUMAN", alias = "human")]
    Human,
    #[serde(rename = "JUDGE", alias = "judge")]
    Judge,
    #[serde(rename = "SELF_REPORTED", alias = "self_reported")]
    SelfReported,
    #[serde(rename = "ABANDONED", alias = "abandoned")]
    Abandoned,
}

impl Provenance {
    pub const ALL: [Provenance; 5] =
        [Provenance::Verifier, Provenance::Human, Provenance::Judge, Provenance::SelfReported, Provenance::Abandoned];

    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Verifier => "verifier",
            Provenance::Human => "human",
            Provenance::Judge => "judge",
            Provenance::SelfReported => "self_reported",
            Provenance::Abandoned => "abandoned",
        }
    }
}

fn one() -> f64 {
    1.0
}

/// One metric over one window (schema `MetricWindow`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricWindow {
    pub window_id: String,
    pub system_id: String,
    pub system_version: String,
    pub source: Source,
    pub metric: String,
    pub dimension: String,
    #[serde(default)]
    pub benchmark: Option<String>,
    #[serde(default)]
    pub slice_kind: Option<String>,
    #[serde(default)]
    pub slice: Option<String>,
    pub window_start: i64,
    pub window_end: i64,
    pub units: i64,
    pub clusters: i64,
    #[serde(default)]
    pub estimate: Option<f64>,
    #[serde(default)]
    pub ci_low: Option<f64>,
    #[serde(default)]
    pub ci_high: Option<f64>,
    pub level: f64,
    pub replicates: i32,
    pub seed: i64,
    pub method: String,
    #[serde(default)]
    pub band: Option<i32>,
    #[serde(default)]
    pub band_low: Option<i32>,
    #[serde(default)]
    pub band_high: Option<i32>,
    #[serde(default)]
    pub na_reason: Option<String>,
    #[serde(default)]
    pub veto_state: Option<String>,
    #[serde(default)]
    pub evidence_log_e: Option<f64>,
    #[serde(default)]
    pub evidence_alpha: Option<f64>,
    #[serde(default)]
    pub evidence_since: Option<i64>,
    #[serde(default)]
    pub evidence_estimate: Option<f64>,
    pub catalogue_version: String,
    pub watermark: i64,
    /// The reference pool's version, for a comparative (Q) metric.
    #[serde(default)]
    pub pool_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DimensionBand {
    pub dimension: String,
    #[serde(default)]
    pub band: Option<i32>,
    #[serde(default)]
    pub band_low: Option<i32>,
    #[serde(default)]
    pub band_high: Option<i32>,
    #[serde(default)]
    pub na_reason: Option<String>,
    #[serde(default)]
    pub capped_by: Vec<String>,
    #[serde(default)]
    pub instruments: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VetoStatus {
    pub rule: String,
    pub metric: String,
    #[serde(default)]
    pub benchmark: Option<String>,
    pub state: String,
    #[serde(default)]
    pub estimate: Option<f64>,
    #[serde(default)]
    pub ci_low: Option<f64>,
    #[serde(default)]
    pub ci_high: Option<f64>,
    pub threshold: f64,
}

/// The rolling eight-dimension profile (schema `DimensionProfile`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DimensionProfile {
    pub profile_id: String,
    pub system_id: String,
    pub system_version: String,
    pub source: Source,
    pub window_start: i64,
    pub window_end: i64,
    pub dimensions: Vec<DimensionBand>,
    pub vetoes: Vec<VetoStatus>,
    #[serde(default)]
    pub unsuitable: bool,
    pub catalogue_version: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AlertStatus {
    #[serde(rename = "FIRING", alias = "firing")]
    Firing,
    #[serde(rename = "RESOLVED", alias = "resolved")]
    Resolved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Severity {
    #[serde(rename = "INFO", alias = "info")]
    Info,
    #[serde(rename = "WARNING", alias = "warning")]
    Warning,
    #[serde(rename = "CRITICAL", alias = "critical")]
    Critical,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AlertKind {
    #[serde(rename = "VETO", alias = "veto")]
    Veto,
    #[serde(rename = "INCIDENT", alias = "incident")]
    Incident,
    #[serde(rename = "PIPELINE", alias = "pipeline")]
    Pipeline,
}

/// A veto alert or an incident (schema `Alert`).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub alert_id: String,
    pub fingerprint: String,
    pub status: AlertStatus,
    pub severity: Severity,
    pub kind: AlertKind,
    pub alertname: String,
    pub rule: String,
    pub system_id: String,
    pub system_version: String,
    pub source: Source,
    #[serde(default)]
    pub dimension: Option<String>,
    #[serde(default)]
    pub metric: Option<String>,
    #[serde(default)]
    pub veto_state: Option<String>,
    #[serde(default)]
    pub estimate: Option<f64>,
    #[serde(default)]
    pub ci_low: Option<f64>,
    #[serde(default)]
    pub ci_high: Option<f64>,
    #[serde(default)]
    pub threshold: Option<f64>,
    #[serde(default)]
    pub window_start: Option<i64>,
    #[serde(default)]
    pub window_end: Option<i64>,
    #[serde(default)]
    pub run_id: Option<String>,
    #[serde(default)]
    pub step: Option<i64>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_arguments: Option<String>,
    #[serde(default)]
    pub violations: Vec<String>,
    pub starts_at: i64,
    #[serde(default)]
    pub ends_at: Option<i64>,
    pub summary: String,
    #[serde(default)]
    pub runbook_url: String,
}

impl std::fmt::Debug for Alert {
    /// Tool arguments may hold anything an agent sent (secrets included): Debug shows their size.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alert")
            .field("alert_id", &self.alert_id)
            .field("fingerprint", &self.fingerprint)
            .field("status", &self.status)
            .field("severity", &self.severity)
            .field("kind", &self.kind)
            .field("alertname", &self.alertname)
            .field("rule", &self.rule)
            .field("system_id", &self.system_id)
            .field("system_version", &self.system_version)
            .field("source", &self.source)
            .field("dimension", &self.dimension)
            .field("metric", &self.metric)
            .field("veto_state", &self.veto_state)
            .field("estimate", &self.estimate)
            .field("ci_low", &self.ci_low)
            .field("ci_high", &self.ci_high)
            .field("threshold", &self.threshold)
            .field("window_start", &self.window_start)
            .field("window_end", &self.window_end)
            .field("run_id", &self.run_id)
            .field("step", &self.step)
            .field("agent_id", &self.agent_id)
            .field("tool_name", &self.tool_name)
            .field("tool_arguments_len", &self.tool_arguments.as_ref().map(String::len))
            .field("violations", &self.violations)
            .field("starts_at", &self.starts_at)
            .field("ends_at", &self.ends_at)
            .field("summary", &self.summary)
            .field("runbook_url", &self.runbook_url)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileMetric {
    pub metric: String,
    pub dimension: String,
    #[serde(default)]
    pub benchmark: Option<String>,
    pub units: i64,
    #[serde(default)]
    pub estimate: Option<f64>,
    #[serde(default)]
    pub ci_low: Option<f64>,
    #[serde(default)]
    pub ci_high: Option<f64>,
    #[serde(default)]
    pub band: Option<i32>,
    #[serde(default)]
    pub band_low: Option<i32>,
    #[serde(default)]
    pub band_high: Option<i32>,
    #[serde(default)]
    pub na_reason: Option<String>,
    #[serde(default)]
    pub veto_state: Option<String>,
    /// The reference pool's version, for a comparative (Q) metric.
    #[serde(default)]
    pub pool_version: Option<String>,
}

/// A periodic profile (schema `Profile`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub profile_id: String,
    pub system_id: String,
    pub system_version: String,
    pub source: Source,
    pub period: String,
    pub period_start: i64,
    pub period_end: i64,
    pub generated_at: i64,
    pub catalogue_version: String,
    pub method: String,
    pub level: f64,
    pub replicates: i32,
    pub seed: i64,
    pub metrics: Vec<ProfileMetric>,
    pub dimensions: Vec<DimensionBand>,
    #[serde(default)]
    pub unsuitable: bool,
    #[serde(default)]
    pub gate: Option<String>,
    #[serde(default)]
    pub gate_na_reason: Option<String>,
    #[serde(default)]
    pub efficacy_index: Option<f64>,
    #[serde(default)]
    pub efficacy_index_geometric: Option<f64>,
    #[serde(default)]
    pub judge_human_kappa: Option<f64>,
    #[serde(default)]
    pub ppi_success: Option<f64>,
    #[serde(default)]
    pub ppi_ci_low: Option<f64>,
    #[serde(default)]
    pub ppi_ci_high: Option<f64>,
    #[serde(default)]
    pub evidence_uri: Option<String>,
}

/// Event-time progress of one upstream partition (schema `Watermark`), sent by the scorer to
/// every partition of `octant.observations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermark {
    pub service: String,
    pub source_topic: String,
    pub source_partition: i32,
    pub source_partitions: i32,
    #[serde(default)]
    pub watermark: Option<i64>,
    #[serde(default)]
    pub idle: bool,
    pub produced_at: i64,
}

/// A request to re-execute one run from its fixed artefacts (schema `ReRunRequest`, seed 000
/// §IV-G), published by the profiler on `octant.reruns` for the harness that owns the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReRunRequest {
    /// `rerun:<run_id>`: published twice, one id.
    pub request_id: String,
    pub run_id: String,
    pub system_id: String,
    pub system_version: String,
    #[serde(default)]
    pub config_hash: String,
    /// `production` or `evaluation`.
    pub source: String,
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub benchmark: Option<String>,
    #[serde(default)]
    pub environment_version: Option<String>,
    #[serde(default)]
    pub task_spec: Option<String>,
    #[serde(default)]
    pub agent_config: Option<String>,
    #[serde(default)]
    pub decoding: Option<String>,
    #[serde(default)]
    pub seed: Option<i64>,
    /// `coverage`, `veto_adjacent` or `sample`.
    pub reason: String,
    pub period: String,
    pub run_time: i64,
    pub requested_at: i64,
}

impl ReRunRequest {
    /// The request id of a run's re-run.
    pub fn id_of(run_id: &str) -> String {
        format!("rerun:{run_id}")
    }
}

/// A record a service could not process (schema `DeadLetter`).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub dead_letter_id: String,
    pub service: String,
    pub source_topic: String,
    pub partition: i32,
    pub offset: i64,
    #[serde(default, with = "opt_bytes")]
    pub key: Option<Vec<u8>>,
    #[serde(with = "bytes")]
    pub payload: Vec<u8>,
    pub error_class: String,
    pub error_message: String,
    pub failed_at: i64,
}

impl std::fmt::Debug for DeadLetter {
    /// The payload may hold anything a producer sent (secrets included): Debug shows its size.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadLetter")
            .field("dead_letter_id", &self.dead_letter_id)
            .field("service", &self.service)
            .field("source_topic", &self.source_topic)
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .field("key_len", &self.key.as_ref().map(Vec::len))
            .field("payload_len", &self.payload.len())
            .field("error_class", &self.error_class)
            .field("error_message", &self.error_message)
            .field("failed_at", &self.failed_at)
            .finish()
    }
}

/// Avro `bytes` through serde: apache-avro wants serde's bytes, JSON gets an array of numbers.
mod bytes {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
            fn visit_str<E>(self, v: &str) -> Result<Vec<u8>, E> {
                Ok(v.as_bytes().to_vec())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

mod opt_bytes {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_some(&Bytes(b)),
            None => s.serialize_none(),
        }
    }

    struct Bytes<'a>(&'a [u8]);
    impl serde::Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Option<Vec<u8>>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("optional bytes")
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                super::bytes::deserialize(d).map(Some)
            }
        }
        d.deserialize_option(V)
    }
}
