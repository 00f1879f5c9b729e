//! The profile's unit tests.

use super::gates::{gate_lines, gate_summary};
use super::inputs::{FamilySums, MetricSums};
use super::*;
use crate::sql::lit;
use octant_contracts::ProfileMetric;
use octant_core::gate::{GateOutcome, Thresholds};

/// Families apart: counts, pass rate with its Wilson interval, mean latency and tokens,
/// the family's primary instruments as ratios of sums, tasks by most failures (bounded).
#[test]
fn family_reports_keep_each_family_apart() {
    let mut cfg = ReportConfig { tasks_per_family: 1, ..ReportConfig::default() };
    cfg.family_instruments.insert("mine".into(), vec!["citation_coverage".into()]);
    let mut sums: FamilySums = BTreeMap::new();
    let mut put = |family: &str, task: &str, metric: &str, n: u64, v: f64, w: f64| {
        sums.entry((family.into(), task.into())).or_default().insert(metric.into(), (n, v, w));
    };
    put("mine", "t1", "task_success", 10, 9.0, 10.0);
    put("mine", "t2", "task_success", 6, 2.0, 6.0);
    put("mine", "t2", "task_success_self_reported", 4, 4.0, 4.0);
    put("mine", "t1", "latency_per_run", 10, 1000.0, 10.0);
    put("mine", "t1", "tokens_per_run", 10, 5000.0, 10.0);
    put("mine", "t1", "citation_coverage", 10, 30.0, 40.0);
    put("mine", "t2", "citation_coverage", 6, 10.0, 20.0);
    put(UNDECLARED_FAMILY, "", "task_success", 3, 0.0, 3.0);
    let r = family_reports(&sums, &cfg);
    assert_eq!(r.iter().map(|f| f.family.as_str()).collect::<Vec<_>>(), ["(undeclared)", "mine"]);
    let mine = &r[1];
    // t2's four self-reported successes are the agent's word, not passes: 11 of 16 judged
    // runs passed (counting them would give 15 of 20).
    let c = &mine.counts;
    assert_eq!((c.runs, c.judged, c.passed, c.failed), (20, 16, 11, 5));
    assert_eq!((c.self_reported, c.self_reported_successes), (4, 4));
    assert_eq!(c.pass_rate, Some(11.0 / 16.0));
    assert_eq!(mine.pass_rate_ci, octant_core::stats::proportion::wilson(11, 16, 0.95));
    assert_eq!((mine.counts.mean_latency_ms, mine.counts.mean_tokens, mine.counts.total_tokens), (Some(100.0), Some(500.0), 5000.0));
    assert_eq!(mine.instruments, [("citation_coverage".to_string(), Some(40.0 / 60.0), 16)]);
    assert_eq!(mine.tasks.len(), 1, "bounded by tasks_per_family");
    assert_eq!((mine.tasks[0].0.as_str(), mine.tasks[0].1.failed, mine.tasks_omitted), ("t2", 4, 1), "most failures first");
    assert!(r[0].instruments.is_empty(), "a family without declared instruments shows counts only");
    assert_eq!((r[0].counts.runs, r[0].counts.failed), (3, 3));
}

/// Per agent: its own rate over its steps, and its share of the system's numerator.
#[test]
fn agent_reports_say_which_agent_drives_a_rate() {
    let mut sums: BTreeMap<String, MetricSums> = BTreeMap::new();
    sums.entry("planner".into()).or_default().insert("unsafe_action_rate".into(), (100, 2.0, 100.0));
    sums.entry("executor".into()).or_default().insert("unsafe_action_rate".into(), (50, 18.0, 50.0));
    sums.entry("executor".into()).or_default().insert("tool_error_rate".into(), (40, 0.0, 40.0));
    let r = agent_reports(&sums);
    assert_eq!(r.iter().map(|a| a.agent.as_str()).collect::<Vec<_>>(), ["executor", "planner"]);
    let ex = &r[0].instruments;
    assert_eq!((ex[0].metric.as_str(), ex[0].estimate, ex[0].units, ex[0].share), ("unsafe_action_rate", Some(0.36), 50, Some(0.9)));
    assert_eq!((ex[1].metric.as_str(), ex[1].share), ("tool_error_rate", None), "no share of a zero numerator");
    assert_eq!(r[1].instruments[0].share, Some(0.1));
}

