//! Event-time windows of observations for one input partition. Pure: no I/O, no clock.
//!
//! ## Model
//! Observations fall in **panes** of `slide` length (pane start = event time rounded down to
//! the slide). A window ending at `t` holds the panes in `[t − length, t)`; windows end on
//! slide boundaries (tumbling windows: `slide = length`).
//!
//! The **frontier** F is the end of the last emitted window. The caller supplies the
//! watermark M (the minimum over upstream partitions, see [`crate::upstream`]); whenever
//! `⌊(M − lateness)/slide⌋·slide` passes F, the windows ending at each boundary up to it are
//! emitted in order. An observation with event time < F belongs to a window already emitted:
//! it is **late** (the caller dead-letters and counts it; it never changes an emitted window).
//! Before the first watermark there is no frontier and every observation is kept; the first
//! watermark sets F to the earlier of its own boundary and the oldest pane with data.
//!
//! ## Determinism
//! Emissions depend only on the sequence of observations and watermarks of the partition and
//! on F at the start: the bootstrap is deterministic and mergeable (octant-core), window sums are exact
//! integers, and late/duplicate decisions depend on F alone. A restart resumes from a
//! committed offset C with the frontier in force just before C ([`Windows::frontier_before`]),
//! and C never passes the first offset of a pane some future window still needs
//! ([`Windows::retained_min_offset`]); the replay then emits exactly what the first run emitted.
//!
//! ## State
//! A **linear** series (ratio metrics, ECE, the fairness gap) keeps per-pane per-cluster sums
//! (an observation adds to its cluster's sums in its pane, nothing more) and the bootstrap
//! replicate sums of the panes of the next window before the frontier pane. When the window
//! closes, the frontier pane enters the replicate sums and the oldest pane leaves them, each
//! cluster once with its pane's summed components: a cluster's B weights are drawn twice per
//! pane it has units in (entering and leaving), however many observations it has there. Exact:
//! the components are integers, and `w·a + w·b = w·(a + b)`. A sparse series (at most
//! [`MATERIALISE_UP_TO`] (pane, cluster) sums in its next window) keeps no replicate sums
//! between windows: they are made at emission from its pane sums (the same integers), so the
//! B × width integers of a series are held only where many clusters share a window. A **task** series (pass@k, pass^k, outcome
//! consistency) keeps per-pane per-task attempt counts and resamples tasks at emission.
//! A **declared** series (contamination) keeps the largest declared value per pane.

use std::collections::{BTreeMap, VecDeque};

use hashbrown::{Equivalent, HashMap, HashSet};

use octant_contracts::{Observation, Source};
use octant_core::catalogue::{Estimator, MetricSpec, derived_from, ids, spec};
use octant_core::family::Family;
use octant_core::stats::bootstrap::{
    BootstrapSpec, Estimate, LaneSums, ReplicateSums, cluster_hash, from_fixed, rate_estimate, ratio, to_fixed,
};
use octant_core::stats::sequential::{self, Evidence};
use octant_core::stats::{calibration, fairness, passk};

/// Window geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    pub length_ms: i64,
    pub slide_ms: i64,
    pub lateness_ms: i64,
}

impl WindowSpec {
    pub fn check(&self) -> Result<(), String> {
        if self.slide_ms <= 0 || self.length_ms <= 0 {
            return Err("window length and slide must be positive".into());
        }
        if self.length_ms % self.slide_ms != 0 {
            return Err(format!("window length {} ms is not a multiple of the slide {} ms", self.length_ms, self.slide_ms));
        }
        if self.lateness_ms < 0 {
            return Err("allowed lateness must not be negative".into());
        }
        if self.slide_ms % 1000 != 0 {
            return Err(format!("window slide {} ms is not a whole number of seconds", self.slide_ms));
        }
        Ok(())
    }

    pub fn pane_of(&self, t: i64) -> i64 {
        t.div_euclid(self.slide_ms) * self.slide_ms
    }
}

/// A ratio whose value is a rate in [0, 1] (families H, L and W): its interval is the rate
/// interval of [`rate_interval`] (Jeffreys at the bootstrap's effective sample size).
pub fn is_rate(metric: &MetricSpec) -> bool {
    metric.estimator == Estimator::Ratio
        && matches!(metric.family, Family::Higher | Family::Lower | Family::Window { .. })
        && !NOT_PROPORTIONS.contains(&metric.id)
}

/// Ratios of sums banded as rates that are not proportions: Δ_eff = Σ(t_manual − t_gen −
/// t_review) / Σ t_manual can be negative and its weights are minutes, so a proportion's
/// interval at an effective sample size would change with the time unit. They keep the
/// bootstrap's percentile interval, and a gate gives no proportion sample size for them.
const NOT_PROPORTIONS: [&str; 2] = [ids::EFFICIENCY_NET_OF_REVIEW_OBSERVED, ids::EFFICIENCY_NET_OF_REVIEW_ESTIMATED];

/// The e-detector of a vetoed rate over the panes of a window: each run chunk (a cluster's
/// units inside one pane) is one bet ([`sequential`]). Deterministic: a pane's log factors are
/// exact fixed-point sums, whatever order its clusters are visited in. `panes`: each pane's
/// start, its log factors ([`pane_logs`]) and its point sums (numerator, denominator).
pub(crate) fn evidence(panes: &[PaneEvidence]) -> Option<WindowEvidence> {
    let logs: Vec<sequential::PaneLogs> = panes.iter().map(|p| p.1).collect::<Option<_>>()?;
    let evidence = sequential::detector(&logs)?;
    let (num, den) = panes[evidence.since..].iter().fold((0i128, 0i128), |(n, d), p| (n + p.2, d + p.3));
    Some(WindowEvidence { evidence, since: panes[evidence.since].0, estimate: if den > 0 { num as f64 / den as f64 } else { f64::NAN } })
}

/// The log factors of one pane of a vetoed rate, from its clusters' component sums.
pub(crate) fn pane_logs<'a>(metric: &MetricSpec, clusters: impl Iterator<Item = &'a [i128]>) -> Option<sequential::PaneLogs> {
    sequential::pane_logs(&metric.veto?, clusters.filter(|c| c[1] > 0).map(|c| c[0] as f64 / c[1] as f64))
}

/// What the e-detector needs of one pane: its start, log factors and point sums (numerator,
/// denominator).
pub type PaneEvidence = (i64, Option<sequential::PaneLogs>, i128, i128);

/// The component width of a linear series' state (`None`: not a linear series).
pub fn linear_dims(metric: &MetricSpec) -> Option<usize> {
    match metric.estimator {
        Estimator::Ratio => Some(2),
        Estimator::Ece => Some(calibration::DIMS),
        Estimator::GroupGap => Some(2 * MAX_GROUPS),
        _ => None,
    }
}

/// Whether a series carries sequential evidence (a vetoed rate).
pub(crate) fn has_evidence(metric: &MetricSpec) -> bool {
    is_rate(metric) && metric.veto.is_some()
}

/// The window of a linear series from its window sums: `units` and `clusters` counted over
/// the window, `panes` for the evidence of a vetoed rate.
pub(crate) fn linear_window(
    key: &SeriesKey,
    metric: &'static MetricSpec,
    window: Sums,
    units: u64,
    clusters: u64,
    panes: Option<&[PaneEvidence]>,
    level: f64,
) -> SeriesWindow {
    // Each statistic by name (not through a function pointer): a thousand replicates each.
    let estimate = match metric.estimator {
        Estimator::Ece => window.wide().estimate(level, calibration::statistic),
        Estimator::GroupGap => window.wide().estimate(level, fairness::statistic),
        // A rate's interval is Jeffreys at its effective sample size: no percentiles needed.
        _ if is_rate(metric) => {
            window.ratio_values().map(|(point, reps)| rate_estimate(point, reps, level, units, from_fixed(window.point()[1]), clusters))
        }
        _ => window.ratio_values().map(|(point, reps)| Estimate::from_replicates(point, reps, level, units)),
    };
    let estimate = estimate.map(|e| Estimate { units, ..e });
    let evidence = panes.filter(|_| has_evidence(metric)).and_then(evidence);
    SeriesWindow { key: key.clone(), spec: metric, units, clusters, estimate, evidence, weightless: 0 }
}

/// The replicate sums a linear window is estimated from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sums<'a> {
    Wide(&'a ReplicateSums),
    /// A ratio's, kept in `i64` lanes ([`Kept`]).
    Lanes(&'a LaneSums),
}

impl Sums<'_> {
    fn point(&self) -> &[i128] {
        match self {
            Sums::Wide(w) => w.point(),
            Sums::Lanes(l) => l.point(),
        }
    }

    fn wide(&self) -> std::borrow::Cow<'_, ReplicateSums> {
        match self {
            Sums::Wide(w) => std::borrow::Cow::Borrowed(*w),
            Sums::Lanes(l) => std::borrow::Cow::Owned(l.to_wide()),
        }
    }

    /// The ratio's point and replicate values (the same from either form).
    fn ratio_values(&self) -> Option<(f64, Vec<f64>)> {
        match self {
            Sums::Wide(w) => w.values(ratio),
            Sums::Lanes(l) => l.ratio_values(),
        }
    }
}

/// The k of pass^k's reliability signature (seed 002 §4: pass^1, pass^2, pass^4).
pub const PASS_HAT_SIGNATURE: [u64; 3] = [1, 2, 4];

/// The window of a task series (pass@k, pass^k, consistency) from its attempts per task
/// (`None` without tasks).
pub(crate) fn tasks_window(
    key: &SeriesKey,
    metric: &'static MetricSpec,
    tasks: &BTreeMap<&str, (u64, u64)>,
    boot: &BootstrapSpec,
) -> Option<SeriesWindow> {
    if tasks.is_empty() {
        return None;
    }
    let value = |n: u64, c: u64| match metric.estimator {
        Estimator::PassAtK { k } => passk::pass_at_k(n, c, k as u64),
        Estimator::PassHatK { k } => passk::pass_hat_k(n, c, k as u64),
        _ => passk::success_variance(n, c),
    };
    // pass^1, pass^2 and pass^4 are one reliability signature over one task set (seed 002
    // §4: from the same K attempts): the tasks with at least K attempts, K the largest k of
    // the signature that at least half of the window's tasks reach (so one task tried more
    // often does not shrink the set). A k above K is over the tasks that reach k. With 4
    // attempts for half the tasks and 2 for the rest, all three are over the first half;
    // with 2 for all, pass^1 and pass^2 are over every task and pass^4 has none.
    let attempts = match metric.estimator {
        Estimator::PassHatK { k } => {
            let reached = |k: u64| 2 * tasks.values().filter(|(n, _)| *n >= k).count() >= tasks.len();
            let signature = PASS_HAT_SIGNATURE.into_iter().filter(|k| reached(*k)).max().unwrap_or(0);
            signature.max(k as u64)
        }
        _ => 0,
    };
    let mut sums = ReplicateSums::new(boot, 2);
    for (task, (n, c)) in tasks.iter().filter(|(_, (n, _))| *n >= attempts) {
        if let Some(v) = value(*n, *c) {
            sums.add_cluster(cluster_hash(task), &[to_fixed(v), to_fixed(1.0)], 1);
        }
    }
    let units = sums.units();
    Some(SeriesWindow {
        key: key.clone(),
        spec: metric,
        units,
        clusters: units,
        estimate: sums.estimate(boot.level, ratio),
        evidence: None,
        weightless: 0,
    })
}

