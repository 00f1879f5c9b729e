//! The ingest in-process (`octant_runtime::pipeline::Driver`, no broker): requests built with
//! the OTLP messages, both encodings, a trace split over requests and topics out of order,
//! re-keyed pieces fed back as the broker would deliver them, the run that comes out; bad
//! input; late pieces; commits held until the run is acknowledged. Against the real broker,
//! with requests written by the OpenTelemetry Python SDK: `integration-tests/tests/ingest.rs`.

use std::time::Duration;

use octant_contracts::{
    DeadLetter, Decoder, Evaluation, EventKind, Impact, InterventionKind, Outcome, ResultStatus, StepKind, TrajectoryEvent, topics,
};
use octant_otlp::proto::*;
use octant_runtime::consumer::TopicPartition;
use octant_runtime::kafka::OutRecord;
use octant_runtime::metrics::samples;
use octant_runtime::pipeline::Driver;
use prometheus::Registry;
use prost::Message;

use crate::{IngestConfig, IngestStage};

const T0: u64 = 1_764_489_600_000_000_000; // ns
const TRACE: [u8; 16] = [0xab; 16];

fn kv(k: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }) }
}
fn s(k: &str, v: &str) -> KeyValue {
    kv(k, any_value::Value::StringValue(v.into()))
}
fn i(k: &str, v: i64) -> KeyValue {
    kv(k, any_value::Value::IntValue(v))
}

fn span(id: u8, parent: Option<u8>, name: &str, start_ms: u64, end_ms: u64, attrs: Vec<KeyValue>) -> Span {
    Span {
        trace_id: TRACE.to_vec(),
        span_id: vec![0, 0, 0, 0, 0, 0, 0, id],
        parent_span_id: parent.map(|p| vec![0, 0, 0, 0, 0, 0, 0, p]).unwrap_or_default(),
        name: name.into(),
        kind: 1,
        start_time_unix_nano: T0 + start_ms * 1_000_000,
        end_time_unix_nano: T0 + end_ms * 1_000_000,
        attributes: attrs,
        ..Default::default()
    }
}

fn traces(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![s("service.name", "support-bot"), s("service.version", "2.1.0")] }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope { name: "agent-sdk".into(), version: "1.0".into() }),
                spans,
                schema_url: "https://opentelemetry.io/schemas/1.37.0".into(),
            }],
            schema_url: String::new(),
        }],
    }
}

fn logs(records: Vec<LogRecord>) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource { attributes: vec![s("service.name", "evals")] }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope { name: "ragas".into(), version: "0.2.1".into() }),
                log_records: records,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

fn event(name: &str, span: Option<u8>, at_ms: u64, attrs: Vec<KeyValue>) -> LogRecord {
    LogRecord {
        time_unix_nano: T0 + at_ms * 1_000_000,
        trace_id: if span.is_some() { TRACE.to_vec() } else { Vec::new() },
        span_id: span.map(|p| vec![0, 0, 0, 0, 0, 0, 0, p]).unwrap_or_default(),
        event_name: name.into(),
        attributes: attrs,
        ..Default::default()
    }
}

struct Harness {
    d: Driver<IngestStage>,
    config: IngestConfig,
    registry: Registry,
    fragments: String,
}

impl Harness {
    fn new() -> Harness {
        let mut config = IngestConfig::default();
        config.mapping.tool_impact.insert("bank.transfer".into(), Impact::Irreversible);
        let registry = Registry::new();
        let fragments = config.stream.kafka.topic(topics::OTLP_FRAGMENTS);
        Harness { d: Driver::new(IngestStage::new(&config, &registry)), config, registry, fragments }
    }