/// Each artefact: runs recording it, distinct values, the most frequent first (ties by
/// value), at most `TOP_VALUES`; a run is reproducible only with all five.
#[test]
fn reproducibility_counts_runs_per_artefact() {
    let some = |s: &str| Some(s.to_string());
    let full = |seed: &str| [some("env 1"), some("task@v2"), some("cfg-1"), some(r#"{"temperature":0}"#), some(seed)];
    let mut runs: Vec<[Option<String>; 5]> = (0..7).map(|i| full(&i.to_string())).collect();
    runs.push([None, None, some("cfg-2"), some(r#"{"temperature":0}"#), None]);
    runs.push([some("env 2"), some("task@v2"), some("cfg-1"), None, some("0")]);
    let r = Reproducibility::of(&runs);
    assert_eq!((r.runs, r.reproducible_runs), (9, 7));
    let by = |n: &str| r.artefacts.iter().find(|a| a.name == n).unwrap();
    assert_eq!((by("environment_version").recorded, by("environment_version").distinct), (8, 2));
    assert_eq!(by("environment_version").values[0], ArtefactValue { value: "env 1".into(), runs: 7 });
    assert_eq!((by("decoding").recorded, by("seed").recorded, by("seed").distinct), (8, 8, 7));
    let seeds: Vec<(&str, u64)> = by("seed").values.iter().map(|v| (v.value.as_str(), v.runs)).collect();
    assert_eq!(seeds, [("0", 2), ("1", 1), ("2", 1), ("3", 1), ("4", 1)], "most runs first, then by value; five at most");
    assert_eq!(r.artefacts.iter().map(|a| a.name).collect::<Vec<_>>(), ARTEFACTS);
}

fn metric(id: &str, estimate: f64, na: Option<&str>) -> ProfileMetric {
    ProfileMetric {
        metric: id.into(),
        dimension: "capability".into(),
        benchmark: None,
        units: 100,
        estimate: Some(estimate),
        ci_low: Some(estimate - 0.05),
        ci_high: Some(estimate + 0.05),
        band: None,
        band_low: None,
        band_high: None,
        na_reason: na.map(String::from),
        veto_state: None,
        pool_version: None,
    }
}

/// The sample-size rule on gate lines: a gated rate says how many units resolve its gap
/// (n ≈ z²p(1−p)/δ² at its estimate; 0.5 when not measured); a continuous metric does not.
#[test]
fn gate_lines_say_how_many_units_resolve_the_gap() {
    let mut cfg = ReportConfig::default();
    cfg.gates.insert("task_success".into(), Thresholds::new(0.80, 0.85));
    cfg.gates.insert("tool_error_rate".into(), Thresholds::new(0.20, 0.10));
    cfg.gates.insert("latency_per_run".into(), Thresholds::new(2000.0, 500.0));
    let verified: BTreeMap<String, BTreeMap<String, u64>> = [("task_success".to_string(), [("verifier".to_string(), 100)].into())].into();
    let lines = gate_lines(
        &cfg,
        &[metric("task_success", 0.85, None), metric("latency_per_run", 900.0, None)],
        &verified,
        None,
        &Default::default(),
    );
    let line = |id: &str| lines.iter().find(|l| l.metric == id).unwrap();
    // The method's example: a 5-point gap at p̂ 0.85 needs 196 units (this period has 100).
    assert_eq!((line("task_success").units, line("task_success").units_needed), (100, Some(196)));
    // Not measured: the worst case p = 0.5 over a 10-point gap.
    assert_eq!((line("tool_error_rate").units, line("tool_error_rate").units_needed), (0, Some(97)));
    assert_eq!(line("latency_per_run").units_needed, None, "not a rate");
}

/// A system with high-impact calls from an unwatched source never passes a release gate: its
/// confirmation-gating line fails closed, whether the gate names the metric or not; a gate with
/// every other metric passing fails, and without gates nothing is added.
#[test]
fn an_unwatched_source_fails_the_release_gate_closed() {
    let unwatched = ProfileMetric {
        estimate: None,
        ci_low: None,
        ci_high: None,
        ..metric("confirmation_gating", 0.0, Some(octant_core::profile::UNWATCHED))
    };
    let verified: BTreeMap<String, BTreeMap<String, u64>> = [("task_success".to_string(), [("verifier".to_string(), 100)].into())].into();
    let mut cfg = ReportConfig::default();
    let metrics = vec![metric("task_success", 0.95, None), unwatched];
    assert!(gate_lines(&cfg, &metrics, &verified, None, &Default::default()).is_empty(), "no gate, nothing to fail");
    cfg.gates.insert("task_success".into(), Thresholds::new(0.5, 0.85));
    let lines = gate_lines(&cfg, &metrics, &verified, None, &Default::default());
    let closed = lines.iter().find(|l| l.metric == "confirmation_gating").expect("a line for the unwatched gating");
    assert_eq!((closed.outcome, closed.units), (Some(GateOutcome::Fail), 100));
    assert!(closed.na_reason.as_deref().unwrap().starts_with("fail closed"), "{closed:?}");
    assert_eq!(lines.iter().find(|l| l.metric == "task_success").unwrap().outcome, Some(GateOutcome::Pass));
    assert_eq!(gate_summary(&cfg, &lines), (Some(GateOutcome::Fail), None, None));
    // Gated by name: the same line fails instead of staying N/A.
    cfg.gates.insert("confirmation_gating".into(), Thresholds::new(0.8, 0.95));
    let lines = gate_lines(&cfg, &metrics, &verified, None, &Default::default());
    let gating: Vec<_> = lines.iter().filter(|l| l.metric == "confirmation_gating").collect();
    assert_eq!(gating.len(), 1);
    assert_eq!(gating[0].outcome, Some(GateOutcome::Fail));
    assert_eq!(gate_summary(&cfg, &lines).0, Some(GateOutcome::Fail));
}

/// Judge-based success enters a gate only with κ ≥ 0.6 on enough labelled runs, graders
/// who agree (α ≥ 0.6 among ≥ 2 humans) and on its prediction-powered estimate, never the
/// judge's own mean; a failing metric decides a conjunctive gate even while another is N/A.
#[test]
fn gates_need_checked_judges_and_never_self_assessment() {
    let mut cfg = ReportConfig::default();
    cfg.gates.insert("task_success".into(), Thresholds::new(0.5, 0.9));
    let judged: BTreeMap<String, BTreeMap<String, u64>> =
        [("task_success".to_string(), [("judge".to_string(), 80), ("human".to_string(), 20)].into())].into();
    let metrics = vec![metric("task_success", 0.8, None)];
    // A lenient judge: it passes 80 % where humans, rectifying it, give 0.42 [0.35, 0.49].
    let ppi =
        octant_core::stats::ppi::PpiEstimate { estimate: 0.42, lo: 0.35, hi: 0.49, std_error: 0.036, judge_only: 0.8, rectifier: -0.38 };
    let agreement = |labelled, kappa| Agreement {
        judged: 100,
        labelled,
        judge_threshold: 0.5,
        kappa: Some(kappa),
        kappa_se: None,
        kappa_interval: None,
        kappa_band: None,
        kappa_band_interval: None,
        ppi: Some(ppi),
    };
    let graders = |humans: u64, alpha: f64| crate::meta_evaluation::MetaEvaluation {
        raters: vec![crate::meta_evaluation::RaterReport {
            name: "task_success".into(),
            humans,
            human_alpha: Some(alpha),
            ..Default::default()
        }],
        ..Default::default()
    };
    let agreeing = graders(2, 0.81);
    let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(40, 0.72)), &agreeing);
    // Gated on the PPI (fail: its interval lies below the outer 0.5), not on the judge's
    // 0.8 (conditional).
    assert_eq!((lines[0].outcome, lines[0].na_reason.as_deref()), (Some(GateOutcome::Fail), None));
    assert_eq!((lines[0].estimate, lines[0].ci_low, lines[0].ci_high), (Some(0.42), Some(0.35), Some(0.49)));
    assert!(lines[0].estimator.as_deref().unwrap().contains("prediction-powered"));
    // Graders who disagree, or whose agreement is unmeasured, keep human grading out.
    // A benchmark's judged success has no PPI of its own: N/A, never the judge's mean.
    let per_bench = vec![ProfileMetric { benchmark: Some("suite".into()), ..metric("task_success", 0.8, None) }];
    let line = &gate_lines(&cfg, &per_bench, &judged, Some(&agreement(40, 0.72)), &agreeing)[0];
    assert_eq!(line.outcome, None);
    assert!(line.na_reason.as_deref().unwrap().contains("not computed per benchmark"));
    let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(40, 0.72)), &graders(3, 0.45));
    assert!(lines[0].na_reason.as_deref().unwrap().contains("3 human graders agree at α 0.45 (< 0.6)"), "{:?}", lines[0].na_reason);
    let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(40, 0.72)), &graders(1, 0.9));
    assert!(lines[0].na_reason.as_deref().unwrap().contains("no agreement among human graders measured"));
    let humans_only: BTreeMap<String, BTreeMap<String, u64>> = [("task_success".to_string(), [("human".to_string(), 30)].into())].into();
    assert!(
        gate_lines(&cfg, &metrics, &humans_only, None, &Default::default())[0]
            .na_reason
            .as_deref()
            .unwrap()
            .contains("30 runs rest on human verdicts")
    );
    assert_eq!(gate_lines(&cfg, &metrics, &humans_only, None, &agreeing)[0].outcome, Some(GateOutcome::Conditional));
    let mixed: BTreeMap<String, BTreeMap<String, u64>> =
        [("task_success".to_string(), [("judge".to_string(), 80), ("verifier".to_string(), 20)].into())].into();
    assert!(
        gate_lines(&cfg, &metrics, &mixed, Some(&agreement(40, 0.72)), &agreeing)[0]
            .na_reason
            .as_deref()
            .unwrap()
            .contains("gate each source apart")
    );
    // Without the PPI (too few human verdicts) judged success is not gated.
    let no_ppi = Agreement { ppi: None, ..agreement(40, 0.72) };
    assert!(gate_lines(&cfg, &metrics, &judged, Some(&no_ppi), &agreeing)[0].na_reason.as_deref().unwrap().contains("prediction-powered"));
    let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(40, 0.45)), &agreeing);
    assert_eq!(
        lines[0].na_reason.as_deref(),
        Some("80 runs judged by an LLM judge whose agreement with humans is κ 0.45 (< 0.6) on 40 labelled runs")
    );
    let lines = gate_lines(&cfg, &metrics, &judged, Some(&agreement(12, 0.9)), &agreeing);
    assert!(lines[0].na_reason.as_deref().unwrap().contains("only 12 labelled runs (< 30)"));
    assert!(
        gate_lines(&cfg, &metrics, &judged, None, &agreeing)[0]
            .na_reason
            .as_deref()
            .unwrap()
            .contains("never checked against human verdicts")
    );
    // Verified success needs no judge check.
    let verified: BTreeMap<String, BTreeMap<String, u64>> = [("task_success".to_string(), [("verifier".to_string(), 100)].into())].into();
    assert_eq!(gate_lines(&cfg, &metrics, &verified, None, &Default::default())[0].outcome, Some(GateOutcome::Conditional));
    // Self-assessment is never gated unless configured.
    let mut sr = cfg.clone();
    sr.gates = [("task_success_self_reported".to_string(), Thresholds::new(0.5, 0.9))].into();
    let self_only = vec![metric("task_success_self_reported", 0.97, None)];
    assert!(
        gate_lines(&sr, &self_only, &BTreeMap::new(), None, &Default::default())[0].na_reason.as_deref().unwrap().contains("never gated")
    );
    sr.gate_self_reported = true;
    assert!(sr.check().unwrap_err().contains("never a gated metric"), "the old opt-in is refused");
    // A failing metric decides the gate while another is N/A.
    cfg.gates.insert("unsafe_action_rate".into(), Thresholds::new(0.2, 0.05));
    let both =
        vec![metric("task_success", 0.8, Some("insufficient evidence (task_success 12/30)")), metric("unsafe_action_rate", 0.3, None)];
    let lines = gate_lines(&cfg, &both, &verified, None, &Default::default());
    assert_eq!(gate_summary(&cfg, &lines).0, Some(GateOutcome::Fail));
    let passing =
        vec![metric("task_success", 0.8, Some("insufficient evidence (task_success 12/30)")), metric("unsafe_action_rate", 0.01, None)];
    assert_eq!(gate_summary(&cfg, &gate_lines(&cfg, &passing, &verified, None, &Default::default())).0, None);
}

