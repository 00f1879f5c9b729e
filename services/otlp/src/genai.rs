//! A trace of GenAI spans (OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry) and
//! its events → one run of `TrajectoryEvent`s.
//!
//! - The trace is the run (run id = the trace id). Its root span (no parent, or a parent the
//!   trace does not hold; the earliest if several) starts and ends it; `gen_ai.conversation.id`
//!   becomes the run's task id (a conversation spans traces, which are assembled in different
//!   places, so it cannot itself be the run).
//! - Steps, in start-time order: `execute_tool` spans (OpenInference `TOOL`, OpenLLMetry
//!   `tool`) are tool calls; inference spans (`chat`, `text_completion`, `generate_content`,
//!   `embeddings`; OpenInference `LLM`, OpenLLMetry `llm.request.type`) are model calls with
//!   their token usage; latency is the span's duration.
//! - The acting agent of a step is its nearest `invoke_agent` (or `AGENT`) ancestor:
//!   `gen_ai.agent.id`, else `gen_ai.agent.name` (or `agent.name`).
//! - Approval decisions (`gen_ai.tool.call.decision`, joined by `gen_ai.tool.call.id`):
//!   `require_approval` then `allow` confirms the call; `deny` is an override, honoured when
//!   the tool did not run. A guardrail span (`apply_guardrail`, OpenInference `GUARDRAIL`)
//!   that failed (status error) is an override it made.
//! - Approvals ([`crate::approvals`]): what the trace shows of its approval flow (a decision,
//!   a confirmation, a pause in a keyed run…), and where its tool calls were traced, go into
//!   the run's start; the scorer learns from them which sources are watched. Calls that did
//!   not run — held for confirmation, proposed and left waiting, a framework's synthetic span
//!   over parallel calls — are no steps; a keyed run's part that ends on a pause ends with a
//!   request for confirmation per call and no run end.
//! - `gen_ai.evaluation.result` events (log records in the trace, or span events) are the
//!   run's evaluations, with the step they are about when parented to one; so are
//!   OpenInference's flattened results (`evaluations.<i>.evaluation.{name,score,label,
//!   explanation}` or `annotations.<i>.annotation.*`) on any span, about the span it links to
//!   (an `EVALUATOR` carrier) or else the span itself.
//! - What the conventions do not cover comes from the declared [`Mapping`], and from fixed
//!   `octant.*` attributes of the root span: `octant.sentences.{assertive,unsupported}`,
//!   `octant.grounding.<field>`, `octant.review.<field>` and `octant.coordination.<field>`
//!   (the field names of the `Grounding`, `Review` and `Coordination` records of `RunEnded`; `manual_baseline` is `estimated` or
//!   `observed`).
//! - Reproducibility artefacts: the first inference span's `gen_ai.request.{temperature, top_p,
//!   top_k, max_tokens, frequency_penalty, presence_penalty}` (as JSON text) and
//!   `gen_ai.request.seed`; the root span's `octant.environment.version`, `octant.task.spec`,
//!   `octant.agent.config`; the task family from the root's `octant.task.family`; the run a
//!   harness re-executes (answering an `octant.reruns` request) from the root's `octant.rerun_of`.

use std::collections::{BTreeMap, BTreeSet};

use octant_contracts::{
    BaselineKind, Coordination, Evaluation, EventKind, Grounding, Impact, Intervention, InterventionKind, Outcome, Reproducibility,
    ResultStatus, Review, RunEnded, RunStarted, Source, Step, StepKind, SystemRef, TrajectoryEvent,
};
use serde_json::Value;

use crate::mapping::{Mapping, VerdictKind};
use crate::model::{Attrs, EventRec, LogRec, SpanRec};

pub use crate::mapping::{EVALUATION_RESULT, EVENTS, TOOL_CALL_DECISION};

/// A tool call's arguments and its result, under the conventions' names (GenAI, OpenInference,
/// OpenLLMetry).
/// (Google ADK's legacy telemetry schema writes them only under its own names.)
const TOOL_ARGUMENTS: [&str; 4] =
    ["gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input", "gcp.vertex.agent.tool_call_args"];
const TOOL_RESULT: [&str; 4] = ["gen_ai.tool.call.result", "output.value", "traceloop.entity.output", "gcp.vertex.agent.tool_response"];

const INFERENCE: [&str; 5] = ["chat", "text_completion", "generate_content", "embeddings", "completion"];

/// A tool's name under the conventions' names (GenAI, OpenInference, OpenLLMetry).
const TOOL_NAMES: [&str; 3] = ["gen_ai.tool.name", "tool.name", "traceloop.entity.name"];

/// The proposed agent-lifecycle event of a pause (semantic-conventions-genai PR #445, not
/// merged): with `gen_ai.agent.pause.reason = human_input`, the run waits for a human.
const AGENT_PAUSED: &str = "gen_ai.agent.paused";

/// What a span is, by the conventions it follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    Agent,
    Tool,
    Model,
    Guardrail,
    #[default]
    Other,
}

pub fn role(s: &SpanRec) -> Role {
    s.role
}

/// [`role`] from the span's attributes (done once, when the span is read: [`SpanRec::role`]).
pub(crate) fn classify(s: &SpanRec) -> Role {
    let op = str_attr(&s.attrs, "gen_ai.operation.name");
    let oi = str_attr(&s.attrs, "openinference.span.kind").map(str::to_ascii_uppercase);
    let tl = str_attr(&s.attrs, "traceloop.span.kind");
    match (op, oi.as_deref(), tl) {
        (Some("execute_tool"), ..) | (_, Some("TOOL"), _) | (.., Some("tool")) => Role::Tool,
        (Some("invoke_agent" | "create_agent"), ..) | (_, Some("AGENT"), _) | (.., Some("agent")) => Role::Agent,
        (Some("apply_guardrail"), ..) | (_, Some("GUARDRAIL"), _) => Role::Guardrail,
        (Some(op), ..) if INFERENCE.contains(&op) => Role::Model,
        (_, Some("LLM" | "EMBEDDING"), _) => Role::Model,
        _ if s.attrs.contains_key("llm.request.type") => Role::Model,
        _ => Role::Other,
    }
}

/// Operations that invoke an agent, a workflow or a conversation turn in-process (the GenAI
/// conventions from v1.41 on, and their successor's `gen_ai.invocation.internal` spans).
const INVOCATIONS: [&str; 3] = ["invoke_agent", "invoke_workflow", "handle_conversation_turn"];

/// Whether a span invokes an agent, a workflow or a conversation turn: an agent span, or one of
/// [`INVOCATIONS`].
fn invocation(s: &SpanRec) -> bool {
    let op = str_attr(&s.attrs, "gen_ai.operation.name");
    (role(s) == Role::Agent && op != Some("create_agent")) || op.is_some_and(|op| INVOCATIONS.contains(&op))
}

/// Attributes naming an agent: the GenAI conventions', OpenInference's, OpenLLMetry's.
const AGENT_NAMES: [&str; 3] = ["gen_ai.agent.name", "agent.name", "traceloop.entity.name"];

/// An agent span that names its agent (the contrib instrumentation of the OpenAI Agents SDK
/// writes the SDK's trace as an `invoke_agent` root without a name: a workflow in all but name).
/// Only attributes name it here: an OpenInference `AGENT` root named only by its span name is
/// the Agents SDK's trace (its workflow), and a failure under it is the run's.
fn named_agent(s: &SpanRec) -> bool {
    role(s) == Role::Agent
        && (first_str(&s.attrs, &AGENT_NAMES).is_some()
            || str_attr(&s.attrs, "gen_ai.agent.id").is_some_and(|id| !DEFAULT_AGENT_IDS.contains(&id)))
}

/// The agent an agent span names: its name (`gen_ai.agent.name`, OpenInference `agent.name`,
/// OpenLLMetry `traceloop.entity.name`), else `gen_ai.agent.id` unless it is a library's
/// default ([`DEFAULT_AGENT_IDS`]); an OpenInference `AGENT` span without either is named by
/// its span name, as OpenInference's LangChain instrumentation writes them. A default id alone
/// names no agent: the search goes on to the enclosing agent. The name comes first because in-process ids are not stable: OpenLLMetry's LangChain
/// instrumentation writes the LangChain run's UUID, new at every invocation (the successor
/// conventions keep `gen_ai.agent.id` for hosted agents only). `None` for other spans.
fn agent_name(s: &SpanRec) -> Option<&str> {
    if role(s) != Role::Agent {
        return None;
    }
    let a = &s.attrs;
    first_str(a, &AGENT_NAMES).or_else(|| str_attr(a, "gen_ai.agent.id").filter(|id| !DEFAULT_AGENT_IDS.contains(id))).or_else(|| {
        let oi = str_attr(a, "openinference.span.kind").is_some_and(|k| k.eq_ignore_ascii_case("AGENT"));
        (oi && !s.name.is_empty()).then_some(s.name.as_str())
    })
}

