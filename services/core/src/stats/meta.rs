//! Meta-evaluation (seed 000 Table XI, seed 002 §5): how far the instruments themselves can
//! be trusted — agreement between raters, a judge's stability and position bias, whether a
//! metric separates systems — and the comparative family's Bradley–Terry strengths.
//! Checked against krippendorff, statsmodels and choix (`tests/fixtures/make_meta.py`).

use std::collections::BTreeMap;

use crate::stats::proportion::z_for_level;

/// The level of measurement of Krippendorff's α (its distance δ²).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Nominal,
    Ordinal,
    Interval,
}

/// Krippendorff's α over reliability data: `data[rater][unit]`, `None` where a rater did not
/// rate a unit (any number of raters, missing values allowed). Units with fewer than two
/// values are not pairable and are left out. `None` when fewer than two pairable values, or
/// when every value is the same (the expected disagreement is 0: α is undefined).
pub fn krippendorff_alpha(data: &[Vec<Option<f64>>], level: Level) -> Option<f64> {
    let units = data.iter().map(Vec::len).max()?;
    // The distinct values, in order, and the coincidence matrix over their indices.
    // + 0.0 makes −0.0 and 0.0 one value.
    let mut values: Vec<f64> = data.iter().flatten().flatten().map(|v| v + 0.0).filter(|v| v.is_finite()).collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    let k = values.len();
    let index = |v: f64| values.binary_search_by(|x| x.total_cmp(&v)).expect("a known value");
    let mut o = vec![0.0; k * k];
    for u in 0..units {
        let here: Vec<usize> =
            data.iter().filter_map(|r| r.get(u).copied().flatten()).map(|v| v + 0.0).filter(|v| v.is_finite()).map(index).collect();
        let m = here.len();
        if m < 2 {
            continue;
        }
        for (i, a) in here.iter().enumerate() {
            for (j, b) in here.iter().enumerate() {
                if i != j {
                    o[a * k + b] += 1.0 / (m - 1) as f64;
                }
            }
        }
    }
    let n_c: Vec<f64> = (0..k).map(|c| (0..k).map(|d| o[c * k + d]).sum()).collect();
    let n: f64 = n_c.iter().sum();
    if n < 2.0 {
        return None;
    }
    let delta2 = |c: usize, d: usize| -> f64 {
        match level {
            Level::Nominal => (c != d) as u8 as f64,
            Level::Interval => (values[c] - values[d]).powi(2),
            Level::Ordinal => {
                let (lo, hi) = (c.min(d), c.max(d));
                let between: f64 = n_c[lo..=hi].iter().sum();
                (between - (n_c[lo] + n_c[hi]) / 2.0).powi(2)
            }
        }
    };
    let (mut d_o, mut d_e) = (0.0, 0.0);
    for c in 0..k {
        for d in 0..k {
            let w = delta2(c, d);
            d_o += o[c * k + d] * w;
            d_e += n_c[c] * n_c[d] * w;
        }
    }
    let d_o = d_o / n;
    let d_e = d_e / (n * (n - 1.0));
    (d_e > 0.0).then(|| 1.0 - d_o / d_e)
}

/// Cohen's κ of two raters' labels with its asymptotic standard error (Fleiss, Cohen &
/// Everitt 1969, as statsmodels' `cohens_kappa`) and Wald interval at `level`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kappa {
    pub kappa: f64,
    pub se: f64,
    pub lo: f64,
    pub hi: f64,
    pub n: u64,
}