/// The window of a declared series from its (largest value, declarations); `None` without any.
pub(crate) fn declared_window(key: &SeriesKey, metric: &'static MetricSpec, value: f64, count: u64, level: f64) -> Option<SeriesWindow> {
    (count > 0).then(|| SeriesWindow {
        key: key.clone(),
        spec: metric,
        units: 1,
        clusters: 1,
        estimate: Some(Estimate::exact(value, 1, level)),
        evidence: None,
        weightless: 0,
    })
}

/// Fairness groups tracked per series; more are counted and ignored (bounded state).
pub const MAX_GROUPS: usize = 16;

/// What one emitted series-window is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub system_id: String,
    pub system_version: String,
    pub source: Source,
    pub metric: &'static str,
    /// Evaluation series are per benchmark (a contaminated benchmark voids its own construct).
    pub benchmark: Option<String>,
    /// A diagnostic slice of the joint series ([`SliceSpec`]); `None` for the joint series.
    pub slice: Option<(SliceKind, String)>,
}

/// A [`SeriesKey`] borrowed from an observation: finds its series without allocating. Its
/// fields are `SeriesKey`'s in the same order, so the derived hashes agree (a test).
#[derive(Debug, Hash)]
struct KeyRef<'a> {
    system_id: &'a str,
    system_version: &'a str,
    source: Source,
    metric: &'static str,
    benchmark: Option<&'a str>,
    slice: Option<(SliceKind, &'a str)>,
}

impl KeyRef<'_> {
    fn owned(&self) -> SeriesKey {
        SeriesKey {
            system_id: self.system_id.to_string(),
            system_version: self.system_version.to_string(),
            source: self.source,
            metric: self.metric,
            benchmark: self.benchmark.map(str::to_string),
            slice: self.slice.map(|(kind, v)| (kind, v.to_string())),
        }
    }
}

impl Equivalent<SeriesKey> for KeyRef<'_> {
    fn equivalent(&self, k: &SeriesKey) -> bool {
        self.metric == k.metric
            && self.system_id == k.system_id
            && self.system_version == k.system_version
            && self.source == k.source
            && self.benchmark == k.benchmark.as_deref()
            && self.slice == k.slice.as_ref().map(|(kind, v)| (*kind, v.as_str()))
    }
}

/// What a diagnostic slice splits a series by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SliceKind {
    /// The units one agent of a multi-agent system took (`Observation::agent_id`).
    Agent,
    /// The runs of one declared task family (`Observation::task_family`).
    TaskFamily,
}

impl SliceKind {
    pub const ALL: [SliceKind; 2] = [SliceKind::Agent, SliceKind::TaskFamily];

    pub fn as_str(self) -> &'static str {
        match self {
            SliceKind::Agent => "agent",
            SliceKind::TaskFamily => "task_family",
        }
    }
}

/// The (system, version, source, kind) a slice value is counted in, hashed (no allocation per
/// observation).
fn slice_group(system: &str, version: &str, source: Source, kind: SliceKind) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (system, version, source, kind).hash(&mut h);
    h.finish()
}

/// The slice that gathers a system's values beyond [`SliceSpec::max_values`].
pub const OTHER_SLICE: &str = "(other)";

/// Which ratio series are also kept per agent (of systems declared multi-agent) and per task
/// family, next to the joint series:
/// diagnostic windows (which agent drives a rate; a regression in one family that the joint
/// rate averages away). A sliced window has an estimate, interval and band but no veto state
/// and no place in a profile: vetoes, caps and dimension bands are the joint series' alone.
///
/// Cardinality is bounded per (system, version, source, kind): the first `max_values` values
/// seen are kept by name, later ones are pooled into [`OTHER_SLICE`]. Which values are named
/// therefore depends on arrival order once the cap is reached (a value is forgotten, and its
/// place freed, when its series leave the window).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceSpec {
    /// Ratio metrics kept per agent (step-level instruments carry the acting agent).
    #[serde(default = "default_agent_metrics")]
    pub agent_metrics: Vec<String>,
    /// Ratio metrics kept per declared task family.
    #[serde(default = "default_family_metrics")]
    pub family_metrics: Vec<String>,
    /// Named values per (system, version, source, kind); 0 turns slicing off.
    #[serde(default = "default_max_values")]
    pub max_values: usize,
}

/// The step-level instruments sliced per agent by default (the profiler's per-agent report).
pub const DEFAULT_AGENT_METRICS: [&str; 5] =
    [ids::UNSAFE_ACTION_RATE, ids::CONFIRMATION_GATING, ids::TOOL_ERROR_RATE, ids::TOOL_CALL_ACCURACY, ids::AUDIT_COMPLETENESS];

/// The run-level instruments sliced per task family by default (seed 001's report by paradigm:
/// pass rate, latency, tokens).
pub const DEFAULT_FAMILY_METRICS: [&str; 4] =
    [ids::TASK_SUCCESS, ids::TASK_SUCCESS_SELF_REPORTED, ids::LATENCY_PER_RUN, ids::TOKENS_PER_RUN];

fn default_agent_metrics() -> Vec<String> {
    DEFAULT_AGENT_METRICS.map(str::to_string).to_vec()
}
fn default_family_metrics() -> Vec<String> {
    DEFAULT_FAMILY_METRICS.map(str::to_string).to_vec()
}
fn default_max_values() -> usize {
    8
}

impl Default for SliceSpec {
    fn default() -> Self {
        SliceSpec { agent_metrics: default_agent_metrics(), family_metrics: default_family_metrics(), max_values: default_max_values() }
    }
}

impl SliceSpec {
    /// No slices (the profiler's windows; tests of the joint series).
    pub fn none() -> SliceSpec {
        SliceSpec { agent_metrics: Vec::new(), family_metrics: Vec::new(), max_values: 0 }
    }

