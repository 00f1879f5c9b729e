//! Veto states with hysteresis, and single-action incidents. Pure: no I/O, no clock.
//!
//! ## Veto alerts
//! Every `MetricWindow` of a metric that carries a veto (design §1.3) carries the aggregator's
//! verdict for that window (`veto_state`: one of the four states, or none when the metric is
//! N/A — below its minimum evidence, void, undefined). The alerter takes that verdict as it is
//! and never recomputes it from the estimate: one verdict per window, made once. Per
//! fingerprint (system, version, source, rule, and the benchmark for contamination):
//!
//! | state of the window | not firing | firing (warning) | firing (critical) |
//! |---|---|---|---|
//! | confirmed | fire **critical** | resolve warning, fire critical (escalation) | hold |
//! | breached | fire **warning** | hold | hold |
//! | at risk | — | hold, clear count reset | hold, clear count reset |
//! | clear | — | clear count + 1; resolve at `resolve_after` | same |
//! | no verdict (N/A) | — | hold (no evidence either way) | hold |
//!
//! So an alert resolves only after `resolve_after` consecutive clear windows (hysteresis: a
//! rate hovering at the threshold does not flap), and severity never steps down while firing.
//! A window at or before the last one seen for its fingerprint is a replay and is ignored, so
//! at-least-once input raises each alert once.
//!
//! ## Incidents
//! A single step that is high impact or irreversible, not confirmed, and violates a declared
//! constraint raises a critical incident at once, carrying the run, step, agent, tool and
//! the violated constraints (tool arguments replaced by a marker when redaction is on).
//! Deduplicated by fingerprint (system, version, source, rule, run, step).

use std::collections::{HashMap, HashSet, VecDeque};

use octant_contracts::{Alert, AlertKind, AlertStatus, Impact, MetricWindow, Severity, StepKind, TrajectoryEvent};
use octant_core::catalogue::{ids, spec};
use octant_core::veto::{VetoRule, VetoState};

/// The marker that replaces redacted tool arguments.
pub const REDACTED: &str = "[redacted]";
/// Rule name of single-action incidents.
pub const INCIDENT_RULE: &str = "critical_unsafe_action";

#[derive(Debug, Clone)]
pub struct RuleConfig {
    /// Consecutive clear windows before a firing veto alert resolves.
    pub resolve_after: u32,
    /// Replace tool arguments in incidents by [`REDACTED`].
    pub redact_tool_arguments: bool,
    /// Base of runbook links; the rule name is appended as `#<rule>`.
    pub runbook_base_url: String,
    /// Incident fingerprints remembered for deduplication.
    pub incident_memory: usize,
    /// Patterns over an incident's free text (violations, tool name and arguments, summary):
    /// the `[redaction]` section.
    pub redactor: octant_runtime::redact::Redactor,
    /// Which violations are a declared policy's (no safety violation: no incident).
    pub violations: octant_engine::config::ViolationClasses,
}

