//! Pane sums: a period's verdicts from stored per-pane state, at a cost that depends on the
//! number of series and panes, never on the number of observations.
//!
//! The bootstrap is mergeable by construction: a cluster's replicate weights depend only on
//! its identity, the seed and the replicate, so the replicate sums of a period are the sums of
//! its panes' replicate sums — also for a run whose observations fall in two panes (its weight
//! multiplies both parts). A [`PaneSums`] holds, per series and pane, exactly what a window
//! needs of that pane:
//!
//! | series | kept per pane | size at B = 1000 |
//! |---|---|---|
//! | linear (rates, ratios, ECE, fairness gap) | units, the B × dims replicate sums and dims point sums (fixed point), the sorted cluster hashes (the window counts distinct runs), the log e-factors of a vetoed rate, the fairness groups by component | 16 KB for a ratio (dims 2, 8 B per sum) + 8 B per run |
//! | tasks (pass@k, pass^k, consistency) | attempts and successes per task | 24 B + name per task |
//! | declared (contamination) | the largest declared value and the count | 16 B |
//!
//! [`Period`] merges the panes of a period into the same [`Emission`] the window code
//! ([`crate::window::Windows`]) emits over the same observations with the same panes, to the
//! bit (a test), using every thread given for independent series.
//!
//! Two limits, both documented where the store is used: fairness groups beyond
//! `MAX_GROUPS` in a period are left out by first appearance across panes (the window code
//! drops by first appearance in input order), and the group order inside a state may differ
//! (the gap statistic does not depend on it).

use std::collections::BTreeMap;

use octant_core::catalogue::spec;
use octant_core::stats::bootstrap::{BootstrapSpec, ReplicateSums};
use octant_core::stats::sequential::PaneLogs;

use crate::window::{
    Emission, MAX_GROUPS, PaneEvidence, SeriesKey, SeriesState, SeriesWindow, Sums, Windows, declared_window, has_evidence, linear_window,
    pane_logs, tasks_window,
};

/// The mergeable state of one series over one pane.
// The linear state is the common case (one per series and hour): not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum PaneSums {
    Linear {
        units: u64,
        /// Units of weight 0 (a gated step of an unwatched source), counted apart as the window
        /// code counts them: a period of nothing else is N/A `unwatched`, not absent.
        weightless: u64,
        sums: ReplicateSums,
        /// Hashes of the pane's clusters, sorted.
        clusters: Vec<u64>,
        /// The log e-factors of a vetoed rate's pane.
        logs: Option<PaneLogs>,
        /// Fairness groups by component block (`sums` components 2i, 2i + 1 are group i).
        groups: Vec<String>,
    },
    /// Task → (attempts, successes).
    Tasks(BTreeMap<String, (u64, u64)>),
    Declared {
        max: f64,
        count: u64,
    },
}

/// A period's state merged pane by pane as panes arrive (in any order, from any number of
/// stores): one window's sums per series, never every pane's.
#[derive(Debug, Default)]
pub struct Period {
    series: BTreeMap<SeriesKey, Merged>,
}

#[derive(Debug)]
enum Merged {
    Linear {
        units: u64,
        weightless: u64,
        sums: ReplicateSums,
        hashes: Vec<u64>,
        /// Per pane: what the e-detector needs (sorted by pane at emission).
        logs: Vec<PaneEvidence>,
        /// Fairness groups by component block, in order of first arrival.
        groups: Vec<String>,
    },
    Tasks(BTreeMap<String, (u64, u64)>),
    Declared {
        max: f64,
        count: u64,
    },
}

/// `sums` merged into `into`, whose groups by component block are `groups` (extended with
/// the new ones, up to `MAX_GROUPS`).
fn merge_grouped(into: &mut ReplicateSums, groups: &mut Vec<String>, sums: &ReplicateSums, names: &[String]) -> Option<()> {
    if groups.is_empty() && names.is_empty() {
        return into.merge(sums).ok();
    }
    for name in names {
        if !groups.contains(name) && groups.len() < MAX_GROUPS {
            groups.push(name.clone());
        }
    }
    let map: Vec<Option<usize>> =
        (0..sums.dims()).map(|d| names.get(d / 2).and_then(|name| groups.iter().position(|x| x == name)).map(|i| 2 * i + d % 2)).collect();
    into.merge_mapped(sums, &map).ok()
}

