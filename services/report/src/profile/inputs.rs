//! What the lake says beside a profile's metrics: judge–human agreement, the reproducibility
//! artefacts the runs recorded, task families, agents, and the trajectory events' offsets.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int32Type, Int64Type};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use octant_core::stats::agreement::cohen_kappa;
use octant_core::stats::ppi::{PpiEstimate, ppi_mean};
use serde::Serialize;

use super::{GroupKey, Offsets, opt_str, source_of};
use crate::config::ReportConfig;
use crate::meta_evaluation::MetaEvaluation;
use crate::pane_store::HOUR_MS;
use crate::sql::{Period, col, df_err, lit, period_filter};

/// Judge–human agreement of one system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// Runs with a judge verdict (N).
    pub judged: u64,
    /// Runs with both verdicts (n).
    pub labelled: u64,
    pub judge_threshold: f64,
    pub kappa: Option<f64>,
    /// κ's asymptotic standard error and 95 % Wald interval (Fleiss, Cohen & Everitt 1969).
    pub kappa_se: Option<f64>,
    pub kappa_interval: Option<[f64; 2]>,
    /// κ banded as a higher-is-better rate (H: edges 0.2/0.4/0.6/0.8, Landis & Koch's
    /// slight/fair/moderate/substantial/almost perfect), with the bands of its interval's ends
    /// (seed 000 Table XI).
    pub kappa_band: Option<u8>,
    pub kappa_band_interval: Option<[u8; 2]>,
    pub ppi: Option<PpiEstimate>,
}

/// The five reproducibility artefacts of seed 000 §IV-B2, in report order.
pub const ARTEFACTS: [&str; 5] = ["environment_version", "task_spec", "agent_config", "decoding", "seed"];

/// How many of a profile's runs recorded each reproducibility artefact, and what they recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Reproducibility {
    /// Runs started in the period.
    pub runs: u64,
    /// Runs that recorded all five (the agent configuration is the run's own or, when it
    /// records none, the system's `config_hash`).
    pub reproducible_runs: u64,
    pub artefacts: Vec<Artefact>,
}

/// One artefact across a profile's runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Artefact {
    pub name: &'static str,
    /// Runs that recorded it.
    pub recorded: u64,
    /// Distinct values recorded.
    pub distinct: u64,
    /// The most frequent values (up to [`TOP_VALUES`]), most runs first.
    pub values: Vec<ArtefactValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtefactValue {
    pub value: String,
    pub runs: u64,
}

/// How many values of an artefact an evidence package lists.
pub const TOP_VALUES: usize = 5;

impl Reproducibility {
    /// The report of runs given as their five artefacts (`None`: not recorded), in
    /// [`ARTEFACTS`] order.
    pub fn of(runs: &[[Option<String>; 5]]) -> Reproducibility {
        let artefacts = ARTEFACTS
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
                for r in runs {
                    if let Some(v) = &r[i] {
                        *counts.entry(v.as_str()).or_default() += 1;
                    }
                }
                let mut values: Vec<ArtefactValue> = counts.iter().map(|(v, n)| ArtefactValue { value: v.to_string(), runs: *n }).collect();
                values.sort_by(|a, b| b.runs.cmp(&a.runs).then_with(|| a.value.cmp(&b.value)));
                values.truncate(TOP_VALUES);
                Artefact { name, recorded: counts.values().sum(), distinct: counts.len() as u64, values }
            })
            .collect();
        Reproducibility {
            runs: runs.len() as u64,
            reproducible_runs: runs.iter().filter(|r| r.iter().all(Option::is_some)).count() as u64,
            artefacts,
        }
    }
}

