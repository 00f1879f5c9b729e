//! Meta-evaluation of a profile's evaluation results (seed 000 Table XI, seed 002 §5): how far
//! the raters behind an instrument can be trusted. Read from the period's run ends
//! (`RunEnded.evaluations` in `trajectory_events`): every result names its evaluator, the kind
//! of rater (`human`, `judge`, …) and the item it rated, so results about one item can be
//! matched across raters, repeats and presentation orders.
//!
//! Per evaluation name and (system, version, source):
//! - **Inter-rater reliability**: Krippendorff's α (interval level, missing ratings allowed)
//!   among the human raters, when two or more rated the same items.
//! - **Judge–human agreement**: Cohen's κ (scores ≥ 0.5 as positive) of the judge's first
//!   rating of an item against the humans' majority on it, with its asymptotic interval and
//!   its band (H: Landis & Koch's edges). An instrument declared `rater_kind = "judge"` enters
//!   a gate only with κ ≥ `min_judge_kappa` on ≥ `min_labelled_runs` items.
//! - **Test–retest instability**: the mean variance (n − 1) of one evaluator's repeated
//!   scores of the same item, banded C(0.10).
//!
//! Per pairwise evaluation name (results with an `opponent`; raters declared `human` are the
//! verbosity reference, every other rater is a judge): the judges' order-averaged **win rate**;
//! **position inconsistency** (the share of items judged in both orders whose verdict changes
//! with the order, ties half), banded C(0.15); **verbosity bias** (the judges' order-averaged
//! preference for the longer output minus the humans' on the same items, or minus ½ without
//! human verdicts), banded C(0.15) on its size; and **Bradley–Terry** strengths over every
//! system and opponent of the period on the Elo scale (mean 1000), the Elo banded by quartile
//! in the reference pool `[evaluation.pools.<name>]` when one is declared, its version recorded.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int32Type};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use octant_contracts::Source;
use octant_core::family::Family;
use octant_core::stats::meta::{self, Kappa, Level, Verdict};
use serde::{Deserialize, Serialize};

use crate::config::ReportConfig;
use crate::sql::{Period, col, period_filter};

/// One evaluation result of the period.
#[derive(Debug, Clone, PartialEq)]
pub struct Result_ {
    pub system: String,
    pub version: String,
    pub source: Source,
    pub name: String,
    pub value: f64,
    pub evaluator: String,
    pub rater_kind: Option<String>,
    pub item: String,
    pub opponent: Option<String>,
    pub position: Option<i32>,
    /// Pairwise: this run's output's length and the opponent's (one unit, the evaluator's).
    pub lengths: Option<(i64, i64)>,
    pub ci: Option<(f64, f64)>,
    pub time: i64,
    /// `likelihood` or `generation` when the result says (seed 000 §IV-B1).
    pub scoring_mode: Option<String>,
}

/// A set-level score (one value for a set of outputs, e.g. FID over a sample): the latest of
/// the period per evaluation name and evaluator, with the interval its evaluator reported.
/// Banded by its template's family when the name is a template's (FID: C(300)); without a
/// reported interval the band is N/A, since Octant cannot resample a set it never saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetLevelReport {
    pub name: String,
    pub evaluator: String,
    pub value: f64,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub at: i64,
    pub results: u64,
    pub band: Option<u8>,
    pub band_low: Option<u8>,
    pub band_high: Option<u8>,
    pub na_reason: Option<String>,
}

impl SetLevelReport {
    /// The evaluator's own interval as shown after the value (` [lo, hi]`), or nothing.
    pub fn reported_interval(&self) -> String {
        match (self.ci_low, self.ci_high) {
            (Some(l), Some(h)) => format!(" [{l}, {h}]"),
            _ => String::new(),
        }
    }

    /// The band with its interval, or why there is none (`N/A: …`), unescaped.
    pub fn band_text(&self) -> String {
        match (&self.na_reason, self.band) {
            (Some(why), _) => format!("N/A: {why}"),
            (None, Some(b)) => format!("{b} [{}, {}]", self.band_low.unwrap_or(b), self.band_high.unwrap_or(b)),
            _ => "—".into(),
        }
    }
}

/// Meta-evaluation of one evaluation name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RaterReport {
    pub name: String,
    /// The scoring mode of its results: results of another mode are another report (seed
    /// 000 §IV-B1: the two modes are never pooled).
    pub scoring_mode: Option<String>,
    pub results: u64,
    pub items: u64,
    pub raters: Vec<String>,
    /// Krippendorff's α (interval) among human raters, and how many there were.
    pub human_alpha: Option<f64>,
    pub humans: u64,
    pub judge_human: Option<KappaReport>,
    /// Mean SD of repeated scores of one item by one evaluator, items repeated, band C(0.10).
    pub retest_instability: Option<f64>,
    pub retest_items: u64,
    pub retest_band: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KappaReport {
    pub kappa: f64,
    pub lo: f64,
    pub hi: f64,
    /// Items with both a judge rating and a human majority.
    pub items: u64,
    pub band: Option<u8>,
    pub band_low: Option<u8>,
    pub band_high: Option<u8>,
}

/// Meta-evaluation of one pairwise evaluation name, for one system version. Win rate, position
/// inconsistency and Elo are the judges' (every rater not declared `human`); human verdicts
/// are the verbosity bias's reference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairwiseReport {
    pub name: String,
    pub verdicts: u64,
    pub human_verdicts: u64,
    pub opponents: Vec<String>,
    pub win_rate: Option<f64>,
    /// Items judged in both orders, and the share whose verdict changed with the order.
    pub swapped_items: u64,
    pub position_inconsistency: Option<f64>,
    pub position_band: Option<u8>,
    /// The judges' order-averaged preference for the longer output minus the reference's on
    /// the same items (humans' verdicts where they compared the pair, else ½), with a normal
    /// 95 % interval over items; banded C(0.15) on its magnitude. Items whose outputs have
    /// equal or unknown lengths do not count.
    pub verbosity_bias: Option<f64>,
    pub verbosity_interval: Option<[f64; 2]>,
    pub verbosity_items: u64,
    pub verbosity_reference: Option<String>,
    pub verbosity_band: Option<u8>,
    /// Bradley–Terry on the Elo scale over every system of the period (mean 1000), with a
    /// percentile bootstrap interval over rated items (both orders of an item resampled
    /// together; 200 replicates, Octant's deterministic weights).
    pub elo: Option<f64>,
    pub elo_interval: Option<[f64; 2]>,
    pub elo_band: Option<u8>,
    pub pool_version: Option<String>,
    pub systems_ranked: u64,
}