/// κ with its interval. `None` when empty, lengths differ, or the expected agreement is 1.
pub fn kappa_with_interval<T: Ord + Clone>(a: &[T], b: &[T], level: f64) -> Option<Kappa> {
    if a.is_empty() || a.len() != b.len() {
        return None;
    }
    let cats: Vec<T> = {
        let mut c: Vec<T> = a.iter().chain(b).cloned().collect();
        c.sort();
        c.dedup();
        c
    };
    let k = cats.len();
    let idx = |x: &T| cats.binary_search(x).expect("a known label");
    let n = a.len() as f64;
    let mut p = vec![0.0; k * k];
    for (x, y) in a.iter().zip(b) {
        p[idx(x) * k + idx(y)] += 1.0 / n;
    }
    let row: Vec<f64> = (0..k).map(|i| (0..k).map(|j| p[i * k + j]).sum()).collect();
    let col: Vec<f64> = (0..k).map(|j| (0..k).map(|i| p[i * k + j]).sum()).collect();
    let p_o: f64 = (0..k).map(|i| p[i * k + i]).sum();
    let p_e: f64 = (0..k).map(|i| row[i] * col[i]).sum();
    if (1.0 - p_e).abs() < 1e-15 {
        return None;
    }
    let kappa = (p_o - p_e) / (1.0 - p_e);
    let term_a: f64 = (0..k).map(|i| p[i * k + i] * (1.0 - (row[i] + col[i]) * (1.0 - kappa)).powi(2)).sum();
    let mut term_b = 0.0;
    for i in 0..k {
        for j in 0..k {
            if i != j {
                term_b += p[i * k + j] * (col[i] + row[j]).powi(2);
            }
        }
    }
    let term_b = (1.0 - kappa).powi(2) * term_b;
    let term_c = (kappa - p_e * (1.0 - kappa)).powi(2);
    let var = ((term_a + term_b - term_c) / (1.0 - p_e).powi(2) / n).max(0.0);
    let se = var.sqrt();
    let z = z_for_level(level);
    // κ ≤ 1; rounding can put perfect agreement a few ulps above it.
    let kappa = kappa.clamp(-1.0, 1.0);
    Some(Kappa { kappa, se, lo: (kappa - z * se).clamp(-1.0, 1.0), hi: (kappa + z * se).clamp(-1.0, 1.0), n: a.len() as u64 })
}

/// Test–retest instability of an evaluator: the mean, over items scored at least twice, of the
/// *variance* of the item's repeated scores — the sample variance (n − 1), an unbiased estimate of
/// the score's variance across reruns (0: perfectly stable). Seed 000 Table XI: "Rerun variance",
/// banded C(0.10) — on the variance, not the standard deviation (an SD of 0.1 is a variance of
/// 0.01: band 4, where the SD would give band 0). `None` without an item scored twice.
pub fn retest_instability(items: &[Vec<f64>]) -> Option<f64> {
    let vars: Vec<f64> = items
        .iter()
        .filter(|s| s.len() >= 2)
        .map(|s| {
            let m = s.iter().sum::<f64>() / s.len() as f64;
            s.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (s.len() - 1) as f64
        })
        .collect();
    (!vars.is_empty()).then(|| vars.iter().sum::<f64>() / vars.len() as f64)
}

/// One pairwise verdict, in the order the judge saw the two outputs: 1 the first won, 0 the
/// second, 0.5 a tie.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub first: usize,
    pub second: usize,
    pub first_score: f64,
}

/// Position bias of a pairwise judge from swapped presentations: over pairs of verdicts on the
/// same item shown in both orders, the share whose winner changes when the order does (each
/// verdict read from the point of view of one fixed system; ties count half). 0 for a judge
/// that ignores position; Table XI bands it C(0.15). `swapped`: (verdict in one order, verdict
/// in the other). `None` when empty.
pub fn position_inconsistency(swapped: &[(Verdict, Verdict)]) -> Option<f64> {
    if swapped.is_empty() {
        return None;
    }
    let flips: f64 = swapped
        .iter()
        .map(|(a, b)| {
            // The first verdict's first system's score in both orders.
            let s1 = a.first_score;
            let s2 = if b.first == a.first { b.first_score } else { 1.0 - b.first_score };
            (s1 - s2).abs()
        })
        .sum();
    Some(flips / swapped.len() as f64)
}

/// Bradley–Terry strengths from pairwise verdicts (both presentation orders pooled: each order
/// one verdict, a tie half a win each way), by Hunter's (2004) MM algorithm, as log-strengths
/// centred at mean 0 (choix's convention). `n` systems, indices in the verdicts. A system that
/// never won or never lost has no finite MLE: `alpha` > 0 adds that many virtual wins and
/// losses against every other system (a prior; 0 for the plain MLE). `None` if the MM does not
/// converge or a strength is not finite.
pub fn bradley_terry(n: usize, verdicts: &[Verdict], alpha: f64) -> Option<Vec<f64>> {
    bradley_terry_weighted(n, verdicts, None, alpha)
}

