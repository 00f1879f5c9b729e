//! What the conventions do not say, declared: which attributes name the system, which mean a
//! constraint violation, a confirmation, an outcome or a verdict, and the impact of each tool.
//! Every field has a documented default; `[mapping]` in the ingest service's configuration.

use std::collections::BTreeMap;

use octant_contracts::Impact;
use serde::{Deserialize, Serialize};

/// The GenAI events Octant reads (OpenTelemetry's evaluation result and tool-call decision).
pub const EVALUATION_RESULT: &str = "gen_ai.evaluation.result";
pub const TOOL_CALL_DECISION: &str = "gen_ai.tool.call.decision";
/// Events the ingest keeps whatever the mapping says.
pub const EVENTS: [&str; 2] = [EVALUATION_RESULT, TOOL_CALL_DECISION];

/// Who gives a verdict declared in [`Mapping::verdicts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Verifier,
    Judge,
    Human,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mapping {
    /// Resource attribute naming the evaluated system (default `service.name`; a span
    /// attribute of the root span is read too).
    pub system_attribute: String,
    /// Resource attribute naming its version (default `service.version`; "unknown" when absent).
    pub version_attribute: String,
    /// Resource or root-span attribute whose value `evaluation` marks evaluation runs
    /// (default `octant.source`); everything else is production.
    pub source_attribute: String,
    /// Impact of each tool by name: `low`, `high` or `irreversible` (default: none listed).
    pub tool_impact: BTreeMap<String, Impact>,
    /// Impact of tools not listed (default `low`).
    pub default_impact: Impact,
    /// Span attribute declaring a step's impact (default `octant.tool.impact`), read before
    /// `tool_impact`.
    pub impact_attribute: String,
    /// Span attributes that declare constraint violations: a string (one constraint), an
    /// array of strings, or `true` (the attribute's name) (default `octant.violations`).
    pub violation_attributes: Vec<String>,
    /// Span or log events that declare one violation each, its constraint in attribute
    /// `constraint` (default `octant.violation`).
    pub violation_events: Vec<String>,
    /// Span attribute: a human confirmed this action before it ran (default `octant.confirmed`).
    pub confirmation_attribute: String,
    /// Span attribute: the agent escalated to a human at this step (default `octant.escalated`).
    pub escalation_attribute: String,
    /// Span attribute: a fault was injected into this step by a test or chaos harness (default
    /// `octant.injected_fault`): `error_recovery` and graceful degradation's split.
    pub fault_attribute: String,
    /// Span attribute: a gold label (a reference's or a reviewer's) saying whether this step
    /// needed a human (default `octant.needs_human`): escalation precision and recall.
    pub needs_human_attribute: String,
    /// Span attribute: the permission a tool call ran under (default `octant.tool.permission`;
    /// no instrumentation library writes one): audit completeness requires it.
    pub permission_attribute: String,
    /// Span attribute: what the span read carried a prompt-injection attempt (default
    /// `octant.injection_attempt`; an adversarial suite's label or a guardrail's finding):
    /// injection success rate.
    pub injection_attribute: String,
    /// Span or log events declaring an intervention, with attributes `kind` (`stop`,
    /// `override`, `help`) and `honoured` (default `octant.intervention`).
    pub intervention_events: Vec<String>,
    /// Root-span attribute with the run's outcome: success, failure, error, abandoned
    /// (default `octant.outcome`; without it the root span's status decides).
    pub outcome_attribute: String,
    /// Root-span attributes of a verifier: its kind and its boolean verdict (defaults
    /// `octant.verifier.kind`, `octant.verifier.verdict`).
    pub verifier_kind_attribute: String,
    pub verifier_verdict_attribute: String,
    /// Root-span attributes with judge and human grades in [0, 1] (defaults
    /// `octant.judge.verdict`, `octant.human.verdict`).
    pub judge_verdict_attribute: String,
    pub human_verdict_attribute: String,
    /// Evaluation results (`gen_ai.evaluation.result` by `gen_ai.evaluation.name`, or
    /// OpenInference's) that are a run's verdict, with who gave it: `verifier` (a score ≥ 0.5 or
    /// a passing label is a pass), `judge` or `human` (a grade in [0, 1]; a passing label is
    /// 1, a failing one 0). Only results about the run, not about one step, count; the
    /// root-span attributes above win over them. Without any verdict a run's task success is
    /// N/A for gating (its self-reported outcome stays informational). Default: none.
    pub verdicts: BTreeMap<String, VerdictKind>,
    /// Span attribute naming the run's task (default `octant.task.id`), read before
    /// `gen_ai.conversation.id` and `session.id`; without any, the run has no task id and no
    /// task-level instruments.
    pub task_attribute: String,
    /// Attributes of an evaluation result naming the evaluator and its version (defaults
    /// `gen_ai.evaluation.evaluator.name`, `gen_ai.evaluation.evaluator.version`); without
    /// them the instrumentation scope that emitted the result is the evaluator.
    pub evaluator_attribute: String,
    pub evaluator_version_attribute: String,
    /// Whether the spans of an instrumentation scope can show a human's approval, by scope
    /// name, declared ([`crate::approvals`]): `true` makes every trace of the scope show its
    /// approval flow (its source is watched), `false` makes its traces not assessed for
    /// confirmation gating whatever they show (default: none; learned from what is emitted).
    pub approval_channels: BTreeMap<String, bool>,
    /// A team's own approval events (span events, or log records in the trace): on a tool span
    /// or naming `gen_ai.tool.call.id`, with attribute `decision` — approved, approve, allow,
    /// granted, yes or true confirm the call; denied, deny, rejected, reject, no or false deny
    /// it (an override, honoured when the tool did not run) (default none).
    pub approval_events: Vec<String>,
    /// Span or resource attribute naming one run across the traces it became when it paused
    /// for a human and resumed (default none: each trace is a run). It must name one run, not
    /// a conversation of many: the part after the run ended is dead-lettered `closed_run`.
    pub run_key: String,
    /// Span or resource attributes copied into the run's groups as `key=value` (fairness gap)
    /// (default none).
    pub group_attributes: Vec<String>,
}

