//! Independent re-runs (seed 000 §IV-G; issue 45, item 8): a declared share of the period's
//! ended runs is drawn, and a re-run request for each goes to `octant.reruns` for the harness
//! that owns the run; the harness answers with a new run whose `RunStarted.rerun_of` names the
//! original. Its observations enter no window or profile (the aggregator and every profile
//! query leave them out: they would weigh the sampled run twice); the profiler pairs them with
//! the original's and flags a divergence.
//!
//! **The draw** ([`draw`], pure), per cycle (each profile period), over the cycle's ended
//! runs, by hashes of the run id (the same run is always drawn or never, whatever else was
//! drawn; runs already requested — in the lake's `rerun_requests` or sent by this profiler —
//! are not requested again):
//! 1. *sample*: a run whose hash falls below the declared share ([`in_share`]): a uniform
//!    sample of about share × the runs;
//! 2. *coverage*: a system with no run in the share gets its run of the lowest hash ("coverage
//!    across submitting organizations at least once per cycle"; a uniform pick in the system);
//! 3. *veto_adjacent*: the remainder weighted toward veto-adjacent runs — a run with a safety
//!    violation or an ungated high-impact action, the units of the two per-step vetoes — drawn
//!    again by a hash of their own below share × (veto_weight − 1) ([`in_oversample`]), so such
//!    a run is re-run about veto_weight times as often as another.
//!
//! Decided: the weighted part stays out of the divergence test. A run drawn *because* it broke
//! a constraint is expected to break it less when re-run (regression to the mean: found in
//! this module's first version, whose weighted draw flagged a faithful system for its unsafe
//! actions and token counts). Its re-runs are reported apart: how many broke a safety
//! constraint again, the question an incident responder asks. And the share is decided by each
//! run's own hash, not by rank among the runs not yet requested: a rank-based draw skipped the
//! runs already in the oversample, so later draws reached only clean runs (found in review).
//!
//! **The check** ([`check`]): per (system, version, source), over the uniformly drawn pairs,
//! each metric of `[reruns] metrics` summed per original run and per re-run of it ((Σ value, Σ weight), as a release comparison
//! sums per task) and compared as pairs with [`crate::compare`]'s machinery: the difference
//! (re-run − original) with a paired bootstrap interval, McNemar (exact) on binary pairs or
//! Wilcoxon signed-rank otherwise, Holm across the metrics. A metric **diverges** when its
//! difference is significant after Holm; a check with a diverged metric is *flagged for
//! resolution*. Decided: the seed's "diverges beyond the reported confidence interval" is read
//! as this paired test. Reading it as "the re-runs' estimate falls outside the original
//! profile's interval" would flag about one faithful re-run sample in six per metric (two
//! independent estimates of one rate differ by more than 1.96 of one's standard errors with
//! probability 2·Φ(−1.96/√2) ≈ 0.17) and, across six metrics, most cycles.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use octant_contracts::{ReRunRequest, Source};
use octant_core::catalogue::ids;
use octant_core::stats::bootstrap::cluster_hash;
use serde::{Deserialize, Serialize};

use crate::compare::{CompareConfig, Comparison, Paired, Release, TaskSums};
use crate::sql::{Period, col, lit, period_filter};

/// `[reruns]` of the profiler's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReRunConfig {
    /// Share of each cycle's ended runs re-run (seed 000: 0.02). Default 0: no requests (a
    /// re-run needs a harness that answers `octant.reruns`).
    pub share: f64,
    /// Whose runs are drawn (default evaluation runs: a harness owns them; production runs
    /// need a harness that can replay a production request).
    pub sources: Vec<Source>,
    /// How much more likely a veto-adjacent run is drawn than another.
    pub veto_weight: f64,
    /// The metrics compared between originals and re-runs.
    pub metrics: Vec<String>,
    /// Fewer pairs and a metric is not compared.
    pub min_pairs: usize,
    /// Bootstrap replicates of each paired difference.
    pub replicates: u32,
}

impl Default for ReRunConfig {
    fn default() -> Self {
        let metrics = [
            ids::TASK_SUCCESS,
            ids::UNSAFE_ACTION_RATE,
            ids::CONFIRMATION_GATING,
            ids::TOOL_ERROR_RATE,
            ids::TOOL_CALL_ACCURACY,
            ids::TOKENS_PER_RUN,
        ];
        ReRunConfig {
            share: 0.0,
            sources: vec![Source::Evaluation],
            veto_weight: 4.0,
            metrics: metrics.iter().map(|m| m.to_string()).collect(),
            min_pairs: 10,
            replicates: 2000,
        }
    }
}

