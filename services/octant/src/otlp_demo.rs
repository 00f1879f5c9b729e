//! `octant demo --input otlp`: the synthetic fleet's runs as OpenTelemetry traces (GenAI
//! conventions plus the mapping's `octant.*` attributes), one OTLP request per run on the
//! Collector's `otlp_spans` topic, so the demo runs through the ingest as a traced agent would.
//! Evaluation-harness runs (benchmarks, attempts) have no OpenTelemetry form here and keep
//! Octant's own schema; bad input stays bad (undecodable bytes on `otlp_spans`).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use octant_contracts::{Decoder, EventKind, Outcome, ResultStatus, Source, StepKind, TrajectoryEvent};
use octant_gen::GenRecord;
use octant_otlp::proto::*;
use prost::Message;

/// The Collector's traces topic, as the demo's ingest reads it.
pub const SPANS_TOPIC: &str = "otlp_spans";

fn kv(k: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }) }
}
fn s(k: &str, v: &str) -> KeyValue {
    kv(k, any_value::Value::StringValue(v.into()))
}

fn id(run: &str, salt: u64, len: usize) -> Vec<u8> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (run, salt).hash(&mut h);
    let a = h.finish();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (salt, run).hash(&mut h);
    let b = h.finish();
    [a.to_be_bytes(), b.to_be_bytes()].concat()[..len].to_vec()
}

/// One run's events → one export request: a root `invoke_agent` span, a span per tool or
/// model step, interventions as events of the root.
pub fn run_to_otlp(events: &[TrajectoryEvent]) -> Option<ExportTraceServiceRequest> {
    let first = events.first()?;
    let run = &first.run_id;
    let trace_id = id(run, 0, 16);
    let root_id = id(run, 1, 8);
    let ns = |ms: i64| ms.max(0) as u64 * 1_000_000;
    let start = events.iter().map(|e| e.event_time).min()?;
    let end_time = events.iter().map(|e| e.event_time).max()? + 1;
    let mut root_attrs =
        vec![s("gen_ai.operation.name", "invoke_agent"), s("gen_ai.agent.name", first.agent_id.as_deref().unwrap_or(&first.system.id))];
    let mut spans = Vec::new();
    let mut root_events = Vec::new();
    for e in events {
        match e.kind {
            EventKind::RunStarted => {
                if let Some(t) = e.run_started.as_ref().and_then(|r| r.task_id.as_ref()) {
                    root_attrs.push(s("gen_ai.conversation.id", t));
                }
            }
            EventKind::Step => {
                let Some(st) = &e.step else { continue };
                let latency = (st.latency_ms.max(0.0) * 1e6) as u64;
                let mut attrs = vec![kv("octant.escalated", any_value::Value::BoolValue(st.escalated))];
                let name = match st.step_kind {
                    StepKind::ToolCall => {
                        let tool = st.tool_name.clone().unwrap_or_else(|| "tool".into());
                        attrs.push(s("gen_ai.operation.name", "execute_tool"));
                        attrs.push(s("gen_ai.tool.name", &tool));
                        if let Some(a) = &st.arguments {
                            attrs.push(s("gen_ai.tool.call.arguments", a));
                        }
                        attrs.push(s("octant.tool.impact", &format!("{:?}", st.impact).to_ascii_lowercase()));
                        attrs.push(kv("octant.confirmed", any_value::Value::BoolValue(st.confirmed)));
                        if matches!(st.result_status, Some(ResultStatus::Error) | Some(ResultStatus::Timeout)) {
                            attrs.push(s("error.type", "tool_error"));
                        }
                        format!("execute_tool {tool}")
                    }
                    StepKind::ModelCall => {
                        attrs.push(s("gen_ai.operation.name", "chat"));
                        if let Some(t) = st.tokens {
                            attrs.push(kv("gen_ai.usage.input_tokens", any_value::Value::IntValue(t)));
                            attrs.push(kv("gen_ai.usage.output_tokens", any_value::Value::IntValue(0)));
                        }
                        "chat demo-model".to_string()
                    }
                    _ => continue,
                };
                if !st.violations.is_empty() {
                    let values = st.violations.iter().map(|v| AnyValue { value: Some(any_value::Value::StringValue(v.clone())) }).collect();
                    attrs.push(kv("octant.violations", any_value::Value::ArrayValue(ArrayValue { values })));
                }
                let failed = matches!(st.result_status, Some(ResultStatus::Error) | Some(ResultStatus::Timeout));
                spans.push(Span {
                    trace_id: trace_id.clone(),
                    span_id: id(run, 10 + e.sequence as u64, 8),
                    parent_span_id: root_id.clone(),
                    name,
                    kind: 1,
                    start_time_unix_nano: ns(e.event_time),
                    end_time_unix_nano: ns(e.event_time) + latency,
                    attributes: attrs,
                    status: failed.then(|| Status { code: STATUS_ERROR, message: "tool error".into() }),
                    ..Default::default()
                });
            }
            EventKind::Intervention => {
                let Some(iv) = &e.intervention else { continue };
                root_events.push(SpanEvent {
                    time_unix_nano: ns(e.event_time),
                    name: "octant.intervention".into(),
                    attributes: vec![
                        s("kind", &format!("{:?}", iv.intervention_kind).to_ascii_lowercase().replace("helprequest", "help")),
                        kv("honoured", any_value::Value::BoolValue(iv.honoured)),
                    ],
                });
            }
            EventKind::RunEnded => {
                let Some(r) = &e.run_ended else { continue };
                let outcome = match r.outcome {
                    Outcome::Success => "success",
                    Outcome::Failure => "failure",
                    Outcome::Error => "error",
                    Outcome::Abandoned => "abandoned",
                };
                root_attrs.push(s("octant.outcome", outcome));
                if let Some(v) = r.judge_verdict {
                    root_attrs.push(kv("octant.judge.verdict", any_value::Value::DoubleValue(v)));
                }
                if let Some(v) = r.human_verdict {
                    root_attrs.push(kv("octant.human.verdict", any_value::Value::DoubleValue(v)));
                }
                if let (Some(k), Some(v)) = (&r.verifier_kind, r.verifier_verdict) {
                    root_attrs.push(s("octant.verifier.kind", k));
                    root_attrs.push(kv("octant.verifier.verdict", any_value::Value::BoolValue(v)));
                }
            }
        }
    }
    spans.push(Span {
        trace_id,
        span_id: root_id,
        name: "invoke_agent".into(),
        kind: 1,
        start_time_unix_nano: ns(start),
        end_time_unix_nano: ns(end_time),
        attributes: root_attrs,
        events: root_events,
        ..Default::default()
    });
    Some(ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![s("service.name", &first.system.id), s("service.version", &first.system.version)] }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope { name: "octant-demo".into(), version: env!("CARGO_PKG_VERSION").into() }),
                spans,
                schema_url: "https://opentelemetry.io/schemas/1.37.0".into(),
            }],
            schema_url: String::new(),
        }],
    })
}