/// Runs, success, latency and tokens of one task or task family (seed 001's report). Passes
/// and failures are verdicts (a verifier's, a human's or a judge's): a run only the agent
/// itself called successful is counted apart, never as a pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskCounts {
    /// Runs that ended (or were abandoned) in the period.
    pub runs: u64,
    /// Runs with a verdict: `passed + failed`.
    pub judged: u64,
    pub passed: u64,
    pub failed: u64,
    /// `passed / judged`; none without a verdict.
    pub pass_rate: Option<f64>,
    /// Runs with only the agent's own report, and how many it reported successful.
    pub self_reported: u64,
    pub self_reported_successes: u64,
    pub mean_latency_ms: Option<f64>,
    pub mean_tokens: Option<f64>,
    pub total_tokens: f64,
}

/// One task family of a profile: its counts with the pass rate's Wilson interval, its primary
/// instruments (ratio of sums over its runs), and its tasks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FamilyReport {
    /// The declared family; `(undeclared)` for runs that name none.
    pub family: String,
    #[serde(flatten)]
    pub counts: TaskCounts,
    pub pass_rate_ci: Option<(f64, f64)>,
    /// (instrument, estimate, units).
    pub instruments: Vec<(String, Option<f64>, u64)>,
    /// The tasks with the most failures (up to `tasks_per_family`), then by id.
    pub tasks: Vec<(String, TaskCounts)>,
    /// Tasks not listed.
    pub tasks_omitted: u64,
}

/// The family of runs that declare none.
pub const UNDECLARED_FAMILY: &str = "(undeclared)";

/// Per metric: observations, Σ value, Σ weight.
pub(super) type MetricSums = BTreeMap<String, (u64, f64, f64)>;

/// Per (family, task), its [`MetricSums`].
pub(super) type FamilySums = BTreeMap<(String, String), MetricSums>;

impl TaskCounts {
    fn of(sums: &MetricSums) -> TaskCounts {
        use octant_core::catalogue::ids;
        let get = |m: &str| sums.get(m).copied().unwrap_or_default();
        let (verified, self_reported) = (get(ids::TASK_SUCCESS), get(ids::TASK_SUCCESS_SELF_REPORTED));
        let judged = verified.0;
        let passed = (verified.1.round() as u64).min(judged);
        let (latency, tokens) = (get(ids::LATENCY_PER_RUN), get(ids::TOKENS_PER_RUN));
        let mean = |(n, v, _): (u64, f64, f64)| (n > 0).then(|| v / n as f64);
        TaskCounts {
            runs: judged + self_reported.0,
            judged,
            passed,
            failed: judged - passed,
            pass_rate: (judged > 0).then(|| passed as f64 / judged as f64),
            self_reported: self_reported.0,
            self_reported_successes: (self_reported.1.round() as u64).min(self_reported.0),
            mean_latency_ms: mean(latency),
            mean_tokens: mean(tokens),
            total_tokens: tokens.1,
        }
    }
}

/// Merges per-metric sums.
fn add_sums(into: &mut MetricSums, from: &MetricSums) {
    for (m, (n, v, w)) in from {
        let e = into.entry(m.clone()).or_default();
        (e.0, e.1, e.2) = (e.0 + n, e.1 + v, e.2 + w);
    }
}

