//! The decoders: OTLP/JSON reads as the same messages as protobuf (hex ids, string or number
//! 64-bit integers, names or numbers for enums, unknown fields ignored); a request split per
//! trace keeps every span once with its resource; and no input, however malformed, panics.

use proptest::prelude::*;
use prost::Message;

use crate::fragment::{self, Fragment};
use crate::model::{self, Encoding};
use crate::proto::*;

/// Span `id` of trace 0707…, under `parent` (0: none), from `start` to `end` ms.
fn genai_span(id: u8, parent: u8, start: u64, end: u64, attrs: Vec<KeyValue>) -> Span {
    span_in(7, id, parent, start, end, attrs)
}

/// Span `id` of trace `trace` (every byte of its id), under `parent` (0: none), from `start`
/// to `end` ms.
fn span_in(trace: u8, id: u8, parent: u8, start: u64, end: u64, attrs: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: if parent == 0 { vec![] } else { vec![parent; 8] },
        name: format!("s{id}"),
        start_time_unix_nano: start * 1_000_000,
        end_time_unix_nano: end * 1_000_000,
        attributes: attrs,
        ..Default::default()
    }
}

fn kv(k: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }) }
}

fn request() -> ExportTraceServiceRequest {
    let span = |trace: u8, id: u8, parent: u8| Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: if parent == 0 { vec![] } else { vec![parent; 8] },
        name: format!("s{id}"),
        kind: 3,
        start_time_unix_nano: 1_764_489_600_000_000_000 + id as u64,
        end_time_unix_nano: 1_764_489_600_100_000_000,
        attributes: vec![
            kv("gen_ai.usage.input_tokens", any_value::Value::IntValue(-5)),
            kv("d", any_value::Value::DoubleValue(0.25)),
            kv("b", any_value::Value::BoolValue(true)),
            kv(
                "arr",
                any_value::Value::ArrayValue(ArrayValue {
                    values: vec![AnyValue { value: Some(any_value::Value::StringValue("x".into())) }],
                }),
            ),
            kv("bytes", any_value::Value::BytesValue(vec![1, 2, 3])),
        ],
        events: vec![SpanEvent { time_unix_nano: 7, name: "e".into(), attributes: vec![] }],
        links: vec![],
        status: Some(Status { message: "boom".into(), code: STATUS_ERROR }),
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![kv("service.name", any_value::Value::StringValue("svc".into()))] }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope { name: "lib".into(), version: "1".into() }),
                spans: vec![span(1, 1, 0), span(2, 2, 0), span(1, 3, 1)],
                schema_url: "https://opentelemetry.io/schemas/1.37.0".into(),
            }],
            schema_url: String::new(),
        }],
    }
}

#[test]
fn otlp_json_reads_as_the_protobuf_does() {
    let json = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
      "scopeSpans":[{"scope":{"name":"lib","version":"1"},"schemaUrl":"https://opentelemetry.io/schemas/1.37.0","spans":[
        {"traceId":"01010101010101010101010101010101","spanId":"0101010101010101","parentSpanId":"","name":"s1","kind":3,
         "startTimeUnixNano":"1764489600000000001","endTimeUnixNano":1764489600100000000,
         "attributes":[{"key":"gen_ai.usage.input_tokens","value":{"intValue":"-5"}},{"key":"d","value":{"doubleValue":0.25}},
           {"key":"b","value":{"boolValue":true}},{"key":"arr","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}},
           {"key":"bytes","value":{"bytesValue":"AQID"}}],
         "events":[{"timeUnixNano":"7","name":"e"}],"status":{"code":2,"message":"boom"},"futureField":[1,2]},
        {"traceId":"AgICAgICAgICAgICAgICAg==","spanId":"0202020202020202","name":"s2","kind":"SPAN_KIND_CLIENT",
         "startTimeUnixNano":"1764489600000000002","endTimeUnixNano":"1764489600100000000",
         "attributes":[{"key":"gen_ai.usage.input_tokens","value":{"intValue":-5}},{"key":"d","value":{"doubleValue":0.25}},
           {"key":"b","value":{"boolValue":true}},{"key":"arr","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}},
           {"key":"bytes","value":{"bytesValue":"AQID"}}],
         "events":[{"timeUnixNano":"7","name":"e"}],"status":{"code":"STATUS_CODE_ERROR","message":"boom"}},
        {"traceId":"01010101010101010101010101010101","spanId":"0303030303030303","parent_span_id":"0101010101010101","name":"s3","kind":3,
         "startTimeUnixNano":"1764489600000000003","endTimeUnixNano":"1764489600100000000",
         "attributes":[{"key":"gen_ai.usage.input_tokens","value":{"intValue":"-5"}},{"key":"d","value":{"doubleValue":0.25}},
           {"key":"b","value":{"boolValue":true}},{"key":"arr","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}},
           {"key":"bytes","value":{"bytesValue":"AQID"}}],
         "events":[{"timeUnixNano":"7","name":"e"}],"status":{"code":2,"message":"boom"}}]}]}]}"#;
    assert_eq!(Encoding::sniff(json.as_bytes()), Encoding::OtlpJson);
    let from_json = model::decode_traces(json.as_bytes()).unwrap();
    let from_proto = model::decode_traces(&request().encode_to_vec()).unwrap();
    assert_eq!(from_json, from_proto);
    assert_eq!(from_proto, request());
    let spans = model::spans(&from_json);
    assert_eq!(spans[0].attrs["gen_ai.usage.input_tokens"], serde_json::json!(-5));
    assert_eq!(spans[0].attrs["bytes"], serde_json::json!("AQID"));
    assert!(spans[0].error && spans[0].resource["service.name"] == "svc");
}

