//! The aggregator's event-time watermark, from the `Watermark` records the scorer sends to
//! every observation partition. Pure: no I/O, no clock.
//!
//! One system's observations come from every scorer input partition, and those partitions
//! progress at different speeds (a backlog, a slow instance, a rebalance). A watermark taken
//! from the observations themselves would run ahead with the fastest partition and declare
//! the slower ones' data late — windows would then depend on timing. Instead (as Flink does
//! with per-input watermarks) the watermark of an aggregator partition is the **minimum**
//! over every upstream partition, and it is undefined until every partition of every
//! upstream topic has been heard from. An upstream partition announced **idle** (caught up,
//! no input for a while) is left out of the minimum until it sends progress again; when every
//! upstream partition is idle the watermark is the least progress they announced (nothing older
//! is coming).
//!
//! An observation is then late only when it is older than its own upstream partition's
//! progress by more than the allowed lateness — a property of the input data, not of timing.
//!
//! "Every upstream topic" is known before any of its watermarks arrive: the scorer reads
//! both trajectory topics, and an aggregator partition that had heard only from the
//! production topic's partitions would otherwise take their minimum as the watermark and
//! declare the evaluation topic's first observations late (seen: 13,613 late observations
//! when the scorer's first watermarks of the evaluation topic came after the production
//! topic's). An expected topic not heard from yet counts as a partition waited for; an empty
//! topic's partitions are announced idle by the scorer within its idle interval.

use std::collections::BTreeMap;

use octant_contracts::Watermark;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SourceState {
    watermark: Option<i64>,
    idle: bool,
}

/// Upstream progress seen on one aggregator input partition.
#[derive(Debug, Default)]
pub struct Upstream {
    /// (topic, partition) → state. A partition's watermark only grows (a restarted scorer
    /// replays from its last commit and announces less at first).
    sources: BTreeMap<(String, i32), SourceState>,
    /// Upstream topic → partition count.
    partitions: BTreeMap<String, i32>,
    /// Upstream topics known before their first watermark (the scorer's inputs).
    expected: Vec<String>,
}

impl Upstream {
    /// Progress over `topics` (at least), each waited for until one of its watermarks says how
    /// many partitions it has and all of them have been heard from.
    pub fn expecting(topics: impl IntoIterator<Item = String>) -> Upstream {
        Upstream { expected: topics.into_iter().collect(), ..Upstream::default() }
    }

    /// Records `w`; returns the combined watermark afterwards.
    pub fn observe(&mut self, w: &Watermark) -> Option<i64> {
        self.partitions.insert(w.source_topic.clone(), w.source_partitions.max(w.source_partition + 1));
        let s = self.sources.entry((w.source_topic.clone(), w.source_partition)).or_insert(SourceState { watermark: None, idle: false });
        s.watermark = match (s.watermark, w.watermark) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        s.idle = w.idle;
        self.current()
    }

    /// The minimum over every non-idle upstream partition; `None` while some upstream
    /// partition has not been heard from or every one is idle.
    pub fn current(&self) -> Option<i64> {
        if self.waiting() > 0 {
            return None;
        }
        let active = self.sources.values().filter(|s| !s.idle).filter_map(|s| s.watermark).min();
        // Every partition idle: the least progress any announced — they have nothing more to
        // send, so nothing older is coming. (A restarted aggregator that hears only idle
        // announcements, the scorer having caught up before it, still closes its windows:
        // before, it never did — seen as a flaky "did not catch up" under load.)
        active.or_else(|| self.sources.values().filter_map(|s| s.watermark).min())
    }

    /// Upstream partitions not heard from yet (an expected topic not heard from at all counts
    /// as one).
    pub fn waiting(&self) -> usize {
        let expected: i32 = self.partitions.values().sum();
        let heard = self.sources.keys().filter(|(t, p)| self.partitions.get(t).is_some_and(|n| p < n)).count();
        let unheard_topics = self.expected.iter().filter(|t| !self.partitions.contains_key(*t)).count();
        (expected as usize).saturating_sub(heard) + unheard_topics
    }

    /// Upstream partitions currently idle.
    pub fn idle(&self) -> usize {
        self.sources.values().filter(|s| s.idle).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wm(topic: &str, p: i32, n: i32, t: Option<i64>, idle: bool) -> Watermark {
        Watermark {
            service: "scorer".into(),
            source_topic: topic.into(),
            source_partition: p,
            source_partitions: n,
            watermark: t,
            idle,
            produced_at: 0,
        }
    }

    #[test]
    fn minimum_over_every_upstream_partition() {
        let mut u = Upstream::default();
        assert_eq!(u.observe(&wm("prod", 0, 2, Some(100), false)), None, "partition 1 not heard from");
        assert_eq!(u.waiting(), 1);
        assert_eq!(u.observe(&wm("prod", 1, 2, Some(50), false)), Some(50));
        assert_eq!(u.observe(&wm("prod", 1, 2, Some(40), false)), Some(50), "a partition's watermark never goes back");
        assert_eq!(u.observe(&wm("prod", 1, 2, Some(150), false)), Some(100));
        // A second upstream topic: wait for all of its partitions.
        assert_eq!(u.observe(&wm("eval", 0, 2, None, true)), None);
        assert_eq!(u.observe(&wm("eval", 1, 2, None, true)), Some(100), "idle partitions are left out");
        assert_eq!(u.idle(), 2);
        assert_eq!(u.observe(&wm("eval", 1, 2, Some(70), false)), Some(70), "back from idle");
        // Everything idle: the least progress announced (eval 0 never had any).
        for (t, p) in [("prod", 0), ("prod", 1), ("eval", 1)] {
            u.observe(&wm(t, p, 2, None, true));
        }
        assert_eq!(u.current(), Some(70));
        // A restarted aggregator hearing only idle announcements (the scorer caught up before
        // it): their progress, not nothing.
        let mut fresh = Upstream::default();
        assert_eq!(fresh.observe(&wm("prod", 0, 2, Some(300), true)), None, "partition 1 not heard from");
        assert_eq!(fresh.observe(&wm("prod", 1, 2, Some(200), true)), Some(200));
    }

    /// The scorer's first watermarks all come from the production topic: with the evaluation
    /// topic expected, no watermark until it is heard from (idle, when empty).
    #[test]
    fn an_expected_topic_holds_the_watermark_until_heard_from() {
        let mut u = Upstream::expecting(["prod".to_string(), "eval".to_string()]);
        assert_eq!(u.waiting(), 2);
        assert_eq!(u.observe(&wm("prod", 0, 2, Some(100), false)), None);
        assert_eq!(u.observe(&wm("prod", 1, 2, Some(500), false)), None, "eval not heard from: its data may be older");
        assert_eq!(u.waiting(), 1);
        assert_eq!(u.observe(&wm("eval", 0, 2, Some(30), false)), None, "eval has two partitions");
        assert_eq!(u.observe(&wm("eval", 1, 2, None, true)), Some(30), "an empty partition announced idle");
        // Without expectations, the old behaviour: the production topic alone decides.
        let mut plain = Upstream::default();
        plain.observe(&wm("prod", 0, 2, Some(100), false));
        assert_eq!(plain.observe(&wm("prod", 1, 2, Some(500), false)), Some(100));
    }
}
