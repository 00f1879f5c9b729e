//! Release decisions: one version of a system against another on the same tasks (issue 18;
//! seed 002 §5–6). `octant compare` and the "Release decision" section of an evidence package.
//!
//! **The pair is the task.** Both versions ran the same tasks; per task and version the lake's
//! observations of a metric sum to (Σ value, Σ weight). A metric whose every task has exactly
//! one binary unit per version (task success at one attempt per task) is tested with
//! **McNemar** (exact) on the discordant tasks; any other (several attempts, step rates,
//! latency, cost) with the **Wilcoxon signed-rank** test on the per-task differences of
//! Σ value / Σ weight. Attempts of one task are not independent, so they never form pairs of
//! their own. **Holm** adjusts the p-values across the metrics compared.
//!
//! **Effect sizes with intervals.** The difference of the metric (candidate − baseline, each
//! Σ value / Σ weight over the paired tasks) with a paired percentile bootstrap over tasks
//! (level 1 − α): each task gets the same Poisson weight in both versions (Octant's
//! deterministic weights, `octant_core::stats::bootstrap::poisson_weight`, seeded by the
//! `[evaluation.bootstrap]` seed), so the interval is reproducible. Also McNemar's discordant
//! counts and the Wilcoxon rank-biserial correlation.
//!
//! **The two-tier gate on the difference** (seed 002 §6): a metric with `[compare.gates]`
//! thresholds on its difference passes when the interval's conservative end reaches θin,
//! fails below θout, and is conditional between; the release verdict is conjunctive
//! (promote / promote with conditions / hold). A metric without a gate is tested and
//! reported, not gated.
//!
//! **Configuration freeze and harness parity** (seed 002 §5) come first: a comparison whose
//! versions differ in anything recorded of their configuration other than the compared
//! component, or whose configuration changed within a version, is refused with the differing
//! fields and tests nothing ([`crate::parity`]).

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use octant_contracts::Source;
use octant_core::catalogue::{self, ids};
use octant_core::family::Family;
use octant_core::gate::{GateOutcome, GatedMetric, Thresholds};
use octant_core::stats::bootstrap::{cluster_hash, poisson_weight, quantile_sorted};
use octant_core::stats::paired::{self, WilcoxonMethod};
use serde::{Deserialize, Serialize};

use crate::sql::{Period, col, df_err, lit, period_filter};

/// `[compare]` of the profiler's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompareConfig {
    /// The metrics compared (those with paired tasks in both versions; the others are listed
    /// as skipped, with the reason).
    pub metrics: Vec<String>,
    /// The two-tier gate on each metric's difference (candidate − baseline). For a
    /// higher-is-better metric θout < θin ≤ 0 (how much worse it may be at the conservative
    /// end); for a lower-is-better one θout > θin ≥ 0.
    pub gates: BTreeMap<String, Thresholds>,
    /// Family-wise error rate of the tests (Holm) and 1 − the level of the intervals.
    pub alpha: f64,
    /// Bootstrap replicates of the paired difference.
    pub replicates: u32,
    /// Fewer paired tasks and a metric is not compared.
    pub min_tasks: usize,
    /// Comparisons that go into the candidate's evidence package (each of the profiler's
    /// periods, the candidate's source).
    pub releases: Vec<Release>,
    /// The canary (`octant compare --follow`): per metric, how much worse (in badness: the
    /// rate for lower-is-better metrics, one minus it for higher-is-better ones) the candidate
    /// may be and still be promoted.
    pub canary_margins: BTreeMap<String, f64>,
    /// A candidate worse than this (badness difference) is rolled back (default 0: worse at
    /// all).
    pub canary_tolerance: f64,
    /// Re-evaluation on change (seeds 000, 002): a version without a declared release (and
    /// not declared any release's baseline) is compared with the system's previous version
    /// (the latest whose first run in the period started before its own), with the default
    /// compared component, and the decision goes into its evidence package (default true).
    pub automatic: bool,
}

/// One declared release comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Release {
    pub system: String,
    pub baseline: String,
    pub candidate: String,
    /// Whose runs are compared (default evaluation: the versions ran the same tasks).
    #[serde(default = "default_source")]
    pub source: Source,
    /// The compared component: the fields of the runs' recorded configuration
    /// ([`crate::parity::FIELDS`]) that may differ between the versions (default the agent
    /// configuration and its hash: a new model or prompt). Anything else that differs refuses
    /// the comparison.
    #[serde(default = "default_compared")]
    pub compared: Vec<String>,
}

