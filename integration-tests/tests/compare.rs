//! Release decisions through the real pipeline (issue 18): two versions of one system run the
//! same evaluation tasks, the candidate worse by a known amount; generator → scorer → broker →
//! lake writer → Parquet, then `octant compare`'s library over the lake, and the canary
//! comparison following `octant.observations` on the broker.

use std::path::Path;

use octant_contracts::Source;
use octant_core::catalogue::ids;
use octant_core::gate::GateOutcome;
use octant_core::stats::canary::Decision;
use octant_gen::{EvaluationSpec, FleetSpec, RaterSpec, SystemSpec};
use octant_integration_tests::*;
use octant_lake::reader as lakedb;
use octant_profiler::{Period, ProfilerConfig};
use octant_report::compare::{self, CompareConfig, Release, Test};
use serde_json::Value;

use crate::aggregator::{T0, aggregator_config, pipeline_scored};
use crate::profiler::fill_lake;

/// Success 0.85 → 0.65 on the same 400 tasks (one attempt each; each task's difficulty is
/// shared, so the true paired difference is −0.20 exactly); a production canary whose
/// unsafe-action rate goes from 0.02 to 0.12 per action, and whose candidate also samples at
/// another temperature (its decoding differs: a comparison of the model alone is refused).
fn release_fleet() -> FleetSpec {
    let eval = Some(EvaluationSpec { benchmark: "suite".into(), contamination: 0.0, attempts: 1, share: 1.0 });
    let mut base = SystemSpec::new("rel");
    base.task_success = 0.85;
    base.evaluation = eval.clone();
    // Three humans and a judge rate every answer; the candidate's judge is a poor one, and
    // the candidate loses more pairwise comparisons against the reference bot, and its judge
    // favours the longer answer. A human compares every pair too (the verbosity reference).
    base.raters = Some(RaterSpec { judge_flip: 0.05, human_pairwise: true, ..RaterSpec::typical("answer_quality") });
    let mut cand = SystemSpec { version: "2.0.0".into(), task_success: 0.65, ..base.clone() };
    cand.raters =
        Some(RaterSpec { judge_flip: 0.3, win: 0.3, verbosity_bias: 0.4, human_pairwise: true, ..RaterSpec::typical("answer_quality") });
    cand.evaluation = eval;
    let can = SystemSpec::new("can");
    let can2 = SystemSpec {
        version: "2.0.0".into(),
        unsafe_action: 0.12,
        decoding: Some(r#"{"temperature":0.7,"top_p":0.95}"#.into()),
        ..can.clone()
    };
    FleetSpec { systems: vec![base, cand, can, can2], seed: 29, start_ms: T0, run_spacing_ms: 2_000, poison: 0.0, json_share: 0.2 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_decisions_and_meta_evaluation_through_the_pipeline() {
    let env = TestEnv::new("compare", 2).await;
    let fleet = release_fleet();
    let runs = 400;
    // The judge's ratings as an instrument, declared to every stage: it may enter a gate only
    // where the judge agrees with the humans (κ ≥ 0.6).
    let judge: octant_core::catalogue::InstrumentDecl = toml::from_str(
        "id = \"answer_quality_judge\"\nevaluation = \"answer_quality\"\nrater_kind = \"judge\"\ndimension = \"capability\"\nfamily = { family = \"higher\" }",
    )
    .unwrap();
    // The judge's pairwise verdicts as a comparative (Q) instrument: a run's unit is its
    // comparison, both presentation orders averaged; banded by quartile in a versioned pool.
    let win: octant_core::catalogue::InstrumentDecl = toml::from_str(
        "id = \"answer_quality_win\"\nevaluation = \"answer_quality_pairwise\"\nrater_kind = \"judge\"\ndimension = \"capability\"\nfamily = { family = \"comparative\" }",
    )
    .unwrap();
    let mut scorer = env.scorer_config();
    scorer.evaluation.instruments.extend([judge.clone(), win.clone()]);
    let mut agg = aggregator_config(&env);
    agg.evaluation.instruments.extend([judge.clone(), win]);
    let pool: octant_engine::config::PoolDecl =
        toml::from_str("version = \"judge-pool 2026.12\"\nsystems = { ref-a = 0.35, ref-b = 0.45, ref-c = 0.55, ref-d = 0.65 }").unwrap();
    scorer.evaluation.pools.insert("answer_quality_win".into(), pool.clone());
    agg.evaluation.pools.insert("answer_quality_win".into(), pool);
    let out = pipeline_scored(&env, scorer, agg, &fleet, runs, 0).await;
    // Every comparison is one unit whose value is its two orders' mean; their mean is the
    // order-averaged win rate, and every window records the pool's version.
    for (version, spec) in [
        ("1.0.0", RaterSpec { judge_flip: 0.05, ..RaterSpec::typical("answer_quality") }),
        ("2.0.0", RaterSpec { win: 0.3, verbosity_bias: 0.4, ..RaterSpec::typical("answer_quality") }),
    ] {
        let values: Vec<f64> = out
            .observations
            .iter()
            .filter(|(id, (sys, metric, ..))| {
                sys == "rel" && metric == "answer_quality_win" && id.starts_with(&format!("rel-{version}-run-"))
            })
            .map(|(_, o)| o.3)
            .collect();
        assert_eq!(values.len(), runs as usize, "one unit per comparison ({version})");
        assert!(values.iter().all(|v| [0.0, 0.5, 1.0].contains(v)), "two orders averaged");
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!((mean - spec.expected_win_rate()).abs() < 0.07, "{version}: {mean} vs {}", spec.expected_win_rate());
        let windows: Vec<_> =
            out.windows.values().filter(|w| w.metric == "answer_quality_win" && w.system_version == version && w.units > 0).collect();
        assert!(!windows.is_empty(), "windows of the win rate ({version})");
        assert!(windows.iter().all(|w| w.pool_version.as_deref() == Some("judge-pool 2026.12")), "{windows:?}");
        assert!(windows.iter().all(|w| w.band.is_some() || w.na_reason.is_some()), "banded in the pool, or N/A with a reason");
        let last = windows.iter().max_by_key(|w| w.window_end).unwrap();
        eprintln!(
            "{version}: win rate {:?} [{:?}, {:?}] band {:?} ({} units; pool {:?})",
            last.estimate, last.ci_low, last.ci_high, last.band, last.units, last.pool_version
        );
        assert!(last.band.is_some(), "{last:?}");
    }

    // ---- The canary, on the live topic: roll back on the unsafe-action rate.
    let cfg = CompareConfig::default();
    let canary = Release::new("can", "1.0.0", "2.0.0", Source::Production);
    let mut tracker = octant_report::canary::Tracker::new(&cfg, canary).unwrap();
    let observations = octant_runtime::topic::follow(&env.kafka, "compare", &[octant_contracts::topics::OBSERVATIONS]).unwrap();
    let decision = octant_report::canary::follow(
        observations,
        &mut tracker,
        Some(std::time::Duration::from_secs(120)),
        std::time::Duration::from_secs(5),
        |_| {},
    )
    .await
    .unwrap();
    eprint!("{}", tracker.render());
    assert_eq!(decision, Decision::Worse, "{}", tracker.render());
    let unsafe_ = tracker.status().into_iter().find(|m| m.metric == ids::UNSAFE_ACTION_RATE).unwrap();
    assert_eq!(unsafe_.decision, Decision::Worse);
    assert!(unsafe_.decided_at.unwrap() < runs, "decided before the canary's runs ran out: {unsafe_:?}");
    assert!(unsafe_.e_worse >= unsafe_.threshold);
    // The evaluation system's versions are not the canary's: the other metrics are undecided
    // or not worse, never worse.
    assert!(tracker.status().iter().filter(|m| m.metric != ids::UNSAFE_ACTION_RATE).all(|m| m.decision != Decision::Worse));

    // ---- The lake: paired tests on the same tasks.
    let lake = fresh_dir("compare-lake");
    crate::web::produce_hostile_run(&env, T0).await;
    fill_lake(&env, &lake).await;
    let ctx = lakedb::open(&lake).await.unwrap();
    let (unsafe_run, unsafe_step) = runs_show_marks_the_unsafe_step(&ctx).await;
    crate::web::run_pages_in_chromium(&env, &lake, &unsafe_run, unsafe_step).await;
    let period = Period { name: "window".into(), start: T0 - 3_600_000, end: T0 + runs as i64 * fleet.run_spacing_ms + 3_600_000 };
    let release = Release::new("rel", "1.0.0", "2.0.0", Source::Evaluation);
    let c = compare::compare(&ctx, &cfg, 42, &release, &period).await.unwrap();
    eprint!("{}", compare::to_table(&c));
    let success = c.metrics.iter().find(|m| m.metric == ids::TASK_SUCCESS).expect("task success compared");
    assert_eq!(success.tasks, runs as usize, "every task paired");
    assert_eq!(success.test, Test::McnemarExact, "one binary unit per task and version");
    // The discordant tasks, counted independently from the lake's run ends.
    let (only_base, only_cand) = discordant(&ctx).await;
    assert_eq!(success.discordant, Some((only_base, only_cand)));
    assert!(success.lo <= -0.20 && -0.20 <= success.hi, "the interval covers the true difference: {success:?}");
    assert!(success.hi < 0.0 && success.p_holm < 0.05 && success.change == "worse", "{success:?}");
    assert_eq!(success.outcome, Some(GateOutcome::Fail));
    // Metrics the versions share (same true rates) show no significant change.
    for m in [ids::UNSAFE_ACTION_RATE, ids::LATENCY_PER_RUN, ids::TOOL_ERROR_RATE] {
        let x = c.metrics.iter().find(|x| x.metric == m).unwrap_or_else(|| panic!("{m} compared"));
        assert!(matches!(x.test, Test::WilcoxonApprox | Test::WilcoxonExact), "{x:?}");
        assert_eq!(x.change, "no significant change", "{x:?}");
        assert!(x.p_holm >= x.p_value);
    }
    assert_eq!(c.verdict, Some(GateOutcome::Fail));
    assert_eq!(c.decision, "hold");
    // Harness parity held: the same environment, task specs and decoding; the agent
    // configuration is not recorded by the generator (not verified, never assumed equal).
    assert_eq!(c.parity.checked, ["config_hash", "decoding", "environment_version", "task_spec"], "{:?}", c.parity);
    assert_eq!(c.parity.unverified, ["agent_config"]);

    // ---- Configuration freeze and harness parity. Over the whole period the canary's
    // baseline is not frozen: the hostile run above, another producer of can 1.0.0, recorded
    // neither a config hash nor a decoding.
    let canary_release = Release::new("can", "1.0.0", "2.0.0", Source::Production);
    let mixed = compare::compare(&ctx, &cfg, 42, &canary_release, &period).await.unwrap();
    let fields: Vec<(&str, &str)> = mixed.parity.differences.iter().map(|d| (d.field.as_str(), d.why.as_str())).collect();
    let unfrozen = "not frozen: the baseline ran under more than one value";
    assert_eq!(fields, [("config_hash", unfrozen), ("decoding", unfrozen)], "{:?}", mixed.parity);
    assert!(mixed.parity.differences[1].baseline.contains(&"(not recorded)".to_string()));
    // From after it, the candidate also samples at another temperature: comparing it as a new
    // model is refused, naming the field; with decoding declared as the compared component the
    // comparison goes on.
    let later = Period { start: T0 + 1_000, ..period.clone() };
    let refused = compare::compare(&ctx, &cfg, 42, &canary_release, &later).await.unwrap();
    eprint!("{}", compare::to_table(&refused));
    let fields: Vec<&str> = refused.parity.differences.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(fields, ["decoding"], "{:?}", refused.parity);
    assert_eq!(refused.parity.differences[0].candidate, [r#"{"temperature":0.7,"top_p":0.95}"#]);
    assert!(refused.metrics.is_empty() && refused.verdict.is_none(), "nothing tested");
    assert_eq!(refused.decision, "refused: decoding beyond the compared component (agent_config, config_hash)");
    assert!(compare::to_markdown(&refused).contains("| decoding | differs between the versions |"));
    let declared = Release { compared: vec!["decoding".into()], ..canary_release };
    let sampled = compare::compare(&ctx, &cfg, 42, &declared, &later).await.unwrap();
    assert!(!sampled.parity.refused(), "{:?}", sampled.parity);
    assert_eq!(sampled.parity.unverified, ["agent_config", "environment_version", "task_spec"], "production runs record no harness");
    // The other way round the candidate is better.
    let back = Release { baseline: "2.0.0".into(), candidate: "1.0.0".into(), ..release.clone() };
    let b = compare::compare(&ctx, &cfg, 42, &back, &period).await.unwrap();
    let s = b.metrics.iter().find(|m| m.metric == ids::TASK_SUCCESS).unwrap();
    assert_eq!((s.change.as_str(), s.discordant), ("better", Some((only_cand, only_base))));
    assert_eq!(s.outcome, Some(GateOutcome::Pass));

    // ---- The evidence package of the candidate carries the release decision.
    let evidence = lake.with_extension("evidence");
    let mut pcfg = ProfilerConfig {
        evidence: evidence.clone(),
        report: octant_report::ReportConfig { lake: lake.clone(), ..Default::default() },
        ..Default::default()
    };
    pcfg.report.compare.releases.push(release.clone());
    pcfg.report.evaluation.instruments.push(judge);
    pcfg.report.gates.insert("answer_quality_judge".into(), octant_core::gate::Thresholds::new(0.5, 0.6));
    pcfg.check().unwrap();
    let built = octant_profiler::run_once(&pcfg, std::slice::from_ref(&period), Some("rel"), 1_800_000_000_000).await.unwrap();
    let cand = built.iter().find(|b| b.record.system_id == "rel" && b.record.system_version == "2.0.0").unwrap();
    let dir = Path::new(cand.record.evidence_uri.as_deref().unwrap());
    let md = std::fs::read_to_string(dir.join("profile.md")).unwrap();
    assert!(md.contains("## Release decision: rel 1.0.0 → 2.0.0") && md.contains("**hold**"), "{md}");
    let j: Value = serde_json::from_slice(&std::fs::read(dir.join("profile.json")).unwrap()).unwrap();
    assert_eq!(j["release_decision"]["decision"], "hold");
    assert_eq!(j["release_decision"]["metrics"][0]["metric"], ids::TASK_SUCCESS);
    let base = built.iter().find(|b| b.record.system_id == "rel" && b.record.system_version == "1.0.0").unwrap();
    assert!(base.release.is_none(), "only the candidate's package");
    // Re-evaluation on change: the canary declares no release, so the version whose first run
    // came later is compared with the other by itself (both start at T0 here, so which is the
    // later one is the generator's draw), and its package records the decision; the earlier
    // version has nothing before it.
    let canary_built = octant_profiler::run_once(&pcfg, std::slice::from_ref(&period), Some("can"), 1_800_000_000_000).await.unwrap();
    let can: Vec<&octant_report::profile::Built> = canary_built.iter().filter(|b| b.record.system_id == "can").collect();
    let compared: Vec<&&octant_report::profile::Built> = can.iter().filter(|b| b.release.is_some()).collect();
    assert_eq!((can.len(), compared.len()), (2, 1), "one comparison, in the later version's package");
    let (later, auto) = (compared[0], compared[0].release.as_ref().unwrap());
    let earlier = can.iter().find(|b| b.release.is_none()).unwrap();
    assert!(auto.automatic && auto.baseline == earlier.record.system_version && auto.candidate == later.record.system_version, "{auto:?}");
    // Over the period the canary's runs are not frozen (the hostile run above) and its versions
    // sample at different temperatures: refused with the fields, nothing tested.
    assert!(auto.decision.starts_with("refused") && auto.metrics.is_empty(), "{}", auto.decision);
    let auto_md = std::fs::read_to_string(Path::new(later.record.evidence_uri.as_deref().unwrap()).join("profile.md")).unwrap();
    assert!(auto_md.contains("## Release decision: can ") && auto_md.contains("Started automatically"), "{auto_md}");

    // ---- Meta-evaluation against the generator's true rates (RaterSpec's expected values).
    for (b, judge_flip, win, verbosity_bias) in [(base, 0.05, 0.6, 0.0), (cand, 0.3, 0.3, 0.4)] {
        eprintln!("{} {}\n{}", b.record.system_id, b.record.system_version, octant_report::meta_evaluation::to_markdown(&b.meta));
        let spec = RaterSpec { judge_flip, win, verbosity_bias, ..RaterSpec::typical("answer_quality") };
        let r = b.meta.raters.iter().find(|r| r.name == "answer_quality").expect("ratings");
        assert_eq!((r.items, r.humans), (runs, 3));
        let humans = RaterSpec::expected_kappa(spec.quality, spec.human_flip, spec.human_flip);
        assert!((r.human_alpha.unwrap() - humans).abs() < 0.08, "α {:?} vs {humans}", r.human_alpha);
        // The humans' majority of three flips at 3e²(1 − e) + e³.
        let e = spec.human_flip;
        let majority = 3.0 * e * e * (1.0 - e) + e * e * e;
        let k = r.judge_human.as_ref().unwrap();
        let truth = RaterSpec::expected_kappa(spec.quality, majority, judge_flip);
        assert!(k.lo <= truth && truth <= k.hi, "judge–human κ [{}, {}] covers {truth}", k.lo, k.hi);
        let retest = judge_flip * (1.0 - judge_flip);
        assert!((r.retest_instability.unwrap() - retest).abs() < 0.05, "retest {:?} vs {retest}", r.retest_instability);
        let p = b.meta.pairwise.iter().find(|p| p.name == "answer_quality_pairwise").expect("pairwise verdicts");
        assert_eq!((p.verdicts, p.human_verdicts, p.swapped_items), (2 * runs, 2 * runs, runs));
        // Verbosity: the judge's excess preference for the longer answer over the human's on
        // the same items, (1 − b)·v/2 (0.16 for the candidate: band 0 of C(0.15); 0 for the
        // baseline). Lengths differ on nearly every item.
        let truth = spec.expected_verbosity_bias();
        let [lo, hi] = p.verbosity_interval.unwrap();
        assert!(lo <= truth && truth <= hi, "verbosity bias {:?} [{lo}, {hi}] covers {truth}", p.verbosity_bias);
        assert!((p.verbosity_bias.unwrap() - truth).abs() < 0.08 && p.verbosity_items > runs * 9 / 10, "{p:?}");
        assert_eq!(p.verbosity_reference.as_deref(), Some("humans on the same items"));
        assert!((p.position_inconsistency.unwrap() - spec.position_bias).abs() < 0.07, "{p:?}");
        let win_rate = spec.expected_win_rate();
        assert!((p.win_rate.unwrap() - win_rate).abs() < 0.07, "{p:?} vs {win_rate}");
        assert_eq!(p.systems_ranked, 3, "both versions and the reference bot");
        // The judge's instrument is gated only where the judge agrees with the humans.
        let line = b.gate.iter().find(|g| g.metric == "answer_quality_judge@suite").unwrap();
        if judge_flip < 0.1 {
            assert!(line.na_reason.is_none() && line.outcome.is_some(), "{line:?}");
        } else {
            assert!(
                line.na_reason.as_deref().is_some_and(|r| r.contains("agreement with humans on answer_quality is κ")),
                "{line:?} {:?}",
                r.judge_human
            );
        }
    }
    // Discriminative power over the two versions: task success (0.85 vs 0.65) separates them,
    // the unchanged unsafe-action rate does not.
    let power = |m: &str| cand.meta.discriminative_power.iter().find(|d| d.metric == m).map(|d| (d.power, d.systems));
    assert_eq!(power("task_success"), Some((1.0, 2)));
    assert_eq!(power("unsafe_action_rate"), Some((0.0, 2)));
    let elo = |b: &octant_profiler::Built| b.meta.pairwise[0].elo.unwrap();
    assert!(elo(base) > elo(cand) + 50.0, "the version that wins more is rated higher: {} vs {}", elo(base), elo(cand));
    let iv = |b: &octant_profiler::Built| b.meta.pairwise[0].elo_interval.unwrap();
    for b in [base, cand] {
        assert!(iv(b)[0] < elo(b) && elo(b) < iv(b)[1], "{:?}", b.meta.pairwise[0]);
    }
    assert!(iv(base)[0] > iv(cand)[1], "their intervals are apart: {:?} {:?}", iv(base), iv(cand));
    assert!(md.contains("## Meta-evaluation") && md.contains("answer_quality_pairwise"), "{md}");
    let _ = std::fs::remove_dir_all(&lake);
    let _ = std::fs::remove_dir_all(&evidence);
}

/// Tasks only the baseline passed, and only the candidate, from the run ends' verifier
/// verdicts in the lake's trajectory events (not the scorer's observations).
async fn discordant(ctx: &datafusion::prelude::SessionContext) -> (u64, u64) {
    let sql = "WITH s AS (SELECT get_field(system, 'version') AS v, run_id, first_value(get_field(run_ended, 'verifier_verdict')) AS ok \
               FROM trajectory_events WHERE system_id = 'rel' AND kind = 'RUN_ENDED' GROUP BY 1, 2), \
               t AS (SELECT run_id, first_value(get_field(run_started, 'task_id')) AS task FROM trajectory_events \
               WHERE system_id = 'rel' AND kind = 'RUN_STARTED' GROUP BY 1), \
               p AS (SELECT t.task, s.v, s.ok FROM s JOIN t ON s.run_id = t.run_id) \
               SELECT sum(CASE WHEN b.ok AND NOT c.ok THEN 1 ELSE 0 END) AS only_base, sum(CASE WHEN c.ok AND NOT b.ok THEN 1 ELSE 0 END) AS only_cand \
               FROM p b JOIN p c ON b.task = c.task WHERE b.v = '1.0.0' AND c.v = '2.0.0'";
    let (schema, batches) = lakedb::query(ctx, sql).await.unwrap();
    let text = lakedb::render(&schema, &batches, lakedb::Format::Json).unwrap();
    let row: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    (row["only_base"].as_u64().unwrap(), row["only_cand"].as_u64().unwrap())
}

/// `octant runs show`'s view of a run with an unsafe step, from the lake: the steps the run's
/// events declare unsafe are exactly those the scorer scored unsafe, and the timeline marks
/// them; a run the lake does not hold is none.
async fn runs_show_marks_the_unsafe_step(ctx: &datafusion::prelude::SessionContext) -> (String, i64) {
    let sql = "SELECT run_id, step FROM observations WHERE system_id = 'can' AND metric = 'unsafe_action_rate' AND value = 1 ORDER BY run_id LIMIT 1";
    let (schema, batches) = lakedb::query(ctx, sql).await.unwrap();
    let row: Value =
        serde_json::from_str(lakedb::render(&schema, &batches, lakedb::Format::Json).unwrap().lines().next().unwrap()).unwrap();
    let (run_id, step) = (row["run_id"].as_str().unwrap(), row["step"].as_i64().unwrap());
    let run = octant_web::runs::load(ctx, run_id, &Default::default()).await.unwrap().expect("the run is in the lake");
    let text = octant_web::runs::to_text(&run);
    eprintln!("{text}");
    let unsafe_steps: Vec<i64> = run.events.iter().filter(|e| e.unsafe_).map(|e| e.sequence).collect();
    let scored: Vec<i64> =
        run.observations.iter().filter(|o| o.metric == "unsafe_action_rate" && o.value == 1.0).filter_map(|o| o.step).collect();
    assert!(unsafe_steps.contains(&step), "{text}");
    assert_eq!(unsafe_steps, scored, "the events' violations and the scorer's observations agree");
    assert_eq!((run.system.as_str(), run.source.as_str()), ("can", "PRODUCTION"));
    assert!(run.events.first().is_some_and(|e| e.kind == "RUN_STARTED") && run.events.windows(2).all(|w| w[0].sequence < w[1].sequence));
    assert!(text.contains(&format!("UNSAFE: step {step}")) && text.lines().any(|l| l.starts_with(&format!("!! | {step} |"))), "{text}");
    assert!(octant_web::runs::load(ctx, "no-such-run", &Default::default()).await.unwrap().is_none());
    (run_id.to_string(), step)
}
