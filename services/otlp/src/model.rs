//! Export requests flattened into what a trace is made of: spans and log records, each with
//! its resource's and scope's identity and its attributes as JSON values.

use std::collections::BTreeMap;

use base64::Engine;
use prost::Message;
use serde_json::Value;

use crate::proto::{self, AnyValue, KeyValue, any_value};

/// Attributes by key; values as JSON (strings, numbers, booleans, arrays, maps; bytes in base64).
pub type Attrs = BTreeMap<String, Value>;

/// An encoding of OTLP export requests on Kafka (the Collector's Kafka exporter `encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    OtlpProto,
    OtlpJson,
}

impl Encoding {
    /// JSON when the payload starts (after whitespace) with `{`; protobuf otherwise. An OTLP
    /// protobuf request starts with the tag of field 1 (0x0a), never `{` (0x7b).
    pub fn sniff(bytes: &[u8]) -> Encoding {
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => Encoding::OtlpJson,
            _ => Encoding::OtlpProto,
        }
    }
}

/// Why a payload is not an OTLP export request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not an OTLP protobuf export request: {0}")]
    Proto(String),
    #[error("{0}")]
    Json(#[from] crate::json::JsonError),
}

pub fn decode_traces(bytes: &[u8]) -> Result<proto::ExportTraceServiceRequest, DecodeError> {
    match Encoding::sniff(bytes) {
        Encoding::OtlpJson => Ok(crate::json::traces(bytes)?),
        Encoding::OtlpProto => proto::ExportTraceServiceRequest::decode(bytes).map_err(|e| DecodeError::Proto(e.to_string())),
    }
}

pub fn decode_logs(bytes: &[u8]) -> Result<proto::ExportLogsServiceRequest, DecodeError> {
    match Encoding::sniff(bytes) {
        Encoding::OtlpJson => Ok(crate::json::logs(bytes)?),
        Encoding::OtlpProto => proto::ExportLogsServiceRequest::decode(bytes).map_err(|e| DecodeError::Proto(e.to_string())),
    }
}

/// One span with its resource and scope.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRec {
    /// Lowercase hex (32 characters).
    pub trace_id: String,
    /// Lowercase hex (16 characters).
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: i32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attrs: Attrs,
    pub events: Vec<EventRec>,
    /// Span status ERROR.
    pub error: bool,
    pub status_message: String,
    /// The resource's attributes, shared by its spans.
    pub resource: std::sync::Arc<Attrs>,
    pub scope: String,
    pub scope_version: String,
    /// The semantic-conventions version the producer declared (schema URL), if any.
    pub schema_url: String,
    /// Span ids this span links to in its own trace (OpenInference's evaluation carriers
    /// link to the span they evaluate).
    pub links: Vec<String>,
    /// What the span is ([`crate::genai::role`]), and the agent it names itself, if any:
    /// derived from its attributes once, when it is read (every rule asks them many times).
    pub role: crate::genai::Role,
    pub own_agent: Option<String>,
}

/// A span event or an event log record.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRec {
    pub name: String,
    pub time_ns: u64,
    pub attrs: Attrs,
}

/// One log record with its resource.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRec {
    pub trace_id: Option<String>,
    pub span_id: Option<String>,
    pub time_ns: u64,
    /// `event_name`, or the older `event.name` attribute; empty for a plain log.
    pub event_name: String,
    pub attrs: Attrs,
    pub body: Value,
    pub resource: Attrs,
    /// The instrumentation scope that emitted it (name, version), if named.
    pub scope: Option<(String, String)>,
}

pub fn hex_id(b: &[u8]) -> Option<String> {
    (!b.is_empty() && b.iter().any(|x| *x != 0)).then(|| hex::encode(b))
}

pub fn value(v: &AnyValue) -> Value {
    into_value(v.clone())
}

/// [`value`], taking the value (its strings are moved, not copied).
pub fn into_value(v: AnyValue) -> Value {
    match v.value {
        None => Value::Null,
        Some(any_value::Value::StringValue(s)) => Value::String(s),
        Some(any_value::Value::BoolValue(b)) => Value::Bool(b),
        Some(any_value::Value::IntValue(i)) => Value::from(i),
        Some(any_value::Value::DoubleValue(d)) => serde_json::Number::from_f64(d).map_or(Value::Null, Value::Number),
        Some(any_value::Value::ArrayValue(a)) => Value::Array(a.values.into_iter().map(into_value).collect()),
        Some(any_value::Value::KvlistValue(k)) => Value::Object(into_attrs(k.values).into_iter().collect()),
        Some(any_value::Value::BytesValue(b)) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
    }
}

