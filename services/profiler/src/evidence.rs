//! Evidence packages: `profile.json` (machine readable), `profile.md` (for a review) and
//! `profile.html` (a self-contained page with an SVG chart of the eight bands and their
//! intervals), with the crosswalk of the dimensions to governance duties.
//!
//! The HTML is well-formed XML (every element closed, text escaped), so any XML parser reads
//! it as well as a browser does.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use octant_contracts::DimensionBand;
use octant_core::catalogue::{CATALOGUE, CATALOGUE_VERSION};
use octant_lake::lake::escape;
use serde::Serialize;
use serde_json::{Value, json};

use crate::build::Built;
use crate::config::ProfilerConfig;

/// Version of the `profile.json` layout.
pub const EVIDENCE_VERSION: u32 = 1;

/// One row of the crosswalk: a dimension (or a part of the method) and the duties it serves.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Crosswalk {
    pub subject: &'static str,
    pub eu_ai_act: &'static [&'static str],
    /// The GPAI Code of Practice's provisions (seed 000 Table VI's third column).
    pub code_of_practice: &'static str,
    pub nist_ai_rmf: &'static [&'static str],
    /// The ISO/IEC standards seed 000 §VI aligns the element with: TS 5723 (the trustworthiness
    /// vocabulary: every dimension), 42001 (AI management systems: governance, meta-evaluation,
    /// evidence), 23894 (AI risk management: the risk dimensions and proportionality), 38507
    /// (governance of AI use: governance, meta-evaluation, profiles, auditable evidence), TR 5469
    /// (functional safety: unsafe actions, confirmation gating, interruptibility).
    pub iso_iec: &'static [&'static str],
}

/// Design §1's dimensions, and the method's other elements, mapped to the EU AI Act (GPAI
/// obligations), the GPAI Code of Practice (seed 000 Table VI, verbatim) and the NIST AI RMF
/// functions (§VI). Capability and fairness have no GPAI article of their own; they serve
/// MEASURE. The meta-evaluation row carries the governance row's articles (Table VI groups
/// them as "Governance / meta-evaluation"). The NIST functions are §VI's, element by element:
/// the governance and meta-evaluation layer (and the evidence trail) GOVERN, the coverage matrix
/// and the multidimensional profile MAP, the metric catalogue and scoring MEASURE,
/// proportionality and the decision policies (gates and vetoes) MANAGE.
pub const CROSSWALK: &[Crosswalk] = &[
    Crosswalk { subject: "capability", eu_ai_act: &[], code_of_practice: "", nist_ai_rmf: &["MEASURE"], iso_iec: &["ISO/IEC TS 5723"] },
    Crosswalk {
        subject: "robustness",
        eu_ai_act: &["Art. 55(1)(a)", "Art. 55(1)(d)", "Art. 51", "Annex XIII"],
        code_of_practice: "Stress testing, resilience, robustness, and security measures",
        nist_ai_rmf: &["MEASURE"],
        iso_iec: &["ISO/IEC TS 5723", "ISO/IEC 23894"],
    },
    Crosswalk {
        subject: "safety",
        eu_ai_act: &["Art. 55(1)(a)", "Annex XI §2"],
        code_of_practice: "Safety and Security chapter; model evaluation, red teaming, and Measure 10.1",
        nist_ai_rmf: &["MEASURE", "MANAGE"],
        iso_iec: &["ISO/IEC TS 5723", "ISO/IEC 23894", "ISO/IEC TR 5469"],
    },
    Crosswalk {
        subject: "fairness",
        eu_ai_act: &[],
        code_of_practice: "",
        nist_ai_rmf: &["MEASURE"],
        iso_iec: &["ISO/IEC TS 5723", "ISO/IEC 23894"],
    },
    Crosswalk {
        subject: "transparency",
        eu_ai_act: &["Art. 53(1)(a)", "Art. 53(1)(b)", "Art. 53(1)(d)", "Annex XI", "Annex XII"],
        code_of_practice: "Transparency chapter; Measures 1.1–1.3 on model documentation, downstream information, quality/integrity, and retention",
        nist_ai_rmf: &["MEASURE"],
        iso_iec: &["ISO/IEC TS 5723", "ISO/IEC 23894"],
    },
    Crosswalk {
        subject: "governance",
        eu_ai_act: &["Art. 55(1)(a)", "Art. 56"],
        code_of_practice: "State-of-the-art evaluation framework and rigor requirements",
        nist_ai_rmf: &["GOVERN"],
        iso_iec: &["ISO/IEC TS 5723", "ISO/IEC 42001", "ISO/IEC 38507"],
    },
    Crosswalk {
        subject: "oversight",
        eu_ai_act: &["Art. 55(1)(b)", "Art. 55(1)(c)", "Art. 51", "Annex XIII"],
        code_of_practice: "Ongoing monitoring, systemic-risk tracking, incident reporting, and corrective measures",
        nist_ai_rmf: &["MEASURE", "MANAGE"],
        iso_iec: &["ISO/IEC TS 5723", "ISO/IEC 23894", "ISO/IEC TR 5469"],
    },
    Crosswalk {
        subject: "efficiency",
        eu_ai_act: &["Art. 53(1)(a)", "Annex XI §1(2)(d)–(e)"],
        code_of_practice: "Transparency chapter and Model Documentation Form provisions on compute and energy",
        nist_ai_rmf: &["MEASURE"],
        iso_iec: &["ISO/IEC TS 5723", "ISO/IEC 23894"],
    },
    Crosswalk {
        subject: "meta-evaluation (judge–human agreement, method, seed)",
        eu_ai_act: &["Art. 55(1)(a)", "Art. 56"],
        code_of_practice: "State-of-the-art evaluation framework and rigor requirements",
        nist_ai_rmf: &["GOVERN"],
        iso_iec: &["ISO/IEC 42001", "ISO/IEC 38507"],
    },
    Crosswalk {
        subject: "proportionality",
        eu_ai_act: &["Art. 51", "Annex XIII"],
        code_of_practice: "Proportionate requirements for systemic-risk, modified, and fine-tuned GPAI models",
        nist_ai_rmf: &["MANAGE"],
        iso_iec: &["ISO/IEC 23894"],
    },
    Crosswalk {
        subject: "evidence and audit trail (this package, its inputs and lake offsets)",
        eu_ai_act: &["Art. 53(1)(a)", "Annex XI", "Annex XII"],
        code_of_practice: "Up-to-date documentation and retention of relevant records",
        nist_ai_rmf: &["GOVERN"],
        iso_iec: &["ISO/IEC 42001", "ISO/IEC 38507"],
    },
    Crosswalk {
        subject: "coverage (systems, sources, benchmarks, periods)",
        eu_ai_act: &[],
        code_of_practice: "",
        nist_ai_rmf: &["MAP"],
        iso_iec: &[],
    },
    Crosswalk {
        subject: "multidimensional profile (a band per dimension)",
        eu_ai_act: &[],
        code_of_practice: "",
        nist_ai_rmf: &["MAP"],
        iso_iec: &["ISO/IEC 38507"],
    },
    Crosswalk { subject: "metrics and intervals", eu_ai_act: &[], code_of_practice: "", nist_ai_rmf: &["MEASURE"], iso_iec: &[] },
    Crosswalk { subject: "gates and vetoes", eu_ai_act: &[], code_of_practice: "", nist_ai_rmf: &["MANAGE"], iso_iec: &[] },
];

