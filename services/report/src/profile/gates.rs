//! Phase 4, the gates: each gated metric's verdict (or why it has none) and the Efficacy Index
//! (seed 002 §5–6).

use std::collections::BTreeMap;

use octant_contracts::{ProfileMetric, Provenance};
use octant_core::catalogue::{Role, ids};
use octant_core::gate::{self, GateOutcome, GatedMetric, Thresholds};
use serde::Serialize;

use super::inputs::Agreement;
use crate::config::ReportConfig;
use crate::meta_evaluation::MetaEvaluation;

/// One gated metric's verdict, or why it has none.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateLine {
    pub metric: String,
    pub thresholds: Thresholds,
    pub estimate: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub nu: Option<f64>,
    pub nu_conservative: Option<f64>,
    pub outcome: Option<GateOutcome>,
    /// Why the metric cannot enter the gate (then `outcome` is `None`).
    pub na_reason: Option<String>,
    /// Units in the period (0 when not measured).
    pub units: u64,
    /// For a rate: the units it needs before its interval can tell the inner threshold from
    /// the outer one, n ≈ z² p(1 − p)/δ² with p its estimate (0.5 when not measured) and δ
    /// the thresholds' gap ([`gate::units_to_resolve`]); `None` for other metrics.
    pub units_needed: Option<u64>,
    /// How the estimate was made when it is not the metric's own window (judged success:
    /// the prediction-powered estimate).
    pub estimator: Option<String>,
}

/// [`GateLine::units_needed`] of a gated metric.
fn units_needed(id: &str, t: &Thresholds, estimate: Option<f64>, level: f64) -> Option<u64> {
    let spec = octant_core::catalogue::spec(id)?;
    octant_engine::window::is_rate(spec).then(|| gate::units_to_resolve(estimate.unwrap_or(0.5), t.gap(), level)).flatten()
}

/// The gated metrics of a profile. A metric measured on several benchmarks is gated on each.
///
/// A line has no outcome, and says why, when the metric was not measured, is N/A, is
/// self-assessment (`task_success_self_reported`, unless `gate_self_reported`), or was judged
/// (partly) by an LLM judge whose agreement with humans on the same period is below
/// `min_judge_kappa` or rests on fewer than `min_labelled_runs` labelled runs (seed 002).
pub(super) fn gate_lines(
    cfg: &ReportConfig,
    metrics: &[ProfileMetric],
    provenance: &BTreeMap<String, BTreeMap<String, u64>>,
    agreement: Option<&Agreement>,
    meta: &MetaEvaluation,
) -> Vec<GateLine> {
    let count = |metric: &str, p: Provenance| provenance.get(metric).and_then(|m| m.get(p.as_str())).copied().unwrap_or(0);
    let level = cfg.evaluation.bootstrap.level;
    let graders = |name: &str, mode: Option<&str>, what: String| graders_problem(cfg, meta, name, mode, what);
    let mut out = Vec::new();
    for (id, t) in &cfg.gates {
        let self_assessed = octant_core::catalogue::spec(id).is_some_and(|s| s.role == Role::Informational);
        let judged = count(id, Provenance::Judge);
        let humans = count(id, Provenance::Human);
        let verified = count(id, Provenance::Verifier);
        // Run success a human or (through the PPI) a human-rectified judge gave.
        let success_graders = (id == ids::TASK_SUCCESS && judged + humans > 0)
            .then(|| graders(ids::TASK_SUCCESS, None, format!("{} runs rest on human verdicts", judged + humans)))
            .flatten();
        // Judged success is gated on its prediction-powered estimate (seed 002 §5: unbiased
        // for the human-graded rate whatever the judge's accuracy), never on the judge alone.
        let ppi = (id == ids::TASK_SUCCESS && judged > 0).then(|| match agreement.and_then(|a| a.ppi) {
            _ if verified > 0 => Err(format!(
                "{verified} verified and {judged} judge-graded runs: the prediction-powered estimate covers judged runs only; gate each source apart"
            )),
            Some(p) => Ok(p),
            None => Err(format!("{judged} runs judged by an LLM judge, with too few human verdicts for the prediction-powered estimate (≥ 2)")),
        });
        let judge_problem = (judged > 0).then(|| judge_check(cfg, judged, agreement));
        let (human_instrument, instrument_problem) = instrument_checks(cfg, meta, id);
        let found: Vec<&ProfileMetric> = metrics.iter().filter(|m| &m.metric == id).collect();
        if found.is_empty() {
            out.push(unmeasured(id, t, count("task_success_self_reported", Provenance::SelfReported), level));
        }
        for m in found {
            // The PPI is over the period's judged runs, not per benchmark: a benchmark's judged
            // success is not gated on the judge's mean instead.
            let line_ppi = ppi.clone().map(|r| {
                r.and_then(|p| match &m.benchmark {
                    None => Ok(p),
                    Some(_) => {
                        Err(format!("{judged} runs judged by an LLM judge: the prediction-powered estimate is not computed per benchmark"))
                    }
                })
            });
            let na_reason = if self_assessed {
                Some(if id == ids::TASK_SUCCESS_SELF_REPORTED {
                    "self-assessment is reported, never gated (seed 002 §5)".to_string()
                } else {
                    format!("{id} is informational (reported beside its verdict-based instrument), never gated")
                })
            } else if let Some(r) = &m.na_reason {
                Some(r.clone())
            } else {
                judge_problem
                    .clone()
                    .flatten()
                    .or_else(|| instrument_problem.clone())
                    .or_else(|| human_instrument.clone())
                    .or_else(|| success_graders.clone())
                    .or_else(|| line_ppi.clone().and_then(Result::err))
            };
            // Judged success: the PPI estimate and interval in place of the judge's mean.
            let ppi_used = line_ppi.and_then(Result::ok);
            let (estimate, ci_low, ci_high) = match ppi_used {
                Some(p) => (Some(p.estimate), Some(p.lo.max(0.0)), Some(p.hi.min(1.0))),
                None => (m.estimate, m.ci_low, m.ci_high),
            };
            let gm = match (estimate, ci_low, ci_high, &na_reason) {
                (Some(e), Some(lo), Some(hi), None) => Some(GatedMetric { thresholds: *t, estimate: e, lo, hi }),
                _ => None,
            };
            let name = match &m.benchmark {
                Some(b) => format!("{id}@{b}"),
                None => id.clone(),
            };
            out.push(GateLine {
                metric: name,
                thresholds: *t,
                estimate,
                ci_low,
                ci_high,
                nu: gm.map(|g| g.nu()),
                nu_conservative: gm.map(|g| g.nu_conservative()),
                outcome: gm.map(|g| g.outcome()),
                na_reason,
                units: m.units.max(0) as u64,
                units_needed: units_needed(id, t, estimate, level),
                estimator: ppi_used.map(|p| {
                    format!(
                        "prediction-powered: judge verdicts {:.4} rectified by {:+.4} from human verdicts (seed 002 §5)",
                        p.judge_only, p.rectifier
                    )
                }),
            });
        }
    }
    fail_closed_when_unwatched(cfg, metrics, &mut out);
    out
}