/// [`bradley_terry`] with a weight per verdict (a bootstrap replicate's; `None`: all 1).
pub fn bradley_terry_weighted(n: usize, verdicts: &[Verdict], weights: Option<&[f64]>, alpha: f64) -> Option<Vec<f64>> {
    let mut wins = vec![0.0; n * n]; // wins[i * n + j]: i beat j
    for (k, v) in verdicts.iter().enumerate() {
        if v.first >= n || v.second >= n || v.first == v.second {
            continue;
        }
        let w = weights.map_or(1.0, |w| w[k]);
        wins[v.first * n + v.second] += w * v.first_score;
        wins[v.second * n + v.first] += w * (1.0 - v.first_score);
    }
    if alpha > 0.0 {
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    wins[i * n + j] += alpha;
                }
            }
        }
    }
    let mut p = vec![1.0; n];
    for _ in 0..100_000 {
        let mut next = vec![0.0; n];
        for i in 0..n {
            let w_i: f64 = (0..n).map(|j| wins[i * n + j]).sum();
            let denom: f64 = (0..n).filter(|j| *j != i).map(|j| (wins[i * n + j] + wins[j * n + i]) / (p[i] + p[j])).sum();
            next[i] = if denom > 0.0 { w_i / denom } else { p[i] };
        }
        // Normalise to geometric mean 1.
        let g = next.iter().map(|x| x.ln()).sum::<f64>() / n as f64;
        next.iter_mut().for_each(|x| *x = (x.ln() - g).exp());
        let change = next.iter().zip(&p).map(|(a, b)| (a.ln() - b.ln()).abs()).fold(0.0, f64::max);
        p = next;
        if change < 1e-12 {
            let logs: Vec<f64> = p.iter().map(|x| x.ln()).collect();
            return logs.iter().all(|x| x.is_finite()).then_some(logs);
        }
    }
    None
}

/// Log-strengths on the Elo scale (LMSYS's convention: 400 / ln 10 per unit of log-strength,
/// anchored so the mean is `anchor`): a 400-point gap is 10:1 odds.
pub fn elo_scale(log_strengths: &[f64], anchor: f64) -> Vec<f64> {
    log_strengths.iter().map(|s| anchor + 400.0 / std::f64::consts::LN_10 * s).collect()
}

/// Win rate of each system over its verdicts (ties half), both orders pooled.
pub fn win_rates(n: usize, verdicts: &[Verdict]) -> Vec<Option<f64>> {
    let mut won = vec![0.0; n];
    let mut played = vec![0.0; n];
    for v in verdicts.iter().filter(|v| v.first < n && v.second < n && v.first != v.second) {
        won[v.first] += v.first_score;
        won[v.second] += 1.0 - v.first_score;
        played[v.first] += 1.0;
        played[v.second] += 1.0;
    }
    won.iter().zip(&played).map(|(w, p)| (*p > 0.0).then(|| w / p)).collect()
}

/// Discriminative power of a metric over a pool of systems: the share of system pairs whose
/// estimates differ significantly (two-sided z-test at `alpha` on independent estimates,
/// Holm-adjusted across the pairs). `systems`: (estimate, standard error). `None` with fewer
/// than two systems.
pub fn discriminative_power(systems: &[(f64, f64)], alpha: f64) -> Option<f64> {
    if systems.len() < 2 {
        return None;
    }
    let normal = statrs::distribution::Normal::standard();
    let mut ps = Vec::new();
    for i in 0..systems.len() {
        for j in i + 1..systems.len() {
            let (a, b) = (systems[i], systems[j]);
            let se = (a.1 * a.1 + b.1 * b.1).sqrt();
            let p = if se > 0.0 {
                use statrs::distribution::ContinuousCDF;
                2.0 * normal.cdf(-((a.0 - b.0) / se).abs())
            } else if a.0 == b.0 {
                1.0
            } else {
                0.0
            };
            ps.push(p);
        }
    }
    let adjusted = crate::stats::paired::holm(&ps);
    Some(adjusted.iter().filter(|p| **p < alpha).count() as f64 / adjusted.len() as f64)
}

