//! Configuration freeze and harness parity of a release comparison (seed 002 §5: "σ is
//! recorded and held fixed … when two models are compared, everything except M is
//! identical").
//!
//! σ here is what a run records of its configuration: the system's `config_hash` and the
//! run's reproducibility artefacts (`agent_config`, `decoding`, `environment_version` — the
//! harness, per benchmark — and `task_spec`, per task). Before any test, [`check`] reads them
//! from the lake's run starts of both versions, one row per run (the parts of a resumed run
//! give the value recorded; an empty string is no value), and refuses the comparison, naming
//! each field, when
//! - a field is not frozen: one version's runs recorded more than one value (per benchmark for
//!   the harness, per task for its spec) — a run that recorded nothing counts as a value of
//!   its own, so a version half-recorded is not frozen either;
//! - a field other than the compared component ([`crate::compare::Release::compared`],
//!   default the agent configuration and its hash) differs between the versions (the harness
//!   and the spec on a benchmark or task both ran).
//!
//! A field neither version recorded, or (harness, spec) recorded on no benchmark or task both
//! versions ran, cannot be checked: it is listed as not verified, never taken as equal or as
//! different. The per-run seed is not checked: it differs by design.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use serde::Serialize;

use crate::compare::Release;
use crate::sql::{Period, col, lit, period_filter};

/// The fields of σ checked, in report order (`task_spec` is per task).
pub const FIELDS: [&str; 5] = ["config_hash", "agent_config", "decoding", "environment_version", "task_spec"];

/// What a run that recorded nothing of a field shows.
const UNRECORDED: &str = "(not recorded)";

/// Longest value shown in a difference (a configuration can be long).
const SHOWN: usize = 120;

/// The outcome of the check: the comparison goes on only without differences.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Parity {
    /// The fields that may differ (the compared component).
    pub compared: Vec<String>,
    /// Fields recorded, frozen within each version and, outside the compared component, equal.
    pub checked: Vec<String>,
    /// Fields parity could not be verified on: neither version's runs recorded them, or (the
    /// harness, the task spec) not on a benchmark or task both ran.
    pub unverified: Vec<String>,
    pub differences: Vec<Difference>,
}

/// One field that refuses the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub field: String,
    /// Why: not frozen in a version, or differs between them.
    pub why: String,
    /// The values each version's runs recorded (for `task_spec`: `task: spec`, the first few).
    pub baseline: Vec<String>,
    pub candidate: Vec<String>,
}

impl Parity {
    pub fn refused(&self) -> bool {
        !self.differences.is_empty()
    }

    /// One line naming the differing fields, for the decision.
    pub fn refusal(&self) -> String {
        let fields: Vec<&str> = self.differences.iter().map(|d| d.field.as_str()).collect();
        format!("refused: {} beyond the compared component ({})", fields.join(", "), self.compared.join(", "))
    }
}

/// One run's σ: (version, task, benchmark, the values of [`FIELDS`]).
pub type Sigma = (String, String, String, [Option<String>; 5]);

/// What a field's values are compared per: the task (its spec), the benchmark (the harness),
/// or nothing ("").
fn key<'a>(field: &str, run: &'a Sigma) -> &'a str {
    match field {
        "task_spec" => &run.1,
        "environment_version" => &run.2,
        _ => "",
    }
}

/// What a field is compared per, in words.
fn per(field: &str) -> &'static str {
    match field {
        "task_spec" => "task",
        "environment_version" => "benchmark",
        _ => "",
    }
}