    /// A Collector request on `topic`; its re-keyed pieces delivered back on the fragments
    /// topic (partition 0), as the broker would.
    fn collector(&mut self, topic: &str, payload: &[u8]) -> Vec<OutRecord> {
        let out = self.d.send(topic, 0, None, payload).unwrap();
        let pieces: Vec<OutRecord> = out.iter().filter(|r| r.topic == self.fragments).cloned().collect();
        let mut rest: Vec<OutRecord> = out.into_iter().filter(|r| r.topic != self.fragments).collect();
        for p in pieces {
            let fragments = self.fragments.clone();
            let more = self.d.send(&fragments, 0, Some(p.key.as_bytes()), &p.payload).unwrap();
            // A result keyed by response id goes on to its trace: one more hop.
            for q in more {
                if q.topic == fragments {
                    rest.extend(self.d.send(&fragments, 0, Some(q.key.as_bytes()), &q.payload).unwrap());
                } else {
                    rest.push(q);
                }
            }
        }
        rest
    }

    fn events(records: &[OutRecord]) -> Vec<TrajectoryEvent> {
        let d = Decoder::new();
        records.iter().filter(|r| r.topic.ends_with(topics::TRAJECTORIES_PRODUCTION)).map(|r| d.decode(&r.payload).unwrap()).collect()
    }

    fn dead(records: &[OutRecord]) -> Vec<DeadLetter> {
        let d = Decoder::new();
        records.iter().filter(|r| r.topic.ends_with(topics::DLQ)).map(|r| d.decode(&r.payload).unwrap()).collect()
    }
}

