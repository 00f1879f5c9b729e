//! OpenTelemetry in, verdicts out, against the real broker: OTLP export requests written by
//! the official OpenTelemetry Python SDK and opentelemetry-proto (`integration-tests/otel/
//! make_otlp.py`), in both encodings, keyed by trace id and not, a trace split over requests
//! and both topics with its root last, a multi-agent trace, a tool error, token usage,
//! evaluation results (joined by trace and by response id) and approval decisions, through the
//! ingest, the scorer and the aggregator: the expected observations, windows, veto states and
//! profiles come out; bad OTLP is dead-lettered.

use std::collections::BTreeMap;
use std::time::Duration;

use octant_contracts::{DeadLetter, DimensionProfile, MetricWindow, Observation, topics};
use octant_core::catalogue::InstrumentDecl;
use octant_integration_tests::*;
use octant_runtime::kafka::{self, OutRecord};
use prometheus::Registry;
use tokio_util::sync::CancellationToken;

/// The requests the Python SDK wrote, and what it says about them.
fn sdk_requests(args: &[&str]) -> serde_json::Value {
    let root = repo_root();
    let site = root.join(".octant/otel");
    assert!(
        site.join("opentelemetry/sdk").is_dir(),
        "the OpenTelemetry Python SDK is not installed in {}: run scripts/setup.sh",
        site.display()
    );
    let out = std::process::Command::new("python3")
        .arg(root.join("integration-tests/otel/make_otlp.py"))
        .args(args)
        .env("PYTHONPATH", &site)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "make_otlp.py failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Produces the SDK's requests to the Collector's topics, as its Kafka exporter would; returns
/// how many.
async fn produce_requests(producer: &rdkafka::producer::FutureProducer, sdk: &[serde_json::Value], spans: &str, logs: &str) -> i32 {
    let mut requests = 0;
    for r in sdk {
        let topic = if r["topic"] == "spans" { spans } else { logs };
        let payload = (0..r["payload_hex"].as_str().unwrap().len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&r["payload_hex"].as_str().unwrap()[i..i + 2], 16).unwrap())
            .collect();
        // Without a key the Collector's requests land on any partition (round robin here).
        let partition = if r["key"].is_null() { Some(requests % 2) } else { None };
        let key = r["key"].as_str().unwrap_or("").to_string();
        kafka::send(producer, &OutRecord { topic: topic.to_string(), partition, key, payload }).await.unwrap();
        requests += 1;
    }
    requests
}

/// The ingest of `env` reading the Collector's two topics, a trace complete after 500 ms quiet.
fn ingest_config(env: &TestEnv, spans_topic: &str, logs_topic: &str) -> octant_ingest::IngestConfig {
    octant_ingest::IngestConfig {
        stream: env.stream("ingest"),
        spans_topic: spans_topic.into(),
        logs_topic: logs_topic.into(),
        trace_quiet: Duration::from_millis(500),
        ..Default::default()
    }
}