/// Reads σ of both versions' runs in `period` and checks it (module docs).
pub async fn check(ctx: &SessionContext, release: &Release, period: &Period) -> Result<Parity> {
    let source = crate::sql::lake_source(release.source);
    let repro = |f: &str| format!("NULLIF(get_field(get_field(run_started, 'reproducibility'), {}), '')", lit(f));
    // One row per run (a resumed run's parts each start: the value recorded stands).
    let sql = format!(
        "SELECT max(v) AS v, max(task) AS task, max(bench) AS bench, max(config_hash) AS config_hash, \
                max(agent_config) AS agent_config, max(decoding) AS decoding, \
                max(environment_version) AS environment_version, max(task_spec) AS task_spec \
         FROM (SELECT run_id, get_field(system, 'version') AS v, coalesce(get_field(run_started, 'task_id'), run_id) AS task, \
                      coalesce(get_field(get_field(run_started, 'benchmark'), 'id'), '') AS bench, \
                      NULLIF(get_field(system, 'config_hash'), '') AS config_hash, {} AS agent_config, {} AS decoding, \
                      {} AS environment_version, {} AS task_spec \
               FROM trajectory_events \
               WHERE kind = 'RUN_STARTED' AND get_field(run_started, 'rerun_of') IS NULL AND get_field(system, 'version') IN ({}, {}) AND source = {} AND {}) \
         GROUP BY run_id",
        repro("agent_config"),
        repro("decoding"),
        repro("environment_version"),
        repro("task_spec"),
        lit(&release.baseline),
        lit(&release.candidate),
        lit(source),
        period_filter(period, "event_time", Some(&release.system)),
    );
    let mut runs: Vec<Sigma> = Vec::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let cols = ["v", "task", "bench", FIELDS[0], FIELDS[1], FIELDS[2], FIELDS[3], FIELDS[4]]
            .map(|n| col(&b, n, &DataType::Utf8).map(|c| c.as_string::<i32>().clone()));
        let [v, task, bench, f0, f1, f2, f3, f4] = cols;
        let (v, task, bench) = (v?, task?, bench?);
        let fields = [f0?, f1?, f2?, f3?, f4?];
        for i in 0..b.num_rows() {
            if v.is_null(i) {
                continue;
            }
            let value = |c: &arrow::array::StringArray| (!c.is_null(i)).then(|| c.value(i).to_string());
            let text = |c: &arrow::array::StringArray| value(c).unwrap_or_default();
            runs.push((v.value(i).to_string(), text(&task), text(&bench), [0, 1, 2, 3, 4].map(|k| value(&fields[k]))));
        }
    }
    Ok(judge(release, &runs))
}

/// Per version: key → the values its runs recorded.
type Side<'a> = BTreeMap<&'a str, BTreeSet<Option<&'a str>>>;

/// The check on the runs' σ (the pure part of [`check`]).
pub fn judge(release: &Release, runs: &[Sigma]) -> Parity {
    let mut p = Parity { compared: release.compared.clone(), ..Parity::default() };
    for (k, field) in FIELDS.iter().enumerate() {
        let mut sides: [Side; 2] = Default::default();
        for run in runs {
            let side = if run.0 == release.baseline { 0 } else { 1 };
            sides[side].entry(key(field, run)).or_default().insert(run.3[k].as_deref());
        }
        if sides.iter().flat_map(|s| s.values().flatten()).all(Option::is_none) {
            p.unverified.push(field.to_string());
            continue;
        }
        let shown = |side: &Side, only: &dyn Fn(&str) -> bool| -> Vec<String> {
            side.iter()
                .filter(|(t, _)| only(t))
                .flat_map(|(t, vs)| vs.iter().map(move |v| (t, v.unwrap_or(UNRECORDED))))
                .take(5)
                .map(|(t, v)| {
                    let v = if v.chars().count() > SHOWN { format!("{}…", v.chars().take(SHOWN).collect::<String>()) } else { v.into() };
                    if t.is_empty() { v } else { format!("{t}: {v}") }
                })
                .collect()
        };
        fn many<'a>(s: &Side<'a>) -> BTreeSet<&'a str> {
            s.iter().filter(|(_, vs)| vs.len() > 1).map(|(t, _)| *t).collect()
        }
        let (b, c) = (many(&sides[0]), many(&sides[1]));
        if !b.is_empty() || !c.is_empty() {
            let who: Vec<&str> = [(&b, "baseline"), (&c, "candidate")].iter().filter(|(m, _)| !m.is_empty()).map(|(_, n)| *n).collect();
            let on = if per(field).is_empty() { String::new() } else { format!(" on a {}", per(field)) };
            p.differences.push(Difference {
                field: field.to_string(),
                why: format!("not frozen: the {} ran under more than one value{on}", who.join(" and the ")),
                baseline: shown(&sides[0], &|t| b.contains(t)),
                candidate: shown(&sides[1], &|t| c.contains(t)),
            });
            continue;
        }
        if release.compared.iter().any(|x| x == field) {
            p.checked.push(field.to_string());
            continue;
        }
        // Frozen: one value per key. Compared on the keys both versions have; with none in
        // common, parity cannot be verified.
        if !sides[0].keys().any(|t| sides[1].contains_key(t)) {
            p.unverified.push(field.to_string());
            continue;
        }
        let differing: BTreeSet<&str> =
            sides[0].iter().filter(|(t, vs)| sides[1].get(*t).is_some_and(|ws| ws != *vs)).map(|(t, _)| *t).collect();
        if differing.is_empty() {
            p.checked.push(field.to_string());
        } else {
            let on = if per(field).is_empty() { String::new() } else { format!(" on {} of the {}s both ran", differing.len(), per(field)) };
            p.differences.push(Difference {
                field: field.to_string(),
                why: format!("differs between the versions{on}"),
                baseline: shown(&sides[0], &|t| differing.contains(t)),
                candidate: shown(&sides[1], &|t| differing.contains(t)),
            });
        }
    }
    p
}