impl ReRunConfig {
    pub fn check(&self) -> std::result::Result<(), String> {
        if !(0.0..=1.0).contains(&self.share) {
            return Err(format!("[reruns] share must be in [0, 1], got {}", self.share));
        }
        if !(self.veto_weight.is_finite() && self.veto_weight >= 1.0) {
            return Err(format!("[reruns] veto_weight must be at least 1, got {}", self.veto_weight));
        }
        if self.replicates < 100 {
            return Err(format!("[reruns] replicates must be at least 100, got {}", self.replicates));
        }
        if self.min_pairs == 0 {
            return Err("[reruns] min_pairs must be at least 1".into());
        }
        if let Some(m) = self.metrics.iter().find(|m| octant_core::catalogue::spec(m).is_none()) {
            return Err(format!("[reruns] metrics: {m:?} is not in the catalogue"));
        }
        Ok(())
    }
}

/// An ended run of the cycle that may be drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub run_id: String,
    pub system_id: String,
    pub system_version: String,
    pub config_hash: String,
    pub source: Source,
    pub task_id: Option<String>,
    pub benchmark: Option<String>,
    /// Four of the five reproducibility artefacts as recorded (environment, task spec, agent
    /// configuration, decoding); the fifth, the seed, is `seed`.
    pub artefacts: [Option<String>; 4],
    pub seed: Option<i64>,
    pub started: i64,
    /// A safety violation or an ungated high-impact action.
    pub veto_adjacent: bool,
    /// Why it was requested, when a request for it exists already.
    pub requested: Option<String>,
}

