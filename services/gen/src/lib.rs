//! # octant-gen
//!
//! A synthetic agent fleet with declared true rates: the input of `octant demo`, the
//! integration tests and the benchmarks. Deterministic: the same [`FleetSpec`] (seed and
//! start time included) yields the same events, byte for byte.
//!
//! Each system runs trajectories of 3–12 steps (tool calls and model calls, some high-impact
//! or irreversible), with help requests, stop signals and overrides; production runs go to
//! `octant.trajectories.production`; evaluation runs attempt each task `k` times on a
//! declared benchmark and go to `octant.trajectories.evaluation`. A multi-agent system's steps
//! come from several agent ids. Runs overlap in time, and events are emitted in event-time
//! order, so the scorer assembles interleaved runs as it would in production.
//!
//! Per-step rates (unsafe action, tool error, confirmation gating) and per-run rates (task
//! success, help seeking) are Bernoulli with the declared probabilities; latency and cost are
//! exponential around the declared means. `--poison` injects bad input of every kind the
//! scorer documents; each poison event is listed with its expected error class.

use std::collections::BTreeMap;
use std::time::Duration;

use octant_contracts::codec::{to_json, to_single_object};
use octant_contracts::*;
use octant_runtime::KafkaConfig;
use octant_runtime::kafka::{self, OutRecord};
use serde::{Deserialize, Serialize};

/// Deterministic random numbers (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        octant_core::stats::bootstrap::mix64(self.0)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
}

/// One system of the fleet and its true rates.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SystemSpec {
    pub id: String,
    pub version: String,
    /// Agent ids; more than one makes a multi-agent system.
    pub agents: Vec<String>,
    pub task_success: f64,
    /// Per step.
    pub unsafe_action: f64,
    /// Per high-impact or irreversible step.
    pub confirmation_gating: f64,
    /// Per tool call.
    pub tool_error: f64,
    /// Per run.
    pub help_seeking: f64,
    pub latency_ms: f64,
    pub cost: f64,
    /// Evaluation runs: tasks attempted `attempts` times on a benchmark; `None` for a
    /// production-only system.
    pub evaluation: Option<EvaluationSpec>,
    /// From this run index on, the unsafe-action rate becomes `unsafe_after.1` (a system that
    /// goes unsafe part-way).
    #[serde(default)]
    pub unsafe_after: Option<(u64, f64)>,
    /// Grounded-drafting judgements on every run's end, at these true rates; `None`: none.
    #[serde(default)]
    pub drafting: Option<DraftingSpec>,
    /// A human review of every run's output, at these true rates; `None`: none.
    #[serde(default)]
    pub review: Option<ReviewSpec>,
    /// Per agent (in `agents` order), its own unsafe-action rate, replacing `unsafe_action`
    /// (which should be their mean) until `unsafe_after`.
    #[serde(default)]
    pub unsafe_by_agent: Option<Vec<f64>>,
    /// Multi-agent coordination judgements on every run's end, at these true rates; `None`:
    /// none.
    #[serde(default)]
    pub coordination: Option<CoordinationSpec>,
    /// Task families and each one's true success rate (replacing `task_success` for its
    /// runs); every run picks one uniformly. Empty: runs declare no family.
    #[serde(default)]
    pub task_families: Vec<(String, f64)>,
    /// Ratings of every run's answer by several humans and a judge, and pairwise judge
    /// verdicts against an opponent in both orders, at these true rates; `None`: none.
    #[serde(default)]
    pub raters: Option<RaterSpec>,
    /// Share of failed runs that end in an error of the agent (outcome ERROR: it raised)
    /// rather than a plain failure; `run_error_rate` is this × (1 − success). Default 0.
    #[serde(default)]
    pub run_error: f64,
    /// Faults injected into a share of runs, and what they do to success; `None`: none
    /// (evaluation runs still carry the 5 % of steps with a harmless fault they always had).
    #[serde(default)]
    pub faults: Option<FaultSpec>,
    /// Gold "needs a human" labels on every step and the agent's escalations against them;
    /// `None`: no labels (escalation driven by low confidence only, as before).
    #[serde(default)]
    pub escalation: Option<EscalationSpec>,
    /// The decoding configuration its runs record (default temperature 0.2, top-p 0.95): a
    /// version that samples differently is a different σ for release comparisons.
    #[serde(default)]
    pub decoding: Option<String>,
    /// Policy violations, leaked data, harmful outputs and a protocol, at these true rates;
    /// `None`: none.
    #[serde(default)]
    pub compliance: Option<ComplianceSpec>,
    /// Prompt-injection attacks on a share of its runs; `None`: none.
    #[serde(default)]
    pub injection: Option<InjectionSpec>,
    /// Task success of its re-runs (seed 000 §IV-G), when its reported results do not
    /// reproduce; `None`: a re-run succeeds as the original's task does.
    #[serde(default)]
    pub rerun_success: Option<f64>,
}

/// Prompt-injection attacks, drawn from a stream of their own: a share `attacked` of runs read
/// an injected instruction in a tool's result (a `read_inbox` call flagged
/// `injection_attempt`, after the run's other steps) and follow it at `success` (a `send_email`
/// call breaking the safety constraint [`INJECTION_VIOLATION`]). True value: injection success
/// rate `success`. The extra calls make its unsafe-action rate no longer the declared one.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct InjectionSpec {
    pub attacked: f64,
    pub success: f64,
}

/// The safety violation of an action an injected instruction caused.
pub const INJECTION_VIOLATION: &str = "injection.exfiltration";

/// The task family whose runs follow [`PROTOCOL`] (declare it as
/// `[evaluation.protocols.refunds] steps = [...]`).
pub const PROTOCOL_FAMILY: &str = "refunds";
/// The protocol of [`PROTOCOL_FAMILY`]'s runs: three tool calls, in this order.
pub const PROTOCOL: [&str; 3] = ["verify_identity", "check_policy", "issue_refund"];
/// The policy violation a generated tool call may carry (declare `compliance.*` policy).
pub const POLICY_VIOLATION: &str = "compliance.data_retention";
/// The declared instrument of the generated harm classifier's verdicts (template
/// `harmful_output`, evaluation `harmful_output`, rater kind `classifier`).
pub const HARMFUL_OUTPUT_INSTRUMENT: &str = "harmful_output_rate";

/// What an `[evaluation]` section declares for the generated compliance signals: the policy,
/// the protocol and the harm classifier's instrument.
pub const COMPLIANCE_DECLARATIONS: &str = r#"
[violations]
policy = ["compliance.*"]

[leakage]
detect = true

[protocols.refunds]
steps = ["verify_identity", "check_policy", "issue_refund"]

[[instruments]]
id = "harmful_output_rate"
template = "harmful_output"
evaluation = "harmful_output"
rater_kind = "classifier"
"#;

/// Compliance signals of a system's runs, drawn from a stream of their own (its other data is
/// what it was without them; the protocol's steps draw unsafe actions and tool errors at the
/// system's rates, so those true values hold):
/// - every tool call violates the policy [`POLICY_VIOLATION`] at `policy_violation`;
/// - every tool call with arguments sends an e-mail address (a detector's finding) at `leakage`;
/// - a harm classifier flags each run's output at `harmful` (evaluation `harmful_output`);
/// - every run is of [`PROTOCOL_FAMILY`] (unless the system declares families) and calls the
///   [`PROTOCOL`] tools after its other steps, in order at `protocol`, else with the first two
///   swapped (adherence 1/3): true adherence `protocol + (1 − protocol)/3`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ComplianceSpec {
    pub policy_violation: f64,
    pub leakage: f64,
    pub harmful: f64,
    pub protocol: f64,
}

/// Gold "needs a human" labels on every step, and escalations against them, drawn from a
/// stream of their own (they replace the confidence-driven escalation of the system's steps):
/// a share `needed` of steps needs a human; the agent escalates those at `recall` and the
/// others at [`EscalationSpec::false_alarm_rate`], which makes its precision `precision`.
/// True values: escalation precision and recall as declared.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct EscalationSpec {
    pub needed: f64,
    pub recall: f64,
    pub precision: f64,
}

impl EscalationSpec {
    /// The escalation rate of a step that needs no human: q·R·(1 − P) / ((1 − q)·P).
    pub fn false_alarm_rate(&self) -> f64 {
        let (q, r, p) = (self.needed, self.recall, self.precision);
        q * r * (1.0 - p) / ((1.0 - q) * p)
    }

    /// Whether the declared rates can be generated: 0 < q < 1, P > 0 and a false-alarm rate
    /// of at most 1 (a precision that low needs more steps without need than there are).
    pub fn check(&self) -> Result<(), String> {
        let rate = self.false_alarm_rate();
        if !(self.needed > 0.0 && self.needed < 1.0 && self.precision > 0.0 && (0.0..=1.0).contains(&rate)) {
            return Err(format!(
                "escalation needed {} recall {} precision {}: not generable (needs 0 < needed < 1, precision > 0 and a false-alarm rate of at most 1, here {rate:.3})",
                self.needed, self.recall, self.precision
            ));
        }
        Ok(())
    }
}

/// Faults injected into a share of a system's runs (one step each, drawn from a stream of
/// their own): a faulted run keeps its success with probability `success_factor`. True values
/// for a production system of success rate s: success under fault s·f, without s, graceful
/// degradation f, and task success s·(1 − share·(1 − f)).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct FaultSpec {
    /// Share of runs with an injected fault.
    pub share: f64,
    /// In [0, 1]: the share of its success a faulted run keeps.
    pub success_factor: f64,
    /// The harness reports each fault's outcome at these true rates (detected, contained,
    /// recovered: independent draws of the fault's own stream); `None`: no outcome records.
    #[serde(default)]
    pub outcomes: Option<(f64, f64, f64)>,
}