/// The meta-evaluation of one (system, version, source).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetaEvaluation {
    pub raters: Vec<RaterReport>,
    /// Results per evaluation name and scoring mode (seed 000 §IV-B1): where an instrument's
    /// designated mode was unavailable and the evaluator fell back to the other, the evidence
    /// names the fallback from these counts.
    pub scoring_modes: Vec<ModeCount>,
    /// Declared instruments whose designated mode was unavailable: results of their
    /// evaluation name scored in the other mode (kept apart, never pooled with them).
    pub fallbacks: Vec<Fallback>,
    pub pairwise: Vec<PairwiseReport>,
    pub set_level: Vec<SetLevelReport>,
    /// Per metric, over every system profiled in the same run and period.
    pub discriminative_power: Vec<DiscriminativePower>,
}

/// Whether a metric separates the systems profiled together (seed 000 Table XI): the share of
/// pairs of systems (same source and benchmark) whose estimates differ at α = 0.05 (z-test on
/// the interval's standard error, (hi − lo)/(2·z), Holm across the pairs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscriminativePower {
    pub metric: String,
    pub benchmark: Option<String>,
    pub source: String,
    pub systems: u64,
    pub power: f64,
}

/// Discriminative power of every metric over `profiles` (their metrics with intervals), for
/// each source and benchmark with at least two systems.
pub fn discriminative_power(profiles: &[&octant_contracts::Profile], level: f64) -> Vec<DiscriminativePower> {
    let z = octant_core::stats::proportion::z_for_level(level);
    // (source, metric, benchmark) → each system's (estimate, standard error).
    type Series = (String, String, Option<String>);
    let mut by: BTreeMap<Series, Vec<(f64, f64)>> = BTreeMap::new();
    for p in profiles {
        for m in &p.metrics {
            if let (Some(e), Some(lo), Some(hi)) = (m.estimate, m.ci_low, m.ci_high) {
                by.entry((p.source.as_str().to_string(), m.metric.clone(), m.benchmark.clone()))
                    .or_default()
                    .push((e, (hi - lo) / (2.0 * z)));
            }
        }
    }
    by.into_iter()
        .filter_map(|((source, metric, benchmark), systems)| {
            Some(DiscriminativePower {
                power: meta::discriminative_power(&systems, 0.05)?,
                systems: systems.len() as u64,
                metric,
                benchmark,
                source,
            })
        })
        .collect()
}

/// How many of the period's results of one evaluation name were scored in one mode (`None`:
/// the result did not say).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeCount {
    pub name: String,
    pub scoring_mode: Option<String>,
    pub results: u64,
}

/// Results of an instrument's evaluation name scored in another mode than the one the
/// instrument is declared with (seed 000 §IV-B1: "the fallback is recorded in the evidence
/// package").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fallback {
    pub instrument: String,
    pub designated: String,
    pub name: String,
    pub scored_by: String,
    pub results: u64,
}

impl MetaEvaluation {
    /// The rater report of `name` in `mode` (any mode when `None`: the first).
    pub fn rater(&self, name: &str, mode: Option<&str>) -> Option<&RaterReport> {
        self.raters.iter().find(|r| r.name == name && mode.is_none_or(|m| r.scoring_mode.as_deref() == Some(m)))
    }

    /// Judge–human agreement on `name` in `mode`.
    pub fn judge_human(&self, name: &str, mode: Option<&str>) -> Option<&KappaReport> {
        self.rater(name, mode)?.judge_human.as_ref()
    }
}

type Key = (String, String, Source);

/// Bootstrap replicates of the Elo intervals.
const ELO_REPLICATES: u32 = 200;

/// Per pairwise evaluation name: each system's Elo and its interval, and the verdicts rated.
type Ratings = (BTreeMap<String, (f64, Option<[f64; 2]>)>, u64);

/// Reads the period's evaluation results (every system: Bradley–Terry ranks them together)
/// and builds each (system, version, source)'s meta-evaluation.
pub async fn meta_evaluations(ctx: &SessionContext, cfg: &ReportConfig, period: &Period) -> Result<BTreeMap<Key, MetaEvaluation>> {
    let results = read(ctx, period).await?;
    Ok(build(&results, cfg))
}

