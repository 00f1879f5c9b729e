//! The deterministic, mergeable cluster bootstrap (design §1.5).
//!
//! Replicate `b` gives cluster `c` the weight `w(c, b) ~ Poisson(1)`, drawn from a counter-based
//! generator keyed by `(seed, hash(c))`. A replicate's statistic is computed from weighted
//! sums `Σ_c w(c,b)·s_c` of per-cluster component vectors `s_c`. Hence:
//!
//! - **Deterministic.** The interval depends only on the data and the seed — never on arrival
//!   order, partitioning or replay.
//! - **Mergeable.** Replicate sums of two panes add up to the replicate sums of their union,
//!   even when one cluster (a run) has units in both panes: the weight of a cluster is the same
//!   wherever it is seen, so `w·a + w·b = w·(a + b)`.
//! - **Exact.** Sums are fixed-point integers ([`SCALE`] = 10⁶ per unit of value, `i128`), so
//!   addition is associative and a permutation of the input leaves every replicate identical
//!   to the bit. Native values are quantised to 10⁻⁶ on the way in.
//!
//! The weight generator ([`METHOD`]) is part of the contract between the streaming
//! aggregator and the batch profiler: changing it changes every interval. One SplitMix64
//! output yields four replicates' weights, each from 16 bits by inverse-CDF lookup in a
//! quantised Poisson(1) table ([`POISSON16`]); weights range over 0..=7.

use super::lanes;
pub use super::lanes::Path;

/// Name of the resampling method, recorded with every interval.
pub const METHOD: &str = "poisson-bootstrap/splitmix64-16bit-v1";

/// Fixed-point scale of component sums: one unit of native value is `SCALE`.
pub const SCALE: i128 = 1_000_000;

/// Converts a native value to fixed point (rounded to 10⁻⁶).
#[inline]
pub fn to_fixed(x: f64) -> i128 {
    (x * SCALE as f64).round() as i128
}

/// Converts a fixed-point sum back to a native value.
#[inline]
pub fn from_fixed(x: i128) -> f64 {
    as_f64(x) / SCALE as f64
}

/// `x as f64`, through `i64` when it fits: both conversions round to nearest, so the value is
/// the same to the bit, and the `i64` one is a single instruction where `i128`'s is a library
/// call (a replicate's statistic makes two).
#[inline]
pub fn as_f64(x: i128) -> f64 {
    match i64::try_from(x) {
        Ok(x) => x as f64,
        Err(_) => wide_as_f64(x),
    }
}

/// Out of line and cold: written inline, LLVM saw both arms give the same value and made the
/// library call on every conversion (seen in the window bench's profile).
#[cold]
#[inline(never)]
fn wide_as_f64(x: i128) -> f64 {
    x as f64
}

/// Bootstrap settings (design defaults: B = 1000, 95 %).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BootstrapSpec {
    pub replicates: u32,
    pub seed: u64,
    pub level: f64,
}

/// The default seed: the ASCII bytes of "octant" — any fixed value would do, what matters
/// is that streaming and batch use the same one.
pub const DEFAULT_SEED: u64 = 0x6f63_7461_6e74;

impl Default for BootstrapSpec {
    fn default() -> Self {
        BootstrapSpec { replicates: 1000, seed: DEFAULT_SEED, level: 0.95 }
    }
}

pub(crate) const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function (Steele, Lea & Flood 2014).
#[inline(always)]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Stable 64-bit hash of a cluster id (FNV-1a, then a SplitMix64 finaliser). Stable across
/// platforms, processes and releases: it is part of [`METHOD`].
pub fn cluster_hash(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.as_bytes() {
        h ^= *byte as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix64(h)
}

/// Cumulative Poisson(1) probabilities P(X ≤ k), k = 0..=6, scaled to 2¹⁶ and rounded.
/// A 16-bit uniform `u` gives the weight #{k : u ≥ POISSON16[k]}.
pub const POISSON16: [u32; 7] = [24109, 48219, 60273, 64292, 65296, 65497, 65531];

/// [`POISSON16`] expanded to a 64 KiB lookup table, built at compile time.
static POISSON_LUT: [u8; 65536] = {
    let mut lut = [0u8; 65536];
    let mut u = 0;
    while u < 65536 {
        let mut w = 0;
        let mut k = 0;
        while k < POISSON16.len() {
            if u as u32 >= POISSON16[k] {
                w += 1;
            }
            k += 1;
        }
        lut[u] = w;
        u += 1;
    }
    lut
};

#[inline(always)]
fn poisson_from_u16(u: u32) -> u32 {
    POISSON_LUT[(u & 0xffff) as usize] as u32
}

#[inline(always)]
fn stream_key(seed: u64, cluster: u64) -> u64 {
    mix64(seed ^ mix64(cluster ^ GAMMA))
}

/// The weight of `cluster` (a [`cluster_hash`]) in replicate `b`: what [`ReplicateSums`]
/// uses, exposed for tests and for other implementations of the method.
pub fn poisson_weight(seed: u64, cluster: u64, b: u32) -> u32 {
    let r = mix64(stream_key(seed, cluster).wrapping_add((b as u64 / 4 + 1).wrapping_mul(GAMMA)));
    poisson_from_u16(((r >> (16 * (b % 4))) & 0xffff) as u32)
}

/// Adds `w(c, b)·sums` to every replicate `b`, for a width known at compile time (the common
/// ratio case): the eight possible multiples are computed once, and the inner loop is
/// branch-free (a zero weight adds zeros rather than mispredicting a branch).
fn accumulate<const D: usize>(reps: &mut [i128], key: u64, sums: &[i128; D]) {
    let multiples: [[i128; D]; 8] = std::array::from_fn(|w| sums.map(|s| s * w as i128));
    let mut counter = key;
    for chunk in reps.chunks_mut(4 * D) {
        counter = counter.wrapping_add(GAMMA);
        let r = mix64(counter);
        for (i, rep) in chunk.chunks_exact_mut(D).enumerate() {
            let m = &multiples[poisson_from_u16(((r >> (16 * i)) & 0xffff) as u32) as usize];
            for d in 0..D {
                rep[d] += m[d];
            }
        }
    }
}

/// Any width. Only the non-zero components are touched: the wide states are sparse per unit
/// (a fairness unit fills the two components of its own group out of `2 × 16`), and skipping
/// zeros leaves every replicate sum exactly as it was.
fn accumulate_dyn(reps: &mut [i128], key: u64, sums: &[i128]) {
    let dims = sums.len();
    let nonzero: Vec<(usize, i128)> = sums.iter().copied().enumerate().filter(|(_, s)| *s != 0).collect();
    if nonzero.is_empty() {
        return;
    }
    let mut counter = key;
    for chunk in reps.chunks_mut(4 * dims) {
        counter = counter.wrapping_add(GAMMA);
        let r = mix64(counter);
        for (i, rep) in chunk.chunks_exact_mut(dims).enumerate() {
            let w = poisson_from_u16(((r >> (16 * i)) & 0xffff) as u32);
            if w == 0 {
                continue;
            }
            let w = w as i128;
            for &(d, s) in &nonzero {
                rep[d] += w * s;
            }
        }
    }
}

/// Adds every `(key, sums)` to `reps` on `path`: the scalar reference, or a vector path for
/// widths 1 and 2 (the wide, sparse states stay scalar on every path).
fn accumulate_on<'a>(path: Path, reps: &mut [i128], dims: usize, items: impl Iterator<Item = (u64, &'a [i128])>) {
    match (path, dims) {
        (Path::Scalar, _) | (_, 3..) => {
            for (key, sums) in items {
                match dims {
                    1 => accumulate::<1>(reps, key, sums.try_into().unwrap()),
                    2 => accumulate::<2>(reps, key, sums.try_into().unwrap()),
                    _ => accumulate_dyn(reps, key, sums),
                }
            }
        }
        (_, 1) => lanes::add_batch::<1>(path, reps, items, accumulate::<1>),
        _ => lanes::add_batch::<2>(path, reps, items, accumulate::<2>),
    }
}

