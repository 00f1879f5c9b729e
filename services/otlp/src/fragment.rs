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

/// A fragment's key and payload, encoded.
pub type Keyed = (String, Vec<u8>);

/// Splits a protobuf `ExportTraceServiceRequest` per trace without decoding it: each span's
/// bytes are copied as they are into its trace's fragment (resource and scope bytes kept), and
/// only what re-keying needs is read — a span's trace id and its `gen_ai.response.id`. The same
/// fragments as [`split_traces`] would give once decoded (a test), at the cost of copying bytes
/// rather than decoding every attribute, cloning it and encoding it again. Fields the
/// hand-written subset does not read travel on (the second hop skips them when it decodes). A
/// request whose wire format is broken is refused whole; one whose structure holds but whose
/// contents do not decode (invalid UTF-8, say) fails its trace's fragment at the second hop.
pub fn split_traces_wire(req: &[u8]) -> Result<(Vec<Keyed>, u64), DecodeError> {
    let bad = |m: &str| DecodeError::Proto(format!("broken wire format: {m}"));
    type Group<'a> = (Option<&'a [u8]>, &'a [u8], Vec<(Option<&'a [u8]>, &'a [u8], Vec<&'a [u8]>)>);
    let mut pieces: BTreeMap<(String, usize, usize), Vec<&[u8]>> = BTreeMap::new();
    // Per resource: its bytes, its schema URL, and per scope its bytes and schema URL.
    type Resource<'a> = (Option<&'a [u8]>, &'a [u8], Vec<(Option<&'a [u8]>, &'a [u8])>);
    let mut resources: Vec<Resource> = Vec::new();
    let mut links = Vec::new();
    let mut dropped = 0;
    for f in wire::fields(req) {
        let f = f.map_err(bad)?;
        if f.number != 1 || f.wire != wire::LEN {
            continue;
        }
        let ri = resources.len();
        let (mut resource, mut schema, mut scopes) = (None, &[][..], Vec::new());
        for g in wire::fields(f.data) {
            let g = g.map_err(bad)?;
            match (g.number, g.wire) {
                (1, wire::LEN) => resource = Some(g.data),
                (2, wire::LEN) => scopes.push(g.data),
                (3, wire::LEN) => schema = g.data,
                _ => {}
            }
        }
        let mut scope_meta = Vec::new();
        for (si, ss) in scopes.into_iter().enumerate() {
            let (mut scope, mut sschema) = (None, &[][..]);
            for g in wire::fields(ss) {
                let g = g.map_err(bad)?;
                match (g.number, g.wire) {
                    (1, wire::LEN) => scope = Some(g.data),
                    (3, wire::LEN) => sschema = g.data,
                    (2, wire::LEN) => {
                        let span = g.data;
                        let (mut trace, mut span_id, mut response) = (&[][..], &[][..], None);
                        for h in wire::fields(span) {
                            let h = h.map_err(bad)?;
                            match (h.number, h.wire) {
                                (1, wire::LEN) => trace = h.data,
                                (2, wire::LEN) => span_id = h.data,
                                (9, wire::LEN) => {
                                    if let Some(id) = wire::string_attribute(h.data, b"gen_ai.response.id").map_err(bad)? {
                                        response = Some(id);
                                    }
                                }
                                _ => {}
                            }
                        }
                        let Some(trace) = hex_id(trace) else {
                            dropped += 1;
                            continue;
                        };
                        if let Some(id) = response.filter(|id| !id.is_empty()) {
                            let id = String::from_utf8_lossy(id);
                            let link = Fragment::ResponseLink { trace_id: trace.clone(), span_id: hex_id(span_id).unwrap_or_default() };
                            links.push((format!("{RESPONSE_KEY}{id}"), link.encode()));
                        }
                        pieces.entry((trace, ri, si)).or_default().push(span);
                    }
                    _ => {}
                }
            }
            scope_meta.push((scope, sschema));
        }
        resources.push((resource, schema, scope_meta));
    }
    // Per trace: its resources in order, consecutive scopes of one resource together.
    let mut by_trace: BTreeMap<String, Vec<Group>> = BTreeMap::new();
    for ((trace, ri, si), spans) in pieces {
        let (resource, schema, scopes) = &resources[ri];
        let (scope, sschema) = scopes[si];
        let groups = by_trace.entry(trace).or_default();
        match groups.last_mut() {
            Some(last) if last.0 == *resource && last.1 == *schema => last.2.push((scope, sschema, spans)),
            _ => groups.push((*resource, schema, vec![(scope, sschema, spans)])),
        }
    }
    let mut out: Vec<Keyed> = by_trace
        .into_iter()
        .map(|(trace, groups)| {
            let mut req = vec![b'T'];
            for (resource, schema, scopes) in groups {
                let mut rs = Vec::new();
                if let Some(r) = resource {
                    wire::put_len(&mut rs, 1, r);
                }
                for (scope, sschema, spans) in scopes {
                    let mut ss = Vec::new();
                    if let Some(s) = scope {
                        wire::put_len(&mut ss, 1, s);
                    }
                    for span in spans {
                        wire::put_len(&mut ss, 2, span);
                    }
                    if !sschema.is_empty() {
                        wire::put_len(&mut ss, 3, sschema);
                    }
                    wire::put_len(&mut rs, 2, &ss);
                }
                if !schema.is_empty() {
                    wire::put_len(&mut rs, 3, schema);
                }
                wire::put_len(&mut req, 1, &rs);
            }
            (trace, req)
        })
        .collect();
    out.extend(links);
    Ok((out, dropped))
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