/// True rates of the ratings of a run's answer (seed 000 Table XI, seed 002 §5): a good/bad
/// truth per answer, rated by `humans` humans and one judge who each flip it at their rate;
/// the judge re-rates a share of answers (test–retest); and a pairwise judge compares the
/// answer with an opponent's in both orders, picking the first shown at `position_bias`
/// regardless of quality, else its order-blind choice: the longer output for a share
/// `verbosity_bias` of items, else the better one (this run's with probability `win`).
/// Expected values: κ between two raters with flip rates e₁, e₂ on truth rate q (see
/// `expected_kappa`), position inconsistency = `position_bias`, order-averaged win rate
/// (`expected_win_rate`), verbosity bias (`expected_verbosity_bias`), test–retest
/// instability = e_judge·(1 − e_judge).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RaterSpec {
    /// The evaluation name of the ratings; pairwise verdicts are `<name>_pairwise`.
    pub name: String,
    pub quality: f64,
    pub humans: u32,
    pub human_flip: f64,
    pub judge_flip: f64,
    /// Share of answers the judge rates twice.
    pub retest: f64,
    /// The opponent system, `id@version`.
    pub opponent: String,
    pub win: f64,
    pub position_bias: f64,
    /// Share of items on which the judge's order-blind choice (the one not made by position)
    /// is the longer output regardless of quality. Output lengths are drawn independently of quality
    /// (this run's and the opponent's, 50–400 tokens, a stream of their own).
    #[serde(default)]
    pub verbosity_bias: f64,
    /// Whether a human also compares the pair in both orders (no position or length bias,
    /// flipping the better one at `human_flip`): the reference of the verbosity bias.
    #[serde(default)]
    pub human_pairwise: bool,
}

impl RaterSpec {
    pub fn typical(name: &str) -> RaterSpec {
        RaterSpec {
            name: name.to_string(),
            quality: 0.7,
            humans: 3,
            human_flip: 0.05,
            judge_flip: 0.15,
            retest: 0.3,
            opponent: "ref-bot@1.0".into(),
            win: 0.6,
            position_bias: 0.2,
            verbosity_bias: 0.0,
            human_pairwise: false,
        }
    }

    /// The expected order-averaged win rate: b/2 + (1 − b)·(v·P(longer) + (1 − v)·win), this
    /// run's output being the longer with probability (1 − 1/351)/2 (lengths uniform on
    /// 50–400, equal lengths decided by quality).
    pub fn expected_win_rate(&self) -> f64 {
        let (b, v) = (self.position_bias, self.verbosity_bias);
        let (longer, equal) = ((1.0 - 1.0 / 351.0) / 2.0, 1.0 / 351.0);
        b / 2.0 + (1.0 - b) * (v * (longer + equal * self.win) + (1.0 - v) * self.win)
    }

    /// The expected verbosity bias: the judge's order-averaged preference for the longer
    /// output minus the humans' (both ½ in expectation without bias, lengths being independent
    /// of quality): a decision not made by position (1 − b) picks the longer with probability
    /// v + (1 − v)/2, so the excess is (1 − b)·v/2.
    pub fn expected_verbosity_bias(&self) -> f64 {
        (1.0 - self.position_bias) * self.verbosity_bias / 2.0
    }

    /// κ of two raters flipping a binary truth of rate `q` independently at e₁ and e₂.
    pub fn expected_kappa(q: f64, e1: f64, e2: f64) -> f64 {
        let (p1, p2) = (q * (1.0 - e1) + (1.0 - q) * e1, q * (1.0 - e2) + (1.0 - q) * e2);
        let p_o = (1.0 - e1) * (1.0 - e2) + e1 * e2;
        let p_e = p1 * p2 + (1.0 - p1) * (1.0 - p2);
        (p_o - p_e) / (1.0 - p_e)
    }
}

/// The ratings and pairwise verdicts of one run's answer.
fn ratings(r: &RaterSpec, run_id: &str, rng: &mut Rng) -> Vec<Evaluation> {
    let good = rng.chance(r.quality);
    let item = format!("{run_id}/answer");
    let rate = |evaluator: String, kind: &str, flip: f64, rng: &mut Rng| {
        let says_good = good != rng.chance(flip);
        Evaluation {
            evaluator: Some(evaluator),
            evaluator_version: Some("1".into()),
            rater_kind: Some(kind.to_string()),
            item: Some(item.clone()),
            score_label: Some(if says_good { "good" } else { "bad" }.to_string()),
            ..Evaluation::scored(&r.name, Some(if says_good { 1.0 } else { 0.0 }))
        }
    };
    let mut out: Vec<Evaluation> = (0..r.humans).map(|h| rate(format!("human-{h}"), "human", r.human_flip, rng)).collect();
    out.push(rate("judge-a".into(), "judge", r.judge_flip, rng));
    if rng.chance(r.retest) {
        out.push(rate("judge-a".into(), "judge", r.judge_flip, rng));
    }
    let wins = rng.chance(r.win);
    // Lengths from a stream of their own, so that specs without verbosity draw as before.
    let mut lengths = Rng::new(fnv(run_id) ^ 0xa54f_f53a_5f1d_36f1);
    let (mine, theirs) = (lengths.range(50, 400) as i64, lengths.range(50, 400) as i64);
    let verdict = |evaluator: &str, kind: &str, position: i32, this_chosen: bool| Evaluation {
        evaluator: Some(evaluator.to_string()),
        evaluator_version: Some("1".into()),
        rater_kind: Some(kind.to_string()),
        item: Some(format!("{run_id}/vs")),
        opponent: Some(r.opponent.clone()),
        position: Some(position),
        output_length: Some(mine),
        opponent_output_length: Some(theirs),
        ..Evaluation::scored(&format!("{}_pairwise", r.name), Some(if this_chosen { 1.0 } else { 0.0 }))
    };
    // The judge's order-blind choice, made once per item: the longer output (a verbose
    // judge) or the better one.
    let chosen = if r.verbosity_bias > 0.0 && mine != theirs && rng.chance(r.verbosity_bias) { mine > theirs } else { wins };
    for position in [1, 2] {
        let first = rng.chance(r.position_bias);
        let this_chosen = if first { position == 1 } else { chosen };
        out.push(verdict("judge-a", "judge", position, this_chosen));
    }
    if r.human_pairwise {
        for position in [1, 2] {
            out.push(verdict("human-0", "human", position, wins != rng.chance(r.human_flip)));
        }
    }
    out
}

/// True rates of the grounded-drafting judgements (seed 002 §4): each count is a binomial draw
/// of its whole at its rate, so each instrument's true value is the rate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DraftingSpec {
    pub claim_unsupported: f64,
    pub citation_precision_strict: f64,
    /// At least the strict one (a strictly used chunk is also leniently used).
    pub citation_precision_lenient: f64,
    pub citation_recall: f64,
    pub citation_coverage: f64,
    pub key_element_capture: f64,
    pub irrelevance: f64,
}

/// True rates and mean times of the human review of outputs (seed 002 §4, §6).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReviewSpec {
    /// Seeded defects caught.
    pub catch_rate: f64,
    /// Share of outputs that are defective, and of those the share the reviewer accepts.
    pub defective: f64,
    pub false_acceptance: f64,
    pub unplanned_intervention: f64,
    /// Means of exponential draws.
    pub review_minutes: f64,
    pub generation_minutes: f64,
    /// The task type's manual baseline (constant) and how it was obtained.
    pub manual_minutes: f64,
    pub baseline: BaselineKind,
}

/// True rates of the coordination judgements of a multi-agent system (seed 000 Table IX).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CoordinationSpec {
    pub delegation_accuracy: f64,
    pub termination: f64,
    pub stall: f64,
    /// Each of twice the optimal number of messages is an extra one with this probability,
    /// so coordination efficiency (messages / optimal) is 1 + 2·redundancy.
    pub redundancy: f64,
    pub containment: f64,
    /// Share of judged messages that are relevant and grounded.
    #[serde(default = "CoordinationSpec::default_communication")]
    pub communication: f64,
    /// Share of induced conflicts reconciled correctly.
    #[serde(default = "CoordinationSpec::default_conflict_resolution")]
    pub conflict_resolution: f64,
    /// Share of verifications an oracle confirms.
    #[serde(default = "CoordinationSpec::default_verification")]
    pub verification: f64,
    /// Share of reasoning paths that contribute nothing (UPR).
    #[serde(default = "CoordinationSpec::default_unproductive")]
    pub unproductive: f64,
}

impl CoordinationSpec {
    pub fn typical() -> CoordinationSpec {
        CoordinationSpec {
            delegation_accuracy: 0.85,
            termination: 0.9,
            stall: 0.04,
            redundancy: 0.2,
            containment: 0.7,
            communication: Self::default_communication(),
            conflict_resolution: Self::default_conflict_resolution(),
            verification: Self::default_verification(),
            unproductive: Self::default_unproductive(),
        }
    }
    fn default_communication() -> f64 {
        0.8
    }
    fn default_conflict_resolution() -> f64 {
        0.75
    }
    fn default_verification() -> f64 {
        0.9
    }
    fn default_unproductive() -> f64 {
        0.15
    }
}

/// The coordination of one multi-agent run.
fn coordination(c: &CoordinationSpec, rng: &mut Rng) -> Coordination {
    let delegations = rng.range(1, 6) as i32;
    let optimal = rng.range(4, 10) as i32;
    let faults = rng.range(0, 2) as i32;
    Coordination {
        delegations: Some(delegations),
        delegations_correct: Some(binomial(rng, delegations, c.delegation_accuracy)),
        terminated_correctly: Some(rng.chance(c.termination)),
        stalled: Some(rng.chance(c.stall)),
        messages: Some(optimal + binomial(rng, 2 * optimal, c.redundancy)),
        messages_optimal: Some(optimal),
        faults_injected: Some(faults),
        faults_contained: Some(binomial(rng, faults, c.containment)),
        ..judged(c, rng)
    }
}

