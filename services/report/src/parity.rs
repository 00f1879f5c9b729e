//! Configuration freeze and harness parity of a release comparison (seed 002 §5: "σ is
//! recorded and held fixed … when two models are compared, everything except M is
//! identical").
//!
//! σ here is what a run records of its configuration: the system's `config_hash` and the
//! run's reproducibility artefacts (`agent_config`, `decoding`, `environment_version` — the
//! harness — and `task_spec`, per task). Before any test, [`check`] reads them from the lake's
//! run starts of both versions and refuses the comparison, naming each field, when
//! - a field is not frozen: one version's runs recorded more than one value (a task more than
//!   one `task_spec`) — a run that recorded nothing counts as a value of its own, so a version
//!   half-recorded is not frozen either;
//! - a field other than the compared component ([`crate::compare::Release::compared`],
//!   default the agent configuration and its hash) differs between the versions (for
//!   `task_spec`, on a task both ran).
//!
//! A field neither version recorded cannot be checked: it is listed as unrecorded (parity not
//! verified there), never taken as equal or as different. The per-run seed is not checked: it
//! differs by design.

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
    /// Fields neither version's runs recorded: parity not verified there.
    pub unrecorded: Vec<String>,
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

/// One run start's σ: (version, task, the values of [`FIELDS`]).
pub type Sigma = (String, String, [Option<String>; 5]);

/// Reads σ of both versions' runs in `period` and checks it (module docs).
pub async fn check(ctx: &SessionContext, release: &Release, period: &Period) -> Result<Parity> {
    let source = match release.source {
        octant_contracts::Source::Evaluation => "EVALUATION",
        octant_contracts::Source::Production => "PRODUCTION",
    };
    let repro = |f: &str| format!("get_field(get_field(run_started, 'reproducibility'), {})", lit(f));
    let sql = format!(
        "SELECT DISTINCT get_field(system, 'version') AS v, coalesce(get_field(run_started, 'task_id'), run_id) AS task, \
                get_field(system, 'config_hash') AS config_hash, {} AS agent_config, {} AS decoding, \
                {} AS environment_version, {} AS task_spec \
         FROM trajectory_events WHERE kind = 'RUN_STARTED' AND get_field(system, 'version') IN ({}, {}) AND source = {} AND {}",
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
        let cols = ["v", "task", FIELDS[0], FIELDS[1], FIELDS[2], FIELDS[3], FIELDS[4]]
            .map(|n| col(&b, n, &DataType::Utf8).map(|c| c.as_string::<i32>().clone()));
        let [v, task, a, b2, c, d, e] = cols;
        let (v, task) = (v?, task?);
        let fields = [a?, b2?, c?, d?, e?];
        for i in 0..b.num_rows() {
            if v.is_null(i) {
                continue;
            }
            let value = |c: &arrow::array::StringArray| (!c.is_null(i)).then(|| c.value(i).to_string());
            let task = if task.is_null(i) { String::new() } else { task.value(i).to_string() };
            runs.push((v.value(i).to_string(), task, [0, 1, 2, 3, 4].map(|k| value(&fields[k]))));
        }
    }
    Ok(judge(release, &runs))
}

/// The check on the runs' σ (the pure part of [`check`]).
pub fn judge(release: &Release, runs: &[Sigma]) -> Parity {
    let mut p = Parity { compared: release.compared.clone(), ..Parity::default() };
    for (k, field) in FIELDS.iter().enumerate() {
        let compared = release.compared.iter().any(|c| c == field);
        // Per version: task → values (one key, "", for the fields that are not per task).
        let per_task = *field == "task_spec";
        let mut sides: [BTreeMap<&str, BTreeSet<Option<&str>>>; 2] = Default::default();
        for (v, task, values) in runs {
            let side = if *v == release.baseline { 0 } else { 1 };
            let key = if per_task { task.as_str() } else { "" };
            sides[side].entry(key).or_default().insert(values[k].as_deref());
        }
        if sides.iter().flat_map(|s| s.values().flatten()).all(Option::is_none) {
            p.unrecorded.push(field.to_string());
            continue;
        }
        let shown = |side: &BTreeMap<&str, BTreeSet<Option<&str>>>, only: &dyn Fn(&str) -> bool| -> Vec<String> {
            side.iter()
                .filter(|(t, _)| only(t))
                .flat_map(|(t, vs)| vs.iter().map(move |v| (t, v.unwrap_or(UNRECORDED))))
                .take(5)
                .map(|(t, v)| {
                    let v = if v.chars().count() > SHOWN { format!("{}…", v.chars().take(SHOWN).collect::<String>()) } else { v.into() };
                    if per_task { format!("{t}: {v}") } else { v }
                })
                .collect()
        };
        let unfrozen: Vec<&str> =
            sides.iter().zip(["baseline", "candidate"]).filter(|(s, _)| s.values().any(|vs| vs.len() > 1)).map(|(_, n)| n).collect();
        if !unfrozen.is_empty() {
            fn many<'a>(s: &BTreeMap<&'a str, BTreeSet<Option<&'a str>>>) -> BTreeSet<&'a str> {
                s.iter().filter(|(_, vs)| vs.len() > 1).map(|(t, _)| *t).collect()
            }
            let (b, c) = (many(&sides[0]), many(&sides[1]));
            p.differences.push(Difference {
                field: field.to_string(),
                why: format!(
                    "not frozen: the {} ran under more than one value{}",
                    unfrozen.join(" and the "),
                    if per_task { " of a task" } else { "" }
                ),
                baseline: shown(&sides[0], &|t| b.contains(t)),
                candidate: shown(&sides[1], &|t| c.contains(t)),
            });
            continue;
        }
        if compared {
            p.checked.push(field.to_string());
            continue;
        }
        // Frozen: one value per key. Compare on the keys both versions have.
        let differing: BTreeSet<&str> =
            sides[0].iter().filter(|(t, vs)| sides[1].get(*t).is_some_and(|ws| ws != *vs)).map(|(t, _)| *t).collect();
        if differing.is_empty() {
            p.checked.push(field.to_string());
        } else {
            p.differences.push(Difference {
                field: field.to_string(),
                why: format!(
                    "differs between the versions{}",
                    if per_task { format!(" on {} of the tasks both ran", differing.len()) } else { String::new() }
                ),
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
    if !p.unrecorded.is_empty() {
        s.push_str(&format!("; **not verified** (no run of either version recorded them): {}", list(&p.unrecorded)));
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
    let mut s = format!("parity: checked {}; not verified {}\n", list(&p.checked), list(&p.unrecorded));
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

    /// A run's σ: version, task, then config hash, agent config, decoding, environment, spec.
    fn run(v: &str, task: &str, fields: [Option<&str>; 5]) -> Sigma {
        (v.into(), task.into(), fields.map(|f| f.map(str::to_string)))
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
            r.2[3] = None;
        }
        let p = judge(&release(&["agent_config", "config_hash"]), &runs);
        assert_eq!(p.differences[0].field, "environment_version");
        assert_eq!(p.differences[0].candidate, [UNRECORDED]);
    }

    #[test]
    fn task_specs_are_compared_per_task_and_nothing_recorded_is_unverified() {
        let mut runs = fleet("greedy");
        runs[3].2[4] = Some("t2@v3".into());
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
        assert_eq!(p.unrecorded, ["agent_config", "environment_version", "task_spec"]);
        assert!(to_markdown(&p).contains("**not verified**"));
    }
}