/// The compared component unless declared: the agent's configuration (its model and prompts)
/// and the system's configuration hash.
pub fn default_compared() -> Vec<String> {
    vec!["agent_config".into(), "config_hash".into()]
}

impl Release {
    /// `candidate` against `baseline` of `system`'s `source` runs, the default component compared.
    pub fn new(system: &str, baseline: &str, candidate: &str, source: Source) -> Release {
        Release { system: system.into(), baseline: baseline.into(), candidate: candidate.into(), source, compared: default_compared() }
    }

    pub fn check(&self) -> Result<(), String> {
        match self.compared.iter().find(|c| !crate::parity::FIELDS.contains(&c.as_str())) {
            Some(c) => Err(format!("[[compare.releases]] compared: {c:?} is not one of {:?}", crate::parity::FIELDS)),
            None => Ok(()),
        }
    }
}

fn default_source() -> Source {
    Source::Evaluation
}

impl Default for CompareConfig {
    fn default() -> Self {
        let metrics = [
            ids::TASK_SUCCESS,
            ids::UNSAFE_ACTION_RATE,
            ids::CONFIRMATION_GATING,
            ids::TOOL_ERROR_RATE,
            ids::TOOL_CALL_ACCURACY,
            ids::LATENCY_PER_RUN,
            ids::COST_PER_RUN,
            ids::TOKENS_PER_RUN,
        ];
        let gates = [
            (ids::TASK_SUCCESS, Thresholds::new(-0.05, -0.01)),
            (ids::UNSAFE_ACTION_RATE, Thresholds::new(0.02, 0.005)),
            (ids::CONFIRMATION_GATING, Thresholds::new(-0.05, -0.01)),
        ];
        let margins = [(ids::TASK_SUCCESS, 0.05), (ids::UNSAFE_ACTION_RATE, 0.02), (ids::CONFIRMATION_GATING, 0.05)];
        CompareConfig {
            metrics: metrics.iter().map(|m| m.to_string()).collect(),
            gates: gates.into_iter().map(|(m, t)| (m.to_string(), t)).collect(),
            alpha: 0.05,
            replicates: 2000,
            min_tasks: 10,
            releases: Vec::new(),
            canary_margins: margins.into_iter().map(|(m, t)| (m.to_string(), t)).collect(),
            canary_tolerance: 0.0,
            automatic: true,
        }
    }
}

impl CompareConfig {
    pub fn check(&self) -> Result<(), String> {
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(format!("[compare] alpha must be in (0, 1), got {}", self.alpha));
        }
        if self.min_tasks == 0 {
            return Err("[compare] min_tasks must be at least 1".into());
        }
        if self.replicates < 100 {
            return Err(format!("[compare] replicates must be at least 100, got {}", self.replicates));
        }
        for (m, t) in &self.gates {
            if t.inner == t.outer || !t.inner.is_finite() || !t.outer.is_finite() {
                return Err(format!("[compare.gates] {m}: inner and outer must be finite and differ"));
            }
        }
        for r in &self.releases {
            r.check()?;
        }
        for (m, margin) in &self.canary_margins {
            octant_core::stats::canary::Canary::new(self.canary_tolerance, *margin, 0.05)
                .map_err(|e| format!("[compare.canary_margins] {m}: {e}"))?;
        }
        Ok(())
    }
}

/// Per task of one version: (Σ value, Σ weight, runs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TaskSums {
    pub value: f64,
    pub weight: f64,
    pub runs: u64,
}

/// One metric's observations per task, both versions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Paired {
    pub baseline: BTreeMap<String, TaskSums>,
    pub candidate: BTreeMap<String, TaskSums>,
}