impl Period {
    pub fn new() -> Period {
        Period::default()
    }

    /// Adds series `key`'s pane starting at `t`. A pane of another kind or width than the
    /// series' earlier panes is refused (`false`).
    pub fn add(&mut self, key: SeriesKey, t: i64, pane: PaneSums, boot: &BootstrapSpec) -> bool {
        use std::collections::btree_map::Entry;
        let entry = match self.series.entry(key) {
            Entry::Vacant(v) => {
                let merged = match pane {
                    PaneSums::Linear { units, weightless, sums, clusters, logs, groups } => {
                        let evidence = (t, logs, sums.point()[0], sums.point().get(1).copied().unwrap_or(0));
                        if groups.is_empty() {
                            Merged::Linear { units, weightless, sums, hashes: clusters, logs: vec![evidence], groups }
                        } else {
                            // Renumbered from the start: groups beyond MAX_GROUPS are left out.
                            let (mut into, mut g) = (ReplicateSums::new(boot, sums.dims()), Vec::new());
                            if merge_grouped(&mut into, &mut g, &sums, &groups).is_none() {
                                return false;
                            }
                            Merged::Linear { units, weightless, sums: into, hashes: clusters, logs: vec![evidence], groups: g }
                        }
                    }
                    PaneSums::Tasks(m) => Merged::Tasks(m),
                    PaneSums::Declared { max, count } => Merged::Declared { max, count },
                };
                v.insert(merged);
                return true;
            }
            Entry::Occupied(o) => o.into_mut(),
        };
        match (entry, pane) {
            (
                Merged::Linear { units, weightless, sums, hashes, logs, groups },
                PaneSums::Linear { units: n, weightless: w, sums: s, clusters, logs: l, groups: g },
            ) => {
                if merge_grouped(sums, groups, &s, &g).is_none() {
                    return false;
                }
                *units += n;
                *weightless += w;
                hashes.extend_from_slice(&clusters);
                logs.push((t, l, s.point()[0], s.point().get(1).copied().unwrap_or(0)));
                true
            }
            (Merged::Tasks(m), PaneSums::Tasks(p)) => {
                for (task, (n, c)) in p {
                    let e = m.entry(task).or_default();
                    e.0 += n;
                    e.1 += c;
                }
                true
            }
            (Merged::Declared { max, count }, PaneSums::Declared { max: x, count: n }) => {
                *max = max.max(x);
                *count += n;
                true
            }
            _ => false,
        }
    }

    /// Everything `other` merged, into this one.
    pub fn absorb(&mut self, other: Period, boot: &BootstrapSpec) -> bool {
        let mut ok = true;
        for (key, m) in other.series {
            ok &= match m {
                Merged::Linear { units, weightless, sums, hashes, logs, groups } => {
                    let mut logs = logs.into_iter();
                    let first = logs.next().expect("a merged series has a pane");
                    let pane = PaneSums::Linear { units, weightless, sums, clusters: hashes, logs: first.1, groups };
                    let added = self.add(key.clone(), first.0, pane, boot);
                    // The first pane's evidence entry stands for the merged state's point sums:
                    // put the per-pane entries back (only when merged: a refused state left the
                    // series as it was).
                    if added && let Some(Merged::Linear { logs: mine, .. }) = self.series.get_mut(&key) {
                        mine.pop();
                        mine.push(first);
                        mine.extend(logs);
                    }
                    added
                }
                Merged::Tasks(m) => self.add(key, 0, PaneSums::Tasks(m), boot),
                Merged::Declared { max, count } => self.add(key, 0, PaneSums::Declared { max, count }, boot),
            };
        }
        ok
    }