pub(crate) fn rfc3339(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// The package directory of a profile under `root`.
pub fn package_dir(root: &Path, b: &Built) -> PathBuf {
    let r = &b.record;
    root.join(escape(&r.system_id)).join(escape(&r.system_version)).join(r.source.as_str()).join(&r.period)
}

/// `profile.json`.
pub fn to_json(b: &Built, cfg: &ProfilerConfig, lake: &Path) -> Value {
    let r = &b.record;
    let vetoes: Vec<Value> = CATALOGUE
        .iter()
        .filter_map(|m| {
            m.veto.map(|v| json!({"rule": v.name, "metric": m.id, "threshold": v.threshold, "direction": v.direction, "effect": v.effect}))
        })
        .collect();
    let budgets: BTreeMap<&str, f64> =
        CATALOGUE.iter().filter_map(|m| cfg.evaluation.budget(&r.system_id, m.id).map(|b| (m.id, b))).collect();
    json!({
        "evidence_version": EVIDENCE_VERSION,
        "profile_id": r.profile_id,
        "system": {"id": r.system_id, "version": r.system_version, "source": r.source.as_str()},
        "period": {"name": r.period, "start": r.period_start, "end": r.period_end, "start_utc": rfc3339(r.period_start), "end_utc": rfc3339(r.period_end)},
        "generated_at": r.generated_at,
        "method": {
            "name": r.method,
            "level": r.level,
            "replicates": r.replicates,
            "seed": r.seed,
            "resampling_unit": "cluster (the run for step-level metrics, the task for pass@k and pass^k)",
            "catalogue_version": CATALOGUE_VERSION,
            "aggregation": cfg.evaluation.profile.aggregation,
            "cap_policy": cfg.evaluation.profile.cap_policy,
        },
        "thresholds": {
            "vetoes": vetoes,
            "gates": cfg.gates,
            "weights": cfg.weights,
            "judge_threshold": cfg.judge_threshold,
            "min_judge_kappa": cfg.min_judge_kappa,
            "min_labelled_runs": cfg.min_labelled_runs,
            "gate_self_reported": cfg.gate_self_reported,
            "veto_alpha": cfg.evaluation.profile.veto_alpha,
        },
        "budgets": budgets,
        "unsuitable": r.unsuitable,
        "metrics": r.metrics,
        "dimensions": r.dimensions,
        "vetoes": b.dimension_profile.vetoes,
        "gate": {"outcome": r.gate, "na_reason": r.gate_na_reason, "metrics": b.gate, "efficacy_index": r.efficacy_index, "efficacy_index_geometric": r.efficacy_index_geometric},
        "success_provenance": b.success_provenance,
        "agreement": b.agreement,
        "reproducibility": b.reproducibility,
        "coverage": {"system_type": b.system_type.as_str(), "dimensions": coverage(b)},
        "task_families": b.families,
        "agents": b.agents,
        "release_decision": b.release,
        "meta_evaluation": b.meta,
        "inputs": {
            "lake": lake.display().to_string(),
            "observations": b.observations,
            "trajectory_events": b.trajectory_events,
            "duplicate_observations_dropped": b.duplicates,
        },
        "crosswalk": CROSSWALK,
        "profile": r,
    })
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.4}")).unwrap_or_else(|| "—".into())
}