async fn read(ctx: &SessionContext, period: &Period) -> Result<Vec<Result_>> {
    // One run end per run id (the lake may hold a record twice); its results are read from the
    // list in the run end's own order (the first rating of an item is its first in that list;
    // an unnested row order would not be stable).
    let sql = format!(
        "SELECT run_id, first_value(system_id) AS sys, first_value(get_field(system, 'version')) AS v, \
                first_value(source) AS src, first_value(get_field(run_ended, 'evaluations')) AS evs, \
                first_value(CAST(event_time AS BIGINT)) AS t \
         FROM trajectory_events WHERE kind = 'RUN_ENDED' AND {} AND {} GROUP BY run_id ORDER BY run_id",
        period_filter(period, "event_time", None),
        crate::sql::not_rerun(period)
    );
    let mut out = Vec::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let s = |n: &str| col(&b, n, &DataType::Utf8);
        let (run, sys, v, src) = (s("run_id")?, s("sys")?, s("v")?, s("src")?);
        let t = col(&b, "t", &DataType::Int64)?;
        let evs = b.column_by_name("evs").ok_or_else(|| datafusion::error::DataFusionError::Plan("evs missing".into()))?;
        let evs = evs
            .as_list_opt::<i32>()
            .ok_or_else(|| datafusion::error::DataFusionError::Plan(format!("run_ended.evaluations is {}, not a list", evs.data_type())))?;
        let get = |a: &arrow::array::ArrayRef, i: usize| (!a.is_null(i)).then(|| a.as_string::<i32>().value(i).to_string());
        // Every run end's results are one child array: its fields are cast once per batch,
        // each run's results are a range of it.
        let e = evs.values().as_struct_opt().ok_or_else(|| {
            datafusion::error::DataFusionError::Plan(format!("an evaluation is {}, not a record", evs.values().data_type()))
        })?;
        let field = |n: &str, dt: &DataType| -> Result<arrow::array::ArrayRef> {
            match e.column_by_name(n) {
                Some(c) if c.data_type() == dt => Ok(c.clone()),
                Some(c) => Ok(arrow::compute::cast(c, dt)?),
                None => Ok(arrow::array::new_null_array(dt, e.len())),
            }
        };
        let f = |n: &str| field(n, &DataType::Utf8);
        let (name, evaluator, rater, item, opponent, step) =
            (f("name")?, f("evaluator")?, f("rater_kind")?, f("item")?, f("opponent")?, f("step")?);
        let mode = f("scoring_mode")?;
        let value = field("score_value", &DataType::Float64)?;
        let position = field("position", &DataType::Int32)?;
        let (len, opp_len) = (field("output_length", &DataType::Int64)?, field("opponent_output_length", &DataType::Int64)?);
        let (ci_low, ci_high) = (field("ci_low", &DataType::Float64)?, field("ci_high", &DataType::Float64)?);
        let int = |a: &arrow::array::ArrayRef, i: usize| (!a.is_null(i)).then(|| a.as_primitive::<arrow::datatypes::Int64Type>().value(i));
        let offsets = evs.value_offsets();
        for row in 0..b.num_rows() {
            let (Some(system), Some(version)) = (get(&sys, row), get(&v, row)) else { continue };
            if evs.is_null(row) {
                continue;
            }
            let run_id = get(&run, row).unwrap_or_default();
            for i in offsets[row] as usize..offsets[row + 1] as usize {
                let Some(name) = get(&name, i) else { continue };
                if value.is_null(i) || !value.as_primitive::<Float64Type>().value(i).is_finite() {
                    continue; // label-only results have no number to agree on; NaN is no score
                }
                // Without an item, a result is about its run (or its step).
                let item = get(&item, i).unwrap_or_else(|| match get(&step, i) {
                    Some(st) => format!("{run_id}/{st}"),
                    None => run_id.clone(),
                });
                out.push(Result_ {
                    system: system.clone(),
                    version: version.clone(),
                    source: if get(&src, row).as_deref() == Some("EVALUATION") { Source::Evaluation } else { Source::Production },
                    name,
                    value: value.as_primitive::<Float64Type>().value(i),
                    evaluator: get(&evaluator, i).unwrap_or_else(|| "unknown".into()),
                    rater_kind: get(&rater, i),
                    item,
                    opponent: get(&opponent, i),
                    position: (!position.is_null(i)).then(|| position.as_primitive::<Int32Type>().value(i)),
                    lengths: int(&len, i).zip(int(&opp_len, i)),
                    ci: (!ci_low.is_null(i) && !ci_high.is_null(i))
                        .then(|| (ci_low.as_primitive::<Float64Type>().value(i), ci_high.as_primitive::<Float64Type>().value(i))),
                    time: if t.is_null(row) { 0 } else { t.as_primitive::<arrow::datatypes::Int64Type>().value(row) },
                    scoring_mode: get(&mode, i),
                });
            }
        }
    }
    Ok(out)
}

fn c_band(value: f64, budget: f64) -> Option<u8> {
    Family::Continuous { budget }.band(value, &Default::default()).ok()
}

fn h_band(value: f64) -> Option<u8> {
    Family::Higher.band(value.clamp(0.0, 1.0), &Default::default()).ok()
}