/// The task-family reports of one profile from its per-(family, task, metric) sums.
pub fn family_reports(sums: &FamilySums, cfg: &ReportConfig) -> Vec<FamilyReport> {
    let level = cfg.evaluation.bootstrap.level;
    // A system none of whose runs declares a family has no report.
    if sums.keys().all(|(f, _)| f == UNDECLARED_FAMILY) {
        return Vec::new();
    }
    let mut by_family: BTreeMap<&str, Vec<(&str, &MetricSums)>> = BTreeMap::new();
    for ((family, task), m) in sums {
        by_family.entry(family.as_str()).or_default().push((task.as_str(), m));
    }
    by_family
        .into_iter()
        .map(|(family, tasks)| {
            let mut all = BTreeMap::new();
            for (_, m) in &tasks {
                add_sums(&mut all, m);
            }
            let counts = TaskCounts::of(&all);
            let primary = cfg.family_instruments.get(family).cloned().unwrap_or_default();
            let instruments = primary
                .into_iter()
                .map(|m| {
                    let (n, v, w) = all.get(&m).copied().unwrap_or_default();
                    (m, (w > 0.0).then(|| v / w), n)
                })
                .collect();
            // Runs without a task id count in the family, never as a task of their own ("").
            let mut listed: Vec<(String, TaskCounts)> =
                tasks.iter().filter(|(t, _)| !t.is_empty()).map(|(t, m)| (t.to_string(), TaskCounts::of(m))).collect();
            listed.sort_by(|a, b| b.1.failed.cmp(&a.1.failed).then_with(|| a.0.cmp(&b.0)));
            let omitted = listed.len().saturating_sub(cfg.tasks_per_family) as u64;
            listed.truncate(cfg.tasks_per_family);
            FamilyReport {
                family: family.to_string(),
                pass_rate_ci: octant_core::stats::proportion::wilson(counts.passed, counts.judged, level),
                counts,
                instruments,
                tasks: listed,
                tasks_omitted: omitted,
            }
        })
        .collect()
}

/// Per (system, version, source): the sums of the success, latency, token and every family's
/// primary instruments' observations of the period, by the family and task their run started
/// with (a run that started before the period, up to a day, is found; an observation
/// replayed twice counts once).
/// Runs started this long before a period may have observations in it: their families and
/// reproducibility artefacts are read from there on.
fn family_lookback(period: &Period) -> Period {
    Period { start: period.start - 24 * HOUR_MS, ..period.clone() }
}

/// Per family (and task) sums of the family report's instruments. Only called when some run
/// declares a family ([`reproducibility`] says so from the same scan of the run starts): the
/// report reads observations, which a profile built from stored pane sums otherwise does not.
async fn family_sums(
    ctx: &SessionContext,
    cfg: &ReportConfig,
    period: &Period,
    system: Option<&str>,
) -> Result<BTreeMap<GroupKey, FamilySums>> {
    let mut metrics: BTreeSet<String> = octant_engine::window::DEFAULT_FAMILY_METRICS.map(str::to_string).into();
    metrics.extend(cfg.family_instruments.values().flatten().cloned());
    let list = metrics.iter().map(|m| lit(m)).collect::<Vec<_>>().join(", ");
    let early = family_lookback(period);
    let sql = format!(
        "WITH starts AS (SELECT run_id, first_value(get_field(run_started, 'task_family')) AS family, \
                first_value(get_field(run_started, 'task_id')) AS task FROM trajectory_events \
                WHERE kind = 'RUN_STARTED' AND {} GROUP BY run_id), \
         obs AS (SELECT observation_id, first_value(system_id) AS system_id, first_value(system_version) AS v, first_value(source) AS source, \
                first_value(run_id) AS run_id, first_value(metric) AS metric, first_value(value) AS value, first_value(weight) AS weight \
                FROM observations WHERE metric IN ({list}) AND rerun_of IS NULL AND {} GROUP BY observation_id) \
         SELECT o.system_id, o.v, o.source, coalesce(s.family, {}) AS family, coalesce(s.task, '') AS task, o.metric, \
                count(*) AS n, sum(o.value) AS sv, sum(o.weight) AS sw \
         FROM obs o LEFT JOIN starts s ON o.run_id = s.run_id GROUP BY 1, 2, 3, 4, 5, 6",
        period_filter(&early, "event_time", system),
        period_filter(period, "event_time", system),
        lit(UNDECLARED_FAMILY),
    );
    let mut out: BTreeMap<GroupKey, FamilySums> = BTreeMap::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let s = |n: &str| col(&b, n, &DataType::Utf8);
        let (sys, v, src, family, task, metric) = (s("system_id")?, s("v")?, s("source")?, s("family")?, s("task")?, s("metric")?);
        let (n, sv, sw) = (col(&b, "n", &DataType::Int64)?, col(&b, "sv", &DataType::Float64)?, col(&b, "sw", &DataType::Float64)?);
        for i in 0..b.num_rows() {
            let key = (
                sys.as_string::<i32>().value(i).to_string(),
                v.as_string::<i32>().value(i).to_string(),
                source_of(src.as_string::<i32>().value(i)),
            );
            let at = (family.as_string::<i32>().value(i).to_string(), task.as_string::<i32>().value(i).to_string());
            out.entry(key).or_default().entry(at).or_default().insert(
                metric.as_string::<i32>().value(i).to_string(),
                (
                    n.as_primitive::<Int64Type>().value(i) as u64,
                    sv.as_primitive::<Float64Type>().value(i),
                    sw.as_primitive::<Float64Type>().value(i),
                ),
            );
        }
    }
    Ok(out)
}

