//! One profile run: DataFusion SQL over the lake, then the aggregator's own window code over
//! the rows, so a profile over `[start, end)` carries exactly the values a streaming window
//! over the same span would (the bootstrap weights depend only on the cluster, the seed and the
//! replicate, never on order or panes).
//!
//! The period is cut into wall-clock hours (the first and last may be partial): each hour's
//! state per series ([`octant_engine::panes::PaneSums`]) comes from the pane-sum store
//! ([`crate::panes`]) when the hour is stored and still complete, else from the observations
//! through the window code; [`octant_engine::panes::Period`] merges them (exactly: integer
//! sums) into the period's window.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Float64Type, Int32Type, Int64Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use octant_contracts::{DimensionProfile, MetricWindow, Observation, Profile, ProfileMetric, Provenance, Source};
use octant_core::catalogue::{CATALOGUE_VERSION, Role, ids};
use octant_core::gate::{self, GateOutcome, GatedMetric, Thresholds};
use octant_core::profile::Profile as CoreProfile;
use octant_core::stats::agreement::cohen_kappa;
use octant_core::stats::bootstrap::METHOD;
use octant_core::stats::ppi::{PpiEstimate, ppi_mean};
use octant_engine::output;
use octant_engine::panes::Period as Period_;
use octant_engine::window::{Added, WindowSpec, Windows};
use serde::Serialize;

use octant_lake::date_of;

use crate::config::ProfilerConfig;
use crate::panes::{HOUR_MS, Store};

/// The span a profile covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Period {
    /// `24h`, `7d`, or `window` for an explicit span.
    pub name: String,
    /// Inclusive, epoch ms.
    pub start: i64,
    /// Exclusive, epoch ms.
    pub end: i64,
}

/// Which lake rows a profile read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TableInput {
    /// Files of the table in the partitions the query touched (paths relative to the lake).
    pub files: Vec<String>,
    /// Per Kafka topic partition: first and last offset read and rows.
    pub offsets: Vec<OffsetRange>,
    pub rows: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffsetRange {
    pub topic: String,
    pub partition: i32,
    pub first: i64,
    pub last: i64,
    pub rows: u64,
}

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
type MetricSums = BTreeMap<String, (u64, f64, f64)>;

/// Per (family, task), its [`MetricSums`].
type FamilySums = BTreeMap<(String, String), MetricSums>;

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
pub fn family_reports(sums: &FamilySums, cfg: &ProfilerConfig) -> Vec<FamilyReport> {
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
    cfg: &ProfilerConfig,
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
                FROM observations WHERE metric IN ({list}) AND {} GROUP BY observation_id) \
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
    cfg: &ProfilerConfig,
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
              FROM observations WHERE metric IN ({list}) AND agent_id IS NOT NULL AND system_id IN ({systems}) AND {} GROUP BY observation_id) \
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

/// One profile of one (system, version, source) with everything its evidence package needs.
#[derive(Debug, Clone, Serialize)]
pub struct Built {
    pub record: Profile,
    pub period: Period,
    /// The per-metric windows (identical to the aggregator's for the same span).
    pub windows: Vec<MetricWindow>,
    pub dimension_profile: DimensionProfile,
    #[serde(skip)]
    pub core: CoreProfile,
    pub gate: Vec<GateLine>,
    pub agreement: Option<Agreement>,
    /// The reproducibility artefacts the period's runs recorded.
    pub reproducibility: Reproducibility,
    /// The system's declared type (`[evaluation.system_types]`), which decides its coverage.
    pub system_type: octant_core::catalogue::SystemType,
    /// Task families (seed 001), each with its tasks.
    pub families: Vec<FamilyReport>,
    /// Per agent of a system declared multi-agent (seed 000 Table IX); empty otherwise.
    pub agents: Vec<AgentReport>,
    pub observations: TableInput,
    pub trajectory_events: TableInput,
    /// Observations the window code dropped as replays (same observation id).
    pub duplicates: u64,
    /// Who judged success, per success metric: metric → provenance → runs (the split of
    /// verified and self-reported success).
    pub success_provenance: BTreeMap<String, BTreeMap<String, u64>>,
    /// Why the gate has no outcome, when gates are declared and one cannot be given.
    pub gate_na_reason: Option<String>,
    /// Hours of the period read from the pane-sum store rather than the observations.
    pub hours_from_store: usize,
    /// This version against its declared baseline (`[[compare.releases]]` naming it the
    /// candidate), over the same period.
    pub release: Option<crate::compare::Comparison>,
    /// How far the raters behind the period's evaluation results can be trusted.
    pub meta: crate::meta::MetaEvaluation,
}

/// Whether the session reads the lake's observation files (a table registered empty, because
/// the lake had none when the session opened, does not see files written since).
async fn lists_observation_files(ctx: &SessionContext) -> bool {
    match ctx.table_provider("observations").await {
        Ok(t) => (t.as_ref() as &dyn std::any::Any).downcast_ref::<datafusion::datasource::MemTable>().is_none(),
        Err(_) => false,
    }
}

/// What one reader of the pane-sum store found: the hours it read whole, their merged state,
/// and each system's group bookkeeping.
type StoredPart = (Vec<i64>, Period_, Vec<(String, crate::panes::GroupMeta)>);

/// Runs blocking work (reading the pane-sum store) off the async runtime's worker threads when
/// the runtime has several; in place otherwise.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

pub(crate) fn df_err(e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(e.to_string())
}

