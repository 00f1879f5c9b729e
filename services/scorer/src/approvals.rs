//! Approval channels learned from evidence, not from a list of known libraries.
//!
//! Confirmation gating counts the high-impact calls a human confirmed. Telemetry that never
//! shows an approval cannot tell an approved call from an unapproved one, and the data cannot
//! tell "this framework cannot show approvals" from "this agent never asks". So the rule rests
//! on positive evidence, per **source**: a system and the instrumentation scope that traced its
//! tool calls (`RunStarted::approval_source`; version ignored, so an upgrade keeps its state).
//!
//! - A source is **unwatched** until a run of it shows that its approval flow is traced
//!   (`RunStarted::approval_channel` `Some(true)`: a pause for approval, a decision, a denial,
//!   a confirmation attribute, a declared approval event — the ingest decides what it saw and
//!   says so in `approval_evidence`). A high-impact call of an unwatched source is a
//!   weightless unit: confirmation gating is N/A, *not assessed: unwatched*, never a 0 that
//!   could cap Oversight or page.
//! - From the event time of that run on, the source is **watched**, for good: a high-impact
//!   call without a confirmation is a measured 0. The state moves only from unwatched to
//!   watched; `[evaluation.approval_signal]` can force either (`telemetry`, `none`; default
//!   `learned`).
//! - The state is **persisted** on the compacted topic `octant.approval_sources` (one record
//!   per source, key `system` NUL `source`, JSON [`Watched`]): every scorer reads it whole at
//!   start and follows it, so a restart, a second instance or a quiet hour never flips a
//!   system between "not assessed" and 0. Until an instance has read another's record it
//!   scores that source unwatched — the direction that cannot page.
//! - A run whose own telemetry shows its approval flow is assessed whatever the state; one
//!   whose producer declares no channel (`approval_channel` `Some(false)`: an import of a log
//!   format without approvals, `[ingest.mapping] approval_channels = { scope = false }`) is
//!   not. Producers writing Octant's schema (no source) are assessed: its `confirmed` field is
//!   their channel.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use octant_engine::config::ApprovalSignal;
use serde::{Deserialize, Serialize};

/// The compacted topic of watched sources (before the configured prefix).
pub const TOPIC: &str = "octant.approval_sources";

/// One watched source: since when, and what showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watched {
    pub system: String,
    pub source: String,
    /// Event time (ms) of the run that first showed the approval flow.
    pub since: i64,
    /// What it showed (`RunStarted::approval_evidence`).
    pub evidence: String,
    /// The run that showed it.
    pub run_id: String,
}

impl Watched {
    /// The record's key on [`TOPIC`].
    pub fn key(&self) -> String {
        key(&self.system, &self.source)
    }
}

fn key(system: &str, source: &str) -> String {
    format!("{system}\u{0}{source}")
}

/// The declared signals and the learned state of one scorer process, shared by its partitions.
#[derive(Debug, Default)]
pub struct Approvals {
    declared: BTreeMap<String, ApprovalSignal>,
    watched: RwLock<HashMap<String, Watched>>,
}

impl Approvals {
    pub fn new(declared: BTreeMap<String, ApprovalSignal>) -> Self {
        Approvals { declared, watched: RwLock::default() }
    }

    /// Takes a record read back from [`TOPIC`] (another instance's, or this one's before a
    /// restart): the earliest `since` of a source wins.
    pub fn adopt(&self, w: Watched) {
        let mut map = self.watched.write().expect("not poisoned");
        match map.get(&w.key()) {
            Some(old) if old.since <= w.since => {}
            _ => {
                map.insert(w.key(), w);
            }
        }
    }

    /// A source a run showed watched: `Some(record)` to persist when it was not known so.
    pub fn learn(&self, system: &str, source: &str, since: i64, evidence: &str, run_id: &str) -> Option<Watched> {
        let k = key(system, source);
        if self.watched.read().expect("not poisoned").get(&k).is_some_and(|w| w.since <= since) {
            return None;
        }
        let w = Watched { system: system.into(), source: source.into(), since, evidence: evidence.into(), run_id: run_id.into() };
        self.watched.write().expect("not poisoned").insert(k, w.clone());
        Some(w)
    }

    /// Whether a high-impact call at event time `at`, of a run of `system` whose telemetry
    /// came from `source` and showed `channel`, is assessed (a unit of confirmation gating
    /// that weighs) or not (weightless: N/A, unwatched).
    pub fn assessed(&self, system: &str, source: Option<&str>, channel: Option<bool>, at: i64) -> bool {
        match self.declared.get(system).copied().unwrap_or_default() {
            ApprovalSignal::None => false,
            ApprovalSignal::Telemetry => true,
            ApprovalSignal::Learned => match (channel, source) {
                (Some(shown), _) => shown,
                (None, None) => true,
                (None, Some(source)) => self.watched.read().expect("not poisoned").get(&key(system, source)).is_some_and(|w| w.since <= at),
            },
        }
    }

    /// The watched sources known (for the admin metrics).
    pub fn watched_count(&self) -> usize {
        self.watched.read().expect("not poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_unwatched_until_it_shows_its_approval_flow_and_watched_for_good_after() {
        let a = Approvals::new(BTreeMap::new());
        let (sys, src) = ("support-bot", "pydantic-ai");
        assert!(!a.assessed(sys, Some(src), None, 100), "no evidence yet: not assessed");
        assert!(a.assessed(sys, Some(src), Some(true), 100), "a run that shows its flow is assessed");
        assert!(!a.assessed(sys, Some(src), Some(false), 100), "declared without a channel");
        assert!(a.assessed(sys, None, None, 100), "Octant's own schema: its confirmed field is the channel");
        let w = a.learn(sys, src, 500, "pause: deferred tool requests", "run-1").expect("new");
        assert_eq!(w.key(), "support-bot\u{0}pydantic-ai");
        assert!(a.learn(sys, src, 900, "decision", "run-2").is_none(), "known: nothing to persist");
        assert!(!a.assessed(sys, Some(src), None, 499), "before it showed: still not assessed");
        assert!(a.assessed(sys, Some(src), None, 500) && a.assessed(sys, Some(src), None, 10_000));
        assert!(!a.assessed("other-bot", Some(src), None, 10_000), "per system");
        assert!(!a.assessed(sys, Some("strands"), None, 10_000), "per source");
        // Another instance's earlier record wins; a later one changes nothing.
        a.adopt(Watched { since: 300, ..w.clone() });
        assert!(a.assessed(sys, Some(src), None, 300));
        a.adopt(Watched { since: 800, ..w });
        assert!(a.assessed(sys, Some(src), None, 300));
        assert_eq!(a.watched_count(), 1);
    }

    #[test]
    fn a_declaration_forces_either_state() {
        let declared = BTreeMap::from([("on".to_string(), ApprovalSignal::Telemetry), ("off".to_string(), ApprovalSignal::None)]);
        let a = Approvals::new(declared);
        assert!(a.assessed("on", Some("x"), None, 0));
        a.learn("off", "x", 0, "decision", "r");
        assert!(!a.assessed("off", Some("x"), Some(true), 10));
    }
}
