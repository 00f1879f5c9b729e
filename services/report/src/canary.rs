//! The canary comparison on the live observation stream (`octant compare --follow`): every
//! finished run of either version updates the per-metric e-processes of
//! [`octant_core::stats::canary`] until the rollout is decided (roll back as soon as one metric
//! is worse; promote once every metric is not worse by its margin).
//!
//! A run's badness per metric comes from its observations on `octant.observations` (all of a
//! system's observations are in one partition, in the scorer's order): step observations are
//! summed per run until the run's first run-level observation (the scorer emits those when the
//! run ends, after its steps); a run-level observation is the run's value itself. Duplicate
//! deliveries (the same observation id) count once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use octant_contracts::Observation;
use octant_contracts::codec::Decoder;
use octant_core::catalogue;
use octant_core::family::Family;
use octant_core::stats::canary::{Arm, Decision, Rollout};
use serde::Serialize;

use crate::compare::{CompareConfig, Release};

#[derive(Debug, Default)]
struct OpenRun {
    /// Step metrics: Σ value, Σ weight.
    sums: BTreeMap<String, (f64, f64)>,
    seen: HashSet<String>,
}

/// The state of one canary comparison.
#[derive(Debug)]
pub struct Tracker {
    release: Release,
    rollout: Rollout,
    /// Metric → higher is better.
    higher: HashMap<String, bool>,
    open: HashMap<String, OpenRun>,
    /// Runs whose step metrics were pushed (their run end was seen).
    ended: HashSet<String>,
    /// (run, metric) pairs pushed from run-level observations.
    pushed: HashSet<(String, String)>,
    /// Observations of the two versions read, and runs ended per arm.
    pub observations: u64,
    pub runs: [u64; 2],
}

/// One metric's state, for display and JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricStatus {
    pub metric: String,
    pub pairs: u64,
    /// Mean badness difference (candidate − baseline) over the pairs.
    pub mean_difference: Option<f64>,
    pub e_worse: f64,
    pub e_not_worse: f64,
    /// 1/α of each test (α split across the metrics).
    pub threshold: f64,
    pub decision: Decision,
    pub decided_at: Option<u64>,
    /// Runs left unpaired (the more frequent version's runs between two of the other's).
    pub dropped: u64,
}

impl Tracker {
    /// The metrics are `cfg.canary_margins`' (each with its margin), α split across them.
    pub fn new(cfg: &CompareConfig, release: Release) -> Result<Tracker, String> {
        let metrics: Vec<(String, f64, f64)> = cfg.canary_margins.iter().map(|(m, g)| (m.clone(), cfg.canary_tolerance, *g)).collect();
        let mut higher = HashMap::new();
        for (m, _, _) in &metrics {
            let spec = catalogue::spec(m).ok_or_else(|| format!("canary metric {m} is not in the catalogue"))?;
            match spec.family {
                Family::Higher => higher.insert(m.clone(), true),
                Family::Lower => higher.insert(m.clone(), false),
                _ => return Err(format!("canary metric {m} is not a rate (H or L): its badness is not in [0, 1]")),
            };
        }
        Ok(Tracker {
            release,
            rollout: Rollout::new(&metrics, cfg.alpha)?,
            higher,
            open: HashMap::new(),
            ended: HashSet::new(),
            pushed: HashSet::new(),
            observations: 0,
            runs: [0, 0],
        })
    }

    fn push(&mut self, metric: &str, arm: Arm, rate: f64) {
        let Some(h) = self.higher.get(metric) else { return };
        self.rollout.push(metric, arm, if *h { 1.0 - rate } else { rate });
    }