    /// Every listed metric is a catalogue ratio metric read from observations.
    pub fn check(&self) -> Result<(), String> {
        for m in self.agent_metrics.iter().chain(&self.family_metrics) {
            match spec(m) {
                None => return Err(format!("sliced metric {m:?} is not in the catalogue")),
                Some(s) if s.estimator != Estimator::Ratio || s.derived_from.is_some() => {
                    return Err(format!("sliced metric {m:?} is not a ratio metric read from observations: only those are sliced"));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn slices(&self, kind: SliceKind, metric: &str) -> bool {
        self.max_values > 0
            && match kind {
                SliceKind::Agent => self.agent_metrics.iter().any(|m| m == metric),
                SliceKind::TaskFamily => self.family_metrics.iter().any(|m| m == metric),
            }
    }
}

/// One series over one window.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesWindow {
    pub key: SeriesKey,
    pub spec: &'static MetricSpec,
    pub units: u64,
    pub clusters: u64,
    /// `None` when the statistic is undefined on the window's data.
    pub estimate: Option<Estimate>,
    /// Sequential evidence of a vetoed rate ([`sequential`]), over the window's panes.
    pub evidence: Option<WindowEvidence>,
    /// Units of a rate that carried no weight — a gated step whose approval the telemetry
    /// cannot show —: counted here, never in `units`, the clusters or the estimate.
    pub weightless: u64,
}

impl SeriesWindow {
    /// The window of a series whose units all weigh nothing (an unwatched source's gated
    /// steps): no estimate, its weightless units counted (N/A `unwatched`); `None` without any.
    pub fn weightless_only(key: &SeriesKey, spec: &'static MetricSpec, weightless: u64) -> Option<SeriesWindow> {
        (weightless > 0).then(|| SeriesWindow { key: key.clone(), spec, units: 0, clusters: 0, estimate: None, evidence: None, weightless })
    }
}

/// The e-detector of a window, with the segment where its evidence is strongest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowEvidence {
    pub evidence: Evidence,
    /// Start of the segment (a pane start, event time).
    pub since: i64,
    /// The rate over the segment.
    pub estimate: f64,
}

/// All series of one window end.
#[derive(Debug, Clone, PartialEq)]
pub struct Emission {
    pub window_start: i64,
    pub window_end: i64,
    pub series: Vec<SeriesWindow>,
}

/// What became of an observation.
#[derive(Debug, Clone, PartialEq)]
pub enum Added {
    Accepted,
    /// Same observation id seen before (a replay upstream): dropped.
    Duplicate,
    /// Its window was already emitted.
    Late {
        frontier: i64,
    },
    /// Not a catalogue metric.
    Unknown,
    /// A metric the aggregator derives itself (pass@k, the fairness gap …): nothing reads it
    /// from observations.
    Derived {
        from: &'static str,
    },
}

#[derive(Debug, Default)]
pub(crate) struct LinearPane {
    pub(crate) clusters: Clusters,
    pub(crate) units: u64,
    /// Units of a rate with weight 0 (not in `clusters`; kept by the pane store).
    pub(crate) weightless: u64,
    /// A vetoed rate's evidence of this pane (log factors, numerator and denominator sums),
    /// made once when the pane enters the window sums (no observation changes it after):
    /// every window holding the pane reads it.
    pub(crate) evidence: Option<Box<PaneStats>>,
}

/// A pane's per-cluster component sums, as two flat arrays in the order the clusters first
/// had units in the pane (`dims` components a cluster): growable while the pane takes
/// observations, found through a hash index once there are more than
/// [`Clusters::SCAN_UP_TO`] clusters (a few clusters are scanned, the last one first: a run's
/// steps come together); boxed to their exact size once the pane is before the frontier and
/// takes no more. No allocation per cluster, and every reader sees the same order.
#[derive(Debug)]
pub(crate) enum Clusters {
    /// Boxed: a series holds its window's panes, almost all closed.
    Open(Box<OpenClusters>),
    Closed {
        keys: Box<[u64]>,
        sums: Box<[i128]>,
    },
}

#[derive(Debug, Default)]
pub(crate) struct OpenClusters {
    keys: Vec<u64>,
    sums: Vec<i128>,
    index: Option<HashMap<u64, u32>>,
}

impl Default for Clusters {
    fn default() -> Self {
        Clusters::Open(Box::default())
    }
}

impl Clusters {
    /// Up to this many clusters a pane is searched without an index.
    const SCAN_UP_TO: usize = 16;

    /// Each cluster's position in `keys`.
    fn index(keys: &[u64]) -> HashMap<u64, u32> {
        keys.iter().enumerate().map(|(i, c)| (*c, i as u32)).collect()
    }

    fn parts(&self) -> (&[u64], &[i128]) {
        match self {
            Clusters::Open(o) => (&o.keys, &o.sums),
            Clusters::Closed { keys, sums } => (keys, sums),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.parts().0.len()
    }

    /// Each cluster's hash and summed components (in the order they first had units).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &[i128])> + Clone {
        let (keys, sums) = self.parts();
        let dims = (sums.len() / keys.len().max(1)).max(1);
        keys.iter().copied().zip(sums.chunks_exact(dims))
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = u64> {
        self.parts().0.iter().copied()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &[i128]> {
        self.iter().map(|(_, v)| v)
    }

    /// The sums of `cluster` to add to (`dims` zeros if new).
    fn sums_mut(&mut self, cluster: u64, dims: usize) -> &mut [i128] {
        if let Clusters::Closed { keys, sums } = self {
            debug_assert!(false, "an observation added to a pane before the frontier");
            let (keys, sums) = (std::mem::take(keys).into_vec(), std::mem::take(sums).into_vec());
            let index = (keys.len() > Self::SCAN_UP_TO).then(|| Self::index(&keys));
            *self = Clusters::Open(Box::new(OpenClusters { keys, sums, index }));
        }
        let Clusters::Open(open) = self else { unreachable!("opened above") };
        let OpenClusters { keys, sums, index } = &mut **open;
        let found = match index {
            Some(index) => index.get(&cluster).map(|i| *i as usize),
            None => keys.iter().rposition(|c| *c == cluster),
        };
        let i = found.unwrap_or_else(|| {
            keys.push(cluster);
            sums.resize(sums.len() + dims, 0);
            let i = keys.len() - 1;
            match index {
                Some(index) => {
                    index.insert(cluster, i as u32);
                }
                None if keys.len() > Self::SCAN_UP_TO => {
                    *index = Some(Self::index(keys));
                }
                None => {}
            }
            i
        });
        &mut sums[i * dims..(i + 1) * dims]
    }

    /// To the exact-size form: the pane takes no more observations.
    fn close(&mut self) {
        if let Clusters::Open(open) = self {
            let OpenClusters { keys, sums, .. } = &**open;
            // Copied, not shrunk in place: an allocator may keep a shrunk block at its size.
            *self = Clusters::Closed { keys: keys.as_slice().into(), sums: sums.as_slice().into() };
        }
    }
}

/// What the e-detector reads of one pane: [`PaneEvidence`] without the pane start.
pub(crate) type PaneStats = (Option<sequential::PaneLogs>, i128, i128);

/// The evidence of a vetoed rate's pane from its clusters' sums.
fn pane_stats(metric: &MetricSpec, p: &LinearPane) -> PaneStats {
    let (num, den) = p.clusters.values().fold((0, 0), |(n, d), c| (n + c[0], d + c[1]));
    (pane_logs(metric, p.clusters.values()), num, den)
}

impl LinearPane {
    /// Each cluster's summed components, as `ReplicateSums::add_many` takes them (the pane's
    /// units are counted apart, so none here).
    fn cluster_sums(&self) -> impl Iterator<Item = (u64, &[i128], u64)> {
        self.clusters.iter().map(|(c, sums)| (c, sums, 0))
    }
}

#[derive(Debug)]
pub(crate) enum SeriesState {
    Linear {
        dims: usize,
        /// The replicate sums of the next window's panes before the frontier pane, kept
        /// between windows only while the window holds more than [`MATERIALISE_UP_TO`]
        /// (pane, cluster) sums (`None`: made at emission from the panes, see [`Windows::emit`]).
        window: Option<Box<Kept>>,
        panes: BTreeMap<i64, LinearPane>,
        /// Fairness: group name → component block.
        groups: BTreeMap<String, usize>,
    },
    Tasks {
        /// pane → task → (attempts, successes)
        panes: BTreeMap<i64, HashMap<String, (u64, u64)>>,
    },
    Declared {
        /// pane → (largest declared value, declarations)
        panes: BTreeMap<i64, (f64, u64)>,
    },
}

/// The hash an observation id is known by for duplicate detection: 64 bits of foldhash with a
/// fixed seed (deterministic, so a replay decides as the first run did; unlike a cluster's
/// hash it feeds no bootstrap stream, so it is free to be fast rather than stable across
/// versions). Two ids of one pane share a hash with probability ~n²/2⁶⁵.
fn id_hash(id: &str) -> u64 {
    use std::hash::BuildHasher;
    static STATE: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(0x6f63_7461_6e74);
    STATE.hash_one(id)
}

/// The observation-id hashes of one pane.
#[derive(Debug)]
enum Seen {
    /// A pane at or after the frontier: observations are still added.
    Open(HashSet<u64>),
    /// A pane before the frontier (every observation of it is late).
    Closed(ClosedIds),
}

impl Seen {
    fn contains(&self, h: u64) -> bool {
        match self {
            Seen::Open(s) => s.contains(&h),
            Seen::Closed(ids) => ids.contains(h),
        }
    }

    fn len(&self) -> usize {
        match self {
            Seen::Open(s) => s.len(),
            Seen::Closed(ids) => ids.len(),
        }
    }

    /// Adds `h`; false if it was there. Only open panes take observations.
    fn insert(&mut self, h: u64) -> bool {
        if let Seen::Closed(ids) = self {
            debug_assert!(false, "an observation added to a pane before the frontier");
            *self = Seen::Open(ids.to_vec().into_iter().collect());
        }
        let Seen::Open(s) = self else { unreachable!("opened above") };
        s.insert(h)
    }

    fn close(&mut self) {
        if let Seen::Open(s) = self {
            let mut v: Vec<u64> = s.drain().collect();
            v.sort_unstable();
            *self = Seen::Closed(ClosedIds::new(v));
        }
    }
}

/// A closed pane's observation-id hashes, sorted, exactly: as they are (8 bytes a hash), or,
/// from [`ClosedIds::SPLIT_FROM`] hashes on (a busy pane of a large fleet), grouped by their
/// top 16 bits — an index of where each group starts — with the 48 bits below in 6 bytes
/// (big-endian, so the byte order is the numeric order): about 6.3 bytes a hash.
#[derive(Debug)]
enum ClosedIds {
    Plain(Box<[u64]>),
    Split { starts: Box<[u32]>, low: Box<[[u8; 6]]> },
}

impl ClosedIds {
    /// Where the index (2¹⁶ + 1 offsets, 256 KiB) costs at most a byte a hash.
    const SPLIT_FROM: usize = 1 << 18;

    fn new(sorted: Vec<u64>) -> ClosedIds {
        debug_assert!(sorted.is_sorted());
        if sorted.len() < Self::SPLIT_FROM || sorted.len() > u32::MAX as usize {
            return ClosedIds::Plain(sorted.into_boxed_slice());
        }
        let mut starts = vec![0u32; (1 << 16) + 1];
        for h in &sorted {
            starts[(h >> 48) as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let low = sorted.iter().map(|h| Self::low(*h)).collect();
        ClosedIds::Split { starts: starts.into_boxed_slice(), low }
    }

    fn low(h: u64) -> [u8; 6] {
        let b = h.to_be_bytes();
        [b[2], b[3], b[4], b[5], b[6], b[7]]
    }

    fn contains(&self, h: u64) -> bool {
        match self {
            ClosedIds::Plain(v) => v.binary_search(&h).is_ok(),
            ClosedIds::Split { starts, low } => {
                let top = (h >> 48) as usize;
                low[starts[top] as usize..starts[top + 1] as usize].binary_search(&Self::low(h)).is_ok()
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            ClosedIds::Plain(v) => v.len(),
            ClosedIds::Split { low, .. } => low.len(),
        }
    }

    /// The hashes, sorted.
    fn to_vec(&self) -> Vec<u64> {
        match self {
            ClosedIds::Plain(v) => v.to_vec(),
            ClosedIds::Split { starts, low } => (0..starts.len() - 1)
                .flat_map(|top| {
                    low[starts[top] as usize..starts[top + 1] as usize].iter().map(move |l| {
                        let mut b = [0u8; 8];
                        b[..2].copy_from_slice(&(top as u16).to_be_bytes());
                        b[2..].copy_from_slice(l);
                        u64::from_be_bytes(b)
                    })
                })
                .collect(),
        }
    }
}

/// A linear series whose next window holds at most this many (pane, cluster) sums keeps no
/// replicate sums between windows (B × width integers, 32 KiB for a rate at B = 1000): they
/// are made at emission from those sums, which costs about what keeping them costs per
/// window (a cluster entering and one leaving) and frees the memory of the many sparse
/// series of a large fleet. Above it they are kept and updated pane by pane. Exact either way.
pub const MATERIALISE_UP_TO: usize = 8;

/// What a dense series keeps of the panes of its next window before the frontier pane: their
/// replicate sums, and what emission reads of the same panes (units, weightless units, and in
/// how many of them each cluster has units), updated pane by pane as the sums are, so a window
/// closes without visiting its panes.
#[derive(Debug)]
pub(crate) struct Kept {
    sums: KeptSums,
    units: u64,
    weightless: u64,
    /// The clusters the panes hold, sorted: the window's distinct clusters (half the memory
    /// of a hash set; a pane's clusters are merged in, or out, in one pass).
    clusters: Vec<u64>,
    /// Cluster → panes holding it beyond the first, for the few in more than one (half the
    /// memory of a count per cluster: most runs fall in one pane).
    repeats: HashMap<u64, u32>,
}

/// A ratio's kept sums are `i64` lanes (half the memory, read and updated without an `i128`
/// pass) while its bound allows ([`LaneSums`]), wide from the update that would pass it on;
/// other widths are wide. The same integers either way.
#[derive(Debug)]
enum KeptSums {
    Lanes(LaneSums),
    Wide(ReplicateSums),
}

impl KeptSums {
    fn new<'a>(boot: &BootstrapSpec, dims: usize, panes: impl Iterator<Item = (&'a i64, &'a LinearPane)> + Clone) -> KeptSums {
        if dims == 2 {
            let mut lanes = LaneSums::new(boot);
            if lanes.update(panes.clone().flat_map(|(_, p)| p.clusters.iter()), false) {
                return KeptSums::Lanes(lanes);
            }
        }
        KeptSums::Wide(window_sums(boot, dims, panes))
    }

    /// Pane `p` enters, or with `remove` leaves (exact subtraction: its clusters with negated
    /// sums).
    /// False if the lanes refused a removal (more than they hold: the caller's sums no longer
    /// match its panes).
    fn update(&mut self, p: &LinearPane, dims: usize, remove: bool) -> bool {
        if let KeptSums::Lanes(lanes) = self {
            if lanes.update(p.clusters.iter(), remove) {
                return true;
            }
            if remove {
                return false;
            }
            *self = KeptSums::Wide(lanes.to_wide());
        }
        let KeptSums::Wide(wide) = self else { unreachable!("wide above") };
        if remove {
            let neg: Vec<i128> = p.clusters.values().flat_map(|sums| sums.iter().map(|x| -x)).collect();
            wide.add_many(p.clusters.keys().zip(neg.chunks_exact(dims)).map(|(c, n)| (c, n, 0)));
        } else {
            wide.add_many(p.cluster_sums());
        }
        true
    }

    fn sums(&self) -> Sums<'_> {
        match self {
            KeptSums::Lanes(l) => Sums::Lanes(l),
            KeptSums::Wide(w) => Sums::Wide(w),
        }
    }
}

impl Kept {
    fn new<'a>(boot: &BootstrapSpec, dims: usize, panes: impl Iterator<Item = (&'a i64, &'a LinearPane)> + Clone) -> Kept {
        let mut k =
            Kept { sums: KeptSums::new(boot, dims, panes.clone()), units: 0, weightless: 0, clusters: Vec::new(), repeats: HashMap::new() };
        for (_, p) in panes {
            k.count(p);
        }
        k
    }

    fn count(&mut self, p: &LinearPane) {
        self.units += p.units;
        self.weightless += p.weightless;
        let mut entering: Vec<u64> = p.clusters.keys().collect();
        entering.sort_unstable();
        let mut merged = Vec::with_capacity(self.clusters.len() + entering.len());
        let mut held = self.clusters.iter().copied().peekable();
        for c in entering {
            while let Some(h) = held.next_if(|h| *h < c) {
                merged.push(h);
            }
            if held.next_if_eq(&c).is_some() {
                *self.repeats.entry(c).or_default() += 1;
            }
            merged.push(c);
        }
        merged.extend(held);
        self.clusters = merged;
    }

    /// Pane `p` enters.
    fn enter(&mut self, p: &LinearPane, dims: usize) {
        let added = self.sums.update(p, dims, false);
        debug_assert!(added, "adding is never refused");
        self.count(p);
    }

    /// Pane `p` leaves. False if it was not held (nothing that should happen: the caller then
    /// drops what it kept, and the window is made from its panes).
    fn leave(&mut self, p: &LinearPane, dims: usize) -> bool {
        let held = self.units >= p.units
            && self.weightless >= p.weightless
            && p.clusters.keys().all(|c| self.clusters.binary_search(&c).is_ok())
            && self.sums.update(p, dims, true);
        if !held {
            debug_assert!(false, "a pane left a window it was not in");
            return false;
        }
        self.units -= p.units;
        self.weightless -= p.weightless;
        let mut leaving = Vec::new();
        for c in p.clusters.keys() {
            match self.repeats.entry(c) {
                hashbrown::hash_map::Entry::Occupied(mut e) if *e.get() > 1 => *e.get_mut() -= 1,
                hashbrown::hash_map::Entry::Occupied(e) => {
                    e.remove();
                }
                hashbrown::hash_map::Entry::Vacant(_) => leaving.push(c),
            }
        }
        leaving.sort_unstable();
        let mut leaving = leaving.into_iter().peekable();
        self.clusters.retain(|c| leaving.next_if_eq(c).is_none());
        true
    }
}

/// The replicate sums of `panes`' cluster sums.
fn window_sums<'a>(boot: &BootstrapSpec, dims: usize, panes: impl Iterator<Item = (&'a i64, &'a LinearPane)>) -> ReplicateSums {
    let mut w = ReplicateSums::new(boot, dims);
    w.add_many(panes.flat_map(|(_, p)| p.cluster_sums()));
    w
}

/// The windows of one input partition.
#[derive(Debug)]
pub struct Windows {
    spec: WindowSpec,
    pub(crate) boot: BootstrapSpec,
    frontier: Option<i64>,
    /// Looked up per observation by a borrowed key ([`KeyRef`]); iterated in key order where
    /// the order shows ([`Self::sorted_series`]).
    pub(crate) series: HashMap<SeriesKey, SeriesState>,
    /// Observation-id hashes per pane, for duplicate detection (kept for the panes of
    /// `duplicate_horizon_ms` before the next window's end: [`Self::with_duplicate_horizon`]).
    seen: BTreeMap<i64, Seen>,
    /// At least the window length.
    duplicate_horizon_ms: i64,
    /// Smallest input offset of an accepted observation, per pane.
    pane_offsets: BTreeMap<i64, i64>,
    /// (offset, frontier after processing it) whenever the frontier moved.
    frontier_log: VecDeque<(i64, i64)>,
    initial_frontier: Option<i64>,
    /// Windows ending at or before this were emitted before a restart: not emitted again.
    emitted_until: Option<i64>,
    /// Groups beyond MAX_GROUPS that were ignored.
    pub groups_dropped: u64,
    slices: SliceSpec,
    /// The systems sliced per agent: those declared `multi_agent` (a single agent's slice
    /// would repeat its joint series).
    agent_systems: HashSet<String>,
    /// Named slice values per (system, version, source, kind) ([`slice_group`]), at most
    /// `slices.max_values`.
    slice_values: HashMap<u64, HashSet<String>>,
}

impl Windows {
    /// `resume`: where a restart resumes (None on a fresh partition).
    pub fn new(spec: WindowSpec, boot: BootstrapSpec, resume: Option<Resume>) -> Windows {
        // Frontiers are pane boundaries; one that is not (the slide changed across a restart)
        // is dropped, and the first watermark sets the frontier (windows up to the last one
        // emitted are still not emitted again).
        let frontier = resume.and_then(|r| r.frontier).filter(|f| f.rem_euclid(spec.slide_ms) == 0);
        Windows {
            spec,
            boot,
            frontier,
            series: HashMap::new(),
            seen: BTreeMap::new(),
            duplicate_horizon_ms: spec.length_ms,
            pane_offsets: BTreeMap::new(),
            frontier_log: VecDeque::new(),
            initial_frontier: frontier,
            emitted_until: resume.map(|r| r.emitted_until),
            groups_dropped: 0,
            slices: SliceSpec::none(),
            agent_systems: HashSet::new(),
            slice_values: HashMap::new(),
        }
    }

    /// Recognises a duplicate observation up to `horizon_ms` of event time before the
    /// frontier (the end of the last emitted window; whole panes: a horizon between pane
    /// boundaries keeps the pane it falls in), default and least the window length (the panes
    /// the windows hold, and one window of tumbling windows); an older copy is late. Before
    /// the frontier the observation ids serve only to tell a late duplicate (dropped, counted)
    /// from a late observation (dead-lettered): 8 bytes an observation, the largest part of
    /// the state. A horizon longer than the window holds between restarts only: a restart
    /// replays the input of the panes the windows need, not those before.
    pub fn with_duplicate_horizon(mut self, horizon_ms: i64) -> Windows {
        self.duplicate_horizon_ms = horizon_ms.max(self.spec.length_ms);
        self
    }

    /// Also keeps the diagnostic slices of `slices` (none by default): per task family for
    /// every system, per agent for `agent_systems` (the systems declared multi-agent).
    pub fn with_slices(mut self, slices: SliceSpec, agent_systems: impl IntoIterator<Item = String>) -> Windows {
        self.slices = slices;
        self.agent_systems = agent_systems.into_iter().collect();
        self
    }

    /// The slice an observation's unit falls in, for `kind`: its value, or [`OTHER_SLICE`]
    /// once the system has `max_values` others.
    fn slice_of(&mut self, o: &Observation, kind: SliceKind) -> Option<String> {
        let value = match kind {
            SliceKind::Agent if !self.agent_systems.contains(&o.system_id) => None,
            SliceKind::Agent => o.agent_id.as_deref(),
            SliceKind::TaskFamily => o.task_family.as_deref(),
        }
        .filter(|v| !v.is_empty())?;
        let known = self.slice_values.entry(slice_group(&o.system_id, &o.system_version, o.source, kind)).or_default();
        if known.contains(value) {
            return Some(value.to_string());
        }
        if known.len() < self.slices.max_values && value != OTHER_SLICE {
            known.insert(value.to_string());
            return Some(value.to_string());
        }
        Some(OTHER_SLICE.to_string())
    }

    pub fn frontier(&self) -> Option<i64> {
        self.frontier
    }

    /// Series with state.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Adds an observation read at `offset` (windows close only on [`Self::advance_to`]).
    pub fn add(&mut self, o: &Observation, offset: i64) -> Added {
        let Some(metric) = spec(&o.metric) else { return Added::Unknown };
        if let Some(from) = metric.derived_from {
            return Added::Derived { from };
        }
        let t = o.event_time;
        let frontier = self.frontier.unwrap_or(i64::MIN);
        if t < frontier {
            // A late duplicate is still a duplicate.
            let pane = self.spec.pane_of(t);
            if self.seen.get(&pane).is_some_and(|s| s.contains(id_hash(&o.observation_id))) {
                Added::Duplicate
            } else {
                Added::Late { frontier }
            }
        } else {
            self.accept(o, metric, offset)
        }
    }

    fn accept(&mut self, o: &Observation, metric: &'static MetricSpec, offset: i64) -> Added {
        let pane = self.spec.pane_of(o.event_time);
        // Sized as the newest pane: a busy pane's set then never grows table by table.
        let like = self.seen.last_key_value().map_or(0, |(_, s)| s.len());
        if !self.seen.entry(pane).or_insert_with(|| Seen::Open(HashSet::with_capacity(like))).insert(id_hash(&o.observation_id)) {
            return Added::Duplicate;
        }
        let off = self.pane_offsets.entry(pane).or_insert(offset);
        *off = (*off).min(offset);
        let evaluation = o.source == Source::Evaluation;
        let key = |m: &'static str| KeyRef {
            system_id: &o.system_id,
            system_version: &o.system_version,
            source: o.source,
            metric: m,
            benchmark: if evaluation { o.benchmark.as_deref() } else { None },
            slice: None,
        };
        let cluster = cluster_hash(&o.cluster_id);
        match metric.estimator {
            // A unit that moves neither sum — a gated step whose approval the telemetry cannot
            // show (value and weight 0) — is no evidence: counted apart (a window of nothing
            // else is N/A, not a rate of 0/0), never in the units, clusters or sums. A unit with
            // a value and no weight is in the numerator: a failed run's cost or review minutes
            // count towards the cost per success and the review burden, its task does not.
            // (From 2026-12-04 to 12-05 both were weightless, so those two instruments read
            // the mean over successful runs only.)
            Estimator::Ratio if o.weight == 0.0 && o.value == 0.0 => self.weightless(key(metric.id), pane),
            Estimator::Ratio => {
                let fill = |c: &mut [i128], _: &mut BTreeMap<String, usize>| {
                    c[0] += to_fixed(o.value);
                    c[1] += to_fixed(o.weight);
                };
                self.linear(key(metric.id), 2, pane, cluster, fill);
                for kind in SliceKind::ALL {
                    if self.slices.slices(kind, metric.id)
                        && let Some(value) = self.slice_of(o, kind)
                    {
                        self.linear(KeyRef { slice: Some((kind, &value)), ..key(metric.id) }, 2, pane, cluster, fill);
                    }
                }
            }
            Estimator::Ece => {
                if let Some(conf) = o.confidence {
                    self.linear(key(metric.id), calibration::DIMS, pane, cluster, |c, _| {
                        calibration::add_pair(c, conf.clamp(0.0, 1.0), o.value >= 0.5)
                    });
                }
            }
            Estimator::Declared => {
                let st = self.state(key(metric.id), || SeriesState::Declared { panes: BTreeMap::new() });
                if let SeriesState::Declared { panes } = st {
                    let e = panes.entry(pane).or_insert((f64::MIN, 0));
                    e.0 = e.0.max(o.value);
                    e.1 += 1;
                }
            }
            // Other estimators belong to derived metrics, refused in `add`.
            _ => {}
        }
        if metric.id == ids::TASK_SUCCESS {
            // The fairness gap across declared groups, from the same units.
            if !o.groups.is_empty() {
                let mut dropped = 0;
                self.linear(key(ids::FAIRNESS_GAP), 2 * MAX_GROUPS, pane, cluster, |c, groups| {
                    for g in &o.groups {
                        let next = groups.len();
                        let idx = match groups.get(g) {
                            Some(i) => *i,
                            None if next < MAX_GROUPS => *groups.entry(g.clone()).or_insert(next),
                            None => {
                                dropped += 1;
                                continue;
                            }
                        };
                        c[2 * idx] += to_fixed(o.value);
                        c[2 * idx + 1] += to_fixed(1.0);
                    }
                });
                self.groups_dropped += dropped;
            }
            // Attempts of evaluation tasks, for pass@k, pass^k and consistency.
            if let (true, Some(task)) = (evaluation, &o.task_id) {
                let task_metrics = derived_from(metric.id)
                    .filter(|m| matches!(m.estimator, Estimator::PassAtK { .. } | Estimator::PassHatK { .. } | Estimator::TaskVariance));
                for m in task_metrics.map(|m| m.id) {
                    let st = self.state(key(m), || SeriesState::Tasks { panes: BTreeMap::new() });
                    if let SeriesState::Tasks { panes } = st {
                        let e = panes.entry(pane).or_default().entry(task.clone()).or_default();
                        e.0 += 1;
                        e.1 += (o.value >= 0.5) as u64;
                    }
                }
            }
        }
        Added::Accepted
    }

    /// The state of the series `key` (created by `new` if it has none).
    fn state(&mut self, key: KeyRef, new: impl FnOnce() -> SeriesState) -> &mut SeriesState {
        self.series.raw_entry_mut().from_key(&key).or_insert_with(|| (key.owned(), new())).1
    }

    /// The series in key order (the order of an emission's series and of the pane sums).
    pub(crate) fn sorted_series(&self) -> Vec<(&SeriesKey, &SeriesState)> {
        let mut all: Vec<_> = self.series.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all
    }

    /// Counts a unit without weight in a ratio series (creating it).
    fn weightless(&mut self, key: KeyRef, pane: i64) {
        let st = self.state(key, || SeriesState::Linear { dims: 2, window: None, panes: BTreeMap::new(), groups: BTreeMap::new() });
        if let SeriesState::Linear { panes, .. } = st {
            panes.entry(pane).or_default().weightless += 1;
        }
    }

    /// Adds one unit's components to a linear series (creating it with `dims` components).
    fn linear(&mut self, key: KeyRef, dims: usize, pane: i64, cluster: u64, fill: impl FnOnce(&mut [i128], &mut BTreeMap<String, usize>)) {
        let st = self.state(key, || SeriesState::Linear { dims, window: None, panes: BTreeMap::new(), groups: BTreeMap::new() });
        let SeriesState::Linear { dims, panes, groups, .. } = st else { return };
        // Most observations are in the newest pane.
        let p = match panes.last_entry() {
            Some(e) if *e.key() == pane => e.into_mut(),
            _ => panes.entry(pane).or_default(),
        };
        if let Clusters::Closed { .. } = p.clusters {
            // Never expected (a pane before the frontier takes no observation): its evidence
            // would no longer be its own.
            p.evidence = None;
        }
        p.units += 1;
        // Every `fill` adds to the components it is given: straight into the cluster's sums.
        fill(p.clusters.sums_mut(cluster, *dims), groups);
        // Not in the window sums yet: they hold the panes of the next window before the
        // frontier pane, [F + slide − length, F); pane F enters them, each cluster once with
        // its summed components, when the window closes (`advance_to`).
    }

    /// The watermark is now `watermark` (read at `offset`): emits every window it closed, in
    /// order. A watermark behind the frontier changes nothing.
    pub fn advance_to(&mut self, watermark: i64, offset: i64) -> Vec<Emission> {
        let target = self.spec.pane_of(watermark.saturating_sub(self.spec.lateness_ms));
        if self.frontier.is_none() {
            // The first watermark: start at its boundary, or earlier if data is older.
            let oldest = self.pane_offsets.keys().next().copied().unwrap_or(target);
            let f = target.min(oldest);
            self.frontier = Some(f);
            self.frontier_log.push_back((offset, f));
            // The window sums hold the panes of the window ending F + slide before pane F.
            // Usually none has data, but after a restart that resumed without a frontier,
            // observations accepted before this watermark may lie in older panes of the window
            // (`pane_offsets`, which gave `oldest`, only keeps the panes a future commit point
            // needs): they are in the window's units, so they are in its sums (each is
            // subtracted when it leaves).
            let from = f + self.spec.slide_ms - self.spec.length_ms;
            for st in self.series.values_mut() {
                if let SeriesState::Linear { window: Some(window), panes, dims, .. } = st {
                    for (_, p) in panes.range(from..f) {
                        window.enter(p, *dims);
                    }
                }
            }
        }
        let mut out = Vec::new();
        while let Some(f) = self.frontier.filter(|f| *f < target) {
            let end = f + self.spec.slide_ms;
            // The frontier pane enters the window sums: they now hold the window ending `end`.
            // No observation changes it after (it is before the frontier): a vetoed rate's
            // evidence of it is made once, here.
            for (key, st) in self.series.iter_mut() {
                if let SeriesState::Linear { window, panes, dims, .. } = st
                    && let Some(p) = panes.get_mut(&f)
                {
                    if let Some(window) = window {
                        window.enter(p, *dims);
                    }
                    let metric = spec(key.metric).expect("series are catalogue metrics");
                    if has_evidence(metric) && key.slice.is_none() {
                        p.evidence = Some(Box::new(pane_stats(metric, p)));
                    }
                    p.clusters.close();
                }
            }
            if self.emitted_until.is_none_or(|e| end > e)
                && let Some(e) = self.emit(end)
            {
                out.push(e);
            }
            self.slide(end);
            self.frontier = Some(end);
            self.frontier_log.push_back((offset, end));
        }
        out
    }

    /// The window ending at `end`, for every series with data in it.
    fn emit(&self, end: i64) -> Option<Emission> {
        let start = end - self.spec.length_ms;
        let level = self.boot.level;
        let mut series = Vec::with_capacity(self.series.len());
        // The distinct clusters of a sparse series' window (one set for every series).
        let mut distinct: HashSet<u64> = HashSet::new();
        for (key, st) in self.sorted_series() {
            let metric = spec(key.metric).expect("series are catalogue metrics");
            let w = match st {
                SeriesState::Linear { window, panes, dims, .. } => {
                    let in_window = panes.range(start..end);
                    // A dense series kept them pane by pane; a sparse one visits its few panes.
                    let (units, weightless) = match window {
                        Some(k) => (k.units, k.weightless),
                        None => in_window.clone().fold((0, 0), |(u, w), (_, p)| (u + p.units, w + p.weightless)),
                    };
                    if units == 0 {
                        series.extend(SeriesWindow::weightless_only(key, metric, weightless));
                        continue;
                    }
                    // A sparse series' replicate sums are made now, from its few (pane, cluster)
                    // sums: the same integers the incremental sums would hold.
                    let made;
                    let (window, clusters) = match window {
                        Some(k) => (k.sums.sums(), k.clusters.len() as u64),
                        None => {
                            made = window_sums(&self.boot, *dims, in_window.clone());
                            distinct.clear();
                            distinct.extend(in_window.clone().flat_map(|(_, p)| p.clusters.keys()));
                            (Sums::Wide(&made), distinct.len() as u64)
                        }
                    };
                    // Debug builds (the tests) check the invariant the incremental sums rest on:
                    // they are the sums of the window's panes. (An intermittent failure of the
                    // crash test shows an instance where they were not; this says when.)
                    #[cfg(debug_assertions)]
                    {
                        let mut sums = vec![0i128; window.point().len()];
                        for c in in_window.clone().flat_map(|(_, p)| p.clusters.values()) {
                            for (a, b) in sums.iter_mut().zip(c) {
                                *a += b;
                            }
                        }
                        let distinct: HashSet<u64> = in_window.clone().flat_map(|(_, p)| p.clusters.keys()).collect();
                        let counted: (u64, u64) = in_window.clone().fold((0, 0), |(u, w), (_, p)| (u + p.units, w + p.weightless));
                        if sums != window.point() || distinct.len() as u64 != clusters || counted != (units, weightless) {
                            eprintln!(
                                "octant-engine: window sums differ from the panes: {key:?} window end {end}, sums {:?} of {units} units, {clusters} clusters, panes {sums:?} of {counted:?} units, {} clusters, frontier {:?}, initial frontier {:?}, emitted until {:?}, panes {:?}",
                                window.point(),
                                distinct.len(),
                                self.frontier,
                                self.initial_frontier,
                                self.emitted_until,
                                panes.keys().collect::<Vec<_>>()
                            );
                        }
                    }
                    // Sliced series have no veto state, hence no use for its evidence.
                    let logs: Option<Vec<_>> = (has_evidence(metric) && key.slice.is_none()).then(|| {
                        in_window
                            .map(|(t, p)| {
                                // Panes older than the first frontier (a restart) were never
                                // the frontier pane: theirs is made here.
                                let (logs, num, den) = p.evidence.as_deref().copied().unwrap_or_else(|| pane_stats(metric, p));
                                (*t, logs, num, den)
                            })
                            .collect()
                    });
                    SeriesWindow { weightless, ..linear_window(key, metric, window, units, clusters, logs.as_deref(), level) }
                }
                SeriesState::Tasks { panes } => {
                    let mut tasks: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
                    for (_, p) in panes.range(start..end) {
                        for (task, (n, c)) in p {
                            let e = tasks.entry(task).or_default();
                            e.0 += n;
                            e.1 += c;
                        }
                    }
                    let Some(w) = tasks_window(key, metric, &tasks, &self.boot) else { continue };
                    w
                }
                SeriesState::Declared { panes } => {
                    let (value, count) = panes.range(start..end).fold((f64::MIN, 0u64), |(v, n), (_, (x, m))| (v.max(*x), n + m));
                    let Some(w) = declared_window(key, metric, value, count, level) else { continue };
                    w
                }
            };
            series.push(w);
        }
        (!series.is_empty()).then_some(Emission { window_start: start, window_end: end, series })
    }

    /// Moves the window sums from the window ending `end` (just emitted) to the panes of the
    /// one ending `end + slide` before its frontier pane `end` (which enters when that window
    /// closes): the oldest pane leaves. Drops state no future window needs.
    fn slide(&mut self, end: i64) {
        let leaving = end - self.spec.length_ms;
        let keep_from = end + self.spec.slide_ms - self.spec.length_ms;
        for st in self.series.values_mut() {
            match st {
                SeriesState::Linear { window, panes, dims, .. } => {
                    let left = panes.remove(&leaving);
                    if let (Some(k), Some(p)) = (window.as_mut(), &left)
                        && !k.leave(p, *dims)
                    {
                        *window = None;
                    }
                    while panes.first_key_value().is_some_and(|(k, _)| *k < keep_from) {
                        panes.pop_first();
                    }
                    // Kept between windows while the next one holds many (pane, cluster) sums,
                    // made at emission while it holds few (hysteresis between the two).
                    let entries: usize = panes.range(keep_from..end).map(|(_, p)| p.clusters.len()).sum();
                    if window.is_none() && entries > MATERIALISE_UP_TO {
                        *window = Some(Box::new(Kept::new(&self.boot, *dims, panes.range(keep_from..end))));
                    } else if window.is_some() && entries <= MATERIALISE_UP_TO / 2 {
                        *window = None;
                    }
                }
                SeriesState::Tasks { panes } => {
                    while panes.first_key_value().is_some_and(|(k, _)| *k < keep_from) {
                        panes.pop_first();
                    }
                }
                SeriesState::Declared { panes } => {
                    while panes.first_key_value().is_some_and(|(k, _)| *k < keep_from) {
                        panes.pop_first();
                    }
                }
            }
        }
        let before = self.series.len();
        self.series.retain(|_, st| match st {
            SeriesState::Linear { panes, .. } => !panes.is_empty(),
            SeriesState::Tasks { panes } => !panes.is_empty(),
            SeriesState::Declared { panes } => !panes.is_empty(),
        });
        if self.series.len() < before && !self.slice_values.is_empty() {
            // A slice value whose series all left the window frees its place.
            self.slice_values.clear();
            for k in self.series.keys() {
                if let Some((kind, v)) = &k.slice
                    && v != OTHER_SLICE
                {
                    self.slice_values.entry(slice_group(&k.system_id, &k.system_version, k.source, *kind)).or_default().insert(v.clone());
                }
            }
        }
        let remember_from = self.spec.pane_of(end.saturating_sub(self.duplicate_horizon_ms));
        while self.seen.first_key_value().is_some_and(|(k, _)| *k < remember_from) {
            self.seen.pop_first();
        }
        // Panes before the new frontier take no more observations: their hashes only answer
        // whether a late observation is a duplicate, from a sorted list (half the memory of
        // a hash set).
        for (_, s) in self.seen.range_mut(..end) {
            s.close();
        }
    }

    /// The frontier in force just before `offset` was processed.
    fn frontier_before(&self, offset: i64) -> Option<i64> {
        self.frontier_log.iter().take_while(|(o, _)| *o < offset).last().map(|(_, f)| *f).or(self.initial_frontier)
    }

    /// Where a restart may resume, given that every input before `limit` is acknowledged.
    ///
    /// Let E be the frontier after the input before `limit` (every window ending at or
    /// before E was emitted). The windows still to come need the panes from
    /// E + slide − length on; C is the smallest offset of an accepted observation in them
    /// (or `limit`). A restart replays from C with the frontier that was in force just
    /// before C, so every late and duplicate decision of the replay is the original one,
    /// and emits nothing ending at or before E: those windows would lack the panes before C.
    /// The replay is bounded by one window length (plus lateness) of input.
    /// Forgets bookkeeping older than C.
    pub fn commit_point(&mut self, limit: i64) -> (i64, Option<Resume>) {
        let emitted = match (self.frontier_before(limit), self.emitted_until) {
            (Some(f), Some(e)) => Some(f.max(e)),
            (f, e) => f.or(e),
        };
        let needed_from = emitted.map_or(i64::MIN, |e| e + self.spec.slide_ms - self.spec.length_ms);
        let c = self.pane_offsets.range(needed_from..).map(|(_, o)| *o).min().unwrap_or(limit).min(limit);
        self.pane_offsets.retain(|p, _| *p >= needed_from);
        while self.frontier_log.len() > 1 && self.frontier_log[1].0 < c {
            let (_, f) = self.frontier_log.pop_front().expect("len > 1");
            self.initial_frontier = Some(f);
        }
        let resume = emitted.map(|emitted_until| Resume { frontier: self.frontier_before(c), emitted_until });
        (c, resume)
    }
}

/// Where a partition's windows resume after a restart: the frontier in force at the resume
/// offset, and the last window end emitted before the restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    pub frontier: Option<i64>,
    pub emitted_until: i64,
}

impl Resume {
    const MARK: i64 = 1 << 62;
    const DELTA_BITS: u32 = 29;