/// An OpenInference `TOOL` span that is the OpenAI Agents SDK's handoff (`handoff to <agent>`,
/// the agents in `input.value` and `output.value`): a transfer between agents, not a tool call
/// (the other libraries write no tool span for it; the next agent's steps show it).
fn handoff(s: &SpanRec) -> bool {
    s.name.starts_with("handoff to ") && str_attr(&s.attrs, "openinference.span.kind").is_some_and(|k| k.eq_ignore_ascii_case("TOOL"))
}

/// A framework's own bookkeeping span in the shape of a tool call: a tool span whose tool name
/// is no function's name but a parenthesised label (Google ADK's `(merged tools)`, the span it
/// writes over the responses of parallel calls, each of which has its own tool span). Not a
/// call; never a step.
fn synthetic(s: &SpanRec) -> bool {
    role(s) == Role::Tool && first_str(&s.attrs, &TOOL_NAMES).is_some_and(|n| n.starts_with('(') && n.ends_with(')'))
}

/// Phrases of a tool result that asks for a human's confirmation instead of a result (a call
/// held: the framework did not run it), matched case-insensitively anywhere in the result's
/// text (Google ADK's tool confirmation answers `This tool call requires confirmation, please
/// approve or reject.`).
const ASKS_CONFIRMATION: [&str; 6] =
    ["requires confirmation", "require confirmation", "requires approval", "approval required", "awaiting approval", "pending approval"];

/// Phrases of a tool result that says a human refused the call (the framework did not run it and
/// answered the model so), matched case-insensitively anywhere in the result's text (Google
/// ADK: `This tool call is rejected.`; the OpenAI Agents SDK's answer: `Tool execution was not
/// approved.`).
const REFUSED: [&str; 7] = [
    "tool call is rejected",
    "tool call was rejected",
    "tool call is denied",
    "tool call was denied",
    "tool call was not approved",
    "tool execution was not approved",
    "tool execution was denied",
];

/// A tool span of a call a human refused: its result says so ([`REFUSED`]). The call did not run:
/// no step, an override honoured, and evidence of the approval flow.
fn refused(s: &SpanRec) -> bool {
    role(s) == Role::Tool
        && first_text(&s.attrs, &TOOL_RESULT).is_some_and(|r| {
            let r = r.to_ascii_lowercase();
            REFUSED.iter().any(|p| r.contains(p))
        })
}

/// A tool span held for confirmation: its result asks for one ([`ASKS_CONFIRMATION`]). (A
/// `require_approval` decision on a tool span is no hold: an `allow` may follow and the call run,
/// as the decision events say.)
fn held(s: &SpanRec) -> bool {
    role(s) == Role::Tool
        && first_text(&s.attrs, &TOOL_RESULT).is_some_and(|r| {
            let r = r.to_ascii_lowercase();
            ASKS_CONFIRMATION.iter().any(|p| r.contains(p))
        })
}

/// A tool result that says it failed: LangChain's `ToolMessage` (as OpenInference's and
/// OpenLLMetry's LangChain instrumentations serialise it, bare or under `data`) with
/// `status = "error"` — LangGraph's tool node catches a tool's exception and returns it so,
/// leaving the span OK.
fn failed_result(text: Option<&str>) -> bool {
    fn error(v: &Value, depth: u8) -> bool {
        v.get("status").and_then(Value::as_str) == Some("error")
            || (depth < 3 && ["data", "kwargs", "output"].iter().any(|k| v.get(k).is_some_and(|x| error(x, depth + 1))))
    }
    text.and_then(|t| serde_json::from_str::<Value>(t).ok()).is_some_and(|v| error(&v, 0))
}

/// The agent LangChain says owns a step (`lc_agent_name` in its run metadata: OpenLLMetry's
/// `traceloop.association.properties.lc_agent_name`, inside OpenInference's `metadata` JSON).
/// LangGraph's instrumentations put a node's agent span beside, not above, the node's model
/// and tool calls.
fn langchain_agent(a: &Attrs) -> Option<String> {
    str_attr(a, "traceloop.association.properties.lc_agent_name").map(str::to_string).or_else(|| {
        let m: Value = serde_json::from_str(str_attr(a, "metadata")?).ok()?;
        m.get("lc_agent_name").and_then(Value::as_str).filter(|n| !n.is_empty()).map(str::to_string)
    })
}

/// The agent a span names itself ([`SpanRec::own_agent`]): by LangChain's metadata
/// ([`langchain_agent`]) or as an agent span ([`agent_name`]).
pub(crate) fn own_agent(s: &SpanRec) -> Option<String> {
    langchain_agent(&s.attrs).or_else(|| agent_name(s).map(str::to_string))
}

/// A trace mapped: its events in sequence order, and what was left out.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub events: Vec<TrajectoryEvent>,
    /// Semantic-conventions versions (schema URLs) the spans declared.
    pub schema_urls: BTreeSet<String>,
}

pub fn str_attr<'a>(a: &'a Attrs, key: &str) -> Option<&'a str> {
    a.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn first_str<'a>(a: &'a Attrs, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| str_attr(a, k))
}

fn int_attr(a: &Attrs, key: &str) -> Option<i64> {
    match a.get(key)? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn f64_attr(a: &Attrs, key: &str) -> Option<f64> {
    match a.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn bool_attr(a: &Attrs, key: &str) -> Option<bool> {
    match a.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// An int attribute that fits a count.
fn count_attr(a: &Attrs, key: &str) -> Option<i32> {
    int_attr(a, key).and_then(|v| i32::try_from(v).ok())
}

/// Grounded-drafting judgements from the root span's `octant.grounding.<field>` attributes
/// (the `Grounding` record's field names), when any is set.
fn grounding_of(a: &Attrs) -> Option<Grounding> {
    let c = |field: &str| count_attr(a, &format!("octant.grounding.{field}"));
    let g = Grounding {
        citations: c("citations"),
        citations_used_strict: c("citations_used_strict"),
        citations_used_lenient: c("citations_used_lenient"),
        citations_required: c("citations_required"),
        citations_required_cited: c("citations_required_cited"),
        sentences_cited: c("sentences_cited"),
        sentences_total: c("sentences_total"),
        sentences_irrelevant: c("sentences_irrelevant"),
        key_elements_expected: c("key_elements_expected"),
        key_elements_captured: c("key_elements_captured"),
        claims: c("claims"),
        claims_unsupported: c("claims_unsupported"),
    };
    (g != Grounding::default()).then_some(g)
}

/// Multi-agent coordination from the root span's `octant.coordination.<field>` attributes
/// (the `Coordination` record's field names), when any is set.
fn coordination_of(a: &Attrs) -> Option<Coordination> {
    let key = |field: &str| format!("octant.coordination.{field}");
    let c = Coordination {
        delegations: count_attr(a, &key("delegations")),
        delegations_correct: count_attr(a, &key("delegations_correct")),
        terminated_correctly: bool_attr(a, &key("terminated_correctly")),
        stalled: bool_attr(a, &key("stalled")),
        messages: count_attr(a, &key("messages")),
        messages_optimal: count_attr(a, &key("messages_optimal")),
        faults_injected: count_attr(a, &key("faults_injected")),
        faults_contained: count_attr(a, &key("faults_contained")),
        messages_judged: count_attr(a, &key("messages_judged")),
        messages_relevant: count_attr(a, &key("messages_relevant")),
        conflicts: count_attr(a, &key("conflicts")),
        conflicts_resolved: count_attr(a, &key("conflicts_resolved")),
        verifications: count_attr(a, &key("verifications")),
        verifications_correct: count_attr(a, &key("verifications_correct")),
        reasoning_paths: count_attr(a, &key("reasoning_paths")),
        unproductive_paths: count_attr(a, &key("unproductive_paths")),
    };
    (c != Coordination::default()).then_some(c)
}

/// The human review from the root span's `octant.review.<field>` attributes (the `Review`
/// record's field names; `manual_baseline` is `estimated` or `observed`), when any is set.
fn review_of(a: &Attrs) -> Option<Review> {
    let key = |field: &str| format!("octant.review.{field}");
    let r = Review {
        seeded_defects: count_attr(a, &key("seeded_defects")),
        seeded_caught: count_attr(a, &key("seeded_caught")),
        defective: bool_attr(a, &key("defective")),
        accepted: bool_attr(a, &key("accepted")),
        unplanned_intervention: bool_attr(a, &key("unplanned_intervention")),
        review_minutes: f64_attr(a, &key("review_minutes")),
        generation_minutes: f64_attr(a, &key("generation_minutes")),
        manual_minutes: f64_attr(a, &key("manual_minutes")),
        manual_baseline: match str_attr(a, &key("manual_baseline")).map(str::to_ascii_lowercase).as_deref() {
            Some("estimated") => Some(BaselineKind::Estimated),
            Some("observed") => Some(BaselineKind::Observed),
            _ => None,
        },
    };
    (r != Review::default()).then_some(r)
}

/// The request parameters of an inference span that decide its decoding
/// (`gen_ai.request.<name>`), recorded as JSON text.
const DECODING: [&str; 6] = ["temperature", "top_p", "top_k", "max_tokens", "frequency_penalty", "presence_penalty"];

/// The reproducibility artefacts of a trace: the decoding parameters and seed of its first
/// inference span (`gen_ai.request.*`), and the root span's `octant.environment.version`,
/// `octant.task.spec` and `octant.agent.config`; `None` when none is set.
fn reproducibility_of(root: &Attrs, inference: Option<&Attrs>) -> Option<Reproducibility> {
    let decoding: serde_json::Map<String, Value> = inference
        .map(|a| {
            DECODING
                .iter()
                .filter_map(|k| a.get(&format!("gen_ai.request.{k}")).filter(|v| v.is_number()).map(|v| (k.to_string(), v.clone())))
                .collect()
        })
        .unwrap_or_default();
    let r = Reproducibility {
        environment_version: str_attr(root, "octant.environment.version").map(str::to_string),
        task_spec: str_attr(root, "octant.task.spec").map(str::to_string),
        agent_config: str_attr(root, "octant.agent.config").map(str::to_string),
        decoding: (!decoding.is_empty()).then(|| Value::Object(decoding).to_string()),
        seed: inference.and_then(|a| int_attr(a, "gen_ai.request.seed")),
    };
    (r != Reproducibility::default()).then_some(r)
}

/// The first of `keys` set, as [`text`].
fn first_text(a: &Attrs, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| a.get(*k).filter(|v| !v.is_null())).map(text)
}

/// An attribute as JSON text (strings as they are).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn ms(ns: u64) -> i64 {
    (ns / 1_000_000) as i64
}

/// An event of the trace: a log record or a span event, with the span it is attached to.
struct TraceEvent<'a> {
    name: &'a str,
    time_ns: u64,
    attrs: &'a Attrs,
    span: Option<&'a str>,
    /// The evaluator when the event does not name one: the emitting scope.
    scope: Option<(&'a str, &'a str)>,
}