/// The meta-evaluations of every (system, version, source) with results (pure).
pub fn build(results: &[Result_], cfg: &ReportConfig) -> BTreeMap<Key, MetaEvaluation> {
    let mut out: BTreeMap<Key, MetaEvaluation> = BTreeMap::new();
    let mut groups: BTreeMap<(Key, String), Vec<&Result_>> = BTreeMap::new();
    let mut modes: BTreeMap<(Key, String, Option<String>), u64> = BTreeMap::new();
    for r in results {
        groups.entry(((r.system.clone(), r.version.clone(), r.source), r.name.clone())).or_default().push(r);
        *modes.entry(((r.system.clone(), r.version.clone(), r.source), r.name.clone(), r.scoring_mode.clone())).or_default() += 1;
    }
    for ((key, name, scoring_mode), results) in modes {
        let entry = out.entry(key).or_default();
        // A mode another declared instrument of the name designates is that one's, no fallback.
        let designated_by_some =
            |mode: &str| cfg.evaluation.instruments.iter().any(|d| d.evaluation_name() == name && d.scoring_mode.as_deref() == Some(mode));
        for d in cfg.evaluation.instruments.iter().filter(|d| d.evaluation_name() == name) {
            if let (Some(designated), Some(other)) = (&d.scoring_mode, &scoring_mode)
                && designated != other
                && !designated_by_some(other)
            {
                entry.fallbacks.push(Fallback {
                    instrument: d.id.clone(),
                    designated: designated.clone(),
                    name: name.clone(),
                    scored_by: other.clone(),
                    results,
                });
            }
        }
        entry.scoring_modes.push(ModeCount { name, scoring_mode, results });
    }
    // Bradley–Terry per pairwise name over every system of the period.
    let mut elo: BTreeMap<String, Ratings> = BTreeMap::new();
    let pairwise_names: BTreeSet<&str> = results.iter().filter(|r| r.opponent.is_some()).map(|r| r.name.as_str()).collect();
    for name in pairwise_names {
        let mut nodes: Vec<String> = Vec::new();
        let index = |n: &str, nodes: &mut Vec<String>| match nodes.iter().position(|x| x == n) {
            Some(i) => i,
            None => {
                nodes.push(n.to_string());
                nodes.len() - 1
            }
        };
        let mut verdicts = Vec::new();
        let mut clusters = Vec::new();
        for r in results.iter().filter(|r| r.name == name && !is_human(r)) {
            let Some(opp) = &r.opponent else { continue };
            let me = index(&format!("{}@{}", r.system, r.version), &mut nodes);
            let them = index(opp, &mut nodes);
            verdicts.push(Verdict { first: me, second: them, first_score: r.value.clamp(0.0, 1.0) });
            clusters.push(octant_core::stats::bootstrap::cluster_hash(&format!("{}@{}/{}", r.system, r.version, r.item)));
        }
        // A weak prior (half a win each way between every pair) keeps strengths finite for a
        // system that never lost; it shrinks ratings slightly toward each other.
        if let Some(logs) = meta::bradley_terry(nodes.len(), &verdicts, 0.5) {
            let ratings = meta::elo_scale(&logs, 1000.0);
            let seed = cfg.evaluation.bootstrap.seed;
            let mut reps: Vec<Vec<f64>> = vec![Vec::new(); nodes.len()];
            for b in 0..ELO_REPLICATES {
                let w: Vec<f64> = clusters.iter().map(|c| octant_core::stats::bootstrap::poisson_weight(seed, *c, b) as f64).collect();
                if let Some(l) = meta::bradley_terry_weighted(nodes.len(), &verdicts, Some(&w), 0.5) {
                    for (i, e) in meta::elo_scale(&l, 1000.0).into_iter().enumerate() {
                        reps[i].push(e);
                    }
                }
            }
            let interval = |r: &mut Vec<f64>| -> Option<[f64; 2]> {
                if r.len() < ELO_REPLICATES as usize / 2 {
                    return None;
                }
                r.sort_by(f64::total_cmp);
                let q = octant_core::stats::bootstrap::quantile_sorted;
                Some([q(r, 0.025), q(r, 0.975)])
            };
            let rated = nodes.into_iter().zip(ratings).zip(reps.iter_mut()).map(|((n, e), r)| (n, (e, interval(r)))).collect();
            elo.insert(name.to_string(), (rated, verdicts.len() as u64));
        }
    }
    for ((key, name), rs) in groups {
        let entry = out.entry(key.clone()).or_default();
        let template_set_level =
            octant_core::catalogue::template(&name).is_some_and(|t| t.kind == octant_core::catalogue::ResultKind::SetLevel);
        if template_set_level || rs.iter().any(|r| r.ci.is_some()) {
            entry.set_level.extend(set_level(&name, &rs));
        } else if rs.iter().any(|r| r.opponent.is_some()) {
            entry.pairwise.push(pairwise(&key, &name, &rs, elo.get(&name), cfg));
        } else {
            // Likelihood- and generation-scored ratings are never pooled: one report per mode.
            // Human ratings that name no mode are every mode's reference (a human reads the
            // output, whatever scored it).
            let untagged_human = |r: &&Result_| is_human(r) && r.scoring_mode.is_none();
            let mut by_mode: BTreeMap<Option<&str>, Vec<&Result_>> = BTreeMap::new();
            for r in rs.iter().filter(|r| !untagged_human(r)) {
                by_mode.entry(r.scoring_mode.as_deref()).or_default().push(r);
            }
            if by_mode.is_empty() {
                by_mode.insert(None, Vec::new());
            }
            for (mode, mut mine) in by_mode {
                mine.extend(rs.iter().filter(|r| untagged_human(r)));
                entry.raters.push(RaterReport { scoring_mode: mode.map(str::to_string), ..raters(&name, &mine) });
            }
        }
    }
    out
}

fn set_level(name: &str, rs: &[&Result_]) -> Vec<SetLevelReport> {
    let family = octant_core::catalogue::template(name).and_then(|t| t.family);
    let mut latest: BTreeMap<&str, (&Result_, u64)> = BTreeMap::new();
    for r in rs {
        let e = latest.entry(r.evaluator.as_str()).or_insert((r, 0));
        e.1 += 1;
        if r.time > e.0.time {
            e.0 = r;
        }
    }
    latest
        .into_iter()
        .map(|(evaluator, (r, results))| {
            let band = |v: f64| family.and_then(|f| f.band(v, &Default::default()).ok());
            let na_reason = match (family, r.ci) {
                (None, _) => Some("no family declared for this set-level score".to_string()),
                (Some(_), None) => Some("the evaluator reported no interval (Octant cannot resample a set it never saw)".to_string()),
                _ => None,
            };
            let (lo, hi) = r.ci.unzip();
            // For a lower-is-better family the interval's high end gives the low band.
            let (b_lo, b_hi) = match (lo.and_then(band), hi.and_then(band)) {
                (Some(a), Some(b)) => (Some(a.min(b)), Some(a.max(b))),
                _ => (None, None),
            };
            SetLevelReport {
                name: name.to_string(),
                evaluator: evaluator.to_string(),
                value: r.value,
                ci_low: lo,
                ci_high: hi,
                at: r.time,
                results,
                band: if na_reason.is_none() { band(r.value) } else { None },
                band_low: b_lo.filter(|_| na_reason.is_none()),
                band_high: b_hi.filter(|_| na_reason.is_none()),
                na_reason,
            }
        })
        .collect()
}

