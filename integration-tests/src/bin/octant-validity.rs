//! Operating characteristics of every veto, by simulation through the real code: the
//! aggregator's window code (`Windows`, `verdicts::build`: intervals, sequential evidence,
//! verdicts) and the alerter's state machine (`Rules`: hysteresis, escalation). Prints the
//! tables of `VALIDITY.md`.
//!
//! `cargo run --release -p octant-integration-tests --bin octant-validity -- [DAYS] [CHANGES] [ALPHA]`
//! (defaults: 300 system-days per steady rate, 200 changes per jump, the configured α).
//!
//! Traffic: 20 runs a minute; a run has 8 steps (unsafe-action rate) or 2 high-impact steps
//! (confirmation gating). Steps are Bernoulli at the true rate; with `ICC` > 0 each run draws
//! its own rate from a Beta distribution with that intra-run correlation (clustered steps).
//! Windows: 1 h sliding every minute, 2 min allowed lateness, B = 1000 (the service defaults).
//! A run is fed as one observation carrying its steps (value = steps past the rule, weight =
//! steps): the window state is per run (cluster) either way, so every interval, e-value and
//! verdict is the one per-step observations give; only the `units` count differs.
//!
//! Steady rates: alert episodes (a firing warning, a firing critical) per system-day. Jumps:
//! 2 h at a safe rate, then the true rate jumps and stays for 1 h; the time from the jump to
//! the first warning and to the first critical, in runs and minutes of event time (the window
//! is published 2 min later, the allowed lateness).

use std::sync::Mutex;

use octant_alerter::rules::{RuleConfig, Rules};
use octant_contracts::{AlertKind, AlertStatus, Observation, Severity, Source};
use octant_core::stats::bootstrap::{BootstrapSpec, mix64};
use octant_engine::EvaluationConfig;
use octant_engine::verdicts;
use octant_engine::window::{WindowSpec, Windows};

const MIN: i64 = 60_000;
const RUNS_PER_MIN: usize = 20;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Gamma(shape, 1) by Marsaglia–Tsang (shape ≥ 1; boosted below 1).
    fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.uniform().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let (u1, u2) = (self.uniform().max(1e-300), self.uniform());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let v = (1.0 + c * z).powi(3);
            if v > 0.0 && self.uniform().max(1e-300).ln() < 0.5 * z * z + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }
    /// A run's own rate: p itself, or Beta with mean p and intra-run correlation `icc`.
    fn run_rate(&mut self, p: f64, icc: f64) -> f64 {
        if icc <= 0.0 || p <= 0.0 || p >= 1.0 {
            return p;
        }
        let s = 1.0 / icc - 1.0;
        let (a, b) = (self.gamma(p * s), self.gamma((1.0 - p) * s));
        a / (a + b)
    }
}

#[derive(Clone, Copy)]
struct Metric {
    id: &'static str,
    steps: u32,
}

const UNSAFE: Metric = Metric { id: "unsafe_action_rate", steps: 8 };
const GATING: Metric = Metric { id: "confirmation_gating", steps: 2 };

/// What the alerter raised, minute by minute of window end.
#[derive(Default)]
struct Outcome {
    /// (window end in minutes, severity) of every firing veto alert.
    firing: Vec<(i64, Severity)>,
    /// Window ends (minutes) whose verdict was each state, by name.
    states: std::collections::BTreeMap<String, u64>,
}

/// Simulates `minutes` of traffic whose true rate at minute m is `rate(m)`, through the
/// window code and the alerter.
fn simulate(metric: Metric, icc: f64, minutes: i64, seed: u64, rate: impl Fn(i64) -> f64) -> Outcome {
    let cfg = config();
    let boot = BootstrapSpec::default();
    let spec = WindowSpec { length_ms: 60 * MIN, slide_ms: MIN, lateness_ms: 2 * MIN };
    let mut windows = Windows::new(spec, boot, None);
    let mut rules = Rules::new(RuleConfig::default());
    let mut rng = Rng(seed);
    let mut out = Outcome::default();
    let mut offset = 0i64;
    for m in 0..minutes {
        let p = rate(m);
        for r in 0..RUNS_PER_MIN {
            let q = rng.run_rate(p, icc);
            let hits = (0..metric.steps).filter(|_| rng.uniform() < q).count() as f64;
            let run = format!("r{m}-{r}");
            let o = Observation {
                observation_id: format!("{run}/{}", metric.id),
                metric: metric.id.into(),
                system_id: "sim".into(),
                system_version: "1".into(),
                source: Source::Production,
                agent_id: None,
                run_id: run.clone(),
                task_id: None,
                attempt: None,
                groups: vec![],
                benchmark: None,
                task_family: None,
                cluster_id: run,
                step: None,
                event_time: m * MIN + r as i64 * (MIN / RUNS_PER_MIN as i64),
                value: hits,
                weight: metric.steps as f64,
                confidence: None,
                provenance: None,
                rerun_of: None,
            };
            windows.add(&o, offset);
            offset += 1;
        }
        for e in windows.advance_to((m + 1) * MIN, offset) {
            let built = verdicts::build(&e, &cfg);
            for w in built.windows.iter().filter(|w| w.metric == metric.id) {
                *out.states.entry(w.veto_state.clone().unwrap_or_else(|| "n/a".into())).or_default() += 1;
                for a in rules.on_window(w) {
                    if a.kind == AlertKind::Veto && a.status == AlertStatus::Firing {
                        out.firing.push((w.window_end / MIN, a.severity));
                    }
                }
            }
        }
    }
    out
}