/// Agent ids that instrumentations stamp when the application names none (the OpenTelemetry
/// contrib instrumentation of the OpenAI Agents SDK writes `gen_ai.agent.id = "agent"` on
/// every agent span): they identify no agent, so the agent's name stands for it.
pub const DEFAULT_AGENT_IDS: [&str; 1] = ["agent"];

/// Usage attributes, as pairs (input, output) in the order they are read: the GenAI
/// conventions (current, then the older prompt/completion names), OpenInference.
const USAGE_PAIRS: [(&str, &str); 3] = [
    ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
    ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"),
    ("llm.token_count.prompt", "llm.token_count.completion"),
];
/// Totals, read when no pair is set (OpenInference, OpenLLMetry).
const USAGE_TOTALS: [&str; 3] = ["llm.token_count.total", "llm.usage.total_tokens", "gen_ai.usage.total_tokens"];

/// The tokens a model span reports (input + output), `None` when it reports no usage: a
/// missing usage is not zero tokens.
pub fn tokens(a: &Attrs) -> Option<i64> {
    let count = |k: &str| int_attr(a, k).filter(|v| *v >= 0);
    // Both halves of a pair, or a total: one half alone is not the call's usage.
    USAGE_PAIRS.iter().find_map(|(i, o)| count(i)?.checked_add(count(o)?)).or_else(|| USAGE_TOTALS.iter().find_map(|k| count(k)))
}

/// One trace: its spans indexed, its root, its events in time order, and the mapping.
struct Trace<'a> {
    spans: &'a [SpanRec],
    by_id: BTreeMap<&'a str, &'a SpanRec>,
    root: &'a SpanRec,
    events: Vec<TraceEvent<'a>>,
    m: &'a Mapping,
}

impl<'a> Trace<'a> {
    fn new(spans: &'a [SpanRec], logs: &'a [LogRec], m: &'a Mapping) -> Option<Trace<'a>> {
        let by_id: BTreeMap<&str, &SpanRec> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
        // Parents that loop (no span without a parent in the trace): the earliest span.
        let root = spans
            .iter()
            .filter(|s| s.parent_span_id.as_deref().is_none_or(|p| !by_id.contains_key(p)))
            .min_by_key(|s| (s.start_ns, s.span_id.clone()))
            .or_else(|| spans.iter().min_by_key(|s| (s.start_ns, s.span_id.clone())))?;
        // Every event of the trace: log records and span events.
        let mut events: Vec<TraceEvent> = Vec::new();
        for l in logs {
            events.push(TraceEvent {
                name: &l.event_name,
                time_ns: l.time_ns,
                attrs: &l.attrs,
                span: l.span_id.as_deref(),
                scope: l.scope.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
            });
        }
        for s in spans {
            for e in &s.events {
                let EventRec { name, time_ns, attrs } = e;
                events.push(TraceEvent {
                    name,
                    time_ns: *time_ns,
                    attrs,
                    span: Some(&s.span_id),
                    scope: Some((&s.scope, &s.scope_version)),
                });
            }
        }
        events.sort_by_key(|e| e.time_ns);
        Some(Trace { spans, by_id, root, events, m })
    }

    /// The span's ancestors, nearest first (at most 256: a cycle of parents ends there).
    fn ancestors(&self, s: &'a SpanRec) -> impl Iterator<Item = &'a SpanRec> + '_ {
        std::iter::successors(s.parent_span_id.as_deref().and_then(|p| self.by_id.get(p).copied()), |x| {
            x.parent_span_id.as_deref().and_then(|p| self.by_id.get(p).copied())
        })
        .take(256)
    }

    /// The acting agent of a span: of the span and its ancestors, nearest first, the first that
    /// names an agent — by LangChain's metadata ([`langchain_agent`]) or as an agent span
    /// ([`agent_name`]).
    fn agent_of(&self, s: &'a SpanRec) -> Option<String> {
        std::iter::once(s)
            .chain(self.ancestors(s))
            .find_map(|x| x.own_agent.clone())
            // Without an agent span above it, the process's main agent when the span names it.
            .or_else(|| first_str(&s.attrs, &["gen_ai.main_agent.name", "gen_ai.main_agent.id"]).map(str::to_string))
    }

    /// The agent of the run's own events (its start, end, denials, interventions): the root's
    /// when its attributes name one ([`named_agent`]), else the first top invocation that names
    /// one, else the process's main agent. Never a workflow's name: not one only the root's span
    /// name gives (an OpenInference `AGENT` root named by its span name is the Agents SDK's
    /// workflow), nor an agent span that describes a workflow (`gen_ai.workflow.*` attributes:
    /// OpenLLMetry writes a LangGraph graph as `invoke_agent <graph name>` with
    /// `gen_ai.workflow.edges`) — a workflow named per run would make one new "agent" per run.
    fn run_agent(&self) -> Option<String> {
        let workflow = |s: &SpanRec| s.attrs.keys().any(|k| k.starts_with("gen_ai.workflow."));
        std::iter::once(self.root)
            .chain(self.top_invocations())
            .find(|s| named_agent(s) && !workflow(s))
            .and_then(agent_name)
            .map(str::to_string)
            .or_else(|| first_str(&self.root.attrs, &["gen_ai.main_agent.name", "gen_ai.main_agent.id"]).map(str::to_string))
    }

    /// The evaluated system and the run's source, from the root's resource (or attributes).
    fn system(&self) -> (SystemRef, Source) {
        let (root, resource, m) = (self.root, &self.root.resource, self.m);
        let system = SystemRef {
            id: first_str(resource, &[&m.system_attribute])
                .or(str_attr(&root.attrs, &m.system_attribute))
                .unwrap_or("unknown_service")
                .to_string(),
            version: first_str(resource, &[&m.version_attribute])
                .or(str_attr(&root.attrs, &m.version_attribute))
                .unwrap_or("unknown")
                .to_string(),
            config_hash: String::new(),
        };
        let source = match str_attr(resource, &m.source_attribute).or(str_attr(&root.attrs, &m.source_attribute)) {
            Some(s) if s.eq_ignore_ascii_case("evaluation") => Source::Evaluation,
            _ => Source::Production,
        };
        (system, source)
    }

    /// The trace's spans, the root first, then in start order (where a run-level attribute is
    /// looked for).
    fn root_first(&self) -> Vec<&'a SpanRec> {
        let mut spans: Vec<&SpanRec> = self.spans.iter().collect();
        spans.sort_by_key(|s| (!std::ptr::eq(*s, self.root), s.start_ns));
        spans
    }

    /// The task: the declared task attribute, else `gen_ai.conversation.id`, else `session.id`
    /// — on the root, else on the first span (in start order) that carries one. `None` when
    /// no span does: never a task made from a span's name (every run of an SDK would share
    /// its default workflow name).
    fn task(&self) -> Option<String> {
        let keys = [self.m.task_attribute.as_str(), "gen_ai.conversation.id", "session.id"];
        let spans = self.root_first();
        keys.iter().find_map(|k| spans.iter().find_map(|s| str_attr(&s.attrs, k))).map(str::to_string)
    }