impl Default for Mapping {
    fn default() -> Self {
        let s = |x: &str| x.to_string();
        Mapping {
            system_attribute: s("service.name"),
            version_attribute: s("service.version"),
            source_attribute: s("octant.source"),
            tool_impact: BTreeMap::new(),
            default_impact: Impact::Low,
            impact_attribute: s("octant.tool.impact"),
            violation_attributes: vec![s("octant.violations")],
            violation_events: vec![s("octant.violation")],
            confirmation_attribute: s("octant.confirmed"),
            escalation_attribute: s("octant.escalated"),
            fault_attribute: s("octant.injected_fault"),
            needs_human_attribute: s("octant.needs_human"),
            permission_attribute: s("octant.tool.permission"),
            injection_attribute: s("octant.injection_attempt"),
            intervention_events: vec![s("octant.intervention")],
            outcome_attribute: s("octant.outcome"),
            verifier_kind_attribute: s("octant.verifier.kind"),
            verifier_verdict_attribute: s("octant.verifier.verdict"),
            judge_verdict_attribute: s("octant.judge.verdict"),
            human_verdict_attribute: s("octant.human.verdict"),
            evaluator_attribute: s("gen_ai.evaluation.evaluator.name"),
            evaluator_version_attribute: s("gen_ai.evaluation.evaluator.version"),
            group_attributes: Vec::new(),
            approval_channels: BTreeMap::new(),
            approval_events: Vec::new(),
            run_key: String::new(),
            verdicts: BTreeMap::new(),
            task_attribute: s("octant.task.id"),
        }
    }
}

impl Mapping {
    /// The log and span event names the ingest keeps (everything else is counted and left).
    pub fn wanted_event(&self, name: &str) -> bool {
        EVENTS.contains(&name)
            || self.violation_events.iter().chain(&self.intervention_events).chain(&self.approval_events).any(|e| e == name)
    }
}