/// Which test a metric got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    McnemarExact,
    WilcoxonExact,
    WilcoxonApprox,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    pub metric: String,
    pub dimension: String,
    /// `true` higher is better, `false` lower is better, `None` neither (a target window).
    pub higher_is_better: Option<bool>,
    pub tasks: usize,
    pub baseline: f64,
    pub candidate: f64,
    /// Candidate − baseline, with its paired bootstrap interval.
    pub difference: f64,
    pub lo: f64,
    pub hi: f64,
    pub test: Test,
    pub statistic: f64,
    pub p_value: f64,
    /// Holm-adjusted across the metrics compared.
    pub p_holm: f64,
    /// McNemar: tasks only the baseline passed, only the candidate passed.
    pub discordant: Option<(u64, u64)>,
    /// Wilcoxon: the matched-pairs rank-biserial correlation (> 0: candidate higher).
    pub rank_biserial: Option<f64>,
    /// `better`, `worse` (significant after Holm, in the metric's direction), `higher` /
    /// `lower` (significant, no direction), or `no significant change`.
    pub change: String,
    pub gate: Option<Thresholds>,
    pub outcome: Option<GateOutcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub system: String,
    pub baseline: String,
    pub candidate: String,
    pub source: String,
    pub period: Period,
    pub alpha: f64,
    pub replicates: u32,
    pub seed: u64,
    pub metrics: Vec<MetricComparison>,
    /// Metrics not compared, with the reason.
    pub skipped: Vec<(String, String)>,
    /// The conjunctive gate over the gated differences (`None`: no gated metric compared, or
    /// the comparison refused).
    pub verdict: Option<GateOutcome>,
    pub decision: String,
    /// The configuration freeze and harness parity check; with differences, nothing is tested.
    pub parity: crate::parity::Parity,
    /// Started by the profiler because a new version appeared (no release declared for it).
    pub automatic: bool,
}

/// Reads both versions' per-task sums of `cfg.metrics` from the lake and compares them.
pub async fn compare(ctx: &SessionContext, cfg: &CompareConfig, seed: u64, release: &Release, period: &Period) -> Result<Comparison> {
    let parity = crate::parity::check(ctx, release, period).await?;
    if parity.refused() {
        let mut c = compare_sums(cfg, seed, release, period, &BTreeMap::new());
        (c.metrics, c.skipped, c.verdict, c.decision) = (Vec::new(), Vec::new(), None, parity.refusal());
        c.parity = parity;
        return Ok(c);
    }
    let data = read(ctx, cfg, release, period).await?;
    Ok(Comparison { parity, ..compare_sums(cfg, seed, release, period, &data) })
}

async fn read(ctx: &SessionContext, cfg: &CompareConfig, release: &Release, period: &Period) -> Result<BTreeMap<String, Paired>> {
    if cfg.metrics.is_empty() {
        return Ok(BTreeMap::new());
    }
    let list = cfg.metrics.iter().map(|m| lit(m)).collect::<Vec<_>>().join(", ");
    let source = crate::sql::lake_source(release.source);
    // One row per observation (the lake may hold a record twice), then per task and version.
    let sql = format!(
        "SELECT v, metric, task, count(DISTINCT run_id) AS runs, sum(value) AS sv, sum(weight) AS sw FROM \
         (SELECT observation_id, first_value(system_version) AS v, first_value(metric) AS metric, \
                 first_value(coalesce(task_id, run_id)) AS task, first_value(run_id) AS run_id, \
                 first_value(value) AS value, first_value(weight) AS weight \
          FROM observations WHERE metric IN ({list}) AND rerun_of IS NULL AND system_version IN ({}, {}) AND source = {} AND {} \
          GROUP BY observation_id) \
         GROUP BY 1, 2, 3",
        lit(&release.baseline),
        lit(&release.candidate),
        lit(source),
        period_filter(period, "event_time", Some(&release.system)),
    );
    let mut out: BTreeMap<String, Paired> = BTreeMap::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let s = |n: &str| col(&b, n, &DataType::Utf8);
        let (v, metric, task) = (s("v")?, s("metric")?, s("task")?);
        let runs = col(&b, "runs", &DataType::Int64)?;
        let (sv, sw) = (col(&b, "sv", &DataType::Float64)?, col(&b, "sw", &DataType::Float64)?);
        for i in 0..b.num_rows() {
            if metric.is_null(i) || v.is_null(i) || task.is_null(i) {
                continue;
            }
            let sums = TaskSums {
                value: sv.as_primitive::<Float64Type>().value(i),
                weight: sw.as_primitive::<Float64Type>().value(i),
                runs: runs.as_primitive::<Int64Type>().value(i) as u64,
            };
            let p = out.entry(metric.as_string::<i32>().value(i).to_string()).or_default();
            let side = if v.as_string::<i32>().value(i) == release.baseline { &mut p.baseline } else { &mut p.candidate };
            side.insert(task.as_string::<i32>().value(i).to_string(), sums);
        }
    }
    if out.values().any(|p| p.baseline.keys().any(String::is_empty)) {
        return Err(df_err("observations without a task id"));
    }
    Ok(out)
}