#[test]
fn a_request_split_per_trace_keeps_every_span_once() {
    let (pieces, dropped) = fragment::split_traces(&request());
    assert_eq!(dropped, 0);
    let mut seen = Vec::new();
    for (key, f) in &pieces {
        let Fragment::Spans(r) = Fragment::decode(&f.encode()).unwrap() else { panic!("spans") };
        for s in model::spans(&r) {
            assert_eq!(&s.trace_id, key);
            assert_eq!(s.resource["service.name"], "svc", "the resource goes with every piece");
            seen.push(s.span_id);
        }
    }
    seen.sort();
    assert_eq!(seen, ["0101010101010101", "0202020202020202", "0303030303030303"]);
    assert_eq!(pieces.len(), 2, "two traces");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    /// Arbitrary bytes: every decoder returns a value or an error, never panics.
    #[test]
    fn no_input_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = model::decode_traces(&bytes);
        let _ = model::decode_logs(&bytes);
        let _ = crate::json::traces(&bytes);
        let _ = crate::json::logs(&bytes);
        let _ = Fragment::decode(&bytes);
        if let Ok(req) = model::decode_traces(&bytes) {
            let spans = model::spans(&req);
            let _ = crate::genai::run(&spans, &[], &crate::Mapping::default());
            let _ = fragment::split_traces(&req);
        }
    }

    /// Mutations of a valid request (bytes flipped, truncated): no panic either.
    #[test]
    fn mutated_requests_do_not_panic(at in 0usize..400, byte in any::<u8>(), cut in 0usize..400) {
        let mut b = request().encode_to_vec();
        let n = b.len();
        b[at % n] = byte;
        b.truncate(cut.max(1).min(n));
        if let Ok(req) = model::decode_traces(&b) {
            let spans = model::spans(&req);
            let _ = crate::genai::run(&spans, &[], &crate::Mapping::default());
        }
        // The re-keying hop's wire-level split: refuses or splits, never panics; what it splits
        // decodes or is refused at the second hop.
        if let Ok((pieces, _)) = fragment::split_traces_wire(&b) {
            for (_, p) in pieces {
                let _ = Fragment::decode(&p);
            }
        }
        let json = String::from_utf8_lossy(&b).to_string();
        let _ = crate::json::traces(json.as_bytes());
    }

    /// Deeply nested attribute values are refused, not a stack overflow.
    #[test]
    fn deep_nesting_is_refused(depth in 30usize..2000) {
        let open = r#"{"arrayValue":{"values":["#.repeat(depth);
        let close = "]}}".repeat(depth);
        let json = [
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01010101010101010101010101010101","attributes":[{"key":"k","value":"#,
            &open,
            r#"{"stringValue":"x"}"#,
            &close,
            "}]}]}]}]}",
        ]
        .concat();
        let _ = crate::json::traces(json.as_bytes());
    }
}