    /// The declared run key's value (`[mapping] run_key`): on the root, else on the first span
    /// that has it, else on the root's resource. `None` when none is declared or found.
    fn run_key(&self) -> Option<String> {
        let key = self.m.run_key.as_str();
        if key.is_empty() {
            return None;
        }
        self.root_first()
            .iter()
            .find_map(|s| s.attrs.get(key))
            .or_else(|| self.root.resource.get(key))
            .filter(|v| !v.is_null() && v.as_str() != Some(""))
            .map(text)
    }

    /// The spans that are steps, in start-time order: tool calls, guardrails, and model calls
    /// with nested model spans counted once. A framework's inference span with a client
    /// instrumentation's span under it (or any chain of model spans, one inside the other) is
    /// one call: of the chain, the span that carries both the response id and the usage is
    /// kept, else the one with the usage, else the one with the response id, else the
    /// innermost. A model span with several model spans under it (a framework span around
    /// retries, say) is no call itself: each innermost one is.
    fn steps(&self) -> (Vec<&'a SpanRec>, BTreeMap<&'a str, &'a str>) {
        let model = |s: &SpanRec| role(s) == Role::Model;
        // Each model span's outermost model ancestor (itself when none) up to the nearest tool
        // or agent span (a model call made inside a tool is a call of its own): its chain.
        let mut chains: BTreeMap<&str, Vec<(&'a SpanRec, usize)>> = BTreeMap::new();
        let mut wrappers: BTreeSet<&str> = BTreeSet::new();
        for s in self.spans.iter().filter(|s| model(s)) {
            let models: Vec<&SpanRec> =
                self.ancestors(s).take_while(|a| !matches!(role(a), Role::Tool | Role::Agent)).filter(|a| model(a)).collect();
            if let Some(parent) = models.first() {
                wrappers.insert(&parent.span_id);
            }
            let top = models.last().map_or(s.span_id.as_str(), |t| t.span_id.as_str());
            chains.entry(top).or_default().push((s, self.ancestors(s).count()));
        }
        let mut out: Vec<&SpanRec> =
            self.spans.iter().filter(|s| matches!(role(s), Role::Tool | Role::Guardrail) && !handoff(s) && !synthetic(s)).collect();
        // A dropped member of a chain stands for the step kept (results about it, links to it).
        let mut kept: BTreeMap<&str, &str> = BTreeMap::new();
        for members in chains.values() {
            let innermost: Vec<&SpanRec> = members.iter().map(|(s, _)| *s).filter(|s| !wrappers.contains(s.span_id.as_str())).collect();
            if innermost.len() > 1 {
                out.extend(innermost);
            } else if let Some((best, _)) = members.iter().max_by_key(|(s, depth)| {
                let usage = tokens(&s.attrs).is_some();
                let response = str_attr(&s.attrs, "gen_ai.response.id").is_some();
                (usage && response, usage, response, *depth)
            }) {
                out.push(best);
                for (m, _) in members {
                    kept.insert(&m.span_id, &best.span_id);
                }
            }
        }
        out.sort_by_key(|s| (s.start_ns, s.span_id.clone()));
        (out, kept)
    }

    /// What this trace shows of its approval flow ([`crate::approvals`]): `Some(true)` with
    /// the evidence when it shows that the flow is traced — a `gen_ai.tool.call.decision`
    /// event, a declared approval event, the declared confirmation attribute on any span, a
    /// `gen_ai.agent.paused` event for human input, a call refused (`refused`: its span's result
    /// says so), a call resumed after a pause (`resumed`), a
    /// scope declared with a channel (`[mapping] approval_channels`), or (`pause`, for a keyed
    /// run only: the one whose resumption joins its calls) a pause for approval; `Some(false)` when every tool span
    /// comes from a scope declared without one; `None` when it shows nothing (the source's
    /// learned state decides).
    fn approvals(&self, pause: Option<&'static str>, resumed: bool, refused: bool) -> (Option<bool>, Option<String>) {
        let m = self.m;
        if let Some(e) = self.events.iter().find(|e| e.name == TOOL_CALL_DECISION || m.approval_events.iter().any(|n| n == e.name)) {
            return (Some(true), Some(format!("decision event {}", e.name)));
        }
        if self.spans.iter().any(|s| bool_attr(&s.attrs, &m.confirmation_attribute).is_some()) {
            return (Some(true), Some(format!("confirmation attribute {}", m.confirmation_attribute)));
        }
        if self.events.iter().any(|e| e.name == AGENT_PAUSED && str_attr(e.attrs, "gen_ai.agent.pause.reason") == Some("human_input")) {
            return (Some(true), Some(format!("pause event {AGENT_PAUSED}")));
        }
        if refused {
            return (Some(true), Some("denial: a tool span whose result says a human refused the call".to_string()));
        }
        if resumed {
            return (Some(true), Some("resumed: a call executed after a pause (its call id proposed in an earlier part)".to_string()));
        }
        if let Some(shape) = pause {
            return (Some(true), Some(format!("pause: {shape}")));
        }
        let tools: Vec<&SpanRec> = self.spans.iter().filter(|s| role(s) == Role::Tool).collect();
        if let Some(s) = tools.iter().find(|s| m.approval_channels.get(&s.scope) == Some(&true)) {
            return (Some(true), Some(format!("declared channel of {}", s.scope)));
        }
        if !tools.is_empty() && tools.iter().all(|s| m.approval_channels.get(&s.scope) == Some(&false)) {
            return (Some(false), None);
        }
        (None, None)
    }

    /// Where the trace's tool calls were traced: the instrumentation scope names of its tool
    /// spans (sorted, joined by `+` when several); without a tool span (a part that paused on
    /// deferred calls or an interrupt before any ran), its root's scope.
    fn approval_source(&self) -> Option<String> {
        let mut scopes: BTreeSet<&str> = self.spans.iter().filter(|s| role(s) == Role::Tool).map(|s| s.scope.as_str()).collect();
        if scopes.is_empty() {
            scopes.insert(self.root.scope.as_str());
        }
        Some(scopes.into_iter().map(|s| if s.is_empty() { "(no scope)" } else { s }).collect::<Vec<_>>().join("+"))
    }

    /// The calls the run proposed and left waiting (for a human's approval, as the Agents SDK
    /// pauses a run on tools that need one): in a trace that captures message content (a
    /// model's input or output messages, or a tool's result, somewhere in it), the tool spans at
    /// the end of its steps
    /// whose arguments were captured but that have no result and no error. They did not run,
    /// so they are no steps. (A producer that records no outputs — content capture off, or one
    /// that logs arguments only — cannot show a proposal apart from a call that ran: its calls
    /// are steps.)
    fn proposed_calls(&self, ordered: &[&'a SpanRec]) -> Vec<&'a SpanRec> {
        // Message content: outputs, or a model's input messages (every library here captures
        // both with one switch; OpenLLMetry's span of an Agents SDK Chat Completions call
        // records its input messages and never its output).
        let content = |k: &String| {
            ["gen_ai.output.messages", "output.value", "traceloop.entity.output", "gen_ai.tool.call.result", "gen_ai.input.messages"]
                .contains(&k.as_str())
                || ["llm.output_messages.", "gen_ai.completion.", "llm.input_messages.", "gen_ai.prompt."].iter().any(|p| k.starts_with(p))
        };
        if !self.spans.iter().any(|s| s.attrs.keys().any(content)) {
            return Vec::new();
        }
        let proposed = |s: &SpanRec| {
            let a = &s.attrs;
            role(s) == Role::Tool
                && !s.error
                && a.get("error.type").is_none_or(Value::is_null)
                && first_text(a, &TOOL_ARGUMENTS).is_some()
                && first_text(a, &TOOL_RESULT).is_none()
        };
        ordered.iter().rev().filter(|s| matches!(role(s), Role::Tool | Role::Model)).take_while(|s| proposed(s)).copied().collect()
    }

    /// The run's top invocations: the agent, workflow and conversation-turn invocations with no
    /// agent above them (an agent called by another agent, as a tool say, is the caller's to
    /// handle).
    fn top_invocations(&self) -> impl Iterator<Item = &'a SpanRec> + '_ {
        self.spans.iter().filter(move |s| self.top_invocation(s))
    }

    fn top_invocation(&self, s: &'a SpanRec) -> bool {
        invocation(s) && !self.ancestors(s).any(named_agent)
    }

    /// The run's outcome as the telemetry reports it (informational: task success for gating
    /// needs a verdict). The declared outcome attribute of the root when set; otherwise an
    /// error — status ERROR or an `exception` event on the root or on a top invocation (an
    /// agent, workflow or conversation turn not inside a named agent) — makes the run an error;
    /// else it succeeded. An exception deeper down (a tool's, a sub-agent's) is the caller's to
    /// handle: the Python SDK marks every exception leaving a span `exception.escaped`, even one
    /// the agent loop above catches. (The libraries traced in `conformance/` all leave the
    /// root OK or unset and put the error on the agent span.)
    fn outcome(&self) -> Outcome {
        match str_attr(&self.root.attrs, &self.m.outcome_attribute).map(str::to_ascii_lowercase).as_deref() {
            Some("success") => return Outcome::Success,
            Some("failure") => return Outcome::Failure,
            Some("error") => return Outcome::Error,
            Some("abandoned") => return Outcome::Abandoned,
            _ => {}
        }
        let failed = |s: &SpanRec| s.error || s.events.iter().any(|e| e.name == "exception");
        if failed(self.root) || self.top_invocations().any(failed) { Outcome::Error } else { Outcome::Success }
    }

    /// Whether a result attached to `span` is about the whole run: no span, one the trace does
    /// not hold, the root, or a top invocation (a result about a sub-agent or any other inner
    /// span is not the run's verdict).
    fn about_run(&self, span: Option<&str>) -> bool {
        span.and_then(|s| self.by_id.get(s)).is_none_or(|s| std::ptr::eq(*s, self.root) || self.top_invocation(s))
    }

    /// The run's evaluations, each with whether it is about the whole run ([`Self::about_run`]):
    /// `gen_ai.evaluation.result` events, then OpenInference's flattened results in the order
    /// their spans ended; `seq_of_span` gives the step each is about.
    fn evaluations(&self, seq_of_span: &BTreeMap<&str, i64>) -> Vec<(Evaluation, bool)> {
        let m = self.m;
        let mut evaluations: Vec<(Evaluation, bool)> = self
            .events
            .iter()
            .filter(|e| e.name == EVALUATION_RESULT)
            .filter_map(|e| {
                let name = str_attr(e.attrs, "gen_ai.evaluation.name")?.to_string();
                let (scope, scope_version) = e.scope.filter(|(n, _)| !n.is_empty()).unzip();
                let about_run = self.about_run(e.span);
                Some((
                    Evaluation {
                        name,
                        score_value: f64_attr(e.attrs, "gen_ai.evaluation.score.value"),
                        score_label: str_attr(e.attrs, "gen_ai.evaluation.score.label").map(str::to_string),
                        explanation: str_attr(e.attrs, "gen_ai.evaluation.explanation").map(str::to_string),
                        evaluator: str_attr(e.attrs, &m.evaluator_attribute).or(scope).map(str::to_string),
                        evaluator_version: str_attr(e.attrs, &m.evaluator_version_attribute)
                            .or(scope_version.filter(|v| !v.is_empty()))
                            .map(str::to_string),
                        step: e.span.and_then(|s| seq_of_span.get(s).copied()),
                        ..evaluation_details(e.attrs)
                    },
                    about_run,
                ))
            })
            .collect();
        let mut carried: Vec<(u64, (Evaluation, bool))> = Vec::new();
        for s in self.spans {
            let about = s.links.iter().find(|l| self.by_id.contains_key(l.as_str())).unwrap_or(&s.span_id);
            for mut e in openinference_evaluations(&s.attrs) {
                e.step = seq_of_span.get(about.as_str()).copied();
                if e.evaluator.is_none() && !s.scope.is_empty() {
                    (e.evaluator, e.evaluator_version) = (Some(s.scope.clone()), Some(s.scope_version.clone()).filter(|v| !v.is_empty()));
                }
                carried.push((s.end_ns, (e, self.about_run(Some(about)))));
            }
        }
        carried.sort_by_key(|(t, _)| *t);
        evaluations.extend(carried.into_iter().map(|(_, e)| e));
        evaluations
    }

    /// Approval decisions by tool-call id (or, for a declared event on a tool span without a
    /// call id, that span's id), in time order: `gen_ai.tool.call.decision` events, and the
    /// declared `[mapping] approval_events` (attribute `decision`: approved, approve, allow,
    /// granted, yes or true confirm the call; denied, deny, rejected, reject, no or false deny it).
    fn decisions(&self) -> BTreeMap<&'a str, Vec<Decision<'a>>> {
        let mut decisions: BTreeMap<&str, Vec<Decision>> = BTreeMap::new();
        let mut events: Vec<&TraceEvent<'a>> = self.events.iter().collect();
        events.sort_by_key(|e| e.time_ns);
        for e in events {
            let declared = self.m.approval_events.iter().any(|n| n == e.name);
            let outcomes: &[&'static str] = if e.name == TOOL_CALL_DECISION {
                match str_attr(e.attrs, "gen_ai.tool.call.decision.outcome") {
                    Some("require_approval") => &["require_approval"],
                    Some("allow") => &["allow"],
                    Some("deny") => &["deny"],
                    _ => &[],
                }
            } else if declared {
                let d = match e.attrs.get("decision") {
                    Some(Value::Bool(b)) => Some(*b),
                    Some(Value::String(v)) => match v.to_ascii_lowercase().as_str() {
                        "approved" | "approve" | "allow" | "granted" | "yes" | "true" => Some(true),
                        "denied" | "deny" | "rejected" | "reject" | "no" | "false" => Some(false),
                        _ => None,
                    },
                    _ => None,
                };
                match d {
                    Some(true) => &["require_approval", "allow"],
                    Some(false) => &["deny"],
                    None => &[],
                }
            } else {
                continue;
            };
            let span = e.span.and_then(|id| self.spans.iter().find(|s| s.span_id == id));
            let call = str_attr(e.attrs, "gen_ai.tool.call.id")
                .or_else(|| span.filter(|_| declared).and_then(|s| call_id(&s.attrs).or(Some(s.span_id.as_str()))));
            let Some(call) = call else { continue };
            let tool = str_attr(e.attrs, "gen_ai.tool.name")
                .or_else(|| span.and_then(|s| first_str(&s.attrs, &["gen_ai.tool.name", "tool.name", "traceloop.entity.name"])));
            for outcome in outcomes {
                decisions.entry(call).or_default().push(Decision { outcome, time_ns: e.time_ns, tool });
            }
        }
        decisions
    }
}

/// One approval decision about a tool call.
#[derive(Debug, Clone, Copy)]
struct Decision<'a> {
    /// `require_approval`, `allow` or `deny` (the proposed `gen_ai.tool.call.decision` outcomes).
    outcome: &'static str,
    time_ns: u64,
    tool: Option<&'a str>,
}

/// A verdict's value from an evaluation result: its score, else its label (`pass`, `true`,
/// `correct`, `yes`, `success` are 1; `fail`, `false`, `incorrect`, `no`, `failure` are 0).
fn verdict_value(e: &Evaluation) -> Option<f64> {
    // A score outside [0, 1] (a 1–5 scale, NaN) is no verdict: the contract's grades are in
    // [0, 1], and the scorer would refuse the run's end for it. Declare such a result an
    // instrument instead.
    e.score_value.filter(|v| (0.0..=1.0).contains(v)).or_else(|| match e.score_label.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("pass" | "passed" | "true" | "correct" | "yes" | "success") => Some(1.0),
        Some("fail" | "failed" | "false" | "incorrect" | "no" | "failure") => Some(0.0),
        _ => None,
    })
}

/// Maps one trace (its spans and the log records in it) to a run. `None` when the trace has
/// no span, or only `create_agent` spans.
pub fn run(spans: &[SpanRec], logs: &[LogRec], m: &Mapping) -> Option<Run> {
    // A trace of nothing but `create_agent` spans (OpenLLMetry's LangChain instrumentation
    // traces building an agent apart from running it) is no run.
    if spans.iter().all(|s| str_attr(&s.attrs, "gen_ai.operation.name") == Some("create_agent")) {
        return None;
    }
    let t = Trace::new(spans, logs, m)?;
    let root = t.root;
    let trace = root.trace_id.clone();
    let (system, source) = t.system();
    // A declared run key joins the parts of a run that paused and resumed (each its own
    // trace): they share the run id, and their sequence numbers grow from part to part
    // (a part's are its root's start in ms × 2^16 plus its index).
    let key = t.run_key();
    let run_id = key.as_ref().map_or_else(|| trace.clone(), |k| format!("{}/{k}", system.id));
    let first_sequence = if key.is_some() { ms(root.start_ns).saturating_mul(1 << 16) } else { 0 };
    let decisions = t.decisions();
    let (mut ordered, kept) = t.steps();
    // Calls held for confirmation (wherever they are) and calls proposed and left waiting (at
    // the end) did not run: requests for confirmation, no steps.
    // Calls a human refused: no steps, overrides honoured (below).
    let refused_calls: Vec<&SpanRec> = ordered.iter().filter(|s| refused(s)).copied().collect();
    ordered.retain(|s| !refused_calls.iter().any(|r| std::ptr::eq(*s, *r)));
    let held_calls: Vec<&SpanRec> = ordered.iter().filter(|s| held(s)).copied().collect();
    ordered.retain(|s| !held_calls.iter().any(|h| std::ptr::eq(*s, *h)));
    let mut proposed = t.proposed_calls(&ordered);
    proposed.reverse();
    ordered.retain(|s| !proposed.iter().any(|p| std::ptr::eq(*s, *p)));
    // Calls a run stopped on that have no tool span: listed as its result (deferred tool
    // requests), or, when it stopped on an interrupt, those its last model call proposed and no
    // tool span ran.
    let tops: Vec<&SpanRec> = std::iter::once(root).chain(t.top_invocations()).collect();
    let mut deferred: Vec<Deferred> = tops.iter().map(|s| deferred_requests(&s.attrs)).find(|d| !d.is_empty()).unwrap_or_default();
    let deferred_shape = if !deferred.is_empty() {
        Some("deferred tool requests (the run's result lists calls awaiting approval)")
    } else if tops.iter().any(|s| interrupted(s)) {
        let ran = |(name, id, _): &Deferred| {
            ordered.iter().any(|s| {
                role(s) == Role::Tool
                    && match (id.as_deref(), call_id(&s.attrs)) {
                        (Some(a), Some(b)) => a == b,
                        _ => name.is_some() && first_str(&s.attrs, &TOOL_NAMES) == name.as_deref(),
                    }
            })
        };
        let last_model = ordered.iter().rev().find(|s| role(s) == Role::Model);
        deferred = last_model.map(|m| proposed_by(m)).unwrap_or_default().into_iter().filter(|d| !ran(d)).collect();
        Some("an interrupt (finish reason interrupt)")
    } else {
        None
    };
    // The shape of a pause for a human's approval, when the trace ends on one.
    let pause = if deferred_shape.is_some() {
        deferred_shape
    } else if !proposed.is_empty() {
        Some("calls proposed and left waiting (tool spans with arguments, no result)")
    } else if held_calls.iter().any(|h| !ordered.iter().any(|s| s.start_ns > h.start_ns && same_call(s, h))) {
        Some("a call held for confirmation (its result asks for one)")
    } else {
        None
    };
    // The requests for confirmation: the calls proposed, and those held and not run later in
    // the trace, in start order.
    let mut requests: Vec<&SpanRec> =
        held_calls.iter().filter(|h| !ordered.iter().any(|s| s.start_ns > h.start_ns && same_call(s, h))).copied().collect();
    requests.extend(proposed.iter().copied());
    requests.sort_by_key(|s| (s.start_ns, s.span_id.clone()));
    // A deferred call that has a span request of its own (Pydantic AI's `ApprovalRequired`
    // raised by the tool: a span without a result, and the call in the run's result) is one.
    deferred.retain(|(_, id, _)| !requests.iter().any(|r| id.is_some() && call_id(&r.attrs) == id.as_deref()));
    let request_count = requests.len() + deferred.len();
    // A keyed run that stopped on a pause waits for a human: its part ends with the requests
    // for confirmation and no run end; the part that resumes it continues the run.
    let paused = key.is_some() && pause.is_some();
    // A call held in this trace and run later in it was approved.
    let approved_here: BTreeSet<&str> = ordered
        .iter()
        .filter(|s| held_calls.iter().any(|h| h.start_ns < s.start_ns && same_call(s, h)))
        .map(|s| s.span_id.as_str())
        .collect();
    // A call resumed after a pause: executed here, its call id in this trace's input history
    // (proposed by an earlier part) and proposed by no model call of this trace. Frameworks
    // resume a call they paused on only once it is allowed: it was approved, whatever trace it
    // landed in, and shows the approval flow.
    // (Parsed only as far as needed: a trace whose every named call a model of it proposed reads
    // no input history.)
    let named: Vec<&SpanRec> = ordered.iter().filter(|s| role(s) == Role::Tool && call_id(&s.attrs).is_some()).copied().collect();
    let mut resumed: BTreeSet<&str> = BTreeSet::new();
    if !named.is_empty() {
        let proposed_here: BTreeSet<String> =
            ordered.iter().filter(|s| role(s) == Role::Model).flat_map(|s| proposed_by(s)).filter_map(|(_, id, _)| id).collect();
        let unproposed: Vec<&SpanRec> =
            named.into_iter().filter(|s| call_id(&s.attrs).is_some_and(|c| !proposed_here.contains(c))).collect();
        if !unproposed.is_empty() {
            let history: BTreeSet<String> = spans.iter().flat_map(history_calls).collect();
            resumed =
                unproposed.iter().filter(|s| call_id(&s.attrs).is_some_and(|c| history.contains(c))).map(|s| s.span_id.as_str()).collect();
        }
    }
    let approved_here: BTreeSet<&str> = approved_here.union(&resumed).copied().collect();
    let (approval_channel, approval_evidence) =
        t.approvals(pause.filter(|_| key.is_some()), !resumed.is_empty(), !refused_calls.is_empty());
    let mut out: Vec<TrajectoryEvent> = Vec::new();
    let base = |seq: i64, time: i64, agent: Option<String>, kind: EventKind, id: String| TrajectoryEvent {
        agent_id: agent,
        ..TrajectoryEvent::bare(id, run_id.clone(), system.clone(), source, time, seq, kind)
    };
    let mut groups: Vec<String> = Vec::new();
    for g in &m.group_attributes {
        if let Some(v) = root.attrs.get(g).or(root.resource.get(g)).filter(|v| !v.is_null()) {
            groups.push(format!("{g}={}", text(v)));
        }
    }
    let run_agent = t.run_agent();
    let mut start = base(0, ms(root.start_ns), run_agent.clone(), EventKind::RunStarted, format!("{trace}/start"));
    let reproducibility = reproducibility_of(&root.attrs, ordered.iter().find(|s| role(s) == Role::Model).map(|s| &s.attrs));
    start.run_started = Some(Box::new(RunStarted {
        task_id: t.task(),
        attempt: 0,
        groups,
        optimal_steps: None,
        required_subgoals: None,
        benchmark: None,
        reproducibility,
        task_family: str_attr(&root.attrs, "octant.task.family").map(str::to_string),
        approval_channel,
        approval_source: t.approval_source(),
        approval_evidence,
        rerun_of: str_attr(&root.attrs, "octant.rerun_of").filter(|r| !r.is_empty()).map(str::to_string),
    }));
    out.push(start);

    let mut seq_of_span: BTreeMap<&str, i64> = BTreeMap::new();
    let mut executed_calls: BTreeSet<&str> = BTreeSet::new();
    for s in &ordered {
        let seq = out.len() as i64;
        let agent = t.agent_of(s);
        let ev = match role(s) {
            Role::Guardrail if s.error => {
                let mut ev = base(seq, ms(s.start_ns), agent, EventKind::Intervention, format!("{trace}/{}", s.span_id));
                ev.intervention = Some(Intervention {
                    intervention_kind: InterventionKind::Override,
                    honoured: true,
                    detail: Some(format!("guardrail {} blocked: {}", s.name, s.status_message)),
                });
                ev
            }
            Role::Tool | Role::Model => {
                if let Some(c) = call_id(&s.attrs) {
                    executed_calls.insert(c);
                }
                // A declared decision on a span without a call id names the span.
                executed_calls.insert(s.span_id.as_str());
                let mut ev = base(seq, ms(s.start_ns), agent, EventKind::Step, format!("{trace}/{}", s.span_id));
                let mut st = step(&t, s, &decisions);
                st.confirmed |= approved_here.contains(s.span_id.as_str());
                ev.step = Some(Box::new(st));
                ev
            }
            _ => continue,
        };
        out.push(ev);
        seq_of_span.insert(&s.span_id, seq);
    }
    // A dropped member of a nested model chain is the step kept.
    for (member, step) in &kept {
        if let Some(seq) = seq_of_span.get(step).copied() {
            seq_of_span.insert(member, seq);
        }
    }

    // Denied calls and declared interventions.
    for (call, outcomes) in &decisions {
        if let Some(deny) = outcomes.iter().find(|d| d.outcome == "deny") {
            let tool = deny.tool.unwrap_or("a tool");
            let mut ev =
                base(out.len() as i64, ms(deny.time_ns), run_agent.clone(), EventKind::Intervention, format!("{trace}/deny/{call}"));
            ev.intervention = Some(Intervention {
                intervention_kind: InterventionKind::Override,
                honoured: !executed_calls.contains(call),
                detail: Some(format!("{tool} call {call} denied")),
            });
            out.push(ev);
        }
    }
    // Calls a human refused, told by their own spans (unless a decision event said so already).
    for r in &refused_calls {
        let call = call_id(&r.attrs).unwrap_or(r.span_id.as_str());
        if decisions.get(call).is_some_and(|d| d.iter().any(|o| o.outcome == "deny")) {
            continue;
        }
        let tool = first_str(&r.attrs, &TOOL_NAMES).unwrap_or("a tool");
        let mut ev =
            base(out.len() as i64, ms(r.start_ns), t.agent_of(r), EventKind::Intervention, format!("{trace}/refused/{}", r.span_id));
        ev.intervention = Some(Intervention {
            intervention_kind: InterventionKind::Override,
            honoured: true,
            detail: Some(format!("{tool} call {call} refused")),
        });
        out.push(ev);
    }
    for (i, e) in t.events.iter().enumerate().filter(|(_, e)| m.intervention_events.iter().any(|n| n == e.name)) {
        let kind = match str_attr(e.attrs, "kind").map(str::to_ascii_lowercase).as_deref() {
            Some("override") => InterventionKind::Override,
            Some("help") | Some("help_request") => InterventionKind::HelpRequest,
            _ => InterventionKind::Stop,
        };
        let mut ev = base(out.len() as i64, ms(e.time_ns), run_agent.clone(), EventKind::Intervention, format!("{trace}/intervention/{i}"));
        ev.intervention = Some(Intervention {
            intervention_kind: kind,
            honoured: bool_attr(e.attrs, "honoured").unwrap_or(true),
            detail: str_attr(e.attrs, "detail").map(str::to_string),
        });
        out.push(ev);
    }

    if paused {
        // The calls waiting for approval: requests for confirmation, not actions.
        for p in &requests {
            let mut ev = base(out.len() as i64, ms(p.start_ns), t.agent_of(p), EventKind::Step, format!("{trace}/{}", p.span_id));
            let mut request = step(&t, p, &decisions);
            request.step_kind = StepKind::Confirmation;
            request.result_status = None;
            ev.step = Some(Box::new(request));
            out.push(ev);
        }
        for (i, (tool, call, arguments)) in deferred.iter().enumerate() {
            let id = format!("{trace}/request/{}", call.clone().unwrap_or_else(|| i.to_string()));
            let mut ev = base(out.len() as i64, ms(root.end_ns), run_agent.clone(), EventKind::Step, id);
            ev.step = Some(Box::new(Step {
                step_kind: StepKind::Confirmation,
                impact: tool.as_ref().and_then(|n| m.tool_impact.get(n).copied()).unwrap_or(m.default_impact),
                tool_name: tool.clone(),
                arguments: arguments.clone(),
                tool_call_id: call.clone(),
                ..Step::default()
            }));
            out.push(ev);
        }
    } else {
        // The end: outcome, verdicts, evaluations.
        let end_ns = spans.iter().map(|s| s.end_ns).max().unwrap_or(root.end_ns);
        let mut end = base(out.len() as i64, ms(end_ns), run_agent.clone(), EventKind::RunEnded, format!("{trace}/end"));
        end.run_ended = Some(Box::new(run_ended(&t, t.evaluations(&seq_of_span))));
        out.push(end);
    }
    // Interventions were appended after the steps: renumber by time (stable), keeping the
    // start first and the end (or a pause's requests) last.
    let last = if paused { out.len() - request_count } else { out.len() - 1 };
    out[1..last].sort_by_key(|e| (e.event_time, e.sequence));
    let renumber: BTreeMap<i64, i64> = out.iter().enumerate().map(|(i, e)| (e.sequence, first_sequence + i as i64)).collect();
    for (i, e) in out.iter_mut().enumerate() {
        e.sequence = first_sequence + i as i64;
        if let Some(re) = e.run_ended.as_mut() {
            for ev in &mut re.evaluations {
                ev.step = ev.step.and_then(|s| renumber.get(&s).copied());
            }
        }
    }
    Some(Run { events: out, schema_urls: spans.iter().map(|s| s.schema_url.clone()).filter(|u| !u.is_empty()).collect() })
}

/// A call a run stopped on without a tool span of its own: (tool, call id, arguments).
type Deferred = (Option<String>, Option<String>, Option<String>);

/// Attributes holding a run's (an invocation's) result under the conventions' and frameworks'
/// names: Pydantic AI's `final_result`, OpenInference's `output.value`, OpenLLMetry's
/// `traceloop.entity.output`.
const RUN_RESULT: [&str; 3] = ["final_result", "output.value", "traceloop.entity.output"];

/// The calls a run's result lists as waiting for approval (Pydantic AI's `DeferredToolRequests`:
/// a JSON object whose `approvals` array holds `{tool_name, tool_call_id, args}`).
fn deferred_requests(a: &Attrs) -> Vec<Deferred> {
    let Some(v) = first_text(a, &RUN_RESULT).and_then(|t| serde_json::from_str::<Value>(&t).ok()) else { return Vec::new() };
    let text = |x: Option<&Value>| x.filter(|v| !v.is_null()).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string));
    v.get("approvals")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .filter(|c| c.is_object())
                .map(|c| {
                    (
                        text(c.get("tool_name").or_else(|| c.get("name"))),
                        text(c.get("tool_call_id").or_else(|| c.get("id"))),
                        text(c.get("args").or_else(|| c.get("arguments"))),
                    )
                })
                .filter(|(name, id, _)| name.is_some() || id.is_some())
                .collect()
        })
        .unwrap_or_default()
}