/// The mergeable bootstrap state of one statistic: the point sums and the `B` replicate sums
/// of a vector of `dims` components (for a ratio: numerator and denominator).
#[derive(Clone, PartialEq, Eq)]
pub struct ReplicateSums {
    seed: u64,
    replicates: u32,
    dims: usize,
    units: u64,
    point: Vec<i128>,
    /// Replicate-major: `reps[b * dims + d]`.
    reps: Vec<i128>,
}

impl std::fmt::Debug for ReplicateSums {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicateSums")
            .field("seed", &self.seed)
            .field("replicates", &self.replicates)
            .field("dims", &self.dims)
            .field("units", &self.units)
            .field("point", &self.point)
            .finish_non_exhaustive()
    }
}

/// Two states that were not built with the same seed, replicate count and width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncompatibleStates;

impl std::fmt::Display for IncompatibleStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("bootstrap states differ in seed, replicate count or width")
    }
}

impl std::error::Error for IncompatibleStates {}

impl ReplicateSums {
    pub fn new(spec: &BootstrapSpec, dims: usize) -> Self {
        assert!(dims > 0, "a statistic has at least one component");
        ReplicateSums {
            seed: spec.seed,
            replicates: spec.replicates,
            dims,
            units: 0,
            point: vec![0; dims],
            reps: vec![0; spec.replicates as usize * dims],
        }
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn replicates(&self) -> u32 {
        self.replicates
    }

    /// Units added so far.
    pub fn units(&self) -> u64 {
        self.units
    }

    /// Adds a cluster's component sums (fixed point) covering `units` units. A cluster may be
    /// added in several calls (steps of one run arriving apart): the result is the same as
    /// adding the total once.
    pub fn add_cluster(&mut self, cluster: u64, sums: &[i128], units: u64) {
        self.add_many(std::iter::once((cluster, sums, units)));
    }

    /// Adds many clusters (each: hash, component sums, units) on this thread: the same as
    /// [`Self::add_cluster`] for each, with one batch of vector lanes for all of them.
    pub fn add_many<'a>(&mut self, clusters: impl IntoIterator<Item = (u64, &'a [i128], u64)>) {
        self.add_many_on(Path::active(), clusters)
    }

    fn add_many_on<'a>(&mut self, path: Path, clusters: impl IntoIterator<Item = (u64, &'a [i128], u64)>) {
        let (seed, dims) = (self.seed, self.dims);
        let (point, units) = (&mut self.point, &mut self.units);
        let items = clusters.into_iter().map(|(cluster, sums, n)| {
            assert_eq!(sums.len(), dims, "component width");
            *units += n;
            for (p, s) in point.iter_mut().zip(sums) {
                *p += s;
            }
            (stream_key(seed, cluster), sums)
        });
        accumulate_on(path, &mut self.reps, dims, items);
    }

    /// Adds many clusters (each: hash, component sums, units) using `threads` threads: each
    /// thread owns a contiguous block of replicates and adds every cluster to it. The result
    /// is bit-identical to calling [`Self::add_cluster`] for each (integer sums; each
    /// replicate's weights come from the same stream position), which a test proves.
    pub fn add_clusters(&mut self, clusters: &[(u64, &[i128], u64)], threads: usize) {
        self.add_clusters_on(Path::active(), clusters, threads)
    }

    /// [`Self::add_clusters`] on a given path (the scalar reference or a vector path this CPU
    /// supports): every path gives the same sums to the bit.
    pub fn add_clusters_on(&mut self, path: Path, clusters: &[(u64, &[i128], u64)], threads: usize) {
        if threads <= 1 {
            return self.add_many_on(path, clusters.iter().copied());
        }
        for (_, sums, units) in clusters {
            assert_eq!(sums.len(), self.dims, "component width");
            self.units += units;
            for (p, s) in self.point.iter_mut().zip(sums.iter()) {
                *p += s;
            }
        }
        // One mix64 output feeds four replicates: blocks are whole groups of four.
        let group = 4 * self.dims;
        let groups = self.reps.len().div_ceil(group);
        let per_thread = groups.div_ceil(threads.clamp(1, groups.max(1)));
        let (seed, dims) = (self.seed, self.dims);
        std::thread::scope(|scope| {
            for (t, block) in self.reps.chunks_mut(per_thread * group).enumerate() {
                scope.spawn(move || {
                    // `accumulate` steps its counter once per group before drawing: starting
                    // `t * per_thread` steps ahead lands on this block's first group.
                    let ahead = ((t * per_thread) as u64).wrapping_mul(GAMMA);
                    let items = clusters.iter().map(|(cluster, sums, _)| (stream_key(seed, *cluster).wrapping_add(ahead), *sums));
                    accumulate_on(path, block, dims, items);
                });
            }
        });
    }

    /// Adds the other state with its component `d` into component `map[d]` of this one (the
    /// same groups numbered differently in two panes; `None`: left out). Exact, like
    /// [`Self::merge`].
    pub fn merge_mapped(&mut self, other: &ReplicateSums, map: &[Option<usize>]) -> Result<(), IncompatibleStates> {
        if (self.seed, self.replicates) != (other.seed, other.replicates)
            || map.len() != other.dims
            || map.iter().flatten().any(|d| *d >= self.dims)
        {
            return Err(IncompatibleStates);
        }
        self.units += other.units;
        let pairs: Vec<(usize, usize)> = map.iter().enumerate().filter_map(|(d, to)| to.map(|t| (d, t))).collect();
        for &(d, to) in &pairs {
            self.point[to] += other.point[d];
        }
        for (mine, theirs) in self.reps.chunks_exact_mut(self.dims).zip(other.reps.chunks_exact(other.dims)) {
            for &(d, to) in &pairs {
                mine[to] += theirs[d];
            }
        }
        Ok(())
    }

    /// The state of `parts` as stored ([`Self::reps`] replicate-major); `None` when the sizes
    /// do not fit `spec` and `dims`.
    pub fn from_parts(spec: &BootstrapSpec, dims: usize, units: u64, point: Vec<i128>, reps: Vec<i128>) -> Option<ReplicateSums> {
        (dims > 0 && point.len() == dims && reps.len() == spec.replicates as usize * dims).then_some(ReplicateSums {
            seed: spec.seed,
            replicates: spec.replicates,
            dims,
            units,
            point,
            reps,
        })
    }

    /// Every replicate's sums, replicate-major (`reps[b * dims + d]`).
    pub fn reps(&self) -> &[i128] {
        &self.reps
    }

    /// Adds the other state into this one (panes into a window).
    pub fn merge(&mut self, other: &ReplicateSums) -> Result<(), IncompatibleStates> {
        self.combine(other, 1)
    }

    /// Removes a state previously merged into this one (a pane leaving a sliding window).
    pub fn unmerge(&mut self, other: &ReplicateSums) -> Result<(), IncompatibleStates> {
        self.combine(other, -1)
    }

    fn combine(&mut self, other: &ReplicateSums, sign: i128) -> Result<(), IncompatibleStates> {
        if (self.seed, self.replicates, self.dims) != (other.seed, other.replicates, other.dims) {
            return Err(IncompatibleStates);
        }
        self.units = if sign > 0 { self.units + other.units } else { self.units - other.units };
        for (a, b) in self.point.iter_mut().zip(&other.point).chain(self.reps.iter_mut().zip(&other.reps)) {
            *a += sign * b;
        }
        Ok(())
    }

    /// The unweighted component sums.
    pub fn point(&self) -> &[i128] {
        &self.point
    }

    /// Replicate `b`'s weighted component sums.
    pub fn replicate(&self, b: usize) -> &[i128] {
        &self.reps[b * self.dims..(b + 1) * self.dims]
    }

    /// Point estimate and percentile interval of `stat`. `None` when the statistic is
    /// undefined on the data itself. Replicates where it is undefined (all weights zero)
    /// are left out of the interval and reported as NaN in [`Estimate::replicates`].
    pub fn estimate(&self, level: f64, stat: impl Fn(&[i128]) -> Option<f64>) -> Option<Estimate> {
        let (point, replicates) = self.values(stat)?;
        Some(Estimate::from_replicates(point, replicates, level, self.units))
    }

    /// The point value of `stat` and its value on every replicate (NaN where undefined), as
    /// [`Self::estimate`] takes them; `None` when it is undefined on the data itself.
    pub fn values(&self, stat: impl Fn(&[i128]) -> Option<f64>) -> Option<(f64, Vec<f64>)> {
        let point = stat(&self.point)?;
        Some((point, (0..self.replicates as usize).map(|b| stat(self.replicate(b)).unwrap_or(f64::NAN)).collect()))
    }
}

