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
//! - **Test–retest instability**: the mean standard deviation of one evaluator's repeated
//!   scores of the same item, banded C(0.10).
//!
//! Per pairwise evaluation name (results with an `opponent`): the order-averaged **win rate**;
//! **position inconsistency** (the share of items judged in both orders whose verdict changes
//! with the order, ties half), banded C(0.15); and **Bradley–Terry** strengths over every
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
use serde::Serialize;

use crate::build::{Period, col, period_filter};
use crate::config::ProfilerConfig;

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
    pub ci: Option<(f64, f64)>,
    pub time: i64,
}

/// A set-level score (one value for a set of outputs, e.g. FID over a sample): the latest of
/// the period per evaluation name and evaluator, with the interval its evaluator reported.
/// Banded by its template's family when the name is a template's (FID: C(300)); without a
/// reported interval the band is N/A, since Octant cannot resample a set it never saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Meta-evaluation of one evaluation name.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RaterReport {
    pub name: String,
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

#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Meta-evaluation of one pairwise evaluation name, for one system version.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PairwiseReport {
    pub name: String,
    pub verdicts: u64,
    pub opponents: Vec<String>,
    pub win_rate: Option<f64>,
    /// Items judged in both orders, and the share whose verdict changed with the order.
    pub swapped_items: u64,
    pub position_inconsistency: Option<f64>,
    pub position_band: Option<u8>,
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
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MetaEvaluation {
    pub raters: Vec<RaterReport>,
    pub pairwise: Vec<PairwiseReport>,
    pub set_level: Vec<SetLevelReport>,
    /// Per metric, over every system profiled in the same run and period.
    pub discriminative_power: Vec<DiscriminativePower>,
}

/// Whether a metric separates the systems profiled together (seed 000 Table XI): the share of
/// pairs of systems (same source and benchmark) whose estimates differ at α = 0.05 (z-test on
/// the interval's standard error, (hi − lo)/(2·z), Holm across the pairs).
#[derive(Debug, Clone, PartialEq, Serialize)]
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

impl MetaEvaluation {
    /// Judge–human agreement on `name`.
    pub fn judge_human(&self, name: &str) -> Option<&KappaReport> {
        self.raters.iter().find(|r| r.name == name)?.judge_human.as_ref()
    }
}

type Key = (String, String, Source);

/// Bootstrap replicates of the Elo intervals.
const ELO_REPLICATES: u32 = 200;

/// Per pairwise evaluation name: each system's Elo and its interval, and the verdicts rated.
type Ratings = (BTreeMap<String, (f64, Option<[f64; 2]>)>, u64);

/// Reads the period's evaluation results (every system: Bradley–Terry ranks them together)
/// and builds each (system, version, source)'s meta-evaluation.
pub async fn meta_evaluations(ctx: &SessionContext, cfg: &ProfilerConfig, period: &Period) -> Result<BTreeMap<Key, MetaEvaluation>> {
    let results = read(ctx, period).await?;
    Ok(build(&results, cfg))
}