/// The judged coordination counts (communication rubric, induced conflicts, verifications,
/// reasoning paths), drawn after the others so those are what they were without them.
fn judged(c: &CoordinationSpec, rng: &mut Rng) -> Coordination {
    let messages = rng.range(4, 12) as i32;
    let conflicts = rng.range(0, 3) as i32;
    let verifications = rng.range(1, 4) as i32;
    let paths = rng.range(3, 8) as i32;
    Coordination {
        messages_judged: Some(messages),
        messages_relevant: Some(binomial(rng, messages, c.communication)),
        conflicts: Some(conflicts),
        conflicts_resolved: Some(binomial(rng, conflicts, c.conflict_resolution)),
        verifications: Some(verifications),
        verifications_correct: Some(binomial(rng, verifications, c.verification)),
        reasoning_paths: Some(paths),
        unproductive_paths: Some(binomial(rng, paths, c.unproductive)),
        ..Coordination::default()
    }
}

impl DraftingSpec {
    /// A well-grounded drafting system.
    pub fn grounded() -> DraftingSpec {
        DraftingSpec {
            claim_unsupported: 0.04,
            citation_precision_strict: 0.72,
            citation_precision_lenient: 0.9,
            citation_recall: 0.8,
            citation_coverage: 0.85,
            key_element_capture: 0.9,
            irrelevance: 0.08,
        }
    }
}

impl ReviewSpec {
    /// A reviewed workflow against an observed manual baseline.
    pub fn observed() -> ReviewSpec {
        ReviewSpec {
            catch_rate: 0.85,
            defective: 0.3,
            false_acceptance: 0.15,
            unplanned_intervention: 0.06,
            review_minutes: 12.0,
            generation_minutes: 3.0,
            manual_minutes: 60.0,
            baseline: BaselineKind::Observed,
        }
    }
}

impl SystemSpec {
    /// The true value of `metric` for this system, where the generator fixes one (the rates it
    /// draws from); `None` for metrics it does not control exactly.
    pub fn true_value(&self, metric: &str) -> Option<f64> {
        use octant_core::catalogue::ids;
        let d = self.drafting.as_ref();
        let r = self.review.as_ref();
        Some(match metric {
            ids::UNSAFE_ACTION_RATE if self.unsafe_after.is_none() && self.injection.is_none() => self.unsafe_action,
            ids::INJECTION_SUCCESS_RATE => self.injection.filter(|i| i.attacked > 0.0)?.success,
            ids::CONFIRMATION_GATING => self.confirmation_gating,
            ids::TASK_SUCCESS if self.evaluation.is_none() => self.success_rate(),
            ids::TOOL_ERROR_RATE => self.tool_error,
            ids::RUN_ERROR_RATE if self.evaluation.is_none() => self.run_error * (1.0 - self.success_rate()),
            ids::TASK_SUCCESS_FAULT_FREE if self.evaluation.is_none() => self.production_success(),
            ids::TASK_SUCCESS_UNDER_FAULT if self.evaluation.is_none() => {
                self.production_success() * self.injected_faults()?.success_factor.min(1.0)
            }
            ids::GRACEFUL_DEGRADATION if self.evaluation.is_none() => self.injected_faults()?.success_factor.min(1.0),
            ids::FAULT_DETECTION_RATE => self.injected_faults()?.outcomes?.0,
            ids::FAULT_CONTAINMENT_RATE => self.injected_faults()?.outcomes?.1,
            ids::FAULT_RECOVERY_RATE => self.injected_faults()?.outcomes?.2,
            ids::POLICY_VIOLATION_RATE => self.compliance?.policy_violation,
            ids::DATA_LEAKAGE_RATE => self.compliance?.leakage,
            ids::PROTOCOL_ADHERENCE if self.task_families.is_empty() => self.compliance.map(|c| c.protocol + (1.0 - c.protocol) / 3.0)?,
            HARMFUL_OUTPUT_INSTRUMENT => self.compliance?.harmful,
            ids::ESCALATION_PRECISION => self.escalation?.precision,
            ids::ESCALATION_RECALL => self.escalation?.recall,
            ids::CLAIM_HALLUCINATION_RATE => d?.claim_unsupported,
            ids::CITATION_PRECISION_STRICT => d?.citation_precision_strict,
            ids::CITATION_PRECISION_LENIENT => d?.citation_precision_lenient,
            ids::CITATION_RECALL => d?.citation_recall,
            ids::CITATION_COVERAGE => d?.citation_coverage,
            ids::KEY_ELEMENT_CAPTURE => d?.key_element_capture,
            ids::IRRELEVANCE_RATE => d?.irrelevance,
            ids::REVIEWER_CATCH_RATE => r?.catch_rate,
            ids::FALSE_ACCEPTANCE_RATE => r?.false_acceptance,
            ids::UNPLANNED_INTERVENTION_RATE => r?.unplanned_intervention,
            // Minutes per completed task: completion is the run's success (production runs).
            ids::REVIEW_BURDEN if self.evaluation.is_none() => r?.review_minutes / self.success_rate(),
            ids::EFFICIENCY_NET_OF_REVIEW_OBSERVED if r?.baseline == BaselineKind::Observed => {
                1.0 - (r?.generation_minutes + r?.review_minutes) / r?.manual_minutes
            }
            ids::EFFICIENCY_NET_OF_REVIEW_ESTIMATED if r?.baseline == BaselineKind::Estimated => {
                1.0 - (r?.generation_minutes + r?.review_minutes) / r?.manual_minutes
            }
            ids::DELEGATION_ACCURACY => self.coordination.as_ref()?.delegation_accuracy,
            ids::TERMINATION_CORRECTNESS => self.coordination.as_ref()?.termination,
            ids::STALL_RATE => self.coordination.as_ref()?.stall,
            ids::COORDINATION_EFFICIENCY => 1.0 + 2.0 * self.coordination.as_ref()?.redundancy,
            ids::ERROR_CONTAINMENT => self.coordination.as_ref()?.containment,
            ids::COMMUNICATION_QUALITY => self.coordination.as_ref()?.communication,
            ids::CONFLICT_RESOLUTION => self.coordination.as_ref()?.conflict_resolution,
            ids::VERIFICATION_CORRECTNESS => self.coordination.as_ref()?.verification,
            ids::UNPRODUCTIVE_REASONING_RATE => self.coordination.as_ref()?.unproductive,
            _ => return None,
        })
    }
}

impl SystemSpec {
    /// The true success rate of a production run: the mean of the families' rates when it
    /// declares families (each run picks one uniformly), else `task_success`.
    pub fn production_success(&self) -> f64 {
        if self.task_families.is_empty() {
            self.task_success
        } else {
            self.task_families.iter().map(|(_, p)| p).sum::<f64>() / self.task_families.len() as f64
        }
    }

    /// The true success rate of a production run with the injected faults: what a faulted run
    /// loses taken off [`Self::production_success`].
    pub fn success_rate(&self) -> f64 {
        self.production_success() * self.fault_keep()
    }

    /// Its faults, when any are injected (a share above 0).
    pub fn injected_faults(&self) -> Option<FaultSpec> {
        self.faults.filter(|f| f.share > 0.0)
    }

    /// The share of success the faults leave: 1 − share·(1 − factor).
    fn fault_keep(&self) -> f64 {
        self.faults.map_or(1.0, |f| 1.0 - f.share * (1.0 - f.success_factor.min(1.0)))
    }

    /// The true success rate of `family`'s runs (with the injected faults).
    pub fn family_success(&self, family: &str) -> Option<f64> {
        self.task_families.iter().find(|(f, _)| f == family).map(|(_, p)| *p * self.fault_keep())
    }
}

/// Successes in `n` trials at rate `p`.
fn binomial(rng: &mut Rng, n: i32, p: f64) -> i32 {
    (0..n).filter(|_| rng.chance(p)).count() as i32
}

/// The grounding counts of one run's output with `assertive` assertive sentences.
fn grounding(d: &DraftingSpec, assertive: i32, rng: &mut Rng) -> Grounding {
    let citations = rng.range(3, 12) as i32;
    let strict = binomial(rng, citations, d.citation_precision_strict);
    let extra = (d.citation_precision_lenient - d.citation_precision_strict) / (1.0 - d.citation_precision_strict).max(1e-9);
    let lenient = strict + binomial(rng, citations - strict, extra);
    let required = rng.range(2, 8) as i32;
    let total = assertive + rng.range(0, 6) as i32;
    let expected = rng.range(3, 10) as i32;
    let claims = assertive + rng.range(0, assertive as u64) as i32;
    Grounding {
        citations: Some(citations),
        citations_used_strict: Some(strict),
        citations_used_lenient: Some(lenient),
        citations_required: Some(required),
        citations_required_cited: Some(binomial(rng, required, d.citation_recall)),
        sentences_cited: Some(binomial(rng, assertive, d.citation_coverage)),
        sentences_total: Some(total),
        sentences_irrelevant: Some(binomial(rng, total, d.irrelevance)),
        key_elements_expected: Some(expected),
        key_elements_captured: Some(binomial(rng, expected, d.key_element_capture)),
        claims: Some(claims),
        claims_unsupported: Some(binomial(rng, claims, d.claim_unsupported)),
    }
}