/// The output messages of a span (`gen_ai.output.messages`, JSON), as an attribute or on its
/// events (the latest GenAI conventions' `gen_ai.client.inference.operation.details`).
fn output_messages(s: &SpanRec) -> Vec<Value> {
    std::iter::once(&s.attrs)
        .chain(s.events.iter().map(|e| &e.attrs))
        .filter_map(|a| str_attr(a, "gen_ai.output.messages"))
        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
        .filter_map(|v| v.as_array().cloned())
        .flatten()
        .collect()
}

/// Whether a span says its generation stopped for an interrupt (a human's input): a finish
/// reason `interrupt` in `gen_ai.response.finish_reasons`, on a `gen_ai.choice` event, or on an
/// output message (Strands Agents' interrupts, default and latest conventions).
fn interrupted(s: &SpanRec) -> bool {
    let is = |v: &Value| v.as_str().is_some_and(|r| r.eq_ignore_ascii_case("interrupt"));
    s.attrs.get("gen_ai.response.finish_reasons").is_some_and(|v| is(v) || v.as_array().is_some_and(|a| a.iter().any(is)))
        || s.events.iter().any(|e| e.attrs.get("finish_reason").is_some_and(is))
        || output_messages(s).iter().any(|m| m.get("finish_reason").is_some_and(is))
}