/// One agent of a multi-agent system: its share of the system's step-level instruments (seed
/// 000 Table IX: which agent drives a rate, next to the joint one).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgentReport {
    pub agent: String,
    /// (instrument, the agent's estimate, its units, its share of the system's numerator).
    pub instruments: Vec<AgentInstrument>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgentInstrument {
    pub metric: String,
    /// Σ value / Σ weight over the agent's steps.
    pub estimate: Option<f64>,
    pub units: u64,
    /// The agent's Σ value over every agent's (for the unsafe-action rate: the share of the
    /// system's violating steps this agent took).
    pub share: Option<f64>,
}

/// The step-level instruments reported per agent: the ones the aggregator slices per agent by
/// default.
pub const PER_AGENT: [&str; 5] = octant_engine::window::DEFAULT_AGENT_METRICS;

/// Per-agent reports from per-(agent, metric) sums: agents in id order, instruments in
/// [`PER_AGENT`] order (those the agent has steps of).
pub fn agent_reports(sums: &BTreeMap<String, MetricSums>) -> Vec<AgentReport> {
    let mut totals = MetricSums::new();
    for m in sums.values() {
        add_sums(&mut totals, m);
    }
    sums.iter()
        .map(|(agent, m)| AgentReport {
            agent: agent.clone(),
            instruments: PER_AGENT
                .iter()
                .filter_map(|id| {
                    let (n, v, w) = *m.get(*id)?;
                    let total = totals.get(*id).map_or(0.0, |t| t.1);
                    Some(AgentInstrument {
                        metric: id.to_string(),
                        estimate: (w > 0.0).then(|| v / w),
                        units: n,
                        share: (total > 0.0).then(|| v / total),
                    })
                })
                .collect(),
        })
        .collect()
}