/// An OpenInference trace (span kinds in `openinference.span.kind`, its attribute names): the
/// agent, a model call with `llm.token_count.*`, a tool call with `tool.name` and `input.value`,
/// a guardrail that blocked (an override), and an EVALUATOR carrier linked to the model call
/// whose flattened result is the run's evaluation about that step.
#[test]
fn openinference_spans_map_like_genai_ones() {
    let s = |k: &str, v: &str| kv(k, any_value::Value::StringValue(v.into()));
    let i = |k: &str, v: i64| kv(k, any_value::Value::IntValue(v));
    let span = |id: u8, parent: u8, start: u64, attrs: Vec<KeyValue>| genai_span(id, parent, start, start + 10, attrs);
    let mut guard = span(4, 1, 300, vec![s("openinference.span.kind", "GUARDRAIL")]);
    guard.status = Some(Status { code: STATUS_ERROR, message: "blocked".into() });
    let mut carrier = span(
        5,
        1,
        400,
        vec![
            s("openinference.span.kind", "EVALUATOR"),
            s("evaluations.0.evaluation.name", "hallucination"),
            kv("evaluations.0.evaluation.score", any_value::Value::DoubleValue(0.2)),
            s("evaluations.0.evaluation.label", "factual"),
            s("evaluations.0.evaluation.annotator_kind", "LLM"),
        ],
    );
    carrier.links = vec![SpanLink { trace_id: vec![7; 16], span_id: vec![2; 8], attributes: vec![] }];
    let req = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![s("service.name", "oi-bot")] }),
            scope_spans: vec![ScopeSpans {
                scope: None,
                spans: vec![
                    span(1, 0, 0, vec![s("openinference.span.kind", "AGENT"), s("agent.name", "helper"), s("session.id", "sess-1")]),
                    span(
                        2,
                        1,
                        100,
                        vec![s("openinference.span.kind", "LLM"), i("llm.token_count.prompt", 70), i("llm.token_count.completion", 30)],
                    ),
                    span(
                        3,
                        1,
                        200,
                        vec![
                            s("openinference.span.kind", "TOOL"),
                            s("tool.name", "search"),
                            s("input.value", "{\"q\": \"x\"}"),
                            s("output.value", "3 hits"),
                        ],
                    ),
                    guard,
                    carrier,
                ],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    let run = crate::genai::run(&model::spans(&req), &[], &crate::Mapping::default()).unwrap();
    let e = &run.events;
    use octant_contracts::{EventKind, InterventionKind, StepKind};
    assert_eq!(
        e.iter().map(|x| x.kind).collect::<Vec<_>>(),
        [EventKind::RunStarted, EventKind::Step, EventKind::Step, EventKind::Intervention, EventKind::RunEnded]
    );
    assert_eq!((e[0].agent_id.as_deref(), e[0].run_started.as_ref().unwrap().task_id.as_deref()), (Some("helper"), Some("sess-1")));
    assert_eq!((e[1].step.as_ref().unwrap().step_kind, e[1].step.as_ref().unwrap().tokens), (StepKind::ModelCall, Some(100)));
    let tool = e[2].step.as_ref().unwrap();
    assert_eq!(
        (tool.step_kind, tool.tool_name.as_deref(), tool.arguments.as_deref()),
        (StepKind::ToolCall, Some("search"), Some("{\"q\": \"x\"}"))
    );
    assert_eq!(tool.result.as_deref(), Some("3 hits"), "the tool's output (OpenInference output.value)");
    assert_eq!(e[3].intervention.as_ref().unwrap().intervention_kind, InterventionKind::Override);
    let evals = &e[4].run_ended.as_ref().unwrap().evaluations;
    assert_eq!(evals.len(), 1);
    assert_eq!(
        (evals[0].name.as_str(), evals[0].score_value, evals[0].score_label.as_deref(), evals[0].evaluator.as_deref(), evals[0].step),
        ("hallucination", Some(0.2), Some("factual"), Some("LLM"), Some(1)),
        "about the model call it links to"
    );
}

/// The shapes real instrumentations write (the conformance fixtures under `conformance/` hold
/// the real thing): the error on the agent span under an OK root, a client's inference span
/// nested in the framework's, the contrib library's default agent id, no task id, a model span
/// without usage, and a declared evaluation result as the run's verdict.
#[test]
fn real_instrumentation_shapes_map_by_the_rules() {
    use octant_contracts::{EventKind, Outcome, StepKind};
    let s = |k: &str, v: &str| kv(k, any_value::Value::StringValue(v.into()));
    let i = |k: &str, v: i64| kv(k, any_value::Value::IntValue(v));
    let span = |id: u8, parent: u8, start: u64, end: u64, attrs: Vec<KeyValue>| span_in(9, id, parent, start, end, attrs);
    let mut agent = span(
        2,
        1,
        10,
        900,
        vec![s("gen_ai.operation.name", "invoke_agent"), s("gen_ai.agent.id", "agent"), s("gen_ai.agent.name", "Support agent")],
    );
    agent.status = Some(Status { code: STATUS_ERROR, message: "MaxTurnsExceeded".into() });
    let mut root = span(1, 0, 0, 1000, vec![s("gen_ai.operation.name", "invoke_workflow")]);
    root.name = "Agent workflow".into();
    let mut evaluated = root.clone();
    evaluated.events = vec![SpanEvent {
        time_unix_nano: 990 * 1_000_000,
        name: "gen_ai.evaluation.result".into(),
        attributes: vec![
            s("gen_ai.evaluation.name", "exact_match"),
            kv("gen_ai.evaluation.score.value", any_value::Value::DoubleValue(0.0)),
        ],
    }];
    let spans = |root: Span| {
        vec![
            root,
            agent.clone(),
            // The framework's model span (no usage) and the client's under it (usage, response id).
            span(3, 2, 20, 300, vec![s("gen_ai.operation.name", "chat")]),
            span(
                4,
                3,
                25,
                290,
                vec![
                    s("gen_ai.operation.name", "chat"),
                    s("gen_ai.response.id", "resp-1"),
                    i("gen_ai.usage.input_tokens", 120),
                    i("gen_ai.usage.output_tokens", 30),
                ],
            ),
            span(5, 2, 310, 400, vec![s("gen_ai.operation.name", "execute_tool"), s("gen_ai.tool.name", "lookup")]),
            // A model call that reports no usage.
            span(6, 2, 410, 600, vec![s("gen_ai.operation.name", "chat")]),
        ]
    };
    let request = |spans: Vec<Span>| ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![s("service.name", "agents-bot")] }),
            scope_spans: vec![ScopeSpans { scope: None, spans, schema_url: String::new() }],
            schema_url: String::new(),
        }],
    };
    let run = crate::genai::run(&model::spans(&request(spans(root.clone()))), &[], &crate::Mapping::default()).unwrap();
    let e = &run.events;
    assert_eq!(
        e.iter().map(|x| (x.kind, x.step.as_ref().map(|s| s.step_kind))).collect::<Vec<_>>(),
        [
            (EventKind::RunStarted, None),
            (EventKind::Step, Some(StepKind::ModelCall)),
            (EventKind::Step, Some(StepKind::ToolCall)),
            (EventKind::Step, Some(StepKind::ModelCall)),
            (EventKind::RunEnded, None),
        ],
        "the nested inference spans are one model call"
    );
    assert!(e[1].event_id.ends_with(&hex::encode([4u8; 8])), "the kept span is the one with the response id and usage");
    assert_eq!(e[1].step.as_ref().unwrap().tokens, Some(150));
    assert_eq!(e[3].step.as_ref().unwrap().tokens, None, "no usage is no token count, not 0");
    assert!(e[1..4].iter().all(|x| x.agent_id.as_deref() == Some("Support agent")), "the library's default id names no agent");
    assert_eq!(e[0].run_started.as_ref().unwrap().task_id, None, "no task id: never the root span's name");
    let end = e[4].run_ended.as_ref().unwrap();
    assert_eq!(end.outcome, Outcome::Error, "the error on the agent span fails the run");
    assert_eq!((end.verifier_verdict, end.judge_verdict), (None, None), "no declared verdict: none");

    // An exception event on the agent span fails the run as well; an OK trace succeeds.
    let mut ok = agent.clone();
    ok.status = None;
    let with = |agent: Span| {
        let mut v = spans(root.clone());
        v[1] = agent;
        crate::genai::run(&model::spans(&request(v)), &[], &crate::Mapping::default())
            .unwrap()
            .events
            .last()
            .unwrap()
            .run_ended
            .clone()
            .unwrap()
    };
    assert_eq!(with(ok.clone()).outcome, Outcome::Success);
    let mut raised = ok.clone();
    raised.events =
        vec![SpanEvent { time_unix_nano: 800 * 1_000_000, name: "exception".into(), attributes: vec![s("exception.type", "ValueError")] }];
    assert_eq!(with(raised).outcome, Outcome::Error);

    // The successor conventions' layout: a conversation turn at the root, the workflow under it
    // failed (its agent did not), no agent id on the in-process agent span.
    let mut turn = span(1, 0, 0, 1000, vec![s("gen_ai.operation.name", "handle_conversation_turn")]);
    turn.name = "handle_conversation_turn".into();
    let mut workflow = span(7, 1, 5, 950, vec![s("gen_ai.operation.name", "invoke_workflow"), s("gen_ai.workflow.name", "support")]);
    workflow.status = Some(Status { code: STATUS_ERROR, message: "GraphRecursionError".into() });
    let mut inner = ok.clone();
    inner.parent_span_id = vec![7; 8];
    inner.attributes.retain(|kv| kv.key != "gen_ai.agent.id");
    let mut v = spans(turn);
    v[1] = inner;
    v.push(workflow);
    let run = crate::genai::run(&model::spans(&request(v)), &[], &crate::Mapping::default()).unwrap();
    assert_eq!(run.events.last().unwrap().run_ended.as_ref().unwrap().outcome, Outcome::Error);
    assert_eq!(run.events[1].agent_id.as_deref(), Some("Support agent"));

    // A declared evaluation result about the run is its verdict, with its provenance.
    let mut m = crate::Mapping::default();
    m.verdicts.insert("exact_match".into(), crate::mapping::VerdictKind::Verifier);
    let run = crate::genai::run(&model::spans(&request(spans(evaluated))), &[], &m).unwrap();
    let end = run.events.last().unwrap().run_ended.clone().unwrap();
    assert_eq!((end.verifier_verdict, end.verifier_kind.as_deref()), (Some(false), Some("exact_match")));

    // A judge's grade outside [0, 1] is no verdict (the run's end would be refused for it).
    m.verdicts.insert("helpfulness".into(), crate::mapping::VerdictKind::Judge);
    let mut graded = root.clone();
    graded.events = vec![SpanEvent {
        time_unix_nano: 990 * 1_000_000,
        name: "gen_ai.evaluation.result".into(),
        attributes: vec![
            s("gen_ai.evaluation.name", "helpfulness"),
            kv("gen_ai.evaluation.score.value", any_value::Value::DoubleValue(4.0)),
        ],
    }];
    let run = crate::genai::run(&model::spans(&request(spans(graded))), &[], &m).unwrap();
    let end = run.events.last().unwrap().run_ended.clone().unwrap();
    assert_eq!((end.judge_verdict, end.evaluations.len()), (None, 1), "kept as an evaluation, not a verdict");
    // Tool spans report no usage: a trace of tool calls alone has no token count anywhere.
    let tools_only =
        vec![root.clone(), span(5, 1, 310, 400, vec![s("gen_ai.operation.name", "execute_tool"), s("gen_ai.tool.name", "lookup")])];
    let run = crate::genai::run(&model::spans(&request(tools_only)), &[], &crate::Mapping::default()).unwrap();
    assert_eq!(run.events[1].step.as_ref().unwrap().tokens, None);
    // Half a usage pair is not the call's usage.
    assert_eq!(crate::genai::tokens(&[("gen_ai.usage.input_tokens".to_string(), serde_json::json!(5))].into_iter().collect()), None);
}