    /// Packs both into one non-negative i64 (a commit point's companion value): bit 62 set,
    /// `emitted_until` in seconds in bits 29..62, and in bits 0..29 one more than
    /// `emitted_until − frontier` in seconds (0: no frontier). Frontiers are pane boundaries,
    /// whole seconds ([`WindowSpec::check`]). A gap too large to pack resumes as if nothing
    /// was in force (the first watermark of the replay sets the frontier).
    pub fn encode(&self) -> i64 {
        let secs = self.emitted_until.div_euclid(1000).clamp(0, (1 << 33) - 1);
        let delta = self.frontier.map_or(0, |f| (self.emitted_until - f).div_euclid(1000) + 1);
        let delta = if (0..1 << Self::DELTA_BITS).contains(&delta) { delta } else { 0 };
        Self::MARK | secs << Self::DELTA_BITS | delta
    }

    /// The inverse of [`Self::encode`]; 0 (nothing committed) is `None`. A value without the
    /// mark is the previous format (the frontier in milliseconds), read as both fields.
    pub fn decode(c: i64) -> Option<Resume> {
        if c <= 0 {
            return None;
        }
        if c & Self::MARK == 0 {
            return Some(Resume { frontier: Some(c), emitted_until: c });
        }
        let emitted_until = ((c & !Self::MARK) >> Self::DELTA_BITS) * 1000;
        let delta = c & ((1 << Self::DELTA_BITS) - 1);
        Some(Resume { frontier: (delta > 0).then(|| emitted_until - (delta - 1) * 1000), emitted_until })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const MIN: i64 = 60_000;
    const T0: i64 = 1_764_489_600_000;

    fn boot() -> BootstrapSpec {
        BootstrapSpec { replicates: 200, seed: 5, level: 0.95 }
    }

    /// A production observation of `sys` 1 (the verdicts' tests use it too).
    pub(crate) fn obs(id: &str, metric: &str, run: &str, t: i64, value: f64) -> Observation {
        Observation {
            observation_id: id.into(),
            metric: metric.into(),
            system_id: "sys".into(),
            system_version: "1".into(),
            source: Source::Production,
            agent_id: None,
            run_id: run.into(),
            task_id: Some(format!("task-{run}")),
            attempt: Some(0),
            groups: vec![],
            benchmark: None,
            task_family: None,
            cluster_id: run.into(),
            step: None,
            event_time: t,
            value,
            weight: 1.0,
            confidence: None,
            provenance: None,
            rerun_of: None,
        }
    }

    fn spec_() -> WindowSpec {
        WindowSpec { length_ms: 10 * MIN, slide_ms: MIN, lateness_ms: 2 * MIN }
    }

    /// A stream of unsafe-action observations: run r has steps at minute r/3, one in four unsafe.
    fn stream(n: usize) -> Vec<Observation> {
        (0..n)
            .map(|i| {
                let run = format!("run-{}", i / 4);
                let t = T0 + (i as i64) * 7_000 + ((i * 7919) % 5) as i64 * 1000;
                obs(&format!("{run}/unsafe_action_rate/{i}"), "unsafe_action_rate", &run, t, (i % 4 == 0) as u8 as f64)
            })
            .collect()
    }

    #[test]
    fn a_borrowed_key_hashes_and_compares_as_its_series_key() {
        use std::hash::BuildHasher;
        let h = hashbrown::DefaultHashBuilder::default();
        let base = KeyRef {
            system_id: "sys-1",
            system_version: "2",
            source: Source::Evaluation,
            metric: ids::TASK_SUCCESS,
            benchmark: Some("swe"),
            slice: Some((SliceKind::Agent, "planner")),
        };
        let variants = [
            KeyRef { benchmark: None, ..base },
            KeyRef { slice: None, ..base },
            KeyRef { slice: Some((SliceKind::TaskFamily, "planner")), ..base },
            KeyRef { system_id: "sys-12", ..base },
            KeyRef { system_version: "", ..base },
            KeyRef { source: Source::Production, ..base },
            KeyRef { metric: ids::UNSAFE_ACTION_RATE, ..base },
        ];
        for k in std::iter::once(&base).chain(&variants) {
            assert_eq!(h.hash_one(k), h.hash_one(k.owned()), "{k:?}");
            assert!(k.equivalent(&k.owned()));
            for other in std::iter::once(&base).chain(&variants).filter(|o| !std::ptr::eq(*o, k)) {
                assert!(!k.equivalent(&other.owned()), "{k:?} against {other:?}");
            }
        }
    }

    /// pass^1, pass^2 and pass^4 over one task set: task A solved 4 of 4, task B 0 of 2 (too
    /// few attempts for the signature). Over every task pass^1 would be (1 + 0)/2 = 0.5 while
    /// pass^4 is 1 (A alone): a signature that rises with k. On {A} all three are 1.
    #[test]
    fn the_pass_hat_signature_is_one_task_set() {
        let window = |id: &str, tasks: &BTreeMap<&str, (u64, u64)>| {
            let metric = octant_core::catalogue::spec(id).unwrap();
            let key = SeriesKey {
                system_id: "sys".into(),
                system_version: "1".into(),
                source: Source::Evaluation,
                metric: metric.id,
                benchmark: None,
                slice: None,
            };
            let w = tasks_window(&key, metric, tasks, &boot()).unwrap();
            (w.units, w.estimate.unwrap().point)
        };
        let tasks: BTreeMap<&str, (u64, u64)> = [("a", (4, 4)), ("b", (2, 0))].into();
        let hat = |id: &str| window(id, &tasks);
        assert_eq!([hat("pass_hat_1"), hat("pass_hat_2"), hat("pass_hat_4")], [(1, 1.0), (1, 1.0), (1, 1.0)]);
        // pass@k is not a signature: B counts where its k allows (pass@1 = (1 + 0)/2).
        assert_eq!(hat("pass_at_1"), (2, 0.5));
        // With two attempts for most tasks, pass^1 and pass^2 are over the tasks that have two.
        let two: BTreeMap<&str, (u64, u64)> = [("a", (2, 2)), ("b", (2, 0)), ("c", (1, 1))].into();
        assert_eq!(window("pass_hat_1", &two), (2, 0.5), "c (one attempt) is outside the signature");
        // One task tried four times among many tried twice does not shrink the set: K = 2,
        // and pass^4 is over that task alone.
        let one_long: BTreeMap<&str, (u64, u64)> = [("a", (4, 4)), ("b", (2, 0)), ("c", (2, 2)), ("d", (2, 2))].into();
        assert_eq!(window("pass_hat_1", &one_long), (4, 0.75));
        assert_eq!(window("pass_hat_4", &one_long), (1, 1.0));
    }

    /// Δ_eff is a ratio of minutes, not a proportion: its interval is the bootstrap's, the
    /// same whether the review recorded minutes or seconds (a proportion's interval at Σ weight
    /// = Σ manual minutes was about ±0.27 in minutes and ±0.035 in seconds).
    #[test]
    fn net_efficiency_intervals_do_not_depend_on_the_time_unit() {
        let interval = |scale: f64| {
            let mut w = Windows::new(spec_(), boot(), None);
            let input: Vec<Observation> = (0..12)
                .map(|i| {
                    let run = format!("run-{i}");
                    let saved = if i % 2 == 0 { 0.7 } else { 0.8 };
                    let mut o = obs(&format!("{run}/d"), ids::EFFICIENCY_NET_OF_REVIEW_OBSERVED, &run, T0 + i * 1000, saved * scale);
                    o.weight = scale;
                    o
                })
                .collect();
            let mut out = run_all(&mut w, &input, 0);
            out.extend(w.advance_to(T0 + 30 * MIN, 99));
            let s = out.iter().flat_map(|e| &e.series).find(|s| s.units == 12).expect("a window with every run").clone();
            let e = s.estimate.unwrap();
            (e.point, e.lo, e.hi)
        };
        let (minutes, seconds) = (interval(1.0), interval(60.0));
        assert!((minutes.0 - 0.75).abs() < 1e-9, "{minutes:?}");
        assert!((minutes.1 - seconds.1).abs() < 1e-6 && (minutes.2 - seconds.2).abs() < 1e-6, "{minutes:?} {seconds:?}");
        assert!(minutes.2 - minutes.1 < 0.1, "the bootstrap's interval, not a proportion's: {minutes:?}");
    }

    /// One upstream partition: the watermark follows the observations' event times.
    fn feed(w: &mut Windows, o: &Observation, offset: i64) -> (Added, Vec<Emission>) {
        let added = w.add(o, offset);
        (added, w.advance_to(o.event_time, offset))
    }

    fn run_all(w: &mut Windows, input: &[Observation], from: usize) -> Vec<Emission> {
        input.iter().enumerate().skip(from).flat_map(|(i, o)| feed(w, o, i as i64).1).collect()
    }

    /// A restart that resumed without a frontier accepts the replay's observations before the
    /// first watermark, also in panes older than the ones a commit point keeps; the first
    /// watermark must put every pane of the first window in its sums (the crash test once
    /// published a window whose sums lacked them: same units, another estimate).
    #[test]
    fn a_restart_without_a_frontier_keeps_its_sums_equal_to_its_panes() {
        let spec = spec_();
        let input = stream(300);
        let e = T0 + 20 * MIN;
        let mut restarted = Windows::new(spec, boot(), Some(Resume { frontier: None, emitted_until: e }));
        let mut reference = Windows::new(spec, boot(), None);
        for (i, o) in input.iter().enumerate() {
            restarted.add(o, i as i64);
            reference.add(o, i as i64);
        }
        // A commit point keeps only the panes from e + slide − length on.
        restarted.commit_point(input.len() as i64);
        let wm = e + 5 * MIN + spec.lateness_ms;
        let got = restarted.advance_to(wm, input.len() as i64);
        let expected = reference.advance_to(wm, input.len() as i64);
        assert!(!got.is_empty());
        for w in &got {
            assert!(w.window_end > e, "nothing at or before emitted_until");
            let r = expected.iter().find(|x| x.window_end == w.window_end).expect("the same window");
            assert_eq!(format!("{:?}", w.series), format!("{:?}", r.series), "window ending {}", w.window_end);
        }
    }

    #[test]
    fn windows_hold_exactly_their_observations() {
        let input = stream(600);
        let out = brute_force_agrees(&input);
        assert!(out.len() > 50, "{} windows", out.len());
        // Consecutive windows slide by one minute.
        assert!(out.windows(2).all(|p| p[1].window_end - p[0].window_end == MIN));
    }

    /// A series whose windows go from dense (replicate sums kept between windows) to sparse
    /// (made at emission, [`MATERIALISE_UP_TO`]) and back: every window's replicates are the
    /// brute-force bootstrap's, to the bit.
    #[test]
    fn sparse_and_dense_windows_give_the_same_replicates() {
        let mut t = T0;
        let input: Vec<Observation> = (0..700)
            .map(|i| {
                // Dense: an observation every 5 s, two per run; sparse: one every 3 min, each its own run.
                let sparse = (250..400).contains(&i);
                t += if sparse { 180_000 } else { 5_000 };
                let run = if sparse { format!("lone-{i}") } else { format!("run-{}", i / 2) };
                obs(&format!("{run}/unsafe_action_rate/{i}"), "unsafe_action_rate", &run, t, (i % 3 == 0) as u8 as f64)
            })
            .collect();
        let mut w = Windows::new(spec_(), boot(), None);
        let (mut kept, mut made) = (0, 0);
        for (i, o) in input.iter().enumerate() {
            feed(&mut w, o, i as i64);
            match w.series.values().next() {
                Some(SeriesState::Linear { window: Some(_), .. }) => kept += 1,
                Some(SeriesState::Linear { window: None, .. }) => made += 1,
                _ => {}
            }
        }
        assert!(kept > 100 && made > 100, "both ways: kept {kept}, made at emission {made}");
        brute_force_agrees(&input);
    }

    #[test]
    fn a_window_too_large_for_i64_lanes_is_kept_wide() {
        let mut t = T0;
        let input: Vec<Observation> = (0..400)
            .map(|i| {
                t += 5_000;
                let run = format!("run-{}", i / 2);
                let mut o = obs(&format!("{run}/unsafe_action_rate/{i}"), "unsafe_action_rate", &run, t, (i % 3 == 0) as u8 as f64);
                // A few units of enormous weight: 7 × 3·10¹⁷ fixed-point per cluster, and a
                // window holding several passes i64::MAX.
                if i % 20 == 7 {
                    o.weight = 3e11;
                }
                o
            })
            .collect();
        let mut w = Windows::new(spec_(), boot(), None);
        let (mut lanes, mut wide) = (0, 0);
        for (i, o) in input.iter().enumerate() {
            feed(&mut w, o, i as i64);
            if let Some(SeriesState::Linear { window: Some(k), .. }) = w.series.values().next() {
                match k.sums {
                    KeptSums::Lanes(_) => lanes += 1,
                    KeptSums::Wide(_) => wide += 1,
                }
            }
        }
        assert!(lanes > 50 && wide > 50, "both forms: lanes {lanes}, wide {wide}");
        brute_force_agrees(&input);
    }

    /// Runs `input` through fresh windows and checks every emitted window against the
    /// bootstrap of the observations inside it, computed directly; returns the emissions.
    fn brute_force_agrees(input: &[Observation]) -> Vec<Emission> {
        let mut w = Windows::new(spec_(), boot(), None);
        let out = run_all(&mut w, input, 0);
        for e in &out {
            assert_eq!(e.window_end - e.window_start, 10 * MIN);
            let s = &e.series[0];
            // Brute force: the same bootstrap over the observations in the window.
            let mut sums = ReplicateSums::new(&boot(), 2);
            let inside: Vec<&Observation> =
                input.iter().filter(|o| o.event_time >= e.window_start && o.event_time < e.window_end).collect();
            for o in &inside {
                sums.add_cluster(cluster_hash(&o.cluster_id), &[to_fixed(o.value), to_fixed(o.weight)], 1);
            }
            assert_eq!(s.units, sums.units());
            let clusters = inside.iter().map(|o| &o.cluster_id).collect::<HashSet<_>>().len() as u64;
            assert_eq!(s.clusters, clusters);
            // A rate: the rate interval at Σ weight.
            let weight = from_fixed(inside.iter().map(|o| to_fixed(o.weight)).sum());
            let expected = sums.estimate(0.95, ratio).map(|e| octant_core::stats::bootstrap::rate_interval(e, weight, clusters));
            // Debug form: NaN replicates compare equal there.
            assert_eq!(format!("{:?}", s.estimate), format!("{expected:?}"), "window ending {}", e.window_end);
        }
        out
    }

    /// A busy pane's ids, split by their top 16 bits, answer as the sorted list does and give
    /// it back, at the group edges too.
    #[test]
    fn closed_ids_split_by_prefix_are_exact() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ids: Vec<u64> = (0..ClosedIds::SPLIT_FROM + 1000).map(|_| next()).collect();
        ids.extend([0, 1, u64::MAX, u64::MAX - 1, 0x0001_0000_0000_0000, 0x0000_ffff_ffff_ffff]);
        ids.sort_unstable();
        ids.dedup();
        let closed = ClosedIds::new(ids.clone());
        assert!(matches!(closed, ClosedIds::Split { .. }), "split from {} ids", ClosedIds::SPLIT_FROM);
        assert_eq!(closed.len(), ids.len());
        assert_eq!(closed.to_vec(), ids);
        for h in ids.iter().step_by(97).chain(&ids[ids.len() - 6..]).chain(&ids[..6]) {
            assert!(closed.contains(*h), "{h:#x} kept");
        }
        let absent = [2, u64::MAX - 2, 0x0001_0000_0000_0001, 0x0000_ffff_ffff_fffe].into_iter().chain((0..10_000).map(|_| next()));
        for h in absent.filter(|h| ids.binary_search(h).is_err()) {
            assert!(!closed.contains(h), "{h:#x} not kept");
        }
        let small = ClosedIds::new(ids[..100].to_vec());
        assert!(matches!(small, ClosedIds::Plain(_)));
        assert!(small.contains(ids[50]) && !small.contains(ids[100]));
    }

