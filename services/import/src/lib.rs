//! Evaluation harnesses in: the logs evaluation teams already have on disk, mapped to Octant's
//! trajectory events (`octant import`). No Kafka here: the command produces what these
//! functions return, and keeps the import ledger ([`ledger`]) so that importing a log twice
//! sends nothing the second time.
//!
//! - [`inspect`]: Inspect AI eval logs — `.eval` (a ZIP archive; Zstandard members as current
//!   Inspect writes them, deflate as older Inspect did) and `.json`.
//! - [`tau`]: τ-bench result files (the list of `EnvRunResult` of its
//!   `historical_trajectories/`) and τ²-bench `results.json` files.
//!
//! Every id is derived from the log: a run is `<harness>-<log id>-<task>-<attempt>` and its
//! events are `<run id>/<sequence>`, so the same log always maps to the same events. A record
//! the mapping cannot read is a [`Problem`] (its file, record and message); the rest of the log
//! goes on.

pub mod inspect;
pub mod ledger;
pub mod tau;
mod time;

use std::collections::BTreeMap;

use octant_contracts::{EventKind, Source, SystemRef, TrajectoryEvent};

/// What the command's flags override or declare, for every harness.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The system (default: the model the log names, or the file's name).
    pub system: Option<String>,
    /// The system's version (default: a digest of the solver or agent configuration).
    pub version: Option<String>,
    /// The benchmark (default: the task the log names, or the harness).
    pub benchmark: Option<String>,
    /// The task family (default: the dataset the log names, when it names one).
    pub task_family: Option<String>,
    /// A declared contamination of the benchmark (0–1), when one was measured.
    pub contamination: Option<f64>,
    /// Inspect: the scorer whose verdict is the task's success (default: the headline scorer,
    /// else the first).
    pub success_scorer: Option<String>,
    /// Inspect: scorers declared a verifier or a judge, beyond the built-in ones Octant knows.
    pub scorer_kinds: BTreeMap<String, Rater>,
    /// τ-bench: the event time of the first run (ms since the epoch); its files have no times.
    pub start_ms: Option<i64>,
}

/// Who a scorer is: a deterministic check, or a model grading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rater {
    Verifier,
    Judge,
}

impl Rater {
    pub fn as_str(self) -> &'static str {
        match self {
            Rater::Verifier => "verifier",
            Rater::Judge => "judge",
        }
    }
}

/// One harness log, mapped.
#[derive(Debug, Clone)]
pub struct Import {
    /// The log's identity in the ledger: `inspect:<eval id>`, `tau-bench:<file digest>`.
    pub id: String,
    /// `inspect`, `tau-bench` or `tau2-bench`.
    pub harness: &'static str,
    /// The file as given.
    pub file: String,
    /// SHA-256 of the mapped events: the same log maps to the same digest.
    pub digest: String,
    /// Runs in event-time order of their start.
    pub runs: Vec<Run>,
    /// Records the mapping could not read (the rest of the log was mapped).
    pub problems: Vec<Problem>,
    /// What the reader wants said (partial logs, samples with errors, defaults taken).
    pub notes: Vec<String>,
}

impl Import {
    /// An import of `runs` (put in time order; the digest computed over them).
    pub(crate) fn new(
        id: String,
        harness: &'static str,
        file: &str,
        mut runs: Vec<Run>,
        problems: Vec<Problem>,
        notes: Vec<String>,
    ) -> Import {
        in_time_order(&mut runs);
        Import { id, harness, file: file.to_string(), digest: events_digest(&runs), runs, problems, notes }
    }

    pub fn events(&self) -> usize {
        self.runs.iter().map(|r| r.events.len()).sum()
    }
}

/// One sample of one epoch, or one trial of one task: a run.
#[derive(Debug, Clone)]
pub struct Run {
    pub run_id: String,
    pub events: Vec<TrajectoryEvent>,
}

/// A record of a log that could not be mapped.
#[derive(Debug, Clone)]
pub struct Problem {
    /// Where in the file: a member of an `.eval` archive, or `samples[3]`.
    pub record: String,
    /// The record's position in the file (its dead letter's offset).
    pub index: i64,
    /// Why it could not be read (never the record's content: the record stays in the file).
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Format { path: String, message: String },
    #[error("{path}: the log is still being written (status `{status}`): import it when the evaluation has ended")]
    Incomplete { path: String, status: String },
}

/// SHA-256 of `bytes`, in hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA256, bytes))
}

/// A short stable id of `s` (the first 16 hex digits of its SHA-256).
pub fn short_id(s: &str) -> String {
    digest(s.as_bytes())[..16].to_string()
}

/// `s` as an id part: itself when it is short and plain (`[A-Za-z0-9_.-]`, ≤ 64), else its
/// short digest — a run id is a Kafka key and part of a page address.
pub fn id_part(s: &str) -> String {
    if !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-') {
        s.to_string()
    } else {
        short_id(s)
    }
}

/// The digest of a list of runs: every event's JSON, in order.
pub(crate) fn events_digest(runs: &[Run]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for ev in runs.iter().flat_map(|r| &r.events) {
        ctx.update(&serde_json::to_vec(ev).expect("events serialise"));
        ctx.update(b"\n");
    }
    hex::encode(ctx.finish())
}

/// Builds one run's events: sequence numbers from 0, event ids `<run id>/<sequence>`, event
/// times never going back (a harness's clock may log a later event a moment earlier).
pub(crate) struct RunBuilder {
    run_id: String,
    system: SystemRef,
    last_time: i64,
    events: Vec<TrajectoryEvent>,
}

impl RunBuilder {
    pub fn new(run_id: String, system: SystemRef) -> RunBuilder {
        RunBuilder { run_id, system, last_time: i64::MIN, events: Vec::new() }
    }

    /// The next event of `kind` at `time`; `fill` sets its body.
    pub fn push(&mut self, time: i64, kind: EventKind, fill: impl FnOnce(&mut TrajectoryEvent)) {
        let time = time.max(self.last_time);
        self.last_time = time;
        let seq = self.events.len() as i64;
        let mut ev = TrajectoryEvent::bare(
            format!("{}/{seq}", self.run_id),
            self.run_id.clone(),
            self.system.clone(),
            Source::Evaluation,
            time,
            seq,
            kind,
        );
        fill(&mut ev);
        self.events.push(ev);
    }

    pub fn last_time(&self) -> i64 {
        self.last_time
    }

    pub fn finish(self) -> Run {
        Run { run_id: self.run_id, events: self.events }
    }
}

/// Orders runs by their start (event time, then id): the order a live harness would have sent
/// them in, so downstream windows see no disorder the log did not have.
pub(crate) fn in_time_order(runs: &mut [Run]) {
    runs.sort_by(|a, b| {
        let t = |r: &Run| r.events.first().map_or(i64::MIN, |e| e.event_time);
        t(a).cmp(&t(b)).then_with(|| a.run_id.cmp(&b.run_id))
    });
}

/// The tool messages of a chat transcript, by the id of the call each answers (`id_field`:
/// `tool_call_id` in OpenAI's and Inspect's messages, `id` in τ²-bench's).
pub(crate) fn tool_answers<'a>(
    messages: &'a [serde_json::Value],
    id_field: &str,
) -> std::collections::BTreeMap<&'a str, &'a serde_json::Value> {
    messages
        .iter()
        .filter(|m| m.get("role").and_then(serde_json::Value::as_str) == Some("tool"))
        .filter_map(|m| Some((m.get(id_field)?.as_str()?, m)))
        .collect()
}

/// A JSON value as text: strings as they are, anything else as compact JSON.
pub(crate) fn text_of(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