/// Per (system, version, source) declared `multi_agent`: the sums of the step-level
/// instruments of [`PER_AGENT`] per acting agent (an observation replayed twice counts once).
/// Only systems declared multi-agent are read: the query reads step observations, which a
/// profile built from stored pane sums otherwise does not.
async fn agent_sums(
    ctx: &SessionContext,
    cfg: &ReportConfig,
    period: &Period,
    system: Option<&str>,
) -> Result<BTreeMap<GroupKey, BTreeMap<String, MetricSums>>> {
    let multi: Vec<String> = cfg.evaluation.multi_agent_systems().into_iter().filter(|s| system.is_none_or(|x| x == s)).collect();
    let mut out: BTreeMap<GroupKey, BTreeMap<String, MetricSums>> = BTreeMap::new();
    if multi.is_empty() {
        return Ok(out);
    }
    // One query for every declared multi-agent system.
    {
        let list = PER_AGENT.map(lit).join(", ");
        let systems = multi.iter().map(|s| lit(s)).collect::<Vec<_>>().join(", ");
        let sql = format!(
            "SELECT system_id, v, source, agent_id, metric, count(*) AS n, sum(value) AS sv, sum(weight) AS sw FROM \
             (SELECT observation_id, first_value(system_id) AS system_id, first_value(system_version) AS v, first_value(source) AS source, \
              first_value(agent_id) AS agent_id, first_value(metric) AS metric, first_value(value) AS value, first_value(weight) AS weight \
              FROM observations WHERE metric IN ({list}) AND rerun_of IS NULL AND agent_id IS NOT NULL AND system_id IN ({systems}) AND {} GROUP BY observation_id) \
             GROUP BY 1, 2, 3, 4, 5",
            period_filter(period, "event_time", None)
        );
        for b in ctx.sql(&sql).await?.collect().await? {
            let s = |n: &str| col(&b, n, &DataType::Utf8);
            let (sy, v, src, agent, metric) = (s("system_id")?, s("v")?, s("source")?, s("agent_id")?, s("metric")?);
            let (n, sv, sw) = (col(&b, "n", &DataType::Int64)?, col(&b, "sv", &DataType::Float64)?, col(&b, "sw", &DataType::Float64)?);
            for i in 0..b.num_rows() {
                let key = (
                    sy.as_string::<i32>().value(i).to_string(),
                    v.as_string::<i32>().value(i).to_string(),
                    source_of(src.as_string::<i32>().value(i)),
                );
                out.entry(key).or_default().entry(agent.as_string::<i32>().value(i).to_string()).or_default().insert(
                    metric.as_string::<i32>().value(i).to_string(),
                    (
                        n.as_primitive::<Int64Type>().value(i) as u64,
                        sv.as_primitive::<Float64Type>().value(i),
                        sw.as_primitive::<Float64Type>().value(i),
                    ),
                );
            }
        }
    }
    Ok(out)
}

/// Offsets of the trajectory events in the period, per (system, version, source).
async fn trajectory_inputs(ctx: &SessionContext, period: &Period, system: Option<&str>) -> Result<BTreeMap<GroupKey, Offsets>> {
    let sql = format!(
        "SELECT system_id, get_field(system, 'version') AS v, source, kafka_topic, kafka_partition, min(kafka_offset) AS lo, max(kafka_offset) AS hi, count(*) AS n \
         FROM trajectory_events WHERE {} GROUP BY 1, 2, 3, 4, 5",
        period_filter(period, "event_time", system)
    );
    let mut out: BTreeMap<GroupKey, Offsets> = BTreeMap::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let s = |n: &str| col(&b, n, &DataType::Utf8);
        let (sys, v, src, topic) = (s("system_id")?, s("v")?, s("source")?, s("kafka_topic")?);
        let (p, lo, hi, n) = (
            col(&b, "kafka_partition", &DataType::Int32)?,
            col(&b, "lo", &DataType::Int64)?,
            col(&b, "hi", &DataType::Int64)?,
            col(&b, "n", &DataType::Int64)?,
        );
        for i in 0..b.num_rows() {
            let key = (
                sys.as_string::<i32>().value(i).to_string(),
                v.as_string::<i32>().value(i).to_string(),
                source_of(src.as_string::<i32>().value(i)),
            );
            let e = out.entry(key).or_default();
            e.0.insert(
                (topic.as_string::<i32>().value(i).to_string(), p.as_primitive::<Int32Type>().value(i)),
                (
                    lo.as_primitive::<Int64Type>().value(i),
                    hi.as_primitive::<Int64Type>().value(i),
                    n.as_primitive::<Int64Type>().value(i) as u64,
                ),
            );
        }
    }
    Ok(out)
}

