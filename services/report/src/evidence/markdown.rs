//! `profile.md`: the package for a review, section by section.

use std::fmt::Write as _;
use std::path::Path;

use super::{CROSSWALK, band_text, coverage, fmt_opt, fmt_whole, metric_band, metric_na, rfc3339, units_needed_text};
use crate::profile::Built;
use crate::render::md_cell;

/// `profile.md`.
pub fn to_markdown(b: &Built, lake: &Path) -> String {
    let mut s = String::new();
    heading(&mut s, b);
    dimensions(&mut s, b);
    metrics(&mut s, b);
    suites(&mut s, b);
    gate(&mut s, b);
    if let Some(c) = &b.release {
        let _ = writeln!(s, "\n{}", crate::compare::to_markdown(c).trim_end());
    }
    if let Some(c) = &b.reruns {
        let _ = writeln!(s, "\n{}", crate::reruns::to_markdown(c).trim_end());
    }
    success(&mut s, b);
    let _ = writeln!(s, "\n{}", crate::meta_evaluation::to_markdown(&b.meta).trim_end());
    coverage_matrix(&mut s, b);
    agents(&mut s, b);
    families(&mut s, b);
    reproducibility(&mut s, b);
    inputs(&mut s, b, lake);
    crosswalk(&mut s);
    s
}

/// Title, period, method and the unsuitability notice.
fn heading(s: &mut String, b: &Built) {
    let r = &b.record;
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
}

/// The eight bands and the vetoes.
fn dimensions(s: &mut String, b: &Built) {
    let r = &b.record;
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
}

/// Every metric with its interval, band and N/A reason.
fn metrics(s: &mut String, b: &Built) {
    let r = &b.record;
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
}

/// The stress and adversarial suites, reported apart (seed 002 §5: gated for assurance only).
fn suites(s: &mut String, b: &Built) {
    if b.suites.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Suites (reported apart, assurance only)\n\nThese benchmarks are declared suites (`[evaluation.profile.suites]`): their metrics above keep their bands and veto states, and enter no dimension band, cap or flag.\n\n| Suite | Kind | Metric | Estimate | Interval | Band | Veto |\n|---|---|---|---|---|---|---|"
    );
    for m in b.record.metrics.iter().filter(|m| m.benchmark.as_ref().is_some_and(|x| b.suites.contains_key(x))) {
        let bench = m.benchmark.as_deref().unwrap_or_default();
        let _ = writeln!(
            s,
            "| {bench} | {:?} | {} | {} | [{}, {}] | {} | {} |",
            b.suites[bench],
            m.metric,
            fmt_opt(m.estimate),
            fmt_opt(m.ci_low),
            fmt_opt(m.ci_high),
            metric_band(m.band),
            m.veto_state.as_deref().unwrap_or("—"),
        );
    }
}

/// The two-tier gate and the Efficacy Index.
fn gate(s: &mut String, b: &Built) {
    let r = &b.record;
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
}

/// Who judged success, and judge–human agreement.
fn success(s: &mut String, b: &Built) {
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
}

/// The coverage matrix of the system's type.
fn coverage_matrix(s: &mut String, b: &Built) {
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
}

/// Per agent of a multi-agent system.
fn agents(s: &mut String, b: &Built) {
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
}

/// Task families, each apart.
fn families(s: &mut String, b: &Built) {
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
}

/// The reproducibility artefacts the runs recorded.
fn reproducibility(s: &mut String, b: &Built) {
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
}

/// The lake rows read.
fn inputs(s: &mut String, b: &Built, lake: &Path) {
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
}

/// The governance crosswalk.
fn crosswalk(s: &mut String) {
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
}