/// The approval rules on the shapes the instrumentations write (`conformance/APPROVALS.md`),
/// by rule for any scope (no table of libraries): a trace that shows nothing of its approval
/// flow says nothing (the learned state decides); a decision event, the declared confirmation
/// attribute, a declared channel or a keyed run's pause shows the flow; a scope declared
/// without a channel is not assessed; a tool call proposed and left waiting (arguments, no
/// result, last) is no step, one that ran is; the source is the tool spans' scope.
#[test]
fn approval_channels_and_proposed_calls() {
    use octant_contracts::{EventKind, StepKind};
    let s = |k: &str, v: &str| kv(k, any_value::Value::StringValue(v.into()));
    let span = |id: u8, parent: u8, start: u64, attrs: Vec<KeyValue>| genai_span(id, parent, start, start + 50, attrs);
    let root = span(1, 0, 0, vec![s("gen_ai.operation.name", "invoke_agent"), s("gen_ai.agent.name", "Support agent")]);
    // The model's output captured (a function call), as every library records it with content
    // capture on.
    let model = span(
        2,
        1,
        10,
        vec![s("gen_ai.operation.name", "chat"), s("gen_ai.response.id", "r1"), s("gen_ai.output.messages", r#"[{"role":"assistant"}]"#)],
    );
    let tool = |result: bool| {
        let mut a = vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", "refund_payment"),
            s("gen_ai.tool.call.arguments", "{}"),
        ];
        if result {
            a.push(s("gen_ai.tool.call.result", "refunded"));
        }
        span(3, 1, 100, a)
    };
    let run = |spans: Vec<Span>, scope: (&str, &str), m: &crate::Mapping| {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource { attributes: vec![s("service.name", "support")] }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope { name: scope.0.into(), version: scope.1.into() }),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        crate::genai::run(&model::spans(&request), &[], m).unwrap().events
    };
    let d = crate::Mapping::default();
    let contrib = ("opentelemetry.instrumentation.openai_agents", "");
    let channel = |e: &[octant_contracts::TrajectoryEvent]| e[0].run_started.as_ref().unwrap().approval_channel;
    let tools = |e: &[octant_contracts::TrajectoryEvent]| {
        e.iter().filter(|x| x.kind == EventKind::Step && x.step.as_ref().unwrap().step_kind == StepKind::ToolCall).count()
    };
    // The resumed part: the approved call ran (a result), then the model answered.
    let ran = run(vec![root.clone(), tool(true), span(4, 1, 200, vec![s("gen_ai.operation.name", "chat")])], contrib, &d);
    assert_eq!((channel(&ran), tools(&ran)), (None, 1), "nothing shown: the learned state decides");
    let source = |e: &[octant_contracts::TrajectoryEvent]| e[0].run_started.as_ref().unwrap().approval_source.clone();
    assert_eq!(source(&ran).as_deref(), Some(contrib.0));
    // The paused part: the model proposed the call, which waits for approval: no tool step.
    let paused = run(vec![root.clone(), model.clone(), tool(false)], contrib, &d);
    assert_eq!((channel(&paused), tools(&paused)), (None, 0), "a proposed call did not run; an unkeyed pause joins nothing");
    // Two calls proposed in one response, one pause: neither ran.
    let mut second = tool(false);
    second.span_id = vec![5; 8];
    second.start_time_unix_nano += 1_000_000;
    let two = run(vec![root.clone(), model.clone(), tool(false), second], contrib, &d);
    assert_eq!(tools(&two), 0);
    // A producer that captures no outputs (arguments only): nothing shows a proposal, the call ran.
    let mut bare = model.clone();
    bare.attributes.retain(|kv| kv.key != "gen_ai.output.messages");
    assert_eq!(tools(&run(vec![root.clone(), bare, tool(false)], contrib, &d)), 1);
    // The rule holds for a scope nobody listed.
    assert_eq!(tools(&run(vec![root.clone(), model.clone(), tool(false)], ("support.tracing", "1.0"), &d)), 0);
    // A tool that ran without a captured result but is followed by the model's answer ran.
    let quiet = run(vec![root.clone(), model.clone(), tool(false), span(4, 1, 200, vec![s("gen_ai.operation.name", "chat")])], contrib, &d);
    assert_eq!(tools(&quiet), 1);
    // Any version, any scope: nothing shown, nothing said.
    assert_eq!(channel(&run(vec![root.clone(), tool(true)], ("opentelemetry.instrumentation.openai_agents", "0.70.0"), &d)), None);
    assert_eq!(channel(&run(vec![root.clone(), tool(true)], ("support.tracing", "1.0"), &d)), None);
    // The declared confirmation attribute on a span shows the flow.
    let mut confirmed = tool(true);
    confirmed.attributes.push(kv("octant.confirmed", any_value::Value::BoolValue(true)));
    let e = run(vec![root.clone(), confirmed], contrib, &d);
    assert_eq!(channel(&e), Some(true));
    assert!(e[1].step.as_ref().unwrap().confirmed);
    // A fault a harness injected into the call (`octant.injected_fault`); none without it.
    let mut faulted = tool(true);
    faulted.attributes.push(kv("octant.injected_fault", any_value::Value::BoolValue(true)));
    assert!(run(vec![root.clone(), faulted], contrib, &d)[1].step.as_ref().unwrap().injected_fault);
    assert!(!e[1].step.as_ref().unwrap().injected_fault);
    // A gold label on the call (`octant.needs_human`); unlabelled without it.
    let mut labelled = tool(true);
    labelled.attributes.push(kv("octant.needs_human", any_value::Value::BoolValue(false)));
    assert_eq!(run(vec![root.clone(), labelled], contrib, &d)[1].step.as_ref().unwrap().needs_human, Some(false));
    assert_eq!(e[1].step.as_ref().unwrap().needs_human, None);
    // A prompt-injection attempt in what the call read (`octant.injection_attempt`).
    let mut attacked = tool(true);
    attacked.attributes.push(kv("octant.injection_attempt", any_value::Value::BoolValue(true)));
    assert_eq!(run(vec![root.clone(), attacked], contrib, &d)[1].step.as_ref().unwrap().injection_attempt, Some(true));
    assert_eq!(e[1].step.as_ref().unwrap().injection_attempt, None);
    // A harness's answer to a re-run request names the original on its root (`octant.rerun_of`).
    let mut rerun = root.clone();
    rerun.attributes.push(s("octant.rerun_of", "run-41"));
    assert_eq!(run(vec![rerun, tool(true)], contrib, &d)[0].run_started.as_ref().unwrap().rerun_of.as_deref(), Some("run-41"));
    assert_eq!(e[0].run_started.as_ref().unwrap().rerun_of, None);
    // The permission the call ran under (`octant.tool.permission`); none without it.
    let mut permitted = tool(true);
    permitted.attributes.push(s("octant.tool.permission", "refunds:write"));
    assert_eq!(run(vec![root.clone(), permitted], contrib, &d)[1].step.as_ref().unwrap().permission.as_deref(), Some("refunds:write"));
    assert_eq!(e[1].step.as_ref().unwrap().permission, None);
    // A team declares a scope's channel either way.
    let mut m = crate::Mapping::default();
    m.approval_channels.insert(contrib.0.into(), true);
    assert_eq!(channel(&run(vec![root.clone(), tool(true)], contrib, &m)), Some(true));
    m.approval_channels.insert(contrib.0.into(), false);
    assert_eq!(channel(&run(vec![root.clone(), tool(true)], contrib, &m)), Some(false));
    // A team's own approval event, declared: on the tool span, `decision` approved confirms the
    // call and shows a channel; denied on a call that ran is an override not honoured.
    let m = crate::Mapping { approval_events: vec!["support.approval".into()], ..Default::default() };
    let decided = |decision: &str| {
        let mut t = tool(true);
        t.events =
            vec![SpanEvent { time_unix_nano: 90 * 1_000_000, name: "support.approval".into(), attributes: vec![s("decision", decision)] }];
        run(vec![root.clone(), t], contrib, &m)
    };
    let approved = decided("approved");
    assert_eq!((channel(&approved), approved[1].step.as_ref().unwrap().confirmed), (Some(true), true));
    let denied = decided("denied");
    let iv = denied.iter().find_map(|e| e.intervention.as_ref()).expect("the denial is an override");
    assert_eq!((iv.intervention_kind, iv.honoured), (octant_contracts::InterventionKind::Override, false), "the call ran anyway");
    assert!(!denied.iter().any(|e| e.step.as_ref().is_some_and(|s| s.confirmed)));
    // A run with no tool call gates nothing: not known.
    assert_eq!(channel(&run(vec![root.clone(), model.clone()], contrib, &d)), None);

    // A declared run key joins a run's parts. The paused part: its start, the model call, a
    // request for confirmation of the proposed call, no end.
    let keyed = crate::Mapping { run_key: "octant.run.id".into(), ..Default::default() };
    let with_key = |mut spans: Vec<Span>, trace: u8| {
        for s in &mut spans {
            s.trace_id = vec![trace; 16];
        }
        spans[0].attributes.push(s("octant.run.id", "refund-42"));
        spans
    };
    let part1 = run(with_key(vec![root.clone(), model.clone(), tool(false)], 1), contrib, &keyed);
    assert_eq!(
        part1.iter().map(|e| (e.kind, e.step.as_ref().map(|s| s.step_kind))).collect::<Vec<_>>(),
        [(EventKind::RunStarted, None), (EventKind::Step, Some(StepKind::ModelCall)), (EventKind::Step, Some(StepKind::Confirmation))]
    );
    assert!(part1.iter().all(|e| e.run_id == "support/refund-42"), "the run id is the system's key");
    let start1 = part1[0].run_started.as_ref().unwrap();
    assert_eq!(start1.approval_channel, Some(true), "a keyed pause shows the approval flow");
    assert!(start1.approval_evidence.as_deref().unwrap().starts_with("pause: calls proposed"), "{start1:?}");
    // The resumed part, a trace of its own that starts later: the same run, later sequences.
    let mut resumed = vec![root.clone(), tool(true), span(4, 1, 200, vec![s("gen_ai.operation.name", "chat")])];
    for sp in &mut resumed {
        sp.start_time_unix_nano += 60_000_000_000;
        sp.end_time_unix_nano += 60_000_000_000;
    }
    let part2 = run(with_key(resumed, 2), contrib, &keyed);
    assert!(part2.iter().all(|e| e.run_id == "support/refund-42"));
    assert!(part2[0].sequence > part1.last().unwrap().sequence, "{} after {}", part2[0].sequence, part1.last().unwrap().sequence);
    assert_eq!((part2.last().unwrap().kind, tools(&part2)), (EventKind::RunEnded, 1));
    // Without the key, the paused part ends (a run of its own) and its proposal is no step.
    let alone = run(vec![root.clone(), model.clone(), tool(false)], contrib, &d);
    assert_eq!(alone.last().unwrap().kind, EventKind::RunEnded);
    assert_eq!(alone.len(), 3);
}