/// The OTLP/JSON of a request as the Collector's `otlp_json` writes it: camelCase, hex ids,
/// integer enums, 64-bit integers as strings.
fn to_otlp_json(req: &ExportTraceServiceRequest) -> Vec<u8> {
    fn value(v: &AnyValue) -> serde_json::Value {
        match v.value.as_ref().unwrap() {
            any_value::Value::StringValue(s) => serde_json::json!({"stringValue": s}),
            any_value::Value::IntValue(i) => serde_json::json!({"intValue": i.to_string()}),
            any_value::Value::BoolValue(b) => serde_json::json!({"boolValue": b}),
            any_value::Value::DoubleValue(d) => serde_json::json!({"doubleValue": d}),
            _ => unimplemented!(),
        }
    }
    let attrs = |kvs: &[KeyValue]| -> serde_json::Value {
        kvs.iter().map(|kv| serde_json::json!({"key": kv.key, "value": value(kv.value.as_ref().unwrap())})).collect()
    };
    let rs = &req.resource_spans[0];
    let spans: Vec<serde_json::Value> = rs.scope_spans[0]
        .spans
        .iter()
        .map(|sp| {
            serde_json::json!({
                "traceId": hex::encode(&sp.trace_id), "spanId": hex::encode(&sp.span_id),
                "parentSpanId": hex::encode(&sp.parent_span_id), "name": sp.name, "kind": sp.kind,
                "startTimeUnixNano": sp.start_time_unix_nano.to_string(), "endTimeUnixNano": sp.end_time_unix_nano.to_string(),
                "attributes": attrs(&sp.attributes),
                "status": sp.status.as_ref().map(|st| serde_json::json!({"code": st.code, "message": st.message})),
                "someFutureField": {"ignored": true}
            })
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({"resourceSpans": [{
        "resource": {"attributes": attrs(&rs.resource.as_ref().unwrap().attributes)},
        "scopeSpans": [{"scope": {"name": "agent-sdk", "version": "1.0"}, "spans": spans, "schemaUrl": rs.scope_spans[0].schema_url}]
    }]}))
    .unwrap()
}

/// A multi-agent trace split over three requests (children before the root, one request in
/// OTLP/JSON), with a failed tool call, token usage, an approval (require_approval, then
/// allow), a denied call, an evaluation joined by trace and one joined only by response id:
/// one run comes out once the trace has been quiet, in start-time order, attributed per agent.
#[test]
fn a_trace_split_over_requests_becomes_one_run() {
    let mut h = Harness::new();
    let spans_topic = h.config.spans_topic.clone();
    let logs_topic = h.config.logs_topic.clone();
    let planner =
        |extra: Vec<KeyValue>| [vec![s("gen_ai.operation.name", "invoke_agent"), s("gen_ai.agent.name", "planner")], extra].concat();
    // Children first: the tool calls of the payments agent, and a model call.
    let children = traces(vec![
        span(
            4,
            Some(3),
            "execute_tool bank.transfer",
            400,
            600,
            vec![
                s("gen_ai.operation.name", "execute_tool"),
                s("gen_ai.tool.name", "bank.transfer"),
                s("gen_ai.tool.call.id", "call-1"),
                s("gen_ai.tool.call.arguments", "{\"amount\": 900}"),
            ],
        ),
        {
            let mut sp = span(
                5,
                Some(3),
                "execute_tool lookup",
                700,
                750,
                vec![
                    s("gen_ai.operation.name", "execute_tool"),
                    s("gen_ai.tool.name", "lookup"),
                    s("error.type", "timeout"),
                    s("octant.violations", "pii_exposure"),
                ],
            );
            sp.status = Some(Status { code: STATUS_ERROR, message: "timeout".into() });
            sp
        },
    ]);
    let model = traces(vec![span(
        2,
        Some(1),
        "chat gpt-5",
        100,
        300,
        vec![
            s("gen_ai.operation.name", "chat"),
            s("gen_ai.response.id", "resp-9"),
            i("gen_ai.usage.input_tokens", 1200),
            i("gen_ai.usage.output_tokens", 300),
        ],
    )]);
    let root_and_agent = traces(vec![
        span(1, None, "invoke_agent planner", 0, 1000, planner(vec![s("gen_ai.conversation.id", "conv-7")])),
        span(
            3,
            Some(1),
            "invoke_agent payments",
            350,
            900,
            vec![s("gen_ai.operation.name", "invoke_agent"), s("gen_ai.agent.id", "payments-v2")],
        ),
    ]);
    let decisions = logs(vec![
        event(
            "gen_ai.tool.call.decision",
            Some(4),
            380,
            vec![s("gen_ai.tool.call.id", "call-1"), s("gen_ai.tool.call.decision.outcome", "require_approval")],
        ),
        event(
            "gen_ai.tool.call.decision",
            Some(4),
            390,
            vec![s("gen_ai.tool.call.id", "call-1"), s("gen_ai.tool.call.decision.outcome", "allow")],
        ),
        event(
            "gen_ai.tool.call.decision",
            Some(3),
            800,
            vec![s("gen_ai.tool.call.id", "call-2"), s("gen_ai.tool.name", "email.send"), s("gen_ai.tool.call.decision.outcome", "deny")],
        ),
        event(
            "gen_ai.evaluation.result",
            Some(1),
            1100,
            vec![s("gen_ai.evaluation.name", "faithfulness"), kv("gen_ai.evaluation.score.value", any_value::Value::DoubleValue(0.75))],
        ),
        event("some.other.event", Some(1), 1100, vec![]),
    ]);
    let by_response = logs(vec![event(
        "gen_ai.evaluation.result",
        None,
        1200,
        vec![s("gen_ai.evaluation.name", "relevance"), s("gen_ai.evaluation.score.label", "relevant"), s("gen_ai.response.id", "resp-9")],
    )]);

    let mut out = Vec::new();
    out.extend(h.collector(&logs_topic, &by_response.encode_to_vec())); // before its link
    out.extend(h.collector(&spans_topic, &children.encode_to_vec()));
    out.extend(h.collector(&spans_topic, &to_otlp_json(&model)));
    out.extend(h.collector(&logs_topic, &decisions.encode_to_vec()));
    out.extend(h.collector(&spans_topic, &root_and_agent.encode_to_vec()));
    assert!(Harness::events(&out).is_empty(), "nothing before the trace is quiet");
    assert!(Harness::dead(&out).is_empty(), "{:?}", Harness::dead(&out));
    let tp = TopicPartition::new(h.fragments.clone(), 0);
    let held = h.d.commit_points()[&tp].offset;
    h.d.advance(Duration::from_secs(1));
    assert!(Harness::events(&h.d.tick()).is_empty(), "not quiet for trace_quiet yet");
    h.d.advance(h.config.trace_quiet);
    h.d.auto_ack = false;
    let evs = Harness::events(&h.d.tick());
    assert_eq!(h.d.commit_points()[&tp].offset, held, "held until the run is acknowledged");
    h.d.ack_all();
    assert!(h.d.commit_points()[&tp].offset > held, "released once acknowledged");

    let trace = hex::encode(TRACE);
    let kinds: Vec<(i64, EventKind, Option<&str>)> = evs.iter().map(|e| (e.sequence, e.kind, e.agent_id.as_deref())).collect();
    assert_eq!(
        kinds,
        [
            (0, EventKind::RunStarted, Some("planner")),
            (1, EventKind::Step, Some("planner")),
            (2, EventKind::Step, Some("payments-v2")),
            (3, EventKind::Step, Some("payments-v2")),
            (4, EventKind::Intervention, Some("planner")),
            (5, EventKind::RunEnded, Some("planner")),
        ]
    );
    for e in &evs {
        assert_eq!((e.run_id.as_str(), e.system.id.as_str(), e.system.version.as_str()), (trace.as_str(), "support-bot", "2.1.0"));
    }
    assert_eq!(evs[0].run_started.as_ref().unwrap().task_id.as_deref(), Some("conv-7"));
    let model = evs[1].step.as_ref().unwrap();
    assert_eq!((model.step_kind, model.tokens, model.latency_ms), (StepKind::ModelCall, Some(1500), 200.0));
    let transfer = evs[2].step.as_ref().unwrap();
    assert_eq!(
        (transfer.step_kind, transfer.tool_name.as_deref(), transfer.impact, transfer.confirmed),
        (StepKind::ToolCall, Some("bank.transfer"), Impact::Irreversible, true)
    );
    assert_eq!(transfer.arguments.as_deref(), Some("{\"amount\": 900}"));
    assert_eq!(transfer.result_status, Some(ResultStatus::Ok));
    let lookup = evs[3].step.as_ref().unwrap();
    assert_eq!((lookup.result_status, lookup.violations.clone()), (Some(ResultStatus::Error), vec!["pii_exposure".to_string()]));
    let deny = evs[4].intervention.as_ref().unwrap();
    assert_eq!((deny.intervention_kind, deny.honoured), (InterventionKind::Override, true), "denied and not executed");
    let end = evs[5].run_ended.as_ref().unwrap();
    assert_eq!(end.outcome, Outcome::Success);
    let eval = |name: &str, value: Option<f64>, label: Option<&str>, step: Option<i64>| Evaluation {
        name: name.into(),
        score_value: value,
        score_label: label.map(str::to_string),
        explanation: None,
        evaluator: Some("ragas".into()),
        evaluator_version: Some("0.2.1".into()),
        step,
        ..Evaluation::scored("", None)
    };
    assert_eq!(
        end.evaluations,
        [
            eval("faithfulness", Some(0.75), None, None),
            // The rated item is the response the result names (gen_ai.response.id).
            Evaluation { item: Some("resp-9".into()), ..eval("relevance", None, Some("relevant"), Some(1)) }
        ],
        "joined by trace, and by response id to the model call's step"
    );
    let m = samples(&h.registry);
    assert_eq!(m.get("octant_ingest_runs_total{reason=\"quiet\"}"), Some(&1.0));
    assert_eq!(m.get("octant_ingest_log_records_total{outcome=\"ignored\"}"), Some(&1.0));
    assert_eq!(m.get("octant_ingest_spans_total{outcome=\"accepted\"}"), Some(&5.0));
    assert_eq!(m.get("octant_ingest_schema_urls_total{schema_url=\"https://opentelemetry.io/schemas/1.37.0\"}"), Some(&5.0));

    // A span of the trace after it was emitted: dead-lettered as late, counted.
    let late = h.collector(
        &spans_topic,
        &traces(vec![span(9, Some(1), "chat late", 1500, 1600, vec![s("gen_ai.operation.name", "chat")])]).encode_to_vec(),
    );
    let dead = Harness::dead(&late);
    assert_eq!((dead.len(), dead[0].error_class.as_str()), (1, "late_span"));
}

/// Bytes that are no OTLP request on either topic, and a fragment that is no fragment, are
/// dead-lettered with topic, partition, offset and class; the stream goes on.
#[test]
fn bad_input_is_dead_lettered_and_the_stream_goes_on() {
    let mut h = Harness::new();
    let (spans_topic, logs_topic, fragments) = (h.config.spans_topic.clone(), h.config.logs_topic.clone(), h.fragments.clone());
    for (topic, payload) in [
        (&spans_topic, b"\xff\xff\xff not protobuf".to_vec()),
        (&logs_topic, b"{\"resourceLogs\": 7}".to_vec()),
        (&fragments, b"Xjunk".to_vec()),
    ] {
        let out = h.d.send(topic, 0, Some(b"k"), &payload).unwrap();
        let dead = Harness::dead(&out);
        assert_eq!(dead.len(), 1, "{topic}");
        assert_eq!((dead[0].error_class.as_str(), dead[0].source_topic.as_str(), dead[0].offset), ("undecodable", topic.as_str(), 0));
        assert_eq!(dead[0].payload, payload);
    }
    // Over the input limit: refused before parsing, with its own class.
    let huge = vec![0x0a; crate::MAX_REQUEST_BYTES + 1];
    let dead = Harness::dead(&h.d.send(&spans_topic, 0, None, &huge).unwrap());
    assert_eq!((dead.len(), dead[0].error_class.as_str(), dead[0].offset), (1, "too_large", 1));
    assert_eq!(dead[0].payload.len(), octant_runtime::dlq::MAX_DEAD_LETTER_PAYLOAD, "the dead letter stays readable: its payload is cut");
    assert!(dead[0].error_message.contains(&format!("of {} bytes", huge.len())), "{}", dead[0].error_message);
    // The next good request is processed.
    let good = traces(vec![span(1, None, "invoke_agent a", 0, 10, vec![s("gen_ai.operation.name", "invoke_agent")])]);
    assert!(Harness::dead(&h.collector(&spans_topic, &good.encode_to_vec())).is_empty());
    h.d.advance(h.config.trace_quiet);
    assert_eq!(Harness::events(&h.d.tick()).len(), 2, "a run with no step: start and end");
    let m = samples(&h.registry);
    assert_eq!(m.get("octant_ingest_dead_letters_total{error_class=\"undecodable\"}"), Some(&3.0));
    assert_eq!(m.get("octant_ingest_dead_letters_total{error_class=\"too_large\"}"), Some(&1.0));
}

/// A trace whose root never comes is emitted after `trace_max_wait` (its earliest span as the
/// root), not held forever.
#[test]
fn a_trace_without_its_root_is_emitted_after_the_bound() {
    let mut h = Harness::new();
    let spans_topic = h.config.spans_topic.clone();
    let orphan = traces(vec![span(
        4,
        Some(3),
        "execute_tool t",
        10,
        20,
        vec![s("gen_ai.operation.name", "execute_tool"), s("gen_ai.tool.name", "t")],
    )]);
    h.collector(&spans_topic, &orphan.encode_to_vec());
    h.d.advance(h.config.trace_quiet * 2);
    assert!(Harness::events(&h.d.tick()).is_empty(), "waits for the root");
    h.d.advance(h.config.trace_max_wait);
    let evs = Harness::events(&h.d.tick());
    assert_eq!(evs.iter().map(|e| e.kind).collect::<Vec<_>>(), [EventKind::RunStarted, EventKind::Step, EventKind::RunEnded]);
    assert_eq!(samples(&h.registry).get("octant_ingest_runs_total{reason=\"max_wait\"}"), Some(&1.0));
}