/// Why an unwatched source fails a release gate closed.
const UNWATCHED_GATE: &str = "fail closed: high-impact calls whose approvals the telemetry has never shown (confirmation gating not \
                              assessed: unwatched); a release cannot pass on what Octant cannot watch";

/// A system with high-impact calls from an unwatched source ([`octant_core::profile::UNWATCHED`])
/// never passes a release gate: when gates are declared, its confirmation-gating line fails
/// (added at the veto's threshold when the gate does not name the metric).
fn fail_closed_when_unwatched(cfg: &ReportConfig, metrics: &[ProfileMetric], out: &mut Vec<GateLine>) {
    let unwatched =
        metrics.iter().filter(|m| m.metric == ids::CONFIRMATION_GATING && m.na_reason.as_deref() == Some(octant_core::profile::UNWATCHED));
    let units: u64 = unwatched.clone().map(|m| m.units.max(0) as u64).sum();
    if cfg.gates.is_empty() || unwatched.count() == 0 {
        return;
    }
    let gated: Vec<&mut GateLine> = out.iter_mut().filter(|l| l.metric.split('@').next() == Some(ids::CONFIRMATION_GATING)).collect();
    if gated.is_empty() {
        let veto = Thresholds::new(0.80, 0.80);
        out.push(GateLine {
            metric: ids::CONFIRMATION_GATING.to_string(),
            thresholds: veto,
            estimate: None,
            ci_low: None,
            ci_high: None,
            nu: None,
            nu_conservative: None,
            outcome: Some(GateOutcome::Fail),
            na_reason: Some(UNWATCHED_GATE.to_string()),
            units,
            units_needed: None,
            estimator: None,
        });
        return;
    }
    for l in gated.into_iter().filter(|l| l.na_reason.as_deref() == Some(octant_core::profile::UNWATCHED)) {
        l.outcome = Some(GateOutcome::Fail);
        l.na_reason = Some(UNWATCHED_GATE.to_string());
    }
}

/// Seed 002 §5: human grading enters a gate only when its graders agree (≥ 2 of them,
/// Krippendorff's α ≥ `min_human_agreement`), measured on the period's results of `name`.
fn graders_problem(cfg: &ReportConfig, meta: &MetaEvaluation, name: &str, mode: Option<&str>, what: String) -> Option<String> {
    let report = meta.rater(name, mode);
    match report.map(|r| (r.humans, r.human_alpha)) {
        Some((h, Some(a))) if h >= 2 && a >= cfg.min_human_agreement => None,
        Some((h, Some(a))) if h >= 2 => Some(format!(
            "{what}, and its {h} human graders agree at α {a:.2} (< {}) on {name}: revise the rubric (seed 002 §5)",
            cfg.min_human_agreement
        )),
        _ => Some(format!(
            "{what}, with no agreement among human graders measured (≥ 2 graders' results named {name} are needed; seed 002 §5)"
        )),
    }
}