    /// The window `[start, end)` of every series added (its panes are the caller's: those of
    /// the period); `threads` threads share the series.
    pub fn emission(&self, start: i64, end: i64, boot: &BootstrapSpec, threads: usize) -> Option<Emission> {
        let series: Vec<(&SeriesKey, &Merged)> = self.series.iter().collect();
        let per = series.len().div_ceil(threads.max(1)).max(1);
        let windows: Vec<SeriesWindow> = std::thread::scope(|scope| {
            let handles: Vec<_> = series
                .chunks(per)
                .map(|chunk| scope.spawn(move || chunk.iter().filter_map(|(k, m)| merged_window(k, m, boot)).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().flat_map(|h| h.join().expect("a series never panics")).collect()
        });
        (!windows.is_empty()).then_some(Emission { window_start: start, window_end: end, series: windows })
    }
}

fn merged_window(key: &SeriesKey, merged: &Merged, boot: &BootstrapSpec) -> Option<SeriesWindow> {
    let metric = spec(key.metric)?;
    match merged {
        Merged::Linear { units, weightless, sums, hashes, logs, .. } => {
            if *units == 0 {
                // Weightless units only (an unwatched source's gated steps): N/A with them.
                return SeriesWindow::weightless_only(key, metric, *weightless);
            }
            let mut hashes = hashes.clone();
            hashes.sort_unstable();
            hashes.dedup();
            let mut logs = logs.clone();
            logs.sort_by_key(|l| l.0);
            let w = linear_window(key, metric, Sums::Wide(sums), *units, hashes.len() as u64, Some(&logs), boot.level);
            Some(SeriesWindow { weightless: *weightless, ..w })
        }
        Merged::Tasks(m) => {
            let tasks: BTreeMap<&str, (u64, u64)> = m.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            tasks_window(key, metric, &tasks, boot)
        }
        Merged::Declared { max, count } => declared_window(key, metric, *max, *count, boot.level),
    }
}

/// The window code's panes as pane sums (here, with the pane sums: the window code does not
/// know the store's form of its state).
impl Windows {
    /// Every pane's state as [`PaneSums`]: what a store keeps per series and pane so a period
    /// is computed from its panes ([`Period`]) without the observations.
    /// `threads` share the bootstrap of each pane's clusters.
    pub fn pane_sums(&self, threads: usize) -> Vec<(SeriesKey, i64, PaneSums)> {
        let mut out = Vec::new();
        for (key, st) in self.sorted_series() {
            let metric = spec(key.metric).expect("series are catalogue metrics");
            match st {
                SeriesState::Linear { dims, panes, groups, .. } => {
                    let mut names: Vec<(usize, String)> = groups.iter().map(|(g, i)| (*i, g.clone())).collect();
                    names.sort();
                    let names: Vec<String> = names.into_iter().map(|(_, g)| g).collect();
                    for (t, p) in panes {
                        let mut sums = ReplicateSums::new(&self.boot, *dims);
                        let clusters: Vec<(u64, &[i128], u64)> = p.clusters.iter().map(|(c, v)| (c, v, 0)).collect();
                        sums.add_clusters(&clusters, threads);
                        let mut hashes: Vec<u64> = p.clusters.keys().collect();
                        hashes.sort_unstable();
                        // A closed pane of a vetoed rate made its log factors when it closed.
                        let logs = if has_evidence(metric) {
                            p.evidence.as_deref().map_or_else(|| pane_logs(metric, p.clusters.values()), |e| e.0)
                        } else {
                            None
                        };
                        out.push((
                            key.clone(),
                            *t,
                            PaneSums::Linear {
                                units: p.units,
                                weightless: p.weightless,
                                sums,
                                clusters: hashes,
                                logs,
                                groups: names.clone(),
                            },
                        ));
                    }
                }
                SeriesState::Tasks { panes } => {
                    for (t, p) in panes {
                        out.push((key.clone(), *t, PaneSums::Tasks(p.iter().map(|(k, v)| (k.clone(), *v)).collect())));
                    }
                }
                SeriesState::Declared { panes } => {
                    for (t, (max, count)) in panes {
                        out.push((key.clone(), *t, PaneSums::Declared { max: *max, count: *count }));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{WindowSpec, Windows};
    use octant_contracts::{Observation, Source};

    /// Panes of series: series → pane start → state.
    type Panes = BTreeMap<SeriesKey, BTreeMap<i64, PaneSums>>;

    /// The window `[start, end)` of every series with data in it, from the panes that start in it;
    /// `threads` threads share the series.
    fn emission(panes: &Panes, start: i64, end: i64, boot: &BootstrapSpec, threads: usize) -> Option<Emission> {
        let mut period = Period::new();
        for (key, p) in panes {
            for (t, pane) in p.range(start..end) {
                if !period.add(key.clone(), *t, pane.clone(), boot) {
                    return None;
                }
            }
        }
        period.emission(start, end, boot, threads)
    }

    const HOUR: i64 = 3_600_000;
    const T0: i64 = 1_764_489_600_000;

    /// Five hours of a fleet's observations of every kind of series: rates with a veto (runs
    /// crossing hour boundaries), a ratio with fairness groups (named in a different order in
    /// different hours), calibration pairs, evaluation tasks (pass@k) and declared
    /// contamination; a duplicate of every tenth observation.
    fn observations() -> Vec<Observation> {
        let mut out = Vec::new();
        let groups = ["north", "south", "east", "west"];
        for run in 0..400i64 {
            let t0 = T0 + run * 45_000;
            let id = format!("run-{run}");
            for step in 0..6i64 {
                // Steps 20 minutes apart: every third run crosses an hour boundary.
                let t = t0 + step * 1_200_000 / 6 + (run % 3) * 600_000;
                let mk = |metric: &str, value: f64| Observation {
                    observation_id: format!("{id}/{metric}/{step}"),
                    metric: metric.into(),
                    system_id: format!("sys-{}", run % 3),
                    system_version: "1".into(),
                    source: Source::Production,
                    agent_id: None,
                    run_id: id.clone(),
                    task_id: None,
                    attempt: None,
                    groups: vec![],
                    benchmark: None,
                    task_family: None,
                    cluster_id: id.clone(),
                    step: Some(step),
                    event_time: t,
                    value,
                    weight: 1.0,
                    confidence: None,
                    provenance: None,
                    rerun_of: None,
                };
                out.push(mk("unsafe_action_rate", ((run * 7 + step * 3) % 5 == 0) as u8 as f64));
                out.push(mk("confirmation_gating", ((run + step) % 9 != 0) as u8 as f64));
                let mut c = mk("calibration_ece", ((run + step) % 3 != 0) as u8 as f64);
                c.confidence = Some(((run * 13 + step * 5) % 100) as f64 / 100.0);
                out.push(c);
            }
            let t_end = t0 + 1_300_000;
            let mut success = Observation {
                observation_id: format!("{id}/task_success"),
                metric: "task_success".into(),
                system_id: format!("sys-{}", run % 3),
                system_version: "1".into(),
                source: if run % 4 == 0 { Source::Evaluation } else { Source::Production },
                agent_id: None,
                run_id: id.clone(),
                task_id: Some(format!("task-{}", run % 17)),
                attempt: Some((run / 17) as i32),
                // Group names appear in an order that changes from hour to hour.
                groups: vec![groups[((run / 7 + run) % 4) as usize].to_string()],
                benchmark: (run % 4 == 0).then(|| "bench".to_string()),
                task_family: None,
                cluster_id: id.clone(),
                step: None,
                event_time: t_end,
                value: (run % 3 != 1) as u8 as f64,
                weight: 1.0,
                confidence: None,
                provenance: None,
                rerun_of: None,
            };
            out.push(success.clone());
            if run % 4 == 0 {
                success.observation_id = format!("{id}/contamination");
                success.metric = "contamination".into();
                success.value = (run % 10) as f64 / 20.0;
                success.groups.clear();
                out.push(success);
            }
        }
        // Gated steps of an unwatched source (weight 0): a system with nothing else, and some
        // beside sys-0's weighted ones.
        let gated: Vec<Observation> = out.iter().filter(|o| o.metric == "confirmation_gating").step_by(7).cloned().collect();
        for (i, mut o) in gated.into_iter().enumerate() {
            o.observation_id.push_str("/unwatched");
            (o.value, o.weight) = (0.0, 0.0);
            if i % 2 == 0 {
                o.system_id = "sys-unwatched".into();
            }
            out.push(o);
        }
        let dups: Vec<Observation> = out.iter().step_by(10).cloned().collect();
        out.extend(dups);
        out
    }

    fn boot() -> BootstrapSpec {
        BootstrapSpec { replicates: 300, seed: 11, level: 0.95 }
    }

    /// The period from stored pane sums is the window code's window over the same panes, to
    /// the bit: units, distinct runs, estimates with every replicate, intervals, bands' inputs,
    /// sequential evidence.
    #[test]
    fn a_period_from_pane_sums_is_the_window_over_its_panes() {
        let input = observations();
        let (start, end) = (T0, T0 + 6 * HOUR);
        let spec = WindowSpec { length_ms: end - start, slide_ms: HOUR, lateness_ms: 0 };
        // The reference: the streaming window code, one window over the period's hourly panes.
        let mut reference = Windows::new(spec, boot(), None);
        for (i, o) in input.iter().enumerate() {
            reference.add(o, i as i64);
        }
        let expected = reference.advance_to(end, input.len() as i64).into_iter().find(|e| e.window_end == end).unwrap();
        // Whole panes (each pane's state from every observation in it).
        let mut w = Windows::new(spec, boot(), None);
        for (i, o) in input.iter().enumerate() {
            w.add(o, i as i64);
        }
        let mut panes = Panes::new();
        for (key, t, p) in w.pane_sums(2) {
            panes.entry(key).or_default().insert(t, p);
        }
        let got = emission(&panes, start, end, &boot(), 2).unwrap();
        assert_eq!(format!("{got:?}"), format!("{expected:?}"));
        // Merged in two halves (odd and even hours, as two readers would) and absorbed.
        let (mut odd, mut even) = (Period::new(), Period::new());
        for (key, p) in &panes {
            for (t, pane) in p {
                let half = if (t / HOUR) % 2 == 1 { &mut odd } else { &mut even };
                assert!(half.add(key.clone(), *t, pane.clone(), &boot()));
            }
        }
        assert!(even.absorb(odd, &boot()));
        assert_eq!(format!("{:?}", even.emission(start, end, &boot(), 1).unwrap()), format!("{expected:?}"));
        for m in ["unsafe_action_rate", "calibration_ece", "fairness_gap", "pass_at_2", "outcome_consistency", "contamination"] {
            assert!(got.series.iter().any(|s| s.key.metric == m && s.estimate.is_some()), "{m} estimated in the period");
        }
        assert!(got.series.iter().any(|s| s.evidence.is_some()), "sequential evidence carried");
        let unwatched = got.series.iter().find(|s| s.key.system_id == "sys-unwatched").expect("weightless units only: a series");
        assert!(unwatched.units == 0 && unwatched.weightless > 0, "{unwatched:?}");
        assert!(got.series.iter().any(|s| s.units > 0 && s.weightless > 0), "weighted and weightless units, each counted");
        // The first window's worth of panes only: the same as the window code's window there.
        let mut reference = Windows::new(WindowSpec { length_ms: 2 * HOUR, slide_ms: HOUR, lateness_ms: 0 }, boot(), None);
        for (i, o) in input.iter().enumerate() {
            reference.add(o, i as i64);
        }
        let two = reference.advance_to(T0 + 3 * HOUR, 0).into_iter().find(|e| e.window_end == T0 + 3 * HOUR).unwrap();
        assert_eq!(format!("{:?}", emission(&panes, T0 + HOUR, T0 + 3 * HOUR, &boot(), 1).unwrap()), format!("{two:?}"));
    }
}