/// Milliseconds and token counts: whole numbers.
fn fmt_whole(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.0}")).unwrap_or_else(|| "—".into())
}

/// "196 (12 more)", "196 (enough)", or "—" when the rule does not apply.
fn units_needed_text(g: &crate::build::GateLine) -> String {
    match g.units_needed {
        None => "—".into(),
        Some(n) if n <= g.units => format!("{n} (enough)"),
        Some(n) => format!("{n} ({} more)", n - g.units),
    }
}

/// A metric's N/A reason; for too little evidence, how many more units it needs before it
/// can be banded ("insufficient_evidence: 12 more units (18 of 30)").
fn metric_na(m: &octant_contracts::ProfileMetric) -> String {
    let Some(reason) = m.na_reason.as_deref() else { return String::new() };
    let units = m.units.max(0) as u64;
    match octant_core::catalogue::spec(&m.metric) {
        Some(spec) if reason == "insufficient_evidence" && units < spec.min_units => {
            format!("{reason}: {} more units ({units} of {})", spec.min_units - units, spec.min_units)
        }
        _ => reason.to_string(),
    }
}

/// A metric's band with its reading ("3 Good"), empty when N/A.
fn metric_band(band: Option<i32>) -> String {
    band.map(|b| format!("{b} {}", octant_core::band_reading(i64::from(b)))).unwrap_or_default()
}

fn band_text(d: &DimensionBand) -> String {
    match d.band {
        None => format!("N/A ({})", d.na_reason.as_deref().unwrap_or("no evidence")),
        Some(b) => {
            let iv = match (d.band_low, d.band_high) {
                (Some(l), Some(h)) => format!(" [{l}, {h}]"),
                _ => String::new(),
            };
            let cap = if d.capped_by.is_empty() { String::new() } else { format!(" capped by {}", d.capped_by.join(", ")) };
            format!("{b} {}{iv}{cap}", octant_core::band_reading(i64::from(b)))
        }
    }
}