/// The reproducibility artefacts of the runs started in the period, per (system, version,
/// source). A run replayed into the lake twice counts once.
/// The reproducibility report per (system, version, source) over the runs started in the
/// period, and whether any run started since [`family_lookback`] declares a task family (one
/// scan of the run starts for both).
async fn reproducibility(
    ctx: &SessionContext,
    period: &Period,
    system: Option<&str>,
) -> Result<(BTreeMap<GroupKey, Reproducibility>, bool)> {
    let field = |f: &str| format!("CAST(first_value(get_field(get_field(run_started, 'reproducibility'), '{f}')) AS VARCHAR) AS {f}");
    let sql = format!(
        "SELECT system_id, get_field(system, 'version') AS v, source, run_id, {}, first_value(get_field(system, 'config_hash')) AS config_hash, \
                min(CAST(event_time AS BIGINT)) AS t, count(get_field(run_started, 'task_family')) AS families \
         FROM trajectory_events WHERE kind = 'RUN_STARTED' AND get_field(run_started, 'rerun_of') IS NULL AND {} GROUP BY 1, 2, 3, 4",
        ARTEFACTS.map(field).join(", "),
        period_filter(&family_lookback(period), "event_time", system)
    );
    let mut families_declared = false;
    let mut runs: BTreeMap<GroupKey, Vec<[Option<String>; 5]>> = BTreeMap::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let s = |n: &str| col(&b, n, &DataType::Utf8);
        let (sys, v, src, config_hash) = (s("system_id")?, s("v")?, s("source")?, s("config_hash")?);
        let (t, families) = (col(&b, "t", &DataType::Int64)?, col(&b, "families", &DataType::Int64)?);
        let cols = ARTEFACTS.map(s);
        for i in 0..b.num_rows() {
            families_declared |= families.as_primitive::<Int64Type>().value(i) > 0;
            if t.as_primitive::<Int64Type>().value(i) < period.start {
                continue; // started before the period: only its family counted
            }
            let key = (
                sys.as_string::<i32>().value(i).to_string(),
                v.as_string::<i32>().value(i).to_string(),
                source_of(src.as_string::<i32>().value(i)),
            );
            let mut run: [Option<String>; 5] = Default::default();
            for (k, c) in cols.iter().enumerate() {
                run[k] = opt_str(c.as_ref().map_err(|e| df_err(e.to_string()))?, i).filter(|x| !x.is_empty());
            }
            if run[2].is_none() {
                run[2] = opt_str(&config_hash, i).filter(|x| !x.is_empty());
            }
            runs.entry(key).or_default().push(run);
        }
    }
    Ok((runs.into_iter().map(|(k, rs)| (k, Reproducibility::of(&rs))).collect(), families_declared))
}