fn raters(name: &str, rs: &[&Result_]) -> RaterReport {
    let items: BTreeSet<&str> = rs.iter().map(|r| r.item.as_str()).collect();
    let items: Vec<&str> = items.into_iter().collect();
    let evaluators: BTreeSet<&str> = rs.iter().map(|r| r.evaluator.as_str()).collect();
    // First rating of each item by each evaluator; repeats feed the retest statistic.
    let mut first: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    let mut repeats: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    for r in rs {
        first.entry((r.evaluator.as_str(), r.item.as_str())).or_insert(r.value);
        repeats.entry((r.evaluator.as_str(), r.item.as_str())).or_default().push(r.value);
    }
    let kind_of = |e: &str| rs.iter().find(|r| r.evaluator == e).and_then(|r| r.rater_kind.clone());
    let humans: Vec<&str> = evaluators.iter().copied().filter(|e| kind_of(e).as_deref() == Some("human")).collect();
    let judges: Vec<&str> = evaluators.iter().copied().filter(|e| kind_of(e).as_deref() == Some("judge")).collect();
    let matrix = |who: &[&str]| -> Vec<Vec<Option<f64>>> {
        who.iter().map(|e| items.iter().map(|i| first.get(&(*e, *i)).copied()).collect()).collect()
    };
    let human_alpha = (humans.len() >= 2).then(|| meta::krippendorff_alpha(&matrix(&humans), Level::Interval)).flatten();
    // Judge (the first judge by name) against the humans' majority per item.
    let judge_human = judges.first().and_then(|j| {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for i in &items {
            let Some(js) = first.get(&(*j, *i)) else { continue };
            let hs: Vec<f64> = humans.iter().filter_map(|h| first.get(&(*h, *i)).copied()).collect();
            if hs.is_empty() {
                continue;
            }
            let positive = hs.iter().filter(|v| **v >= 0.5).count() * 2;
            if positive == hs.len() {
                continue; // no majority
            }
            a.push(*js >= 0.5);
            b.push(positive > hs.len());
        }
        let k: Kappa = meta::kappa_with_interval(&a, &b, 0.95)?;
        Some(KappaReport {
            kappa: k.kappa,
            lo: k.lo,
            hi: k.hi,
            items: k.n,
            band: h_band(k.kappa),
            band_low: h_band(k.lo),
            band_high: h_band(k.hi),
        })
    });
    let repeated: Vec<Vec<f64>> = repeats.into_values().filter(|v| v.len() >= 2).collect();
    let retest_instability = meta::retest_instability(&repeated);
    RaterReport {
        name: name.to_string(),
        scoring_mode: None,
        results: rs.len() as u64,
        items: items.len() as u64,
        raters: evaluators.iter().map(|e| e.to_string()).collect(),
        human_alpha,
        humans: humans.len() as u64,
        judge_human,
        retest_instability,
        retest_items: repeated.len() as u64,
        retest_band: retest_instability.and_then(|v| c_band(v, 0.10)),
    }
}

fn is_human(r: &Result_) -> bool {
    r.rater_kind.as_deref() == Some("human")
}

/// Per item whose two outputs differ in length, the order-averaged preference for the longer
/// one (1: the longer always won; ties ½), over the given verdicts.
fn longer_preference<'a>(rs: &[&'a Result_]) -> BTreeMap<&'a str, f64> {
    let mut acc: BTreeMap<&str, (f64, u32)> = BTreeMap::new();
    for r in rs {
        let Some((mine, theirs)) = r.lengths else { continue };
        if mine == theirs {
            continue;
        }
        let s = r.value.clamp(0.0, 1.0);
        let e = acc.entry(r.item.as_str()).or_default();
        e.0 += if mine > theirs { s } else { 1.0 - s };
        e.1 += 1;
    }
    acc.into_iter().map(|(i, (sum, n))| (i, sum / n as f64)).collect()
}

/// The judges' verbosity bias against the humans' preference on the same items, or against ½
/// without human verdicts: (bias, 95 % interval, items, reference).
fn verbosity_bias(judged: &[&Result_], human: &[&Result_]) -> Option<(f64, Option<[f64; 2]>, u64, String)> {
    let j = longer_preference(judged);
    let h = longer_preference(human);
    let paired: Vec<f64> = j.iter().filter_map(|(i, p)| h.get(i).map(|q| p - q)).collect();
    let (d, reference) = if paired.is_empty() {
        (j.values().map(|p| p - 0.5).collect::<Vec<f64>>(), "none (½ assumed: lengths independent of quality)")
    } else {
        (paired, "humans on the same items")
    };
    if d.is_empty() {
        return None;
    }
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let interval = (d.len() >= 2).then(|| {
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let half = 1.959_963_984_540_054 * sd / n.sqrt();
        [mean - half, mean + half]
    });
    Some((mean, interval, d.len() as u64, reference.to_string()))
}

