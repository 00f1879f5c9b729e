//! Evidence packages: `profile.json` (machine readable), `profile.md` (for a review) and
//! `profile.html` (a self-contained page with an SVG chart of the eight bands and their
//! intervals), with the crosswalk of the dimensions to governance duties.
//!
//! The HTML is well-formed XML (every element closed, text escaped), so any XML parser reads
//! it as well as a browser does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use octant_contracts::DimensionBand;
use octant_core::catalogue::{CATALOGUE, CATALOGUE_VERSION};
use octant_lake::lake::escape;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::ReportConfig;
use crate::profile::Built;
pub(crate) use crate::render::rfc3339;

mod html;
mod markdown;

pub use html::{svg_chart, to_html};
pub use markdown::to_markdown;

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

/// The package directory of a profile under `root`.
pub fn package_dir(root: &Path, b: &Built) -> PathBuf {
    let r = &b.record;
    root.join(escape(&r.system_id)).join(escape(&r.system_version)).join(r.source.as_str()).join(&r.period)
}

/// `profile.json`.
pub fn to_json(b: &Built, cfg: &ReportConfig, lake: &Path) -> Value {
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
        "reruns": b.reruns,
        "meta_evaluation": b.meta,
        "inputs": {
            "lake": lake.display().to_string(),
            "lake_versions": b.lake_versions,
            "observations": b.observations,
            "trajectory_events": b.trajectory_events,
            "duplicate_observations_dropped": b.duplicates,
        },
        "crosswalk": CROSSWALK,
        "profile": r,
    })
}

pub(crate) fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.4}")).unwrap_or_else(|| "—".into())
}

/// Milliseconds and token counts: whole numbers.
pub(crate) fn fmt_whole(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.0}")).unwrap_or_else(|| "—".into())
}

/// "196 (12 more)", "196 (enough)", or "—" when the rule does not apply.
pub(crate) fn units_needed_text(g: &crate::profile::GateLine) -> String {
    match g.units_needed {
        None => "—".into(),
        Some(n) if n <= g.units => format!("{n} (enough)"),
        Some(n) => format!("{n} ({} more)", n - g.units),
    }
}

/// A metric's N/A reason; for too little evidence, how many more units it needs before it
/// can be banded ("insufficient_evidence: 12 more units (18 of 30)").
pub(crate) fn metric_na(m: &octant_contracts::ProfileMetric) -> String {
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
pub(crate) fn metric_band(band: Option<i32>) -> String {
    band.map(|b| format!("{b} {}", octant_core::band_reading(i64::from(b)))).unwrap_or_default()
}

pub(crate) fn band_text(d: &DimensionBand) -> String {
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
pub fn write_package(root: &Path, b: &Built, cfg: &ReportConfig, lake: &Path) -> std::io::Result<PathBuf> {
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
/// Removes evidence packages for an erasure (`octant lake erase`): every package of `system`,
/// or every package with a file that mentions `needle` (a run id). Returns the package
/// directories removed; a profile of their periods built again writes them anew.
pub fn forget(root: &Path, system: Option<&str>, needle: Option<&str>) -> std::io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    if let Some(s) = system {
        let dir = root.join(escape(s));
        if dir.is_dir() {
            std::fs::remove_dir_all(&dir)?;
            removed.push(dir);
        }
    }
    if let Some(needle) = needle.filter(|n| !n.is_empty()) {
        forget_mentions(root, needle.as_bytes(), &mut removed)?;
    }
    Ok(removed)
}

/// A package is a directory that holds files; removed if one of them contains `needle`.
fn forget_mentions(dir: &Path, needle: &[u8], removed: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let (mut dirs, mut mentions) = (Vec::new(), false);
    for e in entries {
        let p = e?.path();
        if p.is_dir() {
            dirs.push(p);
        } else if !mentions {
            mentions = std::fs::read(&p)?.windows(needle.len()).any(|w| w == needle);
        }
    }
    if mentions {
        std::fs::remove_dir_all(dir)?;
        removed.push(dir.to_path_buf());
        return Ok(());
    }
    for d in dirs {
        forget_mentions(&d, needle, removed)?;
    }
    Ok(())
}

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
