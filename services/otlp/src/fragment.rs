//! Re-keying: an export request from the Collector holds spans of any number of traces (and
//! one trace may be spread over several requests, partitions and topics). The ingest splits
//! each request per trace and republishes the pieces keyed by trace id on its own topic, so
//! that every fragment of a trace reaches one instance, whatever the number of instances.
//!
//! A fragment on that topic is one byte naming it, then:
//! - `T`: an `ExportTraceServiceRequest` (protobuf) with the spans of one trace;
//! - `L`: an `ExportLogsServiceRequest` (protobuf) with the kept log records of one trace
//!   (or, keyed `response:<id>`, of one `gen_ai.response.id` whose trace is not known yet);
//! - `R`: a response link: 32 hex characters of a trace id then 16 of a span id, keyed
//!   `response:<gen_ai.response.id>` — the inference span that returned that response.
//!
//! So a result that names only the response it evaluates meets the link on the instance that
//! owns `response:<id>` and is sent on to its trace.

use std::collections::BTreeMap;

use prost::Message;

use crate::mapping::Mapping;
use crate::model::{DecodeError, hex_id};
use crate::proto::*;

#[derive(Debug, Clone, PartialEq)]
pub enum Fragment {
    Spans(ExportTraceServiceRequest),
    Logs(ExportLogsServiceRequest),
    ResponseLink { trace_id: String, span_id: String },
}

pub const RESPONSE_KEY: &str = "response:";

impl Fragment {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Fragment::Spans(r) => [b"T".as_slice(), &r.encode_to_vec()].concat(),
            Fragment::Logs(r) => [b"L".as_slice(), &r.encode_to_vec()].concat(),
            Fragment::ResponseLink { trace_id, span_id } => format!("R{trace_id}{span_id:0>16}").into_bytes(),
        }
    }

    pub fn decode(b: &[u8]) -> Result<Fragment, DecodeError> {
        let bad = |m: String| DecodeError::Proto(m);
        match b.split_first() {
            Some((b'T', rest)) => Ok(Fragment::Spans(ExportTraceServiceRequest::decode(rest).map_err(|e| bad(e.to_string()))?)),
            Some((b'L', rest)) => Ok(Fragment::Logs(ExportLogsServiceRequest::decode(rest).map_err(|e| bad(e.to_string()))?)),
            Some((b'R', rest)) if rest.len() == 48 && rest.iter().all(u8::is_ascii_hexdigit) => {
                let s = std::str::from_utf8(rest).expect("hex is ASCII");
                Ok(Fragment::ResponseLink { trace_id: s[..32].to_string(), span_id: s[32..].to_string() })
            }
            _ => Err(bad("not an ingest fragment".into())),
        }
    }
}

/// The spans of a request by trace (resources and scopes kept), plus a response link for
/// every span that carries `gen_ai.response.id`. Spans without a trace id are dropped and
/// counted in the second value.
pub fn split_traces(req: &ExportTraceServiceRequest) -> (Vec<(String, Fragment)>, u64) {
    let mut pieces: BTreeMap<(String, usize, usize), Vec<Span>> = BTreeMap::new();
    let mut links = Vec::new();
    let mut dropped = 0;
    for (ri, rs) in req.resource_spans.iter().enumerate() {
        for (si, ss) in rs.scope_spans.iter().enumerate() {
            for s in &ss.spans {
                let Some(trace) = hex_id(&s.trace_id) else {
                    dropped += 1;
                    continue;
                };
                for kv in &s.attributes {
                    if kv.key == "gen_ai.response.id"
                        && let Some(any_value::Value::StringValue(id)) = kv.value.as_ref().and_then(|v| v.value.as_ref())
                        && !id.is_empty()
                    {
                        let span_id = hex_id(&s.span_id).unwrap_or_default();
                        links.push((format!("{RESPONSE_KEY}{id}"), Fragment::ResponseLink { trace_id: trace.clone(), span_id }));
                    }
                }
                pieces.entry((trace, ri, si)).or_default().push(s.clone());
            }
        }
    }
    let mut by_trace: BTreeMap<String, ExportTraceServiceRequest> = BTreeMap::new();
    for ((trace, ri, si), spans) in pieces {
        let rs = &req.resource_spans[ri];
        let ss = &rs.scope_spans[si];
        let out = by_trace.entry(trace).or_default();
        let scope = ScopeSpans { scope: ss.scope.clone(), spans, schema_url: ss.schema_url.clone() };
        match out.resource_spans.last_mut() {
            Some(last) if last.resource == rs.resource && last.schema_url == rs.schema_url => last.scope_spans.push(scope),
            _ => out.resource_spans.push(ResourceSpans {
                resource: rs.resource.clone(),
                scope_spans: vec![scope],
                schema_url: rs.schema_url.clone(),
            }),
        }
    }
    let mut out: Vec<(String, Fragment)> = by_trace.into_iter().map(|(k, r)| (k, Fragment::Spans(r))).collect();
    out.extend(links);
    (out, dropped)
}

