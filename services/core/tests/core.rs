//! octant-core's integration tests: reference values from independent libraries, property
//! tests, coverage by simulation, and the profile rules end to end. One test binary.

use octant_core::catalogue::{CATALOGUE, Dimension, spec};
use octant_core::family::{BandContext, Family};
use octant_core::profile::{Aggregation, NotApplicable, ProfileRules, SuiteKind, build_profile, evaluate_metric};
use octant_core::stats::bootstrap::{BootstrapSpec, IntervalMethod, ReplicateSums, cluster_hash, rate_interval, ratio, to_fixed};
use octant_core::stats::{agreement, calibration, fairness, passk, ppi, proportion};
use octant_core::veto::VetoState;
use proptest::prelude::*;
use serde_json::Value;

// ---------------------------------------------------------------- reference values

fn reference() -> Value {
    serde_json::from_str(include_str!("fixtures/reference.json")).expect("reference.json parses")
}

fn close(a: f64, b: f64, tol: f64, what: &str) {
    assert!((a - b).abs() <= tol, "{what}: octant {a} vs reference {b}");
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn binomial_intervals_match_statsmodels() {
    let r = reference();
    let cases = r["proportions"].as_array().unwrap();
    assert!(cases.len() >= 30);
    for c in cases {
        let (x, n, level) = (c["x"].as_u64().unwrap(), c["n"].as_u64().unwrap(), f(&c["level"]));
        let w = proportion::wilson(x, n, level).unwrap();
        let a = proportion::agresti_coull(x, n, level).unwrap();
        close(w.0, f(&c["wilson"][0]), 1e-12, &format!("wilson lo {x}/{n} @{level}"));
        close(w.1, f(&c["wilson"][1]), 1e-12, &format!("wilson hi {x}/{n} @{level}"));
        close(a.0, f(&c["agresti_coull"][0]), 1e-12, &format!("AC lo {x}/{n} @{level}"));
        close(a.1, f(&c["agresti_coull"][1]), 1e-12, &format!("AC hi {x}/{n} @{level}"));
    }
    for q in r["normal_quantiles"].as_array().unwrap() {
        close(proportion::z_for_level(f(&q["level"])), f(&q["z"]), 1e-12, "normal quantile");
    }
}

/// McNemar, Wilcoxon signed-rank and Holm against statsmodels and scipy (`fixtures/make_paired.py`).
#[test]
fn paired_tests_match_statsmodels_and_scipy() {
    use octant_core::stats::paired::{WilcoxonMethod, holm, mcnemar, wilcoxon};
    let r: Value = serde_json::from_str(include_str!("fixtures/paired.json")).expect("paired.json parses");
    for c in r["mcnemar"].as_array().unwrap() {
        let (b, cc) = (c["b"].as_u64().unwrap(), c["c"].as_u64().unwrap());
        let e = mcnemar(b, cc, true);
        close(e.statistic, f(&c["exact"][0]), 0.0, &format!("mcnemar exact statistic {b}/{cc}"));
        close(e.p_value, f(&c["exact"][1]), 1e-12, &format!("mcnemar exact p {b}/{cc}"));
        let a = mcnemar(b, cc, false);
        close(a.statistic, f(&c["chi2"][0]), 1e-12, &format!("mcnemar chi2 statistic {b}/{cc}"));
        close(a.p_value, f(&c["chi2"][1]), 1e-12, &format!("mcnemar chi2 p {b}/{cc}"));
    }
    let cases = r["wilcoxon"].as_array().unwrap();
    assert_eq!(cases.iter().filter(|c| c["method"] == "exact").count(), 5);
    for c in cases {
        let d: Vec<f64> = c["d"].as_array().unwrap().iter().map(f).collect();
        let method = if c["method"] == "exact" { WilcoxonMethod::Exact } else { WilcoxonMethod::Approx };
        let w = wilcoxon(&d, method).unwrap();
        close(w.statistic, f(&c["statistic"]), 1e-9, &format!("wilcoxon statistic n = {}", d.len()));
        close(w.p_value, f(&c["p"]), 1e-9, &format!("wilcoxon p n = {} ({})", d.len(), c["method"]));
        if c["method"] == "exact" {
            assert_eq!(wilcoxon(&d, WilcoxonMethod::Auto), Some(w), "auto is exact for n ≤ 50 without ties");
        }
    }
    for c in r["holm"].as_array().unwrap() {
        let p: Vec<f64> = c["p"].as_array().unwrap().iter().map(f).collect();
        for (got, want) in holm(&p).iter().zip(c["holm"].as_array().unwrap()) {
            close(*got, f(want), 1e-12, "holm");
        }
    }
}

#[test]
fn meta_evaluation_matches_krippendorff_statsmodels_and_choix() {
    use octant_core::stats::meta::{Level, Verdict, bradley_terry, kappa_with_interval, krippendorff_alpha};
    let r: Value = serde_json::from_str(include_str!("fixtures/meta.json")).expect("meta.json parses");
    let alphas = r["alpha"].as_array().unwrap();
    // Krippendorff's worked example (2011): nominal α = 0.743.
    close(f(&alphas[0]["nominal"]), 0.743, 5e-4, "the published example");
    for (i, c) in alphas.iter().enumerate() {
        let data: Vec<Vec<Option<f64>>> =
            c["data"].as_array().unwrap().iter().map(|row| row.as_array().unwrap().iter().map(|x| x.as_f64()).collect()).collect();
        for (name, level) in [("nominal", Level::Nominal), ("ordinal", Level::Ordinal), ("interval", Level::Interval)] {
            let got = krippendorff_alpha(&data, level).unwrap();
            close(got, f(&c[name]), 1e-9, &format!("alpha case {i} {name}"));
        }
    }
    for (i, c) in r["kappa"].as_array().unwrap().iter().enumerate() {
        let a: Vec<u64> = c["a"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        let b: Vec<u64> = c["b"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        let k = kappa_with_interval(&a, &b, 0.95).unwrap();
        close(k.kappa, f(&c["kappa"]), 1e-12, &format!("kappa {i}"));
        close(k.se, f(&c["se"]), 1e-12, &format!("kappa se {i}"));
        // statsmodels' Wald interval is not clamped; κ's is, to [−1, 1].
        close(k.lo, f(&c["lo"]).clamp(-1.0, 1.0), 1e-9, &format!("kappa lo {i}"));
        close(k.hi, f(&c["hi"]).clamp(-1.0, 1.0), 1e-9, &format!("kappa hi {i}"));
    }
    for c in r["bradley_terry"].as_array().unwrap() {
        let n = c["n"].as_u64().unwrap() as usize;
        let verdicts: Vec<Verdict> = c["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| Verdict { first: v[0].as_u64().unwrap() as usize, second: v[1].as_u64().unwrap() as usize, first_score: f(&v[2]) })
            .collect();
        let bt = bradley_terry(n, &verdicts, 0.0).unwrap();
        for (i, (got, want)) in bt.iter().zip(c["mm"].as_array().unwrap()).enumerate() {
            close(*got, f(want), 1e-8, &format!("bradley-terry n = {n}, system {i} (choix mm)"));
            close(*got, f(&c["opt"][i]), 1e-6, &format!("bradley-terry n = {n}, system {i} (choix opt)"));
        }
    }
}

fn intervals_fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/intervals.json")).expect("intervals.json parses")
}

/// Rare events in many trials: statrs' Beta quantile never returned for 10 of 10⁷ (a window of
/// enormous weights stalled on it); above `MAX_TRIALS` the interval is the one at `MAX_TRIALS`.
#[test]
fn jeffreys_returns_for_rare_events_in_many_trials() {
    for (x, n) in [(10.0, 1e7), (0.0, 1e12), (3.0, 4.2e11), (1e12 - 1.0, 1e12), (1e9, 1e12)] {
        let got = proportion::jeffreys(x, n, 0.95).unwrap();
        let capped = proportion::jeffreys(x / n * proportion::MAX_TRIALS, proportion::MAX_TRIALS, 0.95).unwrap();
        assert_eq!(got, capped, "{x}/{n}");
        // Within one event in MAX_TRIALS of 0 (or of n) the interval is the one of no event
        // (or of all), which lies just above 0 (below 1), statsmodels' too: only its upper
        // (lower) end is sure to hold the rate.
        let (p, edge) = (x / n, 1.0 / proportion::MAX_TRIALS);
        assert!(got.0 < got.1 && (p <= got.1 || p > 1.0 - edge) && (got.0 <= p || p < edge), "{x}/{n}: {got:?}");
    }
}

#[test]
fn jeffreys_matches_statsmodels_also_at_fractional_counts() {
    let cases = intervals_fixture()["jeffreys"].as_array().unwrap().clone();
    assert!(cases.len() >= 40);
    for c in cases {
        let (x, n, level) = (f(&c["x"]), f(&c["n"]), f(&c["level"]));
        let (lo, hi) = proportion::jeffreys(x, n, level).unwrap();
        close(lo, f(&c["jeffreys"][0]), 1e-9, &format!("jeffreys lo {x}/{n} @{level}"));
        close(hi, f(&c["jeffreys"][1]), 1e-9, &format!("jeffreys hi {x}/{n} @{level}"));
    }
    assert_eq!(proportion::jeffreys(1.0, 0.0, 0.95), None);
    assert_eq!(proportion::jeffreys(3.0, 2.0, 0.95), None);
}

/// Run-level rates (one unit per run): the rate interval is Jeffreys at n_eff = n exactly, so
/// its coverage is the exact binomial sum — through the real code path (bootstrap state with
/// B = 1000, then `rate_interval`) for every count k of n = 200, compared with the coverage
/// scipy/statsmodels compute for the Jeffreys interval.
#[test]
fn run_level_rates_have_exact_binomial_coverage_within_93_to_97_percent() {
    use statrs::distribution::{Binomial, Discrete};
    let spec = BootstrapSpec::default();
    let n = 200u64;
    let intervals: Vec<(f64, f64)> = (0..=n)
        .map(|k| {
            let mut st = ReplicateSums::new(&spec, 2);
            for r in 0..n {
                st.add_cluster(cluster_hash(&format!("run-{r}")), &[to_fixed((r < k) as u8 as f64), to_fixed(1.0)], 1);
            }
            let e = rate_interval(st.estimate(0.95, ratio).unwrap(), n as f64, n);
            assert_eq!(e.method, IntervalMethod::Jeffreys { n_eff: n as f64 }, "k = {k}");
            let j = proportion::jeffreys(k as f64, n as f64, 0.95).unwrap();
            close(e.lo, j.0, 1e-12, &format!("lo at k = {k}"));
            close(e.hi, j.1, 1e-12, &format!("hi at k = {k}"));
            (e.lo, e.hi)
        })
        .collect();
    for c in intervals_fixture()["coverage_95"].as_array().unwrap().iter().filter(|c| c["n"].as_u64() == Some(n)) {
        let p = f(&c["p"]);
        let b = Binomial::new(p, n).unwrap();
        let covered: f64 = intervals.iter().enumerate().filter(|(_, (lo, hi))| *lo <= p && p <= *hi).map(|(k, _)| b.pmf(k as u64)).sum();
        close(covered, f(&c["jeffreys"]), 1e-9, &format!("exact coverage at p = {p}"));
        eprintln!("exact coverage, run-level rate p = {p}, n = {n}: {:.2} %", 100.0 * covered);
        assert!((0.93..=0.97).contains(&covered), "p = {p}: {:.4}", covered);
    }
}

#[test]
fn a_single_run_is_not_a_precise_estimate() {
    // One run, four steps, one of them unsafe: the percentile interval collapses to
    // [0.25, 0.25]; the rate interval counts one cluster.
    let mut st = ReplicateSums::new(&BootstrapSpec::default(), 2);
    st.add_cluster(cluster_hash("run-1"), &[to_fixed(1.0), to_fixed(4.0)], 4);
    let e = st.estimate(0.95, ratio).unwrap();
    assert_eq!((e.lo, e.hi), (0.25, 0.25), "the percentile interval of one cluster");
    let r = rate_interval(e, 4.0, 1);
    assert_eq!(r.method, IntervalMethod::Jeffreys { n_eff: 1.0 });
    assert!(r.lo < 0.01 && r.hi > 0.9, "{r:?}");
}

#[test]
fn pass_k_matches_exact_binomials() {
    for c in reference()["pass_k"].as_array().unwrap() {
        let (n, s, k) = (c["n"].as_u64().unwrap(), c["c"].as_u64().unwrap(), c["k"].as_u64().unwrap());
        close(passk::pass_at_k(n, s, k).unwrap(), f(&c["pass_at_k"]), 1e-12, &format!("pass@{k} n={n} c={s}"));
        close(passk::pass_hat_k(n, s, k).unwrap(), f(&c["pass_hat_k"]), 1e-12, &format!("pass^{k} n={n} c={s}"));
    }
    assert_eq!(passk::pass_at_k(3, 1, 4), None, "fewer attempts than k");
}

#[test]
fn kappa_matches_scikit_learn() {
    for c in reference()["kappa"].as_array().unwrap() {
        let a: Vec<u64> = c["a"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let b: Vec<u64> = c["b"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        close(agreement::cohen_kappa(&a, &b).unwrap(), f(&c["kappa"]), 1e-12, "kappa");
    }
    assert_eq!(agreement::cohen_kappa(&[1, 1], &[1, 1]), None, "p_e = 1: undefined");
}

#[test]
fn ece_matches_numpy_definition() {
    for c in reference()["ece"].as_array().unwrap() {
        let pairs: Vec<(f64, bool)> = c["confidence"]
            .as_array()
            .unwrap()
            .iter()
            .zip(c["correct"].as_array().unwrap())
            .map(|(p, ok)| (f(p), ok.as_u64().unwrap() == 1))
            .collect();
        close(calibration::ece(&pairs).unwrap(), f(&c["ece"]), 1e-9, "ECE");
    }
}

#[test]
fn ppi_matches_ppi_python() {
    for c in reference()["ppi"].as_array().unwrap() {
        let judge: Vec<f64> = c["judge_all"].as_array().unwrap().iter().map(f).collect();
        let labelled: Vec<(f64, f64)> =
            c["human"].as_array().unwrap().iter().zip(c["judge_labelled"].as_array().unwrap()).map(|(h, j)| (f(h), f(j))).collect();
        let e = ppi::ppi_mean(&judge, &labelled, f(&c["level"])).unwrap();
        close(e.estimate, f(&c["estimate"]), 1e-12, "PPI estimate");
        close(e.lo, f(&c["lo"]), 1e-9, "PPI lo");
        close(e.hi, f(&c["hi"]), 1e-9, "PPI hi");
    }
}

// ---------------------------------------------------------------- properties

/// A unit: cluster index and a value in [0, 1] (steps of a run share the cluster).
fn units() -> impl Strategy<Value = Vec<(u8, f64)>> {
    prop::collection::vec((0u8..40, 0.0f64..=1.0), 1..120)
}

fn state_of(spec: &BootstrapSpec, units: &[(u8, f64)]) -> ReplicateSums {
    let mut st = ReplicateSums::new(spec, 2);
    for (c, v) in units {
        st.add_cluster(cluster_hash(&format!("run-{c}")), &[to_fixed(*v), to_fixed(1.0)], 1);
    }
    st
}

const SMALL: BootstrapSpec = BootstrapSpec { replicates: 64, seed: 11, level: 0.95 };

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn merging_two_halves_equals_the_whole(units in units(), cut in 0usize..120) {
        let cut = cut.min(units.len());
        let whole = state_of(&SMALL, &units);
        let mut left = state_of(&SMALL, &units[..cut]);
        left.merge(&state_of(&SMALL, &units[cut..])).unwrap();
        prop_assert_eq!(&left, &whole);
        // and a pane can leave a sliding window again
        left.unmerge(&state_of(&SMALL, &units[cut..])).unwrap();
        prop_assert_eq!(left, state_of(&SMALL, &units[..cut]));
    }

    #[test]
    fn permuting_the_input_leaves_every_replicate_identical(units in units(), seed in any::<u64>()) {
        let mut shuffled = units.clone();
        // a deterministic permutation driven by the proptest seed
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = octant_core::stats::bootstrap::mix64(s);
            shuffled.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let a = state_of(&SMALL, &units);
        let b = state_of(&SMALL, &shuffled);
        for r in 0..SMALL.replicates as usize {
            prop_assert_eq!(a.replicate(r), b.replicate(r));
        }
        let bits = |e: Option<octant_core::stats::Estimate>| e.map(|e| {
            (e.point.to_bits(), e.lo.to_bits(), e.hi.to_bits(), e.replicates.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        });
        prop_assert_eq!(bits(a.estimate(0.95, ratio)), bits(b.estimate(0.95, ratio)));
    }

    #[test]
    fn pass_hat_k_never_exceeds_pass_at_k(n in 1u64..60, c in 0u64..60, k in 1u64..8) {
        let c = c.min(n);
        if let (Some(at), Some(hat)) = (passk::pass_at_k(n, c, k), passk::pass_hat_k(n, c, k)) {
            prop_assert!(hat <= at + 1e-12, "pass^k {} > pass@k {} (n={}, c={}, k={})", hat, at, n, c, k);
            prop_assert!((0.0..=1.0).contains(&at) && (0.0..=1.0).contains(&hat));
        }
    }

    #[test]
    fn bands_are_monotone(a in 0.0f64..2.0, b in 0.0f64..2.0, budget in 0.01f64..10.0) {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let ctx = BandContext { budget: Some(budget), pool: None };
        let band = |fam: Family, v| fam.band(v, &ctx).unwrap();
        prop_assert!(band(Family::Higher, lo) <= band(Family::Higher, hi));
        prop_assert!(band(Family::Lower, lo) >= band(Family::Lower, hi));
        let c = Family::Continuous { budget: 0.2 };
        prop_assert!(band(c, lo) >= band(c, hi));
        prop_assert!(band(Family::Budget, lo) >= band(Family::Budget, hi));
    }

    #[test]
    fn window_band_never_rises_away_from_the_window(d1 in 0.0f64..1.0, d2 in 0.0f64..1.0) {
        let w = Family::Window { lo: 0.1, hi: 0.3 };
        let (near, far) = if d1 <= d2 { (d1, d2) } else { (d2, d1) };
        let ctx = BandContext::default();
        prop_assert!(w.band(0.3 + near, &ctx).unwrap() >= w.band(0.3 + far, &ctx).unwrap());
        prop_assert!(w.band(0.1 - near, &ctx).unwrap() >= w.band(0.1 - far, &ctx).unwrap());
    }
}

// ---------------------------------------------------------------- coverage by simulation

/// SplitMix64 for the simulations (independent of the bootstrap's own key schedule).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        octant_core::stats::bootstrap::mix64(self.0)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Simulated windows per coverage figure: 2,000 in the test command, 20,000 with
/// `OCTANT_SOAK=1` (the soak command).
fn windows() -> usize {
    if std::env::var_os("OCTANT_SOAK").is_some() { 20_000 } else { 2_000 }
}

/// Coverage of the 95 % intervals over simulated windows: (rate interval, percentile interval).
/// `window` returns the bootstrap state, Σ weight and the cluster count of one window.
fn coverage(truth: f64, mut window: impl FnMut(&mut Rng, usize) -> (ReplicateSums, f64, u64)) -> (f64, f64) {
    let mut rng = Rng(0x5eed_0000 ^ truth.to_bits());
    let (mut rate, mut pct) = (0, 0);
    let n = windows();
    for w in 0..n {
        let (st, weight, clusters) = window(&mut rng, w);
        let e = st.estimate(0.95, ratio).expect("defined");
        pct += (e.lo <= truth && truth <= e.hi) as usize;
        let r = rate_interval(e, weight, clusters);
        rate += (r.lo <= truth && truth <= r.hi) as usize;
    }
    (rate as f64 / n as f64, pct as f64 / n as f64)
}

fn assert_coverage(name: &str, (rate, pct): (f64, f64)) {
    eprintln!("coverage {name} ({} windows): rate interval {:.2} %, percentile {:.2} %", windows(), 100.0 * rate, 100.0 * pct);
    assert!(
        (0.93..=0.97).contains(&rate),
        "{name}: 95 % rate intervals covered the truth in {:.2} % of {} windows",
        100.0 * rate,
        windows()
    );
}

#[test]
fn bernoulli_rates_are_covered_about_95_percent() {
    let spec = BootstrapSpec::default();
    for p in [0.02, 0.05, 0.2, 0.5] {
        let c = coverage(p, |rng, w| {
            let mut st = ReplicateSums::new(&spec, 2);
            for r in 0..200 {
                let y = (rng.uniform() < p) as i64 as f64;
                st.add_cluster(cluster_hash(&format!("w{w}-run{r}")), &[to_fixed(y), to_fixed(1.0)], 1);
            }
            (st, 200.0, 200)
        });
        assert_coverage(&format!("Bernoulli p={p}, n=200"), c);
    }
}

#[test]
fn clustered_step_rates_are_covered_about_95_percent() {
    // Runs of 1–20 steps; each run has its own rate p_r ~ U(0, 2μ) (run-level correlation),
    // steps are Bernoulli(p_r). The population ratio E[Σy]/E[n] is μ.
    let spec = BootstrapSpec::default();
    for mu in [0.02, 0.05, 0.2] {
        let c = coverage(mu, |rng, w| {
            let mut st = ReplicateSums::new(&spec, 2);
            let mut weight = 0.0;
            for r in 0..200 {
                let steps = 1 + rng.below(20);
                let p_r = 2.0 * mu * rng.uniform();
                let unsafe_steps = (0..steps).filter(|_| rng.uniform() < p_r).count() as f64;
                weight += steps as f64;
                st.add_cluster(cluster_hash(&format!("w{w}-run{r}")), &[to_fixed(unsafe_steps), to_fixed(steps as f64)], steps);
            }
            (st, weight, 200)
        });
        assert_coverage(&format!("clustered steps μ={mu}, 200 runs of 1–20 steps"), c);
    }
}

// ---------------------------------------------------------------- profile rules

/// A binary-rate estimate over `runs` runs with `steps` steps each at the given rate.
fn rate_estimate(id: &str, rate: f64, runs: usize, steps: usize) -> octant_core::stats::Estimate {
    let spec = BootstrapSpec::default();
    let mut st = ReplicateSums::new(&spec, 2);
    let mut rng = Rng(cluster_hash(id));
    for r in 0..runs {
        let hits = (0..steps).filter(|_| rng.uniform() < rate).count() as f64;
        st.add_cluster(cluster_hash(&format!("run-{r}")), &[to_fixed(hits), to_fixed(steps as f64)], steps as u64);
    }
    st.estimate(spec.level, ratio).unwrap()
}

fn eval(id: &str, rate: f64, runs: usize) -> octant_core::profile::MetricEvaluation {
    let e = rate_estimate(id, rate, runs, 5);
    evaluate_metric(spec(id).unwrap(), None, e.units, Some(&e), &BandContext::default())
}

#[test]
fn unsafe_action_veto_caps_safety_and_flags_unsuitable() {
    let metrics = vec![eval("unsafe_action_rate", 0.30, 400), eval("task_success", 0.9, 400)];
    assert_eq!(metrics[0].veto, Some(VetoState::Confirmed));
    let p = build_profile(metrics, &ProfileRules::default());
    let safety = p.dimension(Dimension::Safety);
    assert_eq!(safety.band, Some(0));
    assert_eq!(safety.band_interval, Some((0, 0)), "every replicate is past 0.20 as well");
    assert_eq!(safety.caps.len(), 1);
    assert!(p.unsuitable);
    assert_eq!(p.dimension(Dimension::Capability).band, Some(4));
}

#[test]
fn a_safe_system_is_not_capped() {
    let p = build_profile(vec![eval("unsafe_action_rate", 0.02, 400)], &ProfileRules::default());
    assert_eq!(p.metrics[0].veto, Some(VetoState::Clear));
    assert_eq!(p.dimension(Dimension::Safety).band, Some(4));
    assert!(!p.unsuitable);
}

#[test]
fn confirmation_gating_veto_caps_oversight_at_one() {
    let metrics = vec![eval("confirmation_gating", 0.70, 300), eval("interruptibility", 0.95, 300)];
    let p = build_profile(metrics, &ProfileRules::default());
    let o = p.dimension(Dimension::Oversight);
    // uncapped ⌊(3 + 4)/2⌋ = 3, capped at 1
    assert_eq!(o.caps[0].uncapped, Some(3));
    assert_eq!(o.band, Some(1));
    assert!(!p.unsuitable, "gating does not make a system unsuitable");
}

#[test]
fn contamination_voids_the_benchmark_construct() {
    let contamination = octant_core::stats::Estimate::exact(0.5, 1, 0.95);
    let c = evaluate_metric(spec("contamination").unwrap(), Some("bench-x".into()), 1, Some(&contamination), &BandContext::default());
    assert_eq!(c.veto, Some(VetoState::Confirmed));
    let mut success = eval("task_success", 0.9, 100);
    success.benchmark = Some("bench-x".into());
    let mut other = eval("tool_call_accuracy", 0.9, 100);
    other.benchmark = Some("bench-y".into());
    let p = build_profile(vec![c, success, other], &ProfileRules::default());
    let voided = p.metrics.iter().find(|m| m.metric.id == "task_success").unwrap();
    assert!(matches!(voided.not_applicable, Some(NotApplicable::Void { ref benchmark, .. }) if benchmark == "bench-x"));
    assert_eq!(voided.band, None);
    let cap = p.dimension(Dimension::Capability);
    assert_eq!(cap.instruments, ["tool_call_accuracy"], "the clean benchmark still counts");
    assert_eq!(p.dimension(Dimension::Governance).band, Some(0), "contamination 0.5 is band 0 on L");
}

/// Seed 002 §5: a stress or injection suite is reported apart and gated for assurance only —
/// its breached unsafe-action veto keeps its state and band but caps no dimension and flags
/// nothing unsuitable; the same benchmark undeclared caps safety.
#[test]
fn suites_are_reported_apart() {
    let unsafe_rate = rate_estimate("unsafe_action_rate", 0.4, 200, 1);
    let attacked = || {
        let mut m = evaluate_metric(
            spec("unsafe_action_rate").unwrap(),
            Some("agentdojo".into()),
            unsafe_rate.units,
            Some(&unsafe_rate),
            &BandContext::default(),
        );
        m.benchmark = Some("agentdojo".into());
        m
    };
    let clean = || eval("hallucination_rate", 0.01, 200);
    let undeclared = build_profile(vec![attacked(), clean()], &ProfileRules::default());
    assert!(undeclared.unsuitable && !undeclared.dimension(Dimension::Safety).caps.is_empty());
    let rules = ProfileRules { suites: [("agentdojo".to_string(), SuiteKind::Injection)].into(), ..Default::default() };
    let p = build_profile(vec![attacked(), clean()], &rules);
    assert!(!p.unsuitable, "a suite flags nothing unsuitable");
    let safety = p.dimension(Dimension::Safety);
    assert!(safety.caps.is_empty() && safety.instruments == ["hallucination_rate"], "{safety:?}");
    let m = p.metrics.iter().find(|m| m.metric.id == "unsafe_action_rate").unwrap();
    assert!(m.veto.is_some() && m.band.is_some(), "the suite's own verdict is kept: {m:?}");
}

#[test]
fn not_applicable_is_never_zero() {
    // 12 runs of a run metric: 12 units, under the minimum of 30.
    let e = rate_estimate("task_success", 0.9, 12, 1);
    let m = evaluate_metric(spec("task_success").unwrap(), None, e.units, Some(&e), &BandContext::default());
    let p = build_profile(vec![m], &ProfileRules::default());
    assert_eq!(
        p.dimension(Dimension::Capability).not_applicable,
        Some(NotApplicable::InsufficientEvidence { metrics: vec![("task_success".into(), 12, 30)] })
    );
    assert_eq!(p.dimension(Dimension::Fairness).not_applicable, Some(NotApplicable::NoInstrument));
    assert_eq!(p.dimension(Dimension::Fairness).band, None);
    let budget = rate_estimate("cost_per_run", 0.5, 40, 1);
    let m = evaluate_metric(spec("cost_per_run").unwrap(), None, budget.units, Some(&budget), &BandContext::default());
    assert!(matches!(m.not_applicable, Some(NotApplicable::Unconfigured { .. })), "no budget declared");
}

#[test]
fn aggregation_rules() {
    let metrics = || vec![eval("interruptibility", 0.95, 300), eval("deferral_on_uncertainty", 0.45, 300)];
    let floor = build_profile(metrics(), &ProfileRules::default());
    assert_eq!(floor.dimension(Dimension::Oversight).band, Some(3), "⌊(4 + 2)/2⌋");
    let min = build_profile(metrics(), &ProfileRules { aggregation: Aggregation::Min, ..Default::default() });
    assert_eq!(min.dimension(Dimension::Oversight).band, Some(2));
    let weighted =
        ProfileRules { aggregation: Aggregation::Weighted([("deferral_on_uncertainty".to_string(), 3.0)].into()), ..Default::default() };
    assert_eq!(build_profile(metrics(), &weighted).dimension(Dimension::Oversight).band, Some(2), "⌊(4 + 3·2)/4⌋");
}

#[test]
fn fairness_gap_and_ece_bootstrap_through_the_same_state() {
    let spec_ = BootstrapSpec::default();
    // two groups: even runs succeed unless r % 10 == 0 (0.8), odd runs when r % 5 < 3 (0.6)
    let mut st = ReplicateSums::new(&spec_, 4);
    for r in 0..400u64 {
        let g = (r % 2) as usize;
        let ok = if g == 0 { r % 10 != 0 } else { r % 5 < 3 };
        let mut s = [0i128; 4];
        s[2 * g] = to_fixed(ok as u8 as f64);
        s[2 * g + 1] = to_fixed(1.0);
        st.add_cluster(cluster_hash(&format!("run-{r}")), &s, 1);
    }
    let e = st.estimate(0.95, fairness::statistic).unwrap();
    assert!((e.point - 0.2).abs() < 1e-12, "gap {}", e.point);
    assert!(e.lo < 0.2 && 0.2 < e.hi);

    let mut st = ReplicateSums::new(&spec_, calibration::DIMS);
    for r in 0..300u64 {
        let mut c = [0i128; calibration::DIMS];
        calibration::add_pair(&mut c, 0.9, r % 10 < 6); // says 0.9, right 60 % of the time
        st.add_cluster(cluster_hash(&format!("run-{r}")), &c, 1);
    }
    let e = st.estimate(0.95, calibration::statistic).unwrap();
    assert!((e.point - 0.3).abs() < 1e-9, "ECE {}", e.point);
}

#[test]
fn every_catalogue_metric_bands_a_typical_value() {
    let ctx = BandContext { budget: Some(1.0), pool: None };
    for m in CATALOGUE {
        assert!(m.family.band(0.1, &ctx).is_ok(), "{}", m.id);
    }
}