/// `profile.md`.
pub fn to_markdown(b: &Built, lake: &Path) -> String {
    let r = &b.record;
    let mut s = String::new();
    let _ = writeln!(s, "# Octant profile: {} {} ({})\n", r.system_id, r.system_version, r.source.as_str());
    let _ = writeln!(
        s,
        "Period **{}**: {} to {} (UTC). Generated {}.\n",
        r.period,
        rfc3339(r.period_start),
        rfc3339(r.period_end),
        rfc3339(r.generated_at)
    );
    let _ = writeln!(
        s,
        "Method: {}, level {}, {} replicates, seed {}, catalogue {}.\n",
        r.method, r.level, r.replicates, r.seed, r.catalogue_version
    );
    if r.unsuitable {
        let _ = writeln!(
            s,
            "> **UNSUITABLE for deployment**: a veto with that effect is breached (its estimate is past the threshold) or confirmed (sequential evidence).\n"
        );
    }
    let _ = writeln!(s, "## Dimensions\n\n| Dimension | Band [interval] | Instruments |\n|---|---|---|");
    for d in &r.dimensions {
        let _ = writeln!(s, "| {} | {} | {} |", d.dimension, band_text(d), d.instruments.join(", "));
    }
    let _ = writeln!(s, "\nBands read {}.", octant_core::band_legend());
    let _ = writeln!(s, "\n## Vetoes\n\n| Rule | Metric | State | Estimate [95 % interval] | Threshold |\n|---|---|---|---|---|");
    for v in &b.dimension_profile.vetoes {
        let m = match &v.benchmark {
            Some(bm) => format!("{} @ {bm}", v.metric),
            None => v.metric.clone(),
        };
        let _ = writeln!(
            s,
            "| {} | {m} | {} | {} [{}, {}] | {} |",
            v.rule,
            v.state,
            fmt_opt(v.estimate),
            fmt_opt(v.ci_low),
            fmt_opt(v.ci_high),
            v.threshold
        );
    }
    let _ = writeln!(
        s,
        "\n## Metrics\n\n| Metric | Dimension | Benchmark | Units | Estimate | Interval | Band | N/A |\n|---|---|---|---|---|---|---|---|"
    );
    for m in &r.metrics {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | [{}, {}] | {} | {} |",
            m.metric,
            m.dimension,
            m.benchmark.as_deref().unwrap_or(""),
            m.units,
            fmt_opt(m.estimate),
            fmt_opt(m.ci_low),
            fmt_opt(m.ci_high),
            metric_band(m.band),
            metric_na(m)
        );
    }
    let _ = writeln!(s, "\n## Gate and Efficacy Index\n");
    if b.gate.is_empty() {
        let _ = writeln!(s, "No gate thresholds declared.");
    } else {
        let _ = writeln!(
            s,
            "Gate: **{}**; EI {}; EI_G {}.\n",
            r.gate.as_deref().unwrap_or("N/A"),
            fmt_opt(r.efficacy_index),
            fmt_opt(r.efficacy_index_geometric)
        );
        if let Some(why) = &r.gate_na_reason {
            let _ = writeln!(s, "Why N/A: {why}.\n");
        }
        let _ = writeln!(
            s,
            "| Metric | Outer | Inner | Estimate | ν | ν (conservative) | Outcome | Units | Units to resolve the gap |\n|---|---|---|---|---|---|---|---|---|"
        );
        for g in &b.gate {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                g.metric,
                g.thresholds.outer,
                g.thresholds.inner,
                match &g.estimator {
                    Some(how) => format!("{} ({how})", fmt_opt(g.estimate)),
                    None => fmt_opt(g.estimate),
                },
                fmt_opt(g.nu),
                fmt_opt(g.nu_conservative),
                g.outcome
                    .map(|o| format!("{o:?}").to_lowercase())
                    .unwrap_or_else(|| format!("N/A: {}", g.na_reason.as_deref().unwrap_or("no outcome"))),
                g.units,
                units_needed_text(g)
            );
        }
        let _ = writeln!(
            s,
            "\nUnits to resolve the gap: for a rate, n ≈ z²·p(1−p)/δ² with p its estimate (0.5 when not measured) and δ = |inner − outer| (the enterprise method's sample-size rule), and how many more the period needs; — for other metrics."
        );
    }
    if let Some(c) = &b.release {
        let _ = writeln!(s, "\n{}", crate::compare::to_markdown(c).trim_end());
    }
    let _ = writeln!(s, "\n## Who judged success\n");
    if b.success_provenance.is_empty() {
        let _ = writeln!(s, "No run ended in the period.");
    }
    for (metric, by) in &b.success_provenance {
        let parts: Vec<String> = by.iter().map(|(p, n)| format!("{p} {n}")).collect();
        let _ = writeln!(s, "- `{metric}`: {} runs", parts.join(", "));
    }
    let _ =
        writeln!(s, "\nSelf-reported success is shown apart (`task_success_self_reported`) and never banded into Capability nor gated.");
    let _ = writeln!(s, "\n## Judge–human agreement\n");
    match &b.agreement {
        None => {
            let _ = writeln!(s, "No run carries both a judge and a human verdict.");
        }
        Some(a) => {
            let interval = a.kappa_interval.map(|[l, h]| format!(" [{l:.4}, {h:.4}]")).unwrap_or_default();
            let band = match (a.kappa_band, a.kappa_band_interval) {
                (Some(b), Some([l, h])) => format!(", band {} [{l}, {h}]", metric_band(Some(i32::from(b)))),
                (Some(b), None) => format!(", band {}", metric_band(Some(i32::from(b)))),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "{} judged runs, {} with a human verdict. Cohen's κ {}{interval} (95 %, asymptotic){band}.",
                a.judged,
                a.labelled,
                fmt_opt(a.kappa)
            );
            if let Some(p) = &a.ppi {
                let _ = writeln!(
                    s,
                    "Prediction-powered success {:.4} [{:.4}, {:.4}] (judge alone {:.4}, rectifier {:+.4}).",
                    p.estimate, p.lo, p.hi, p.judge_only, p.rectifier
                );
            }
        }
    }
    let _ = writeln!(s, "\n{}", crate::meta::to_markdown(&b.meta).trim_end());
    let _ = writeln!(
        s,
        "\n## Coverage\n\nSystem type **{}** (`[evaluation.system_types]`): the instruments of each dimension that apply to it (seed 000 Table IV), \
         what the period measured, and what does not apply.\n",
        b.system_type.as_str()
    );
    let _ = writeln!(s, "| Dimension | Measured | Measured, N/A | Not observed | Not applicable to the type |\n|---|---|---|---|---|");
    let list = |v: &[String]| if v.is_empty() { "—".to_string() } else { v.join(", ") };
    for c in coverage(b) {
        let na: Vec<String> = c.not_applicable.iter().map(|(m, why)| format!("{m} ({why})")).collect();
        let outside = if c.outside_type.is_empty() { "—".to_string() } else { format!("{}: no action loop", c.outside_type.join(", ")) };
        let _ = writeln!(s, "| {} | {} | {} | {} | {outside} |", c.dimension, list(&c.measured), list(&na), list(&c.not_observed));
    }
    if !b.agents.is_empty() {
        let _ = writeln!(
            s,
            "\n## Agents\n\nA multi-agent system: each agent's step-level instruments over its own steps, and its share of the system's \
             numerator (for the unsafe-action rate, the share of violating steps it took). The system's rows above are the joint rates.\n"
        );
        let _ = writeln!(s, "| Agent | Instrument | Estimate | Units | Share |\n|---|---|---|---|---|");
        for a in &b.agents {
            for i in &a.instruments {
                let _ =
                    writeln!(s, "| {} | {} | {} | {} | {} |", md_cell(&a.agent), i.metric, fmt_opt(i.estimate), i.units, fmt_opt(i.share));
            }
        }
    }
    let _ = writeln!(s, "\n## Task families\n");
    if b.families.is_empty() {
        let _ = writeln!(s, "No run of the period declares a task family (`RunStarted.task_family`).");
    } else {
        let _ = writeln!(
            s,
            "Each family apart (seed 001's report by paradigm): a regression in one is not averaged away. Passed and failed are verdicts \
             (a verifier's, a human's or a judge's); the pass rate, with its 95 % Wilson interval, is over the judged runs. Runs only the agent \
             itself called done are counted apart (self-reported: successes of runs), never as passes. Primary instruments as ratios of sums \
             over the family's runs.\n"
        );
        let _ = writeln!(
            s,
            "| Family | Runs | Passed | Failed | Pass rate [interval] | Self-reported | Mean latency (ms) | Mean tokens | Total tokens | Primary instruments |\n|---|---|---|---|---|---|---|---|---|---|"
        );
        for f in &b.families {
            let c = &f.counts;
            let ci = f.pass_rate_ci.map(|(lo, hi)| format!(" [{lo:.4}, {hi:.4}]")).unwrap_or_default();
            let instruments: Vec<String> = f.instruments.iter().map(|(m, e, n)| format!("{m} {} ({n})", fmt_opt(*e))).collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {}{ci} | {} | {} | {} | {:.0} | {} |",
                md_cell(&f.family),
                c.runs,
                c.passed,
                c.failed,
                fmt_opt(c.pass_rate),
                if c.self_reported == 0 { "—".to_string() } else { format!("{} of {}", c.self_reported_successes, c.self_reported) },
                fmt_whole(c.mean_latency_ms),
                fmt_whole(c.mean_tokens),
                c.total_tokens,
                if instruments.is_empty() { "—".to_string() } else { instruments.join(", ") }
            );
        }
        for f in &b.families {
            let worst: Vec<String> = f
                .tasks
                .iter()
                .filter(|(_, c)| c.failed > 0)
                .take(5)
                .map(|(t, c)| format!("`{}` {} of {} judged failed", md_cell(t), c.failed, c.judged))
                .collect();
            if !worst.is_empty() {
                let _ = writeln!(s, "\n- {}: most failures in {}.", md_cell(&f.family), worst.join(", "));
            }
        }
    }
    let rep = &b.reproducibility;
    let _ = writeln!(
        s,
        "\n## Reproducibility\n\n{} of {} runs started in the period record all five artefacts a trajectory is reproduced from \
         (seed 000 §IV-B2; a run without its own agent configuration counts the system's configuration hash).\n",
        rep.reproducible_runs, rep.runs
    );
    let _ = writeln!(s, "| Artefact | Runs recording it | Missing | Distinct values | Most frequent (runs) |\n|---|---|---|---|---|");
    for a in &rep.artefacts {
        let values: Vec<String> = a.values.iter().map(|v| format!("`{}` ({})", md_cell(&v.value), v.runs)).collect();
        let more = if a.distinct as usize > a.values.len() {
            format!(", … {} more", a.distinct as usize - a.values.len())
        } else {
            String::new()
        };
        let _ = writeln!(s, "| {} | {} | {} | {} | {}{more} |", a.name, a.recorded, rep.runs - a.recorded, a.distinct, values.join(", "));
    }
    let _ = writeln!(
        s,
        "\n## Inputs\n\nLake `{}`: {} observations, {} trajectory events ({} duplicate observations dropped).\n",
        lake.display(),
        b.observations.rows,
        b.trajectory_events.rows,
        b.duplicates
    );
    let _ = writeln!(s, "| Table | Topic | Partition | First offset | Last offset | Rows |\n|---|---|---|---|---|---|");
    for (t, input) in [("observations", &b.observations), ("trajectory_events", &b.trajectory_events)] {
        for o in &input.offsets {
            let _ = writeln!(s, "| {t} | {} | {} | {} | {} | {} |", o.topic, o.partition, o.first, o.last, o.rows);
        }
    }
    let _ = writeln!(
        s,
        "\nFiles: {} observation files, {} trajectory-event files (listed in `profile.json`).",
        b.observations.files.len(),
        b.trajectory_events.files.len()
    );
    let _ = writeln!(s, "\n## Crosswalk\n\n| Subject | EU AI Act | GPAI Code of Practice | NIST AI RMF | ISO/IEC |\n|---|---|---|---|---|");
    for c in CROSSWALK {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            c.subject,
            if c.eu_ai_act.is_empty() { "—".to_string() } else { c.eu_ai_act.join("; ") },
            if c.code_of_practice.is_empty() { "—" } else { c.code_of_practice },
            c.nist_ai_rmf.join(", "),
            if c.iso_iec.is_empty() { "—".to_string() } else { c.iso_iec.join("; ") }
        );
    }
    s
}