/// Why `judged` runs' LLM-judge verdicts cannot enter a gate, if they cannot: the judge's
/// agreement with humans on the period's runs with both verdicts.
fn judge_check(cfg: &ReportConfig, judged: u64, agreement: Option<&Agreement>) -> Option<String> {
    match agreement {
        Some(a) if a.labelled >= cfg.min_labelled_runs && a.kappa.is_some_and(|k| k >= cfg.min_judge_kappa) => None,
        Some(a) if a.labelled < cfg.min_labelled_runs => Some(format!(
            "{judged} runs judged by an LLM judge, checked against humans on only {} labelled runs (< {})",
            a.labelled, cfg.min_labelled_runs
        )),
        Some(a) => Some(format!(
            "{judged} runs judged by an LLM judge whose agreement with humans is κ {} (< {}) on {} labelled runs",
            a.kappa.map_or("undefined".into(), |k| format!("{k:.2}")),
            cfg.min_judge_kappa,
            a.labelled
        )),
        None => Some(format!("{judged} runs judged by an LLM judge, never checked against human verdicts in the period")),
    }
}

/// For a declared instrument rated by humans or an LLM judge: why its human graders' agreement,
/// and why its judge's agreement with humans on the same items (seed 002 §5: κ ≥ 0.6), keep it
/// out of a gate.
fn instrument_checks(cfg: &ReportConfig, meta: &MetaEvaluation, id: &str) -> (Option<String>, Option<String>) {
    let rated = cfg.evaluation.instruments.iter().find(|d| d.id == id && matches!(d.rater_kind.as_deref(), Some("human" | "judge")));
    let human = rated.and_then(|d| {
        graders_problem(
            cfg,
            meta,
            d.evaluation_name(),
            d.scoring_mode.as_deref(),
            format!("{id} is graded by humans or checked against them"),
        )
    });
    let judge = rated.filter(|d| d.rater_kind.as_deref() == Some("judge")).and_then(|d| {
        let name = d.evaluation_name();
        match meta.judge_human(name, d.scoring_mode.as_deref()) {
            Some(k) if k.items >= cfg.min_labelled_runs && k.kappa >= cfg.min_judge_kappa => None,
            Some(k) if k.items < cfg.min_labelled_runs => Some(format!(
                "{id} comes from an LLM judge checked against humans on only {} items of {name} (< {})",
                k.items, cfg.min_labelled_runs
            )),
            Some(k) => Some(format!(
                "{id} comes from an LLM judge whose agreement with humans on {name} is κ {:.2} (< {}) on {} items",
                k.kappa, cfg.min_judge_kappa, k.items
            )),
            None => Some(format!("{id} comes from an LLM judge never checked against human ratings of {name} in the period")),
        }
    });
    (human, judge)
}

/// The line of a gated metric the period did not measure (`self_reported`: runs that reported
/// success only themselves).
fn unmeasured(id: &str, t: &Thresholds, self_reported: u64, level: f64) -> GateLine {
    let reason = if id == ids::TASK_SUCCESS && self_reported > 0 {
        format!("no verified success in the period: {self_reported} runs reported success only themselves (self-assessment is never gated)")
    } else {
        "not measured in the period".to_string()
    };
    GateLine {
        metric: id.to_string(),
        thresholds: *t,
        estimate: None,
        ci_low: None,
        ci_high: None,
        nu: None,
        nu_conservative: None,
        outcome: None,
        na_reason: Some(reason),
        units: 0,
        units_needed: units_needed(id, t, None, level),
        estimator: None,
    }
}

/// Gate outcome and EI / EI_G (EI only with weights). The gate is conjunctive: a metric that
/// fails decides it even while another is N/A; otherwise it needs every gated metric.
pub(super) fn gate_summary(cfg: &ReportConfig, lines: &[GateLine]) -> (Option<GateOutcome>, Option<f64>, Option<f64>) {
    if lines.is_empty() {
        return (None, None, None);
    }
    // A line without an estimate (N/A, or failed closed) leaves no EI; a failing line decides.
    if lines.iter().any(|l| l.outcome.is_none() || l.estimate.is_none() || l.ci_low.is_none() || l.ci_high.is_none()) {
        let failed = lines.iter().any(|l| l.outcome == Some(GateOutcome::Fail));
        return (failed.then_some(GateOutcome::Fail), None, None);
    }
    let gms: Vec<GatedMetric> = lines
        .iter()
        .map(|l| GatedMetric { thresholds: l.thresholds, estimate: l.estimate.unwrap(), lo: l.ci_low.unwrap(), hi: l.ci_high.unwrap() })
        .collect();
    let outcome = gate::gate(&gms);
    if cfg.weights.is_empty() {
        return (outcome, None, None);
    }
    // A metric gated on several benchmarks shares its charter weight among its lines.
    let metric = |l: &GateLine| l.metric.split('@').next().unwrap_or_default().to_string();
    let lines_of = |m: &str| lines.iter().filter(|l| metric(l) == m).count() as f64;
    let w: Vec<f64> = lines.iter().map(|l| cfg.weights.get(&metric(l)).copied().unwrap_or(0.0) / lines_of(&metric(l))).collect();
    (outcome, gate::efficacy_index(&gms, &w), gate::efficacy_index_geometric(&gms, &w))
}