fn pairwise(key: &Key, name: &str, all: &[&Result_], elo: Option<&Ratings>, cfg: &ReportConfig) -> PairwiseReport {
    let (human, rs): (Vec<&Result_>, Vec<&Result_>) = all.iter().partition(|r| is_human(r));
    let rs = rs.as_slice();
    let verbosity = verbosity_bias(rs, &human);
    let opponents: BTreeSet<String> = rs.iter().filter_map(|r| r.opponent.clone()).collect();
    // The win rate over comparisons (seed 000 eq. 8): each (evaluator, item, opponent) is one
    // comparison, its first verdict in each presentation order averaged (a repeat in an order
    // already seen is test–retest data, not another vote; a verdict without an order is one).
    // (evaluator, item, opponent) → its first verdict shown first, shown second, unordered.
    type Comparison<'a> = (&'a str, &'a str, Option<&'a str>);
    let mut comparisons: BTreeMap<Comparison, [Option<f64>; 3]> = BTreeMap::new();
    for r in rs {
        let c = comparisons.entry((r.evaluator.as_str(), r.item.as_str(), r.opponent.as_deref())).or_default();
        let slot = match r.position {
            Some(1) => 0,
            Some(2) => 1,
            _ => 2,
        };
        c[slot].get_or_insert(r.value.clamp(0.0, 1.0));
    }
    let per_comparison: Vec<f64> = comparisons
        .values()
        .filter_map(|c| {
            let seen: Vec<f64> = c.iter().flatten().copied().collect();
            (!seen.is_empty()).then(|| seen.iter().sum::<f64>() / seen.len() as f64)
        })
        .collect();
    let win_rate = (!per_comparison.is_empty()).then(|| per_comparison.iter().sum::<f64>() / per_comparison.len() as f64);
    // Items judged in both orders by one evaluator.
    // (evaluator, item) → (this run's score shown first, shown second).
    type BothOrders = (Option<f64>, Option<f64>);
    let mut by_item: BTreeMap<(&str, &str), BothOrders> = BTreeMap::new();
    for r in rs {
        let e = by_item.entry((r.evaluator.as_str(), r.item.as_str())).or_default();
        match r.position {
            Some(1) if e.0.is_none() => e.0 = Some(r.value),
            Some(2) if e.1.is_none() => e.1 = Some(r.value),
            _ => {}
        }
    }
    let swapped: Vec<(Verdict, Verdict)> = by_item
        .values()
        .filter_map(|(a, b)| {
            // This run's output first (a) and second (b): the same system 0 in both, read as
            // "system 0's score".
            Some((Verdict { first: 0, second: 1, first_score: (*a)? }, Verdict { first: 1, second: 0, first_score: 1.0 - (*b)? }))
        })
        .collect();
    let position_inconsistency = meta::position_inconsistency(&swapped);
    let me = format!("{}@{}", key.0, key.1);
    let (rating, elo_interval) = elo.and_then(|(r, _)| r.get(&me).copied()).unzip();
    let elo_interval = elo_interval.flatten();
    let pool = cfg.evaluation.pool(name, &me);
    PairwiseReport {
        name: name.to_string(),
        verdicts: rs.len() as u64,
        human_verdicts: human.len() as u64,
        opponents: opponents.into_iter().collect(),
        win_rate,
        swapped_items: swapped.len() as u64,
        position_inconsistency,
        position_band: position_inconsistency.and_then(|v| c_band(v, 0.15)),
        verbosity_bias: verbosity.as_ref().map(|v| v.0),
        verbosity_interval: verbosity.as_ref().and_then(|v| v.1),
        verbosity_items: verbosity.as_ref().map_or(0, |v| v.2),
        verbosity_band: verbosity.as_ref().and_then(|v| c_band(v.0.abs(), 0.15)),
        verbosity_reference: verbosity.map(|v| v.3),
        elo: rating,
        elo_interval,
        elo_band: rating.zip(pool.as_ref()).and_then(|(e, (p, _))| p.band(e).ok()),
        pool_version: pool.map(|(_, v)| v),
        systems_ranked: elo.map_or(0, |(r, _)| r.len() as u64),
    }
}