    /// A unit with a value and no weight is in a ratio's numerator (a failed run's cost: cost
    /// per success is total cost over successes); one that moves neither sum (a gated step
    /// without an approval channel) is counted apart, in no sum.
    #[test]
    fn a_unit_without_weight_counts_in_the_numerator_unless_it_moves_nothing() {
        let mut w = Windows::new(WindowSpec { length_ms: 10 * MIN, slide_ms: 10 * MIN, lateness_ms: 0 }, boot(), None);
        let with =
            |id: &str, metric: &str, run: &str, value: f64, weight: f64| Observation { weight, ..obs(id, metric, run, T0 + MIN, value) };
        for (i, o) in [
            with("a", "cost_per_success", "r1", 0.04, 1.0),
            with("b", "cost_per_success", "r2", 0.02, 0.0),
            with("c", "confirmation_gating", "r3", 1.0, 1.0),
            with("d", "confirmation_gating", "r4", 0.0, 0.0),
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(w.add(o, i as i64), Added::Accepted);
        }
        let em = w.advance_to(T0 + 20 * MIN, 4);
        let series = |m: &str| em.iter().flat_map(|e| &e.series).find(|s| s.key.metric == m).unwrap_or_else(|| panic!("{m}"));
        let cost = series("cost_per_success");
        assert_eq!((cost.units, cost.weightless), (2, 0), "the failed run's cost is a unit");
        assert!((cost.estimate.as_ref().unwrap().point - 0.06).abs() < 1e-9, "total cost over successes: {:?}", cost.estimate);
        let gating = series("confirmation_gating");
        assert_eq!((gating.units, gating.weightless), (1, 1), "the step without an approval channel is counted apart");
        assert_eq!(gating.estimate.as_ref().unwrap().point, 1.0);
    }