/// Calls that did not run are no steps, by rule for any scope: a call held for confirmation
/// (its result asks for one) is a request — in a keyed run its part pauses on it and shows the
/// approval flow; run later in the same trace it is confirmed —; a framework's synthetic span
/// over parallel calls (a parenthesised tool name) is nothing; a result whose `status` field
/// says error is a tool error on a span with status OK; the tool call id is kept.
#[test]
fn held_synthetic_and_status_error_calls() {
    use octant_contracts::{EventKind, ResultStatus, StepKind};
    let s = |k: &str, v: &str| kv(k, any_value::Value::StringValue(v.into()));
    let span = |id: u8, start: u64, attrs: Vec<KeyValue>| genai_span(id, if id == 1 { 0 } else { 1 }, start, start + 50, attrs);
    let root = span(1, 0, vec![s("gen_ai.operation.name", "invoke_agent"), s("gen_ai.agent.name", "Support agent")]);
    let model = |id: u8, start: u64| span(id, start, vec![s("gen_ai.operation.name", "chat"), s("gen_ai.output.messages", "[]")]);
    let tool = |id: u8, start: u64, name: &str, call: &str, result: &str| {
        span(
            id,
            start,
            vec![
                s("gen_ai.operation.name", "execute_tool"),
                s("gen_ai.tool.name", name),
                s("gen_ai.tool.call.id", call),
                s("gen_ai.tool.call.arguments", "{}"),
                s("gen_ai.tool.call.result", result),
            ],
        )
    };
    let run = |spans: Vec<Span>, m: &crate::Mapping| {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource { attributes: vec![s("service.name", "support")] }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope { name: "a.framework.nobody.listed".into(), version: "9.9".into() }),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        crate::genai::run(&model::spans(&request), &[], m).unwrap().events
    };
    let steps = |e: &[octant_contracts::TrajectoryEvent], k: StepKind| -> Vec<octant_contracts::Step> {
        e.iter().filter_map(|x| x.step.as_deref()).filter(|st| st.step_kind == k).cloned().collect()
    };
    let asks = r#"{"error": "This tool call requires confirmation, please approve or reject."}"#;
    let d = crate::Mapping::default();
    // Held, unkeyed: no step, the run ends, nothing shown.
    let held = run(vec![root.clone(), model(2, 10), tool(3, 100, "refund_payment", "c1", asks)], &d);
    assert!(steps(&held, StepKind::ToolCall).is_empty(), "a held call did not run");
    assert_eq!(held.last().unwrap().kind, EventKind::RunEnded);
    assert_eq!(held[0].run_started.as_ref().unwrap().approval_channel, None);
    // Held, then run later in the same trace (approved): one call, confirmed.
    let approved = run(
        vec![root.clone(), model(2, 10), tool(3, 100, "refund_payment", "c1", asks), tool(4, 300, "refund_payment", "c1", "refunded")],
        &d,
    );
    let calls = steps(&approved, StepKind::ToolCall);
    assert_eq!((calls.len(), calls[0].confirmed, calls[0].tool_call_id.as_deref()), (1, true, Some("c1")));
    // Held, keyed: the part pauses on a request for confirmation and shows the approval flow.
    let keyed = crate::Mapping { run_key: "app.run".into(), ..Default::default() };
    let mut r = root.clone();
    r.attributes.push(s("app.run", "r-1"));
    let part = run(vec![r, model(2, 10), tool(3, 100, "refund_payment", "c1", asks)], &keyed);
    let requests = steps(&part, StepKind::Confirmation);
    assert_eq!((requests.len(), requests[0].tool_call_id.as_deref()), (1, Some("c1")));
    assert_ne!(part.last().unwrap().kind, EventKind::RunEnded, "paused, not ended");
    let start = part[0].run_started.as_ref().unwrap();
    assert_eq!((start.approval_channel, start.approval_source.as_deref()), (Some(true), Some("a.framework.nobody.listed")));
    assert!(start.approval_evidence.as_deref().unwrap().contains("held for confirmation"), "{start:?}");
    // Parallel calls and the framework's merged span over them: two calls.
    let merged = run(
        vec![
            root.clone(),
            model(2, 10),
            tool(3, 100, "lookup", "c1", "a"),
            tool(4, 110, "lookup", "c2", "b"),
            tool(5, 200, "(merged tools)", "e9", "[a, b]"),
            model(6, 300),
        ],
        &d,
    );
    assert_eq!(steps(&merged, StepKind::ToolCall).len(), 2);
    // A call a human refused, told by its own span's result: no step, an override honoured, and
    // the approval flow shown.
    let refused =
        run(vec![root.clone(), tool(3, 100, "refund_payment", "c1", r#"{"error": "This tool call is rejected."}"#), model(4, 200)], &d);
    assert!(steps(&refused, StepKind::ToolCall).is_empty(), "a refused call did not run");
    let iv = refused.iter().find_map(|e| e.intervention.as_ref()).expect("the refusal is an override");
    assert_eq!((iv.intervention_kind, iv.honoured), (octant_contracts::InterventionKind::Override, true));
    assert_eq!(refused[0].run_started.as_ref().unwrap().approval_channel, Some(true));
    // A handled error reported in the result's status field, span OK.
    let failed =
        run(vec![root.clone(), tool(3, 100, "lookup", "c1", r#"{"status": "error", "content": [{"text": "boom"}]}"#), model(4, 200)], &d);
    assert_eq!(steps(&failed, StepKind::ToolCall)[0].result_status, Some(ResultStatus::Error));
}

/// The pauses of frameworks that trace themselves, on what they really wrote
/// (`conformance/frameworks/`, recorded by `conformance/record.py`), keyed by the id each
/// carries per logical run (Pydantic AI's `gen_ai.conversation.id`, Strands Agents'
/// `session.id`): the first part of an approved run shows the pause — deferred tool requests as
/// the run's result, an interrupt finish reason — and ends on a request for confirmation of the
/// call, named by its call id; the resumed part runs that call.
#[test]
fn recorded_framework_pauses_are_requests_for_confirmation() {
    use octant_contracts::{EventKind, StepKind};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/frameworks");
    for (setup, scenario, key, shape) in [
        ("pydantic-ai-v5", "approval_granted", "gen_ai.conversation.id", "pause: deferred tool requests"),
        ("pydantic-ai-v6", "approval_granted", "gen_ai.conversation.id", "pause: deferred tool requests"),
        // The tool raises ApprovalRequired: a held span (no result) and the call in the result.
        ("pydantic-ai-v6", "approval_raised", "gen_ai.conversation.id", "pause: deferred tool requests"),
        ("strands-default", "approval_granted", "session.id", "pause: an interrupt"),
        ("strands-latest", "approval_granted", "session.id", "pause: an interrupt"),
    ] {
        let setup = format!("{setup}/{scenario}");
        let path = root.join(&setup).join("spans.pb");
        let request =
            ExportTraceServiceRequest::decode(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).as_slice())
                .unwrap();
        let spans = model::spans(&request);
        let mut traces: std::collections::BTreeMap<&str, Vec<crate::model::SpanRec>> = Default::default();
        for s in &spans {
            traces.entry(s.trace_id.as_str()).or_default().push(s.clone());
        }
        let m = crate::Mapping { run_key: key.into(), ..Default::default() };
        let events: Vec<octant_contracts::TrajectoryEvent> =
            traces.values().filter_map(|t| crate::genai::run(t, &[], &m)).flat_map(|r| r.events).collect();
        let runs: std::collections::BTreeSet<&str> = events.iter().map(|e| e.run_id.as_str()).collect();
        assert_eq!(runs.len(), 2, "{setup}: two runs, each of two parts");
        for run in runs {
            let mine: Vec<_> = events.iter().filter(|e| e.run_id == run).collect();
            let steps =
                |k: StepKind| mine.iter().filter_map(|e| e.step.as_deref()).filter(|s| s.step_kind == k).cloned().collect::<Vec<_>>();
            let (requests, calls) = (steps(StepKind::Confirmation), steps(StepKind::ToolCall));
            assert_eq!(requests.len(), 1, "{setup} {run}: {mine:#?}");
            assert_eq!(calls.len(), 1, "{setup} {run}");
            assert_eq!(requests[0].tool_name.as_deref(), Some("refund_payment"), "{setup}");
            assert!(requests[0].tool_call_id.is_some() && requests[0].tool_call_id == calls[0].tool_call_id, "{setup}: joined by call id");
            // Both parts show the approval flow: the paused one by its pause, the resumed one by
            // the call it resumed (its id proposed in the earlier part), which reads confirmed.
            let mut starts: Vec<_> = mine.iter().filter(|e| e.run_started.is_some()).collect();
            starts.sort_by_key(|e| e.sequence);
            let evidence: Vec<(Option<bool>, &str)> = starts
                .iter()
                .map(|e| e.run_started.as_ref().unwrap())
                .map(|s| (s.approval_channel, s.approval_evidence.as_deref().unwrap_or("")))
                .collect();
            assert!(evidence[0].0 == Some(true) && evidence[0].1.starts_with(shape), "{setup}: {evidence:?}");
            assert!(evidence[1].0 == Some(true) && evidence[1].1.starts_with("resumed"), "{setup}: {evidence:?}");
            assert!(calls[0].confirmed, "{setup}: the resumed call was approved");
            assert_eq!(mine.iter().filter(|e| e.kind == EventKind::RunEnded).count(), 1, "{setup}: one end");
            let sources: std::collections::BTreeSet<_> =
                mine.iter().filter_map(|e| e.run_started.as_ref()).map(|s| s.approval_source.clone()).collect();
            assert_eq!(sources.len(), 1, "{setup}: both parts one source (a part without a tool span: its root's scope): {sources:?}");
        }
        // Without a key each part is a run of its own, and the resumed call still reads
        // approved, from its own trace: no state across runs, whatever order they arrive in.
        let unkeyed: Vec<octant_contracts::TrajectoryEvent> =
            traces.values().filter_map(|t| crate::genai::run(t, &[], &crate::Mapping::default())).flat_map(|r| r.events).collect();
        let calls: Vec<_> = unkeyed.iter().filter_map(|e| e.step.as_deref()).filter(|s| s.step_kind == StepKind::ToolCall).collect();
        assert!(calls.len() == 2 && calls.iter().all(|c| c.confirmed), "{setup}: {calls:?}");
    }
}

/// The re-keying hop's wire-level split gives, once decoded, the fragments the decoding split
/// gives — same keys, same spans (flattened), same response links — on every request the
/// conformance suite recorded (instrumentation libraries and frameworks that trace themselves),
/// on requests of several traces, and with spans without a trace id dropped and counted alike.
#[test]
fn the_wire_split_equals_the_decoding_split() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance");
    let mut files = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "spans.pb") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 100, "the recordings: {}", files.len());
    let mut requests: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    // A request of every trace of two recordings, and one with a span without a trace id.
    let mut merged = ExportTraceServiceRequest::decode(requests[0].as_slice()).unwrap();
    merged.resource_spans.extend(ExportTraceServiceRequest::decode(requests[1].as_slice()).unwrap().resource_spans);
    merged.resource_spans[0].scope_spans[0].spans[0].trace_id = vec![0; 16];
    requests.push(merged.encode_to_vec());
    for (i, bytes) in requests.iter().enumerate() {
        let req = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        let (want, want_dropped) = fragment::split_traces(&req);
        let (got, got_dropped) = fragment::split_traces_wire(bytes).unwrap();
        assert_eq!(got_dropped, want_dropped, "request {i}");
        type Flat = (String, Vec<model::SpanRec>, Option<(String, String)>);
        let flat = |pieces: Vec<(String, Fragment)>| -> Vec<Flat> {
            pieces
                .into_iter()
                .map(|(k, f)| match f {
                    Fragment::Spans(r) => (k, model::spans(&r), None),
                    Fragment::ResponseLink { trace_id, span_id } => (k, Vec::new(), Some((trace_id, span_id))),
                    Fragment::Logs(_) => unreachable!(),
                })
                .collect()
        };
        let got: Vec<(String, Fragment)> = got.into_iter().map(|(k, p)| (k, Fragment::decode(&p).unwrap())).collect();
        assert_eq!(flat(got), flat(want), "request {i} ({})", files.get(i).map_or("merged".into(), |f| f.display().to_string()));
    }
    assert!(fragment::split_traces_wire(b"\x0a\xff\xff").is_err(), "a broken wire format is refused");
}