/// What happened to the log records of a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCounts {
    /// Kept: events the mapping reads, with a trace (or a response id) to join.
    pub kept: u64,
    /// Not events Octant reads (plain logs, other events).
    pub ignored: u64,
    /// Events Octant reads but with neither a trace id nor a `gen_ai.response.id`.
    pub unjoinable: u64,
}

/// The kept log records of a request by trace (or by response id), resources and scopes kept.
pub fn split_logs(req: &ExportLogsServiceRequest, m: &Mapping) -> (Vec<(String, Fragment)>, LogCounts) {
    let mut pieces: BTreeMap<(String, usize, usize), Vec<LogRecord>> = BTreeMap::new();
    let mut counts = LogCounts::default();
    for (ri, rl) in req.resource_logs.iter().enumerate() {
        for (si, sl) in rl.scope_logs.iter().enumerate() {
            for r in &sl.log_records {
                let attr = |k: &str| {
                    r.attributes.iter().find(|kv| kv.key == k).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                        any_value::Value::StringValue(s) if !s.is_empty() => Some(s.clone()),
                        _ => None,
                    })
                };
                let name = if r.event_name.is_empty() { attr("event.name").unwrap_or_default() } else { r.event_name.clone() };
                if !m.wanted_event(&name) {
                    counts.ignored += 1;
                    continue;
                }
                let key = match (hex_id(&r.trace_id), attr("gen_ai.response.id")) {
                    (Some(t), _) => t,
                    (None, Some(resp)) => format!("{RESPONSE_KEY}{resp}"),
                    (None, None) => {
                        counts.unjoinable += 1;
                        continue;
                    }
                };
                counts.kept += 1;
                pieces.entry((key, ri, si)).or_default().push(r.clone());
            }
        }
    }
    let mut by_key: BTreeMap<String, ExportLogsServiceRequest> = BTreeMap::new();
    for ((key, ri, si), records) in pieces {
        let rl = &req.resource_logs[ri];
        let sl = &rl.scope_logs[si];
        let out = by_key.entry(key).or_default();
        let scope = ScopeLogs { scope: sl.scope.clone(), log_records: records, schema_url: sl.schema_url.clone() };
        match out.resource_logs.last_mut() {
            Some(last) if last.resource == rl.resource && last.schema_url == rl.schema_url => last.scope_logs.push(scope),
            _ => out.resource_logs.push(ResourceLogs {
                resource: rl.resource.clone(),
                scope_logs: vec![scope],
                schema_url: rl.schema_url.clone(),
            }),
        }
    }
    (by_key.into_iter().map(|(k, r)| (k, Fragment::Logs(r))).collect(), counts)
}

/// Log records keyed by response id, sent on to their trace: trace and span ids set from the link.
pub fn attach(logs: &ExportLogsServiceRequest, trace_id: &str, span_id: &str) -> ExportLogsServiceRequest {
    let mut out = logs.clone();
    let (t, s) = (hex::decode(trace_id).unwrap_or_default(), hex::decode(span_id).unwrap_or_default());
    for rl in &mut out.resource_logs {
        for sl in &mut rl.scope_logs {
            for r in &mut sl.log_records {
                r.trace_id = t.clone();
                if r.span_id.is_empty() {
                    r.span_id = s.clone();
                }
            }
        }
    }
    out
}