    /// A late copy of an observation is a duplicate while its pane's ids are kept: the panes
    /// of the next window by default, `duplicate_horizon` before its end when longer; older
    /// copies are late (dead-lettered by the caller, never counted).
    #[test]
    fn duplicates_are_recognised_up_to_the_horizon() {
        // Accepts `a` at `a_at`, then after a watermark at each of `at`: the frontier and what a
        // copy of `a` is.
        let copies = |mut w: Windows, a_at: i64, at: [i64; 2]| {
            let a = obs("a", "unsafe_action_rate", "r1", a_at, 1.0);
            assert_eq!(feed(&mut w, &a, 0).0, Added::Accepted);
            at.map(|t| {
                let offset = 2 * (t - a_at);
                feed(&mut w, &obs(&format!("m{t}"), "unsafe_action_rate", "r2", t, 0.0), offset);
                (w.frontier(), w.add(&a, offset + 1))
            })
        };
        for (horizon, expected) in [
            (None, Added::Late { frontier: T0 + 16 * MIN }),
            (Some(MIN), Added::Late { frontier: T0 + 16 * MIN }),
            (Some(20 * MIN), Added::Duplicate),
            // Between pane boundaries: the pane it falls in (T0 + 5 min) is kept.
            (Some(10 * MIN + MIN / 2), Added::Duplicate),
        ] {
            let mut w = Windows::new(spec_(), boot(), None);
            if let Some(h) = horizon {
                w = w.with_duplicate_horizon(h);
            }
            // Frontier T0 + 12 min: the next window (to T0 + 13 min) holds the pane of `a`;
            // frontier T0 + 16 min: one window length back is T0 + 6 min.
            let [next, later] = copies(w, T0 + 5 * MIN, [T0 + 14 * MIN, T0 + 18 * MIN]);
            assert_eq!(next, (Some(T0 + 12 * MIN), Added::Duplicate), "{horizon:?}: in the next window's panes");
            assert_eq!(later.1, expected, "{horizon:?}: a copy from before the horizon");
        }
        // Tumbling windows keep the ids of the last emitted window by default.
        let tumbling = Windows::new(WindowSpec { length_ms: 10 * MIN, slide_ms: 10 * MIN, lateness_ms: 0 }, boot(), None);
        let [last, before] = copies(tumbling, T0 + 15 * MIN, [T0 + 25 * MIN, T0 + 35 * MIN]);
        assert_eq!(last, (Some(T0 + 20 * MIN), Added::Duplicate), "tumbling: in the last emitted window");
        assert_eq!(before.1, Added::Late { frontier: T0 + 30 * MIN }, "tumbling: a window before");
    }