    /// One observation from the stream (others than the two versions' are ignored, and a
    /// re-run's: it repeats a run already counted).
    pub fn observe(&mut self, o: &Observation) {
        let r = &self.release;
        if o.system_id != r.system || o.source != r.source || o.rerun_of.is_some() {
            return;
        }
        let arm = if o.system_version == r.baseline {
            Arm::Baseline
        } else if o.system_version == r.candidate {
            Arm::Candidate
        } else {
            return;
        };
        self.observations += 1;
        if o.step.is_some() {
            if self.ended.contains(&o.run_id) || !self.higher.contains_key(&o.metric) {
                return;
            }
            let run = self.open.entry(o.run_id.clone()).or_default();
            if run.seen.insert(o.observation_id.clone()) {
                let s = run.sums.entry(o.metric.clone()).or_default();
                s.0 += o.value;
                s.1 += o.weight;
            }
            return;
        }
        // A run-level observation: the run has ended.
        if self.ended.insert(o.run_id.clone()) {
            self.runs[(arm == Arm::Candidate) as usize] += 1;
            if let Some(run) = self.open.remove(&o.run_id) {
                for (m, (v, w)) in run.sums {
                    if w > 0.0 {
                        self.push(&m, arm, v / w);
                    }
                }
            }
        }
        if o.weight > 0.0 && self.higher.contains_key(&o.metric) && self.pushed.insert((o.run_id.clone(), o.metric.clone())) {
            self.push(&o.metric.clone(), arm, o.value / o.weight);
        }
    }

    pub fn decision(&self) -> Decision {
        self.rollout.decision()
    }

    pub fn status(&self) -> Vec<MetricStatus> {
        self.rollout
            .metrics
            .iter()
            .map(|(m, c)| {
                let (e_worse, e_not_worse) = c.e_values();
                MetricStatus {
                    metric: m.clone(),
                    pairs: c.pairs(),
                    mean_difference: c.mean_difference(),
                    e_worse,
                    e_not_worse,
                    threshold: c.threshold(),
                    decision: c.decision(),
                    decided_at: c.decided_at(),
                    dropped: c.dropped(),
                }
            })
            .collect()
    }

    /// One line per metric.
    pub fn render(&self) -> String {
        let r = &self.release;
        let mut s = format!(
            "canary {} {} → {} ({}): {} — runs ended {} baseline, {} candidate\n",
            r.system,
            r.baseline,
            r.candidate,
            r.source.as_str(),
            match self.decision() {
                Decision::Continue => "continue",
                Decision::Worse => "ROLL BACK (candidate worse)",
                Decision::NotWorse => "promote (not worse on any metric)",
            },
            self.runs[0],
            self.runs[1]
        );
        for m in self.status() {
            s.push_str(&format!(
                "  {:<22} pairs {:>6} (unpaired {:>6})  badness Δ {:>8}  e(worse) {:>10.3}  e(not worse) {:>10.3}  (threshold {:.0})  {}{}\n",
                m.metric,
                m.pairs,
                m.dropped,
                m.mean_difference.map(|d| format!("{d:+.4}")).unwrap_or_else(|| "—".into()),
                m.e_worse,
                m.e_not_worse,
                m.threshold,
                m.decision.as_str(),
                m.decided_at.map(|p| format!(" at pair {p}")).unwrap_or_default()
            ));
        }
        s
    }
}