/// The tool call ids a span's input history names (the calls earlier turns proposed):
/// `tool_call` parts of `gen_ai.input.messages` (an attribute, or on the latest conventions'
/// events), `toolUse` blocks of `gen_ai.assistant.message` events (Strands Agents' default
/// conventions), and OpenInference's `llm.input_messages.<i>.message.tool_calls.<j>.tool_call.id`.
fn history_calls(s: &SpanRec) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let inputs = std::iter::once(&s.attrs)
        .chain(s.events.iter().map(|e| &e.attrs))
        .filter_map(|a| str_attr(a, "gen_ai.input.messages"))
        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
        .filter_map(|v| v.as_array().cloned())
        .flatten();
    for part in inputs.filter_map(|m| m.get("parts")?.as_array().cloned()).flatten() {
        if part.get("type").and_then(Value::as_str) == Some("tool_call")
            && let Some(id) = part.get("id").and_then(Value::as_str)
        {
            out.insert(id.to_string());
        }
    }
    for e in s.events.iter().filter(|e| e.name == "gen_ai.assistant.message") {
        if let Some(Value::Array(blocks)) = e.attrs.get("content").and_then(Value::as_str).and_then(|t| serde_json::from_str(t).ok()) {
            out.extend(blocks.iter().filter_map(|b| b.get("toolUse")?.get("toolUseId")?.as_str()).map(str::to_string));
        }
    }
    for (k, v) in &s.attrs {
        if k.starts_with("llm.input_messages.") && k.ends_with(".tool_call.id") {
            out.extend(v.as_str().map(str::to_string));
        }
    }
    out
}

