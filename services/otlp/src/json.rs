//! OTLP/JSON (the OTLP specification's JSON encoding, what the Collector's Kafka exporter
//! writes with `otlp_json`) into the same messages as the protobuf decoder.
//!
//! The rules: lowerCamelCase keys (snake_case accepted too), trace and span ids as hex
//! (base64, as protobuf's generic JSON mapping writes them, accepted too), enums as integers
//! (their names accepted too), 64-bit integers as decimal strings or numbers, `bytesValue` as
//! base64, unknown fields ignored, missing fields default.

use base64::Engine;
use serde_json::{Map, Value};

use crate::proto::*;

/// Why a JSON document is not an OTLP export request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("OTLP/JSON: {0}")]
pub struct JsonError(pub String);

type Result<T> = std::result::Result<T, JsonError>;

fn err<T>(m: impl Into<String>) -> Result<T> {
    Err(JsonError(m.into()))
}

/// Nesting of attribute values beyond this is refused (hostile input).
const MAX_DEPTH: usize = 32;

pub fn traces(bytes: &[u8]) -> Result<ExportTraceServiceRequest> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| JsonError(e.to_string()))?;
    let o = obj(&v, "the request")?;
    let resource_spans = list(o, "resourceSpans")?
        .iter()
        .map(|rs| {
            let rs = obj(rs, "resourceSpans[]")?;
            Ok(ResourceSpans {
                resource: resource(rs)?,
                schema_url: string(rs, "schemaUrl")?,
                scope_spans: list(rs, "scopeSpans")?
                    .iter()
                    .map(|ss| {
                        let ss = obj(ss, "scopeSpans[]")?;
                        Ok(ScopeSpans {
                            scope: scope(ss)?,
                            schema_url: string(ss, "schemaUrl")?,
                            spans: list(ss, "spans")?.iter().map(span).collect::<Result<_>>()?,
                        })
                    })
                    .collect::<Result<_>>()?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(ExportTraceServiceRequest { resource_spans })
}

pub fn logs(bytes: &[u8]) -> Result<ExportLogsServiceRequest> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| JsonError(e.to_string()))?;
    let o = obj(&v, "the request")?;
    let resource_logs = list(o, "resourceLogs")?
        .iter()
        .map(|rl| {
            let rl = obj(rl, "resourceLogs[]")?;
            Ok(ResourceLogs {
                resource: resource(rl)?,
                schema_url: string(rl, "schemaUrl")?,
                scope_logs: list(rl, "scopeLogs")?
                    .iter()
                    .map(|sl| {
                        let sl = obj(sl, "scopeLogs[]")?;
                        Ok(ScopeLogs {
                            scope: scope(sl)?,
                            schema_url: string(sl, "schemaUrl")?,
                            log_records: list(sl, "logRecords")?.iter().map(log_record).collect::<Result<_>>()?,
                        })
                    })
                    .collect::<Result<_>>()?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(ExportLogsServiceRequest { resource_logs })
}

fn span(v: &Value) -> Result<Span> {
    let s = obj(v, "span")?;
    Ok(Span {
        trace_id: id(s, "traceId", 16)?,
        span_id: id(s, "spanId", 8)?,
        parent_span_id: id(s, "parentSpanId", 8)?,
        name: string(s, "name")?,
        kind: enumeration(
            s,
            "kind",
            &[
                "SPAN_KIND_UNSPECIFIED",
                "SPAN_KIND_INTERNAL",
                "SPAN_KIND_SERVER",
                "SPAN_KIND_CLIENT",
                "SPAN_KIND_PRODUCER",
                "SPAN_KIND_CONSUMER",
            ],
        )?,
        start_time_unix_nano: u64_of(s, "startTimeUnixNano")?,
        end_time_unix_nano: u64_of(s, "endTimeUnixNano")?,
        attributes: attributes(s, 0)?,
        events: list(s, "events")?
            .iter()
            .map(|e| {
                let e = obj(e, "event")?;
                Ok(SpanEvent { time_unix_nano: u64_of(e, "timeUnixNano")?, name: string(e, "name")?, attributes: attributes(e, 0)? })
            })
            .collect::<Result<_>>()?,
        links: list(s, "links")?
            .iter()
            .map(|l| {
                let l = obj(l, "link")?;
                Ok(SpanLink { trace_id: id(l, "traceId", 16)?, span_id: id(l, "spanId", 8)?, attributes: attributes(l, 0)? })
            })
            .collect::<Result<_>>()?,
        status: match get(s, "status") {
            None | Some(Value::Null) => None,
            Some(st) => {
                let st = obj(st, "status")?;
                Some(Status {
                    message: string(st, "message")?,
                    code: enumeration(st, "code", &["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"])?,
                })
            }
        },
    })
}

fn log_record(v: &Value) -> Result<LogRecord> {
    let r = obj(v, "logRecord")?;
    Ok(LogRecord {
        time_unix_nano: u64_of(r, "timeUnixNano")?,
        observed_time_unix_nano: u64_of(r, "observedTimeUnixNano")?,
        severity_number: match get(r, "severityNumber") {
            Some(Value::String(_)) => 0, // a name: severity is not read
            _ => u64_of(r, "severityNumber")? as i32,
        },
        body: match get(r, "body") {
            None | Some(Value::Null) => None,
            Some(b) => Some(any_value(b, 0)?),
        },
        attributes: attributes(r, 0)?,
        trace_id: id(r, "traceId", 16)?,
        span_id: id(r, "spanId", 8)?,
        event_name: string(r, "eventName")?,
    })
}

fn resource(o: &Map<String, Value>) -> Result<Option<Resource>> {
    match get(o, "resource") {
        None | Some(Value::Null) => Ok(None),
        Some(r) => Ok(Some(Resource { attributes: attributes(obj(r, "resource")?, 0)? })),
    }
}

fn scope(o: &Map<String, Value>) -> Result<Option<InstrumentationScope>> {
    match get(o, "scope") {
        None | Some(Value::Null) => Ok(None),
        Some(s) => {
            let s = obj(s, "scope")?;
            Ok(Some(InstrumentationScope { name: string(s, "name")?, version: string(s, "version")? }))
        }
    }
}

fn attributes(o: &Map<String, Value>, depth: usize) -> Result<Vec<KeyValue>> {
    list(o, "attributes")?.iter().map(|kv| key_value(kv, depth)).collect()
}

fn key_value(v: &Value, depth: usize) -> Result<KeyValue> {
    let kv = obj(v, "attribute")?;
    Ok(KeyValue {
        key: string(kv, "key")?,
        value: match get(kv, "value") {
            None | Some(Value::Null) => None,
            Some(v) => Some(any_value(v, depth)?),
        },
    })
}

fn any_value(v: &Value, depth: usize) -> Result<AnyValue> {
    use any_value::Value as V;
    if depth > MAX_DEPTH {
        return err(format!("attribute values nested deeper than {MAX_DEPTH}"));
    }
    let o = obj(v, "AnyValue")?;
    let value = if let Some(s) = get(o, "stringValue") {
        Some(V::StringValue(s.as_str().ok_or_else(|| JsonError("stringValue is not a string".into()))?.to_string()))
    } else if let Some(b) = get(o, "boolValue") {
        Some(V::BoolValue(b.as_bool().ok_or_else(|| JsonError("boolValue is not a boolean".into()))?))
    } else if get(o, "intValue").is_some() {
        Some(V::IntValue(i64_of(o, "intValue")?))
    } else if let Some(d) = get(o, "doubleValue") {
        Some(V::DoubleValue(double(d)?))
    } else if let Some(a) = get(o, "arrayValue") {
        let a = obj(a, "arrayValue")?;
        Some(V::ArrayValue(ArrayValue { values: list(a, "values")?.iter().map(|x| any_value(x, depth + 1)).collect::<Result<_>>()? }))
    } else if let Some(k) = get(o, "kvlistValue") {
        let k = obj(k, "kvlistValue")?;
        Some(V::KvlistValue(KeyValueList { values: list(k, "values")?.iter().map(|x| key_value(x, depth + 1)).collect::<Result<_>>()? }))
    } else if let Some(b) = get(o, "bytesValue") {
        let s = b.as_str().ok_or_else(|| JsonError("bytesValue is not a string".into()))?;
        Some(V::BytesValue(base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| JsonError(format!("bytesValue: {e}")))?))
    } else {
        None // an empty AnyValue is valid
    };
    Ok(AnyValue { value })
}

/// `camelCase` or its `snake_case` form.
fn get<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).or_else(|| o.get(&snake(key)))
}

fn snake(key: &str) -> String {
    let mut s = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            s.push('_');
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| JsonError(format!("{what} is not an object")))
}

fn list<'a>(o: &'a Map<String, Value>, key: &str) -> Result<&'a [Value]> {
    match get(o, key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => err(format!("{key} is not an array")),
    }
}