/// u ∈ (0, 1) from the hash of `salt` and the run id: the same run, the same u.
fn unit(run_id: &str, salt: &str) -> f64 {
    ((cluster_hash(&format!("{salt}{run_id}")) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// Whether a run is in the uniform share: its own hash below the share, whatever else was
/// drawn (so the uniform sample never depends on outcomes or on earlier draws).
pub fn in_share(run_id: &str, share: f64) -> bool {
    unit(run_id, "") < share
}

/// Whether a veto-adjacent run outside the share is in the oversample: another hash of its own
/// below share × (veto_weight − 1), so each is drawn about veto_weight times as often as another.
pub fn in_oversample(run_id: &str, share: f64, veto_weight: f64) -> bool {
    unit(run_id, "veto-adjacent:") < share * (veto_weight - 1.0)
}

/// Reasons whose runs were drawn without looking at their outcome: the divergence test's pairs.
pub const UNIFORM: [&str; 2] = ["coverage", "sample"];

/// The cycle's new requests (module docs): the uniform share, coverage, the veto-adjacent
/// oversample.
/// `covered`: systems with a coverage request made in the cycle (`[period.start, now]`), whose
/// run may have left the period since.
pub fn draw(cfg: &ReRunConfig, period: &Period, candidates: &[Candidate], covered: &BTreeSet<String>, now: i64) -> Vec<ReRunRequest> {
    if cfg.share <= 0.0 || candidates.is_empty() {
        return Vec::new();
    }
    let mut chosen: Vec<(&Candidate, &'static str)> = Vec::new();
    // 1. The declared share: every run whose hash falls in it.
    let uniform: BTreeSet<&str> = candidates.iter().filter(|c| in_share(&c.run_id, cfg.share)).map(|c| c.system_id.as_str()).collect();
    chosen.extend(candidates.iter().filter(|c| c.requested.is_none() && in_share(&c.run_id, cfg.share)).map(|c| (c, "sample")));
    // 2. Coverage: a system with no run in the share and no coverage request in the cycle gets
    // its run of the lowest hash among all its runs — a uniform pick within the system, whatever
    // was drawn before (when that run was requested already, for its outcome, none this time).
    let mut covered: BTreeSet<&str> = covered.iter().map(String::as_str).collect();
    covered.extend(candidates.iter().filter(|c| c.requested.as_deref() == Some("coverage")).map(|c| c.system_id.as_str()));
    let mut lowest: BTreeMap<&str, &Candidate> = BTreeMap::new();
    for c in candidates {
        let e = lowest.entry(c.system_id.as_str()).or_insert(c);
        if (unit(&c.run_id, ""), &c.run_id) < (unit(&e.run_id, ""), &e.run_id) {
            *e = c;
        }
    }
    chosen.extend(
        lowest
            .into_iter()
            .filter(|(s, c)| !uniform.contains(s) && !covered.contains(s) && c.requested.is_none())
            .map(|(_, c)| (c, "coverage")),
    );
    // 3. The veto-adjacent oversample, outside the share.
    let taken: BTreeSet<&str> = chosen.iter().map(|(c, _)| c.run_id.as_str()).collect();
    chosen.extend(
        candidates
            .iter()
            .filter(|c| c.requested.is_none() && c.veto_adjacent && !taken.contains(c.run_id.as_str()))
            .filter(|c| !in_share(&c.run_id, cfg.share) && in_oversample(&c.run_id, cfg.share, cfg.veto_weight))
            .map(|c| (c, "veto_adjacent")),
    );
    chosen
        .into_iter()
        .map(|(c, reason)| {
            let [environment_version, task_spec, agent_config, decoding] = c.artefacts.clone();
            ReRunRequest {
                request_id: ReRunRequest::id_of(&c.run_id),
                run_id: c.run_id.clone(),
                system_id: c.system_id.clone(),
                system_version: c.system_version.clone(),
                config_hash: c.config_hash.clone(),
                source: c.source.as_str().to_string(),
                task_id: c.task_id.clone(),
                benchmark: c.benchmark.clone(),
                environment_version,
                task_spec,
                agent_config,
                decoding,
                seed: c.seed,
                reason: reason.to_string(),
                period: period.name.clone(),
                run_time: c.started,
                requested_at: now,
            }
        })
        .collect()
}

/// The ended, original runs of `period` from the declared sources, each marked veto-adjacent
/// and requested (a request in the lake, or in `sent`); and the systems with a coverage request
/// in the lake made since the period's start (the cycle).
pub async fn candidates(
    ctx: &SessionContext,
    cfg: &ReRunConfig,
    period: &Period,
    sent: &BTreeMap<String, String>,
) -> Result<(Vec<Candidate>, BTreeSet<String>)> {
    if cfg.sources.is_empty() {
        return Ok((Vec::new(), BTreeSet::new()));
    }
    let sources = cfg.sources.iter().map(|s| lit(crate::sql::lake_source(*s))).collect::<Vec<_>>().join(", ");
    let period_sql = period_filter(period, "event_time", None);
    let repro = |f: &str| format!("first_value(get_field(get_field(run_started, 'reproducibility'), '{f}'))");
    let sql = format!(
        "WITH starts AS (SELECT run_id, first_value(system_id) AS s, first_value(get_field(system, 'version')) AS v, \
                first_value(get_field(system, 'config_hash')) AS h, first_value(source) AS src, \
                first_value(get_field(run_started, 'task_id')) AS task, \
                first_value(get_field(get_field(run_started, 'benchmark'), 'id')) AS bench, \
                {} AS env, {} AS spec, {} AS agent, {} AS decoding, {} AS seed, \
                first_value(get_field(run_started, 'rerun_of')) AS rerun_of, min(CAST(event_time AS BIGINT)) AS t \
              FROM trajectory_events WHERE kind = 'RUN_STARTED' AND source IN ({sources}) AND {period_sql} GROUP BY run_id), \
         ends AS (SELECT DISTINCT run_id FROM trajectory_events WHERE kind = 'RUN_ENDED' AND {period_sql}), \
         adjacent AS (SELECT DISTINCT run_id FROM observations WHERE rerun_of IS NULL AND {period_sql} AND \
                ((metric = {} AND value > 0) OR (metric = {} AND weight > 0 AND value < weight))), \
         requested AS (SELECT run_id, first_value(reason) AS reason FROM rerun_requests WHERE date >= {} GROUP BY run_id) \
         SELECT s.run_id, s.s, s.v, s.h, s.src, s.task, s.bench, s.env, s.spec, s.agent, s.decoding, CAST(s.seed AS BIGINT) AS seed, s.t, \
                CAST(a.run_id IS NOT NULL AS BIGINT) AS adjacent, q.reason AS requested \
         FROM starts s JOIN ends e ON s.run_id = e.run_id LEFT JOIN adjacent a ON s.run_id = a.run_id \
              LEFT JOIN requested q ON s.run_id = q.run_id \
         WHERE s.rerun_of IS NULL ORDER BY s.run_id",
        repro("environment_version"),
        repro("task_spec"),
        repro("agent_config"),
        repro("decoding"),
        repro("seed"),
        lit(ids::UNSAFE_ACTION_RATE),
        lit(ids::CONFIRMATION_GATING),
        // A run of the period is requested after it started: from the period's first day on.
        lit(&octant_lake::date_of(period.start)),
    );
    let mut out = Vec::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let text = |n: &str| col(&b, n, &DataType::Utf8).map(|c| c.as_string::<i32>().clone());
        let (run, s, v, h, src, task, bench) =
            (text("run_id")?, text("s")?, text("v")?, text("h")?, text("src")?, text("task")?, text("bench")?);
        let (env, spec, agent, decoding) = (text("env")?, text("spec")?, text("agent")?, text("decoding")?);
        let int = |n: &str| col(&b, n, &DataType::Int64).map(|c| c.as_primitive::<Int64Type>().clone());
        let (seed, t, adjacent) = (int("seed")?, int("t")?, int("adjacent")?);
        let requested = text("requested")?;
        let opt = |a: &arrow::array::StringArray, i: usize| (!a.is_null(i)).then(|| a.value(i).to_string());
        for i in 0..b.num_rows() {
            if run.is_null(i) || s.is_null(i) || v.is_null(i) {
                continue;
            }
            let run_id = run.value(i).to_string();
            out.push(Candidate {
                requested: sent.get(&run_id).cloned().or_else(|| opt(&requested, i)),
                run_id,
                system_id: s.value(i).to_string(),
                system_version: v.value(i).to_string(),
                config_hash: opt(&h, i).unwrap_or_default(),
                source: crate::profile::source_of(src.value(i)),
                task_id: opt(&task, i),
                benchmark: opt(&bench, i),
                artefacts: [opt(&env, i), opt(&spec, i), opt(&agent, i), opt(&decoding, i)],
                seed: (!seed.is_null(i)).then(|| seed.value(i)),
                started: t.value(i),
                veto_adjacent: adjacent.value(i) == 1,
            });
        }
    }
    let sql = format!(
        "SELECT DISTINCT system_id FROM rerun_requests WHERE reason = 'coverage' AND date >= {} AND CAST(requested_at AS BIGINT) >= {}",
        lit(&octant_lake::date_of(period.start)),
        period.start
    );
    let mut covered = BTreeSet::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let s = arrow::compute::cast(b.column(0), &DataType::Utf8)?;
        covered.extend(s.as_string::<i32>().iter().flatten().map(str::to_string));
    }
    Ok((out, covered))
}

/// One (system, version, source)'s re-runs of the period against their originals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReRunCheck {
    pub system: String,
    pub version: String,
    pub source: String,
    /// Requests published in the period, and re-runs returned (of originals in the lake).
    pub requested: u64,
    pub returned: u64,
    /// Originals with at least one re-run among the metrics' observations.
    pub pairs: usize,
    /// The paired comparison: baseline = the originals, candidate = their re-runs.
    pub comparison: Comparison,
    /// Metrics whose difference is significant after Holm.
    pub diverged: Vec<String>,
    /// The veto-adjacent oversample, outside the test (drawn for their outcome, their re-runs
    /// regress toward the mean): how many came back, and how many of those broke a safety
    /// constraint again (`None`: unsafe_action_rate is not among the metrics).
    pub veto_adjacent: usize,
    pub unsafe_again: Option<usize>,
    /// Re-runs no request of Octant's asked for, left out of the test (their draw is unknown).
    pub unrequested: usize,
    /// Fewer pairs and a metric is not tested (`[reruns] min_pairs`).
    pub min_pairs: usize,
}

impl ReRunCheck {
    /// A diverged metric flags the check for resolution (seed 000 §IV-G).
    pub fn flagged(&self) -> bool {
        !self.diverged.is_empty()
    }

    /// Some metric had enough pairs to be tested (else "no divergence" says nothing).
    pub fn tested(&self) -> bool {
        !self.comparison.metrics.is_empty()
    }
}

/// The check of one group's sums (the pure part of [`check`]).
pub fn check_sums(
    cfg: &ReRunConfig,
    alpha: f64,
    seed: u64,
    key: &(String, String, String),
    data: &BTreeMap<String, Paired>,
    period: &Period,
) -> ReRunCheck {
    let compare = CompareConfig {
        metrics: cfg.metrics.clone(),
        gates: BTreeMap::new(),
        alpha,
        min_tasks: cfg.min_pairs,
        replicates: cfg.replicates,
        ..CompareConfig::default()
    };
    let (system, version, source) = key;
    let release = Release::new(system, version, &format!("{version} (re-run)"), crate::profile::source_of(source));
    let mut comparison = crate::compare::compare_sums(&compare, seed, &release, period, data);
    comparison.decision = String::new();
    let diverged: Vec<String> =
        comparison.metrics.iter().filter(|m| m.p_holm < alpha && m.change != "no significant change").map(|m| m.metric.clone()).collect();
    comparison.decision = if !diverged.is_empty() {
        format!("flagged for resolution: {} diverged", diverged.join(", "))
    } else if comparison.metrics.is_empty() {
        format!("not tested: fewer than {} pairs", cfg.min_pairs)
    } else {
        "consistent".into()
    };
    let pairs = data.values().map(|p| p.baseline.keys().filter(|k| p.candidate.contains_key(*k)).count()).max().unwrap_or(0);
    let returned = data.values().map(|p| p.candidate.values().map(|s| s.runs).sum::<u64>()).max().unwrap_or(0);
    ReRunCheck {
        system: system.clone(),
        version: version.clone(),
        source: source.clone(),
        requested: 0,
        returned,
        pairs,
        comparison,
        diverged,
        veto_adjacent: 0,
        unsafe_again: None,
        unrequested: 0,
        min_pairs: cfg.min_pairs,
    }
}

/// Every group's check of the re-runs with units in `period`: whole runs, re-runs and their
/// originals read from the period and the one before it (an original's units older than that
/// are not read; a re-run whose original has none left is neither paired nor counted).
pub async fn check(ctx: &SessionContext, cfg: &ReRunConfig, alpha: f64, seed: u64, period: &Period) -> Result<Vec<ReRunCheck>> {
    let list = cfg.metrics.iter().map(|m| lit(m)).collect::<Vec<_>>().join(", ");
    let back = period.with_lookback();
    // One row per observation id (the lake may hold a record twice), then per pair and side;
    // a pair's group is its original's (a harness may send a production run's re-run as an
    // evaluation run).
    let sql = format!(
        "WITH reruns AS (SELECT DISTINCT run_id, rerun_of FROM observations WHERE rerun_of IS NOT NULL AND {}), \
         obs AS (SELECT observation_id, first_value(system_id) AS sys, first_value(system_version) AS v, first_value(source) AS src, \
                 first_value(metric) AS metric, first_value(coalesce(rerun_of, run_id)) AS k, \
                 first_value(CAST(rerun_of IS NOT NULL AS BIGINT)) AS side, first_value(run_id) AS run_id, \
                 first_value(value) AS value, first_value(weight) AS weight \
          FROM observations WHERE metric IN ({list}) AND {} AND \
               (run_id IN (SELECT run_id FROM reruns) OR run_id IN (SELECT rerun_of FROM reruns)) \
          GROUP BY observation_id), \
         originals AS (SELECT k, first_value(sys) AS sys, first_value(v) AS v, first_value(src) AS src FROM obs WHERE side = 0 GROUP BY k), \
         requests AS (SELECT run_id, first_value(reason) AS reason FROM rerun_requests WHERE date >= {} GROUP BY run_id) \
         SELECT g.sys, g.v, g.src, coalesce(q.reason, '') AS reason, o.metric, o.k, o.side, count(DISTINCT o.run_id) AS runs, \
                sum(o.value) AS sv, sum(o.weight) AS sw \
         FROM obs o JOIN originals g ON o.k = g.k LEFT JOIN requests q ON o.k = q.run_id GROUP BY 1, 2, 3, 4, 5, 6, 7",
        period_filter(period, "event_time", None),
        period_filter(&back, "event_time", None),
        lit(&octant_lake::date_of(back.start)),
    );
    // Per group: the uniformly drawn pairs (tested), the veto-adjacent ones, the unrequested.
    let mut sums: BTreeMap<(String, String, String), [BTreeMap<String, Paired>; 3]> = BTreeMap::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let text = |n: &str| col(&b, n, &DataType::Utf8).map(|c| c.as_string::<i32>().clone());
        let (sys, v, src, reason, metric, k) = (text("sys")?, text("v")?, text("src")?, text("reason")?, text("metric")?, text("k")?);
        let side = col(&b, "side", &DataType::Int64)?;
        let runs = col(&b, "runs", &DataType::Int64)?;
        let (sv, sw) = (col(&b, "sv", &DataType::Float64)?, col(&b, "sw", &DataType::Float64)?);
        for i in 0..b.num_rows() {
            if [&sys, &v, &src, &reason, &metric, &k].iter().any(|a| a.is_null(i)) {
                continue;
            }
            let s = TaskSums {
                value: sv.as_primitive::<Float64Type>().value(i),
                weight: sw.as_primitive::<Float64Type>().value(i),
                runs: runs.as_primitive::<Int64Type>().value(i) as u64,
            };
            let part = match reason.value(i) {
                r if UNIFORM.contains(&r) => 0,
                "veto_adjacent" => 1,
                _ => 2,
            };
            let group = sums.entry((sys.value(i).to_string(), v.value(i).to_string(), src.value(i).to_string())).or_default();
            let p = group[part].entry(metric.value(i).to_string()).or_default();
            let side = if side.as_primitive::<Int64Type>().value(i) == 1 { &mut p.candidate } else { &mut p.baseline };
            side.insert(k.value(i).to_string(), s);
        }
    }
    let returned = |d: &BTreeMap<String, Paired>| d.values().map(|p| p.candidate.values().map(|s| s.runs).sum::<u64>()).max().unwrap_or(0);
    let paired = |d: &BTreeMap<String, Paired>| {
        d.values().map(|p| p.baseline.keys().filter(|k| p.candidate.contains_key(*k)).count()).max().unwrap_or(0)
    };
    // A group is one whose re-runs came back: originals alone are not checked.
    sums.retain(|_, parts| parts.iter().any(|d| returned(d) > 0));
    let requested = requested(ctx, period).await?;
    Ok(sums
        .iter()
        .map(|(key, [uniform, adjacent, unrequested])| {
            let mut c = check_sums(cfg, alpha, seed, key, uniform, period);
            c.requested = requested.get(key).copied().unwrap_or_default();
            c.returned = returned(uniform) + returned(adjacent) + returned(unrequested);
            c.veto_adjacent = paired(adjacent);
            c.unsafe_again = adjacent
                .get(ids::UNSAFE_ACTION_RATE)
                .map(|p| p.baseline.keys().filter(|k| p.candidate.get(*k).is_some_and(|s| s.value > 0.0)).count());
            c.unrequested = paired(unrequested);
            c
        })
        .collect())
}