/// The protobuf wire format, read field by field without decoding (what re-keying needs).
mod wire {
    pub const VARINT: u8 = 0;
    pub const I64: u8 = 1;
    pub const LEN: u8 = 2;
    pub const I32: u8 = 5;

    /// One field: its number, wire type and data (a length-delimited field's payload; the value
    /// bytes of the others).
    pub struct Field<'a> {
        pub number: u32,
        pub wire: u8,
        pub data: &'a [u8],
    }

    fn varint(b: &[u8], i: &mut usize) -> Result<u64, &'static str> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*i).ok_or("truncated varint")?;
            *i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint over 64 bits")
    }

    /// The fields of a message, in order; an error ends the iteration.
    pub fn fields(msg: &[u8]) -> impl Iterator<Item = Result<Field<'_>, &'static str>> {
        let mut i = 0;
        let mut failed = false;
        std::iter::from_fn(move || {
            if failed || i >= msg.len() {
                return None;
            }
            let field = (|| {
                let key = varint(msg, &mut i)?;
                let (number, wire) = ((key >> 3) as u32, (key & 7) as u8);
                if number == 0 {
                    return Err("field number 0");
                }
                let start = i;
                let data = match wire {
                    VARINT => {
                        varint(msg, &mut i)?;
                        &msg[start..i]
                    }
                    I64 | I32 => {
                        let n = if wire == I64 { 8 } else { 4 };
                        i = i.checked_add(n).filter(|e| *e <= msg.len()).ok_or("truncated fixed field")?;
                        &msg[start..i]
                    }
                    LEN => {
                        let n = usize::try_from(varint(msg, &mut i)?).map_err(|_| "length over usize")?;
                        let end = i.checked_add(n).filter(|e| *e <= msg.len()).ok_or("truncated length-delimited field")?;
                        let d = &msg[i..end];
                        i = end;
                        d
                    }
                    _ => return Err("unsupported wire type (groups are not OTLP)"),
                };
                Ok(Field { number, wire, data })
            })();
            failed = field.is_err();
            Some(field)
        })
    }

    /// The string value of a `KeyValue` whose key is `key` (`None` for another key or another
    /// value type).
    pub fn string_attribute<'a>(kv: &'a [u8], key: &[u8]) -> Result<Option<&'a [u8]>, &'static str> {
        let (mut k, mut value) = (None, None);
        for f in fields(kv) {
            let f = f?;
            match (f.number, f.wire) {
                (1, LEN) => k = Some(f.data),
                (2, LEN) => value = Some(f.data),
                _ => {}
            }
        }
        if k != Some(key) {
            return Ok(None);
        }
        let mut out = None;
        for f in fields(value.unwrap_or_default()) {
            let f = f?;
            if f.number == 1 && f.wire == LEN {
                out = Some(f.data);
            }
        }
        Ok(out)
    }

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// Appends a length-delimited field.
    pub fn put_len(out: &mut Vec<u8>, number: u32, data: &[u8]) {
        put_varint(out, (u64::from(number) << 3) | u64::from(LEN));
        put_varint(out, data.len() as u64);
        out.extend_from_slice(data);
    }
}
