//! # octant-ingest
//!
//! OpenTelemetry in: the OTLP export requests the Collector's Kafka exporter writes (traces on
//! `otlp_spans`, logs on `otlp_logs`; `otlp_proto` or `otlp_json`, told apart per message;
//! keyed by trace id or not). Trajectory events out, to `octant.trajectories.*`, one run per
//! trace (the mapping: `octant_otlp::genai`), for the scorer like any other producer's.
//!
//! ## Two hops, one service
//! 1. **Re-key.** A request from the Collector holds spans of any number of traces, and one
//!    trace may be spread over requests, partitions and both topics. Each request is split per
//!    trace and the pieces go to `octant.otlp.fragments` keyed by trace id
//!    (`octant_otlp::fragment`), so every piece of a trace reaches the one instance that owns
//!    its partition there, however many instances run. Log records Octant does not read (plain
//!    logs, other events) stop here, counted.
//! 2. **Assemble.** Per trace: its spans (a repeated span id is dropped) and its events. A
//!    trace is complete when its root span has arrived and nothing more for `trace_quiet`
//!    (5 s), or at the latest `trace_max_wait` (5 min) after its first piece, root or not (the
//!    earliest span without a parent in the trace is then the root). It is then mapped to one
//!    run and emitted. A piece that comes after its trace was emitted is dead-lettered
//!    (`late_span`, `late_event`) and counted. An evaluation result that names only the
//!    `gen_ai.response.id` it evaluates waits (`response_wait`) for the inference span that
//!    returned that response, whose link the re-key hop sends under the same key; then it
//!    goes on to that span's trace.
//!
//! ## Guarantees
//! - **At least once.** A fragment's offset is committed only once the run it belongs to has
//!   been emitted and acknowledged (a trace holds its first offset until then). A crash
//!   re-reads open traces whole; a trace emitted but not committed past is emitted again,
//!   with the same event ids, which the scorer recognises as duplicate deliveries.
//! - **Bad input is data:** a request that is not OTLP, and a fragment that is not one, is
//!   dead-lettered with its topic, partition, offset and class (`undecodable`); the stream
//!   goes on.

pub mod config;
pub mod metrics;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Instant;

use anyhow::Context;
use octant_contracts::codec::to_single_object;
use octant_contracts::{Source, topics};
use octant_otlp::fragment::{self, Fragment, RESPONSE_KEY};
use octant_otlp::model::{self, LogRec, SpanRec};
use octant_otlp::proto::ExportLogsServiceRequest;
use octant_runtime::consumer::{CommitPoint, PartitionOffsets, TopicPartition};
use octant_runtime::dlq::DeadLetters;
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::pipeline::{InMessage, Parts, Stage, TickContext};
use octant_runtime::service::{self, ServiceId};
use prometheus::Registry;
use tokio_util::sync::CancellationToken;

pub use config::IngestConfig;
use metrics::Metrics;

/// The input limit of an OTLP request (16 MiB: the Collector's Kafka exporter writes at most
/// `producer.max_message_bytes`, 1 MB by default); over it, class `too_large`.
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

pub const ID: ServiceId = ServiceId { name: "ingest", env: "OCTANT_INGEST", group: "octant-ingest", admin_port: 9106 };