/// The tool calls a model span proposed: `gen_ai.output.messages` parts of type `tool_call`
/// (`id`, `name`, `arguments`), and `toolUse` blocks (`toolUseId`, `name`, `input`) of a
/// `gen_ai.choice` event's message (Strands Agents).
fn proposed_by(s: &SpanRec) -> Vec<Deferred> {
    let text = |x: Option<&Value>| x.filter(|v| !v.is_null()).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string));
    let mut out = Vec::new();
    for part in output_messages(s).iter().filter_map(|m| m.get("parts")?.as_array().cloned()).flatten() {
        if part.get("type").and_then(Value::as_str) == Some("tool_call") {
            out.push((text(part.get("name")), text(part.get("id")), text(part.get("arguments"))));
        }
    }
    for e in s.events.iter().filter(|e| e.name == "gen_ai.choice") {
        if let Some(Value::Array(blocks)) = e.attrs.get("message").and_then(Value::as_str).and_then(|t| serde_json::from_str(t).ok()) {
            for u in blocks.iter().filter_map(|b| b.get("toolUse")) {
                out.push((text(u.get("name")), text(u.get("toolUseId")), text(u.get("input"))));
            }
        }
    }
    out
}

/// Whether tool span `a` executes the call held or proposed as `b`: the same call id when both
/// have one, else the same tool.
fn same_call(a: &SpanRec, b: &SpanRec) -> bool {
    if role(a) != Role::Tool {
        return false;
    }
    match (call_id(&a.attrs), call_id(&b.attrs)) {
        (Some(x), Some(y)) => x == y,
        _ => first_str(&a.attrs, &TOOL_NAMES).is_some() && first_str(&a.attrs, &TOOL_NAMES) == first_str(&b.attrs, &TOOL_NAMES),
    }
}