/// Requests published in the period, per the original's (system, version, source).
async fn requested(ctx: &SessionContext, period: &Period) -> Result<BTreeMap<(String, String, String), u64>> {
    let sql = format!(
        "SELECT system_id AS s, system_version AS v, source AS src, count(DISTINCT run_id) AS n FROM rerun_requests WHERE {} GROUP BY 1, 2, 3",
        period_filter(period, "requested_at", None)
    );
    let mut out: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for b in ctx.sql(&sql).await?.collect().await? {
        let text = |n: &str| col(&b, n, &DataType::Utf8).map(|c| c.as_string::<i32>().clone());
        let (s, v, src) = (text("s")?, text("v")?, text("src")?);
        let n = col(&b, "n", &DataType::Int64)?;
        for i in 0..b.num_rows() {
            if s.is_null(i) || v.is_null(i) || src.is_null(i) {
                continue;
            }
            // Requests name the source in lower case; the lake's observations by the enum symbol.
            let source = crate::sql::lake_source(crate::profile::source_of(src.value(i))).to_string();
            *out.entry((s.value(i).to_string(), v.value(i).to_string(), source)).or_default() +=
                n.as_primitive::<Int64Type>().value(i) as u64;
        }
    }
    Ok(out)
}

/// The check as a Markdown section (the evidence package's "Independent re-runs").
pub fn to_markdown(c: &ReRunCheck) -> String {
    let mut s = format!(
        "## Independent re-runs\n\nRe-run requests published in the period: {}; re-runs returned: {}. The {} drawn uniformly \
         (coverage and the declared share) are compared with their originals: re-run − original with paired bootstrap \
         intervals, McNemar or Wilcoxon, Holm across the metrics at α = {}. **{}**.\n\n",
        c.requested,
        c.returned,
        c.pairs,
        c.comparison.alpha,
        if c.flagged() {
            format!("Flagged for resolution: {} diverged", c.diverged.join(", "))
        } else if !c.tested() {
            format!("Not tested yet: fewer than {} pairs (nothing is known about divergence)", c.min_pairs)
        } else {
            "No metric diverged".to_string()
        },
    );
    s.push_str(&crate::compare::pairs_table(&c.comparison, "pairs", "original", "re-run"));
    if c.veto_adjacent > 0 {
        let again = c.unsafe_again.map(|n| format!(" ({n} of them broke a safety constraint again)")).unwrap_or_default();
        s.push_str(&format!(
            "\nVeto-adjacent runs re-run (drawn for their unsafe or ungated actions, outside the test): {}{again}.\n",
            c.veto_adjacent
        ));
    }
    if c.unrequested > 0 {
        s.push_str(&format!("\nRe-runs no request asked for (left out): {}.\n", c.unrequested));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period() -> Period {
        Period { name: "24h".into(), start: 0, end: 86_400_000 }
    }

    fn candidate(system: &str, i: usize, adjacent: bool) -> Candidate {
        Candidate {
            run_id: format!("{system}-run-{i}"),
            system_id: system.into(),
            system_version: "1".into(),
            config_hash: String::new(),
            source: Source::Evaluation,
            task_id: Some(format!("t{i}")),
            benchmark: None,
            artefacts: [None, None, None, None],
            seed: None,
            started: i as i64,
            veto_adjacent: adjacent,
            requested: None,
        }
    }

    /// The share is the runs whose hash falls in it; a system with none of its runs there gets
    /// one (coverage, a system with a single run included); a second draw over the same runs
    /// with the first's requests marked adds nothing; more runs add their own share; share 0
    /// draws nothing.
    #[test]
    fn the_draw_takes_the_share_and_covers_every_system() {
        let cfg = ReRunConfig { share: 0.02, ..ReRunConfig::default() };
        let mut runs: Vec<Candidate> = (0..1000).map(|i| candidate("big", i, false)).collect();
        runs.push(candidate("tiny", 0, false));
        runs.extend((0..50).map(|i| candidate("mid", i, false)));
        let first = draw(&cfg, &period(), &runs, &BTreeSet::new(), 7);
        let ids =
            |d: &[ReRunRequest], reason: &str| d.iter().filter(|r| r.reason == reason).map(|r| r.run_id.clone()).collect::<BTreeSet<_>>();
        let members: BTreeSet<String> = runs.iter().filter(|c| in_share(&c.run_id, 0.02)).map(|c| c.run_id.clone()).collect();
        assert_eq!(ids(&first, "sample"), members);
        assert!((10..35).contains(&members.len()), "about 2 % of 1,051: {}", members.len());
        let without: BTreeSet<&str> =
            ["big", "mid", "tiny"].into_iter().filter(|s| !members.iter().any(|m| m.starts_with(&format!("{s}-")))).collect();
        assert!(without.contains("tiny"), "its one run is out of the share");
        let covered: BTreeSet<&str> = first.iter().filter(|r| r.reason == "coverage").map(|r| r.system_id.as_str()).collect();
        assert_eq!(covered, without);
        assert!(first.iter().all(|r| r.request_id == ReRunRequest::id_of(&r.run_id) && r.requested_at == 7 && r.period == "24h"));
        assert_eq!(first.iter().map(|r| &r.run_id).collect::<BTreeSet<_>>().len(), first.len(), "a run is drawn once");
        // The same runs, the requests made: nothing new. Twice the runs: the share of the new.
        for r in runs.iter_mut() {
            r.requested = first.iter().find(|q| q.run_id == r.run_id).map(|q| q.reason.clone());
        }
        assert!(draw(&cfg, &period(), &runs, &BTreeSet::new(), 8).is_empty());
        runs.extend((1000..2000).map(|i| candidate("big", i, false)));
        let more = draw(&cfg, &period(), &runs, &BTreeSet::new(), 9);
        let new: BTreeSet<String> = runs[1051..].iter().filter(|c| in_share(&c.run_id, 0.02)).map(|c| c.run_id.clone()).collect();
        assert_eq!(ids(&more, "sample"), new);
        assert_eq!(more.len(), new.len(), "no coverage again");
        assert!(draw(&ReRunConfig::default(), &period(), &runs, &BTreeSet::new(), 9).is_empty(), "share 0 requests nothing");
        // A coverage request made earlier in the cycle covers its system, even when its run has
        // left the period since.
        let fresh: Vec<Candidate> = runs.iter().cloned().map(|c| Candidate { requested: None, ..c }).collect();
        let before: BTreeSet<String> = without.iter().map(|s| s.to_string()).collect();
        assert!(draw(&cfg, &period(), &fresh, &before, 10).iter().all(|r| r.reason != "coverage"));
        // The pick is the lowest hash among all the system's runs: when that run was requested
        // for its outcome already, none (a pick among the rest would lean toward clean runs).
        let mut held = fresh.clone();
        held.iter_mut().find(|c| c.system_id == "tiny").unwrap().requested = Some("veto_adjacent".into());
        assert!(draw(&cfg, &period(), &held, &BTreeSet::new(), 11).iter().all(|r| r.system_id != "tiny"));
    }

    /// Weighted toward veto-adjacent runs: with 10 % of runs veto-adjacent and weight 4, the
    /// share holds about 10 % of them and the oversample adds 3 × the share of the others, so
    /// each is drawn about 4 times as often as another; with weight 1 there is no oversample,
    /// and the share is the same draw either way.
    #[test]
    fn the_draw_is_weighted_toward_veto_adjacent_runs() {
        let runs: Vec<Candidate> = (0..20_000).map(|i| candidate("s", i, i % 10 == 0)).collect();
        let drawn =
            |w: f64| draw(&ReRunConfig { share: 0.02, veto_weight: w, ..ReRunConfig::default() }, &period(), &runs, &BTreeSet::new(), 0);
        let plain = drawn(1.0);
        assert!((340..460).contains(&plain.len()), "{}", plain.len());
        assert!(plain.iter().all(|r| r.reason == "sample"));
        let weighted = drawn(4.0);
        let oversample = weighted.iter().filter(|r| r.reason == "veto_adjacent").count();
        assert!((85..150).contains(&oversample), "about 0.06 × 1,960: {oversample}");
        let adjacent = |d: &[ReRunRequest]| d.iter().filter(|r| r.run_id.ends_with('0')).count() as f64;
        let (rate_adjacent, rate_other) = (adjacent(&weighted) / 2000.0, (weighted.len() as f64 - adjacent(&weighted)) / 18_000.0);
        assert!((rate_adjacent / rate_other - 4.0).abs() < 1.0, "{rate_adjacent} vs {rate_other}");
        let uniform: Vec<&str> = weighted.iter().filter(|r| r.reason != "veto_adjacent").map(|r| r.run_id.as_str()).collect();
        assert_eq!(uniform, plain.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>());
    }

    struct Sim(u64);
    impl Sim {
        fn f64(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// One cycle's pairs: per original task a success probability in [0.5, 0.95] and a token
    /// count around 1,000; the re-run draws from the same, its success probability lowered by
    /// `drift`.
    fn cycle(sim: &mut Sim, pairs: usize, drift: f64) -> BTreeMap<String, Paired> {
        let mut success = Paired::default();
        let mut tokens = Paired::default();
        for i in 0..pairs {
            let p = 0.5 + 0.45 * sim.f64();
            let k = format!("run-{i}");
            let unit = |v: f64| TaskSums { value: v, weight: 1.0, runs: 1 };
            success.baseline.insert(k.clone(), unit(f64::from(u8::from(sim.f64() < p))));
            success.candidate.insert(k.clone(), unit(f64::from(u8::from(sim.f64() < p - drift))));
            tokens.baseline.insert(k.clone(), unit((800.0 + 400.0 * sim.f64()).round()));
            tokens.candidate.insert(k, unit((800.0 + 400.0 * sim.f64()).round()));
        }
        [(ids::TASK_SUCCESS.to_string(), success), (ids::TOKENS_PER_RUN.to_string(), tokens)].into()
    }

    /// By simulation: faithful re-runs are flagged in at most α of cycles (Holm over the two
    /// metrics; McNemar's exact test is conservative), re-runs that succeed 30 points less (80 pairs)
    /// nearly always, and only for the metric that moved.
    #[test]
    fn faithful_reruns_are_rarely_flagged_and_diverging_ones_are() {
        let cfg =
            ReRunConfig { metrics: vec![ids::TASK_SUCCESS.into(), ids::TOKENS_PER_RUN.into()], replicates: 200, ..ReRunConfig::default() };
        let key = ("s".to_string(), "1".to_string(), "EVALUATION".to_string());
        let mut sim = Sim(11);
        let cycles = 300;
        // Per cycle: flagged at all, and the metric that did not move among the diverged.
        let flagged = |sim: &mut Sim, drift: f64| {
            let checks: Vec<ReRunCheck> = (0..cycles).map(|_| check_sums(&cfg, 0.05, 3, &key, &cycle(sim, 80, drift), &period())).collect();
            let share = |f: &dyn Fn(&ReRunCheck) -> bool| checks.iter().filter(|c| f(c)).count() as f64 / cycles as f64;
            (share(&|c| c.flagged()), share(&|c| c.diverged.iter().any(|m| m == ids::TOKENS_PER_RUN)))
        };
        let (null, _) = flagged(&mut sim, 0.0);
        let (drifted, tokens) = flagged(&mut sim, 0.3);
        eprintln!("flagged: faithful {null:.3}, drifted by 0.3 {drifted:.3} (tokens, unmoved, {tokens:.3})");
        assert!(null <= 0.07, "faithful re-runs flagged in {null} of cycles");
        assert!(drifted >= 0.9, "re-runs 30 points worse flagged in only {drifted} of cycles");
        assert!(tokens <= 0.07, "the unmoved metric diverged in {tokens} of cycles");
        let c = check_sums(&cfg, 0.05, 3, &key, &cycle(&mut sim, 60, 0.3), &period());
        assert_eq!((c.pairs, c.returned), (60, 60));
        let md = to_markdown(&c);
        assert!(md.contains("## Independent re-runs") && md.contains("| pairs | original | re-run |"), "{md}");
    }
}
