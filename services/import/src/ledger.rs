//! The import ledger: what `octant import` already sent, so that importing a log again sends
//! nothing — no new event on the evaluation topic, hence no new observation, lake row or dead
//! letter.
//!
//! The ledger is a topic (`octant.imports`, one partition, compacted: the last entry of each
//! import is kept), one JSON [`Entry`] per import keyed by the import's id (`inspect:<eval
//! id>`, `tau-bench:<file digest>`):
//! 1. before the first event is sent, an entry `begun` with the evaluation topic's end offsets;
//! 2. every event and dead letter, acknowledged by the brokers (`acks=all`, idempotent);
//! 3. an entry `done`.
//!
//! Importing again reads the ledger first ([`plan`]): `done` → nothing is sent; `begun` (the
//! last import was interrupted) → the evaluation topic is read from the offsets the entry
//! recorded and only the events not found there are sent ([`missing`]); no entry → everything.
//! A log that changed since it was imported (the same eval id, other events: rescored, say) is
//! not sent again — a run is scored once — and the command says so.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::Import;

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
    /// The digest of the events sent ([`Import::digest`]).
    pub digest: String,
    pub runs: usize,
    pub events: usize,
    pub dead_letters: usize,
    /// The evaluation topic's end offset per partition when the import began.
    pub from_offsets: BTreeMap<i32, i64>,
    /// When the entry was written (ms since the epoch) and by whom (`$USER`, when set).
    pub at_ms: i64,
    #[serde(default)]
    pub by: Option<String>,
}

impl Entry {
    pub fn begun(import: &Import, from_offsets: BTreeMap<i32, i64>, at_ms: i64, by: Option<String>) -> Entry {
        let file = std::path::Path::new(&import.file).file_name().map_or_else(|| import.file.clone(), |f| f.to_string_lossy().into_owned());
        Entry {
            import_id: import.id.clone(),
            state: State::Begun,
            harness: import.harness.to_string(),
            file,
            digest: import.digest.clone(),
            runs: import.runs.len(),
            events: import.events(),
            dead_letters: import.problems.len(),
            from_offsets,
            at_ms,
            by,
        }
    }
}

/// What an import does, given the ledger.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Never imported: send everything.
    Fresh,
    /// Imported before; `changed` when the log's events differ from what was sent then.
    Done { entry: Entry, changed: bool },
    /// An import that did not finish: send what the evaluation topic lacks since `entry`'s
    /// offsets.
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
        Some(e) if e.state == State::Done => Plan::Done { changed: e.digest != import.digest, entry: e.clone() },
        Some(e) => Plan::Resume { entry: e.clone() },
    }
}

/// The events of `import` whose ids are not in `present` (the ids found on the evaluation
/// topic since an interrupted import began), in order.
pub fn missing<'a>(import: &'a Import, present: &HashSet<String>) -> Vec<&'a octant_contracts::TrajectoryEvent> {
    import.runs.iter().flat_map(|r| &r.events).filter(|e| !present.contains(&e.event_id)).collect()
}