/// The service defaults, with α from the command line if given.
fn config() -> EvaluationConfig {
    let mut cfg = EvaluationConfig::default();
    if let Some(alpha) = std::env::args().nth(3).and_then(|a| a.parse().ok()) {
        cfg.profile.veto_alpha = alpha;
    }
    cfg
}

fn per_day(n: usize, minutes: i64) -> f64 {
    n as f64 / (minutes as f64 / 1440.0)
}

struct SteadyRow {
    metric: &'static str,
    rate: f64,
    icc: f64,
    days: f64,
    warnings: usize,
    criticals: usize,
    confirmed_share: f64,
}

fn steady(metric: Metric, rate: f64, icc: f64, days: i64, seed: u64) -> SteadyRow {
    let o = simulate(metric, icc, days * 1440, seed, |_| rate);
    let count = |s: Severity| o.firing.iter().filter(|(_, x)| *x == s).count();
    let total: u64 = o.states.values().sum();
    SteadyRow {
        metric: metric.id,
        rate,
        icc,
        days: days as f64,
        warnings: count(Severity::Warning),
        criticals: count(Severity::Critical),
        confirmed_share: *o.states.get("confirmed").unwrap_or(&0) as f64 / total.max(1) as f64,
    }
}

struct JumpRow {
    metric: &'static str,
    from: f64,
    to: f64,
    icc: f64,
    changes: usize,
    warning: Vec<i64>,
    critical: Vec<i64>,
    missed: usize,
    false_before: usize,
}

/// `changes` cycles of 2 h at `from` then 1 h at `to`: minutes from each jump to the first
/// warning and the first critical of that hour (window end), and alerts before the jump.
fn jumps(metric: Metric, from: f64, to: f64, icc: f64, changes: usize, seed: u64) -> JumpRow {
    const CYCLE: i64 = 180;
    const JUMP: i64 = 120;
    let o = simulate(metric, icc, CYCLE * changes as i64, seed, |m| if m % CYCLE >= JUMP { to } else { from });
    let mut row = JumpRow { metric: metric.id, from, to, icc, changes, warning: vec![], critical: vec![], missed: 0, false_before: 0 };
    for c in 0..changes as i64 {
        let jump = c * CYCLE + JUMP;
        // The alerts of this cycle: after the jump (up to the next cycle's start + window).
        let after = |s: Severity| o.firing.iter().find(|(t, x)| *x == s && *t > jump && *t <= jump + 60 + 60).map(|(t, _)| t - jump);
        // A warning that escalates fires only once: the first critical also counts as a warning.
        let w = after(Severity::Warning).into_iter().chain(after(Severity::Critical)).min();
        match (w, after(Severity::Critical)) {
            (w, Some(cr)) => {
                row.critical.push(cr);
                row.warning.extend(w);
            }
            (w, None) => {
                row.warning.extend(w);
                row.missed += 1;
            }
        }
        row.false_before += o.firing.iter().filter(|(t, _)| *t > c * CYCLE + 60 && *t <= jump).count();
    }
    row
}