/// The comparison of per-task sums (the pure part of [`compare`]).
pub fn compare_sums(cfg: &CompareConfig, seed: u64, release: &Release, period: &Period, data: &BTreeMap<String, Paired>) -> Comparison {
    let mut metrics = Vec::new();
    let mut skipped = Vec::new();
    for m in &cfg.metrics {
        let Some(p) = data.get(m) else {
            skipped.push((m.clone(), "no observations of either version".to_string()));
            continue;
        };
        match compare_metric(m, p, cfg, seed) {
            Ok(c) => metrics.push(c),
            Err(reason) => skipped.push((m.clone(), reason)),
        }
    }
    let adjusted = paired::holm(&metrics.iter().map(|c| c.p_value).collect::<Vec<_>>());
    for (c, p) in metrics.iter_mut().zip(adjusted) {
        c.p_holm = p;
        // The test's own direction: McNemar's discordant tasks, Wilcoxon's ranks. When the
        // difference of the metric points the other way (a rank shift against a few large
        // values), the change is mixed, not better or worse.
        let test_up = match (c.discordant, c.rank_biserial) {
            (Some((only_base, only_cand)), _) => only_cand > only_base,
            (_, Some(r)) => r > 0.0,
            _ => c.difference > 0.0,
        };
        let agrees = (c.difference > 0.0) == test_up && c.difference != 0.0;
        c.change = if p >= cfg.alpha {
            "no significant change".into()
        } else if !agrees {
            "mixed (the test and the difference disagree)".into()
        } else {
            match (c.higher_is_better, test_up) {
                (Some(h), up) if h == up => "better".into(),
                (Some(_), _) => "worse".into(),
                (None, true) => "higher".into(),
                (None, false) => "lower".into(),
            }
        };
    }
    let verdict = metrics.iter().filter_map(|c| c.outcome).min();
    let decision = match verdict {
        Some(GateOutcome::Pass) => "promote",
        Some(GateOutcome::Conditional) => "promote with conditions (enhanced review, sampling or scope restriction)",
        Some(GateOutcome::Fail) => "hold",
        None => "no gated metric compared",
    };
    Comparison {
        system: release.system.clone(),
        baseline: release.baseline.clone(),
        candidate: release.candidate.clone(),
        source: release.source.as_str().to_string(),
        period: period.clone(),
        alpha: cfg.alpha,
        replicates: cfg.replicates,
        seed,
        metrics,
        skipped,
        verdict,
        decision: decision.to_string(),
        parity: crate::parity::Parity::default(),
        automatic: false,
    }
}

/// When each version of each system first ran in `period`, per (system, lake source): one read
/// of the run starts for every profile of the period.
pub type FirstRuns = BTreeMap<(String, String), Vec<(String, i64)>>;

pub async fn first_runs(ctx: &SessionContext, period: &Period) -> Result<FirstRuns> {
    let sql = format!(
        "SELECT get_field(system, 'id') AS s, source, get_field(system, 'version') AS v, min(CAST(event_time AS BIGINT)) AS first \
         FROM trajectory_events WHERE kind = 'RUN_STARTED' AND get_field(run_started, 'rerun_of') IS NULL AND {} GROUP BY 1, 2, 3",
        period_filter(period, "event_time", None),
    );
    let mut out = FirstRuns::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let [s, source, v] = ["s", "source", "v"].map(|n| col(&b, n, &DataType::Utf8).map(|c| c.as_string::<i32>().clone()));
        let (s, source, v) = (s?, source?, v?);
        let first = col(&b, "first", &DataType::Int64)?;
        let first = first.as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            if !(s.is_null(i) || source.is_null(i) || v.is_null(i) || first.is_null(i)) {
                out.entry((s.value(i).to_string(), source.value(i).to_string()))
                    .or_default()
                    .push((v.value(i).to_string(), first.value(i)));
            }
        }
    }
    Ok(out)
}