impl Default for RuleConfig {
    fn default() -> Self {
        RuleConfig {
            resolve_after: 3,
            redact_tool_arguments: true,
            runbook_base_url: String::new(),
            incident_memory: 100_000,
            redactor: octant_runtime::redact::RedactionConfig::default().build().expect("the default redaction builds"),
            violations: Default::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Track {
    firing: Option<Severity>,
    /// Event time the current alert started.
    starts_at: i64,
    clear_run: u32,
    last_window_end: i64,
}

/// The alerter's state: one track per veto fingerprint, recent incident fingerprints.
#[derive(Debug, Default)]
pub struct Rules {
    pub config: RuleConfig,
    tracks: HashMap<String, Track>,
    incidents: HashSet<String>,
    incident_order: VecDeque<String>,
    /// Recent re-runs (a harness's answers to re-run requests), by run id: no incident.
    reruns: HashSet<String>,
    rerun_order: VecDeque<String>,
}

/// Alert name of single-action incidents (veto rules carry their own: `VetoRule::alertname`).
pub const INCIDENT_ALERTNAME: &str = "OctantCriticalUnsafeAction";

pub fn veto_fingerprint(w: &MetricWindow, rule: &str) -> String {
    let mut f = format!("{}/{}/{}/{rule}", w.system_id, w.system_version, w.source.as_str());
    if let Some(b) = &w.benchmark {
        f.push('/');
        f.push_str(b);
    }
    f
}

impl Rules {
    pub fn new(config: RuleConfig) -> Rules {
        Rules { config, ..Default::default() }
    }

    fn runbook(&self, rule: &str) -> String {
        if self.config.runbook_base_url.is_empty() { String::new() } else { format!("{}#{rule}", self.config.runbook_base_url) }
    }

    /// Veto fingerprints currently firing, with their severity.
    pub fn firing(&self) -> Vec<(String, Severity)> {
        let mut v: Vec<_> = self.tracks.iter().filter_map(|(f, t)| t.firing.map(|s| (f.clone(), s))).collect();
        v.sort();
        v
    }

    /// The fingerprint's series moved to another instance: the count of consecutive clear
    /// windows seen here is no longer current (the other instance may have seen *at risk*), so
    /// it restarts. An alert then resolves later than without the move, never earlier.
    pub fn forget_clear_count(&mut self, fingerprint: &str) {
        if let Some(t) = self.tracks.get_mut(fingerprint) {
            t.clear_run = 0;
        }
    }

    /// Restores state from an alert published before (reading `octant.alerts` at start).
    pub fn restore(&mut self, a: &Alert) {
        match a.kind {
            AlertKind::Incident => {
                self.remember_incident(a.fingerprint.clone());
            }
            AlertKind::Veto => {
                let t = self.tracks.entry(a.fingerprint.clone()).or_default();
                let end = a.window_end.unwrap_or(i64::MIN);
                if end < t.last_window_end {
                    return;
                }
                t.last_window_end = end;
                t.clear_run = 0;
                match a.status {
                    AlertStatus::Firing => {
                        t.firing = Some(a.severity);
                        t.starts_at = a.starts_at;
                    }
                    AlertStatus::Resolved => {
                        // An escalation resolves the warning and fires critical at the same
                        // window: keep the critical.
                        if t.firing.is_none_or(|s| s <= a.severity) {
                            t.firing = None;
                        }
                    }
                }
            }
            AlertKind::Pipeline => {}
        }
    }

    /// A metric window: the alerts it raises or resolves (none for metrics without a veto).
    pub fn on_window(&mut self, w: &MetricWindow) -> Vec<Alert> {
        // A slice (one agent, one task family) is diagnostic: only the joint series is vetoed.
        if w.slice_kind.is_some() {
            return Vec::new();
        }
        let Some(rule) = spec(&w.metric).and_then(|s| s.veto) else { return Vec::new() };
        let fingerprint = veto_fingerprint(w, rule.name);
        let runbook = self.runbook(rule.name);
        let t = self.tracks.entry(fingerprint.clone()).or_default();
        if w.window_end <= t.last_window_end {
            return Vec::new();
        }
        t.last_window_end = w.window_end;
        // The aggregator's verdict; none (N/A) holds everything — except N/A because the
        // telemetry cannot show an approval: the veto cannot be judged there at all, so an
        // alert raised before (scoring such telemetry as unconfirmed) resolves as on a clear.
        let state = w.veto_state.as_deref().and_then(VetoState::parse).or_else(|| {
            (w.na_reason.as_deref() == Some(octant_core::profile::NotApplicable::NoApprovalSignal.describe().as_str()))
                .then_some(VetoState::Clear)
        });
        let mut out = Vec::new();
        let emit = |t: &Track, status: AlertStatus, severity: Severity, out: &mut Vec<Alert>| {
            out.push(veto_alert(w, &rule, &fingerprint, status, severity, state, t.starts_at, &runbook));
        };
        match state {
            None => {}
            Some(VetoState::Clear) => {
                t.clear_run += 1;
                if let Some(sev) = t.firing
                    && t.clear_run >= self.config.resolve_after
                {
                    emit(t, AlertStatus::Resolved, sev, &mut out);
                    t.firing = None;
                }
            }
            Some(VetoState::AtRisk) => t.clear_run = 0,
            Some(s @ (VetoState::Breached | VetoState::Confirmed)) => {
                t.clear_run = 0;
                let wanted = if s == VetoState::Confirmed { Severity::Critical } else { Severity::Warning };
                match t.firing {
                    None => {
                        t.starts_at = w.window_end;
                        t.firing = Some(wanted);
                        emit(t, AlertStatus::Firing, wanted, &mut out);
                    }
                    Some(Severity::Warning) if wanted == Severity::Critical => {
                        emit(t, AlertStatus::Resolved, Severity::Warning, &mut out);
                        if let Some(a) = out.last_mut() {
                            a.summary = format!("escalated to critical: {}", a.summary);
                        }
                        t.firing = Some(Severity::Critical);
                        emit(t, AlertStatus::Firing, Severity::Critical, &mut out);
                    }
                    Some(_) => {}
                }
            }
        }
        out
    }

    fn remember_incident(&mut self, fingerprint: String) -> bool {
        if !self.incidents.insert(fingerprint.clone()) {
            return false;
        }
        self.incident_order.push_back(fingerprint);
        while self.incident_order.len() > self.config.incident_memory {
            if let Some(old) = self.incident_order.pop_front() {
                self.incidents.remove(&old);
            }
        }
        true
    }

    /// A trajectory event: an incident when it is a critical unsafe action not seen before.
    /// A re-run's steps raise none: the harness re-executed a sampled run in its own
    /// environment (the original's action paged already), and the profiler's re-run check
    /// reports whether the action came back. Re-runs are known by their start (the run id is
    /// the key: one partition); the last `incident_memory` of them are remembered.
    pub fn on_event(&mut self, ev: &TrajectoryEvent) -> Option<Alert> {
        if ev.run_started.as_ref().is_some_and(|s| s.rerun_of.is_some()) && self.reruns.insert(ev.run_id.clone()) {
            self.rerun_order.push_back(ev.run_id.clone());
            while self.rerun_order.len() > self.config.incident_memory {
                if let Some(old) = self.rerun_order.pop_front() {
                    self.reruns.remove(&old);
                }
            }
        }
        let step = ev.step.as_ref()?;
        if self.reruns.contains(&ev.run_id) {
            return None;
        }
        // A request for confirmation did not act: its call, if approved, is a step of its own.
        if step.step_kind == StepKind::Confirmation {
            return None;
        }
        // A safety violation (a declared policy's alone is no unsafe action: counted apart).
        let critical = matches!(step.impact, Impact::High | Impact::Irreversible)
            && !step.confirmed
            && self.config.violations.any_safety(&step.violations);
        if !critical {
            return None;
        }
        let fingerprint =
            format!("{}/{}/{}/{INCIDENT_RULE}/{}/{}", ev.system.id, ev.system.version, ev.source.as_str(), ev.run_id, ev.sequence);
        if !self.remember_incident(fingerprint.clone()) {
            return None;
        }
        let impact = match step.impact {
            Impact::Irreversible => "irreversible",
            _ => "high-impact",
        };
        let tool = step.tool_name.clone();
        // What the responder reads first: the tool when there is one, else the kind of step.
        let action = match (&tool, step.step_kind) {
            (Some(t), _) => format!("ran {impact} tool {t}"),
            (None, kind) => {
                let article = if step.impact == Impact::Irreversible { "an" } else { "a" };
                let what = match kind {
                    StepKind::ModelCall => "model call",
                    StepKind::ToolCall => "tool call (tool not named)",
                    StepKind::Confirmation => "confirmation step",
                    StepKind::Message => "message",
                    StepKind::Other => "step",
                };
                format!("made {article} {impact} {what}")
            }
        };
        let text = |s: &str| self.config.redactor.text(s).into_owned();
        let summary = format!(
            "{}{} {action} without confirmation, violating {} (run {}, step {})",
            ev.system.id,
            ev.agent_id.as_deref().map_or(String::new(), |a| format!(" (agent {a})")),
            step.violations.join(", "),
            ev.run_id,
            ev.sequence
        );
        let summary = text(&summary);
        Some(Alert {
            alert_id: format!("{fingerprint}/firing"),
            fingerprint,
            status: AlertStatus::Firing,
            severity: Severity::Critical,
            kind: AlertKind::Incident,
            alertname: INCIDENT_ALERTNAME.into(),
            rule: INCIDENT_RULE.into(),
            system_id: ev.system.id.clone(),
            system_version: ev.system.version.clone(),
            source: ev.source,
            dimension: Some("safety".into()),
            metric: Some(ids::UNSAFE_ACTION_RATE.into()),
            veto_state: None,
            estimate: None,
            ci_low: None,
            ci_high: None,
            threshold: None,
            window_start: None,
            window_end: None,
            run_id: Some(ev.run_id.clone()),
            step: Some(ev.sequence),
            agent_id: ev.agent_id.clone(),
            tool_name: tool.as_deref().map(text),
            tool_arguments: step.arguments.as_ref().map(|a| if self.config.redact_tool_arguments { REDACTED.into() } else { text(a) }),
            violations: step.violations.iter().map(|v| text(v)).collect(),
            starts_at: ev.event_time,
            ends_at: None,
            summary,
            runbook_url: self.runbook(INCIDENT_RULE),
        })
    }
}

fn time(ms: i64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64)).to_string()
}

/// What a responder reads: the window's estimate and interval, the state, and — when the state
/// is confirmed by sequential evidence — where that evidence lies. Never more than the
/// evidence: a breached veto says it is not confirmed.
pub fn veto_summary(w: &MetricWindow, rule: &VetoRule, state: Option<VetoState>) -> String {
    let window = match (w.estimate, w.ci_low, w.ci_high) {
        (Some(e), Some(lo), Some(hi)) => format!("{e:.3} [{lo:.3}, {hi:.3}]"),
        _ => "n/a".into(),
    };
    let head = format!(
        "{} {} {}: {} {window} (threshold {}) over {} units in the window ending {}",
        w.system_id,
        w.system_version,
        rule.name,
        w.metric,
        rule.condition(),
        w.units,
        time(w.window_end)
    );
    let evidence = match (w.evidence_log_e, w.evidence_alpha, w.evidence_since) {
        (Some(l), Some(a), Some(since)) => Some(format!(
            "sequential evidence since {}: rate {} on that segment, e-value {:.3e} (confirms at {:.0e})",
            time(since),
            w.evidence_estimate.map_or("n/a".into(), |e| format!("{e:.3}")),
            l.exp(),
            1.0 / a
        )),
        _ => None,
    };
    match (state, evidence) {
        (Some(VetoState::Confirmed), Some(ev)) => format!("{head}; confirmed: {ev}"),
        (Some(VetoState::Confirmed), None) => format!("{head}; confirmed: the whole interval is past the threshold"),
        (Some(VetoState::Breached), _) => format!("{head}; breached: the estimate is past the threshold, not confirmed yet"),
        (Some(s), _) => format!("{head}; state {}", s.as_str()),
        (None, _) => format!("{head}; no verdict: {}", w.na_reason.as_deref().unwrap_or("N/A")),
    }
}

#[allow(clippy::too_many_arguments)]
fn veto_alert(
    w: &MetricWindow,
    rule: &VetoRule,
    fingerprint: &str,
    status: AlertStatus,
    severity: Severity,
    state: Option<VetoState>,
    starts_at: i64,
    runbook: &str,
) -> Alert {
    let status_word = match status {
        AlertStatus::Firing => "firing",
        AlertStatus::Resolved => "resolved",
    };
    let sev_word = match severity {
        Severity::Critical => "critical",
        Severity::Warning => "warning",
        Severity::Info => "info",
    };
    let summary = veto_summary(w, rule, state);
    Alert {
        alert_id: format!("{fingerprint}/{sev_word}/{status_word}/{}", w.window_end),
        fingerprint: fingerprint.to_string(),
        status,
        severity,
        kind: AlertKind::Veto,
        alertname: rule.alertname.into(),
        rule: rule.name.into(),
        system_id: w.system_id.clone(),
        system_version: w.system_version.clone(),
        source: w.source,
        dimension: Some(w.dimension.clone()),
        metric: Some(w.metric.clone()),
        veto_state: state.map(|s| s.as_str().to_string()),
        estimate: w.estimate,
        ci_low: w.ci_low,
        ci_high: w.ci_high,
        threshold: Some(rule.threshold),
        window_start: Some(w.window_start),
        window_end: Some(w.window_end),
        run_id: None,
        step: None,
        agent_id: None,
        tool_name: None,
        tool_arguments: None,
        violations: Vec::new(),
        starts_at,
        ends_at: (status == AlertStatus::Resolved).then_some(w.window_end),
        summary,
        runbook_url: runbook.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use octant_contracts::{EventKind, RunStarted, Source, Step, SystemRef};

    pub(crate) const MIN: i64 = 60_000;

    /// A window of the unsafe-action rate with the verdict the aggregator gives an estimate
    /// and interval looked at once (sequential evidence has its own tests in the aggregator).
    pub(crate) fn window(end_min: i64, est: Option<(f64, f64, f64)>) -> MetricWindow {
        MetricWindow {
            window_id: String::new(),
            system_id: "sys-a".into(),
            system_version: "1".into(),
            source: Source::Production,
            metric: "unsafe_action_rate".into(),
            dimension: "safety".into(),
            benchmark: None,
            slice_kind: None,
            slice: None,
            window_start: (end_min - 60) * MIN,
            window_end: end_min * MIN,
            units: 500,
            clusters: 60,
            estimate: est.map(|e| e.0),
            ci_low: est.map(|e| e.1),
            ci_high: est.map(|e| e.2),
            level: 0.95,
            replicates: 1000,
            seed: 1,
            method: "m".into(),
            band: None,
            band_low: None,
            band_high: None,
            na_reason: None,
            veto_state: est.map(|(e, lo, hi)| VetoRule::UNSAFE_ACTION.state(e, lo, hi).as_str().to_string()),
            evidence_log_e: None,
            evidence_alpha: None,
            evidence_since: None,
            evidence_estimate: None,
            catalogue_version: "c".into(),
            watermark: 0,
            pool_version: None,
        }
    }

    pub(crate) const CLEAR: Option<(f64, f64, f64)> = Some((0.05, 0.03, 0.08));
    pub(crate) const AT_RISK: Option<(f64, f64, f64)> = Some((0.17, 0.13, 0.21));
    pub(crate) const BREACHED: Option<(f64, f64, f64)> = Some((0.21, 0.17, 0.25));
    pub(crate) const CONFIRMED: Option<(f64, f64, f64)> = Some((0.26, 0.22, 0.30));

    fn feed(r: &mut Rules, seq: &[Option<(f64, f64, f64)>]) -> Vec<(AlertStatus, Severity, i64)> {
        seq.iter()
            .enumerate()
            .flat_map(|(i, e)| r.on_window(&window(i as i64 + 1, *e)))
            .map(|a| (a.status, a.severity, a.window_end.unwrap() / MIN))
            .collect()
    }

    /// A series that moved away and back: the clear windows counted before do not count, so
    /// the alert resolves later than it would have, never earlier.
    #[test]
    fn a_series_that_moved_restarts_its_clear_count() {
        let mut r = Rules::new(RuleConfig::default());
        assert_eq!(feed(&mut r, &[BREACHED, CLEAR, CLEAR]).len(), 1, "fired; two clear windows");
        r.forget_clear_count("sys-a/1/production/unsafe_action_veto");
        let resolved = |r: &mut Rules, m: i64| r.on_window(&window(m, CLEAR)).into_iter().any(|a| a.status == AlertStatus::Resolved);
        assert!(!resolved(&mut r, 4), "a third clear window after the move is the first counted here");
        assert!(!resolved(&mut r, 5));
        assert!(resolved(&mut r, 6), "three clear windows since the move");
    }

    #[test]
    fn fires_escalates_and_resolves_with_hysteresis() {
        let mut r = Rules::new(RuleConfig::default());
        let got =
            feed(&mut r, &[CLEAR, AT_RISK, BREACHED, BREACHED, CONFIRMED, BREACHED, CLEAR, CLEAR, AT_RISK, CLEAR, CLEAR, None, CLEAR]);
        use AlertStatus::*;
        use Severity::*;
        assert_eq!(
            got,
            vec![
                (Firing, Warning, 3),     // entering breached
                (Resolved, Warning, 5),   // escalation: the warning resolves …
                (Firing, Critical, 5),    // … and the critical fires
                (Resolved, Critical, 13), // three consecutive clear windows (at risk resets, N/A holds)
            ]
        );
        assert!(r.firing().is_empty());
    }

    #[test]
    fn a_rate_at_the_threshold_does_not_flap_and_replays_change_nothing() {
        let mut r = Rules::new(RuleConfig::default());
        // Alternating breached / clear: one alert, never resolved (never 3 clear in a row).
        let seq: Vec<_> = (0..20).map(|i| if i % 2 == 0 { BREACHED } else { CLEAR }).collect();
        let got = feed(&mut r, &seq);
        assert_eq!(got.len(), 1);
        // The same windows again (a replay upstream): nothing.
        assert!(feed(&mut r, &seq).is_empty());
        // Confirmed at a window already seen: ignored too.
        assert!(r.on_window(&window(5, CONFIRMED)).is_empty());
    }

    #[test]
    fn gating_fires_below_the_threshold() {
        let mut r = Rules::new(RuleConfig::default());
        let mut w = window(1, Some((0.70, 0.64, 0.76)));
        w.metric = "confirmation_gating".into();
        w.dimension = "oversight".into();
        w.veto_state = Some("confirmed".into());
        let a = r.on_window(&w);
        assert_eq!(a.len(), 1);
        assert_eq!(
            (a[0].severity, a[0].rule.as_str(), a[0].veto_state.as_deref()),
            (Severity::Critical, "confirmation_gating_veto", Some("confirmed"))
        );
        assert_eq!(a[0].threshold, Some(0.8));
        // A metric without a veto raises nothing.
        w.metric = "task_success".into();
        w.window_end += MIN;
        assert!(r.on_window(&w).is_empty());
    }

    /// A gating alert raised while the telemetry was scored as if it could show approvals
    /// resolves once its windows are N/A "no approval signal in this telemetry" (the veto cannot
    /// be judged there), as on clear windows; another N/A (too few units) holds it.
    #[test]
    fn gating_n_a_for_want_of_an_approval_signal_resolves_a_firing_alert() {
        let cfg = RuleConfig::default();
        let resolve_after = cfg.resolve_after;
        let mut r = Rules::new(cfg);
        let mut w = window(1, Some((0.0, 0.0, 0.01)));
        w.metric = "confirmation_gating".into();
        w.dimension = "oversight".into();
        w.veto_state = Some("confirmed".into());
        assert_eq!(r.on_window(&w).len(), 1, "the false page of before");
        let mut held = w.clone();
        (held.window_end, held.veto_state, held.na_reason) =
            (2 * MIN, None, Some("insufficient evidence (confirmation_gating 4/30)".into()));
        assert!(r.on_window(&held).is_empty());
        let mut out = Vec::new();
        for m in 0..resolve_after as i64 {
            let mut na = w.clone();
            (na.window_end, na.veto_state, na.estimate) = ((3 + m) * MIN, None, None);
            na.na_reason = Some(octant_core::profile::UNWATCHED.into());
            out.extend(r.on_window(&na));
        }
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].status, out[0].severity), (AlertStatus::Resolved, Severity::Critical));
    }

    /// One production run, one violating step out of four: 0.25 [0.25, 0.25] looks past the
    /// threshold, but the window is N/A (below the minimum evidence) and carries no verdict.
    #[test]
    fn a_window_without_a_verdict_raises_nothing() {
        let mut r = Rules::new(RuleConfig::default());
        let mut w = window(1, Some((0.25, 0.25, 0.25)));
        w.units = 4;
        w.veto_state = None;
        w.na_reason = Some("insufficient evidence (unsafe_action_rate 4/30)".into());
        assert!(r.on_window(&w).is_empty());
        // The verdict decides, not the numbers: a confirmed verdict on a modest estimate
        // (sequential evidence on a recent segment) pages.
        let mut w = window(2, Some((0.15, 0.12, 0.18)));
        w.veto_state = Some("confirmed".into());
        (w.evidence_log_e, w.evidence_alpha, w.evidence_since, w.evidence_estimate) = (Some(11.0), Some(1e-4), Some(MIN), Some(0.31));
        let a = r.on_window(&w);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].severity, Severity::Critical);
        assert!(a[0].summary.contains("confirmed: sequential evidence since") && a[0].summary.contains("rate 0.310"), "{}", a[0].summary);
    }

    /// A slice (one agent's steps) is diagnostic: even a window carrying a breached state
    /// raises nothing, and it never shadows the joint window of the same end.
    #[test]
    fn a_sliced_window_raises_nothing_and_leaves_the_joint_series_alone() {
        let mut r = Rules::new(RuleConfig::default());
        let mut w = window(1, CONFIRMED);
        (w.slice_kind, w.slice) = (Some("agent".into()), Some("planner".into()));
        assert!(r.on_window(&w).is_empty());
        assert_eq!(r.on_window(&window(1, CONFIRMED)).len(), 1, "the joint window of the same end still fires");
    }

    #[test]
    fn summaries_say_no_more_than_the_verdict() {
        let w = window(1, BREACHED);
        let s = veto_summary(&w, &VetoRule::UNSAFE_ACTION, Some(VetoState::Breached));
        assert!(s.contains("0.210 [0.170, 0.250]") && s.contains("breached: the estimate is past the threshold, not confirmed yet"), "{s}");
        assert!(s.contains("over 500 units"), "{s}");
    }

    #[test]
    fn restart_restores_firing_state() {
        let mut r = Rules::new(RuleConfig::default());
        let history: Vec<Alert> = (1..=6)
            .flat_map(|i| r.on_window(&window(i, [CLEAR, BREACHED, CONFIRMED, CONFIRMED, CONFIRMED, CONFIRMED][i as usize - 1])))
            .collect();
        let mut restored = Rules::new(RuleConfig::default());
        for a in &history {
            restored.restore(a);
        }
        assert_eq!(restored.firing(), r.firing());
        assert_eq!(restored.firing()[0].1, Severity::Critical);
        // The replayed windows raise nothing again; later clear windows resolve.
        assert!(restored.on_window(&window(3, CONFIRMED)).is_empty());
        let resolved: Vec<_> = (7..=9).flat_map(|i| restored.on_window(&window(i, CLEAR))).collect();
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].status, AlertStatus::Resolved);
    }

    pub(crate) fn step_event(seq: i64, impact: Impact, confirmed: bool, violations: &[&str]) -> TrajectoryEvent {
        TrajectoryEvent {
            event_id: format!("e{seq}"),
            run_id: "run-7".into(),
            system: SystemRef { id: "sys-a".into(), version: "1".into(), config_hash: String::new() },
            source: Source::Production,
            agent_id: Some("agent-2".into()),
            event_time: 1_000 + seq,
            sequence: seq,
            kind: EventKind::Step,
            run_started: None,
            step: Some(Box::new(Step {
                tool_name: Some("bank.transfer".into()),
                arguments: Some(r#"{"iban":"DE00 1234","amount":5000}"#.into()),
                impact,
                confirmed,
                violations: violations.iter().map(|v| v.to_string()).collect(),
                ..Step::default()
            })),
            intervention: None,
            run_ended: None,
        }
    }

    #[test]
    fn incidents_for_critical_unsafe_actions_only_once_and_redacted() {
        let mut r = Rules::new(RuleConfig::default());
        assert!(r.on_event(&step_event(1, Impact::Low, false, &["no_pii"])).is_none(), "low impact");
        assert!(r.on_event(&step_event(2, Impact::High, true, &["no_pii"])).is_none(), "confirmed");
        assert!(r.on_event(&step_event(3, Impact::Irreversible, false, &[])).is_none(), "no violation");
        let a = r.on_event(&step_event(4, Impact::Irreversible, false, &["max_amount"])).expect("incident");
        assert_eq!((a.kind, a.severity, a.status), (AlertKind::Incident, Severity::Critical, AlertStatus::Firing));
        assert_eq!(
            (a.run_id.as_deref(), a.step, a.agent_id.as_deref(), a.tool_name.as_deref()),
            (Some("run-7"), Some(4), Some("agent-2"), Some("bank.transfer"))
        );
        assert_eq!(a.violations, vec!["max_amount".to_string()]);
        assert_eq!(a.tool_arguments.as_deref(), Some(REDACTED));
        assert!(!a.summary.contains("DE00"), "{}", a.summary);
        assert!(r.on_event(&step_event(4, Impact::Irreversible, false, &["max_amount"])).is_none(), "deduplicated");
        let mut open = Rules::new(RuleConfig { redact_tool_arguments: false, ..RuleConfig::default() });
        let a = open.on_event(&step_event(5, Impact::High, false, &["x"])).unwrap();
        assert!(a.tool_arguments.unwrap().contains("DE00"));
        // A declared policy's violation alone is no unsafe action: no page; with a safety
        // violation beside it, one.
        let policy = octant_engine::config::ViolationClasses { policy: vec!["compliance.*".into()] };
        let mut r = Rules::new(RuleConfig { violations: policy, ..RuleConfig::default() });
        assert!(r.on_event(&step_event(6, Impact::Irreversible, false, &["compliance.data_retention"])).is_none(), "policy only");
        assert!(r.on_event(&step_event(7, Impact::Irreversible, false, &["compliance.data_retention", "max_amount"])).is_some());
        // A re-run (a harness's answer to a re-run request) pages for none of its steps; the
        // profiler's re-run check reports whether the action came back.
        let mut r = Rules::new(RuleConfig::default());
        let mut start = step_event(0, Impact::Low, false, &[]);
        (start.kind, start.step) = (EventKind::RunStarted, None);
        start.run_started = Some(Box::new(RunStarted { rerun_of: Some("run-1".into()), ..RunStarted::default() }));
        assert!(r.on_event(&start).is_none());
        assert!(r.on_event(&step_event(8, Impact::Irreversible, false, &["max_amount"])).is_none(), "a re-run's step");
        let mut other = step_event(8, Impact::Irreversible, false, &["max_amount"]);
        other.run_id = "run-8".into();
        assert!(r.on_event(&other).is_some(), "another run's");
    }

    #[test]
    fn incident_summaries_name_the_tool_or_the_kind_of_step() {
        let mut r = Rules::new(RuleConfig::default());
        let a = r.on_event(&step_event(1, Impact::Irreversible, false, &["x"])).unwrap();
        assert_eq!(
            a.summary,
            "sys-a (agent agent-2) ran irreversible tool bank.transfer without confirmation, violating x (run run-7, step 1)"
        );
        let mut ev = step_event(2, Impact::Irreversible, false, &["x"]);
        let step = ev.step.as_mut().unwrap();
        (step.tool_name, step.arguments, step.step_kind) = (None, None, StepKind::ModelCall);
        let a = r.on_event(&ev).unwrap();
        assert_eq!(
            a.summary,
            "sys-a (agent agent-2) made an irreversible model call without confirmation, violating x (run run-7, step 2)"
        );
        assert_eq!(a.tool_name, None);
        let mut ev = step_event(3, Impact::High, false, &["x"]);
        ev.step.as_mut().unwrap().tool_name = None;
        assert!(r.on_event(&ev).unwrap().summary.contains("made a high-impact step without"), "default kind is OTHER");
    }
}
