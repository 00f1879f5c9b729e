//! Which instrumentations can show a human's approval of an action, by instrumentation scope
//! name and version: the approval table.
//!
//! Confirmation gating counts the high-impact calls a human approved. Telemetry that has no
//! way to show an approval cannot tell an approved call from an unapproved one; scoring it
//! would read every approved call as ungated and page on a system that did everything right.
//! A run traced only by an instrumentation listed here without an approval channel is marked
//! so ([`octant_contracts::RunStarted::approval_channel`] false): its gated steps weigh
//! nothing and confirmation gating is N/A ("no approval signal in this telemetry"). A source
//! that can carry approvals but shows none on a high-impact call still scores 0.
//!
//! Entries are what was measured (`conformance/APPROVALS.md`: the OpenAI Agents SDK's
//! `needs_approval` tools paused, approved, denied and expired, traced by each library). A
//! version newer than the one measured is not listed (its channel is not known: gating is
//! scored), so an upgrade that adds a channel is never hidden; re-record and extend the table.
//! A team that adds its own approval attribute or events to a listed instrumentation declares
//! the scope in `[ingest.mapping] approval_channels` (which wins over the table).

/// One instrumentation's approval channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Instrumentation scope name, as the spans carry it.
    pub scope: &'static str,
    /// Versions the entry covers.
    pub versions: Versions,
    /// Whether its spans can show a human's approval, denial or escalation.
    pub channel: bool,
    /// The package (and what it traces).
    pub library: &'static str,
    /// What it emits around an approval.
    pub evidence: &'static str,
}

/// The scope versions an entry covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    /// Exactly this version string (the contrib instrumentation reports an empty one).
    Exactly(&'static str),
    /// Every dotted numeric version at or below this one.
    UpTo(&'static str),
}

impl Versions {
    fn covers(self, version: &str) -> bool {
        match self {
            Versions::Exactly(v) => v == version,
            Versions::UpTo(max) => match (numeric(version), numeric(max)) {
                (Some(v), Some(m)) => v <= m,
                _ => false,
            },
        }
    }
}

/// `1.2.3` → [1, 2, 3]; anything else (pre-releases, local versions) → None.
fn numeric(v: &str) -> Option<Vec<u64>> {
    if v.is_empty() {
        return None;
    }
    v.split('.').map(|p| p.parse().ok()).collect()
}

/// The measured instrumentations (`conformance/APPROVALS.md`).
pub const TABLE: &[Entry] = &[
    Entry {
        scope: "opentelemetry.instrumentation.openai_agents",
        versions: Versions::Exactly(""),
        channel: false,
        library: "opentelemetry-instrumentation-openai-agents-v2 0.1.0 (OpenTelemetry contrib; OpenAI Agents SDK)",
        evidence: "no approval request, decision or interruption; the paused call is a tool span without a result; the resumed run is a new trace",
    },
    Entry {
        scope: "opentelemetry.instrumentation.openai_agents",
        versions: Versions::UpTo("0.62.4"),
        channel: false,
        library: "opentelemetry-instrumentation-openai-agents ≤ 0.62.4 (OpenLLMetry; OpenAI Agents SDK)",
        evidence: "no approval request, decision or interruption; the paused call is a tool span without a result; the resumed run is a new trace",
    },
    Entry {
        scope: "openinference.instrumentation.openai_agents",
        versions: Versions::UpTo("2.6.0"),
        channel: false,
        library: "openinference-instrumentation-openai-agents ≤ 2.6.0 (OpenInference; OpenAI Agents SDK)",
        evidence: "no approval request, decision or interruption; the paused call is a tool span without a result; the resumed part is not traced",
    },
];

/// What the table says of `scope` at `version`: `Some(false)` when it has no approval channel,
/// `None` when it is not listed (not known: scored).
pub fn channel(scope: &str, version: &str) -> Option<bool> {
    TABLE.iter().find(|e| e.scope == scope && e.versions.covers(version)).map(|e| e.channel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_covers_what_was_measured_and_nothing_newer() {
        let agents = "opentelemetry.instrumentation.openai_agents";
        assert_eq!(channel(agents, ""), Some(false), "contrib reports no version");
        assert_eq!(channel(agents, "0.62.4"), Some(false));
        assert_eq!(channel(agents, "0.50.1"), Some(false));
        assert_eq!(channel(agents, "0.63.0"), None, "newer than measured: not known");
        assert_eq!(channel(agents, "0.62.4rc1"), None);
        assert_eq!(channel("openinference.instrumentation.openai_agents", "2.6.0"), Some(false));
        assert_eq!(channel("openinference.instrumentation.openai_agents", "2.7.0"), None);
        assert_eq!(channel("openinference.instrumentation.langchain", "0.1.80"), None, "not measured");
        assert_eq!(channel("my.agent", ""), None);
    }
}