/// The check as Markdown lines (the release decision's section).
pub fn to_markdown(p: &Parity) -> String {
    let mut s = format!(
        "Configuration freeze and harness parity (seed 002 §5; the compared component: {}): checked {}",
        list(&p.compared),
        list(&p.checked)
    );
    if !p.unverified.is_empty() {
        s.push_str(&format!(
            "; **not verified** (no run of either version recorded them, or not on a benchmark or task both ran): {}",
            list(&p.unverified)
        ));
    }
    s.push_str(".\n\n");
    if p.refused() {
        s.push_str("| field | why | baseline | candidate |\n|---|---|---|---|\n");
        for d in &p.differences {
            s.push_str(&format!("| {} | {} | {} | {} |\n", d.field, d.why, cell(&d.baseline), cell(&d.candidate)));
        }
        s.push('\n');
    }
    s
}

/// The check as terminal lines.
pub fn to_table(p: &Parity) -> String {
    let mut s = format!("parity: checked {}; not verified {}\n", list(&p.checked), list(&p.unverified));
    for d in &p.differences {
        s.push_str(&format!(
            "  {}: {}\n    baseline:  {}\n    candidate: {}\n",
            d.field,
            d.why,
            d.baseline.join(" | "),
            d.candidate.join(" | ")
        ));
    }
    s
}

fn list(v: &[String]) -> String {
    if v.is_empty() { "none".into() } else { v.join(", ") }
}