/// A ratio's replicate sums (components `[value, weight]`) in `i64` lanes, dimension-major:
/// half the memory of [`ReplicateSums`] and no `i128` pass per update, for a state updated
/// pane by pane and read at every window (the sums an aggregator series keeps between
/// windows). The same weights and the same integers as [`ReplicateSums`], exact while every
/// partial sum fits an `i64`, which a bound guarantees: the sum, over the clusters it holds, of
/// 7 (the largest weight) × the cluster's largest |component| stays ≤ `i64::MAX`. An update
/// that would pass it is refused, and the caller goes on with [`Self::to_wide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneSums {
    seed: u64,
    replicates: u32,
    point: [i128; 2],
    /// `lanes[d * B + b]`.
    lanes: Vec<i64>,
    bound: u128,
}

impl LaneSums {
    pub fn new(spec: &BootstrapSpec) -> LaneSums {
        LaneSums { seed: spec.seed, replicates: spec.replicates, point: [0; 2], lanes: vec![0; 2 * spec.replicates as usize], bound: 0 }
    }

    /// Adds clusters (hash, the two component sums), or with `remove` takes out clusters added
    /// before with the same sums (exact: the integers cancel). False, and nothing changed, if
    /// the bound would pass `i64::MAX`.
    pub fn update<'a>(&mut self, clusters: impl Iterator<Item = (u64, &'a [i128])> + Clone, remove: bool) -> bool {
        self.update_on(Path::active(), clusters, remove)
    }

    /// [`Self::update`] on a given path (one this CPU supports).
    pub fn update_on<'a>(&mut self, path: Path, clusters: impl Iterator<Item = (u64, &'a [i128])> + Clone, remove: bool) -> bool {
        assert!(path.supported(), "the {} path on a CPU without it", path.name());
        let mut worst: u128 = 0;
        for (_, sums) in clusters.clone() {
            assert_eq!(sums.len(), 2, "a ratio's two components");
            let w = sums.iter().map(|s| s.unsigned_abs()).max().unwrap_or(0).saturating_mul(7);
            if w > i64::MAX as u128 {
                return false;
            }
            worst += w;
        }
        // Removing: every partial sum is a sum over clusters already held (within the bound);
        // removing more than is held is refused (a caller's error, never a wrapped lane).
        // Adding: over the clusters held after the update (checked first).
        let bound = if remove { self.bound.checked_sub(worst) } else { Some(self.bound + worst) };
        let Some(bound) = bound.filter(|b| *b <= i64::MAX as u128) else { return false };
        let (n, sign) = (self.replicates as usize, if remove { -1 } else { 1 });
        for (cluster, sums) in clusters {
            for (p, s) in self.point.iter_mut().zip(sums) {
                *p += sign as i128 * s;
            }
            let sums = [sign * sums[0] as i64, sign * sums[1] as i64];
            lanes::dispatch::<2>(path, &mut self.lanes, n, stream_key(self.seed, cluster), &sums);
        }
        self.bound = bound;
        true
    }

    pub fn point(&self) -> &[i128] {
        &self.point
    }

    /// The same replicate sums as [`ReplicateSums`] (for a state the lanes can no longer hold).
    pub fn to_wide(&self) -> ReplicateSums {
        let n = self.replicates as usize;
        let reps = (0..n).flat_map(|b| [self.lanes[b] as i128, self.lanes[n + b] as i128]).collect();
        ReplicateSums { seed: self.seed, replicates: self.replicates, dims: 2, units: 0, point: self.point.to_vec(), reps }
    }

    /// [`ReplicateSums::values`] of [`ratio`]: the same values to the bit.
    pub fn ratio_values(&self) -> Option<(f64, Vec<f64>)> {
        let point = ratio(&self.point)?;
        let (num, den) = self.lanes.split_at(self.replicates as usize);
        Some((point, num.iter().zip(den).map(|(&x, &y)| if y != 0 { x as f64 / y as f64 } else { f64::NAN }).collect()))
    }
}

