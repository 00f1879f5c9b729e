//! Vector paths of the bootstrap's weights and accumulation (issue 44), chosen at run time by
//! CPU feature on stable Rust. [`METHOD`](super::bootstrap::METHOD) is unchanged: every replicate
//! sum is identical to the scalar path's ([`super::bootstrap`]'s `accumulate`, the reference),
//! which a property test checks on every path the machine supports.
//!
//! Why the vector paths are exact: a weight is `#{k : u ≥ POISSON16[k]}` for a 16-bit uniform
//! `u` — seven comparisons, which vector units make for 16 to 32 lanes at once and which give
//! the lookup table's value by definition; and the sums accumulate in `i64` lanes (which vector
//! units add) rather than `i128` (which none do), in batches whose worst case cannot overflow:
//! a cluster adds at most `7·max|s|` to any lane, and a batch ends before the total of those
//! bounds passes `i64::MAX`. The batch's lanes are then added into the `i128` sums. Integer
//! addition without overflow is exact in any order, so the sums equal the scalar path's to the
//! bit. A cluster whose components exceed `i64::MAX / 7` takes the scalar path.
//!
//! The paths are one portable kernel (three loops LLVM vectorises: SplitMix64 over 64 groups
//! with 64-bit multiplies, the comparisons, multiply-adds into lanes) compiled three ways with
//! `#[target_feature]`: AVX-512 (F, DQ, BW, VL: 64-bit multiplies in `zmm` lanes), AVX2, and
//! NEON on aarch64 (on this project's x86-64 machines, run under qemu-aarch64 by
//! `scripts/neon.sh`, part of the soak command). `OCTANT_BOOTSTRAP_PATH`
//! (`scalar`, `avx2`, `avx512`, `neon`, `auto`) forces one; a path the CPU lacks is refused
//! with a warning and the best supported one used.

use std::cell::RefCell;
use std::sync::OnceLock;

use super::bootstrap::{GAMMA, POISSON16, mix64};

/// How replicate sums are computed: the scalar reference or a vector path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Path {
    Scalar,
    Avx2,
    Avx512,
    Neon,
}

impl Path {
    pub const ALL: [Path; 4] = [Path::Scalar, Path::Avx2, Path::Avx512, Path::Neon];