fn cell(v: &[String]) -> String {
    v.iter().map(|x| format!("`{}`", x.replace('|', "\\|").replace('`', "'"))).collect::<Vec<_>>().join("<br>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(compared: &[&str]) -> Release {
        Release {
            system: "s".into(),
            baseline: "1".into(),
            candidate: "2".into(),
            source: octant_contracts::Source::Evaluation,
            compared: compared.iter().map(|c| c.to_string()).collect(),
        }
    }

    /// A run's σ: version, task (benchmark "suite"), then config hash, agent config,
    /// decoding, environment, spec.
    fn run(v: &str, task: &str, fields: [Option<&str>; 5]) -> Sigma {
        (v.into(), task.into(), "suite".into(), fields.map(|f| f.map(str::to_string)))
    }

    fn fleet(candidate_decoding: &str) -> Vec<Sigma> {
        let mut runs = Vec::new();
        for t in ["t1", "t2"] {
            let spec = format!("{t}@v2");
            runs.push(run("1", t, [Some("h1"), Some("model-a"), Some("greedy"), Some("env 1.2"), Some(&spec)]));
            runs.push(run("2", t, [Some("h2"), Some("model-b"), Some(candidate_decoding), Some("env 1.2"), Some(&spec)]));
        }
        runs
    }

    #[test]
    fn only_the_compared_component_may_differ() {
        let same = judge(&release(&["agent_config", "config_hash"]), &fleet("greedy"));
        assert!(!same.refused(), "{same:?}");
        assert_eq!(same.checked, FIELDS.map(String::from));
        let sampled = judge(&release(&["agent_config", "config_hash"]), &fleet("t=0.7"));
        assert_eq!(sampled.differences.len(), 1, "{sampled:?}");
        let d = &sampled.differences[0];
        assert_eq!(
            (d.field.as_str(), d.baseline.as_slice(), d.candidate.as_slice()),
            ("decoding", &["greedy".to_string()][..], &["t=0.7".to_string()][..])
        );
        assert_eq!(sampled.refusal(), "refused: decoding beyond the compared component (agent_config, config_hash)");
        // Declared as what is compared, it may differ; the model then may not.
        let decoding = judge(&release(&["decoding"]), &fleet("t=0.7"));
        let fields: Vec<&str> = decoding.differences.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["config_hash", "agent_config"]);
    }

    #[test]
    fn a_field_not_held_fixed_or_recorded_on_one_side_refuses() {
        let mut runs = fleet("greedy");
        runs.push(run("2", "t3", [Some("h2"), Some("model-b"), Some("t=0.9"), Some("env 1.2"), Some("t3@v2")]));
        let p = judge(&release(&["agent_config", "config_hash"]), &runs);
        assert_eq!(p.differences.len(), 1);
        assert_eq!(p.differences[0].why, "not frozen: the candidate ran under more than one value");
        assert_eq!(p.differences[0].candidate, ["greedy", "t=0.9"]);
        // A harness recorded by one version only: not parity.
        let mut runs = fleet("greedy");
        for r in runs.iter_mut().filter(|r| r.0 == "2") {
            r.3[3] = None;
        }
        let p = judge(&release(&["agent_config", "config_hash"]), &runs);
        assert_eq!(p.differences[0].field, "environment_version");
        assert_eq!(p.differences[0].candidate, [format!("suite: {UNRECORDED}")]);
    }

    #[test]
    fn task_specs_are_compared_per_task_and_nothing_recorded_is_unverified() {
        let mut runs = fleet("greedy");
        runs[3].3[4] = Some("t2@v3".into());
        let p = judge(&release(&["agent_config", "config_hash"]), &runs);
        assert_eq!(p.differences[0].field, "task_spec");
        assert_eq!(p.differences[0].why, "differs between the versions on 1 of the tasks both ran");
        assert_eq!(
            (p.differences[0].baseline.as_slice(), p.differences[0].candidate.as_slice()),
            (&["t2: t2@v2".to_string()][..], &["t2: t2@v3".to_string()][..])
        );
        // A task only one version ran is not a difference.
        let mut runs = fleet("greedy");
        runs.push(run("2", "t9", [Some("h2"), Some("model-b"), Some("greedy"), Some("env 1.2"), Some("t9@v1")]));
        assert!(!judge(&release(&["agent_config", "config_hash"]), &runs).refused());
        // Production traffic: no harness, no task spec, no agent configuration recorded.
        let prod: Vec<Sigma> = ["1", "2"].iter().map(|v| run(v, "r", [Some("cfg"), None, Some("greedy"), None, None])).collect();
        let p = judge(&release(&["agent_config", "config_hash"]), &prod);
        assert!(!p.refused());
        assert_eq!(p.unverified, ["agent_config", "environment_version", "task_spec"]);
        assert!(to_markdown(&p).contains("**not verified**"));
        // Specs recorded, but on no task both versions ran: not verified, never "checked".
        let apart: Vec<Sigma> = [("1", "a"), ("2", "b")].iter().map(|(v, t)| run(v, t, [None, None, None, None, Some("spec")])).collect();
        assert_eq!(
            judge(&release(&[]), &apart).unverified,
            ["config_hash", "agent_config", "decoding", "environment_version", "task_spec"]
        );
        // A version evaluated on two benchmarks has a harness per benchmark: frozen there, and
        // compared per benchmark.
        let mut two = fleet("greedy");
        for v in ["1", "2"] {
            let mut r =
                run(v, "x1", [Some(if v == "1" { "h1" } else { "h2" }), Some("model"), Some("greedy"), Some("other-env 3"), Some("x1@v1")]);
            r.2 = "other".into();
            two.push(r);
        }
        let p = judge(&release(&["agent_config", "config_hash"]), &two);
        assert!(p.differences.iter().all(|d| d.field != "environment_version"), "{p:?}");
        two.last_mut().unwrap().3[3] = Some("other-env 4".into());
        let p = judge(&release(&["agent_config", "config_hash"]), &two);
        let d = p.differences.iter().find(|d| d.field == "environment_version").expect("the harness differs on one benchmark");
        assert_eq!(
            (d.why.as_str(), d.candidate.as_slice()),
            ("differs between the versions on 1 of the benchmarks both ran", &["other: other-env 4".to_string()][..])
        );
    }
}