/// How an [`Estimate`]'s interval was made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IntervalMethod {
    /// The percentile interval of the bootstrap replicates.
    Percentile,
    /// A rate's Jeffreys interval at the effective sample size `n_eff` ([`rate_interval`]).
    Jeffreys { n_eff: f64 },
    /// No resampling (a declared value): the interval is the point.
    Exact,
}

impl IntervalMethod {
    /// The name recorded with the interval (appended to [`METHOD`]).
    pub fn name(&self) -> &'static str {
        match self {
            IntervalMethod::Percentile => "percentile",
            IntervalMethod::Jeffreys { .. } => "jeffreys-deff",
            IntervalMethod::Exact => "exact",
        }
    }
}

/// A point estimate with its interval (percentile bootstrap unless [`Estimate::method`] says
/// otherwise) and its replicates.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub point: f64,
    pub lo: f64,
    pub hi: f64,
    pub level: f64,
    /// Units behind the estimate.
    pub units: u64,
    /// Every replicate's value in replicate order (NaN where undefined): the same index is the
    /// same resampling across metrics of one system, which gives intervals on dimension bands.
    pub replicates: Vec<f64>,
    pub method: IntervalMethod,
}

impl Estimate {
    /// Builds an estimate from replicate values; the interval is the (1 − level)/2 and
    /// (1 + level)/2 quantiles of the defined replicates (linear interpolation between order
    /// statistics, numpy's default). With no defined replicate the interval collapses onto
    /// the point.
    pub fn from_replicates(point: f64, replicates: Vec<f64>, level: f64, units: u64) -> Estimate {
        let mut finite: Vec<f64> = replicates.iter().copied().filter(|x| x.is_finite()).collect();
        let alpha = 1.0 - level;
        let (lo, hi) = if finite.is_empty() { (point, point) } else { quantile_pair(&mut finite, alpha / 2.0, 1.0 - alpha / 2.0) };
        Estimate { point, lo, hi, level, units, replicates, method: IntervalMethod::Percentile }
    }

    /// An estimate without resampling (a declared value): the interval is the point.
    pub fn exact(point: f64, units: u64, level: f64) -> Estimate {
        Estimate { point, lo: point, hi: point, level, units, replicates: Vec::new(), method: IntervalMethod::Exact }
    }
}