fn string(o: &Map<String, Value>, key: &str) -> Result<String> {
    match get(o, key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => err(format!("{key} is not a string")),
    }
}

fn u64_of(o: &Map<String, Value>, key: &str) -> Result<u64> {
    match get(o, key) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(s)) => s.parse().map_err(|_| JsonError(format!("{key} {s:?} is not an unsigned integer"))),
        Some(Value::Number(n)) => n.as_u64().ok_or_else(|| JsonError(format!("{key} {n} is not an unsigned integer"))),
        Some(_) => err(format!("{key} is not an integer")),
    }
}

fn i64_of(o: &Map<String, Value>, key: &str) -> Result<i64> {
    match get(o, key) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(s)) => s.parse().map_err(|_| JsonError(format!("{key} {s:?} is not an integer"))),
        Some(Value::Number(n)) => n.as_i64().ok_or_else(|| JsonError(format!("{key} {n} is not an integer"))),
        Some(_) => err(format!("{key} is not an integer")),
    }
}

fn double(v: &Value) -> Result<f64> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| JsonError("doubleValue out of range".into())),
        Value::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            other => other.parse().map_err(|_| JsonError(format!("doubleValue {other:?}"))),
        },
        _ => err("doubleValue is not a number"),
    }
}

/// An enum as its integer (the rule) or its name (protobuf's generic JSON mapping).
fn enumeration(o: &Map<String, Value>, key: &str, names: &[&str]) -> Result<i32> {
    match get(o, key) {
        Some(Value::String(s)) if !s.chars().all(|c| c.is_ascii_digit()) => {
            names.iter().position(|n| n == s).map(|i| i as i32).ok_or_else(|| JsonError(format!("{key}: unknown value {s:?}")))
        }
        _ => Ok(u64_of(o, key)? as i32),
    }
}

/// A trace or span id: hex (the OTLP/JSON rule, any case) or base64; empty = none.
fn id(o: &Map<String, Value>, key: &str, len: usize) -> Result<Vec<u8>> {
    let s = string(o, key)?;
    if s.is_empty() {
        return Ok(Vec::new());
    }
    if s.len() == 2 * len
        && let Ok(b) = hex::decode(&s)
    {
        return Ok(b);
    }
    match base64::engine::general_purpose::STANDARD.decode(&s) {
        Ok(b) if b.len() == len => Ok(b),
        _ => err(format!("{key} {s:?} is not a {len}-byte id in hex")),
    }
}