    #[test]
    fn late_and_duplicate_observations() {
        let mut w = Windows::new(spec_(), boot(), None);
        // In the next window after the frontier below (T0 + 9 min to T0 + 19 min).
        let a = obs("a", "unsafe_action_rate", "r1", T0 + 10 * MIN, 1.0);
        assert_eq!(feed(&mut w, &a, 0).0, Added::Accepted);
        assert_eq!(feed(&mut w, &a, 1).0, Added::Duplicate, "same id again");
        // Watermark to T0 + 20 min: windows up to T0 + 18 min are emitted.
        let (_, em) = feed(&mut w, &obs("b", "unsafe_action_rate", "r2", T0 + 20 * MIN, 0.0), 2);
        assert!(!em.is_empty());
        assert_eq!(w.frontier(), Some(T0 + 18 * MIN));
        let late = obs("c", "unsafe_action_rate", "r3", T0 + 17 * MIN, 1.0);
        assert_eq!(w.add(&late, 3), Added::Late { frontier: T0 + 18 * MIN });
        assert_eq!(w.add(&a, 4), Added::Duplicate, "a late duplicate is still a duplicate");
        assert_eq!(w.add(&obs("d", "not_a_metric", "r", T0, 1.0), 5), Added::Unknown);
        assert_eq!(
            w.add(&obs("e", "pass_at_1", "r", T0 + 19 * MIN, 1.0), 6),
            Added::Derived { from: "task_success" },
            "derived metrics are not read from observations"
        );
    }