/// One dimension of the coverage matrix of a profile: the instruments that apply to the
/// system's type, split by what the period holds, and those that do not apply.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CoverageRow {
    pub dimension: &'static str,
    /// Applicable and banded.
    pub measured: Vec<String>,
    /// Applicable, measured, without a band: (metric, why).
    pub not_applicable: Vec<(String, String)>,
    /// Applicable, with no observation in the period.
    pub not_observed: Vec<String>,
    /// Not applicable to the system's type (seed 000 Table IV, e.g. the action-loop rows of
    /// an LLM).
    pub outside_type: Vec<String>,
}

/// The coverage matrix of a profile (seed 000 Table IV) for its system's declared type.
pub fn coverage(b: &Built) -> Vec<CoverageRow> {
    let metrics = &b.record.metrics;
    octant_core::catalogue::coverage(b.system_type)
        .into_iter()
        .map(|c| {
            let mut row = CoverageRow {
                dimension: c.dimension.as_str(),
                measured: Vec::new(),
                not_applicable: Vec::new(),
                not_observed: Vec::new(),
                outside_type: c.not_applicable.iter().map(|m| m.id.to_string()).collect(),
            };
            for m in &c.applicable {
                let mine: Vec<_> = metrics.iter().filter(|x| x.metric == m.id).collect();
                if mine.is_empty() {
                    row.not_observed.push(m.id.to_string());
                }
                for x in mine {
                    let name = match &x.benchmark {
                        Some(bm) => format!("{} @ {bm}", x.metric),
                        None => x.metric.clone(),
                    };
                    match x.band {
                        Some(_) => row.measured.push(name),
                        None => row.not_applicable.push((name, metric_na(x))),
                    }
                }
            }
            row
        })
        .collect()
}