/// The interval of a **rate** (a ratio of sums whose value lies in [0, 1]) near 0 and 1 and on
/// few units, where percentile intervals collapse (one run with one violating step out of four
/// gives the percentile interval [0.25, 0.25]).
///
/// The Jeffreys interval (Beta(x + ½, n − x + ½) quantiles) at an **effective sample size**
/// taken from the same mergeable bootstrap: n_eff = p̂(1 − p̂) / Var_b(p̂_b), the variance of
/// the replicates (ddof 1), i.e. the units divided by the design effect of clustering. n_eff is
/// clamped to [min(C, W), W] (C clusters, W = Σ weight): never more information than one unit
/// per weight (no credit for negative correlation), never less than one per cluster (steps of
/// a run perfectly alike). When p̂ is 0 or 1, or the replicates do not vary (a single cluster),
/// the variance says nothing about clustering and n_eff = min(C, W), the cautious end. For
/// run-level rates (one unit per cluster, C = W) n_eff = W exactly, so coverage is the
/// Jeffreys interval's exact binomial coverage. Everything comes from the replicate sums, so
/// the interval stays deterministic and mergeable across panes. Replicates are kept (they give
/// the dimension-band intervals). Other values (p̂ outside [0, 1]) keep the percentile interval.
pub fn rate_interval(e: Estimate, weight: f64, clusters: u64) -> Estimate {
    match jeffreys_deff(e.point, &e.replicates, e.level, weight, clusters) {
        Some((lo, hi, n_eff)) => Estimate { lo, hi, method: IntervalMethod::Jeffreys { n_eff }, ..e },
        None => e,
    }
}

/// `rate_interval(Estimate::from_replicates(point, replicates, level, units), weight, clusters)`,
/// without the percentile interval's selection where the Jeffreys interval replaces it (the
/// same estimate to the bit: a test).
pub fn rate_estimate(point: f64, replicates: Vec<f64>, level: f64, units: u64, weight: f64, clusters: u64) -> Estimate {
    match jeffreys_deff(point, &replicates, level, weight, clusters) {
        Some((lo, hi, n_eff)) => Estimate { point, lo, hi, level, units, replicates, method: IntervalMethod::Jeffreys { n_eff } },
        None => Estimate::from_replicates(point, replicates, level, units),
    }
}

/// The Jeffreys interval of [`rate_interval`] and its n_eff (`None`: the rate keeps the
/// percentile interval).
fn jeffreys_deff(p: f64, replicates: &[f64], level: f64, weight: f64, clusters: u64) -> Option<(f64, f64, f64)> {
    if !(0.0..=1.0).contains(&p) || weight.is_nan() || weight <= 0.0 || clusters == 0 {
        return None;
    }
    let floor = (clusters as f64).min(weight);
    // Two passes over the defined replicates, in order (no copy of them).
    let finite = || replicates.iter().copied().filter(|x| x.is_finite());
    let n = finite().count();
    let var = if n >= 2 {
        let mean = finite().sum::<f64>() / n as f64;
        finite().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let n_eff = if p > 0.0 && p < 1.0 && var > 0.0 { (p * (1.0 - p) / var).clamp(floor, weight) } else { floor };
    // The interval is computed (and recorded) at no more than MAX_TRIALS.
    let n_eff = n_eff.min(crate::stats::proportion::MAX_TRIALS);
    crate::stats::proportion::jeffreys(p * n_eff, n_eff, level).map(|(lo, hi)| (lo, hi, n_eff))
}

/// Quantile of sorted data by linear interpolation (Hyndman & Fan type 7).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty());
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (i, frac) = (h.floor() as usize, h - h.floor());
    if i + 1 < sorted.len() { sorted[i] + frac * (sorted[i + 1] - sorted[i]) } else { sorted[i] }
}