/// The quartile band of a value within a reference pool (family Q): 4 top quartile … 1 bottom,
/// 0 below the declared floor. Quartile edges are the pool's 25th/50th/75th percentiles
/// (linear interpolation). `None` for an empty pool.
pub fn pool_band(value: f64, pool: &[f64], floor: Option<f64>) -> Option<u8> {
    if pool.is_empty() || !value.is_finite() {
        return None;
    }
    if floor.is_some_and(|f| value < f) {
        return Some(0);
    }
    let mut s: Vec<f64> = pool.iter().copied().filter(|v| v.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    let q = |p: f64| crate::stats::bootstrap::quantile_sorted(&s, p);
    Some(if value >= q(0.75) {
        4
    } else if value >= q(0.5) {
        3
    } else if value >= q(0.25) {
        2
    } else {
        1
    })
}

/// Label counts of a rater pair, for reports: (label a, label b) → count.
pub fn confusion<T: Ord + Clone>(a: &[T], b: &[T]) -> BTreeMap<(T, T), u64> {
    let mut m = BTreeMap::new();
    for (x, y) in a.iter().zip(b) {
        *m.entry((x.clone(), y.clone())).or_default() += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_cases_by_hand() {
        // Perfect agreement: α = 1; one value everywhere: undefined.
        let same = vec![vec![Some(1.0), Some(2.0), Some(3.0)], vec![Some(1.0), Some(2.0), Some(3.0)]];
        assert_eq!(krippendorff_alpha(&same, Level::Nominal), Some(1.0));
        assert_eq!(krippendorff_alpha(&[vec![Some(1.0); 3], vec![Some(1.0); 3]], Level::Interval), None);
        assert_eq!(krippendorff_alpha(&[vec![Some(-0.0), Some(1.0)], vec![Some(0.0), Some(1.0)]], Level::Interval), Some(1.0));
        let k = kappa_with_interval(&[1, 1, 0, 0], &[1, 1, 0, 0], 0.95).unwrap();
        assert_eq!((k.kappa, k.se), (1.0, 0.0));
        assert_eq!(retest_instability(&[vec![1.0, 0.0], vec![0.5]]), Some(0.5));
        // The seed's rerun variance, against Python's `statistics.variance` (sample variance):
        // python3 -c "import statistics as s; v=[s.variance(x) for x in [[0.4,0.6],[0.2,0.5,0.9],[1.0,1.0]]]; print(repr(sum(v)/len(v)))"
        // → 0.04777777777777777
        let r = retest_instability(&[vec![0.4, 0.6], vec![0.2, 0.5, 0.9], vec![1.0, 1.0], vec![0.3]]).unwrap();
        assert!((r - 0.04777777777777777).abs() < 1e-12, "{r}");
        // Banded C(0.10) on the variance: scores 0.1 either side of their mean (variance 0.02)
        // are band 4; the standard deviation (0.14) would have been band 0.
        let v = retest_instability(&[vec![0.4, 0.6]]).unwrap();
        let c = crate::family::Family::Continuous { budget: 0.10 };
        assert_eq!(c.band(v, &Default::default()).ok(), Some(4), "{v}");
        assert_eq!(c.band(v.sqrt(), &Default::default()).ok(), Some(0));
        let v = |first, second, s| Verdict { first, second, first_score: s };
        // A judge that always prefers whatever it sees first flips every swapped pair.
        assert_eq!(position_inconsistency(&[(v(0, 1, 1.0), v(1, 0, 1.0))]), Some(1.0));
        assert_eq!(position_inconsistency(&[(v(0, 1, 1.0), v(1, 0, 0.0))]), Some(0.0));
        // Two systems, 3 wins to 1: strength ratio 3, log-strengths ±ln(3)/2.
        let bt = bradley_terry(2, &[v(0, 1, 1.0), v(0, 1, 1.0), v(1, 0, 0.0), v(1, 0, 1.0)], 0.0).unwrap();
        assert!((bt[0] - 3f64.ln() / 2.0).abs() < 1e-9 && (bt[1] + 3f64.ln() / 2.0).abs() < 1e-9, "{bt:?}");
        assert_eq!(win_rates(2, &[v(0, 1, 1.0), v(1, 0, 0.5)]), vec![Some(0.75), Some(0.25)]);
        assert_eq!(pool_band(0.9, &[0.1, 0.2, 0.3, 0.4, 0.5], None), Some(4));
        assert_eq!(pool_band(0.05, &[0.1, 0.2, 0.3, 0.4, 0.5], Some(0.08)), Some(0));
        assert_eq!(pool_band(0.15, &[0.1, 0.2, 0.3, 0.4, 0.5], None), Some(1));
        assert_eq!(discriminative_power(&[(0.5, 0.01), (0.9, 0.01), (0.505, 0.01)], 0.05), Some(2.0 / 3.0));
    }
}