pub fn attrs(kvs: &[KeyValue]) -> Attrs {
    kvs.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Value::Null, value))).collect()
}

/// [`attrs`], taking the attributes.
pub fn into_attrs(kvs: Vec<KeyValue>) -> Attrs {
    kvs.into_iter().map(|kv| (kv.key, kv.value.map_or(Value::Null, into_value))).collect()
}

/// Every span of a request, with its resource and scope.
pub fn spans(req: &proto::ExportTraceServiceRequest) -> Vec<SpanRec> {
    into_spans(req.clone())
}

/// [`spans`], taking the request: every attribute's strings are moved into the records, not
/// copied (the ingest's assembling hop: a request's message contents are most of its bytes).
pub fn into_spans(req: proto::ExportTraceServiceRequest) -> Vec<SpanRec> {
    let mut out = Vec::new();
    for rs in req.resource_spans {
        let resource = std::sync::Arc::new(rs.resource.map(|r| into_attrs(r.attributes)).unwrap_or_default());
        for ss in rs.scope_spans {
            let (scope, scope_version) = ss.scope.map(|s| (s.name, s.version)).unwrap_or_default();
            let schema_url = if ss.schema_url.is_empty() { rs.schema_url.clone() } else { ss.schema_url };
            for s in ss.spans {
                let Some(trace_id) = hex_id(&s.trace_id) else { continue };
                let status = s.status.unwrap_or_default();
                let links = s.links.iter().filter(|l| l.trace_id == s.trace_id).filter_map(|l| hex_id(&l.span_id)).collect();
                let mut rec = SpanRec {
                    trace_id,
                    span_id: hex_id(&s.span_id).unwrap_or_default(),
                    parent_span_id: hex_id(&s.parent_span_id),
                    name: s.name,
                    kind: s.kind,
                    start_ns: s.start_time_unix_nano,
                    end_ns: s.end_time_unix_nano.max(s.start_time_unix_nano),
                    attrs: into_attrs(s.attributes),
                    events: s
                        .events
                        .into_iter()
                        .map(|e| EventRec { name: e.name, time_ns: e.time_unix_nano, attrs: into_attrs(e.attributes) })
                        .collect(),
                    error: status.code == proto::STATUS_ERROR,
                    status_message: status.message,
                    resource: resource.clone(),
                    scope: scope.clone(),
                    scope_version: scope_version.clone(),
                    schema_url: schema_url.clone(),
                    links,
                    role: crate::genai::Role::Other,
                    own_agent: None,
                };
                rec.role = crate::genai::classify(&rec);
                rec.own_agent = crate::genai::own_agent(&rec);
                out.push(rec);
            }
        }
    }
    out
}

/// Every log record of a request, with its resource.
pub fn logs(req: &proto::ExportLogsServiceRequest) -> Vec<LogRec> {
    let mut out = Vec::new();
    for rl in &req.resource_logs {
        let resource = rl.resource.as_ref().map(|r| attrs(&r.attributes)).unwrap_or_default();
        for sl in &rl.scope_logs {
            let scope = sl.scope.as_ref().filter(|s| !s.name.is_empty()).map(|s| (s.name.clone(), s.version.clone()));
            for r in &sl.log_records {
                let attrs = attrs(&r.attributes);
                let event_name = if r.event_name.is_empty() {
                    attrs.get("event.name").and_then(Value::as_str).unwrap_or_default().to_string()
                } else {
                    r.event_name.clone()
                };
                out.push(LogRec {
                    trace_id: hex_id(&r.trace_id),
                    span_id: hex_id(&r.span_id),
                    time_ns: if r.time_unix_nano > 0 { r.time_unix_nano } else { r.observed_time_unix_nano },
                    event_name,
                    attrs,
                    body: r.body.as_ref().map_or(Value::Null, value),
                    resource: resource.clone(),
                    scope: scope.clone(),
                });
            }
        }
    }
    out
}