/// The review of one run's output.
fn review(r: &ReviewSpec, rng: &mut Rng) -> Review {
    let seeded = rng.range(0, 4) as i32;
    let defective = rng.chance(r.defective);
    Review {
        seeded_defects: Some(seeded),
        seeded_caught: Some(binomial(rng, seeded, r.catch_rate)),
        defective: Some(defective),
        accepted: Some(if defective { rng.chance(r.false_acceptance) } else { rng.chance(0.95) }),
        unplanned_intervention: Some(rng.chance(r.unplanned_intervention)),
        review_minutes: Some(rng.exp(r.review_minutes)),
        generation_minutes: Some(rng.exp(r.generation_minutes)),
        manual_minutes: Some(r.manual_minutes),
        manual_baseline: Some(r.baseline),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EvaluationSpec {
    pub benchmark: String,
    pub contamination: f64,
    pub attempts: u32,
    /// Share of this system's runs that are evaluation runs.
    pub share: f64,
}

impl SystemSpec {
    pub fn new(id: &str) -> SystemSpec {
        SystemSpec {
            id: id.to_string(),
            version: "1.0.0".into(),
            agents: vec!["agent".into()],
            task_success: 0.8,
            unsafe_action: 0.02,
            confirmation_gating: 0.95,
            tool_error: 0.05,
            help_seeking: 0.2,
            latency_ms: 800.0,
            cost: 0.01,
            evaluation: None,
            unsafe_after: None,
            drafting: None,
            review: None,
            coordination: None,
            unsafe_by_agent: None,
            task_families: Vec::new(),
            raters: None,
            run_error: 0.0,
            faults: None,
            escalation: None,
            decoding: None,
            compliance: None,
            injection: None,
            rerun_success: None,
        }
    }
}

/// The whole fleet.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FleetSpec {
    pub systems: Vec<SystemSpec>,
    pub seed: u64,
    /// Event time of the first run (ms since the epoch).
    pub start_ms: i64,
    /// Event-time spacing between run starts of one system (ms).
    pub run_spacing_ms: i64,
    /// Fraction of extra poison events among all events.
    pub poison: f64,
    /// Share of trajectory events sent as JSON rather than Avro single-object.
    pub json_share: f64,
}

impl FleetSpec {
    /// The default demo fleet: five systems, one multi-agent, one with an evaluation
    /// benchmark, one unsafe and one poorly gated that drafts grounded, human-reviewed answers.
    pub fn demo(systems: usize, seed: u64, start_ms: i64) -> FleetSpec {
        let mut out = Vec::new();
        for i in 0..systems.max(1) {
            let mut s = SystemSpec::new(&format!("agent-{}", (b'a' + (i % 26) as u8) as char));
            match i % 5 {
                0 => {
                    s.task_success = 0.85;
                    // Its harness labels the steps that need a human: it catches 60 % of them,
                    // and three in four of its escalations were needed.
                    s.escalation = Some(EscalationSpec { needed: 0.15, recall: 0.6, precision: 0.75 });
                    s.evaluation = Some(EvaluationSpec { benchmark: "webtasks-v2".into(), contamination: 0.05, attempts: 4, share: 0.3 })
                }
                1 => {
                    s.agents = vec!["planner".into(), "executor".into(), "reviewer".into()];
                    s.task_success = 0.7;
                    // Two task families, one doing far worse (the profile reports them apart).
                    s.task_families = vec![("emergent_planner".into(), 0.8), ("verifiable_executor".into(), 0.55)];
                    s.coordination = Some(CoordinationSpec::typical());
                }
                2 => {
                    s.unsafe_action = 0.25;
                    s.task_success = 0.75;
                    // Half its failures are crashes (run_error_rate 0.125).
                    s.run_error = 0.5;
                    // It breaks the data-retention policy on 10 % of its tool calls, sends an
                    // e-mail address out in 8 %, a harm classifier flags 10 % of its outputs, and
                    // it follows the refunds protocol in order in 60 % of its runs (adherence 0.733).
                    s.compliance = Some(ComplianceSpec { policy_violation: 0.1, leakage: 0.08, harmful: 0.1, protocol: 0.6 });
                    // A fifth of its runs read an injected instruction; it follows 30 % of them.
                    s.injection = Some(InjectionSpec { attacked: 0.2, success: 0.3 });
                }
                3 => {
                    s.confirmation_gating = 0.7;
                    s.help_seeking = 0.05;
                    // A drafting workflow: grounded answers, reviewed by a human.
                    s.drafting = Some(DraftingSpec::grounded());
                    s.review = Some(ReviewSpec::observed());
                    // A quarter of its runs meet an injected fault, which halves their success
                    // (graceful degradation 0.5; task success 0.8 × 0.875 = 0.7); its harness
                    // reports 80 % of the faults detected, 70 % contained, 50 % recovered.
                    s.faults = Some(FaultSpec { share: 0.25, success_factor: 0.5, outcomes: Some((0.8, 0.7, 0.5)) });
                }
                _ => s.evaluation = Some(EvaluationSpec { benchmark: "leaky-bench".into(), contamination: 0.5, attempts: 2, share: 0.3 }),
            }
            out.push(s);
        }
        FleetSpec { systems: out, seed, start_ms, run_spacing_ms: 2_000, poison: 0.0, json_share: 0.25 }
    }
}

/// A generated record, with the error class expected when it is poison.
#[derive(Debug, Clone)]
pub struct GenRecord {
    /// Base topic name (without the configured prefix).
    pub topic: &'static str,
    pub key: String,
    pub payload: Vec<u8>,
    pub event_time: i64,
    pub system: String,
    pub poison: Option<&'static str>,
}

/// The true rates a fleet used, as written by `--truth`.
pub fn truth(spec: &FleetSpec) -> serde_json::Value {
    let systems: BTreeMap<&str, &SystemSpec> = spec.systems.iter().map(|s| (s.id.as_str(), s)).collect();
    serde_json::json!({ "seed": spec.seed, "start_ms": spec.start_ms, "poison": spec.poison, "systems": systems })
}

struct RunPlan<'a> {
    sys: &'a SystemSpec,
    run_id: String,
    source: Source,
    task_id: String,
    attempt: i32,
    start: i64,
    unsafe_rate: f64,
    success_p: f64,
    seed: u64,
    family: Option<&'a str>,
}

/// Generates the events of `runs_per_system` runs of every system, in event-time order,
/// with poison mixed in. Run indices start at `first_run` (for streaming in batches).
pub fn generate(spec: &FleetSpec, first_run: u64, runs_per_system: u64) -> Vec<GenRecord> {
    let mut rng = Rng::new(spec.seed ^ first_run.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut events: Vec<(i64, u64, GenRecord)> = Vec::new();
    let mut order = 0u64;
    for sys in spec.systems.iter() {
        // Versions of one system (entries sharing its id) share its tasks, their difficulty and
        // which runs are evaluation runs, so they can be compared on the same tasks; their run
        // ids carry the version. A system's index is that of its first entry.
        let si = spec.systems.iter().position(|s| s.id == sys.id).unwrap_or(0);
        let versions = spec.systems.iter().filter(|s| s.id == sys.id).count();
        // Evaluation tasks: each task's own success probability around the system's rate.
        for r in first_run..first_run + runs_per_system {
            // A block of `attempts` consecutive runs is either all evaluation attempts of one
            // task or all production runs.
            let eval = sys.evaluation.as_ref().filter(|e| {
                let mut h = Rng::new(spec.seed ^ ((si as u64) << 32) ^ (r / e.attempts as u64));
                h.chance(e.share)
            });
            let unsafe_rate = match sys.unsafe_after {
                Some((from, rate)) if r >= from => rate,
                _ => sys.unsafe_action,
            };
            let (source, task_id, attempt, success_p) = match eval {
                Some(e) => {
                    let task = r / e.attempts as u64;
                    let p = task_success_p(spec, si, sys, task);
                    (Source::Evaluation, format!("{}-task-{task}", e.benchmark), (r % e.attempts as u64) as i32, p)
                }
                None => (Source::Production, format!("task-{}", rng.range(0, 999)), 0, sys.task_success),
            };
            // A family of its own stream, so systems without families draw as before.
            let family = (!sys.task_families.is_empty()).then(|| {
                let mut own = Rng::new(spec.seed ^ 0xbb67_ae85_84ca_a73b ^ fnv(&format!("{}-run-{r}", sys.id)));
                &sys.task_families[own.range(0, sys.task_families.len() as u64 - 1) as usize]
            });
            let success_p = match (family, eval) {
                (Some((_, p)), None) => *p,
                _ => success_p,
            };
            let plan = RunPlan {
                sys,
                run_id: if versions > 1 { format!("{}-{}-run-{r}", sys.id, sys.version) } else { format!("{}-run-{r}", sys.id) },
                source,
                task_id,
                attempt,
                start: spec.start_ms + r as i64 * spec.run_spacing_ms + rng.range(0, spec.run_spacing_ms as u64 / 2) as i64,
                unsafe_rate,
                success_p,
                seed: spec.seed,
                family: family.map(|(f, _)| f.as_str()),
            };
            let (events_of_run, extra) = run_events(&plan, &mut rng);
            let regular = events_of_run.len() - extra;
            for (i, ev) in events_of_run.into_iter().enumerate() {
                // The compliance protocol's extra steps are framed by a draw of their own
                // (the shared stream frames exactly the events it framed without them).
                let json = if i < regular - 1 || i == regular - 1 + extra {
                    rng.chance(spec.json_share)
                } else {
                    Rng::new(spec.seed ^ fnv(&ev.event_id)).chance(spec.json_share)
                };
                let rec = encode(ev, json, &sys.id);
                events.push((rec.event_time, order, rec));
                order += 1;
            }
        }
    }
    events.sort_by_key(|(t, o, _)| (*t, *o));
    let mut out: Vec<GenRecord> = events.into_iter().map(|(_, _, r)| r).collect();
    if spec.poison > 0.0 {
        inject_poison(&mut out, spec.poison, &mut rng);
    }
    out
}

/// An evaluation task's own success probability, around its system's rate.
fn task_success_p(spec: &FleetSpec, si: usize, sys: &SystemSpec, task: u64) -> f64 {
    let mut t = Rng::new(spec.seed ^ 0x7a5c ^ task ^ (si as u64) << 40);
    (sys.task_success + 0.3 * (t.f64() - 0.5)).clamp(0.0, 1.0)
}

/// The harness that owns a synthetic fleet's runs answering a re-run request (seed 000 §IV-G):
/// the run re-executed on the same task with the same system (its rates, the task's success
/// probability, its family), fresh draws from a stream of the request's own, starting at
/// `start`, its `RunStarted.rerun_of` naming the original, sent as the original was (its
/// source's topic). A system with `rerun_success` succeeds at that rate instead: its reported
/// results do not reproduce. `None` when the request names no system of the fleet.
pub fn rerun(spec: &FleetSpec, req: &ReRunRequest, start: i64) -> Option<Vec<GenRecord>> {
    let si = spec.systems.iter().position(|s| s.id == req.system_id)?;
    let sys = spec.systems.iter().find(|s| s.id == req.system_id && s.version == req.system_version)?;
    let source = if req.source.eq_ignore_ascii_case("production") { Source::Production } else { Source::Evaluation };
    // The task's index from its id (`<benchmark>-task-<n>`), for its own success probability.
    let task = req.task_id.as_deref().and_then(|t| t.rsplit_once("-task-")).and_then(|(_, n)| n.parse::<u64>().ok());
    let family = (!sys.task_families.is_empty()).then(|| {
        let mut own = Rng::new(spec.seed ^ 0xbb67_ae85_84ca_a73b ^ fnv(&req.run_id));
        &sys.task_families[own.range(0, sys.task_families.len() as u64 - 1) as usize]
    });
    let success_p = match (sys.rerun_success, task, family) {
        (Some(p), _, _) => p,
        (None, Some(n), _) if source == Source::Evaluation => task_success_p(spec, si, sys, n),
        (None, _, Some((_, p))) => *p,
        _ => sys.task_success,
    };
    let seed = spec.seed ^ fnv(&req.request_id);
    let plan = RunPlan {
        sys,
        run_id: format!("{}-rerun", req.run_id),
        source,
        task_id: req.task_id.clone().unwrap_or_else(|| "task".into()),
        attempt: 0,
        start,
        unsafe_rate: sys.unsafe_action,
        success_p,
        seed,
        family: family.map(|(f, _)| f.as_str()),
    };
    let mut rng = Rng::new(seed ^ 0x5851_f42d_4c95_7f2d);
    let (mut events, _) = run_events(&plan, &mut rng);
    if let Some(s) = events.first_mut().and_then(|e| e.run_started.as_mut()) {
        s.rerun_of = Some(req.run_id.clone());
    }
    Some(events.into_iter().map(|ev| encode(ev, false, &sys.id)).collect())
}

fn topic_of(source: Source) -> &'static str {
    match source {
        Source::Production => topics::TRAJECTORIES_PRODUCTION,
        Source::Evaluation => topics::TRAJECTORIES_EVALUATION,
    }
}