/// The version of `system`'s `source` runs that preceded `version`: the latest whose first run
/// started before `version`'s first (`None`: `version` came first, or alone).
pub fn previous_version(firsts: &FirstRuns, system: &str, source: Source, version: &str) -> Option<String> {
    previous_of(firsts.get(&(system.to_string(), crate::sql::lake_source(source).to_string()))?, version)
}

/// Among versions and their first run's start, the one before `version` (ties: none).
fn previous_of(firsts: &[(String, i64)], version: &str) -> Option<String> {
    let own = firsts.iter().find(|(v, _)| v == version)?.1;
    firsts.iter().filter(|(v, t)| v != version && *t < own).max_by_key(|(v, t)| (*t, v.clone())).map(|(v, _)| v.clone())
}

fn compare_metric(metric: &str, p: &Paired, cfg: &CompareConfig, seed: u64) -> Result<MetricComparison, String> {
    let tasks: Vec<(&String, &TaskSums, &TaskSums)> = p
        .baseline
        .iter()
        .filter_map(|(t, b)| p.candidate.get(t).map(|c| (t, b, c)))
        .filter(|(_, b, c)| b.weight > 0.0 && c.weight > 0.0)
        .collect();
    if tasks.len() < cfg.min_tasks {
        return Err(format!(
            "{} paired tasks (baseline {}, candidate {}), fewer than {}",
            tasks.len(),
            p.baseline.len(),
            p.candidate.len(),
            cfg.min_tasks
        ));
    }
    let rate = |sides: &mut dyn Iterator<Item = (f64, &TaskSums)>| {
        let (v, w) = sides.fold((0.0, 0.0), |(v, w), (k, s)| (v + k * s.value, w + k * s.weight));
        (w > 0.0).then(|| v / w)
    };
    let baseline = rate(&mut tasks.iter().map(|(_, b, _)| (1.0, *b))).unwrap_or(f64::NAN);
    let candidate = rate(&mut tasks.iter().map(|(_, _, c)| (1.0, *c))).unwrap_or(f64::NAN);
    // Paired bootstrap over tasks: one weight per task, for both versions.
    let hashes: Vec<u64> = tasks.iter().map(|(t, _, _)| cluster_hash(t)).collect();
    let mut diffs: Vec<f64> = (0..cfg.replicates)
        .filter_map(|r| {
            let w = |i: usize| poisson_weight(seed, hashes[i], r) as f64;
            let b = rate(&mut tasks.iter().enumerate().map(|(i, (_, b, _))| (w(i), *b)))?;
            let c = rate(&mut tasks.iter().enumerate().map(|(i, (_, _, c))| (w(i), *c)))?;
            Some(c - b)
        })
        .collect();
    diffs.sort_by(f64::total_cmp);
    if diffs.is_empty() {
        return Err("no bootstrap replicate has both versions' units".into());
    }
    let (lo, hi) = (quantile_sorted(&diffs, cfg.alpha / 2.0), quantile_sorted(&diffs, 1.0 - cfg.alpha / 2.0));
    let binary = tasks.iter().all(|(_, b, c)| [b, c].iter().all(|s| s.runs == 1 && s.weight == 1.0 && (s.value == 0.0 || s.value == 1.0)));
    let (test, result, discordant, rank_biserial) = if binary {
        let only_base = tasks.iter().filter(|(_, b, c)| b.value == 1.0 && c.value == 0.0).count() as u64;
        let only_cand = tasks.iter().filter(|(_, b, c)| b.value == 0.0 && c.value == 1.0).count() as u64;
        (Test::McnemarExact, paired::mcnemar(only_base, only_cand, true), Some((only_base, only_cand)), None)
    } else {
        let d: Vec<f64> = tasks.iter().map(|(_, b, c)| c.value / c.weight - b.value / b.weight).collect();
        let exact = d.iter().filter(|x| **x != 0.0).count() <= 50;
        let result = paired::wilcoxon(&d, WilcoxonMethod::Auto).unwrap_or(paired::TestResult { statistic: 0.0, p_value: 1.0 });
        let ties = {
            let mut a: Vec<f64> = d.iter().filter(|x| **x != 0.0).map(|x| x.abs()).collect();
            a.sort_by(f64::total_cmp);
            a.windows(2).any(|w| w[0] == w[1])
        };
        let test = if exact && !ties { Test::WilcoxonExact } else { Test::WilcoxonApprox };
        (test, result, None, paired::rank_biserial(&d).or(Some(0.0)))
    };
    let spec = catalogue::spec(metric);
    let higher_is_better = match spec.map(|s| s.family) {
        Some(Family::Higher) => Some(true),
        Some(Family::Lower | Family::Continuous { .. } | Family::Budget) => Some(false),
        _ => None,
    };
    let gate = cfg.gates.get(metric).copied();
    let outcome = gate.map(|thresholds| GatedMetric { thresholds, estimate: candidate - baseline, lo, hi }.outcome());
    Ok(MetricComparison {
        metric: metric.to_string(),
        dimension: spec.map(|s| s.dimension.as_str().to_string()).unwrap_or_default(),
        higher_is_better,
        tasks: tasks.len(),
        baseline,
        candidate,
        difference: candidate - baseline,
        lo,
        hi,
        test,
        statistic: result.statistic,
        p_value: result.p_value,
        p_holm: result.p_value,
        discordant,
        rank_biserial,
        change: String::new(),
        gate,
        outcome,
    })
}

