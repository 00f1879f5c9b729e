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
    #[serde(default)]
    pub runs_done: BTreeSet<String>,
    /// The unreadable records dead-lettered likewise, by their name in the log (a member of an
    /// `.eval` archive, `samples[3]`): positions shift between a log and its retry.
    #[serde(default)]
    pub dead_letters_done: BTreeSet<String>,
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

    /// The entry that ends a part of `import`: every run and unreadable record of the part
    /// (`sent`) done, and the log's digest as it is now.
    pub fn done(mut self, import: &Import, sent: &Sending<'_>, at_ms: i64) -> Entry {
        self.state = State::Done;
        self.digest.clone_from(&import.digest);
        self.runs_done.extend(sent.runs.iter().map(|r| run_key(&r.run_id)));
        self.dead_letters_done.extend(sent.problems.iter().map(|p| p.record.clone()));
        self.at_ms = at_ms;
        self
    }

    /// The size of this entry with `more` runs and records added (the ledger's record must
    /// stay within the brokers' limit: checked before anything is sent).
    pub fn size_with(&self, sent: &Sending<'_>) -> usize {
        let runs = sent.runs.len() * 16;
        let records: usize = sent.problems.iter().map(|p| p.record.len() + 4).sum();
        serde_json::to_vec(self).map_or(usize::MAX, |v| v.len()) + runs + records
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

/// The latest entry of every import in the ledger's records (key and payload, in offset
/// order). A record this version cannot read is an error, never skipped: skipping it would
/// make its log look new and send it again.
pub fn latest(records: impl IntoIterator<Item = (Option<Vec<u8>>, Vec<u8>)>) -> Result<BTreeMap<String, Entry>, String> {
    let mut out = BTreeMap::new();
    for (key, payload) in records {
        match serde_json::from_slice::<Entry>(&payload) {
            Ok(e) => {
                out.insert(e.import_id.clone(), e);
            }
            Err(e) => {
                let key = key.map(|k| String::from_utf8_lossy(&k).into_owned()).unwrap_or_default();
                return Err(format!("the import ledger's entry {key:?} cannot be read by this version ({e})"));
            }
        }
    }
    Ok(out)
}

/// What to do with `import`, given the ledger's latest entries.
pub fn plan(ledger: &BTreeMap<String, Entry>, import: &Import) -> Plan {
    match ledger.get(&import.id) {
        None => Plan::Fresh,
        Some(e) if e.state == State::Begun => Plan::Resume { entry: e.clone() },
        Some(e)
            if import.runs.iter().all(|r| e.runs_done.contains(&run_key(&r.run_id)))
                && import.problems.iter().all(|p| e.dead_letters_done.contains(&p.record)) =>
        {
            Plan::Done { changed: e.digest != import.digest, entry: e.clone() }
        }
        Some(e) => Plan::Grown { entry: e.clone() },
    }
}

/// What a part sends: the runs not done before (`runs`), of which only the events not already
/// on the topic (`events`, run by run); the unreadable records not done before (`problems`),
/// of which only the dead letters not already on the topic (`dead_letters`).
#[derive(Debug)]
pub struct Sending<'a> {
    pub runs: Vec<&'a Run>,
    pub events: Vec<&'a octant_contracts::TrajectoryEvent>,
    pub problems: Vec<&'a Problem>,
    pub dead_letters: Vec<&'a Problem>,
}

/// The part of `import` to send after `before` (none: everything). `present`: for an
/// interrupted part, the event ids and dead-letter ids found on the topics since it began.
pub fn to_send<'a>(import: &'a Import, before: Option<&Entry>, present: &HashSet<String>) -> Sending<'a> {
    let runs: Vec<&Run> = import.runs.iter().filter(|r| before.is_none_or(|e| !e.runs_done.contains(&run_key(&r.run_id)))).collect();
    let events = runs.iter().flat_map(|r| &r.events).filter(|e| !present.contains(&e.event_id)).collect();
    let problems: Vec<&Problem> =
        import.problems.iter().filter(|p| before.is_none_or(|e| !e.dead_letters_done.contains(&p.record))).collect();
    let dead_letters = problems.iter().copied().filter(|p| !present.contains(&dead_letter_id(import, p))).collect();
    Sending { runs, events, problems, dead_letters }
}

/// A problem's dead-letter source: the import (`import:<id>`); its offset is the record's
/// position in the file, its key the record's name.
pub fn dead_letter_topic(import: &Import) -> String {
    format!("import:{}", import.id)
}

/// The dead letter's id (as `octant_runtime::dlq::dead_letter` makes it: service, topic,
/// partition, offset).
pub fn dead_letter_id(import: &Import, p: &Problem) -> String {
    format!("import/{}/-1/{}", dead_letter_topic(import), p.index)
}

/// Whether a record on the evaluation topic (by its key, the run id) may be one of `runs`'
/// events: what a resume keeps of the topic.
pub fn keys_of<'a>(runs: &[&'a Run]) -> HashSet<&'a str> {
    runs.iter().map(|r| r.run_id.as_str()).collect()
}