/// [`quantile_sorted`] of `data` in any order, by selection rather than sorting (the same
/// order statistics, so the same value to the bit; `data` is reordered).
pub fn quantile_select(data: &mut [f64], q: f64) -> f64 {
    assert!(!data.is_empty());
    let h = (data.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (i, frac) = (h.floor() as usize, h - h.floor());
    let (_, nth, above) = data.select_nth_unstable_by(i, f64::total_cmp);
    let nth = *nth;
    match above.iter().copied().min_by(f64::total_cmp) {
        Some(next) => nth + frac * (next - nth),
        None => nth,
    }
}

/// [`quantile_select`] at `lo` and at `hi` ≥ `lo` in one pass of selection: the second
/// selects only above the first's order statistic (the same order statistics, so the same
/// values to the bit).
pub fn quantile_pair(data: &mut [f64], lo: f64, hi: f64) -> (f64, f64) {
    assert!(!data.is_empty() && lo <= hi);
    let index = |q: f64| {
        let h = (data.len() - 1) as f64 * q.clamp(0.0, 1.0);
        (h.floor() as usize, h - h.floor())
    };
    let ((i, fi), (j, fj)) = (index(lo), index(hi));
    let (_, nth, above) = data.select_nth_unstable_by(i, f64::total_cmp);
    let nth = *nth;
    let next = above.iter().copied().min_by(f64::total_cmp);
    let lo = next.map_or(nth, |next| nth + fi * (next - nth));
    if j == i {
        return (lo, next.map_or(nth, |next| nth + fj * (next - nth)));
    }
    // j > i: the (j − i − 1)-th of the values above the i-th.
    let (_, nth, above) = above.select_nth_unstable_by(j - i - 1, f64::total_cmp);
    let nth = *nth;
    let hi = above.iter().copied().min_by(f64::total_cmp).map_or(nth, |next| nth + fj * (next - nth));
    (lo, hi)
}

/// The ratio statistic Σ value / Σ weight (components `[value, weight]`).
pub fn ratio(sums: &[i128]) -> Option<f64> {
    (sums[1] != 0).then(|| as_f64(sums[0]) / as_f64(sums[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random cases for the path tests: (replicates, width, clusters as (hash, sums, units)).
    /// Magnitudes range from zero to past `i64::MAX / 7` (the scalar fallback) and batches long
    /// enough to flush the `i64` lanes more than once.
    type Clusters = Vec<(u64, Vec<i128>, u64)>;

    fn path_cases() -> Vec<(u32, usize, Clusters)> {
        let mut state = 0x5eed_u64;
        let mut next = move || {
            state = state.wrapping_add(GAMMA);
            mix64(state)
        };
        let mut cases = Vec::new();
        for case in 0..60 {
            let replicates = [1u32, 3, 4, 7, 64, 255, 256, 257, 1000, 1001][case % 10];
            let dims = 1 + (case / 10) % 3;
            let n = (next() % 40) as usize;
            let clusters = (0..n)
                .map(|_| {
                    let sums = (0..dims)
                        .map(|_| {
                            let bits = [0u32, 1, 20, 40, 59, 61, 62, 63, 90][(next() % 9) as usize];
                            let mag = if bits == 0 { 0 } else { (next() as i128) & ((1i128 << bits) - 1) };
                            if next() % 2 == 0 { mag } else { -mag }
                        })
                        .collect();
                    (next(), sums, next() % 5)
                })
                .collect();
            cases.push((replicates, dims, clusters));
        }
        cases
    }

    fn sums_on(path: Path, replicates: u32, dims: usize, clusters: &[(u64, Vec<i128>, u64)], threads: usize) -> ReplicateSums {
        let spec = BootstrapSpec { replicates, seed: 7, level: 0.95 };
        let mut st = ReplicateSums::new(&spec, dims);
        let refs: Vec<(u64, &[i128], u64)> = clusters.iter().map(|(c, s, u)| (*c, s.as_slice(), *u)).collect();
        st.add_clusters_on(path, &refs, threads);
        st
    }

    /// A digest of every case's replicate sums on `path` (FNV over the bytes).
    fn digest_on(path: Path) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (replicates, dims, clusters) in path_cases() {
            for threads in [1, 3] {
                for r in sums_on(path, replicates, dims, &clusters, threads).reps() {
                    for byte in r.to_le_bytes() {
                        h = (h ^ byte as u64).wrapping_mul(0x0000_0100_0000_01b3);
                    }
                }
            }
        }
        h
    }

    /// Scalar and every vector path this CPU supports give identical replicate sums for random
    /// clusters, magnitudes, widths, replicate counts and thread counts — called directly, and
    /// forced by `OCTANT_BOOTSTRAP_PATH` in a child process (the way an operator forces one).
    #[test]
    fn every_path_gives_the_scalar_replicate_sums() {
        let paths = Path::supported_paths();
        println!("bootstrap paths this CPU runs: {:?}", paths.iter().map(|p| p.name()).collect::<Vec<_>>());
        assert_eq!(paths[0], Path::Scalar);
        for (replicates, dims, clusters) in path_cases() {
            for threads in [1, 2, 3] {
                let reference = sums_on(Path::Scalar, replicates, dims, &clusters, threads);
                for p in &paths[1..] {
                    let got = sums_on(*p, replicates, dims, &clusters, threads);
                    assert!(got == reference, "{} differs from scalar: B={replicates}, width {dims}, {threads} threads", p.name());
                }
                // One cluster at a time (the windows' path) on the active path: the same.
                let mut one = ReplicateSums::new(&BootstrapSpec { replicates, seed: 7, level: 0.95 }, dims);
                for (c, s, u) in &clusters {
                    one.add_cluster(*c, s, *u);
                }
                assert!(one == reference, "add_cluster on {} differs from scalar", Path::active().name());
            }
        }
        let scalar = digest_on(Path::Scalar);
        let exe = std::env::current_exe().unwrap();
        // Under an emulator (`scripts/neon.sh`: NEON through qemu-aarch64 on x86-64), the child
        // runs under it too: OCTANT_TEST_RUNNER is its command line.
        let runner_line = std::env::var("OCTANT_TEST_RUNNER").unwrap_or_default();
        let runner = runner_line.split_whitespace();
        for p in &paths {
            let mut command = match runner.clone().next() {
                Some(program) => {
                    let mut c = std::process::Command::new(program);
                    c.args(runner.clone().skip(1)).arg(&exe);
                    c
                }
                None => std::process::Command::new(&exe),
            };
            let out = command
                .args(["--exact", "stats::bootstrap::tests::digest_under_the_forced_path", "--ignored", "--nocapture", "--test-threads=1"])
                .env("OCTANT_BOOTSTRAP_PATH", p.name())
                .output()
                .expect("run the test binary again");
            let text = String::from_utf8_lossy(&out.stdout);
            // The line follows the harness's "test … ... " on the same line.
            let line = text
                .lines()
                .find_map(|l| l.find("PATH ").map(|i| l[i..].trim()))
                .unwrap_or_else(|| panic!("no digest from the child: {text}"));
            assert_eq!(line, format!("PATH {} DIGEST {scalar:016x}", p.name()), "forced by OCTANT_BOOTSTRAP_PATH");
            println!("OCTANT_BOOTSTRAP_PATH={}: {line}", p.name());
        }
    }

    /// Run by [`every_path_gives_the_scalar_replicate_sums`] in a child process.
    #[test]
    #[ignore = "run by every_path_gives_the_scalar_replicate_sums with OCTANT_BOOTSTRAP_PATH set"]
    fn digest_under_the_forced_path() {
        println!("PATH {} DIGEST {:016x}", Path::active().name(), digest_on(Path::active()));
    }

    #[test]
    fn clusters_added_on_several_threads_equal_clusters_added_one_by_one() {
        for (dims, replicates) in [(1usize, 1000u32), (2, 1000), (2, 999), (3, 37), (2, 3)] {
            let spec = BootstrapSpec { replicates, seed: 11, level: 0.95 };
            let data: Vec<(u64, Vec<i128>, u64)> = (0..500u64)
                .map(|i| {
                    (cluster_hash(&format!("c{i}")), (0..dims).map(|d| to_fixed(((i * 7 + d as u64) % 5) as f64)).collect(), 1 + i % 3)
                })
                .collect();
            let mut one = ReplicateSums::new(&spec, dims);
            for (c, s, u) in &data {
                one.add_cluster(*c, s, *u);
            }
            let refs: Vec<(u64, &[i128], u64)> = data.iter().map(|(c, s, u)| (*c, s.as_slice(), *u)).collect();
            for threads in [1, 2, 3, 8] {
                let mut many = ReplicateSums::new(&spec, dims);
                many.add_clusters(&refs, threads);
                assert!(many == one, "dims {dims}, B {replicates}, {threads} threads");
            }
        }
    }

    #[test]
    fn poisson_table_matches_the_distribution() {
        let mut cdf = 0.0;
        let mut term = (-1.0f64).exp();
        for (k, t) in POISSON16.iter().enumerate() {
            cdf += term;
            term /= (k + 1) as f64;
            assert_eq!(*t, (cdf * 65536.0).round() as u32, "P(X ≤ {k})");
        }
    }

    #[test]
    fn weights_have_mean_and_variance_one() {
        let n = 400_000u32;
        let (mut s, mut s2) = (0f64, 0f64);
        for c in 0..n / 100 {
            for b in 0..100 {
                let w = poisson_weight(7, cluster_hash(&c.to_string()), b) as f64;
                s += w;
                s2 += w * w;
            }
        }
        let mean = s / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!((mean - 1.0).abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "variance {var}");
    }

    #[test]
    fn add_cluster_uses_poisson_weight() {
        let spec = BootstrapSpec { replicates: 37, seed: 99, level: 0.95 };
        let mut st = ReplicateSums::new(&spec, 2);
        let c = cluster_hash("run-1");
        st.add_cluster(c, &[to_fixed(1.0), to_fixed(1.0)], 1);
        for b in 0..37 {
            let w = poisson_weight(99, c, b) as i128;
            assert_eq!(st.replicate(b as usize), &[w * SCALE, w * SCALE]);
        }
    }

    #[test]
    fn wide_sparse_states_use_poisson_weight() {
        // A fairness-like unit: 32 components, two non-zero (one of them negative, as when a
        // pane leaves the window), over a replicate count that is not a multiple of four.
        let spec = BootstrapSpec { replicates: 1001, seed: 5, level: 0.95 };
        let mut st = ReplicateSums::new(&spec, 32);
        let c = cluster_hash("run-7");
        let mut sums = vec![0i128; 32];
        sums[6] = to_fixed(1.0);
        sums[7] = -to_fixed(0.25);
        st.add_cluster(c, &sums, 1);
        for b in 0..1001 {
            let w = poisson_weight(5, c, b) as i128;
            let expected: Vec<i128> = sums.iter().map(|s| w * s).collect();
            assert_eq!(st.replicate(b as usize), &expected[..]);
        }
        // All zeros changes nothing but the unit count.
        let before = st.clone();
        st.add_cluster(cluster_hash("run-8"), &[0; 32], 1);
        assert_eq!(
            (0..1001).map(|b| st.replicate(b).to_vec()).collect::<Vec<_>>(),
            (0..1001).map(|b| before.replicate(b).to_vec()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn quantile_type7() {
        let d = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&d, 0.0), 1.0);
        assert_eq!(quantile_sorted(&d, 1.0), 4.0);
        assert!((quantile_sorted(&d, 0.5) - 2.5).abs() < 1e-12);
        assert!((quantile_sorted(&d, 0.025) - 1.075).abs() < 1e-12);
    }

    /// The conversion through `i64` is the conversion of the `i128`, to the bit, at and around
    /// the edges of `i64` and of f64's exact integers.
    #[test]
    fn conversion_through_i64_is_exact() {
        let mut x = 7u64;
        let mut values: Vec<i128> = vec![
            0,
            1,
            -1,
            i64::MAX as i128,
            i64::MIN as i128,
            i64::MAX as i128 + 1,
            i64::MIN as i128 - 1,
            1 << 53,
            (1 << 53) + 1,
            -(1 << 53) - 1,
            i128::MAX,
            i128::MIN,
        ];
        for _ in 0..10_000 {
            x = mix64(x);
            values.push((x as i64 >> (x % 64)) as i128);
            values.push(((x as i128) << 40) - (1 << 100));
        }
        for v in values {
            assert_eq!(as_f64(v).to_bits(), (v as f64).to_bits(), "{v}");
        }
    }

    #[test]
    fn a_rate_estimate_is_the_rate_interval_of_the_percentile_estimate() {
        let mut x: u64 = 5;
        let mut next = || {
            x = mix64(x);
            x
        };
        for case in 0..400 {
            let n = [0usize, 1, 2, 5, 1000][case % 5];
            let scale = [1.0, 0.01, 3.0][case % 3];
            let replicates: Vec<f64> =
                (0..n).map(|_| if next() % 13 == 0 { f64::NAN } else { scale * (next() % 1000) as f64 / 1000.0 }).collect();
            let point = [0.0, 1.0, 0.3, 1.5, -0.2, f64::NAN][case % 6];
            let weight = [4.0, 0.0, 120.5, f64::NAN][case % 4];
            let clusters = [0u64, 1, 7][case % 3];
            let want = rate_interval(Estimate::from_replicates(point, replicates.clone(), 0.95, 9), weight, clusters);
            let got = rate_estimate(point, replicates, 0.95, 9, weight, clusters);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "case {case}");
        }
    }

    #[test]
    fn lane_sums_are_the_replicate_sums() {
        let spec = BootstrapSpec { replicates: 1000, seed: 9, level: 0.95 };
        let mut x: u64 = 3;
        let mut next = || {
            x = mix64(x);
            x
        };
        for path in lanes::Path::supported_paths() {
            let mut lanes_ = LaneSums::new(&spec);
            let mut wide = ReplicateSums::new(&spec, 2);
            let mut held: Vec<(u64, Vec<i128>)> = Vec::new();
            for step in 0..60 {
                // Panes of 0 to 12 clusters enter; the oldest leave; now and then a cluster too
                // large for the lanes, which the lanes refuse.
                let huge = step % 17 == 16;
                let pane: Vec<(u64, Vec<i128>)> = (0..next() % 13)
                    .map(|_| {
                        let den = if huge { i64::MAX as i128 / 5 } else { (next() % 9 * 1_000_000) as i128 };
                        (next(), vec![den * (next() % 2) as i128 - (next() % 3) as i128, den])
                    })
                    .collect();
                let items = || pane.iter().map(|(c, v)| (*c, v.as_slice()));
                if lanes_.update_on(path, items(), false) {
                    assert!(!huge || pane.is_empty());
                    wide.add_many_on(path, items().map(|(c, v)| (c, v, 0)));
                    held.extend(pane.iter().cloned());
                } else {
                    assert!(huge, "refused an ordinary pane");
                }
                if step % 3 == 2 && !held.is_empty() {
                    let leaving: Vec<(u64, Vec<i128>)> = held.drain(..held.len().min(7)).collect();
                    assert!(lanes_.update_on(path, leaving.iter().map(|(c, v)| (*c, v.as_slice())), true));
                    let neg: Vec<Vec<i128>> = leaving.iter().map(|(_, v)| v.iter().map(|s| -s).collect()).collect();
                    wide.add_many_on(path, leaving.iter().zip(&neg).map(|((c, _), n)| (*c, n.as_slice(), 0)));
                }
                assert_eq!(lanes_.to_wide(), wide, "{} step {step}", path.name());
                let (a, b) = (lanes_.ratio_values(), wide.values(ratio));
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{} step {step}", path.name());
            }
        }
    }

    /// The bound at its edge: a cluster whose worst case is exactly `i64::MAX` (7 × i64::MAX / 7,
    /// so lanes of weight 7 reach `i64::MAX`) is held, one unit more is refused, and so is
    /// removing more than is held; the lanes stay the `i128` sums throughout.
    #[test]
    fn lane_sums_hold_exactly_up_to_their_bound() {
        let spec = BootstrapSpec { replicates: 1000, seed: 4, level: 0.95 };
        let edge = (i64::MAX / 7) as i128;
        assert_eq!(7 * edge, i64::MAX as i128);
        for path in lanes::Path::supported_paths() {
            let mut lanes_ = LaneSums::new(&spec);
            let mut wide = ReplicateSums::new(&spec, 2);
            let big: &[i128] = &[edge, -edge];
            assert!(lanes_.update_on(path, [(1, big)].into_iter(), false), "{}", path.name());
            wide.add_many_on(path, [(1, big, 0)]);
            assert_eq!(lanes_.to_wide(), wide);
            let one: &[i128] = &[1, 0];
            assert!(!lanes_.update_on(path, [(2, one)].into_iter(), false), "one unit past the bound");
            assert!(!lanes_.update_on(path, [(1, big), (2, one)].into_iter(), true), "removing more than is held");
            assert_eq!(lanes_.to_wide(), wide, "refusals change nothing");
            assert!(lanes_.update_on(path, [(1, big)].into_iter(), true));
            assert!(lanes_.update_on(path, [(2, one)].into_iter(), false), "room again");
            let mut fresh = ReplicateSums::new(&spec, 2);
            fresh.add_many_on(path, [(2, one, 0)]);
            assert_eq!(lanes_.to_wide(), fresh);
        }
    }

    #[test]
    fn quantile_pairs_equal_two_selections() {
        let mut x: u64 = 11;
        for n in [1usize, 2, 3, 7, 40, 999, 1000] {
            for q in [(0.0, 0.0), (0.025, 0.975), (0.05, 0.95), (0.5, 0.5), (0.3, 0.31), (0.0, 1.0), (1.0, 1.0)] {
                let data: Vec<f64> = (0..n)
                    .map(|_| {
                        x = mix64(x);
                        // Ties and both zeros included.
                        [(x % 17) as f64 / 4.0, -0.0, 0.0][(x >> 60) as usize % 3]
                    })
                    .collect();
                let (mut a, mut b) = (data.clone(), data.clone());
                let want = (quantile_select(&mut a, q.0), quantile_select(&mut a, q.1));
                let got = quantile_pair(&mut b, q.0, q.1);
                assert_eq!((got.0.to_bits(), got.1.to_bits()), (want.0.to_bits(), want.1.to_bits()), "n {n}, q {q:?}");
            }
        }
    }

    /// Selection gives the sorted quantile to the bit: random data with ties, signed zeros
    /// and one to 1,001 values, at the interval's levels and the ends.
    #[test]
    fn quantile_by_selection_equals_quantile_of_sorted() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in (1..40).chain([999, 1000, 1001]) {
            let data: Vec<f64> = (0..n)
                .map(|_| {
                    x = mix64(x);
                    match x % 7 {
                        0 => 0.0,
                        1 => -0.0,
                        2 => 0.25,
                        _ => (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5,
                    }
                })
                .collect();
            let mut sorted = data.clone();
            sorted.sort_by(f64::total_cmp);
            let mut scratch = data.clone();
            for q in [0.0, 0.025, 0.05, 0.5, 0.95, 0.975, 1.0] {
                assert_eq!(quantile_select(&mut scratch, q).to_bits(), quantile_sorted(&sorted, q).to_bits(), "n {n}, q {q}");
            }
        }
    }

    #[test]
    fn cluster_hash_is_stable() {
        // Pinned: changing the hash changes every interval ever published.
        assert_eq!(cluster_hash(""), mix64(0xcbf2_9ce4_8422_2325));
        assert_eq!(cluster_hash("run-1"), cluster_hash("run-1"));
        assert_ne!(cluster_hash("run-1"), cluster_hash("run-2"));
    }
}