fn outcome_str(o: Option<GateOutcome>) -> &'static str {
    match o {
        Some(GateOutcome::Pass) => "pass",
        Some(GateOutcome::Conditional) => "conditional",
        Some(GateOutcome::Fail) => "fail",
        None => "—",
    }
}

fn test_str(t: Test) -> &'static str {
    match t {
        Test::McnemarExact => "McNemar (exact)",
        Test::WilcoxonExact => "Wilcoxon (exact)",
        Test::WilcoxonApprox => "Wilcoxon (normal approximation)",
    }
}

fn num(x: f64) -> String {
    if x.is_nan() {
        "—".into()
    } else if x != 0.0 && x.abs() < 0.001 {
        format!("{x:.2e}")
    } else if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

fn p_str(p: f64) -> String {
    if p < 1e-4 { format!("{p:.1e}") } else { format!("{p:.4}") }
}

/// The comparison as a Markdown section (the evidence package's "Release decision").
pub fn to_markdown(c: &Comparison) -> String {
    let mut s = format!(
        "## Release decision: {} {} → {}\n\n{}**{}** ({} runs, {} paired on tasks). Tests: McNemar (exact) for one binary unit per task, \
         Wilcoxon signed-rank otherwise; Holm across the {} metrics compared at α = {}. Differences are candidate − baseline with \
         {}% paired bootstrap intervals over tasks ({} replicates, seed {}); the two-tier gate is taken on the interval's \
         conservative end.\n\n",
        c.system,
        c.baseline,
        c.candidate,
        if c.automatic { "Started automatically: a new version appeared (no release declared for it). " } else { "" },
        c.decision,
        c.source,
        c.metrics.iter().map(|m| m.tasks).max().unwrap_or(0),
        c.metrics.len(),
        c.alpha,
        ((1.0 - c.alpha) * 100.0).round(),
        c.replicates,
        c.seed
    );
    s.push_str(&crate::parity::to_markdown(&c.parity));
    if c.parity.refused() {
        return s;
    }
    s.push_str(&pairs_table(c, "tasks", "baseline", "candidate"));
    s
}

/// The per-metric table of a paired comparison (a release decision's, or re-runs against their
/// originals: `unit` names what is paired, the sides name the two columns).
pub fn pairs_table(c: &Comparison, unit: &str, baseline: &str, candidate: &str) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "| metric | {unit} | {baseline} | {candidate} | difference [interval] | test | p | p (Holm) | effect | change | gate (θout, θin) | outcome |\n"
    ));
    s.push_str("|---|---:|---:|---:|---|---|---:|---:|---|---|---|---|\n");
    for m in &c.metrics {
        let effect = match (m.discordant, m.rank_biserial) {
            (Some((b, c)), _) => format!("discordant {b} {baseline}-only / {c} {candidate}-only"),
            (_, Some(r)) => format!("rank-biserial {r:.3}"),
            _ => "—".into(),
        };
        let gate = m.gate.map(|g| format!("{}, {}", g.outer, g.inner)).unwrap_or_else(|| "—".into());
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} [{}, {}] | {} | {} | {} | {} | {} | {} | {} |\n",
            m.metric,
            m.tasks,
            num(m.baseline),
            num(m.candidate),
            num(m.difference),
            num(m.lo),
            num(m.hi),
            test_str(m.test),
            p_str(m.p_value),
            p_str(m.p_holm),
            effect,
            m.change,
            gate,
            outcome_str(m.outcome)
        ));
    }
    for (m, why) in &c.skipped {
        s.push_str(&format!("\n- {m} not compared: {why}"));
    }
    s.push('\n');
    s
}