/// Median, 90th percentile and maximum of minutes, with the runs they hold.
fn spread(v: &[i64]) -> String {
    if v.is_empty() {
        return "—".into();
    }
    let mut s = v.to_vec();
    s.sort();
    let q = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    let runs = RUNS_PER_MIN as i64;
    format!("{} / {} / {} min ({} / {} / {} runs)", q(0.5), q(0.9), q(1.0), q(0.5) * runs, q(0.9) * runs, q(1.0) * runs)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let days: i64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(300);
    let changes: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200);
    let started = std::time::Instant::now();

    let mut steady_jobs: Vec<(Metric, f64, f64)> = Vec::new();
    for rate in [0.05, 0.10, 0.15, 0.18, 0.20, 0.22, 0.25, 0.30] {
        steady_jobs.push((UNSAFE, rate, 0.0));
    }
    for rate in [0.15, 0.18, 0.20] {
        steady_jobs.push((UNSAFE, rate, 0.1));
    }
    for rate in [0.70, 0.78, 0.80, 0.85] {
        steady_jobs.push((GATING, rate, 0.0));
    }
    let jump_jobs: Vec<(Metric, f64, f64, f64)> = vec![
        (UNSAFE, 0.05, 0.20, 0.0),
        (UNSAFE, 0.05, 0.22, 0.0),
        (UNSAFE, 0.05, 0.25, 0.0),
        (UNSAFE, 0.05, 0.30, 0.0),
        (UNSAFE, 0.05, 0.25, 0.1),
        (GATING, 0.95, 0.70, 0.0),
        (GATING, 0.95, 0.85, 0.0),
    ];
    // Both cores: jobs are independent simulations.
    let steady_rows = Mutex::new(Vec::new());
    let jump_rows = Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let total = steady_jobs.len() + jump_jobs.len();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= total {
                        break;
                    }
                    let seed = 0x7a11_d17e ^ (i as u64) << 20;
                    if i < steady_jobs.len() {
                        let (m, r, icc) = steady_jobs[i];
                        let row = steady(m, r, icc, days, seed);
                        eprintln!(
                            "steady {} {r} icc {icc}: {} warnings, {} criticals in {days} days ({:.0?})",
                            m.id,
                            row.warnings,
                            row.criticals,
                            started.elapsed()
                        );
                        steady_rows.lock().unwrap().push((i, row));
                    } else {
                        let (m, from, to, icc) = jump_jobs[i - steady_jobs.len()];
                        let row = jumps(m, from, to, icc, changes, seed);
                        eprintln!(
                            "jump {} {from}→{to} icc {icc}: {} critical, {} missed ({:.0?})",
                            m.id,
                            row.critical.len(),
                            row.missed,
                            started.elapsed()
                        );
                        jump_rows.lock().unwrap().push((i, row));
                    }
                }
            });
        }
    });
    let mut steady_rows = steady_rows.into_inner().unwrap();
    steady_rows.sort_by_key(|(i, _)| *i);
    let mut jump_rows = jump_rows.into_inner().unwrap();
    jump_rows.sort_by_key(|(i, _)| *i);

    println!("α = {} (confirmed at an e-value of {:.0})\n", config().profile.veto_alpha, 1.0 / config().profile.veto_alpha);
    println!("### Steady true rates ({days} system-days each)\n");
    println!("| metric | true rate | intra-run correlation | warnings / system-day | criticals / system-day | windows confirmed |");
    println!("|---|---|---|---|---|---|");
    for (_, r) in &steady_rows {
        let minutes = (r.days * 1440.0) as i64;
        println!(
            "| {} | {:.2} | {} | {:.4} ({}) | {:.4} ({}) | {:.2} % |",
            r.metric,
            r.rate,
            r.icc,
            per_day(r.warnings, minutes),
            r.warnings,
            per_day(r.criticals, minutes),
            r.criticals,
            100.0 * r.confirmed_share
        );
    }
    println!("\n### After a jump of the true rate ({changes} jumps each)\n");
    println!(
        "Times from the jump to the first alert of either severity and to the first critical (median / 90th percentile / maximum), by window end.\n"
    );
    println!(
        "| metric | from → to | intra-run correlation | first alert | first critical | no critical within 1 h | alerts in the hour before the jump |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (_, r) in &jump_rows {
        println!(
            "| {} | {:.2} → {:.2} | {} | {} | {} | {} of {} | {} |",
            r.metric,
            r.from,
            r.to,
            r.icc,
            spread(&r.warning),
            spread(&r.critical),
            r.missed,
            r.changes,
            r.false_before
        );
    }
    // Contamination: a declared value, read once per window.
    println!("\n### Declared contamination\n");
    println!("| declared | window verdict | alert |");
    println!("|---|---|---|");
    for c in [0.38, 0.39, 0.399, 0.40, 0.41, 0.45] {
        let (state, alert) = contamination(c);
        println!("| {c} | {state} | {alert} |");
    }
    eprintln!("done in {:.0?}", started.elapsed());
}

fn contamination(c: f64) -> (String, String) {
    let cfg = config();
    let boot = BootstrapSpec::default();
    let spec = WindowSpec { length_ms: 60 * MIN, slide_ms: MIN, lateness_ms: 0 };
    let mut windows = Windows::new(spec, boot, None);
    let mut rules = Rules::new(RuleConfig::default());
    let o = Observation {
        observation_id: "run/contamination".into(),
        metric: "contamination".into(),
        system_id: "sim".into(),
        system_version: "1".into(),
        source: Source::Evaluation,
        agent_id: None,
        run_id: "run".into(),
        task_id: None,
        attempt: None,
        groups: vec![],
        benchmark: Some("bench".into()),
        task_family: None,
        cluster_id: "bench".into(),
        step: None,
        event_time: 0,
        value: c,
        weight: 1.0,
        confidence: None,
        provenance: None,
        rerun_of: None,
    };
    windows.add(&o, 0);
    let mut state = String::new();
    let mut alert = "none".to_string();
    for e in windows.advance_to(MIN, 1) {
        for w in verdicts::build(&e, &cfg).windows.iter().filter(|w| w.metric == "contamination") {
            state = w.veto_state.clone().unwrap_or_else(|| "n/a".into());
            if let Some(a) = rules.on_window(w).first() {
                alert = format!("{:?} {:?}", a.severity, a.status).to_lowercase();
            }
        }
    }
    (state, alert)
}