/// The "Meta-evaluation" section of an evidence package.
pub fn to_markdown(m: &MetaEvaluation) -> String {
    let mut s = String::from("## Meta-evaluation\n\n");
    if !m.discriminative_power.is_empty() {
        s.push_str("Discriminative power over the systems profiled together (share of pairs separated at α = 0.05, Holm): ");
        let parts: Vec<String> = m
            .discriminative_power
            .iter()
            .map(|d| {
                let at = d.benchmark.as_deref().map(|b| format!("@{b}")).unwrap_or_default();
                format!("{}{at} ({}) {:.2} of {} systems", d.metric, d.source, d.power, d.systems)
            })
            .collect();
        s.push_str(&parts.join("; "));
        s.push_str(".\n\n");
    }
    if !m.set_level.is_empty() {
        s.push_str("| set-level score | evaluator | value [evaluator's interval] | results | band [interval] |\n|---|---|---|---:|---|\n");
        for r in &m.set_level {
            let (iv, band) = (r.reported_interval(), r.band_text());
            s.push_str(&format!("| {} | {} | {}{iv} | {} | {band} |\n", r.name, r.evaluator, r.value, r.results));
        }
        s.push('\n');
    }
    if !m.fallbacks.is_empty() {
        s.push_str("Scoring-mode fallbacks (seed 000 §IV-B1: the designated mode was unavailable; these results are kept apart, never pooled with the instrument):\n\n| instrument | designated mode | evaluation | scored by | results |\n|---|---|---|---|---:|\n");
        for f in &m.fallbacks {
            s.push_str(&format!("| {} | {} | {} | {} | {} |\n", f.instrument, f.designated, f.name, f.scored_by, f.results));
        }
        s.push('\n');
    }
    if m.raters.is_empty() && m.pairwise.is_empty() {
        s.push_str("No evaluation result of the period names its evaluator's ratings with a score.\n");
        return s;
    }
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_else(|| "—".into());
    let band = |b: Option<u8>| b.map(|b| b.to_string()).unwrap_or_else(|| "—".into());
    if !m.raters.is_empty() {
        s.push_str("| evaluation | results | items | raters | α humans (interval) | judge–human κ [95 %] (items) | κ band [interval] | test–retest variance (items) | band C(0.10) |\n|---|---:|---:|---|---|---|---|---|---|\n");
        for r in &m.raters {
            let (k, kb) = match &r.judge_human {
                Some(k) => (
                    format!("{:.4} [{:.4}, {:.4}] ({})", k.kappa, k.lo, k.hi, k.items),
                    format!("{} [{}, {}]", band(k.band), band(k.band_low), band(k.band_high)),
                ),
                None => ("—".into(), "—".into()),
            };
            s.push_str(&format!(
                "| {}{} | {} | {} | {} | {} ({} humans) | {} | {} | {} ({}) | {} |\n",
                r.name,
                r.scoring_mode.as_deref().map(|m| format!(" ({m})")).unwrap_or_default(),
                r.results,
                r.items,
                r.raters.join(", "),
                opt(r.human_alpha),
                r.humans,
                k,
                kb,
                opt(r.retest_instability),
                r.retest_items,
                band(r.retest_band)
            ));
        }
    }
    if !m.pairwise.is_empty() {
        s.push_str("\n| pairwise evaluation | judge verdicts (human) | opponents | win rate (both orders) | position inconsistency (items) | band C(0.15) | verbosity bias [95 %] (items; reference) | band C(0.15) | Elo [95 %] (of systems) | Elo band (pool) |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for p in &m.pairwise {
            let verbosity = match (p.verbosity_bias, p.verbosity_interval) {
                (Some(v), Some([l, h])) => format!("{v:+.4} [{l:+.4}, {h:+.4}]"),
                (Some(v), None) => format!("{v:+.4}"),
                _ => "—".into(),
            };
            s.push_str(&format!(
                "| {} | {} ({}) | {} | {} | {} ({}) | {} | {verbosity} ({}; {}) | {} | {} ({}) | {} ({}) |\n",
                p.name,
                p.verdicts,
                p.human_verdicts,
                p.opponents.join(", "),
                opt(p.win_rate),
                opt(p.position_inconsistency),
                p.swapped_items,
                band(p.position_band),
                p.verbosity_items,
                p.verbosity_reference.as_deref().unwrap_or("no lengths reported"),
                band(p.verbosity_band),
                match (p.elo, p.elo_interval) {
                    (Some(e), Some([l, h])) => format!("{e:.0} [{l:.0}, {h:.0}]"),
                    (Some(e), None) => format!("{e:.0}"),
                    _ => "—".into(),
                },
                p.systems_ranked,
                band(p.elo_band),
                p.pool_version.as_deref().unwrap_or("no pool declared")
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, evaluator: &str, value: f64, ci: Option<(f64, f64)>, time: i64) -> Result_ {
        Result_ {
            system: "s".into(),
            version: "1".into(),
            source: Source::Evaluation,
            name: name.into(),
            value,
            evaluator: evaluator.into(),
            rater_kind: None,
            scoring_mode: None,
            item: format!("batch-{time}"),
            opponent: None,
            position: None,
            lengths: None,
            ci,
            time,
        }
    }

    #[test]
    fn set_level_scores_carry_their_evaluators_interval_or_are_na() {
        let rs = vec![
            result("fid", "clean-fid", 180.0, Some((150.0, 210.0)), 1),
            result("fid", "clean-fid", 12.5, Some((11.9, 13.2)), 2), // the latest
            result("fid", "other", 40.0, None, 3),
        ];
        let m = build(&rs, &ReportConfig::default());
        let sl = &m[&("s".to_string(), "1".to_string(), Source::Evaluation)].set_level;
        assert_eq!(sl.len(), 2);
        let clean = sl.iter().find(|r| r.evaluator == "clean-fid").unwrap();
        // C(300): 4 − ⌊4·12.5/300⌋ = 4.
        assert_eq!((clean.value, clean.results, clean.band, clean.band_low, clean.band_high), (12.5, 2, Some(4), Some(4), Some(4)));
        let other = sl.iter().find(|r| r.evaluator == "other").unwrap();
        assert_eq!(other.band, None);
        assert!(other.na_reason.as_deref().unwrap().contains("no interval"));
        assert!(m.values().all(|x| x.raters.is_empty()), "set-level scores are not ratings");
        assert!(to_markdown(m.values().next().unwrap()).contains("| fid | clean-fid | 12.5 [11.9, 13.2] | 2 | 4 [4, 4] |"));
    }

    /// Seed 000 §IV-B1: an instrument designated likelihood whose evaluator fell back to
    /// generation for some items has the fallback named in the evidence, and the two modes'
    /// ratings are two reports (never pooled): the likelihood judge agrees with the humans
    /// (κ 1), the generation one never does (κ −1); pooled they would read κ 0.
    #[test]
    fn scoring_mode_fallbacks_are_recorded_and_never_pooled() {
        let rated = |evaluator: &str, kind: &str, item: usize, value: f64, mode: &str| Result_ {
            rater_kind: Some(kind.into()),
            item: format!("item-{item}"),
            scoring_mode: Some(mode.into()),
            ..result("em", evaluator, value, None, item as i64)
        };
        let mut rs = Vec::new();
        for i in 0..8 {
            let truth = (i % 2) as f64;
            let mode = if i < 4 { "likelihood" } else { "generation" };
            // Humans name no mode: they are every mode's reference.
            rs.push(Result_ { scoring_mode: None, ..rated("h1", "human", i, truth, mode) });
            rs.push(Result_ { scoring_mode: None, ..rated("h2", "human", i, truth, mode) });
            rs.push(rated("j", "judge", i, if i < 4 { truth } else { 1.0 - truth }, mode));
        }
        let mut cfg = ReportConfig::default();
        cfg.evaluation.instruments = vec![
            toml::from_str("id = \"em_likelihood\"\nevaluation = \"em\"\ntemplate = \"exact_match\"\nscoring_mode = \"likelihood\"")
                .unwrap(),
        ];
        let m = build(&rs, &cfg);
        let m = &m[&("s".to_string(), "1".to_string(), Source::Evaluation)];
        assert_eq!(
            m.fallbacks,
            [Fallback {
                instrument: "em_likelihood".into(),
                designated: "likelihood".into(),
                name: "em".into(),
                scored_by: "generation".into(),
                results: 4
            }]
        );
        // Declared in both modes, neither is the other's fallback.
        let mut both = cfg.clone();
        both.evaluation.instruments.push(
            toml::from_str("id = \"em_generation\"\nevaluation = \"em\"\ntemplate = \"exact_match\"\nscoring_mode = \"generation\"")
                .unwrap(),
        );
        let m2 = build(&rs, &both);
        assert!(m2[&("s".to_string(), "1".to_string(), Source::Evaluation)].fallbacks.is_empty());
        let kappa = |mode| m.judge_human("em", Some(mode)).map(|k| k.kappa);
        assert_eq!((kappa("likelihood"), kappa("generation")), (Some(1.0), Some(-1.0)));
        assert_eq!(m.raters.len(), 2, "one report per mode");
        let md = to_markdown(m);
        assert!(md.contains("| em_likelihood | likelihood | em | generation | 4 |") && md.contains("| em (generation) |"), "{md}");
    }

    /// A pairwise verdict of `evaluator` on `item` (this run's output first when `position` is 1).
    fn verdict(evaluator: &str, kind: &str, item: &str, position: i32, won: f64, lengths: Option<(i64, i64)>) -> Result_ {
        Result_ {
            rater_kind: Some(kind.into()),
            item: item.into(),
            opponent: Some("ref@1".into()),
            position: Some(position),
            lengths,
            ..result("q_pairwise", evaluator, won, None, 0)
        }
    }

    #[test]
    fn verbosity_bias_is_the_judges_excess_preference_for_the_longer_output() {
        // Four items. The judge prefers the longer output in both orders on three of them and
        // splits the fourth by order (½): preference 0.875. The human prefers the longer on two
        // and the shorter on two: 0.5. Paired differences 0, 1, 1, −½: mean 0.375.
        let mut rs = Vec::new();
        for (i, (judge, human, longer_is_mine)) in [
            ((1.0, 1.0), (1.0, 1.0), true),
            ((0.0, 0.0), (1.0, 1.0), false),
            ((1.0, 1.0), (0.0, 0.0), true),
            ((1.0, 0.0), (1.0, 1.0), true),
        ]
        .into_iter()
        .enumerate()
        {
            let item = format!("it-{i}");
            let lengths = Some(if longer_is_mine { (300, 100) } else { (100, 300) });
            rs.push(verdict("judge-a", "judge", &item, 1, judge.0, lengths));
            rs.push(verdict("judge-a", "judge", &item, 2, judge.1, lengths));
            rs.push(verdict("human-0", "human", &item, 1, human.0, lengths));
            rs.push(verdict("human-0", "human", &item, 2, human.1, lengths));
        }
        // Equal lengths and unknown lengths do not count.
        rs.push(verdict("judge-a", "judge", "same", 1, 1.0, Some((200, 200))));
        rs.push(verdict("judge-a", "judge", "unknown", 1, 1.0, None));
        let m = build(&rs, &ReportConfig::default());
        let p = &m[&("s".to_string(), "1".to_string(), Source::Evaluation)].pairwise[0];
        assert_eq!((p.verdicts, p.human_verdicts, p.verbosity_items), (10, 8, 4));
        assert_eq!(p.verbosity_bias, Some(0.375));
        assert_eq!(p.verbosity_reference.as_deref(), Some("humans on the same items"));
        let [lo, hi] = p.verbosity_interval.unwrap();
        assert!(lo < 0.375 && 0.375 < hi);
        assert_eq!(p.verbosity_band, Some(0), "C(0.15): 0.375 is past the budget");
        // The win rate and position inconsistency are the judge's alone (the human's are not
        // counted). The win rate is over comparisons, both orders averaged (eq. 8): 1, 0, 1,
        // ½ for the four items and 1, 1 for the two shown once — 4.5 / 6 = 0.75 (a plain mean
        // of the ten verdicts would give 0.7); the item split by order is the one inconsistency.
        assert_eq!(p.win_rate, Some(0.75));
        // A repeat in an order already seen is no second vote.
        let mut again = rs.clone();
        again.push(verdict("judge-a", "judge", "same", 1, 0.0, Some((200, 200))));
        let m = build(&again, &ReportConfig::default());
        assert_eq!(m[&("s".to_string(), "1".to_string(), Source::Evaluation)].pairwise[0].win_rate, Some(0.75));
        assert_eq!((p.swapped_items, p.position_inconsistency), (4, Some(0.25)));
        // Without human verdicts the reference is ½.
        let judged: Vec<Result_> = rs.into_iter().filter(|r| !is_human(r)).collect();
        let m = build(&judged, &ReportConfig::default());
        let p = &m[&("s".to_string(), "1".to_string(), Source::Evaluation)].pairwise[0];
        assert_eq!(p.verbosity_bias, Some(0.375));
        assert!(p.verbosity_reference.as_deref().unwrap().starts_with("none"));
        assert!(to_markdown(&m.values().next().unwrap().clone()).contains("+0.3750"));
    }

    /// Does the verbosity interval cover the true bias about 95 % of the time? 1,000 simulated
    /// periods of 200 items: the judge picks the first shown at b = 0.2, else the longer
    /// output on a share v = 0.3 of items, else the better; the human picks the better, each
    /// order flipped at 0.1. Truth (1 − b)·v/2 = 0.12.
    #[test]
    fn verbosity_interval_covers_the_truth_about_95_percent_of_the_time() {
        let mut state = 7u64;
        let mut u = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            (octant_core::stats::bootstrap::mix64(state) >> 11) as f64 / (1u64 << 53) as f64
        };
        let (b, v, flip, truth) = (0.2, 0.3, 0.1, 0.12);
        let mut covered = 0;
        let trials = 1000;
        for _ in 0..trials {
            let mut rs = Vec::new();
            for i in 0..200 {
                let item = format!("it-{i}");
                let lengths = if u() < 0.5 { (300, 100) } else { (100, 300) };
                let better_is_mine = u() < 0.5;
                let chosen = if u() < v { lengths.0 > lengths.1 } else { better_is_mine };
                for position in [1, 2] {
                    let judge = if u() < b { position == 1 } else { chosen };
                    let human = better_is_mine != (u() < flip);
                    rs.push(verdict("judge-a", "judge", &item, position, judge as u8 as f64, Some(lengths)));
                    rs.push(verdict("human-0", "human", &item, position, human as u8 as f64, Some(lengths)));
                }
            }
            let (judged, human): (Vec<&Result_>, Vec<&Result_>) = rs.iter().partition(|r| !is_human(r));
            let (_, iv, items, _) = verbosity_bias(&judged, &human).unwrap();
            assert_eq!(items, 200);
            let [lo, hi] = iv.unwrap();
            covered += (lo <= truth && truth <= hi) as u32;
        }
        let coverage = covered as f64 / trials as f64;
        eprintln!("verbosity interval coverage {coverage}");
        assert!((0.93..=0.97).contains(&coverage), "coverage {coverage}");
    }
}