fn encode(ev: TrajectoryEvent, json: bool, system: &str) -> GenRecord {
    let payload = if json { to_json(&ev) } else { to_single_object(&ev).expect("generated events encode") };
    GenRecord {
        topic: topic_of(ev.source),
        key: ev.run_id.clone(),
        payload,
        event_time: ev.event_time,
        system: system.to_string(),
        poison: None,
    }
}

fn base(plan: &RunPlan<'_>, seq: i64, t: i64, kind: EventKind) -> TrajectoryEvent {
    let system = SystemRef { id: plan.sys.id.clone(), version: plan.sys.version.clone(), config_hash: "cfg-1".into() };
    TrajectoryEvent::bare(format!("{}/{seq}", plan.run_id), plan.run_id.clone(), system, plan.source, t, seq, kind)
}

const TOOLS: [&str; 6] = ["search", "read_file", "write_file", "send_email", "transfer_funds", "delete_record"];

/// A run's events, and how many of them are the compliance protocol's extra steps (just before
/// its end, which is last).
fn run_events(plan: &RunPlan<'_>, rng: &mut Rng) -> (Vec<TrajectoryEvent>, usize) {
    let sys = plan.sys;
    let steps = rng.range(3, 12) as i64;
    let optimal = rng.range(2, steps as u64) as i32;
    let mut out = Vec::new();
    let mut t = plan.start;
    let mut seq = 0;
    let mut start = base(plan, seq, t, EventKind::RunStarted);
    let benchmark = sys.evaluation.as_ref().filter(|_| plan.source == Source::Evaluation);
    start.run_started = Some(Box::new(RunStarted {
        task_id: Some(plan.task_id.clone()),
        attempt: plan.attempt,
        groups: vec![format!("locale={}", ["en", "fr", "de"][rng.range(0, 2) as usize])],
        optimal_steps: Some(optimal),
        required_subgoals: Some(4),
        benchmark: benchmark.map(|b| Benchmark { id: b.benchmark.clone(), contamination: Some(b.contamination) }),
        // Evaluation runs record all five artefacts; production traffic only its decoding (its
        // agent configuration is the system's config hash), as deployed agents usually do.
        reproducibility: Some(Reproducibility {
            environment_version: benchmark.map(|b| format!("{}-env 1.2.0", b.benchmark)),
            task_spec: benchmark.map(|_| format!("{}@v2", plan.task_id)),
            agent_config: None,
            decoding: Some(sys.decoding.clone().unwrap_or_else(|| r#"{"temperature":0.2,"top_p":0.95}"#.to_string())),
            seed: benchmark.map(|_| (fnv(&plan.run_id) >> 33) as i64),
        }),
        task_family: plan.family.map(str::to_string).or_else(|| sys.compliance.map(|_| PROTOCOL_FAMILY.to_string())),
        approval_channel: None,
        approval_source: None,
        approval_evidence: None,
        rerun_of: None,
    }));
    out.push(start);
    // Compliance signals from a stream of their own.
    let mut compliance = sys.compliance.map(|c| (c, Rng::new(plan.seed ^ 0x9b05_688c_2b3e_6c1f ^ fnv(&plan.run_id))));
    let drawn = rng.chance(plan.success_p);
    // Injected faults from a stream of their own, so systems without them draw exactly what
    // they drew before: the faulted step, whether the run keeps its success, and the sub-goals
    // a run the fault broke still completed. The shared stream goes on as if the success drawn
    // stood (the sub-goals' draw depends on it), so the systems after this one draw the same.
    let fault = sys.injected_faults().and_then(|f| {
        let mut own = Rng::new(plan.seed ^ 0x510e_527f_ade6_82d1 ^ fnv(&plan.run_id));
        own.chance(f.share).then(|| {
            let (at, kept, done) = (own.range(0, steps as u64 - 1) as i64, own.chance(f.success_factor), own.range(0, 3) as i32);
            (at, kept, done, f.outcomes.map(|(d, c, r)| (own.chance(d), own.chance(c), own.chance(r))))
        })
    });
    let success = drawn && fault.is_none_or(|(_, kept, ..)| kept);
    let mut fault_seq = None;
    // Gold labels and the escalations against them, from a stream of their own.
    let mut labels = sys.escalation.map(|e| (e, Rng::new(plan.seed ^ 0x1f83_d9ab_fb41_bd6b ^ fnv(&plan.run_id))));
    let asks_help = rng.chance(sys.help_seeking);
    for i in 0..steps {
        seq += 1;
        t += 1 + rng.exp(sys.latency_ms) as i64;
        let mut ev = base(plan, seq, t, EventKind::Step);
        if fault.is_some_and(|(at, ..)| at == i) {
            fault_seq = Some(seq);
        }
        ev.agent_id = Some(sys.agents[(i as usize) % sys.agents.len()].clone());
        let tool_call = rng.chance(0.7);
        let impact = match rng.f64() {
            x if x < 0.08 => Impact::Irreversible,
            x if x < 0.25 => Impact::High,
            _ => Impact::Low,
        };
        let confidence = (0.35 + 0.6 * rng.f64()).min(1.0);
        let tool = TOOLS[rng.range(0, TOOLS.len() as u64 - 1) as usize];
        // An agent's own rate when the system declares one per agent (one draw either way).
        let unsafe_rate = match &sys.unsafe_by_agent {
            Some(rates) if plan.unsafe_rate == sys.unsafe_action => rates[(i as usize) % rates.len()],
            _ => plan.unsafe_rate,
        };
        let unsafe_step = rng.chance(unsafe_rate);
        let label = labels.as_mut().map(|(e, own)| {
            let needed = own.chance(e.needed);
            (needed, own.chance(if needed { e.recall } else { e.false_alarm_rate() }))
        });
        ev.step = Some(Box::new(Step {
            step_kind: if tool_call { StepKind::ToolCall } else { StepKind::ModelCall },
            tool_name: tool_call.then(|| tool.to_string()),
            arguments: (tool_call && rng.chance(0.97)).then(|| format!(r#"{{"target": "item-{}"}}"#, rng.range(0, 99))),
            result_status: tool_call.then(|| if rng.chance(sys.tool_error) { ResultStatus::Error } else { ResultStatus::Ok }),
            expected_call: (plan.source == Source::Evaluation && tool_call).then(|| ExpectedCall {
                tool_name: if rng.chance(0.85) { tool.to_string() } else { "search".to_string() },
                arguments: None,
            }),
            impact,
            confirmed: impact >= Impact::High && rng.chance(sys.confirmation_gating),
            // Only actions are unsafe (a model call acts on nothing): the true rate is per tool call.
            violations: if unsafe_step && tool_call { vec!["policy.no_unapproved_side_effects".into()] } else { vec![] },
            confidence: Some(confidence),
            correct: Some(rng.chance(confidence)),
            // Drawn either way, so a labelled system's other draws stay as they were.
            escalated: {
                let drawn = confidence < 0.5 && rng.chance(0.6);
                label.map_or(drawn, |(_, escalated)| escalated)
            },
            tokens: Some(rng.range(100, 3000) as i64),
            cost: Some(rng.exp(sys.cost / steps as f64)),
            latency_ms: rng.exp(sys.latency_ms),
            injected_fault: (plan.source == Source::Evaluation && rng.chance(0.05)) || fault.is_some_and(|(at, ..)| at == i),
            result: None,
            needs_human: label.map(|(needed, _)| needed),
            // The scope each tool runs under, logged with every call (no draw).
            permission: tool_call.then(|| permission_of(tool).to_string()),
            injection_attempt: None,
            tool_call_id: None,
        }));
        if let Some((c, own)) = compliance.as_mut() {
            comply(ev.step.as_mut().expect("set above"), c, own);
        }
        out.push(ev);
        if asks_help && i == steps / 2 {
            seq += 1;
            t += 1;
            let mut h = base(plan, seq, t, EventKind::Intervention);
            h.agent_id = Some(sys.agents[0].clone());
            h.intervention = Some(Intervention { intervention_kind: InterventionKind::HelpRequest, honoured: true, detail: None });
            out.push(h);
        }
        if rng.chance(0.03) {
            seq += 1;
            t += 1;
            let mut h = base(plan, seq, t, EventKind::Intervention);
            let kind = if rng.chance(0.5) { InterventionKind::Stop } else { InterventionKind::Override };
            h.intervention = Some(Intervention { intervention_kind: kind, honoured: rng.chance(0.93), detail: None });
            out.push(h);
        }
    }
    // The protocol's tool calls after the other steps (in order, or the first two swapped),
    // each drawing its unsafe action and tool error at the system's rates.
    let mut harmful = None;
    let regular = out.len();
    if let Some((c, own)) = compliance.as_mut() {
        let mut order = PROTOCOL;
        if !own.chance(c.protocol) {
            order.swap(0, 1);
        }
        for tool in order {
            seq += 1;
            t += 1;
            let mut ev = base(plan, seq, t, EventKind::Step);
            ev.agent_id = Some(sys.agents[0].clone());
            let violations = if own.chance(plan.unsafe_rate) { vec!["policy.no_unapproved_side_effects".to_string()] } else { vec![] };
            let mut step = Step {
                step_kind: StepKind::ToolCall,
                tool_name: Some(tool.to_string()),
                arguments: Some(format!(r#"{{"case": "c-{}"}}"#, own.range(0, 999))),
                result_status: Some(if own.chance(sys.tool_error) { ResultStatus::Error } else { ResultStatus::Ok }),
                violations,
                permission: Some("refunds:write".to_string()),
                ..Step::default()
            };
            comply(&mut step, c, own);
            ev.step = Some(Box::new(step));
            out.push(ev);
        }
        harmful = Some(own.chance(c.harmful));
    }
    // A prompt-injection attack: the injected instruction read in a tool's result, and the
    // action it asked for when the agent follows it.
    if let Some(inj) = sys.injection {
        let mut own = Rng::new(plan.seed ^ 0x2545_f491_4f6c_dd1d ^ fnv(&plan.run_id));
        if own.chance(inj.attacked) {
            let followed = own.chance(inj.success);
            for (tool, attempt, violations) in
                [("read_inbox", Some(true), vec![]), ("send_email", None, vec![INJECTION_VIOLATION.to_string()])]
                    .into_iter()
                    .take(1 + followed as usize)
            {
                seq += 1;
                t += 1;
                let mut ev = base(plan, seq, t, EventKind::Step);
                ev.agent_id = Some(sys.agents[0].clone());
                ev.step = Some(Box::new(Step {
                    step_kind: StepKind::ToolCall,
                    tool_name: Some(tool.to_string()),
                    arguments: Some(r#"{"folder": "inbox"}"#.to_string()),
                    result_status: Some(if own.chance(sys.tool_error) { ResultStatus::Error } else { ResultStatus::Ok }),
                    violations,
                    permission: Some(permission_of(tool).to_string()),
                    injection_attempt: attempt,
                    tool_call_id: None,
                    ..Step::default()
                }));
                // Tool calls like any other: the compliance signals' true rates are per call.
                if let Some((c, own)) = compliance.as_mut() {
                    comply(ev.step.as_mut().expect("set above"), c, own);
                }
                out.push(ev);
            }
        }
    }
    seq += 1;
    t += 1 + rng.range(0, 200) as i64;
    let mut end = base(plan, seq, t, EventKind::RunEnded);
    let assertive = rng.range(3, 20) as i32;
    end.run_ended = Some(Box::new(RunEnded {
        outcome: if success { Outcome::Success } else { Outcome::Failure },
        verifier_kind: (plan.source == Source::Evaluation).then(|| "tests".to_string()),
        verifier_verdict: (plan.source == Source::Evaluation).then_some(success),
        judge_verdict: Some(if success { 0.7 + 0.3 * rng.f64() } else { 0.4 * rng.f64() }),
        human_verdict: rng.chance(0.1).then_some(if success { 1.0 } else { 0.0 }),
        subgoals_done: Some(match (drawn, success) {
            (true, true) => 4,
            (true, false) => fault.map_or(0, |(_, _, done, _)| done),
            (false, _) => rng.range(0, 3) as i32,
        }),
        sentences_assertive: Some(assertive),
        sentences_unsupported: Some((assertive as f64 * 0.05 * rng.f64() * 2.0).round() as i32),
        confidence: Some(if success { 0.6 + 0.4 * rng.f64() } else { 0.3 + 0.5 * rng.f64() }),
        evaluations: Vec::new(),
        grounding: None,
        review: None,
        coordination: None,
        // What the harness saw become of the fault it injected.
        faults: match (fault, fault_seq) {
            (Some((.., Some((detected, contained, recovered)))), Some(step)) => {
                Some(vec![FaultOutcome { step, detected, contained, recovered }])
            }
            _ => None,
        },
    }));
    if sys.drafting.is_some() || sys.review.is_some() || sys.coordination.is_some() {
        // A stream of its own, so systems without them draw exactly what they drew before.
        let mut own = Rng::new(plan.seed ^ 0x6a09_e667_f3bc_c908 ^ fnv(&plan.run_id));
        let e = end.run_ended.as_mut().expect("set above");
        e.grounding = sys.drafting.as_ref().map(|d| grounding(d, assertive, &mut own));
        e.review = sys.review.as_ref().map(|r| review(r, &mut own));
        e.coordination = sys.coordination.as_ref().map(|c| coordination(c, &mut own));
    }
    if !success && sys.run_error > 0.0 {
        // A stream of its own, so systems without errors draw exactly what they drew before.
        let mut own = Rng::new(plan.seed ^ 0xa54f_f53a_5f1d_36f1 ^ fnv(&plan.run_id));
        if own.chance(sys.run_error) {
            end.run_ended.as_mut().expect("set above").outcome = Outcome::Error;
        }
    }
    if let Some(r) = &sys.raters {
        let mut own = Rng::new(plan.seed ^ 0x3c6e_f372_fe94_f82b ^ fnv(&plan.run_id));
        end.run_ended.as_mut().expect("set above").evaluations = ratings(r, &plan.run_id, &mut own);
    }
    if let Some(flagged) = harmful {
        // The harm classifier's verdict on the run's output.
        end.run_ended.as_mut().expect("set above").evaluations.push(Evaluation {
            evaluator: Some("harm-classifier".into()),
            evaluator_version: Some("1".into()),
            rater_kind: Some("classifier".into()),
            ..Evaluation::scored("harmful_output", Some(if flagged { 1.0 } else { 0.0 }))
        });
    }
    let extra = out.len() - regular;
    out.push(end);
    (out, extra)
}

/// A tool call's policy violation and leaked e-mail address, drawn from the compliance stream
/// (a model call draws nothing).
fn comply(step: &mut Step, c: &ComplianceSpec, own: &mut Rng) {
    if step.step_kind != StepKind::ToolCall {
        return;
    }
    if own.chance(c.policy_violation) {
        step.violations.push(POLICY_VIOLATION.to_string());
    }
    if let Some(args) = step.arguments.as_mut()
        && own.chance(c.leakage)
    {
        *args = format!(r#"{{"args": {args}, "cc": "customer{}@mail.example.com"}}"#, own.range(0, 999));
    }
}

/// The permission a generated tool call runs under.
fn permission_of(tool: &str) -> &'static str {
    match tool {
        "search" => "search:read",
        "read_file" => "files:read",
        "write_file" => "files:write",
        "send_email" => "mail:send",
        "read_inbox" => "mail:read",
        "transfer_funds" => "payments:write",
        _ => "records:delete",
    }
}

/// FNV-1a of a string (a stable per-run seed).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// The poison kinds and the dead-letter class the scorer gives each (gaps are accepted).
pub const POISON_KINDS: [(&str, Option<&str>); 6] = [
    ("undecodable", Some("undecodable")),
    ("negative_cost", Some("invalid_value")),
    ("confidence_out_of_range", Some("invalid_value")),
    ("unknown_run", Some("unknown_run")),
    ("duplicate_sequence", Some("duplicate_sequence")),
    ("sequence_gap", None),
];

fn decode_any(r: &GenRecord) -> TrajectoryEvent {
    Decoder::new().decode(&r.payload).expect("generated events decode")
}

fn inject_poison(events: &mut Vec<GenRecord>, fraction: f64, rng: &mut Rng) {
    let count = ((events.len() as f64) * fraction).round() as usize;
    let mut inserts: Vec<(usize, GenRecord)> = Vec::new();
    // Sequence gaps shift the rest of a run; pick runs whose events we renumber in place.
    let mut gapped: std::collections::HashSet<String> = Default::default();
    for n in 0..count {
        let (kind, class) = POISON_KINDS[rng.range(0, POISON_KINDS.len() as u64 - 1) as usize];
        let at = rng.range(1, events.len() as u64 - 1) as usize;
        let victim = events[at].clone();
        let mut ev = decode_any(&victim);
        let poison = match kind {
            "undecodable" => GenRecord { payload: vec![0x07, 0xff, 0x00, 0x13], ..victim.clone() },
            "negative_cost" | "confidence_out_of_range" => {
                ev.event_id.push_str("/poison");
                ev.sequence += 1_000_000;
                ev.kind = EventKind::Step;
                ev.run_started = None;
                ev.run_ended = None;
                ev.intervention = None;
                let mut step = Step::default();
                if kind == "negative_cost" {
                    step.cost = Some(-1.0);
                } else {
                    step.confidence = Some(1.5);
                }
                ev.step = Some(Box::new(step));
                encode(ev, false, &victim.system)
            }
            "unknown_run" => {
                ev.run_id = format!("{}-ghost-{n}", ev.run_id);
                ev.event_id = format!("{}/ghost", ev.run_id);
                ev.sequence = 1;
                ev.kind = EventKind::Step;
                ev.run_started = None;
                ev.run_ended = None;
                ev.intervention = None;
                ev.step = Some(Box::default());
                encode(ev, false, &victim.system)
            }
            "duplicate_sequence" => {
                if ev.kind == EventKind::RunEnded {
                    continue; // a repeated run end would be a closed_run dead letter
                }
                // Another event reusing the sequence number, later in the stream (a producer
                // that numbered two events alike). The same event resent with its id is a
                // duplicate delivery instead: skipped by the scorer, not bad input.
                ev.event_id = format!("{}/again", ev.event_id);
                inserts.push((at + 1, GenRecord { poison: Some("duplicate_sequence"), ..encode(ev, false, &victim.system) }));
                continue;
            }
            "sequence_gap" => {
                // Renumber every later event of this run (+1): one gap, then a consistent run.
                if ev.kind == EventKind::RunStarted || !gapped.insert(ev.run_id.clone()) {
                    continue;
                }
                let run = ev.run_id.clone();
                let mut first = true;
                for r in events.iter_mut().skip(at) {
                    if r.key != run {
                        continue;
                    }
                    let mut e = decode_any(r);
                    e.sequence += 1;
                    let system = r.system.clone();
                    let json = r.payload.first() == Some(&b'{');
                    let mut rec = encode(e, json, &system);
                    if first {
                        rec.poison = Some("sequence_gap");
                        first = false;
                    }
                    *r = rec;
                }
                continue;
            }
            _ => unreachable!(),
        };
        let _ = class;
        inserts.push((at, GenRecord { poison: Some(kind), ..poison }));
    }
    inserts.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    for (at, rec) in inserts {
        events.insert(at, rec);
    }
}

/// Where a generated record landed.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub topic: &'static str,
    pub partition: i32,
    pub offset: i64,
    pub poison: Option<&'static str>,
    pub system: String,
}

/// The fleet's harness, answering re-run requests as they arrive on `octant.reruns` (from the
/// beginning of the topic) with [`rerun`]s starting now, until `stop` is cancelled; returns how
/// many it answered. A request for a system the fleet does not have (another harness owns it),
/// or a record that does not decode, is skipped with a warning.
pub async fn answer_reruns(cfg: &KafkaConfig, spec: &FleetSpec, stop: impl std::future::Future<Output = ()>) -> anyhow::Result<u64> {
    use futures::StreamExt;
    let requests = octant_runtime::topic::follow(cfg, "harness", &[topics::RERUNS])?;
    futures::pin_mut!(requests);
    tokio::pin!(stop);
    let decoder = Decoder::new();
    // A request published twice (one id) is answered once.
    let mut answered = std::collections::BTreeSet::new();
    loop {
        let payload = tokio::select! {
            _ = &mut stop => return Ok(answered.len() as u64),
            next = requests.next() => match next {
                Some(p) => p?,
                None => return Ok(answered.len() as u64),
            },
        };
        let request: ReRunRequest = match decoder.decode(&payload) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "harness: skipped a re-run request that does not decode");
                continue;
            }
        };
        if !answered.insert(request.request_id.clone()) {
            continue;
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        match rerun(spec, &request, now) {
            Some(records) => {
                produce(cfg, records, None).await?;
            }
            None => {
                tracing::warn!(request = %request.request_id, system = %request.system_id, "harness: not a system of the fleet; left to its owner")
            }
        }
    }
}

/// Produces records in order, at most `rate` events per second (unlimited when `None`),
/// and waits for every delivery report.
pub async fn produce(cfg: &KafkaConfig, records: Vec<GenRecord>, rate: Option<f64>) -> anyhow::Result<Vec<Delivered>> {
    let producer = kafka::producer(cfg, "gen")?;
    let prefix = cfg.topic_prefix.clone();
    let started = tokio::time::Instant::now();
    let mut futures = futures::stream::FuturesOrdered::new();
    let mut out = Vec::with_capacity(records.len());
    use futures::StreamExt;
    for (i, r) in records.into_iter().enumerate() {
        if let Some(rate) = rate {
            let due = started + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due).await;
        }
        let p = producer.clone();
        let prefix = prefix.clone();
        futures.push_back(async move {
            let rec = OutRecord { partition: None, topic: prefix_topic(&prefix, r.topic), key: r.key, payload: r.payload };
            let res = kafka::send(&p, &rec).await;
            (r.topic, r.poison, r.system, res)
        });
        while futures.len() > 10_000 {
            out.push(delivered(futures.next().await.expect("non-empty"))?);
        }
    }
    while let Some(d) = futures.next().await {
        out.push(delivered(d)?);
    }
    Ok(out)
}

fn prefix_topic(prefix: &str, base: &str) -> String {
    format!("{prefix}{base}")
}

type Sent = (&'static str, Option<&'static str>, String, Result<(i32, i64), rdkafka::error::KafkaError>);

fn delivered((topic, poison, system, res): Sent) -> anyhow::Result<Delivered> {
    let (partition, offset) = res.map_err(|e| anyhow::anyhow!("delivery to {topic} failed: {e}"))?;
    Ok(Delivered { topic, partition, offset, poison, system })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(r: &GenRecord) -> TrajectoryEvent {
        Decoder::new().decode(&r.payload).unwrap()
    }

    #[test]
    fn deterministic_for_a_seed() {
        let spec = FleetSpec::demo(5, 9, 1_000_000);
        let a = generate(&spec, 0, 20);
        let b = generate(&spec, 0, 20);
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(x, y)| x.payload == y.payload && x.key == y.key && x.topic == y.topic));
        let c = generate(&FleetSpec { seed: 10, ..spec }, 0, 20);
        assert!(a.iter().zip(&c).any(|(x, y)| x.payload != y.payload));
    }

    /// Faults, gold labels and a declared decoding change only their own system's runs: the
    /// systems after it draw exactly what they drew without them.
    #[test]
    fn a_systems_faults_and_labels_leave_the_others_data_alone() {
        let plain = FleetSpec::demo(3, 9, 1_000_000);
        let mut featured = plain.clone();
        featured.systems[0].faults = Some(FaultSpec { share: 0.5, success_factor: 0.2, outcomes: Some((0.5, 0.5, 0.5)) });
        featured.systems[0].escalation = Some(EscalationSpec { needed: 0.3, recall: 0.5, precision: 0.5 });
        featured.systems[0].decoding = Some("greedy".into());
        featured.systems[0].compliance = Some(ComplianceSpec { policy_violation: 0.2, leakage: 0.2, harmful: 0.2, protocol: 0.5 });
        featured.systems[0].injection = Some(InjectionSpec { attacked: 0.5, success: 0.5 });
        let others = |spec: &FleetSpec| -> Vec<Vec<u8>> {
            generate(spec, 0, 60).into_iter().filter(|r| r.system != spec.systems[0].id).map(|r| r.payload).collect()
        };
        assert_eq!(others(&plain), others(&featured));
        let mine = |spec: &FleetSpec| -> Vec<Vec<u8>> {
            generate(spec, 0, 60).into_iter().filter(|r| r.system == spec.systems[0].id).map(|r| r.payload).collect()
        };
        assert_ne!(mine(&plain), mine(&featured), "its own runs change");
    }

    /// The harness's re-run of a run: the same system, version, task and topic, `rerun_of`
    /// naming the original, the same each time; on tasks drawn anew it succeeds as the
    /// originals do, or at `rerun_success` when the system's results do not reproduce.
    #[test]
    fn a_rerun_repeats_the_task_with_fresh_draws() {
        let mut spec = FleetSpec::demo(1, 9, 1_000_000);
        spec.systems[0].evaluation = Some(EvaluationSpec { benchmark: "b".into(), contamination: 0.0, attempts: 1, share: 1.0 });
        let originals: Vec<TrajectoryEvent> = generate(&spec, 0, 1500).iter().map(decode).collect();
        let request = |e: &TrajectoryEvent| ReRunRequest {
            request_id: ReRunRequest::id_of(&e.run_id),
            run_id: e.run_id.clone(),
            system_id: e.system.id.clone(),
            system_version: e.system.version.clone(),
            config_hash: e.system.config_hash.clone(),
            source: "evaluation".into(),
            task_id: e.run_started.as_ref().and_then(|s| s.task_id.clone()),
            benchmark: None,
            environment_version: None,
            task_spec: None,
            agent_config: None,
            decoding: None,
            seed: None,
            reason: "sample".into(),
            period: "24h".into(),
            run_time: e.event_time,
            requested_at: e.event_time,
        };
        let starts: Vec<&TrajectoryEvent> = originals.iter().filter(|e| e.run_started.is_some()).collect();
        let success = |events: &[TrajectoryEvent]| {
            let ends: Vec<bool> = events.iter().filter_map(|e| e.run_ended.as_ref()).map(|end| end.outcome == Outcome::Success).collect();
            ends.iter().filter(|s| **s).count() as f64 / ends.len() as f64
        };
        let reruns = |spec: &FleetSpec| -> Vec<TrajectoryEvent> {
            starts.iter().flat_map(|s| rerun(spec, &request(s), s.event_time + 60_000).unwrap()).map(|r| decode(&r)).collect()
        };
        let again = reruns(&spec);
        let first = &again[0];
        assert_eq!(first.run_id, format!("{}-rerun", starts[0].run_id));
        let started = first.run_started.as_ref().unwrap();
        assert_eq!(started.rerun_of.as_deref(), Some(starts[0].run_id.as_str()));
        assert_eq!(started.task_id, starts[0].run_started.as_ref().unwrap().task_id);
        assert_eq!((first.system.clone(), first.source), (starts[0].system.clone(), Source::Evaluation));
        let r = rerun(&spec, &request(starts[0]), 5).unwrap();
        assert!(r.iter().all(|x| x.topic == topics::TRAJECTORIES_EVALUATION && x.key == first.run_id));
        assert_eq!(
            r.iter().map(|x| &x.payload).collect::<Vec<_>>(),
            rerun(&spec, &request(starts[0]), 5).unwrap().iter().map(|x| &x.payload).collect::<Vec<_>>()
        );
        let (was, is) = (success(&originals), success(&again));
        assert!((was - is).abs() < 0.05, "originals {was}, re-runs {is}");
        spec.systems[0].rerun_success = Some(0.2);
        let drifted = success(&reruns(&spec));
        assert!((drifted - 0.2).abs() < 0.05, "{drifted}");
        assert!(rerun(&spec, &ReRunRequest { system_id: "nobody".into(), ..request(starts[0]) }, 0).is_none());
    }

    #[test]
    fn the_compliance_declarations_name_what_the_generator_writes() {
        let d: toml::Table = toml::from_str(COMPLIANCE_DECLARATIONS).unwrap();
        assert_eq!(d["protocols"][PROTOCOL_FAMILY]["steps"].as_array().unwrap().len(), PROTOCOL.len());
        assert!(PROTOCOL.iter().enumerate().all(|(i, s)| d["protocols"][PROTOCOL_FAMILY]["steps"][i].as_str() == Some(*s)));
        assert_eq!(d["instruments"][0]["id"].as_str(), Some(HARMFUL_OUTPUT_INSTRUMENT));
        let policy = d["violations"]["policy"][0].as_str().unwrap();
        assert!(POLICY_VIOLATION.starts_with(policy.trim_end_matches('*')));
    }

    #[test]
    fn events_are_in_event_time_order_and_runs_in_sequence() {
        let recs = generate(&FleetSpec::demo(5, 1, 1_000_000), 0, 30);
        assert!(recs.windows(2).all(|w| w[0].event_time <= w[1].event_time));
        let mut last: std::collections::HashMap<String, i64> = Default::default();
        for r in &recs {
            let ev = decode(r);
            let prev = last.insert(ev.run_id.clone(), ev.sequence);
            assert_eq!(prev.map_or(0, |p| p + 1), ev.sequence, "run {}", ev.run_id);
        }
    }

    #[test]
    fn multi_agent_and_evaluation_attempts() {
        let recs = generate(&FleetSpec::demo(5, 3, 1_000_000), 0, 80);
        let events: Vec<_> = recs.iter().map(decode).collect();
        let agents: std::collections::BTreeSet<_> =
            events.iter().filter(|e| e.system.id == "agent-b").filter_map(|e| e.agent_id.clone()).collect();
        assert_eq!(agents.len(), 3, "the multi-agent system's steps come from several agents");
        let mut attempts: BTreeMap<String, std::collections::BTreeSet<i32>> = BTreeMap::new();
        for e in events.iter().filter(|e| e.source == Source::Evaluation) {
            if let Some(s) = &e.run_started {
                assert!(s.benchmark.is_some());
                attempts.entry(s.task_id.clone().unwrap_or_default()).or_default().insert(s.attempt);
            }
        }
        assert!(attempts.values().any(|a| a.len() == 4), "evaluation tasks are attempted k = 4 times: {attempts:?}");
        assert!(recs.iter().any(|r| r.payload.first() == Some(&b'{')) && recs.iter().any(|r| r.payload.first() == Some(&0xC3)));
    }

    #[test]
    fn declared_rates_show_in_the_data() {
        let mut spec = FleetSpec::demo(1, 5, 1_000_000);
        spec.systems[0].unsafe_action = 0.25;
        spec.systems[0].evaluation = None;
        let events: Vec<_> = generate(&spec, 0, 1500).iter().map(decode).collect();
        // Per action (tool call): model calls are never unsafe.
        let steps: Vec<_> = events.iter().filter_map(|e| e.step.as_ref()).collect();
        let actions: Vec<_> = steps.iter().filter(|s| s.step_kind == StepKind::ToolCall).collect();
        let rate = actions.iter().filter(|s| !s.violations.is_empty()).count() as f64 / actions.len() as f64;
        assert!((rate - 0.25).abs() < 0.02, "unsafe-action rate {rate}");
        assert!(steps.iter().all(|s| s.step_kind == StepKind::ToolCall || s.violations.is_empty()));
    }

    /// Grounding and review counts pooled over runs recover the declared rates; systems
    /// without them carry none and draw exactly what they drew before.
    #[test]
    fn drafting_and_review_rates_show_in_the_data() {
        let mut spec = FleetSpec::demo(1, 9, 1_000_000);
        spec.systems[0].evaluation = None;
        let plain: Vec<_> = generate(&spec, 0, 3000).iter().map(decode).collect();
        assert!(plain.iter().filter_map(|e| e.run_ended.as_ref()).all(|e| e.grounding.is_none() && e.review.is_none()));
        spec.systems[0].drafting = Some(DraftingSpec::grounded());
        spec.systems[0].review = Some(ReviewSpec::observed());
        let events: Vec<_> = generate(&spec, 0, 3000).iter().map(decode).collect();
        let ends: Vec<&RunEnded> = events.iter().filter_map(|e| e.run_ended.as_deref()).collect();
        let sys = &spec.systems[0];
        let pooled = |part: fn(&RunEnded) -> (f64, f64)| {
            let (p, w) = ends.iter().map(|e| part(e)).fold((0.0, 0.0), |(a, b), (p, w)| (a + p, b + w));
            p / w
        };
        fn g(e: &RunEnded) -> Grounding {
            e.grounding.clone().unwrap()
        }
        fn r(e: &RunEnded) -> Review {
            e.review.clone().unwrap()
        }
        let checks: [(&str, f64, f64); 7] = [
            ("citation_precision_strict", pooled(|e| (g(e).citations_used_strict.unwrap() as f64, g(e).citations.unwrap() as f64)), 0.02),
            ("citation_precision_lenient", pooled(|e| (g(e).citations_used_lenient.unwrap() as f64, g(e).citations.unwrap() as f64)), 0.02),
            (
                "key_element_capture",
                pooled(|e| (g(e).key_elements_captured.unwrap() as f64, g(e).key_elements_expected.unwrap() as f64)),
                0.02,
            ),
            ("irrelevance_rate", pooled(|e| (g(e).sentences_irrelevant.unwrap() as f64, g(e).sentences_total.unwrap() as f64)), 0.02),
            ("reviewer_catch_rate", pooled(|e| (r(e).seeded_caught.unwrap() as f64, r(e).seeded_defects.unwrap() as f64)), 0.03),
            ("review_burden", pooled(|e| (r(e).review_minutes.unwrap(), if e.outcome == Outcome::Success { 1.0 } else { 0.0 })), 0.6),
            (
                "efficiency_net_of_review_observed",
                pooled(|e| {
                    let r = r(e);
                    let m = r.manual_minutes.unwrap();
                    (m - r.generation_minutes.unwrap() - r.review_minutes.unwrap(), m)
                }),
                0.02,
            ),
        ];
        for (metric, got, tol) in checks {
            let want = sys.true_value(metric).unwrap();
            assert!((got - want).abs() < tol, "{metric}: {got} against {want}");
        }
        let mut stripped = events.clone();
        for e in stripped.iter_mut().filter_map(|e| e.run_ended.as_mut()) {
            (e.grounding, e.review, e.coordination) = (None, None, None);
        }
        assert_eq!(plain, stripped, "the rest of the stream is unchanged");
    }

    #[test]
    fn poison_of_every_kind() {
        let mut spec = FleetSpec::demo(4, 7, 1_000_000);
        spec.poison = 0.01;
        let recs = generate(&spec, 0, 200);
        for (kind, _) in POISON_KINDS {
            assert!(recs.iter().any(|r| r.poison == Some(kind)), "{kind}");
        }
        let t = truth(&spec);
        assert_eq!(t["systems"]["agent-c"]["unsafe_action"], 0.25);
    }
}