/// Recorded text inside a Markdown table cell: no cell break, no line break, no backtick.
fn md_cell(v: &str) -> String {
    v.chars().map(|c| if matches!(c, '|' | '`' | '\n' | '\r') { ' ' } else { c }).collect()
}

/// Escapes text for HTML and XML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// The SVG chart: one row per dimension, a bar to the band and a whisker over its interval;
/// N/A rows say so; capped rows are marked.
pub fn svg_chart(dims: &[DimensionBand]) -> String {
    let (left, width, row, top) = (130.0, 400.0, 34.0, 30.0);
    let x = |band: f64| left + band / 4.0 * width;
    let height = top + row * dims.len() as f64 + 20.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="bands" width="{}" height="{height}" viewBox="0 0 {} {height}" role="img" aria-label="Dimension bands with intervals">"#,
        left + width + 160.0,
        left + width + 160.0
    );
    for b in 0..=4 {
        let _ = write!(
            s,
            r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#ccc"/><text x="{0}" y="{3}" text-anchor="middle" font-size="12">{b}</text>"##,
            x(b as f64),
            top - 8.0,
            height - 20.0,
            top - 12.0
        );
    }
    for (i, d) in dims.iter().enumerate() {
        let y = top + row * i as f64;
        let _ = write!(
            s,
            r#"<g class="dimension" data-dimension="{}" data-band="{}">"#,
            esc(&d.dimension),
            d.band.map(|b| b.to_string()).unwrap_or_else(|| "na".into())
        );
        let _ = write!(s, r#"<text x="{}" y="{}" text-anchor="end" font-size="13">{}</text>"#, left - 8.0, y + 20.0, esc(&d.dimension));
        match d.band {
            None => {
                let _ = write!(
                    s,
                    r##"<text x="{}" y="{}" font-size="12" fill="#888">N/A: {}</text>"##,
                    left + 6.0,
                    y + 20.0,
                    esc(d.na_reason.as_deref().unwrap_or("no evidence"))
                );
            }
            Some(b) => {
                let color = ["#b2182b", "#ef8a62", "#fddbc7", "#67a9cf", "#2166ac"][b.clamp(0, 4) as usize];
                let w = (x(b as f64) - left).max(3.0);
                let _ = write!(
                    s,
                    r#"<rect class="band" x="{left}" y="{}" width="{w}" height="18" fill="{color}"><title>band {b} ({})</title></rect>"#,
                    y + 6.0,
                    octant_core::band_reading(i64::from(b))
                );
                if let (Some(lo), Some(hi)) = (d.band_low, d.band_high) {
                    let (x1, x2, ym) = (x(lo as f64), x(hi as f64), y + 15.0);
                    let _ = write!(
                        s,
                        r##"<g class="interval" data-low="{lo}" data-high="{hi}"><line x1="{x1}" y1="{ym}" x2="{x2}" y2="{ym}" stroke="#000" stroke-width="2"/><line x1="{x1}" y1="{}" x2="{x1}" y2="{}" stroke="#000"/><line x1="{x2}" y1="{}" x2="{x2}" y2="{}" stroke="#000"/></g>"##,
                        ym - 6.0,
                        ym + 6.0,
                        ym - 6.0,
                        ym + 6.0
                    );
                }
                let label = if d.capped_by.is_empty() { format!("{b}") } else { format!("{b} capped ({})", d.capped_by.join(", ")) };
                let _ = write!(s, r#"<text x="{}" y="{}" font-size="12">{}</text>"#, left + width + 8.0, y + 20.0, esc(&label));
            }
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}

/// `profile.html`: the Markdown's content as a page, with the chart.
pub fn to_html(b: &Built, lake: &Path) -> String {
    let r = &b.record;
    let title = format!("Octant profile: {} {} ({}, {})", r.system_id, r.system_version, r.source.as_str(), r.period);
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>{}</title><style>body{{font-family:sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}.unsuitable{{color:#b2182b;font-weight:bold}}</style></head><body>",
        esc(&title)
    );
    let _ = write!(s, "<h1>{}</h1>", esc(&title));
    let _ = write!(
        s,
        "<p>Period {} to {} (UTC). Method {}, level {}, {} replicates, seed {}, catalogue {}.</p>",
        esc(&rfc3339(r.period_start)),
        esc(&rfc3339(r.period_end)),
        esc(&r.method),
        r.level,
        r.replicates,
        r.seed,
        esc(&r.catalogue_version)
    );
    if r.unsuitable {
        s.push_str(
            "<p class=\"unsuitable\" id=\"unsuitable\">UNSUITABLE for deployment: a veto with that effect is breached or confirmed.</p>",
        );
    }
    s.push_str("<h2>Dimensions</h2>");
    s.push_str(&svg_chart(&r.dimensions));
    s.push_str("<table id=\"dimensions\"><tr><th>Dimension</th><th>Band [interval]</th><th>Instruments</th></tr>");
    for d in &r.dimensions {
        let _ =
            write!(s, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&d.dimension), esc(&band_text(d)), esc(&d.instruments.join(", ")));
    }
    let _ = write!(s, "</table><p class=\"legend\">Bands read {}.</p>", esc(&octant_core::band_legend()));
    s.push_str("<h2>Vetoes</h2><table id=\"vetoes\"><tr><th>Rule</th><th>Metric</th><th>State</th><th>Estimate</th><th>Interval</th><th>Threshold</th></tr>");
    for v in &b.dimension_profile.vetoes {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>[{}, {}]</td><td>{}</td></tr>",
            esc(&v.rule),
            esc(&v.metric),
            v.benchmark.as_deref().map(|x| format!(" @ {}", esc(x))).unwrap_or_default(),
            esc(&v.state),
            fmt_opt(v.estimate),
            fmt_opt(v.ci_low),
            fmt_opt(v.ci_high),
            v.threshold
        );
    }
    s.push_str("</table><h2>Metrics</h2><table id=\"metrics\"><tr><th>Metric</th><th>Dimension</th><th>Benchmark</th><th>Units</th><th>Estimate</th><th>Interval</th><th>Band</th><th>N/A</th></tr>");
    for m in &r.metrics {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>[{}, {}]</td><td>{}</td><td>{}</td></tr>",
            esc(&m.metric),
            esc(&m.dimension),
            esc(m.benchmark.as_deref().unwrap_or("")),
            m.units,
            fmt_opt(m.estimate),
            fmt_opt(m.ci_low),
            fmt_opt(m.ci_high),
            esc(&metric_band(m.band)),
            esc(&metric_na(m))
        );
    }
    s.push_str("</table>");
    // The rest of the Markdown (gate, agreement, inputs, crosswalk) as preformatted text.
    let md = to_markdown(b, lake);
    let rest = md.find("## Gate and Efficacy Index").map(|i| &md[i..]).unwrap_or("");
    let _ = write!(s, "<h2>Gate, agreement, inputs and crosswalk</h2><pre id=\"details\">{}</pre>", esc(rest));
    s.push_str("</body></html>\n");
    s
}

/// The last line of `profile.md` and `profile.html`: which record the file belongs to (the
/// three files of a package always name the same one).
pub fn package_marker(b: &Built) -> String {
    format!("<!-- octant-profile {} generated_at {} -->\n", b.record.profile_id, b.record.generated_at)
}

/// Writes the three files of a package; returns its directory.
///
/// A package is replaced whole or not at all, also when the process is killed: the files are
/// written into a fresh directory beside it, which then takes the package's place in one
/// `renameat2(RENAME_EXCHANGE)` (Linux; elsewhere the files are renamed one by one, each
/// whole); the previous package, left under the fresh directory's name, is removed after.
/// Directories left by a kill (`.<period>.new-*`) are removed by [`remove_leftovers`].
pub fn write_package(root: &Path, b: &Built, cfg: &ProfilerConfig, lake: &Path) -> std::io::Result<PathBuf> {
    let dir = package_dir(root, b);
    let parent = dir.parent().expect("a package directory has a parent");
    std::fs::create_dir_all(parent)?;
    let mut record = b.clone();
    record.record.evidence_uri = Some(dir.display().to_string());
    let json = serde_json::to_vec_pretty(&to_json(&record, cfg, lake)).map_err(std::io::Error::other)?;
    let marker = package_marker(&record);
    let fresh = parent.join(format!(".{}.new-{}", record.record.period, std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    std::fs::create_dir_all(&fresh)?;
    for (name, bytes) in [
        ("profile.json", json),
        ("profile.md", (to_markdown(&record, lake) + &marker).into_bytes()),
        ("profile.html", (to_html(&record, lake) + &marker).into_bytes()),
    ] {
        std::fs::write(fresh.join(name), bytes)?;
    }
    if !dir.exists() {
        std::fs::rename(&fresh, &dir)?;
    } else if exchange(&fresh, &dir).is_err() {
        for name in ["profile.json", "profile.md", "profile.html"] {
            std::fs::rename(fresh.join(name), dir.join(name))?;
        }
    }
    let _ = std::fs::remove_dir_all(&fresh);
    Ok(dir)
}

/// Swaps two directories atomically.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: two valid NUL-terminated paths; renameat2 reads them and nothing else.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other("no atomic exchange on this platform"))
}

/// Removes what a killed profiler left in the evidence tree (`.<period>.new-*` directories).
pub fn remove_leftovers(root: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    let Ok(entries) = std::fs::read_dir(root) else { return Ok(0) };
    for e in entries {
        let p = e?.path();
        if !p.is_dir() {
            continue;
        }
        if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.') && n.contains(".new-")) {
            std::fs::remove_dir_all(&p)?;
            removed += 1;
        } else {
            removed += remove_leftovers(&p)?;
        }
    }
    Ok(removed)
}