    pub fn name(self) -> &'static str {
        match self {
            Path::Scalar => "scalar",
            Path::Avx2 => "avx2",
            Path::Avx512 => "avx512",
            Path::Neon => "neon",
        }
    }

    pub fn parse(s: &str) -> Option<Path> {
        Path::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Whether this CPU runs the path.
    pub fn supported(self) -> bool {
        match self {
            Path::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => {
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512dq")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(target_arch = "aarch64")]
            Path::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// Every path this CPU runs, the scalar reference first.
    pub fn supported_paths() -> Vec<Path> {
        Path::ALL.into_iter().filter(|p| p.supported()).collect()
    }

    /// The fastest supported path.
    pub fn best() -> Path {
        [Path::Avx512, Path::Avx2, Path::Neon].into_iter().find(|p| p.supported()).unwrap_or(Path::Scalar)
    }

    /// The path in use in this process: `OCTANT_BOOTSTRAP_PATH` when it names a supported one,
    /// otherwise [`Path::best`]. Decided once.
    pub fn active() -> Path {
        static ACTIVE: OnceLock<Path> = OnceLock::new();
        *ACTIVE.get_or_init(|| match std::env::var("OCTANT_BOOTSTRAP_PATH") {
            Ok(v) if !v.trim().is_empty() && !v.trim().eq_ignore_ascii_case("auto") => match Path::parse(&v) {
                Some(p) if p.supported() => p,
                Some(p) => {
                    eprintln!("OCTANT_BOOTSTRAP_PATH={v}: this CPU lacks {}; using {}", p.name(), Path::best().name());
                    Path::best()
                }
                None => {
                    eprintln!("OCTANT_BOOTSTRAP_PATH={v}: not one of scalar, avx2, avx512, neon, auto; using {}", Path::best().name());
                    Path::best()
                }
            },
            _ => Path::best(),
        })
    }
}

/// Groups (of four replicates, one SplitMix64 output each) drawn per chunk.
const CHUNK_GROUPS: usize = 64;
const CHUNK: usize = 4 * CHUNK_GROUPS;

/// The weights of replicates `4·first_group ..` (a whole chunk) for the stream `key`: the
/// scalar path's `accumulate` draws group `j` from `mix64(key + (j + 1)·GAMMA)`, and replicate
/// `4j + i` from its 16 bits at `16·i`.
#[inline(always)]
fn weights_chunk(key: u64, first_group: u64, w: &mut [u8; CHUNK]) {
    let mut r = [0u64; CHUNK_GROUPS];
    for (g, r) in r.iter_mut().enumerate() {
        *r = mix64(key.wrapping_add((first_group + g as u64 + 1).wrapping_mul(GAMMA)));
    }
    // The 16-bit uniforms in replicate order: on a little-endian machine, the outputs' bytes.
    #[cfg(target_endian = "little")]
    // SAFETY: same size, every bit pattern is a valid u16.
    let u: [u16; CHUNK] = unsafe { std::mem::transmute::<[u64; CHUNK_GROUPS], [u16; CHUNK]>(r) };
    #[cfg(target_endian = "big")]
    let u: [u16; CHUNK] = std::array::from_fn(|k| (r[k / 4] >> (16 * (k % 4))) as u16);
    for (w, u) in w.iter_mut().zip(u) {
        let mut k = 0u8;
        for t in POISSON16 {
            k += (u >= t as u16) as u8;
        }
        *w = k;
    }
}

/// Adds `w(b)·sums[d]` to `lanes[d·n + b]` for the `n` replicates of the block (dimension-major
/// lanes, so each component's loop is contiguous).
#[inline(always)]
fn accumulate_lanes<const D: usize>(lanes: &mut [i64], n: usize, key: u64, sums: &[i64; D]) {
    let mut w = [0u8; CHUNK];
    let mut b0 = 0;
    while b0 < n {
        weights_chunk(key, (b0 / 4) as u64, &mut w);
        let m = (n - b0).min(CHUNK);
        for (d, s) in sums.iter().enumerate() {
            let dst = &mut lanes[d * n + b0..d * n + b0 + m];
            for (x, wi) in dst.iter_mut().zip(&w[..m]) {
                *x += *wi as i64 * *s;
            }
        }
        b0 += CHUNK;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn accumulate_avx2<const D: usize>(lanes: &mut [i64], n: usize, key: u64, sums: &[i64; D]) {
    accumulate_lanes::<D>(lanes, n, key, sums)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn accumulate_avx512<const D: usize>(lanes: &mut [i64], n: usize, key: u64, sums: &[i64; D]) {
    accumulate_lanes::<D>(lanes, n, key, sums)
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
fn accumulate_neon<const D: usize>(lanes: &mut [i64], n: usize, key: u64, sums: &[i64; D]) {
    accumulate_lanes::<D>(lanes, n, key, sums)
}

/// `path` must be supported (checked once per batch by [`add_batch`]).
pub(super) fn dispatch<const D: usize>(path: Path, lanes: &mut [i64], n: usize, key: u64, sums: &[i64; D]) {
    match path {
        // SAFETY (each arm): the CPU has the features, checked by `add_batch`.
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => unsafe { accumulate_avx512::<D>(lanes, n, key, sums) },
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => unsafe { accumulate_avx2::<D>(lanes, n, key, sums) },
        #[cfg(target_arch = "aarch64")]
        Path::Neon => unsafe { accumulate_neon::<D>(lanes, n, key, sums) },
        _ => accumulate_lanes::<D>(lanes, n, key, sums),
    }
}

thread_local! {
    static LANES: RefCell<Vec<i64>> = const { RefCell::new(Vec::new()) };
}

/// Adds every `(key, sums)` (a cluster's stream key and fixed-point component sums, `D` = 1 or 2)
/// to the replicate-major `reps` of one block of replicates on a vector `path`, exactly: in `i64`
/// lanes per batch whose worst case fits, the batch then added into `reps`; a cluster too large
/// for `i64` lanes goes through `scalar` (the reference) directly.
pub(super) fn add_batch<'a, const D: usize>(
    path: Path,
    reps: &mut [i128],
    items: impl Iterator<Item = (u64, &'a [i128])>,
    scalar: impl Fn(&mut [i128], u64, &[i128; D]),
) {
    assert!(path.supported(), "the {} path on a CPU without it", path.name());
    let n = reps.len() / D;
    // Taken out for the batch and put back zeroed (every flush leaves the lanes so): a panic
    // mid-batch drops them rather than leave sums for the next batch. Zeroed here only when
    // the width or B changed.
    let mut lanes = LANES.take();
    if lanes.len() != n * D {
        lanes.clear();
        lanes.resize(n * D, 0);
    }
    // Sum over the batch of each cluster's largest possible lane increment.
    let mut bound: u128 = 0;
    let mut pending = false;
    for (key, sums) in items {
        let sums: &[i128; D] = sums.try_into().expect("component width");
        let worst = sums.iter().map(|s| s.unsigned_abs()).max().unwrap_or(0).saturating_mul(7);
        if worst == 0 {
            continue;
        }
        if worst > i64::MAX as u128 {
            scalar(reps, key, sums);
            continue;
        }
        if bound + worst > i64::MAX as u128 {
            flush::<D>(reps, &mut lanes, n);
            bound = 0;
        }
        bound += worst;
        pending = true;
        dispatch::<D>(path, &mut lanes, n, key, &sums.map(|s| s as i64));
    }
    if pending {
        flush::<D>(reps, &mut lanes, n);
    }
    LANES.set(lanes);
}

/// `reps[b·D + d] += lanes[d·n + b]`, and the lanes zeroed.
fn flush<const D: usize>(reps: &mut [i128], lanes: &mut [i64], n: usize) {
    for (b, rep) in reps.chunks_exact_mut(D).enumerate() {
        for d in 0..D {
            rep[d] += std::mem::take(&mut lanes[d * n + b]) as i128;
        }
    }
}