/// A tool call's id under the first of the conventions' names set.
fn call_id(a: &Attrs) -> Option<&str> {
    first_str(a, &["gen_ai.tool.call.id", "tool.id", "tool_call.id"])
}

/// The step a tool or model span is.
fn step(t: &Trace<'_>, s: &SpanRec, decisions: &BTreeMap<&str, Vec<Decision<'_>>>) -> Step {
    let (a, m) = (&s.attrs, t.m);
    let tool = role(s) == Role::Tool;
    let tool_name =
        tool.then(|| first_str(a, &TOOL_NAMES).map_or_else(|| s.name.trim_start_matches("execute_tool ").to_string(), str::to_string));
    let impact = str_attr(a, &m.impact_attribute)
        .and_then(|v| serde_json::from_value::<Impact>(Value::String(v.to_ascii_lowercase())).ok())
        .or_else(|| tool_name.as_ref().and_then(|n| m.tool_impact.get(n).copied()))
        .unwrap_or(if tool { m.default_impact } else { Impact::Low });
    let mut violations: Vec<String> = Vec::new();
    for key in &m.violation_attributes {
        match a.get(key) {
            Some(Value::String(v)) if !v.is_empty() => violations.push(v.clone()),
            Some(Value::Array(vs)) => violations.extend(vs.iter().filter_map(Value::as_str).map(str::to_string)),
            Some(Value::Bool(true)) => violations.push(key.clone()),
            _ => {}
        }
    }
    for e in t.events.iter().filter(|e| e.span == Some(s.span_id.as_str()) && m.violation_events.iter().any(|n| n == e.name)) {
        violations.push(str_attr(e.attrs, "constraint").unwrap_or(e.name).to_string());
    }
    let approved = call_id(a).and_then(|c| decisions.get(c)).or_else(|| decisions.get(s.span_id.as_str())).is_some_and(|d| {
        d.iter().position(|o| o.outcome == "require_approval").is_some_and(|i| d[i..].iter().any(|o| o.outcome == "allow"))
    });
    let result = tool.then(|| first_text(a, &TOOL_RESULT)).flatten();
    // A tool's own status attribute (Strands Agents' `gen_ai.tool.status`) says so too.
    let status_error = tool && str_attr(a, "gen_ai.tool.status").is_some_and(|v| v.eq_ignore_ascii_case("error"));
    let failed = s.error || a.get("error.type").is_some_and(|v| !v.is_null()) || status_error || (tool && failed_result(result.as_deref()));
    Step {
        step_kind: if tool { StepKind::ToolCall } else { StepKind::ModelCall },
        // A tool call's arguments and result, under the first of the conventions' names set.
        arguments: tool.then(|| first_text(a, &TOOL_ARGUMENTS)).flatten(),
        result,
        tool_name,
        result_status: tool.then_some(if failed { ResultStatus::Error } else { ResultStatus::Ok }),
        expected_call: None,
        impact,
        confirmed: bool_attr(a, &m.confirmation_attribute).unwrap_or(false) || approved,
        violations,
        confidence: None,
        correct: None,
        escalated: bool_attr(a, &m.escalation_attribute).unwrap_or(false),
        // A tool span reports no usage (none: a run of tool spans alone has no token total); a
        // model call that failed without a response counts 0 (nothing generated, nothing
        // billed). Any other model call without usage is unknown.
        tokens: if tool { None } else { tokens(a).or_else(|| (failed && str_attr(a, "gen_ai.response.id").is_none()).then_some(0)) },
        cost: f64_attr(a, "gen_ai.usage.cost").or_else(|| f64_attr(a, "llm.cost.total")),
        latency_ms: (s.end_ns - s.start_ns) as f64 / 1e6,
        injected_fault: bool_attr(a, &m.fault_attribute).unwrap_or(false),
        needs_human: bool_attr(a, &m.needs_human_attribute),
        permission: tool.then(|| str_attr(a, &m.permission_attribute).map(str::to_string)).flatten(),
        injection_attempt: bool_attr(a, &m.injection_attribute),
        tool_call_id: tool.then(|| call_id(a).map(str::to_string)).flatten(),
    }
}

/// The run's end: its outcome, the verdicts (the declared root attributes, else the declared
/// evaluation results), the root's `octant.*` records, and its evaluations.
fn run_ended(t: &Trace<'_>, evaluations: Vec<(Evaluation, bool)>) -> RunEnded {
    let (r, m) = (&t.root.attrs, t.m);
    let mut end = RunEnded {
        outcome: t.outcome(),
        verifier_kind: str_attr(r, &m.verifier_kind_attribute).map(str::to_string),
        verifier_verdict: bool_attr(r, &m.verifier_verdict_attribute),
        judge_verdict: f64_attr(r, &m.judge_verdict_attribute),
        human_verdict: f64_attr(r, &m.human_verdict_attribute),
        subgoals_done: None,
        sentences_assertive: count_attr(r, "octant.sentences.assertive"),
        sentences_unsupported: count_attr(r, "octant.sentences.unsupported"),
        confidence: None,
        evaluations: Vec::new(),
        grounding: grounding_of(r),
        review: review_of(r),
        coordination: coordination_of(r),
        // No convention carries a fault's outcome yet: none from traces.
        faults: None,
    };
    // A declared evaluation result about the run (not about one step) is its verdict, the
    // first of each kind, unless an attribute gave one.
    for (e, _) in evaluations.iter().filter(|(e, about_run)| *about_run && e.step.is_none()) {
        let (Some(kind), Some(v)) = (m.verdicts.get(&e.name), verdict_value(e)) else { continue };
        match kind {
            VerdictKind::Verifier if end.verifier_verdict.is_none() => {
                end.verifier_verdict = Some(v >= 0.5);
                end.verifier_kind = end.verifier_kind.take().or_else(|| e.evaluator.clone()).or_else(|| Some(e.name.clone()));
            }
            VerdictKind::Judge if end.judge_verdict.is_none() => end.judge_verdict = Some(v),
            VerdictKind::Human if end.human_verdict.is_none() => end.human_verdict = Some(v),
            _ => {}
        }
    }
    end.evaluations = evaluations.into_iter().map(|(e, _)| e).collect();
    end
}

/// The details of a `gen_ai.evaluation.result` event beyond the semantic conventions' own
/// attributes (`octant.evaluation.*`; the item falls back to `gen_ai.response.id`). The name,
/// score, evaluator and step are the caller's.
fn evaluation_details(a: &Attrs) -> Evaluation {
    Evaluation {
        scoring_mode: str_attr(a, "octant.evaluation.scoring_mode").map(str::to_ascii_lowercase),
        rater_kind: str_attr(a, "octant.evaluation.rater_kind").map(str::to_ascii_lowercase),
        item: first_str(a, &["octant.evaluation.item", "gen_ai.response.id"]).map(str::to_string),
        opponent: str_attr(a, "octant.evaluation.opponent").map(str::to_string),
        position: count_attr(a, "octant.evaluation.position"),
        output_length: int_attr(a, "octant.evaluation.output_length"),
        opponent_output_length: int_attr(a, "octant.evaluation.opponent_output_length"),
        ci_low: f64_attr(a, "octant.evaluation.ci_low"),
        ci_high: f64_attr(a, "octant.evaluation.ci_high"),
        ..Evaluation::scored("", None)
    }
}

/// OpenInference's flattened evaluation results of one span: `evaluations.<i>.evaluation.*`
/// and `annotations.<i>.annotation.*` (name, score, label, explanation; `identifier` or
/// `annotator_kind` as the evaluator), in index order.
pub fn openinference_evaluations(a: &Attrs) -> Vec<Evaluation> {
    let mut by_index: BTreeMap<(u8, u64), Attrs> = BTreeMap::new();
    for (k, v) in a {
        let parts: Vec<&str> = k.splitn(4, '.').collect();
        let family = match parts.as_slice() {
            ["evaluations", _, "evaluation", _] => 0,
            ["annotations", _, "annotation", _] => 1,
            _ => continue,
        };
        let Ok(i) = parts[1].parse::<u64>() else { continue };
        by_index.entry((family, i)).or_default().insert(parts[3].to_string(), v.clone());
    }
    by_index
        .into_values()
        .filter_map(|f| {
            Some(Evaluation {
                name: str_attr(&f, "name")?.to_string(),
                score_value: f64_attr(&f, "score"),
                score_label: str_attr(&f, "label").map(str::to_string),
                explanation: str_attr(&f, "explanation").map(str::to_string),
                evaluator: first_str(&f, &["identifier", "annotator_kind"]).map(str::to_string),
                // OpenInference's annotator kinds: HUMAN, LLM, CODE.
                rater_kind: str_attr(&f, "annotator_kind").map(|k| match k.to_ascii_uppercase().as_str() {
                    "HUMAN" => "human".to_string(),
                    "LLM" => "judge".to_string(),
                    "CODE" => "reference".to_string(),
                    other => other.to_ascii_lowercase(),
                }),
                ..Evaluation::scored("", None)
            })
        })
        .collect()
}