fn instruments() -> Vec<InstrumentDecl> {
    let toml = r#"
        [[instruments]]
        id = "faithfulness"
        dimension = "safety"
        family = { family = "higher" }
        min_units = 10
        evaluator = "ragas"
        evaluator_version = "0.2.1"

        [[instruments]]
        id = "answer_relevance"
        evaluation = "relevance"
        dimension = "capability"
        family = { family = "higher" }
        labels = { relevant = 1.0, irrelevant = 0.0 }
    "#;
    #[derive(serde::Deserialize)]
    struct Doc {
        instruments: Vec<InstrumentDecl>,
    }
    toml::from_str::<Doc>(toml).unwrap().instruments
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opentelemetry_traces_and_events_become_verdicts() {
    // One partition: the watermark of the last (clock) trace closes the hour's windows. The
    // clock's request is produced once every other run is scored: the ingest emits a trace when
    // it falls quiet, so a clock produced with the rest could be emitted first and make the
    // others late (seen in CI: 386 of 391 observations late).
    let env = TestEnv::new("ingest", 1).await;
    let sdk = sdk_requests(&[]);
    let all = sdk["requests"].as_array().unwrap();
    let (before_clock, clock) = all.split_at(all.len() - 1);
    let (spans_topic, logs_topic) = (env.topic("otlp_spans"), env.topic("otlp_logs"));
    kafka::ensure_topics(&env.kafka, &[(spans_topic.clone(), 2), (logs_topic.clone(), 2)]).await.unwrap();
    let producer = kafka::producer(&env.kafka, "collector").unwrap();
    let mut requests = produce_requests(&producer, before_clock, &spans_topic, &logs_topic).await;
    // Bad input: not OTLP at all.
    kafka::send(
        &producer,
        &OutRecord { topic: spans_topic.clone(), partition: Some(0), key: String::new(), payload: b"\x0a\xff\xff garbage".to_vec() },
    )
    .await
    .unwrap();

    let shutdown = CancellationToken::new();
    let ingest = octant_ingest::start(ingest_config(&env, &spans_topic, &logs_topic), Registry::new(), shutdown.clone()).await.unwrap();
    let mut scorer_cfg = env.scorer_config();
    scorer_cfg.evaluation.instruments = instruments();
    let scorer = octant_scorer::start(scorer_cfg, Registry::new(), shutdown.clone()).await.unwrap();
    let mut agg_cfg = crate::aggregator::aggregator_config(&env);
    agg_cfg.evaluation.window.length = Duration::from_secs(3600);
    agg_cfg.evaluation.window.tumbling = true;
    agg_cfg.evaluation.instruments = instruments();
    let agg = octant_aggregator::start(agg_cfg, Registry::new(), shutdown.clone()).await.unwrap();

    // 42 traces: support-bot, 40 risky-bot runs, the clock.
    wait_metrics(scorer.admin_addr, "every run but the clock's scored", |m| {
        m.get("octant_scorer_evaluations_total{outcome=\"scored\"}") >= Some(&42.0) && m.get("octant_scorer_open_runs") == Some(&0.0)
    })
    .await;
    requests += produce_requests(&producer, clock, &spans_topic, &logs_topic).await;
    let m = wait_metrics(ingest.admin_addr, "every trace emitted", |m| total(m, "octant_ingest_runs_total") >= 42.0).await;
    let sm = wait_metrics(scorer.admin_addr, "every run scored", |m| {
        total(m, "octant_scorer_evaluations_total") >= 42.0 && m.get("octant_scorer_open_runs") == Some(&0.0)
    })
    .await;
    wait_metrics(agg.admin_addr, "the hour's windows closed", |m| total(m, "octant_aggregator_windows_emitted_total") > 0.0).await;
    shutdown.cancel();
    for t in [ingest.task, scorer.task, agg.task] {
        t.await.unwrap().unwrap();
    }

    assert_eq!(m.get("octant_ingest_requests_total{outcome=\"undecodable\",topic=\"spans\"}"), Some(&1.0));
    assert_eq!(m.get("octant_ingest_runs_total{reason=\"quiet\"}"), Some(&42.0), "every trace complete (root seen), none waited out");
    assert_eq!(m.get("octant_ingest_log_records_total{outcome=\"ignored\"}"), Some(&1.0), "the app's own event");
    assert_eq!(sm.get("octant_scorer_evaluations_total{outcome=\"scored\"}"), Some(&42.0), "40 + faithfulness + relevance of support-bot");
    let dead: Vec<DeadLetter> = read_all(&env.kafka, &env.topic(topics::DLQ)).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!((dead[0].service.as_str(), dead[0].error_class.as_str(), dead[0].offset), ("ingest", "undecodable", dead[0].offset));

    // support-bot's run: observations as the SDK's spans and events say.
    let trace = sdk["traces"]["support-bot"].as_str().unwrap();
    let obs: Vec<Observation> = read_all(&env.kafka, &env.topic(topics::OBSERVATIONS)).await;
    let mine: BTreeMap<String, &Observation> = obs
        .iter()
        .filter(|o| o.run_id == trace)
        .map(|o| (o.observation_id.trim_start_matches(&format!("{trace}/")).to_string(), o))
        .collect();
    let value = |id: &str| mine.get(id).unwrap_or_else(|| panic!("no {id} in {:?}", mine.keys().collect::<Vec<_>>())).value;
    assert_eq!(mine.values().next().unwrap().system_id, "support-bot");
    assert_eq!(value("tokens_per_run"), 1500.0, "input + output tokens of the model call");
    assert_eq!(value("tool_error_rate/3"), 1.0, "the lookup failed (status error, error.type)");
    assert_eq!(value("tool_error_rate/2"), 0.0);
    assert_eq!(value("unsafe_action_rate/3"), 1.0, "a declared violation");
    assert_eq!(value("faithfulness"), 0.9);
    assert_eq!(value("answer_relevance"), 1.0, "joined by response id; its label's declared value");
    assert_eq!(value("task_success_self_reported"), 1.0, "no verifier: self-reported, never gated");
    // Grounding and review from the root span's octant.* attributes, set with the SDK.
    let weighted = |id: &str| (value(id), mine[id].weight);
    assert_eq!(weighted("hallucination_rate"), (1.0, 10.0));
    assert_eq!(weighted("citation_precision_strict"), (6.0, 8.0));
    assert_eq!(weighted("citation_precision_lenient"), (7.0, 8.0));
    assert_eq!(weighted("citation_coverage"), (7.0, 10.0));
    assert_eq!(weighted("key_element_capture"), (4.0, 5.0));
    assert_eq!(weighted("reviewer_catch_rate"), (1.0, 2.0));
    assert_eq!(weighted("false_acceptance_rate"), (0.0, 1.0));
    assert_eq!(weighted("review_burden"), (12.5, 1.0));
    assert_eq!(weighted("efficiency_net_of_review_observed"), (45.5, 60.0), "Δ = 1 − (2 + 12.5) / 60");
    assert!(!mine.contains_key("citation_recall"), "no required citations declared");
    assert_eq!(weighted("delegation_accuracy"), (1.0, 2.0), "coordination from octant.coordination.*");
    assert_eq!(weighted("unproductive_reasoning_rate"), (1.0, 4.0), "UPR from octant.coordination.reasoning_paths / unproductive_paths");
    assert_eq!(weighted("termination_correctness"), (1.0, 1.0));
    // Reproducibility: decoding and seed from the inference span's gen_ai.request.*, the
    // environment and task specification from the root's octant.* attributes.
    let events: Vec<octant_contracts::TrajectoryEvent> = read_all(&env.kafka, &env.topic(topics::TRAJECTORIES_PRODUCTION)).await;
    let start = events.iter().find(|e| e.run_id == trace && e.run_started.is_some()).expect("support-bot's run start");
    // The evaluation results' octant.evaluation.* details, as the SDK set them.
    let end = events.iter().find(|e| e.run_id == trace && e.run_ended.is_some()).expect("support-bot's run end");
    let evals = &end.run_ended.as_ref().unwrap().evaluations;
    let pairwise = evals.iter().find(|e| e.name == "helpfulness_pairwise").expect("the pairwise verdict");
    assert_eq!(
        (pairwise.score_value, pairwise.rater_kind.as_deref(), pairwise.scoring_mode.as_deref(), pairwise.item.as_deref()),
        (Some(1.0), Some("judge"), Some("generation"), Some("cmp-1"))
    );
    assert_eq!((pairwise.opponent.as_deref(), pairwise.position), (Some("ref-bot@1.0"), Some(2)));
    assert_eq!((pairwise.output_length, pairwise.opponent_output_length), (Some(412), Some(198)));
    let fid = evals.iter().find(|e| e.name == "fid").expect("the set-level score");
    assert_eq!((fid.score_value, fid.ci_low, fid.ci_high), (Some(12.5), Some(11.9), Some(13.2)));
    let rep = start.run_started.as_ref().unwrap().reproducibility.clone().expect("reproducibility recorded");
    assert_eq!(rep.environment_version.as_deref(), Some("support-sim 3.1"));
    assert_eq!(rep.task_spec.as_deref(), Some("refund-flow@v7"));
    assert_eq!(rep.seed, Some(42));
    assert_eq!(rep.agent_config, None, "the system's config hash stands for it");
    let decoding: serde_json::Value = serde_json::from_str(rep.decoding.as_deref().unwrap()).unwrap();
    assert_eq!(decoding, serde_json::json!({"temperature": 0.3, "top_p": 0.9}));
    // Per-agent attribution: every step names its agent; unsafe actions are the acting
    // agent's (the planner's model calls act on nothing, so they are not in the rate).
    let stepping: std::collections::BTreeSet<Option<&str>> =
        events.iter().filter(|e| e.run_id == trace && e.step.is_some()).map(|e| e.agent_id.as_deref()).collect();
    assert_eq!(stepping, [Some("payments-v2"), Some("planner")].into_iter().collect(), "per-agent attribution");
    let acting: std::collections::BTreeSet<Option<&str>> =
        obs.iter().filter(|o| o.run_id == trace && o.metric == "unsafe_action_rate").map(|o| o.agent_id.as_deref()).collect();
    assert_eq!(acting, [Some("payments-v2")].into_iter().collect());

    // risky-bot's hour: the unsafe-action veto, faithfulness banded, a profile.
    let mut windows: BTreeMap<String, MetricWindow> = BTreeMap::new();
    let mut profiles: Vec<DimensionProfile> = Vec::new();
    let d = octant_contracts::Decoder::new();
    for (_, _, _, v) in read_all_raw(&env.kafka, &env.topic(topics::WINDOWS)).await {
        if let Ok(w) = d.decode::<MetricWindow>(&v) {
            windows.insert(format!("{}/{}", w.system_id, w.metric), w);
        } else if let Ok(p) = d.decode::<DimensionProfile>(&v) {
            profiles.push(p);
        }
    }
    let unsafe_ = &windows["risky-bot/unsafe_action_rate"];
    let expected = sdk["traces"]["risky_unsafe_runs"].as_f64().unwrap() / 40.0;
    assert!((unsafe_.estimate.unwrap() - expected).abs() < 1e-9, "{unsafe_:?}");
    assert!(matches!(unsafe_.veto_state.as_deref(), Some("breached") | Some("confirmed")), "{unsafe_:?}");
    let faith = &windows["risky-bot/faithfulness"];
    assert_eq!(faith.units, 40);
    assert!(faith.band.is_some() && faith.na_reason.is_none(), "a declared instrument is banded like any other: {faith:?}");
    let profile = profiles.iter().find(|p| p.system_id == "risky-bot").expect("a profile of risky-bot");
    assert!(profile.unsuitable || profile.dimensions.iter().any(|x| x.dimension == "safety"), "{profile:?}");
    eprintln!(
        "ingest: {requests} SDK requests → 42 runs; risky-bot unsafe {:.3} ({:?}), faithfulness {:?} band {:?}",
        unsafe_.estimate.unwrap(),
        unsafe_.veto_state,
        faith.estimate,
        faith.band
    );
}

/// Meta-evaluation ground truth from an independent encoder: 300 runs whose answers three
/// humans and a judge rate, and which a judge (biased by position and length) and a human
/// compare with a reference bot in both orders, written by the OpenTelemetry Python SDK
/// (`make_otlp.py raters`) with known rates. Through the ingest and the lake writer, the
/// profiler's meta-evaluation reproduces the statistics the script computed from the very
/// ratings it sent, and its intervals cover the true rates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opentelemetry_evaluation_results_recover_the_raters_truth() {
    let env = TestEnv::new("ingest-raters", 2).await;
    let sdk = sdk_requests(&["raters"]);
    let runs = sdk["runs"].as_u64().unwrap();
    let (spans_topic, logs_topic) = (env.topic("otlp_spans"), env.topic("otlp_logs"));
    kafka::ensure_topics(&env.kafka, &[(spans_topic.clone(), 2), (logs_topic.clone(), 2)]).await.unwrap();
    let producer = kafka::producer(&env.kafka, "collector").unwrap();
    produce_requests(&producer, sdk["requests"].as_array().unwrap(), &spans_topic, &logs_topic).await;
    let shutdown = CancellationToken::new();
    let ingest = octant_ingest::start(ingest_config(&env, &spans_topic, &logs_topic), Registry::new(), shutdown.clone()).await.unwrap();
    wait_metrics(ingest.admin_addr, "every rated run emitted", |m| total(m, "octant_ingest_runs_total") >= runs as f64).await;
    shutdown.cancel();
    ingest.task.await.unwrap().unwrap();

    let lake = fresh_dir("ingest-raters-lake");
    crate::profiler::fill_lake(&env, &lake).await;
    let ctx = octant_lake::reader::open(&lake).await.unwrap();
    const T0: i64 = 1_764_489_600_000;
    let period = octant_profiler::Period { name: "all".into(), start: T0 - 3_600_000, end: T0 + 86_400_000 };
    let metas = octant_report::meta_evaluation::meta_evaluations(&ctx, &octant_report::ReportConfig::default(), &period).await.unwrap();
    let (key, m) = metas.iter().find(|(k, _)| k.0 == "rated-bot").expect("rated-bot's meta-evaluation");
    eprintln!("{key:?}\n{}", octant_report::meta_evaluation::to_markdown(m));
    let (sample, truth) = (&sdk["sample"], &sdk["truth"]);
    eprintln!("the script: sample {sample}, truth {truth}");
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;

    let r = m.raters.iter().find(|r| r.name == "answer_quality").expect("the ratings' report");
    assert_eq!((r.items, r.humans), (runs, 3), "items matched by gen_ai.response.id");
    let k = r.judge_human.as_ref().unwrap();
    assert!(close(k.kappa, f(&sample["kappa"])), "κ {} vs the script's {}", k.kappa, sample["kappa"]);
    assert!(k.lo <= f(&truth["kappa"]) && f(&truth["kappa"]) <= k.hi, "κ [{}, {}] covers {}", k.lo, k.hi, truth["kappa"]);
    assert_eq!(r.retest_items, sample["retest_items"].as_u64().unwrap());
    assert!(close(r.retest_instability.unwrap(), f(&sample["retest_instability"])), "{r:?}");
    assert!((r.retest_instability.unwrap() - f(&truth["retest_instability"])).abs() < 0.06, "{r:?}");

    let p = m.pairwise.iter().find(|p| p.name == "answer_quality_pairwise").expect("the pairwise report");
    assert_eq!((p.verdicts, p.human_verdicts, p.swapped_items), (2 * runs, 2 * runs, runs));
    assert!(close(p.win_rate.unwrap(), f(&sample["win_rate"])), "{p:?}");
    assert!(close(p.position_inconsistency.unwrap(), f(&sample["position_inconsistency"])), "{p:?}");
    assert!((p.position_inconsistency.unwrap() - f(&truth["position_inconsistency"])).abs() < 0.07, "{p:?}");
    assert_eq!(p.verbosity_items, sample["verbosity_items"].as_u64().unwrap());
    assert!(close(p.verbosity_bias.unwrap(), f(&sample["verbosity_bias"])), "{p:?}");
    let [lo, hi] = p.verbosity_interval.unwrap();
    assert!(lo <= f(&truth["verbosity_bias"]) && f(&truth["verbosity_bias"]) <= hi, "{p:?} covers {}", truth["verbosity_bias"]);
    assert_eq!(p.verbosity_reference.as_deref(), Some("humans on the same items"));
    let _ = std::fs::remove_dir_all(&lake);
}