/// SQL string literal.
pub(crate) fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The WHERE clause shared by the queries: the period (event time and the `date` partition,
/// so whole days outside it are never opened) and the system.
pub(crate) fn period_filter(period: &Period, time_col: &str, system: Option<&str>) -> String {
    let mut f = format!(
        "date >= {} AND date <= {} AND CAST({time_col} AS BIGINT) >= {} AND CAST({time_col} AS BIGINT) < {}",
        lit(&date_of(period.start)),
        lit(&date_of(period.end - 1)),
        period.start,
        period.end
    );
    if let Some(s) = system {
        f.push_str(&format!(" AND system_id = {}", lit(s)));
    }
    f
}

/// The SQL that selects a profile's observations (also what the benchmark runs).
pub fn observations_sql(period: &Period, system: Option<&str>) -> String {
    observations_sql_in(period, system, &[(period.start, period.end)])
}

/// The SQL that selects a period's observations with event times in `ranges` (the hours not
/// read from the pane-sum store).
pub fn observations_sql_in(period: &Period, system: Option<&str>, ranges: &[(i64, i64)]) -> String {
    let spans: Vec<String> =
        ranges.iter().map(|(a, b)| format!("(CAST(event_time AS BIGINT) >= {a} AND CAST(event_time AS BIGINT) < {b})")).collect();
    format!(
        "SELECT observation_id, metric, system_id, system_version, source, agent_id, run_id, task_id, attempt, \
         groups, benchmark, cluster_id, step, CAST(event_time AS BIGINT) AS t, value, weight, confidence, provenance, \
         kafka_topic, kafka_partition, kafka_offset FROM observations WHERE {} AND ({})",
        period_filter(period, "event_time", system),
        spans.join(" OR ")
    )
}

pub(crate) fn col(b: &RecordBatch, name: &str, dt: &DataType) -> Result<ArrayRef> {
    let c = b.column_by_name(name).ok_or_else(|| df_err(format!("column {name} missing")))?;
    if c.data_type() == dt { Ok(c.clone()) } else { Ok(arrow::compute::cast(c, dt)?) }
}

fn opt_str(a: &ArrayRef, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.as_string::<i32>().value(i).to_string())
}

/// Per-partition offset bookkeeping.
#[derive(Default)]
struct Offsets(BTreeMap<(String, i32), (i64, i64, u64)>);

impl Offsets {
    fn add(&mut self, topic: &str, partition: i32, offset: i64) {
        let e = self.0.entry((topic.to_string(), partition)).or_insert((offset, offset, 0));
        e.0 = e.0.min(offset);
        e.1 = e.1.max(offset);
        e.2 += 1;
    }

    fn merge(&mut self, topic: &str, partition: i32, first: i64, last: i64, rows: u64) {
        let e = self.0.entry((topic.to_string(), partition)).or_insert((first, last, 0));
        e.0 = e.0.min(first);
        e.1 = e.1.max(last);
        e.2 += rows;
    }

    fn ranges(&self) -> Vec<OffsetRange> {
        self.0
            .iter()
            .map(|((topic, partition), (first, last, rows))| OffsetRange {
                topic: topic.clone(),
                partition: *partition,
                first: *first,
                last: *last,
                rows: *rows,
            })
            .collect()
    }
}

/// State per (system, version, source) while reading.
#[derive(Default)]
struct Group {
    observations: Offsets,
    files: BTreeSet<String>,
    /// metric → provenance → accepted observations.
    provenance: BTreeMap<String, BTreeMap<String, u64>>,
}

fn provenance_of(s: &str) -> Option<Provenance> {
    Provenance::ALL.into_iter().find(|p| p.as_str().eq_ignore_ascii_case(s) || format!("{p:?}").eq_ignore_ascii_case(&s.replace('_', "")))
}

type GroupKey = (String, String, Source);

