//! The import ledger: what `octant import` already sent, so that importing a log again sends
//! nothing — no new event on the evaluation topic, hence no new observation, lake row or dead
//! letter.
//!
//! The ledger is a topic (`octant.imports`, one partition, compacted: the last entry of each
//! import is kept), one JSON [`Entry`] per import keyed by the import's id (`inspect:<task
//! id>`, `tau-bench:<system>@<version>/<file name>`, `tau2-bench:<run digest>`). An import
//! sends in parts:
//! 1. an entry `begun`, with the runs done before (none the first time) and the evaluation and
//!    dead-letter topics' end offsets;
//! 2. every event of the runs not done yet, and the dead letters not sent yet, acknowledged by
//!    the brokers (`acks=all`, idempotent);
//! 3. an entry `done` listing every run and dead letter sent.
//!
//! Importing again reads the ledger first ([`plan`]): `done` with every run of the log →
//! nothing is sent (if the log's events changed since — rescored, say — the command says so: a
//! run is scored once); `done` without some runs (a log that grew: a τ-bench checkpoint
//! rewritten, an `eval-retry`) → those runs; `begun` (the last import was interrupted) → the
//! topics are read from the offsets it recorded and only what is not found there is sent
//! ([`to_send`]); no entry → everything.
//!
//! Runs are listed by a 48-bit digest of their id: a ledger record of 1 MiB (Kafka's default
//! limit) holds about 60,000 runs.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use crate::{Import, Problem, Run};

/// The ledger topic's name (before the configured prefix).
pub const TOPIC: &str = "octant.imports";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Begun,
    Done,
}

/// One import's entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub import_id: String,
    pub state: State,
    pub harness: String,
    /// The file's name (no directory: the ledger says what, not where on whose disk).
    pub file: String,
    /// The digest of the log's events ([`Import::digest`]) when the entry was written.
    pub digest: String,
    /// The runs sent and acknowledged (`done`) or before this part began (`begun`), by
    /// [`run_key`].
    pub runs_done: BTreeSet<String>,
    /// The dead letters sent likewise, by their record's position in the log.
    #[serde(default)]
    pub dead_letters_done: BTreeSet<i64>,
    /// The evaluation and dead-letter topics' end offsets per partition when this part began.
    pub from_offsets: BTreeMap<i32, i64>,
    #[serde(default)]
    pub dlq_from_offsets: BTreeMap<i32, i64>,
    /// When the entry was written (ms since the epoch) and by whom (`$USER`, when set).
    pub at_ms: i64,
    #[serde(default)]
    pub by: Option<String>,
}

/// A run's key in the ledger: the first 12 hex digits of its id's SHA-256.
pub fn run_key(run_id: &str) -> String {
    crate::short_id(run_id)[..12].to_string()
}

impl Entry {
    /// The entry that begins a part of `import`, after `before` (the import's last entry).
    pub fn begun(
        import: &Import,
        before: Option<&Entry>,
        offsets: (BTreeMap<i32, i64>, BTreeMap<i32, i64>),
        at_ms: i64,
        by: Option<String>,
    ) -> Entry {
        let file = std::path::Path::new(&import.file).file_name().map_or_else(|| import.file.clone(), |f| f.to_string_lossy().into_owned());
        Entry {
            import_id: import.id.clone(),
            state: State::Begun,
            harness: import.harness.to_string(),
            file,
            digest: import.digest.clone(),
            runs_done: before.map(|e| e.runs_done.clone()).unwrap_or_default(),
            dead_letters_done: before.map(|e| e.dead_letters_done.clone()).unwrap_or_default(),
            from_offsets: offsets.0,
            dlq_from_offsets: offsets.1,
            at_ms,
            by,
        }
    }

    /// The entry that ends a part: every run and dead letter of `sent` added.
    pub fn done(mut self, sent: &Sending<'_>, at_ms: i64) -> Entry {
        self.state = State::Done;
        self.runs_done.extend(sent.runs.iter().map(|r| run_key(&r.run_id)));
        self.dead_letters_done.extend(sent.dead_letters.iter().map(|p| p.index));
        self.at_ms = at_ms;
        self
    }
}

/// What an import does, given the ledger.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Never imported: send everything.
    Fresh,
    /// Every run of the log was sent before; `changed`: its events differ from what was sent.
    Done { entry: Entry, changed: bool },
    /// Imported before, but the log has runs that were not (it grew): send those.
    Grown { entry: Entry },
    /// A part that did not finish: send what the topics lack since its offsets.
    Resume { entry: Entry },
}

/// The latest entry of every import in the ledger's records (payloads in offset order);
/// records that are not entries are skipped.
pub fn latest(payloads: impl IntoIterator<Item = Vec<u8>>) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    for p in payloads {
        if let Ok(e) = serde_json::from_slice::<Entry>(&p) {
            out.insert(e.import_id.clone(), e);
        }
    }
    out
}

/// What to do with `import`, given the ledger's latest entries.
pub fn plan(ledger: &BTreeMap<String, Entry>, import: &Import) -> Plan {
    match ledger.get(&import.id) {
        None => Plan::Fresh,
        Some(e) if e.state == State::Begun => Plan::Resume { entry: e.clone() },
        Some(e) if import.runs.iter().all(|r| e.runs_done.contains(&run_key(&r.run_id))) => {
            Plan::Done { changed: e.digest != import.digest, entry: e.clone() }
        }
        Some(e) => Plan::Grown { entry: e.clone() },
    }
}

/// What a part sends: the runs not done before (`runs`), of which only the events not already
/// on the topic (`events`), and the dead letters not sent before.
#[derive(Debug)]
pub struct Sending<'a> {
    pub runs: Vec<&'a Run>,
    pub events: Vec<&'a octant_contracts::TrajectoryEvent>,
    pub dead_letters: Vec<&'a Problem>,
}

/// The part of `import` to send after `before` (none: everything). `present`: for an
/// interrupted part, the event ids and dead-letter ids found on the topics since it began.
pub fn to_send<'a>(import: &'a Import, before: Option<&Entry>, present: &HashSet<String>) -> Sending<'a> {
    let runs: Vec<&Run> = import.runs.iter().filter(|r| before.is_none_or(|e| !e.runs_done.contains(&run_key(&r.run_id)))).collect();
    let events = runs.iter().flat_map(|r| &r.events).filter(|e| !present.contains(&e.event_id)).collect();
    let dead_letters = import
        .problems
        .iter()
        .filter(|p| before.is_none_or(|e| !e.dead_letters_done.contains(&p.index)))
        .filter(|p| !present.contains(&dead_letter_id(import, p)))
        .collect();
    Sending { runs, events, dead_letters }
}

/// A problem's dead-letter source: the import (`import:<id>`), its record's position.
pub fn dead_letter_topic(import: &Import) -> String {
    format!("import:{}", import.id)
}

/// The dead letter's id (as `octant_runtime::dlq::dead_letter` makes it: service, topic,
/// partition, offset).
pub fn dead_letter_id(import: &Import, p: &Problem) -> String {
    format!("import/{}/-1/{}", dead_letter_topic(import), p.index)
}