/// Turns generated records into what the demo produces with `--input otlp`: production runs as
/// one OTLP request each (once their end is generated), undecodable poison as it is on
/// `otlp_spans`, evaluation runs unchanged. Runs not ended yet wait in `open`.
pub fn convert(records: Vec<GenRecord>, open: &mut HashMap<String, Vec<TrajectoryEvent>>) -> Vec<GenRecord> {
    let decoder = Decoder::new();
    let mut out = Vec::new();
    for r in records {
        let ev: TrajectoryEvent = match decoder.decode(&r.payload) {
            Ok(ev) => ev,
            Err(_) => {
                out.push(GenRecord { topic: SPANS_TOPIC, ..r });
                continue;
            }
        };
        if ev.source == Source::Evaluation || r.poison.is_some() {
            out.push(r);
            continue;
        }
        let ended = ev.kind == EventKind::RunEnded;
        let run = ev.run_id.clone();
        open.entry(run.clone()).or_default().push(ev);
        if ended {
            let events = open.remove(&run).unwrap_or_default();
            if let Some(req) = run_to_otlp(&events) {
                out.push(GenRecord { topic: SPANS_TOPIC, key: String::new(), payload: req.encode_to_vec(), ..r });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generated run through OpenTelemetry and back (the ingest's mapping) keeps what the
    /// scorer reads: steps, tools, impact, confirmation, violations, errors, tokens, outcome.
    #[test]
    fn a_generated_run_survives_the_round_trip_through_otlp() {
        let spec = octant_gen::FleetSpec::demo(3, 5, 1_764_489_600_000);
        let records = octant_gen::generate(&spec, 0, 40);
        let d = Decoder::new();
        let mut runs: std::collections::BTreeMap<String, Vec<TrajectoryEvent>> = Default::default();
        for r in &records {
            let ev: TrajectoryEvent = d.decode(&r.payload).unwrap();
            if ev.source == Source::Production {
                runs.entry(ev.run_id.clone()).or_default().push(ev);
            }
        }
        assert!(runs.len() > 20);
        for (run, mut events) in runs {
            events.sort_by_key(|e| e.sequence);
            let req = run_to_otlp(&events).unwrap();
            let back = octant_otlp::genai::run(&octant_otlp::model::spans(&req), &[], &octant_otlp::Mapping::default()).unwrap().events;
            let steps = |evs: &[TrajectoryEvent]| -> Vec<String> {
                evs.iter()
                    .filter_map(|e| e.step.as_ref())
                    .filter(|s| matches!(s.step_kind, StepKind::ToolCall | StepKind::ModelCall))
                    .map(|s| match s.step_kind {
                        StepKind::ToolCall => format!(
                            "tool {:?} {:?} confirmed {} {:?} failed {}",
                            s.tool_name,
                            s.impact,
                            s.confirmed,
                            s.violations,
                            s.result_status.is_some_and(|r| r != ResultStatus::Ok)
                        ),
                        _ => format!("model tokens {:?} {:?}", s.tokens, s.violations),
                    })
                    .collect()
            };
            assert_eq!(steps(&back), steps(&events), "run {run}");
            let outcome = |evs: &[TrajectoryEvent]| evs.last().and_then(|e| e.run_ended.as_ref()).map(|r| (r.outcome, r.verifier_verdict));
            assert_eq!(outcome(&back), outcome(&events), "run {run}");
            assert_eq!((&back[0].system.id, &back[0].system.version), (&events[0].system.id, &events[0].system.version));
        }
    }
}