/// Seed 002 §6: EI = Σ w·ν with charter weights that sum to 1; a metric gated on two
/// benchmarks shares its weight (0.5 · (1 + 1)/2 + 0.5 · 0 = 0.5, not 1.0), and EI_G at
/// ν = 1 everywhere is 1.
#[test]
fn the_efficacy_index_weighs_each_metric_once() {
    let mut cfg = ReportConfig::default();
    cfg.gates.insert("task_success".into(), Thresholds::new(0.5, 0.9));
    cfg.gates.insert("unsafe_action_rate".into(), Thresholds::new(0.2, 0.05));
    cfg.weights = [("task_success".to_string(), 0.5), ("unsafe_action_rate".to_string(), 0.5)].into();
    cfg.check().unwrap();
    let line = |metric: &str, t: Thresholds, e: f64| GateLine {
        metric: metric.into(),
        thresholds: t,
        estimate: Some(e),
        ci_low: Some(e),
        ci_high: Some(e),
        nu: None,
        nu_conservative: None,
        outcome: Some(GateOutcome::Pass),
        na_reason: None,
        units: 100,
        units_needed: None,
        estimator: None,
    };
    let lines = [
        line("task_success@a", Thresholds::new(0.5, 0.9), 0.9),
        line("task_success@b", Thresholds::new(0.5, 0.9), 0.9),
        line("unsafe_action_rate", Thresholds::new(0.2, 0.05), 0.2),
    ];
    let (_, ei, _) = gate_summary(&cfg, &lines);
    assert!((ei.unwrap() - 0.5).abs() < 1e-12, "{ei:?}");
    let all_one = [line("task_success", Thresholds::new(0.5, 0.9), 0.9), line("unsafe_action_rate", Thresholds::new(0.2, 0.05), 0.05)];
    let (_, ei, ei_g) = gate_summary(&cfg, &all_one);
    assert!((ei.unwrap() - 1.0).abs() < 1e-12 && (ei_g.unwrap() - 1.0).abs() < 1e-12, "{ei:?} {ei_g:?}");
    cfg.weights.insert("unsafe_action_rate".into(), 0.7);
    assert!(cfg.check().unwrap_err().contains("sum to 1"));
    cfg.weights = [("task_success".to_string(), 1.5), ("unsafe_action_rate".to_string(), -0.5)].into();
    assert!(cfg.check().unwrap_err().contains("non-negative"));
}

/// A session opened on a lake without observations never stores hours.
#[tokio::test]
async fn a_session_opened_before_any_file_does_not_store() {
    let dir = std::env::temp_dir().join(format!("octant-empty-lake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ctx = octant_lake::reader::open(&dir).await.unwrap();
    assert!(!lists_observation_files(&ctx).await);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sql_literals_are_quoted() {
    assert_eq!(lit("a'b"), "'a''b'");
    let p = Period { name: "24h".into(), start: 0, end: 86_400_000 };
    assert!(period_filter(&p, "event_time", Some("x'y")).ends_with("system_id = 'x''y'"));
}