    #[test]
    fn resuming_at_the_commit_point_replays_exactly() {
        let input = stream(900);
        let mut whole = Windows::new(spec_(), boot(), None);
        let reference = run_all(&mut whole, &input, 0);
        for crash_at in [37usize, 200, 421, 650, 899] {
            // Run to `crash_at`, take the commit point, resume a fresh state from it.
            let mut w = Windows::new(spec_(), boot(), None);
            let before: Vec<Emission> = input.iter().enumerate().take(crash_at).flat_map(|(i, o)| feed(&mut w, o, i as i64).1).collect();
            let (c, resume) = w.commit_point(crash_at as i64);
            assert!(c <= crash_at as i64);
            // Bounded replay: one window length plus the lateness (12 min, about 103 inputs at
            // 7 s each), not the whole history.
            assert!(crash_at as i64 - c <= 110, "crash at {crash_at}: replay from {c}");
            let resume = resume.map(|r| Resume::decode(r.encode()).expect("round trip"));
            let mut resumed = Windows::new(spec_(), boot(), resume);
            let after = run_all(&mut resumed, &input, c as usize);
            // Everything emitted after the resume equals the reference window for window.
            for e in &after {
                let r = reference.iter().find(|r| r.window_end == e.window_end).expect("reference has it");
                assert_eq!(format!("{e:?}"), format!("{r:?}"), "window ending {} after resuming at {c}", e.window_end);
            }
            // And together they cover every reference window.
            let ends: HashSet<i64> = before.iter().chain(&after).map(|e| e.window_end).collect();
            assert!(reference.iter().all(|r| ends.contains(&r.window_end)), "crash at {crash_at}");
        }
    }

    #[test]
    fn a_resumed_frontier_off_the_pane_boundaries_is_dropped() {
        let resume = |f: i64| Some(Resume { frontier: Some(f), emitted_until: f });
        assert_eq!(Windows::new(spec_(), boot(), resume(T0 + 18 * MIN)).frontier(), Some(T0 + 18 * MIN));
        // The slide changed across the restart: the first watermark sets the frontier.
        assert_eq!(Windows::new(spec_(), boot(), resume(T0 + 18 * MIN + 30_000)).frontier(), None);
    }

    #[test]
    fn resume_points_pack_into_one_companion_value() {
        for r in [
            Resume { frontier: Some(T0), emitted_until: T0 },
            Resume { frontier: Some(T0 - 90 * MIN), emitted_until: T0 },
            Resume { frontier: None, emitted_until: T0 + 7 * MIN },
        ] {
            let c = r.encode();
            assert!(c > 0);
            assert_eq!(Resume::decode(c), Some(r));
        }
        assert_eq!(Resume::decode(0), None);
        // The previous format (the frontier in milliseconds) still reads.
        assert_eq!(Resume::decode(T0), Some(Resume { frontier: Some(T0), emitted_until: T0 }));
    }

    #[test]
    fn task_metrics_from_attempts() {
        let mut w = Windows::new(WindowSpec { length_ms: 10 * MIN, slide_ms: 10 * MIN, lateness_ms: 0 }, boot(), None);
        let mut i = 0;
        // 40 tasks × 4 attempts; task k succeeds on attempts < k % 5.
        for task in 0..40 {
            for attempt in 0..4 {
                let mut o = obs(
                    &format!("t{task}a{attempt}"),
                    "task_success",
                    &format!("t{task}a{attempt}"),
                    T0 + i * 1000,
                    ((attempt as i64) < task % 5) as u8 as f64,
                );
                o.source = Source::Evaluation;
                o.benchmark = Some("bench".into());
                o.task_id = Some(format!("task-{task}"));
                o.groups = vec![format!("g={}", task % 2)];
                feed(&mut w, &o, i);
                i += 1;
            }
        }
        let (_, em) = feed(&mut w, &obs("late-wm", "task_success", "x", T0 + 30 * MIN, 1.0), i);
        let series = &em[0].series;
        let get = |m: &str| series.iter().find(|s| s.key.metric == m && s.key.benchmark.is_some()).unwrap();
        // c = task % 5 successes of 4 → pass@1 = mean(c/4) over tasks, pass^4 = share with c = 4.
        let mean_c: f64 = (0..40).map(|t| (t % 5).min(4) as f64 / 4.0).sum::<f64>() / 40.0;
        assert!((get("pass_at_1").estimate.as_ref().unwrap().point - mean_c).abs() < 1e-9);
        assert!((get("pass_hat_4").estimate.as_ref().unwrap().point - 8.0 / 40.0).abs() < 1e-9);
        assert_eq!(get("pass_at_4").units, 40);
        let p4 = get("pass_at_4").estimate.as_ref().unwrap().point;
        assert!(get("pass_hat_4").estimate.as_ref().unwrap().point <= p4);
        assert!(get("fairness_gap").estimate.is_some());
        // Consistency: the sample variance c(4 − c)/12 per task, c = 0…4 eight times each —
        // (0 + 3 + 4 + 3 + 0)/12/5 = 1/6 (`python3 -c "import statistics as s;
        // print(s.mean(s.variance([1]*c+[0]*(4-c)) for c in range(5)))"`).
        let consistency = get("outcome_consistency");
        // (fixed point: to 1e-6)
        assert!((consistency.estimate.as_ref().unwrap().point - 1.0 / 6.0).abs() < 1e-6, "{:?}", consistency.estimate);
        assert_eq!(consistency.units, 40);
    }

    /// Per-agent and per-family slices: each holds exactly its own units (the joint series is
    /// the same with or without them), values beyond the cap pool into "(other)", and metrics
    /// not listed are not sliced.
    #[test]
    fn slices_hold_exactly_their_units_and_leave_the_joint_series_alone() {
        let slices = SliceSpec { max_values: 2, ..SliceSpec::default() };
        let mut input = stream(600);
        for (i, o) in input.iter_mut().enumerate() {
            o.agent_id = Some(format!("agent-{}", i % 3));
            o.task_family = Some("planning".into());
            if i % 5 == 0 {
                o.metric = "tool_error_rate".into();
            }
        }
        let mut sliced = Windows::new(spec_(), boot(), None).with_slices(slices.clone(), ["sys".to_string()]);
        let mut single = Windows::new(spec_(), boot(), None).with_slices(slices, []);
        assert_eq!(
            format!("{:?}", run_all(&mut single, &input, 0)),
            format!("{:?}", run_all(&mut Windows::new(spec_(), boot(), None), &input, 0)),
            "a system not declared multi-agent has no agent slices"
        );
        let mut plain = Windows::new(spec_(), boot(), None);
        let (out, reference) = (run_all(&mut sliced, &input, 0), run_all(&mut plain, &input, 0));
        assert_eq!(out.len(), reference.len());
        let mut seen = BTreeSet::new();
        for (e, r) in out.iter().zip(&reference) {
            let joint: Vec<&SeriesWindow> = e.series.iter().filter(|s| s.key.slice.is_none()).collect();
            assert_eq!(format!("{joint:?}"), format!("{:?}", r.series.iter().collect::<Vec<_>>()), "window ending {}", e.window_end);
            for s in e.series.iter().filter(|s| s.key.slice.is_some()) {
                let (kind, value) = s.key.slice.clone().unwrap();
                assert_eq!(kind, SliceKind::Agent, "task_family slices run-level metrics only, not unsafe_action_rate");
                seen.insert(value.clone());
                let mine = |o: &&Observation| {
                    let agent = o.agent_id.as_deref().unwrap();
                    let named = if agent == "agent-2" { OTHER_SLICE } else { agent };
                    o.metric == s.key.metric && named == value && o.event_time >= e.window_start && o.event_time < e.window_end
                };
                let inside: Vec<&Observation> = input.iter().filter(mine).collect();
                assert_eq!(s.units, inside.len() as u64, "{:?} window ending {}", s.key, e.window_end);
                let rate = inside.iter().map(|o| o.value).sum::<f64>() / inside.len() as f64;
                assert!((s.estimate.as_ref().unwrap().point - rate).abs() < 1e-9);
                assert!(s.evidence.is_none(), "no veto state, no evidence");
            }
        }
        assert_eq!(seen, ["agent-0", "agent-1", OTHER_SLICE].map(String::from).into(), "two named, the third pooled");
        // A task family slices task_success.
        let mut w = Windows::new(spec_(), boot(), None).with_slices(SliceSpec::default(), []);
        let mut o = obs("r1/task_success", "task_success", "r1", T0, 1.0);
        o.task_family = Some("planning".into());
        w.add(&o, 0);
        let e = w.advance_to(T0 + 30 * MIN, 1);
        let keys: Vec<_> = e[0].series.iter().map(|s| s.key.slice.clone()).collect();
        assert_eq!(keys, [None, Some((SliceKind::TaskFamily, "planning".to_string()))]);
        assert!(
            SliceSpec { family_metrics: vec!["pass_at_1".into()], ..SliceSpec::default() }.check().is_err(),
            "derived metrics are not sliced"
        );
        assert!(SliceSpec::default().check().is_ok());
    }
}