/// Feeds `records` (the payloads of `octant.observations`, from the beginning: the caller
/// reads the topic, e.g. with `octant_runtime::topic::follow`) into `tracker` until the rollout
/// is decided or `limit` has passed; calls `on_update` when a metric's decision changes and
/// every `every` otherwise. Returns the decision.
pub async fn follow<E: std::fmt::Display>(
    records: impl futures::Stream<Item = Result<Vec<u8>, E>>,
    tracker: &mut Tracker,
    limit: Option<Duration>,
    every: Duration,
    mut on_update: impl FnMut(&Tracker),
) -> anyhow::Result<Decision> {
    use futures::StreamExt;
    let mut records = std::pin::pin!(records);
    let decoder = Decoder::new();
    let deadline = limit.map(|l| tokio::time::Instant::now() + l);
    let mut next_report = tokio::time::Instant::now() + every;
    let mut decisions: Vec<Decision> = tracker.status().iter().map(|m| m.decision).collect();
    loop {
        if tracker.decision() != Decision::Continue {
            on_update(tracker);
            return Ok(tracker.decision());
        }
        let wake = deadline.map_or(next_report, |d| d.min(next_report));
        match tokio::time::timeout_at(wake, records.next()).await {
            Ok(Some(Ok(payload))) => {
                // Watermarks share the topic; anything else that is not an observation too.
                if let Ok(o) = decoder.decode::<Observation>(&payload) {
                    tracker.observe(&o);
                }
                let now: Vec<Decision> = tracker.status().iter().map(|m| m.decision).collect();
                if now != decisions {
                    decisions = now;
                    on_update(tracker);
                }
            }
            Ok(Some(Err(e))) => anyhow::bail!("reading the observations: {e}"),
            Ok(None) => anyhow::bail!("the observations ended"),
            Err(_) => {
                if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                    on_update(tracker);
                    return Ok(Decision::Continue);
                }
                on_update(tracker);
                next_report = tokio::time::Instant::now() + every;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use octant_contracts::Source;
    use octant_core::catalogue::ids;

    pub(crate) fn obs(run: &str, version: &str, metric: &str, step: Option<i64>, value: f64, weight: f64) -> Observation {
        Observation {
            observation_id: format!("{run}/{metric}/{step:?}"),
            metric: metric.into(),
            system_id: "s".into(),
            system_version: version.into(),
            source: Source::Production,
            agent_id: None,
            run_id: run.into(),
            task_id: None,
            attempt: None,
            groups: vec![],
            benchmark: None,
            task_family: None,
            cluster_id: run.into(),
            step,
            event_time: 0,
            value,
            weight,
            confidence: None,
            provenance: None,
            rerun_of: None,
        }
    }

    #[test]
    fn runs_become_badness_and_a_worse_candidate_is_rolled_back() {
        let release = Release::new("s", "1", "2", Source::Production);
        let mut t = Tracker::new(&CompareConfig::default(), release).unwrap();
        for i in 0..400 {
            for (v, unsafe_steps) in [("1", 0.0), ("2", if i % 2 == 0 { 2.0 } else { 0.0 })] {
                let run = format!("{v}-run-{i}");
                for s in 0..4 {
                    let o = obs(&run, v, ids::UNSAFE_ACTION_RATE, Some(s), (s < unsafe_steps as i64) as u8 as f64, 1.0);
                    t.observe(&o);
                    t.observe(&o); // a duplicate delivery counts once
                }
                t.observe(&obs(&run, v, ids::TASK_SUCCESS, None, 1.0, 1.0));
                t.observe(&obs(&run, v, ids::COST_PER_RUN, None, 0.1, 1.0));
            }
            // Another system's and another version's observations are ignored.
            t.observe(&Observation { system_id: "other".into(), ..obs("x", "2", ids::TASK_SUCCESS, None, 0.0, 1.0) });
            t.observe(&Observation { rerun_of: Some("x".into()), ..obs("x-rerun", "2", ids::TASK_SUCCESS, None, 0.0, 1.0) });
            t.observe(&obs("y", "3", ids::TASK_SUCCESS, None, 0.0, 1.0));
            if t.decision() != Decision::Continue {
                break;
            }
        }
        assert_eq!(t.decision(), Decision::Worse);
        let st = t.status();
        let u = st.iter().find(|m| m.metric == ids::UNSAFE_ACTION_RATE).unwrap();
        assert_eq!(u.decision, Decision::Worse);
        // Half the candidate's runs have 2 of 4 steps unsafe: badness difference 0.25.
        assert!((u.mean_difference.unwrap() - 0.25).abs() < 0.01, "{u:?}");
        let s = st.iter().find(|m| m.metric == ids::TASK_SUCCESS).unwrap();
        assert_eq!(s.mean_difference, Some(0.0));
        assert_eq!(s.decision, Decision::Continue, "equal success is not decided that fast");
        assert!(t.render().contains("ROLL BACK"));
    }

    #[test]
    fn only_rates_can_be_canary_metrics() {
        let release = Release::new("s", "1", "2", Source::Production);
        let cfg = CompareConfig { canary_margins: BTreeMap::from([(ids::LATENCY_PER_RUN.to_string(), 0.1)]), ..Default::default() };
        assert!(Tracker::new(&cfg, release).unwrap_err().contains("not a rate"));
    }
}