/// Builds the profiles of every (system, version, source) with observations in `period`
/// (or only `system`'s).
pub async fn build(
    ctx: &SessionContext,
    cfg: &ProfilerConfig,
    period: &Period,
    system: Option<&str>,
    generated_at: i64,
) -> Result<Vec<Built>> {
    if period.end <= period.start {
        return Err(df_err(format!("empty period [{}, {})", period.start, period.end)));
    }
    let boot = cfg.bootstrap_spec();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The period in hourly panes: the first and last may be partial. Whole hours that have
    // settled come from the pane-sum store when it holds them (see `crate::panes`).
    let (h0, h_end) = (period.start.div_euclid(HOUR_MS) * HOUR_MS, (period.end - 1).div_euclid(HOUR_MS) * HOUR_MS + HOUR_MS);
    let store = cfg.pane_store().map(|d| Store::new(d, &cfg.evaluation));
    let settled =
        |h: i64| h >= period.start && h + HOUR_MS <= period.end && h + HOUR_MS + cfg.pane_settle.as_millis() as i64 <= generated_at;
    let lake_files_now: Vec<String> = match &store {
        Some(_) => octant_lake::reader::table_files(&cfg.lake, &cfg.storage, "observations", None)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?
            .into_iter()
            .map(|(f, _)| f)
            .collect(),
        None => Vec::new(),
    };
    // Before any observation is read: the lake's commit marks (what a stored hour is known to
    // hold), and whether this session sees the lake's files at all (a table registered empty
    // because the lake had no file when the session opened would store empty hours).
    let marks = match &store {
        Some(_) => {
            crate::panes::commit_marks(&cfg.lake, &cfg.storage, &lake_files_now).map_err(|e| DataFusionError::External(Box::new(e)))?
        }
        None => BTreeMap::new(),
    };
    let listed = lists_observation_files(ctx).await;
    let mut merged = Period_::new();
    let mut groups: BTreeMap<GroupKey, Group> = BTreeMap::new();
    let mut duplicates: BTreeMap<GroupKey, u64> = BTreeMap::new();
    let mut stored_hours = BTreeSet::new();
    if let Some(store) = &store {
        let candidates: Vec<(i64, Vec<String>)> = (h0..h_end)
            .step_by(HOUR_MS as usize)
            .filter(|h| settled(*h))
            .filter_map(|h| {
                let marker = store.marker(h)?;
                if crate::panes::stale(&cfg.lake, &lake_files_now, &marker, h) {
                    return None;
                }
                Some((h, marker.systems.into_iter().filter(|s| system.is_none_or(|x| x == s.as_str())).collect()))
            })
            .collect();
        // Hours read and merged on every core, each thread into its own period state.
        let per = candidates.len().div_ceil(threads).max(1);
        let parts: Vec<StoredPart> = blocking(|| {
            std::thread::scope(|scope| {
                let handles: Vec<_> = candidates
                    .chunks(per)
                    .map(|chunk| {
                        scope.spawn(move || {
                            let (mut hours, mut part, mut metas) = (Vec::new(), Period_::new(), Vec::new());
                            for (h, systems) in chunk {
                                // An hour counts only when every system of it reads back.
                                let Some(read) = systems.iter().map(|s| store.read(*h, s).map(|x| (s, x))).collect::<Option<Vec<_>>>()
                                else {
                                    continue;
                                };
                                for (sys, hour) in read {
                                    for (key, p) in hour.series {
                                        if !part.add(key.clone(), *h, p, &boot) {
                                            tracing::warn!(hour = h, series = ?key, "a stored pane does not merge with the series; left out");
                                        }
                                    }
                                    metas.extend(hour.groups.into_iter().map(|g| (sys.clone(), g)));
                                }
                                hours.push(*h);
                            }
                            (hours, part, metas)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().expect("reading the store never panics")).collect()
            })
        });
        for (hours, part, metas) in parts {
            if !merged.absorb(part, &boot) {
                tracing::warn!("stored panes that do not merge with each other were left out");
            }
            stored_hours.extend(hours);
            for (sys, g) in metas {
                let key = (sys, g.version.clone(), source_of(&g.source));
                let group = groups.entry(key.clone()).or_default();
                for (topic, partition, first, last, rows) in &g.offsets {
                    group.observations.merge(topic, *partition, *first, *last, *rows);
                }
                for (metric, by) in g.provenance {
                    for (p, n) in by {
                        *group.provenance.entry(metric.clone()).or_default().entry(p).or_default() += n;
                    }
                }
                *duplicates.entry(key).or_default() += g.duplicates;
            }
        }
    }
    // Every other hour from the observations: contiguous spans of hours not stored.
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    for h in (h0..h_end).step_by(HOUR_MS as usize).filter(|h| !stored_hours.contains(h)) {
        match ranges.last_mut() {
            Some(r) if r.1 == h => r.1 = h + HOUR_MS,
            _ => ranges.push((h, h + HOUR_MS)),
        }
    }
    let spec = WindowSpec { length_ms: h_end - h0, slide_ms: HOUR_MS, lateness_ms: 0 };
    let mut windows = Windows::new(spec, boot, None);
    // Per hour read here, per (system, version, source): what a stored hour keeps of its rows.
    let mut hour_groups: BTreeMap<(i64, GroupKey), crate::panes::GroupMeta> = BTreeMap::new();
    let mut stream =
        if ranges.is_empty() { None } else { Some(ctx.sql(&observations_sql_in(period, system, &ranges)).await?.execute_stream().await?) };
    let list = DataType::List(std::sync::Arc::new(Field::new("item", DataType::Utf8, true)));
    while let Some(batch) = match stream.as_mut() {
        Some(s) => s.next().await,
        None => None,
    } {
        let b = batch?;
        let s = |n: &str| col(&b, n, &DataType::Utf8);
        let (id, metric, sys, ver, source, agent, run, task, bench, cluster, topic) = (
            s("observation_id")?,
            s("metric")?,
            s("system_id")?,
            s("system_version")?,
            s("source")?,
            s("agent_id")?,
            s("run_id")?,
            s("task_id")?,
            s("benchmark")?,
            s("cluster_id")?,
            s("kafka_topic")?,
        );
        let prov = s("provenance")?;
        let attempt = col(&b, "attempt", &DataType::Int32)?;
        let groups_col = col(&b, "groups", &list)?;
        let step = col(&b, "step", &DataType::Int64)?;
        let t = col(&b, "t", &DataType::Int64)?;
        let value = col(&b, "value", &DataType::Float64)?;
        let weight = col(&b, "weight", &DataType::Float64)?;
        let conf = col(&b, "confidence", &DataType::Float64)?;
        let part = col(&b, "kafka_partition", &DataType::Int32)?;
        let off = col(&b, "kafka_offset", &DataType::Int64)?;
        let (attempt, step, t, value, weight, conf, part, off) = (
            attempt.as_primitive::<Int32Type>(),
            step.as_primitive::<Int64Type>(),
            t.as_primitive::<Int64Type>(),
            value.as_primitive::<Float64Type>(),
            weight.as_primitive::<Float64Type>(),
            conf.as_primitive::<Float64Type>(),
            part.as_primitive::<Int32Type>(),
            off.as_primitive::<Int64Type>(),
        );
        let gl = groups_col.as_list::<i32>();
        for i in 0..b.num_rows() {
            let source = match source.as_string::<i32>().value(i) {
                "EVALUATION" | "evaluation" => Source::Evaluation,
                _ => Source::Production,
            };
            let o = Observation {
                observation_id: id.as_string::<i32>().value(i).to_string(),
                metric: metric.as_string::<i32>().value(i).to_string(),
                system_id: sys.as_string::<i32>().value(i).to_string(),
                system_version: ver.as_string::<i32>().value(i).to_string(),
                source,
                agent_id: opt_str(&agent, i),
                run_id: run.as_string::<i32>().value(i).to_string(),
                task_id: opt_str(&task, i),
                attempt: (!attempt.is_null(i)).then(|| attempt.value(i)),
                groups: if gl.is_null(i) {
                    Vec::new()
                } else {
                    let v = gl.value(i);
                    let v = v.as_string::<i32>();
                    (0..v.len()).filter(|j| !v.is_null(*j)).map(|j| v.value(j).to_string()).collect()
                },
                benchmark: opt_str(&bench, i),
                task_family: None,
                cluster_id: cluster.as_string::<i32>().value(i).to_string(),
                step: (!step.is_null(i)).then(|| step.value(i)),
                event_time: t.value(i),
                value: value.value(i),
                weight: if weight.is_null(i) { 1.0 } else { weight.value(i) },
                confidence: (!conf.is_null(i)).then(|| conf.value(i)),
                provenance: opt_str(&prov, i).as_deref().and_then(provenance_of),
            };
            let key = (o.system_id.clone(), o.system_version.clone(), o.source);
            let added = windows.add(&o, off.value(i));
            let (topic, partition, offset) = (topic.as_string::<i32>().value(i), part.value(i), off.value(i));
            let g = groups.entry(key.clone()).or_default();
            g.observations.add(topic, partition, offset);
            let hour = o.event_time.div_euclid(HOUR_MS) * HOUR_MS;
            let hg = hour_groups.entry((hour, key.clone())).or_default();
            match hg.offsets.iter_mut().find(|r| r.0 == topic && r.1 == partition) {
                Some(r) => {
                    (r.2, r.3, r.4) = (r.2.min(offset), r.3.max(offset), r.4 + 1);
                }
                None => hg.offsets.push((topic.to_string(), partition, offset, offset, 1)),
            }
            match added {
                Added::Duplicate => {
                    *duplicates.entry(key).or_default() += 1;
                    hg.duplicates += 1;
                }
                Added::Accepted => {
                    if let Some(p) = o.provenance {
                        *g.provenance.entry(o.metric.clone()).or_default().entry(p.as_str().to_string()).or_default() += 1;
                        *hg.provenance.entry(o.metric).or_default().entry(p.as_str().to_string()).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
    }

    // The hours read here as pane sums; the whole, settled ones stored for the next profiles
    // (only by a run over every system: a stored hour holds them all).
    let mut fresh: BTreeMap<i64, BTreeMap<String, crate::panes::SystemHour>> = BTreeMap::new();
    let storing = store.is_some() && system.is_none() && listed;
    for (key, h, p) in windows.pane_sums(threads) {
        if storing && settled(h) {
            fresh.entry(h).or_default().entry(key.system_id.clone()).or_default().series.push((key.clone(), p.clone()));
        }
        if !merged.add(key.clone(), h, p, &boot) {
            tracing::warn!(hour = h, series = ?key, "a pane does not merge with the series' stored panes; left out");
        }
    }
    if let (Some(store), None, true) = (&store, system, listed) {
        for ((h, (sys, version, source)), meta) in hour_groups {
            if settled(h) {
                let meta = crate::panes::GroupMeta { version, source: source.as_str().to_string(), ..meta };
                fresh.entry(h).or_default().entry(sys).or_default().groups.push(meta);
            }
        }
        for h in (h0..h_end).step_by(HOUR_MS as usize).filter(|h| settled(*h) && !stored_hours.contains(h)) {
            let hour = fresh.remove(&h).unwrap_or_default();
            match store.write_hour(h, &hour, marks.clone()) {
                Ok(true) => {}
                Ok(false) => tracing::debug!(hour = h, "pane sums too large to store; the hour stays read from the observations"),
                Err(e) => tracing::warn!(hour = h, error = %e, "storing pane sums failed; the hour stays read from the observations"),
            }
        }
    }

    let Some(mut e) = merged.emission(h0, h_end, &boot, threads) else { return Ok(Vec::new()) };
    (e.window_start, e.window_end) = (period.start, period.end);
    // The first pane may start before the period (a partial hour): its data starts with it.
    for s in &mut e.series {
        if let Some(w) = &mut s.evidence {
            w.since = w.since.max(period.start);
        }
    }
    let out = output::build(&e, &cfg.evaluation);
    let mut by_group: BTreeMap<GroupKey, Vec<MetricWindow>> = BTreeMap::new();
    for w in out.windows {
        by_group.entry((w.system_id.clone(), w.system_version.clone(), w.source)).or_default().push(w);
    }
    let agreements = agreement(ctx, cfg, period, system).await?;
    let mut metas = crate::meta::meta_evaluations(ctx, cfg, period).await?;
    let (mut reproducibility, families_declared) = reproducibility(ctx, period, system).await?;
    let mut families = if families_declared { family_sums(ctx, cfg, period, system).await? } else { BTreeMap::new() };
    let mut agents = agent_sums(ctx, cfg, period, system).await?;
    let events = trajectory_inputs(ctx, period, system).await?;

    let mut built = Vec::new();
    for (dp, core) in out.profiles {
        let key = (dp.system_id.clone(), dp.system_version.clone(), dp.source);
        let mut g = groups.remove(&key).unwrap_or_default();
        g.files = lake_files(cfg, "observations", &dp.system_id, period).await?;
        let metrics: Vec<ProfileMetric> = core
            .metrics
            .iter()
            .map(|m| ProfileMetric {
                metric: m.metric.id.to_string(),
                dimension: m.metric.dimension.as_str().to_string(),
                benchmark: m.benchmark.clone(),
                units: m.units as i64,
                estimate: m.estimate,
                ci_low: m.interval.map(|i| i.0),
                ci_high: m.interval.map(|i| i.1),
                band: m.band.map(i32::from),
                band_low: m.band_interval.map(|b| b.0 as i32),
                band_high: m.band_interval.map(|b| b.1 as i32),
                na_reason: m.not_applicable.as_ref().map(|n| n.describe()),
                veto_state: m.veto.map(|v| v.as_str().to_string()),
                pool_version: cfg.evaluation.pool(m.metric.id, &dp.system_id).map(|(_, v)| v),
            })
            .collect();
        let agreement = agreements.get(&key).cloned();
        let meta = metas.remove(&key).unwrap_or_default();
        let gate = gate_lines(cfg, &metrics, &g.provenance, agreement.as_ref(), &meta);
        let (gate_outcome, ei, ei_g) = gate_summary(cfg, &gate);
        let gate_na_reason = (!gate.is_empty() && gate_outcome.is_none()).then(|| {
            let reasons: Vec<String> = gate.iter().filter_map(|l| l.na_reason.as_ref().map(|r| format!("{}: {r}", l.metric))).collect();
            format!("no gate outcome: {}", reasons.join("; "))
        });
        let (ev_offsets, ev_rows) = events.get(&key).map(|o| (o.ranges(), o.0.values().map(|v| v.2).sum())).unwrap_or_default();
        let record = Profile {
            profile_id: format!("{}/{}/{}/{}/{}", dp.system_id, dp.system_version, dp.source.as_str(), period.name, period.end),
            system_id: dp.system_id.clone(),
            system_version: dp.system_version.clone(),
            source: dp.source,
            period: period.name.clone(),
            period_start: period.start,
            period_end: period.end,
            generated_at,
            catalogue_version: CATALOGUE_VERSION.to_string(),
            method: METHOD.to_string(),
            level: boot.level,
            replicates: boot.replicates as i32,
            seed: boot.seed as i64,
            metrics,
            dimensions: dp.dimensions.clone(),
            unsuitable: dp.unsuitable,
            gate: gate_outcome.map(|g| format!("{g:?}").to_lowercase()),
            gate_na_reason: gate_na_reason.clone(),
            efficacy_index: ei,
            efficacy_index_geometric: ei_g,
            judge_human_kappa: agreement.as_ref().and_then(|a| a.kappa),
            ppi_success: agreement.as_ref().and_then(|a| a.ppi.map(|p| p.estimate)),
            ppi_ci_low: agreement.as_ref().and_then(|a| a.ppi.map(|p| p.lo)),
            ppi_ci_high: agreement.as_ref().and_then(|a| a.ppi.map(|p| p.hi)),
            evidence_uri: None,
        };
        let rows = g.observations.0.values().map(|v| v.2).sum();
        let success_provenance = std::mem::take(&mut g.provenance);
        built.push(Built {
            success_provenance,
            gate_na_reason,
            windows: by_group.remove(&key).unwrap_or_default(),
            dimension_profile: dp,
            core,
            gate,
            agreement,
            reproducibility: reproducibility.remove(&key).unwrap_or_default(),
            system_type: cfg.evaluation.system_type(&key.0),
            families: family_reports(&families.remove(&key).unwrap_or_default(), cfg),
            agents: agent_reports(&agents.remove(&key).unwrap_or_default()),
            observations: TableInput { files: g.files.into_iter().collect(), offsets: g.observations.ranges(), rows },
            trajectory_events: TableInput {
                files: lake_files(cfg, "trajectory_events", &key.0, period).await?.into_iter().collect(),
                offsets: ev_offsets,
                rows: ev_rows,
            },
            duplicates: duplicates.get(&key).copied().unwrap_or(0),
            hours_from_store: stored_hours.len(),
            release: None,
            meta,
            record,
            period: period.clone(),
        });
    }
    let records: Vec<&Profile> = built.iter().map(|b| &b.record).collect();
    let power = crate::meta::discriminative_power(&records, cfg.evaluation.bootstrap.level);
    for b in &mut built {
        b.meta.discriminative_power = power.iter().filter(|d| d.source == b.record.source.as_str()).cloned().collect();
        let r = &b.record;
        if let Some(release) =
            cfg.compare.releases.iter().find(|x| x.system == r.system_id && x.candidate == r.system_version && x.source == r.source)
        {
            b.release = Some(crate::compare::compare(ctx, &cfg.compare, cfg.evaluation.bootstrap.seed, release, period).await?);
        }
    }
    Ok(built)
}

/// The table's files in the system's `date` partitions the period covers.
async fn lake_files(cfg: &ProfilerConfig, table: &str, system: &str, period: &Period) -> Result<BTreeSet<String>> {
    let (first, last) = (date_of(period.start), date_of(period.end - 1));
    let files = octant_lake::reader::table_files(&cfg.lake, &cfg.storage, table, Some(system))
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    Ok(files.into_iter().filter(|(_, d)| d.as_str() >= first.as_str() && d.as_str() <= last.as_str()).map(|(f, _)| f).collect())
}

fn source_of(s: &str) -> Source {
    if s.eq_ignore_ascii_case("evaluation") { Source::Evaluation } else { Source::Production }
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
         FROM trajectory_events WHERE kind = 'RUN_STARTED' AND {} GROUP BY 1, 2, 3, 4",
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
    cfg: &ProfilerConfig,
    period: &Period,
    system: Option<&str>,
) -> Result<BTreeMap<GroupKey, Agreement>> {
    let sql = format!(
        "SELECT system_id, get_field(system, 'version') AS v, source, run_id, \
         first_value(get_field(run_ended, 'judge_verdict')) AS judge, first_value(get_field(run_ended, 'human_verdict')) AS human \
         FROM trajectory_events WHERE kind = 'RUN_ENDED' AND {} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        period_filter(period, "event_time", system)
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

/// The gated metrics of a profile. A metric measured on several benchmarks is gated on each.
///
/// A line has no outcome, and says why, when the metric was not measured, is N/A, is
/// self-assessment (`task_success_self_reported`, unless `gate_self_reported`), or was judged
/// (partly) by an LLM judge whose agreement with humans on the same period is below
/// `min_judge_kappa` or rests on fewer than `min_labelled_runs` labelled runs (seed 002).
fn gate_lines(
    cfg: &ProfilerConfig,
    metrics: &[ProfileMetric],
    provenance: &BTreeMap<String, BTreeMap<String, u64>>,
    agreement: Option<&Agreement>,
    meta: &crate::meta::MetaEvaluation,
) -> Vec<GateLine> {
    let count = |metric: &str, p: Provenance| provenance.get(metric).and_then(|m| m.get(p.as_str())).copied().unwrap_or(0);
    let level = cfg.evaluation.bootstrap.level;
    // Seed 002 §5: human grading enters a gate only when its graders agree (≥ 2 of them,
    // Krippendorff's α ≥ `min_human_agreement`), measured on the period's results of `name`.
    let graders = |name: &str, mode: Option<&str>, what: String| -> Option<String> {
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
    };
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
        let judge_problem = (judged > 0).then(|| match agreement {
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
        });
        // A human- or judge-rated instrument: its human graders' own agreement.
        let rated = cfg.evaluation.instruments.iter().find(|d| &d.id == id && matches!(d.rater_kind.as_deref(), Some("human" | "judge")));
        let human_instrument = rated.and_then(|d| {
            graders(d.evaluation_name(), d.scoring_mode.as_deref(), format!("{id} is graded by humans or checked against them"))
        });
        // An instrument whose results come from an LLM judge: its own judge–human agreement
        // on the same items (seed 002 §5: a metric enters a gate only with κ ≥ 0.6).
        let instrument_problem = rated.filter(|d| d.rater_kind.as_deref() == Some("judge")).and_then(|d| {
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
        let found: Vec<&ProfileMetric> = metrics.iter().filter(|m| &m.metric == id).collect();
        if found.is_empty() {
            let self_reported = count("task_success_self_reported", Provenance::SelfReported);
            let reason = if id == "task_success" && self_reported > 0 {
                format!(
                    "no verified success in the period: {self_reported} runs reported success only themselves (self-assessment is never gated)"
                )
            } else {
                "not measured in the period".to_string()
            };
            out.push(GateLine {
                metric: id.clone(),
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
            });
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
    out
}

/// Gate outcome and EI / EI_G (EI only with weights). The gate is conjunctive: a metric that
/// fails decides it even while another is N/A; otherwise it needs every gated metric.
fn gate_summary(cfg: &ProfilerConfig, lines: &[GateLine]) -> (Option<GateOutcome>, Option<f64>, Option<f64>) {
    if lines.is_empty() {
        return (None, None, None);
    }
    if lines.iter().any(|l| l.outcome.is_none()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Families apart: counts, pass rate with its Wilson interval, mean latency and tokens,
    /// the family's primary instruments as ratios of sums, tasks by most failures (bounded).
    #[test]
    fn family_reports_keep_each_family_apart() {
        let mut cfg = ProfilerConfig { tasks_per_family: 1, ..ProfilerConfig::default() };
        cfg.family_instruments.insert("mine".into(), vec!["citation_coverage".into()]);
        let mut sums: FamilySums = BTreeMap::new();
        let mut put = |family: &str, task: &str, metric: &str, n: u64, v: f64, w: f64| {
            sums.entry((family.into(), task.into())).or_default().insert(metric.into(), (n, v, w));
        };
        put("mine", "t1", "task_success", 10, 9.0, 10.0);
        put("mine", "t2", "task_success", 6, 2.0, 6.0);
        put("mine", "t2", "task_success_self_reported", 4, 4.0, 4.0);
        put("mine", "t1", "latency_per_run", 10, 1000.0, 10.0);
        put("mine", "t1", "tokens_per_run", 10, 5000.0, 10.0);
        put("mine", "t1", "citation_coverage", 10, 30.0, 40.0);
        put("mine", "t2", "citation_coverage", 6, 10.0, 20.0);
        put(UNDECLARED_FAMILY, "", "task_success", 3, 0.0, 3.0);
        let r = family_reports(&sums, &cfg);
        assert_eq!(r.iter().map(|f| f.family.as_str()).collect::<Vec<_>>(), ["(undeclared)", "mine"]);
        let mine = &r[1];
        // t2's four self-reported successes are the agent's word, not passes: 11 of 16 judged
        // runs passed (counting them would give 15 of 20).
        let c = &mine.counts;
        assert_eq!((c.runs, c.judged, c.passed, c.failed), (20, 16, 11, 5));
        assert_eq!((c.self_reported, c.self_reported_successes), (4, 4));
        assert_eq!(c.pass_rate, Some(11.0 / 16.0));
        assert_eq!(mine.pass_rate_ci, octant_core::stats::proportion::wilson(11, 16, 0.95));
        assert_eq!((mine.counts.mean_latency_ms, mine.counts.mean_tokens, mine.counts.total_tokens), (Some(100.0), Some(500.0), 5000.0));
        assert_eq!(mine.instruments, [("citation_coverage".to_string(), Some(40.0 / 60.0), 16)]);
        assert_eq!(mine.tasks.len(), 1, "bounded by tasks_per_family");
        assert_eq!((mine.tasks[0].0.as_str(), mine.tasks[0].1.failed, mine.tasks_omitted), ("t2", 4, 1), "most failures first");
        assert!(r[0].instruments.is_empty(), "a family without declared instruments shows counts only");
        assert_eq!((r[0].counts.runs, r[0].counts.failed), (3, 3));
    }

    /// Per agent: its own rate over its steps, and its share of the system's numerator.
    #[test]
    fn agent_reports_say_which_agent_drives_a_rate() {
        let mut sums: BTreeMap<String, MetricSums> = BTreeMap::new();
        sums.entry("planner".into()).or_default().insert("unsafe_action_rate".into(), (100, 2.0, 100.0));
        sums.entry("executor".into()).or_default().insert("unsafe_action_rate".into(), (50, 18.0, 50.0));
        sums.entry("executor".into()).or_default().insert("tool_error_rate".into(), (40, 0.0, 40.0));
        let r = agent_reports(&sums);
        assert_eq!(r.iter().map(|a| a.agent.as_str()).collect::<Vec<_>>(), ["executor", "planner"]);
        let ex = &r[0].instruments;
        assert_eq!((ex[0].metric.as_str(), ex[0].estimate, ex[0].units, ex[0].share), ("unsafe_action_rate", Some(0.36), 50, Some(0.9)));
        assert_eq!((ex[1].metric.as_str(), ex[1].share), ("tool_error_rate", None), "no share of a zero numerator");
        assert_eq!(r[1].instruments[0].share, Some(0.1));
    }

    /// Each artefact: runs recording it, distinct values, the most frequent first (ties by
    /// value), at most `TOP_VALUES`; a run is reproducible only with all five.
    #[test]
    fn reproducibility_counts_runs_per_artefact() {
        let some = |s: &str| Some(s.to_string());
        let full = |seed: &str| [some("env 1"), some("task@v2"), some("cfg-1"), some(r#"{"temperature":0}"#), some(seed)];
        let mut runs: Vec<[Option<String>; 5]> = (0..7).map(|i| full(&i.to_string())).collect();
        runs.push([None, None, some("cfg-2"), some(r#"{"temperature":0}"#), None]);
        runs.push([some("env 2"), some("task@v2"), some("cfg-1"), None, some("0")]);
        let r = Reproducibility::of(&runs);
        assert_eq!((r.runs, r.reproducible_runs), (9, 7));
        let by = |n: &str| r.artefacts.iter().find(|a| a.name == n).unwrap();
        assert_eq!((by("environment_version").recorded, by("environment_version").distinct), (8, 2));
        assert_eq!(by("environment_version").values[0], ArtefactValue { value: "env 1".into(), runs: 7 });
        assert_eq!((by("decoding").recorded, by("seed").recorded, by("seed").distinct), (8, 8, 7));
        let seeds: Vec<(&str, u64)> = by("seed").values.iter().map(|v| (v.value.as_str(), v.runs)).collect();
        assert_eq!(seeds, [("0", 2), ("1", 1), ("2", 1), ("3", 1), ("4", 1)], "most runs first, then by value; five at most");
        assert_eq!(r.artefacts.iter().map(|a| a.name).collect::<Vec<_>>(), ARTEFACTS);
    }

    fn metric(id: &str, estimate: f64, na: Option<&str>) -> ProfileMetric {
        ProfileMetric {
            metric: id.into(),
            dimension: "capability".into(),
            benchmark: None,
            units: 100,
            estimate: Some(estimate),
            ci_low: Some(estimate - 0.05),
            ci_high: Some(estimate + 0.05),
            band: None,
            band_low: None,
            band_high: None,
            na_reason: na.map(String::from),
            veto_state: None,
            pool_version: None,
        }
    }

    /// The sample-size rule on gate lines: a gated rate says how many units resolve its gap
    /// (n ≈ z²p(1−p)/δ² at its estimate; 0.5 when not measured); a continuous metric does not.
    #[test]
    fn gate_lines_say_how_many_units_resolve_the_gap() {
        let mut cfg = ProfilerConfig::default();
        cfg.gates.insert("task_success".into(), Thresholds::new(0.80, 0.85));
        cfg.gates.insert("tool_error_rate".into(), Thresholds::new(0.20, 0.10));
        cfg.gates.insert("latency_per_run".into(), Thresholds::new(2000.0, 500.0));
        let verified: BTreeMap<String, BTreeMap<String, u64>> =
            [("task_success".to_string(), [("verifier".to_string(), 100)].into())].into();
        let lines = gate_lines(
            &cfg,
            &[metric("task_success", 0.85, None), metric("latency_per_run", 900.0, None)],
            &verified,
            None,
            &Default::default(),
        );
        let line = |id: &str| lines.iter().find(|l| l.metric == id).unwrap();
        // The method's example: a 5-point gap at p̂ 0.85 needs 196 units (this period has 100).
        assert_eq!((line("task_success").units, line("task_success").units_needed), (100, Some(196)));
        // Not measured: the worst case p = 0.5 over a 10-point gap.
        assert_eq!((line("tool_error_rate").units, line("tool_error_rate").units_needed), (0, Some(97)));
        assert_eq!(line("latency_per_run").units_needed, None, "not a rate");
    }

    /// Judge-based success enters a gate only with κ ≥ 0.6 on enough labelled runs, graders
    /// who agree (α ≥ 0.6 among ≥ 2 humans) and on its prediction-powered estimate, never the
    /// judge's own mean; a failing metric decides a conjunctive gate even while another is N/A.
    #[test]
    fn gates_need_checked_judges_and_never_self_assessment() {
        let mut cfg = ProfilerConfig::default();
        cfg.gates.insert("task_success".into(), Thresholds::new(0.5, 0.9));
        let judged: BTreeMap<String, BTreeMap<String, u64>> =
            [("task_success".to_string(), [("judge".to_string(), 80), ("human".to_string(), 20)].into())].into();
        let metrics = vec![metric("task_success", 0.8, None)];
        // A lenient judge: it passes 80 % where humans, rectifying it, give 0.42 [0.35, 0.49].
        let ppi = octant_core::stats::ppi::PpiEstimate {
            estimate: 0.42,
            lo: 0.35,
            hi: 0.49,
            std_error: 0.036,
            judge_only: 0.8,
            rectifier: -0.38,
        };
        let agreement = |labelled, kappa| Agreement {
            judged: 100,
            labelled,
            judge_threshold: 0.5,
            kappa: Some(kappa),
            kappa_se: None,
            kappa_interval: None,
            kappa_band: None,
            kappa_band_interval: None,
            ppi: Some(ppi),
        };
        let graders = |humans: u64, alpha: f64| crate::meta::MetaEvaluation {
            raters: vec![crate::meta::RaterReport { name: "task_success".into(), humans, human_alpha: Some(alpha), ..Default::default() }],
            ..Default::default()
        };
        let agreeing = graders(2, 0.81);
        let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(40, 0.72)), &agreeing);
        // Gated on the PPI (fail: its interval lies below the outer 0.5), not on the judge's
        // 0.8 (conditional).
        assert_eq!((lines[0].outcome, lines[0].na_reason.as_deref()), (Some(GateOutcome::Fail), None));
        assert_eq!((lines[0].estimate, lines[0].ci_low, lines[0].ci_high), (Some(0.42), Some(0.35), Some(0.49)));
        assert!(lines[0].estimator.as_deref().unwrap().contains("prediction-powered"));
        // Graders who disagree, or whose agreement is unmeasured, keep human grading out.
        // A benchmark's judged success has no PPI of its own: N/A, never the judge's mean.
        let per_bench = vec![ProfileMetric { benchmark: Some("suite".into()), ..metric("task_success", 0.8, None) }];
        let line = &gate_lines(&cfg, &per_bench, &judged, Some(&agreement(40, 0.72)), &agreeing)[0];
        assert_eq!(line.outcome, None);
        assert!(line.na_reason.as_deref().unwrap().contains("not computed per benchmark"));
        let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(40, 0.72)), &graders(3, 0.45));
        assert!(lines[0].na_reason.as_deref().unwrap().contains("3 human graders agree at α 0.45 (< 0.6)"), "{:?}", lines[0].na_reason);
        let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(40, 0.72)), &graders(1, 0.9));
        assert!(lines[0].na_reason.as_deref().unwrap().contains("no agreement among human graders measured"));
        let humans_only: BTreeMap<String, BTreeMap<String, u64>> =
            [("task_success".to_string(), [("human".to_string(), 30)].into())].into();
        assert!(
            gate_lines(&cfg, &metrics, &humans_only, None, &Default::default())[0]
                .na_reason
                .as_deref()
                .unwrap()
                .contains("30 runs rest on human verdicts")
        );
        assert_eq!(gate_lines(&cfg, &metrics, &humans_only, None, &agreeing)[0].outcome, Some(GateOutcome::Conditional));
        let mixed: BTreeMap<String, BTreeMap<String, u64>> =
            [("task_success".to_string(), [("judge".to_string(), 80), ("verifier".to_string(), 20)].into())].into();
        assert!(
            gate_lines(&cfg, &metrics, &mixed, Some(&agreement(40, 0.72)), &agreeing)[0]
                .na_reason
                .as_deref()
                .unwrap()
                .contains("gate each source apart")
        );
        // Without the PPI (too few human verdicts) judged success is not gated.
        let no_ppi = Agreement { ppi: None, ..agreement(40, 0.72) };
        assert!(
            gate_lines(&cfg, &metrics, &judged, Some(&no_ppi), &agreeing)[0].na_reason.as_deref().unwrap().contains("prediction-powered")
        );
        let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(40, 0.45)), &agreeing);
        assert_eq!(
            lines[0].na_reason.as_deref(),
            Some("80 runs judged by an LLM judge whose agreement with humans is κ 0.45 (< 0.6) on 40 labelled runs")
        );
        let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(12, 0.9)), &agreeing);
        assert!(lines[0].na_reason.as_deref().unwrap().contains("only 12 labelled runs (< 30)"));
        assert!(
            gate_lines(&cfg, &metrics, &judged, None, &agreeing)[0]
                .na_reason
                .as_deref()
                .unwrap()
                .contains("never checked against human verdicts")
        );
        // Verified success needs no judge check.
        let verified: BTreeMap<String, BTreeMap<String, u64>> =
            [("task_success".to_string(), [("verifier".to_string(), 100)].into())].into();
        assert_eq!(gate_lines(&cfg, &metrics, &verified, None, &Default::default())[0].outcome, Some(GateOutcome::Conditional));
        // Self-assessment is never gated unless configured.
        let mut sr = cfg.clone();
        sr.gates = [("task_success_self_reported".to_string(), Thresholds::new(0.5, 0.9))].into();
        let self_only = vec![metric("task_success_self_reported", 0.97, None)];
        assert!(
            gate_lines(&sr, &self_only, &BTreeMap::new(), None, &Default::default())[0]
                .na_reason
                .as_deref()
                .unwrap()
                .contains("never gated")
        );
        sr.gate_self_reported = true;
        assert!(sr.check().unwrap_err().contains("never a gated metric"), "the old opt-in is refused");
        // A failing metric decides the gate while another is N/A.
        cfg.gates.insert("unsafe_action_rate".into(), Thresholds::new(0.2, 0.05));
        let both =
            vec![metric("task_success", 0.8, Some("insufficient evidence (task_success 12/30)")), metric("unsafe_action_rate", 0.3, None)];
        let lines = gate_lines(&cfg, &both, &verified, None, &Default::default());
        assert_eq!(gate_summary(&cfg, &lines).0, Some(GateOutcome::Fail));
        let passing =
            vec![metric("task_success", 0.8, Some("insufficient evidence (task_success 12/30)")), metric("unsafe_action_rate", 0.01, None)];
        assert_eq!(gate_summary(&cfg, &gate_lines(&cfg, &passing, &verified, None, &Default::default())).0, None);
    }

    /// Seed 002 §6: EI = Σ w·ν with charter weights that sum to 1; a metric gated on two
    /// benchmarks shares its weight (0.5 · (1 + 1)/2 + 0.5 · 0 = 0.5, not 1.0), and EI_G at
    /// ν = 1 everywhere is 1.
    #[test]
    fn the_efficacy_index_weighs_each_metric_once() {
        let mut cfg = ProfilerConfig::default();
        cfg.gates.insert("task_success".into(), Thresholds::new(0.5, 0.9));
        cfg.gates.insert("unsafe_action_rate".into(), Thresholds::new(0.2, 0.05));
        cfg.weights = [("task_success".to_string(), 0.5), ("unsafe_action_rate".to_string(), 0.5)].into();
        cfg.check().unwrap();
        let line = |metric: &str, t: Thresholds, e: f64| GateLine {
            metric: metric.into(),
            thresholds: t,
            estimate: Some(e),
            ci_low: Some(e),
            ci_high: Some(e),
            nu: None,
            nu_conservative: None,
            outcome: Some(GateOutcome::Pass),
            na_reason: None,
            units: 100,
            units_needed: None,
            estimator: None,
        };
        let lines = [
            line("task_success@a", Thresholds::new(0.5, 0.9), 0.9),
            line("task_success@b", Thresholds::new(0.5, 0.9), 0.9),
            line("unsafe_action_rate", Thresholds::new(0.2, 0.05), 0.2),
        ];
        let (_, ei, _) = gate_summary(&cfg, &lines);
        assert!((ei.unwrap() - 0.5).abs() < 1e-12, "{ei:?}");
        let all_one = [line("task_success", Thresholds::new(0.5, 0.9), 0.9), line("unsafe_action_rate", Thresholds::new(0.2, 0.05), 0.05)];
        let (_, ei, ei_g) = gate_summary(&cfg, &all_one);
        assert!((ei.unwrap() - 1.0).abs() < 1e-12 && (ei_g.unwrap() - 1.0).abs() < 1e-12, "{ei:?} {ei_g:?}");
        cfg.weights.insert("unsafe_action_rate".into(), 0.7);
        assert!(cfg.check().unwrap_err().contains("sum to 1"));
        cfg.weights = [("task_success".to_string(), 1.5), ("unsafe_action_rate".to_string(), -0.5)].into();
        assert!(cfg.check().unwrap_err().contains("non-negative"));
    }

    /// A session opened on a lake without observations never stores hours.
    #[tokio::test]
    async fn a_session_opened_before_any_file_does_not_store() {
        let dir = std::env::temp_dir().join(format!("octant-empty-lake-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ctx = octant_lake::reader::open(&dir).await.unwrap();
        assert!(!lists_observation_files(&ctx).await);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sql_literals_are_quoted() {
        assert_eq!(lit("a'b"), "'a''b'");
        let p = Period { name: "24h".into(), start: 0, end: 86_400_000 };
        assert!(period_filter(&p, "event_time", Some("x'y")).ends_with("system_id = 'x''y'"));
    }
}