/// Starts the ingest: binds the admin server, joins the consumer group, and spawns the loop.
pub async fn start(config: IngestConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<service::Running> {
    config.check().map_err(anyhow::Error::msg).context("invalid ingest configuration")?;
    let kafka = &config.stream.kafka;
    let fragments = kafka.topic(topics::OTLP_FRAGMENTS);
    kafka::partition_counts_when_reachable(kafka, &[config.spans_topic.clone(), config.logs_topic.clone(), fragments.clone()], &shutdown)
        .await
        .context("the ingest's topics must exist (`octant topics create` creates them)")?;
    let stage = IngestStage::new(&config, &registry);
    let lag = stage.metrics.consumer_lag.clone();
    let inputs = [config.spans_topic.as_str(), config.logs_topic.as_str(), fragments.as_str()];
    service::start_stage(&ID, &config.stream, registry, &inputs, lag, stage, |_, _| {}, shutdown).await
}

/// Runs the ingest until `shutdown`.
pub async fn run(config: IngestConfig, registry: Registry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let running = start(config, registry, shutdown).await?;
    running.task.await.context("ingest task panicked")?
}

/// One trace being assembled.
struct TraceBuf {
    spans: BTreeMap<String, SpanRec>,
    logs: Vec<LogRec>,
    first_offset: i64,
    first_seen: Instant,
    last_seen: Instant,
}

impl TraceBuf {
    /// The trace's buffer (new from this message if none), marked as heard from now.
    fn touch<'a>(traces: &'a mut HashMap<String, TraceBuf>, key: String, m: &InMessage<'_>) -> &'a mut TraceBuf {
        let buf = traces.entry(key).or_insert_with(|| TraceBuf {
            spans: BTreeMap::new(),
            logs: Vec::new(),
            first_offset: m.offset,
            first_seen: m.read_at,
            last_seen: m.read_at,
        });
        buf.last_seen = m.read_at;
        buf
    }
}

/// Results waiting for the span that returned their response, or that span's link.
struct ResponseBuf {
    link: Option<(String, String)>,
    logs: Vec<ExportLogsServiceRequest>,
    first_offset: Option<i64>,
    since: Instant,
}

/// State of one partition (empty for the Collector's topics: re-keying keeps none).
#[derive(Default)]
pub struct Partition {
    traces: HashMap<String, TraceBuf>,
    responses: HashMap<String, ResponseBuf>,
    /// Emitted, not yet acknowledged: tick → first offsets they hold.
    unacked: BTreeMap<u64, Vec<i64>>,
    emitted: HashSet<String>,
    emitted_order: VecDeque<String>,
}

impl Partition {
    fn remember(&mut self, trace: String, memory: usize) {
        if self.emitted.insert(trace.clone()) {
            self.emitted_order.push_back(trace);
            while self.emitted_order.len() > memory {
                if let Some(old) = self.emitted_order.pop_front() {
                    self.emitted.remove(&old);
                }
            }
        }
    }
}

/// What a message did, for metrics once acknowledged.
#[derive(Default)]
pub struct Tag {
    dead_letter: Option<&'static str>,
}

/// The ingest's processing, runnable without a broker (`octant_runtime::pipeline::Driver`).
pub struct IngestStage {
    config: IngestConfig,
    fragments_topic: String,
    production_topic: String,
    evaluation_topic: String,
    dead_letters: DeadLetters,
    pub metrics: Metrics,
}

impl IngestStage {
    pub fn new(config: &IngestConfig, registry: &Registry) -> IngestStage {
        let kafka = &config.stream.kafka;
        IngestStage {
            config: config.clone(),
            fragments_topic: kafka.topic(topics::OTLP_FRAGMENTS),
            production_topic: kafka.topic(topics::TRAJECTORIES_PRODUCTION),
            evaluation_topic: kafka.topic(topics::TRAJECTORIES_EVALUATION),
            dead_letters: DeadLetters::new(
                ID.name,
                kafka.topic(topics::DLQ),
                config.redaction.build().expect("[redaction] is checked before the stage is built"),
            ),
            metrics: Metrics::new(registry),
        }
    }

    fn fragment_records(&self, pieces: Vec<(String, Fragment)>) -> Vec<OutRecord> {
        pieces
            .into_iter()
            .map(|(key, f)| OutRecord { topic: self.fragments_topic.clone(), partition: None, key, payload: f.encode() })
            .collect()
    }

    /// Re-key hop: a request from the Collector.
    fn rekey(&self, m: &InMessage<'_>) -> Result<Vec<OutRecord>, (&'static str, String)> {
        let topic_label = if m.topic == self.config.spans_topic { "spans" } else { "logs" };
        if m.payload.len() > MAX_REQUEST_BYTES {
            self.metrics.requests.with_label_values(&[topic_label, "too_large"]).inc();
            return Err(("too_large", format!("request of {} bytes is over the limit of {MAX_REQUEST_BYTES}", m.payload.len())));
        }
        let out = if m.topic == self.config.spans_topic && model::Encoding::sniff(m.payload) == model::Encoding::OtlpProto {
            // Protobuf: split on the wire, each span's bytes copied as they are (decoding every
            // attribute to encode it again was most of this hop's work).
            return match fragment::split_traces_wire(m.payload) {
                Ok((pieces, dropped)) => {
                    self.metrics.spans.with_label_values(&["no_trace"]).inc_by(dropped);
                    self.metrics.requests.with_label_values(&[topic_label, "ok"]).inc();
                    Ok(pieces
                        .into_iter()
                        .map(|(key, payload)| OutRecord { topic: self.fragments_topic.clone(), partition: None, key, payload })
                        .collect())
                }
                Err(e) => {
                    self.metrics.requests.with_label_values(&[topic_label, "undecodable"]).inc();
                    Err(("undecodable", e.to_string()))
                }
            };
        } else if m.topic == self.config.spans_topic {
            model::decode_traces(m.payload).map(|req| {
                let (pieces, dropped) = fragment::split_traces(&req);
                self.metrics.spans.with_label_values(&["no_trace"]).inc_by(dropped);
                pieces
            })
        } else {
            model::decode_logs(m.payload).map(|req| {
                let (pieces, counts) = fragment::split_logs(&req, &self.config.mapping);
                self.metrics.log_records.with_label_values(&["ignored"]).inc_by(counts.ignored);
                self.metrics.log_records.with_label_values(&["unjoinable"]).inc_by(counts.unjoinable);
                self.metrics.log_records.with_label_values(&["kept"]).inc_by(counts.kept);
                pieces
            })
        };
        match out {
            Ok(pieces) => {
                self.metrics.requests.with_label_values(&[topic_label, "ok"]).inc();
                Ok(self.fragment_records(pieces))
            }
            Err(e) => {
                self.metrics.requests.with_label_values(&[topic_label, "undecodable"]).inc();
                Err(("undecodable", e.to_string()))
            }
        }
    }

    /// Assemble hop: a fragment of one trace (or of one response id).
    fn assemble(
        &self,
        part: &mut Partition,
        offsets: &PartitionOffsets,
        m: &InMessage<'_>,
    ) -> Result<Vec<OutRecord>, (&'static str, String)> {
        let _ = offsets;
        let key = String::from_utf8_lossy(m.key.unwrap_or_default()).to_string();
        let f = Fragment::decode(m.payload).map_err(|e| ("undecodable", e.to_string()))?;
        if let Some(response) = key.strip_prefix(RESPONSE_KEY) {
            let buf = part.responses.entry(response.to_string()).or_insert_with(|| ResponseBuf {
                link: None,
                logs: Vec::new(),
                first_offset: None,
                since: m.read_at,
            });
            match f {
                Fragment::ResponseLink { trace_id, span_id } => buf.link = Some((trace_id, span_id)),
                Fragment::Logs(logs) => {
                    buf.logs.push(logs);
                    buf.first_offset.get_or_insert(m.offset);
                }
                Fragment::Spans(_) => return Err(("undecodable", "spans under a response key".into())),
            }
            let mut out = Vec::new();
            if let Some((trace, span)) = buf.link.clone() {
                for logs in std::mem::take(&mut buf.logs) {
                    out.push((trace.clone(), Fragment::Logs(fragment::attach(&logs, &trace, &span))));
                }
                buf.first_offset = None;
            }
            return Ok(self.fragment_records(out));
        }
        let late = part.emitted.contains(&key);
        match f {
            Fragment::Spans(req) => {
                let spans = model::into_spans(req);
                if late {
                    self.metrics.spans.with_label_values(&["late"]).inc_by(spans.len() as u64);
                    return Err(("late_span", format!("{} spans of trace {key} after the trace was emitted", spans.len())));
                }
                let buf = TraceBuf::touch(&mut part.traces, key, m);
                // Counted per fragment, not per span (a label look-up hashes and locks).
                let (mut accepted, mut duplicate) = (0, 0);
                let mut urls: Vec<(String, u64)> = Vec::new();
                for s in spans {
                    let url = if s.schema_url.is_empty() { "none" } else { s.schema_url.as_str() };
                    match urls.iter_mut().find(|(u, _)| u == url) {
                        Some((_, n)) => *n += 1,
                        None => urls.push((url.to_string(), 1)),
                    }
                    match buf.spans.entry(s.span_id.clone()) {
                        std::collections::btree_map::Entry::Occupied(_) => duplicate += 1,
                        std::collections::btree_map::Entry::Vacant(v) => {
                            v.insert(s);
                            accepted += 1;
                        }
                    }
                }
                for (url, n) in urls {
                    self.metrics.schema_urls.with_label_values(&[&url]).inc_by(n);
                }
                for (outcome, n) in [("accepted", accepted), ("duplicate", duplicate)] {
                    if n > 0 {
                        self.metrics.spans.with_label_values(&[outcome]).inc_by(n);
                    }
                }
            }
            Fragment::Logs(req) => {
                let logs = model::logs(&req);
                if late {
                    self.metrics.log_records.with_label_values(&["late"]).inc_by(logs.len() as u64);
                    return Err(("late_event", format!("{} events of trace {key} after the trace was emitted", logs.len())));
                }
                let buf = TraceBuf::touch(&mut part.traces, key, m);
                buf.logs.extend(logs);
            }
            Fragment::ResponseLink { .. } => return Err(("undecodable", "a response link under a trace key".into())),
        }
        Ok(Vec::new())
    }

    /// The run of a complete trace, as records.
    fn emit(&self, buf: TraceBuf) -> Vec<OutRecord> {
        let spans: Vec<SpanRec> = buf.spans.into_values().collect();
        let Some(run) = octant_otlp::genai::run(&spans, &buf.logs, &self.config.mapping) else {
            // Events without a single span: nothing to attach them to.
            self.metrics.log_records.with_label_values(&["unjoinable"]).inc_by(buf.logs.len() as u64);
            return Vec::new();
        };
        self.metrics.events_produced.inc_by(run.events.len() as u64);
        let channel = run.events.first().and_then(|e| e.run_started.as_ref()).map(|s| s.approval_channel);
        let label = match channel.flatten() {
            Some(false) => "declared_none",
            Some(true) => "seen",
            None => "not_shown",
        };
        self.metrics.approval_channels.with_label_values(&[label]).inc();
        run.events
            .iter()
            .map(|ev| OutRecord {
                topic: if ev.source == Source::Evaluation { self.evaluation_topic.clone() } else { self.production_topic.clone() },
                partition: None,
                key: ev.run_id.clone(),
                payload: to_single_object(ev).expect("trajectory events always encode"),
            })
            .collect()
    }
}

impl Stage for IngestStage {
    type Partition = Partition;
    type Tag = Tag;

    fn open(&mut self, _tp: &TopicPartition, _offset: i64, _companion: Option<i64>) -> anyhow::Result<Partition> {
        Ok(Partition::default())
    }

    fn process(&mut self, part: &mut Partition, offsets: &mut PartitionOffsets, m: &InMessage<'_>) -> (Vec<OutRecord>, Tag) {
        let result = if m.topic == self.fragments_topic { self.assemble(part, offsets, m) } else { self.rekey(m) };
        match result {
            Ok(records) => (records, Tag::default()),
            Err((class, message)) => (vec![self.dead_letters.message(m, class, &message)], Tag { dead_letter: Some(class) }),
        }
    }

    fn acked(&mut self, tag: Tag, _latency: std::time::Duration) {
        if let Some(class) = tag.dead_letter {
            self.metrics.dead_letters.with_label_values(&[class]).inc();
        }
    }

    /// Never past the first fragment of a trace not yet emitted and acknowledged, nor of a
    /// result still waiting for its response's span.
    fn commit_point(&mut self, part: &mut Partition, offsets: &PartitionOffsets) -> Option<CommitPoint> {
        let next = offsets.commit_offset()?;
        let held = part
            .traces
            .values()
            .map(|t| t.first_offset)
            .chain(part.unacked.values().flatten().copied())
            .chain(part.responses.values().filter_map(|r| r.first_offset))
            .min();
        Some(CommitPoint { offset: held.map_or(next, |h| h.min(next)), companion: 0 })
    }

    /// Emits every complete trace (quiet after its root, or waited out); drops expired
    /// response links and results that never met theirs.
    fn tick(&mut self, parts: &mut Parts<Partition>, ctx: &TickContext<'_>) -> Vec<OutRecord> {
        let (quiet, max_wait, response_wait) = (self.config.trace_quiet, self.config.trace_max_wait, self.config.response_wait);
        let mut records = Vec::new();
        let mut open = 0;
        // Every complete trace of every partition, emitted in event-time order (the earliest
        // span of each): downstream sees runs roughly as they happened, and the parts of a keyed
        // run (one trace each, hashed to any partition) in the order they happened.
        let mut ready: Vec<(i64, String, TopicPartition, &'static str)> = Vec::new();
        for (tp, owned) in parts.iter() {
            for (id, t) in &owned.state.traces {
                let has_root = t.spans.values().any(|s| s.parent_span_id.is_none());
                let reason = if ctx.now.saturating_duration_since(t.first_seen) >= max_wait {
                    "max_wait"
                } else if has_root && ctx.now.saturating_duration_since(t.last_seen) >= quiet {
                    "quiet"
                } else {
                    continue;
                };
                let start = t.spans.values().map(|s| s.start_ns).min().unwrap_or(0) as i64;
                ready.push((start, id.clone(), tp.clone(), reason));
            }
        }
        ready.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut held: HashMap<TopicPartition, Vec<i64>> = HashMap::new();
        for (_, id, tp, reason) in ready {
            let part = &mut parts.get_mut(&tp).expect("listed above").state;
            let buf = part.traces.remove(&id).expect("listed above");
            held.entry(tp).or_default().push(buf.first_offset);
            let run = self.emit(buf);
            self.metrics.runs.with_label_values(&[if run.is_empty() { "not_a_run" } else { reason }]).inc();
            records.extend(run);
            part.remember(id, self.config.emitted_memory);
        }
        for (tp, owned) in parts.iter_mut() {
            let part = &mut owned.state;
            if let Some(h) = held.remove(tp) {
                part.unacked.entry(ctx.seq).or_default().extend(h);
            }
            let before = part.responses.len();
            part.responses.retain(|_, r| {
                let keep = ctx.now.saturating_duration_since(r.since) < response_wait;
                if !keep {
                    let n: usize = r.logs.iter().map(|l| model::logs(l).len()).sum();
                    self.metrics.log_records.with_label_values(&["unjoinable"]).inc_by(n as u64);
                }
                keep
            });
            if part.responses.len() < before {
                tracing::debug!(expired = before - part.responses.len(), "response links expired");
            }
            open += part.traces.len();
        }
        self.metrics.open_traces.set(open as i64);
        records
    }

    fn tick_acked(&mut self, parts: &mut Parts<Partition>, seq: u64) {
        for owned in parts.values_mut() {
            let keep: BTreeMap<u64, Vec<i64>> = owned.state.unacked.split_off(&(seq + 1));
            owned.state.unacked = keep;
        }
    }
}

/// The topics the ingest needs besides Octant's own: the Collector's two and the fragments
/// topic (created with as many partitions as the others).
pub fn topics_needed(config: &IngestConfig) -> BTreeSet<String> {
    [config.spans_topic.clone(), config.logs_topic.clone(), config.stream.kafka.topic(topics::OTLP_FRAGMENTS)].into_iter().collect()
}