async fn read(ctx: &SessionContext, period: &Period) -> Result<Vec<Result_>> {
    // One run end per run id (the lake may hold a record twice), then one row per result.
    let sql = format!(
        "WITH ends AS (SELECT run_id, first_value(system_id) AS sys, first_value(get_field(system, 'version')) AS v, \
                first_value(source) AS src, first_value(get_field(run_ended, 'evaluations')) AS evs, \
                first_value(CAST(event_time AS BIGINT)) AS t \
                FROM trajectory_events WHERE kind = 'RUN_ENDED' AND {} GROUP BY run_id), \
              rows AS (SELECT run_id, sys, v, src, t, unnest(evs) AS e FROM ends) \
         SELECT run_id, sys, v, src, t, get_field(e, 'ci_low') AS ci_low, get_field(e, 'ci_high') AS ci_high, get_field(e, 'name') AS name, get_field(e, 'score_value') AS value, \
                get_field(e, 'evaluator') AS evaluator, get_field(e, 'rater_kind') AS rater_kind, get_field(e, 'item') AS item, \
                get_field(e, 'step') AS step, get_field(e, 'opponent') AS opponent, get_field(e, 'position') AS position \
         FROM rows ORDER BY run_id",
        period_filter(period, "event_time", None)
    );
    let mut out = Vec::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let s = |n: &str| col(&b, n, &DataType::Utf8);
        let (run, sys, v, src, name, evaluator, rater, item, opponent) =
            (s("run_id")?, s("sys")?, s("v")?, s("src")?, s("name")?, s("evaluator")?, s("rater_kind")?, s("item")?, s("opponent")?);
        let step = s("step")?;
        let value = col(&b, "value", &DataType::Float64)?;
        let position = col(&b, "position", &DataType::Int32)?;
        let (ci_low, ci_high) = (col(&b, "ci_low", &DataType::Float64)?, col(&b, "ci_high", &DataType::Float64)?);
        let t = col(&b, "t", &DataType::Int64)?;
        let get = |a: &arrow::array::ArrayRef, i: usize| (!a.is_null(i)).then(|| a.as_string::<i32>().value(i).to_string());
        for i in 0..b.num_rows() {
            let (Some(system), Some(version), Some(name)) = (get(&sys, i), get(&v, i), get(&name, i)) else { continue };
            if value.is_null(i) || !value.as_primitive::<Float64Type>().value(i).is_finite() {
                continue; // label-only results have no number to agree on; NaN is no score
            }
            let run_id = get(&run, i).unwrap_or_default();
            // Without an item, a result is about its run (or its step).
            let item = get(&item, i).unwrap_or_else(|| match get(&step, i) {
                Some(st) => format!("{run_id}/{st}"),
                None => run_id.clone(),
            });
            out.push(Result_ {
                system,
                version,
                source: if get(&src, i).as_deref() == Some("EVALUATION") { Source::Evaluation } else { Source::Production },
                name,
                value: value.as_primitive::<Float64Type>().value(i),
                evaluator: get(&evaluator, i).unwrap_or_else(|| "unknown".into()),
                rater_kind: get(&rater, i),
                item,
                opponent: get(&opponent, i),
                position: (!position.is_null(i)).then(|| position.as_primitive::<Int32Type>().value(i)),
                ci: (!ci_low.is_null(i) && !ci_high.is_null(i))
                    .then(|| (ci_low.as_primitive::<Float64Type>().value(i), ci_high.as_primitive::<Float64Type>().value(i))),
                time: if t.is_null(i) { 0 } else { t.as_primitive::<arrow::datatypes::Int64Type>().value(i) },
            });
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
pub fn build(results: &[Result_], cfg: &ProfilerConfig) -> BTreeMap<Key, MetaEvaluation> {
    let mut out: BTreeMap<Key, MetaEvaluation> = BTreeMap::new();
    let mut groups: BTreeMap<(Key, String), Vec<&Result_>> = BTreeMap::new();
    for r in results {
        groups.entry(((r.system.clone(), r.version.clone(), r.source), r.name.clone())).or_default().push(r);
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
        for r in results.iter().filter(|r| r.name == name) {
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
            entry.raters.push(raters(&name, &rs));
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

fn pairwise(key: &Key, name: &str, rs: &[&Result_], elo: Option<&Ratings>, cfg: &ProfilerConfig) -> PairwiseReport {
    let opponents: BTreeSet<String> = rs.iter().filter_map(|r| r.opponent.clone()).collect();
    let win_rate = (!rs.is_empty()).then(|| rs.iter().map(|r| r.value.clamp(0.0, 1.0)).sum::<f64>() / rs.len() as f64);
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
        opponents: opponents.into_iter().collect(),
        win_rate,
        swapped_items: swapped.len() as u64,
        position_inconsistency,
        position_band: position_inconsistency.and_then(|v| c_band(v, 0.15)),
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
            let iv = match (r.ci_low, r.ci_high) {
                (Some(l), Some(h)) => format!(" [{l}, {h}]"),
                _ => String::new(),
            };
            let band = match (&r.na_reason, r.band) {
                (Some(why), _) => format!("N/A: {why}"),
                (None, Some(b)) => format!("{b} [{}, {}]", r.band_low.unwrap_or(b), r.band_high.unwrap_or(b)),
                _ => "—".into(),
            };
            s.push_str(&format!("| {} | {} | {}{iv} | {} | {band} |\n", r.name, r.evaluator, r.value, r.results));
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
        s.push_str("| evaluation | results | items | raters | α humans (interval) | judge–human κ [95 %] (items) | κ band [interval] | test–retest SD (items) | band C(0.10) |\n|---|---:|---:|---|---|---|---|---|---|\n");
        for r in &m.raters {
            let (k, kb) = match &r.judge_human {
                Some(k) => (
                    format!("{:.4} [{:.4}, {:.4}] ({})", k.kappa, k.lo, k.hi, k.items),
                    format!("{} [{}, {}]", band(k.band), band(k.band_low), band(k.band_high)),
                ),
                None => ("—".into(), "—".into()),
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} ({} humans) | {} | {} | {} ({}) | {} |\n",
                r.name,
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
        s.push_str("\n| pairwise evaluation | verdicts | opponents | win rate (both orders) | position inconsistency (items) | band C(0.15) | Elo [95 %] (of systems) | Elo band (pool) |\n|---|---:|---|---|---|---|---|---|\n");
        for p in &m.pairwise {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} ({}) | {} | {} ({}) | {} ({}) |\n",
                p.name,
                p.verdicts,
                p.opponents.join(", "),
                opt(p.win_rate),
                opt(p.position_inconsistency),
                p.swapped_items,
                band(p.position_band),
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
            item: format!("batch-{time}"),
            opponent: None,
            position: None,
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
        let m = build(&rs, &ProfilerConfig::default());
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
}