/// Cohen's κ (judge ≥ threshold vs human ≥ 0.5) and the prediction-powered success estimate,
/// per (system, version, source), from the runs that ended in the period. A run replayed into
/// the lake twice counts once.
async fn agreement(
    ctx: &SessionContext,
    cfg: &ReportConfig,
    period: &Period,
    system: Option<&str>,
) -> Result<BTreeMap<GroupKey, Agreement>> {
    let sql = format!(
        "SELECT system_id, get_field(system, 'version') AS v, source, run_id, \
         first_value(get_field(run_ended, 'judge_verdict')) AS judge, first_value(get_field(run_ended, 'human_verdict')) AS human \
         FROM trajectory_events WHERE kind = 'RUN_ENDED' AND {} AND {} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        period_filter(period, "event_time", system),
        crate::sql::not_rerun(period)
    );
    // Per run: (judge verdict, human verdict), in run order (the PPI's floating-point sums
    // then do not depend on how the query was scheduled: a profile is reproducible).
    type Verdicts = Vec<(Option<f64>, Option<f64>)>;
    let mut runs: BTreeMap<GroupKey, Verdicts> = BTreeMap::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let s = |n: &str| col(&b, n, &DataType::Utf8);
        let (sys, v, src) = (s("system_id")?, s("v")?, s("source")?);
        let (j, h) = (col(&b, "judge", &DataType::Float64)?, col(&b, "human", &DataType::Float64)?);
        let (jp, hp) = (j.as_primitive::<Float64Type>(), h.as_primitive::<Float64Type>());
        for i in 0..b.num_rows() {
            let key = (
                sys.as_string::<i32>().value(i).to_string(),
                v.as_string::<i32>().value(i).to_string(),
                source_of(src.as_string::<i32>().value(i)),
            );
            runs.entry(key).or_default().push(((!jp.is_null(i)).then(|| jp.value(i)), (!hp.is_null(i)).then(|| hp.value(i))));
        }
    }
    let level = cfg.evaluation.bootstrap.level;
    Ok(runs
        .into_iter()
        .filter_map(|(k, rs)| {
            // The PPI of the success rate a human would give (seed 002 §5): the judge's verdicts
            // f = 1[judge ≥ threshold] on all N judged runs, rectified by human − f on the n
            // runs humans graded (Y = 1[human ≥ 0.5], as the scorer reads a human verdict).
            let verdict = |j: f64| if j >= cfg.judge_threshold { 1.0 } else { 0.0 };
            let judge_all: Vec<f64> = rs.iter().filter_map(|r| r.0.map(verdict)).collect();
            let pairs: Vec<(f64, f64)> = rs.iter().filter_map(|r| Some((r.1?, r.0?))).collect();
            if pairs.is_empty() {
                return None;
            }
            let graded: Vec<(f64, f64)> = pairs.iter().map(|(h, j)| (if *h >= 0.5 { 1.0 } else { 0.0 }, verdict(*j))).collect();
            let j: Vec<bool> = pairs.iter().map(|(_, j)| *j >= cfg.judge_threshold).collect();
            let h: Vec<bool> = pairs.iter().map(|(h, _)| *h >= 0.5).collect();
            let ki = octant_core::stats::meta::kappa_with_interval(&j, &h, 0.95);
            let band = |v: f64| octant_core::family::Family::Higher.band(v.clamp(0.0, 1.0), &Default::default()).ok();
            Some((
                k,
                Agreement {
                    judged: judge_all.len() as u64,
                    labelled: pairs.len() as u64,
                    judge_threshold: cfg.judge_threshold,
                    kappa: cohen_kappa(&j, &h),
                    kappa_se: ki.map(|k| k.se),
                    kappa_interval: ki.map(|k| [k.lo, k.hi]),
                    kappa_band: ki.and_then(|k| band(k.kappa)),
                    kappa_band_interval: ki.and_then(|k| Some([band(k.lo)?, band(k.hi)?])),
                    ppi: ppi_mean(&judge_all, &graded, level),
                },
            ))
        })
        .collect())
}

/// What the lake says beside the metrics of each (system, version, source) of a period.
pub(super) struct Beside {
    pub(super) agreements: BTreeMap<GroupKey, Agreement>,
    pub(super) metas: BTreeMap<GroupKey, MetaEvaluation>,
    pub(super) reproducibility: BTreeMap<GroupKey, Reproducibility>,
    pub(super) families: BTreeMap<GroupKey, FamilySums>,
    pub(super) agents: BTreeMap<GroupKey, BTreeMap<String, MetricSums>>,
    pub(super) events: BTreeMap<GroupKey, Offsets>,
}

impl Beside {
    pub(super) async fn read(ctx: &SessionContext, cfg: &ReportConfig, period: &Period, system: Option<&str>) -> Result<Beside> {
        let agreements = agreement(ctx, cfg, period, system).await?;
        let metas = crate::meta_evaluation::meta_evaluations(ctx, cfg, period).await?;
        let (reproducibility, families_declared) = reproducibility(ctx, period, system).await?;
        let families = if families_declared { family_sums(ctx, cfg, period, system).await? } else { BTreeMap::new() };
        let agents = agent_sums(ctx, cfg, period, system).await?;
        let events = trajectory_inputs(ctx, period, system).await?;
        Ok(Beside { agreements, metas, reproducibility, families, agents, events })
    }
}