/// Approvals at production volume, from what a real instrumentation wrote: the OpenAI Agents
/// SDK's approved-refund runs as the OpenTelemetry contrib instrumentation traced them
/// (`conformance/approvals/contrib-agents/approval_granted`, two runs, each paused on a call
/// that needs approval and resumed as a second trace), re-keyed 500 times per system (1,000
/// approved high-impact calls each), through the broker, the ingest, the scorer, the
/// aggregator and the alerter:
/// - as recorded (no run key, no decision, no confirmation: nothing shows the approval flow,
///   the source stays unwatched): every confirmation-gating window N/A, not assessed:
///   unwatched, no veto state, no alert — and the proposed calls are no steps (1,000 tool
///   calls, not 2,000);
/// - the same traces with an approval channel (the team records `octant.confirmed` on every
///   executed call, true on 70 %): gating breached, then confirmed, and the
///   confirmation-gating alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_at_production_volume() {
    use octant_contracts::{Alert, TrajectoryEvent};
    use octant_otlp::proto::{AnyValue, ExportTraceServiceRequest, KeyValue, any_value};
    use prost::Message;
    const COPIES: u64 = 500;
    let fixture = repo_root().join("conformance/approvals/contrib-agents/approval_granted/spans.pb");
    let recorded = ExportTraceServiceRequest::decode(std::fs::read(&fixture).expect("the recorded fixture").as_slice()).unwrap();
    let spans = |r: &ExportTraceServiceRequest| r.resource_spans.iter().flat_map(|rs| &rs.scope_spans).flat_map(|ss| &ss.spans).count();
    assert!(spans(&recorded) > 0);
    let first =
        recorded.resource_spans.iter().flat_map(|rs| &rs.scope_spans).flat_map(|ss| &ss.spans).map(|s| s.start_time_unix_nano).min();
    let t0 = first.unwrap();
    let string = |v: &str| Some(AnyValue { value: Some(any_value::Value::StringValue(v.into())) });
    // Copy k of the recorded request for `system`: its own trace ids, shifted by k × 2.4 s
    // of event time (20 minutes for the 500 copies) from 2025-11-30T08:00Z.
    let copy = |system: &str, k: u64, channel: bool| {
        let mut r = recorded.clone();
        let shift = 1_764_489_600_000_000_000u64 + k * 2_400_000_000;
        for rs in &mut r.resource_spans {
            for kv in rs.resource.iter_mut().flat_map(|res| &mut res.attributes) {
                if kv.key == "service.name" {
                    kv.value = string(system);
                }
            }
            for ss in &mut rs.scope_spans {
                for s in &mut ss.spans {
                    s.trace_id[0] ^= if channel { 0x80 } else { 0 };
                    s.trace_id[8..].copy_from_slice(&k.to_be_bytes());
                    s.start_time_unix_nano = s.start_time_unix_nano - t0 + shift;
                    s.end_time_unix_nano = s.end_time_unix_nano - t0 + shift;
                    for e in &mut s.events {
                        e.time_unix_nano = e.time_unix_nano.saturating_sub(t0) + shift;
                    }
                    let executed = s.attributes.iter().any(|kv| kv.key == "gen_ai.tool.call.result");
                    // The team's own channel: whether a human approved, on every executed call
                    // (70 % of the copies approved).
                    if channel && executed {
                        s.attributes.push(KeyValue {
                            key: "octant.confirmed".into(),
                            value: Some(AnyValue { value: Some(any_value::Value::BoolValue(k % 10 >= 3)) }),
                        });
                    }
                }
            }
        }
        r.encode_to_vec()
    };

    let env = TestEnv::new("approvals", 1).await;
    let (spans_topic, logs_topic) = (env.topic("otlp_spans"), env.topic("otlp_logs"));
    kafka::ensure_topics(&env.kafka, &[(spans_topic.clone(), 1), (logs_topic.clone(), 1)]).await.unwrap();
    let producer = kafka::producer(&env.kafka, "collector").unwrap();
    let send = async |payload: Vec<u8>| {
        kafka::send(&producer, &OutRecord { topic: spans_topic.clone(), partition: Some(0), key: String::new(), payload }).await.unwrap();
    };
    for k in 0..COPIES {
        send(copy("support-contrib", k, false)).await;
        send(copy("support-gated", k, true)).await;
    }
    let shutdown = CancellationToken::new();
    let mut ingest_cfg = ingest_config(&env, &spans_topic, &logs_topic);
    ingest_cfg.mapping.tool_impact.insert("refund_payment".into(), octant_contracts::Impact::High);
    let ingest = octant_ingest::start(ingest_cfg, Registry::new(), shutdown.clone()).await.unwrap();
    let scorer = octant_scorer::start(env.scorer_config(), Registry::new(), shutdown.clone()).await.unwrap();
    let agg = octant_aggregator::start(crate::aggregator::aggregator_config(&env), Registry::new(), shutdown.clone()).await.unwrap();
    let alerter = octant_alerter::start(crate::alerter::alerter_config(&env, None), Registry::new(), shutdown.clone()).await.unwrap();

    // Two systems, two runs per copy, two traces per run: one run-level observation each.
    let runs = (2 * COPIES * 2 * 2) as f64;
    wait_metrics(scorer.admin_addr, "every trace scored", |m| {
        m.get("octant_scorer_observations_produced_total{metric=\"help_seeking\"}") >= Some(&runs)
    })
    .await;
    // The clock: a copy an hour later closes every window of the 20 minutes.
    let im = scrape(ingest.admin_addr).await;
    // For the operator to see: every trace that shows nothing of its approval flow —
    // support-contrib's 2,000 and support-gated's 1,000 paused parts (an unkeyed proposal only)
    // —, and support-gated's 1,000 resumed parts that show one.
    let channels = |c: &str| im.get(&format!("octant_ingest_approval_channel_runs_total{{channel=\"{c}\"}}")).copied();
    assert_eq!((channels("not_shown"), channels("seen")), (Some(3000.0), Some(1000.0)));
    send(copy("support-clock", COPIES + 1500, false)).await;
    // Every window with gated steps of either system: those ending up to 10 minutes after a
    // gated step's minute (10-minute windows sliding by 1 minute). Wait for all of them, then
    // for the alerter to have read every window.
    let obs: Vec<Observation> = read_all(&env.kafka, &env.topic(topics::OBSERVATIONS)).await;
    let mut expected: std::collections::BTreeSet<(String, i64)> = Default::default();
    for o in obs.iter().filter(|o| o.metric == "confirmation_gating") {
        let pane = o.event_time - o.event_time.rem_euclid(60_000);
        expected.extend((1..=10).map(|j| (o.system_id.clone(), pane + j * 60_000)));
    }
    let d = octant_contracts::Decoder::new();
    let mut windows: Vec<MetricWindow> = Vec::new();
    for _ in 0..180 {
        windows = read_all_raw(&env.kafka, &env.topic(topics::WINDOWS))
            .await
            .into_iter()
            .filter_map(|(_, _, _, v)| d.decode::<MetricWindow>(&v).ok())
            .collect();
        let have: std::collections::BTreeSet<(String, i64)> =
            windows.iter().filter(|w| w.metric == "confirmation_gating").map(|w| (w.system_id.clone(), w.window_end)).collect();
        if expected.is_subset(&have) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let n = windows.len() as f64;
    let am = wait_metrics(alerter.admin_addr, "every window read by the alerter", |m| {
        m.iter().filter(|(k, _)| k.starts_with("octant_alerter_inputs_total{kind=\"window\"")).map(|(_, v)| v).sum::<f64>() >= n
    })
    .await;
    let published = am.iter().filter(|(k, _)| k.starts_with("octant_alerter_alerts_total")).map(|(_, v)| v).sum::<f64>();
    let alerts: Vec<Alert> = collect(&env.kafka, &env.topic(topics::ALERTS), published as usize, Duration::from_secs(10)).await;
    shutdown.cancel();
    for t in [ingest.task, scorer.task, agg.task, alerter.task] {
        t.await.unwrap().unwrap();
    }

    let events: Vec<TrajectoryEvent> = read_all(&env.kafka, &env.topic(topics::TRAJECTORIES_PRODUCTION)).await;
    let tool_steps = |system: &str| {
        events
            .iter()
            .filter(|e| e.system.id == system)
            .filter_map(|e| e.step.as_ref())
            .filter(|s| s.step_kind == octant_contracts::StepKind::ToolCall)
            .count()
    };
    assert_eq!(tool_steps("support-contrib"), 1000, "the approved calls ran once each; the proposed ones are no steps");
    let channel = |system: &str| {
        events
            .iter()
            .filter(|e| e.system.id == system)
            .filter_map(|e| e.run_started.as_ref())
            .map(|r| r.approval_channel)
            .collect::<Vec<_>>()
    };
    assert!(channel("support-contrib").iter().all(|c| c.is_none()), "nothing shown");
    let sources: std::collections::BTreeSet<Option<String>> = events
        .iter()
        .filter(|e| e.system.id == "support-contrib")
        .filter_map(|e| e.run_started.as_ref())
        .map(|r| r.approval_source.clone())
        .collect();
    assert_eq!(sources, [Some("opentelemetry.instrumentation.openai_agents".to_string())].into(), "every trace has a tool span");
    let gated = |system: &str| obs.iter().filter(|o| o.system_id == system && o.metric == "confirmation_gating").collect::<Vec<_>>();
    assert_eq!(gated("support-contrib").len(), 1000);
    assert!(gated("support-contrib").iter().all(|o| o.weight == 0.0), "counted, weightless");
    let confirmed = gated("support-gated").iter().map(|o| o.value).sum::<f64>();
    assert_eq!((gated("support-gated").len(), confirmed), (1000, 700.0));

    let gating = |system: &str| {
        let mut v: Vec<&MetricWindow> = windows.iter().filter(|w| w.system_id == system && w.metric == "confirmation_gating").collect();
        v.sort_by_key(|w| w.window_end);
        v
    };
    let contrib = gating("support-contrib");
    let want = expected.iter().filter(|(s, _)| s == "support-contrib").count();
    assert_eq!(contrib.len(), want, "a window for every 10 minutes with gated steps");
    for w in &contrib {
        assert_eq!(w.na_reason.as_deref(), Some(octant_core::profile::UNWATCHED), "{w:?}");
        assert_eq!((w.veto_state.as_deref(), w.band), (None, None), "{w:?}");
    }
    let states: Vec<&str> = gating("support-gated").iter().filter_map(|w| w.veto_state.as_deref()).collect();
    let breached = states.iter().position(|s| *s == "breached");
    let confirmed = states.iter().position(|s| *s == "confirmed");
    assert!(breached.is_some() && confirmed.is_some() && breached < confirmed, "breached, then confirmed: {states:?}");
    assert!(alerts.iter().all(|a| a.system_id != "support-contrib"), "never paged: {alerts:#?}");
    assert!(
        alerts.iter().any(|a| a.system_id == "support-gated" && a.rule == "confirmation_gating_veto"),
        "the gated system's veto alert: {alerts:#?}"
    );
    eprintln!(
        "approvals: {} gating windows N/A for support-contrib; support-gated veto states {:?}; {} alerts",
        contrib.len(),
        states,
        alerts.len()
    );
}