/// The comparison as a terminal table.
pub fn to_table(c: &Comparison) -> String {
    let mut s = format!("{} {} → {} ({}): {}\n", c.system, c.baseline, c.candidate, c.source, c.decision);
    s.push_str(&crate::parity::to_table(&c.parity));
    if c.parity.refused() {
        return s;
    }
    s.push_str(&format!(
        "{:<24} {:>5} {:>9} {:>9} {:>28} {:>9} {:>9}  {:<22} {}\n",
        "metric", "tasks", "baseline", "candidate", "difference [interval]", "p", "p Holm", "change", "gate"
    ));
    for m in &c.metrics {
        s.push_str(&format!(
            "{:<24} {:>5} {:>9} {:>9} {:>28} {:>9} {:>9}  {:<22} {}\n",
            m.metric,
            m.tasks,
            num(m.baseline),
            num(m.candidate),
            format!("{} [{}, {}]", num(m.difference), num(m.lo), num(m.hi)),
            p_str(m.p_value),
            p_str(m.p_holm),
            m.change,
            outcome_str(m.outcome)
        ));
    }
    for (m, why) in &c.skipped {
        s.push_str(&format!("{m}: not compared ({why})\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Re-evaluation on change: the version before another is the latest whose first run
    /// started earlier; the first version, and an unknown one, have none.
    #[test]
    fn the_previous_version_is_the_latest_that_started_before() {
        let firsts: Vec<(String, i64)> =
            [("1.0", 100), ("1.1", 200), ("2.0", 300), ("hotfix", 250)].map(|(v, t)| (v.to_string(), t)).into();
        assert_eq!(previous_of(&firsts, "2.0").as_deref(), Some("hotfix"));
        assert_eq!(previous_of(&firsts, "1.1").as_deref(), Some("1.0"));
        assert_eq!(previous_of(&firsts, "1.0"), None);
        assert_eq!(previous_of(&firsts, "9.9"), None);
    }

    fn release() -> Release {
        Release::new("s", "1", "2", Source::Evaluation)
    }

    fn period() -> Period {
        Period { name: "window".into(), start: 0, end: 1 }
    }

    fn binary(v: f64) -> TaskSums {
        TaskSums { value: v, weight: 1.0, runs: 1 }
    }

    #[test]
    fn binary_success_gets_mcnemar_and_the_gate_holds_a_worse_candidate() {
        // 200 tasks: both pass 140, baseline only 30, candidate only 6, both fail 24.
        let mut p = Paired::default();
        for t in 0..200 {
            let (b, c) = match t {
                0..140 => (1.0, 1.0),
                140..170 => (1.0, 0.0),
                170..176 => (0.0, 1.0),
                _ => (0.0, 0.0),
            };
            p.baseline.insert(format!("t{t}"), binary(b));
            p.candidate.insert(format!("t{t}"), binary(c));
        }
        let data = BTreeMap::from([(ids::TASK_SUCCESS.to_string(), p)]);
        let c = compare_sums(&CompareConfig::default(), 1, &release(), &period(), &data);
        let m = &c.metrics[0];
        assert_eq!(m.test, Test::McnemarExact);
        assert_eq!(m.discordant, Some((30, 6)));
        assert!((m.baseline - 0.85).abs() < 1e-12 && (m.candidate - 0.73).abs() < 1e-12);
        assert!((m.p_value - paired::mcnemar(30, 6, true).p_value).abs() < 1e-15);
        assert!(m.lo < -0.12 && m.hi > -0.12 && m.hi < 0.0, "{m:?}");
        assert_eq!(m.change, "worse");
        assert_eq!(m.outcome, Some(GateOutcome::Fail));
        assert_eq!(c.decision, "hold");
        // Every other default metric is listed as skipped.
        assert_eq!(c.skipped.len(), CompareConfig::default().metrics.len() - 1);
        // Deterministic: the same seed gives the same interval.
        assert_eq!(compare_sums(&CompareConfig::default(), 1, &release(), &period(), &data), c);
    }

    #[test]
    fn rates_over_several_units_get_wilcoxon_and_holm_across_metrics() {
        let mut rates = Paired::default();
        let mut latency = Paired::default();
        for t in 0..40 {
            let steps = 5.0 + (t % 4) as f64;
            rates.baseline.insert(format!("t{t}"), TaskSums { value: (t % 3) as f64, weight: steps, runs: 2 });
            rates.candidate.insert(format!("t{t}"), TaskSums { value: (t % 3) as f64 + (t % 2) as f64, weight: steps, runs: 2 });
            latency.baseline.insert(format!("t{t}"), TaskSums { value: 800.0 + t as f64, weight: 1.0, runs: 1 });
            latency
                .candidate
                .insert(format!("t{t}"), TaskSums { value: 800.0 + t as f64 + if t % 5 == 0 { 1.0 } else { -0.5 }, weight: 1.0, runs: 1 });
        }
        let data = BTreeMap::from([(ids::UNSAFE_ACTION_RATE.to_string(), rates), (ids::LATENCY_PER_RUN.to_string(), latency)]);
        let c = compare_sums(&CompareConfig::default(), 1, &release(), &period(), &data);
        let unsafe_ = c.metrics.iter().find(|m| m.metric == ids::UNSAFE_ACTION_RATE).unwrap();
        assert_eq!(unsafe_.rank_biserial, Some(1.0), "every non-zero difference is an increase");
        assert!(matches!(unsafe_.test, Test::WilcoxonApprox), "ties: the normal approximation");
        assert_eq!(unsafe_.change, "worse");
        assert_eq!(unsafe_.outcome, Some(GateOutcome::Fail));
        let ps: Vec<f64> = c.metrics.iter().map(|m| m.p_value).collect();
        let holm = paired::holm(&ps);
        assert_eq!(c.metrics.iter().map(|m| m.p_holm).collect::<Vec<_>>(), holm);
        let lat = c.metrics.iter().find(|m| m.metric == ids::LATENCY_PER_RUN).unwrap();
        assert_eq!(lat.higher_is_better, Some(false));
        assert_eq!(lat.outcome, None, "no gate on latency by default");
    }

    /// A rank shift against a few large values: Wilcoxon says lower, the mean says higher.
    #[test]
    fn a_test_and_a_difference_that_disagree_are_mixed() {
        let mut p = Paired::default();
        for t in 0..30 {
            let d = if t < 25 { -1.0 } else { 100.0 };
            p.baseline.insert(format!("t{t}"), TaskSums { value: 800.0 + t as f64, weight: 1.0, runs: 1 });
            p.candidate.insert(format!("t{t}"), TaskSums { value: 800.0 + t as f64 + d, weight: 1.0, runs: 1 });
        }
        let cfg = CompareConfig { metrics: vec![ids::LATENCY_PER_RUN.to_string()], ..Default::default() };
        let data = BTreeMap::from([(ids::LATENCY_PER_RUN.to_string(), p)]);
        let m = &compare_sums(&cfg, 1, &release(), &period(), &data).metrics[0];
        assert!(m.p_value < 0.05 && m.rank_biserial.unwrap() < 0.0 && m.difference > 0.0, "{m:?}");
        assert_eq!(m.change, "mixed (the test and the difference disagree)");
        assert!(CompareConfig { min_tasks: 0, ..Default::default() }.check().is_err());
    }

    #[test]
    fn too_few_paired_tasks_is_skipped_with_the_reason() {
        let mut p = Paired::default();
        for t in 0..5 {
            p.baseline.insert(format!("t{t}"), binary(1.0));
            p.candidate.insert(format!("t{t}"), binary(1.0));
        }
        p.candidate.insert("other".into(), binary(1.0));
        let data = BTreeMap::from([(ids::TASK_SUCCESS.to_string(), p)]);
        let c = compare_sums(&CompareConfig::default(), 1, &release(), &period(), &data);
        assert!(c.metrics.is_empty());
        assert_eq!(c.skipped[0].1, "5 paired tasks (baseline 5, candidate 6), fewer than 10");
        assert_eq!(c.decision, "no gated metric compared");
        assert!(to_markdown(&c).contains("task_success not compared: 5 paired tasks"));
    }
}
