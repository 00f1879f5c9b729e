//! The alert page (`/alerts/<fingerprint>`), from the **lake**: what fired and when, its
//! history (every record of the fingerprint in the order the alerter published them: firing,
//! escalated, resolved), the evidence it fired on (the metric window and its interval from
//! `metric_windows`), and the runs behind it — the incident's run, or for a veto the runs of
//! the window whose observations of the metric lie furthest on the unsafe side. Alertmanager
//! links here (the alerter's `web_base_url`).

use std::fmt::Write;

use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use octant_contracts::{Alert, AlertKind, AlertStatus, MetricWindow};
use octant_core::veto::{Direction, VetoRule};
use serde::{Deserialize, Serialize};

use crate::page::{self, esc, urlencode};
use crate::query;
use octant_report::sql::lit;

/// How many runs the page lists behind a veto.
pub const MAX_RUNS: usize = 25;

/// One alert (all records of one fingerprint), from the lake.
#[derive(Debug, Clone, Serialize)]
pub struct AlertView {
    pub fingerprint: String,
    /// Every record, in publication order.
    pub history: Vec<Alert>,
    /// The metric window of the latest record that names one.
    pub window: Option<MetricWindow>,
    /// The runs behind it (an incident: its run).
    pub runs: Vec<RunBehind>,
    /// Runs with observations of the metric in the window (a veto), of which `runs` are the
    /// first [`MAX_RUNS`] on the unsafe side.
    pub runs_in_window: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunBehind {
    pub run_id: String,
    /// The run's most unsafe observation of the metric (max for an "at least" rule, min for
    /// "below").
    pub value: f64,
    pub observations: i64,
    /// How far on the unsafe side its observations add up to (an "at least" rule: the sum of
    /// the values, e.g. its unsafe steps; "below": the sum of 1 − value).
    pub unsafe_total: f64,
    /// The step of an incident.
    #[serde(default)]
    pub step: Option<i64>,
}

/// The rule behind an alert, when it is a veto rule.
fn rule(name: &str) -> Option<VetoRule> {
    [VetoRule::UNSAFE_ACTION, VetoRule::CONFIRMATION_GATING, VetoRule::CONTAMINATION].into_iter().find(|r| r.name == name)
}

/// The alert `fingerprint` from the lake, or `None` when the lake has no record of it.
pub async fn load(ctx: &SessionContext, fingerprint: &str) -> Result<Option<AlertView>> {
    let sql = format!(
        "{} WHERE fingerprint = {} ORDER BY kafka_partition, kafka_offset",
        query::select_all("alerts", query::ALERT_TIMES),
        lit(fingerprint)
    );
    let mut ids = std::collections::HashSet::new();
    let history: Vec<Alert> = query::rows::<Alert>(ctx, &sql).await?.into_iter().filter(|a| ids.insert(a.alert_id.clone())).collect();
    let Some(last) = history.last().cloned() else { return Ok(None) };
    // The evidence is the window of the newest *firing* record that names one (a resolution
    // names the clear window that resolved it; the page is about what fired).
    let names = |a: &&Alert| a.metric.is_some() && a.window_end.is_some();
    let named = history.iter().rev().filter(|a| a.status == AlertStatus::Firing).find(names).or_else(|| history.iter().rev().find(names));
    let mut window = None;
    if let Some(a) = named
        && a.kind != AlertKind::Incident
        && let Some(end) = a.window_end
    {
        // The joint series the alerter judges: no slice; the benchmark's for contamination.
        let sql = format!(
            "{} WHERE system_id = {} AND date = {} AND system_version = {} AND source = {} AND metric = {} AND CAST(window_end AS BIGINT) = {end} \
             AND slice_kind IS NULL AND slice IS NULL AND {} ORDER BY window_id LIMIT 1",
            query::select_all("metric_windows", query::WINDOW_TIMES),
            lit(&a.system_id),
            lit(&octant_lake::date_of(end)),
            lit(&a.system_version),
            lit(&query::wire(&a.source)),
            lit(a.metric.as_deref().unwrap_or_default()),
            match benchmark_of(a) {
                Some(b) => format!("benchmark = {}", lit(b)),
                None => "benchmark IS NULL".into(),
            }
        );
        window = query::rows::<MetricWindow>(ctx, &sql).await?.into_iter().next().map(|mut w| {
            w.system_id = a.system_id.clone();
            w
        });
    }
    let (runs, runs_in_window) = match (&last.run_id, last.kind) {
        (Some(r), AlertKind::Incident) => {
            (vec![RunBehind { run_id: r.clone(), value: 1.0, observations: 1, unsafe_total: 1.0, step: last.step }], 1)
        }
        _ => match (named, named.and_then(|a| rule(&a.rule))) {
            (Some(a), Some(rule)) => runs_behind(ctx, a, rule).await?,
            _ => (Vec::new(), 0),
        },
    };
    Ok(Some(AlertView { fingerprint: fingerprint.to_string(), history, window, runs, runs_in_window }))
}

/// Contamination alerts are per benchmark: what follows `system/version/source/rule/` in the
/// fingerprint (a system id or version may hold `/` itself).
fn benchmark_of(a: &Alert) -> Option<&str> {
    let prefix = format!("{}/{}/{}/{}/", a.system_id, a.system_version, a.source.as_str(), a.rule);
    (a.rule == VetoRule::CONTAMINATION.name).then(|| a.fingerprint.strip_prefix(&prefix)).flatten()
}

/// The runs of the alert's window with observations of its metric, the most unsafe first.
async fn runs_behind(ctx: &SessionContext, a: &Alert, rule: VetoRule) -> Result<(Vec<RunBehind>, usize)> {
    let (Some(metric), Some(start), Some(end)) = (a.metric.as_deref(), a.window_start, a.window_end) else { return Ok((Vec::new(), 0)) };
    let (agg, order, total) = match rule.direction {
        Direction::AtLeast => ("MAX", "DESC", "SUM(value)"),
        Direction::Below => ("MIN", "ASC", "SUM(1 - value)"),
    };
    let mut filter = format!(
        "rerun_of IS NULL AND system_id = {} AND system_version = {} AND source = {} AND metric = {} AND CAST(event_time AS BIGINT) >= {start} AND CAST(event_time AS BIGINT) < {end} \
         AND date >= {} AND date <= {}",
        lit(&a.system_id),
        lit(&a.system_version),
        lit(&query::wire(&a.source)),
        lit(metric),
        lit(&octant_lake::date_of(start)),
        lit(&octant_lake::date_of(end - 1)),
    );
    if let Some(b) = benchmark_of(a) {
        filter.push_str(&format!(" AND benchmark = {}", lit(b)));
    }
    // One row per observation id (the lake may hold a record twice).
    let sql = format!(
        "SELECT run_id, {agg}(value) AS value, COUNT(*) AS observations, CAST({total} AS DOUBLE) AS unsafe_total FROM \
         (SELECT DISTINCT observation_id, run_id, value FROM observations WHERE {filter}) GROUP BY run_id \
         ORDER BY value {order}, unsafe_total DESC, run_id LIMIT {MAX_RUNS}"
    );
    let runs: Vec<RunBehind> = query::rows(ctx, &sql).await?;
    // The rest are counted, not read (a window may hold 100,000 runs).
    let n = query::count(ctx, &format!("SELECT COUNT(DISTINCT run_id) AS n FROM observations WHERE {filter}")).await?;
    Ok((runs, n))
}

/// The page.
pub fn to_html(v: &AlertView) -> String {
    let last = v.history.last().expect("a view has a record");
    let firing = last.status == AlertStatus::Firing;
    let title = format!("Alert {} · {}", last.alertname, last.system_id);
    let mut s = page::page_start(&title);
    let _ = write!(
        s,
        "<p id=\"state\" class=\"{}\">{} · {:?} · {} {} · {}</p><p>{}</p><p>Fingerprint <code>{}</code> · system <a href=\"/systems/{}\">{}</a> \
         version {} · {} · {}</p></header><main>",
        if firing { "unsafe-tag" } else { "" },
        if firing { "FIRING" } else { "RESOLVED" },
        last.severity,
        esc(&last.rule),
        page::text(last.metric.as_deref()),
        page::text(last.dimension.as_deref()),
        esc(&last.summary),
        esc(&v.fingerprint),
        esc(&urlencode(&last.system_id)),
        esc(&last.system_id),
        esc(&last.system_version),
        last.source.as_str(),
        if last.runbook_url.starts_with("https://") || last.runbook_url.starts_with("http://") {
            format!("<a href=\"{}\">runbook</a>", esc(&last.runbook_url))
        } else if last.runbook_url.is_empty() {
            "no runbook".into()
        } else {
            format!("runbook: <code>{}</code>", esc(&last.runbook_url))
        },
    );
    s.push_str("<h2>History</h2><table id=\"history\"><caption>Every record of this alert in the order the alerter published it: firing, escalated, resolved.</caption><thead><tr>\
                <th scope=\"col\">Window end (event time)</th><th scope=\"col\">Change</th><th scope=\"col\">Severity</th><th scope=\"col\">Veto state</th><th scope=\"col\">Estimate</th>\
                <th scope=\"col\">Interval</th><th scope=\"col\">Threshold</th><th scope=\"col\">Window</th></tr></thead><tbody>");
    for (i, a) in v.history.iter().enumerate() {
        // The alerter escalates by resolving the lower severity and firing the higher one
        // (`rules.rs`): the pair reads as one escalation.
        let (previous, next) = (i.checked_sub(1).map(|j| &v.history[j]), v.history.get(i + 1));
        let escalates = |lower: &Alert, higher: &Alert| {
            lower.status == AlertStatus::Resolved && higher.status == AlertStatus::Firing && higher.severity > lower.severity
        };
        let change = match a.status {
            AlertStatus::Resolved if next.is_some_and(|n| escalates(a, n)) => "escalating (lower severity closed)",
            AlertStatus::Resolved => "resolved",
            AlertStatus::Firing if previous.is_some_and(|p| escalates(p, a)) => "escalated",
            AlertStatus::Firing if previous.is_some_and(|p| p.status == AlertStatus::Firing) => "firing (update)",
            AlertStatus::Firing => "firing",
        };
        let _ = write!(
            s,
            "<tr class=\"{}\"><td>{}</td><td>{change}</td><td>{:?}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if a.status == AlertStatus::Firing { "firing" } else { "resolved" },
            esc(&octant_report::render::rfc3339(a.window_end.unwrap_or(a.starts_at))),
            a.severity,
            page::text(a.veto_state.as_deref()),
            page::num(a.estimate),
            page::interval(a.ci_low, a.ci_high),
            a.threshold.map_or_else(|| "—".into(), |t| t.to_string()),
            match (a.window_start, a.window_end) {
                (Some(ws), Some(we)) =>
                    format!("{} – {}", esc(&octant_report::render::rfc3339(ws)), esc(&octant_report::render::rfc3339(we))),
                _ => "—".into(),
            },
        );
    }
    s.push_str("</tbody></table>");
    s.push_str("<h2>Evidence</h2>");
    match (&v.window, last.kind) {
        (Some(w), _) => {
            let _ = write!(
                s,
                "<table id=\"evidence\"><caption>The metric window the latest record names.</caption><tbody>\
                 <tr><th scope=\"row\">Metric</th><td>{} ({})</td></tr><tr><th scope=\"row\">Window</th><td>{} – {}</td></tr>\
                 <tr><th scope=\"row\">Estimate</th><td>{}</td></tr><tr><th scope=\"row\">{} % interval</th><td>{}</td></tr>\
                 <tr><th scope=\"row\">Units / clusters</th><td>{} / {}</td></tr><tr><th scope=\"row\">Band</th><td>{}</td></tr>\
                 <tr><th scope=\"row\">Veto state</th><td>{}</td></tr><tr><th scope=\"row\">Method</th><td>{} ({} replicates)</td></tr></tbody></table>",
                esc(&w.metric),
                esc(&w.dimension),
                esc(&octant_report::render::rfc3339(w.window_start)),
                esc(&octant_report::render::rfc3339(w.window_end)),
                page::num(w.estimate),
                (w.level * 100.0).round(),
                page::interval(w.ci_low, w.ci_high),
                w.units,
                w.clusters,
                w.band.map_or_else(|| format!("N/A: {}", page::text(w.na_reason.as_deref())), |b| b.to_string()),
                page::text(w.veto_state.as_deref()),
                esc(&w.method),
                w.replicates,
            );
        }
        (None, AlertKind::Incident) => {
            let _ = write!(
                s,
                "<table id=\"evidence\"><caption>The unsafe step that raised the incident.</caption><tbody>\
                 <tr><th scope=\"row\">Agent</th><td>{}</td></tr><tr><th scope=\"row\">Tool</th><td>{}</td></tr>\
                 <tr><th scope=\"row\">Arguments</th><td><code>{}</code></td></tr><tr><th scope=\"row\">Violations</th><td>{}</td></tr></tbody></table>",
                page::text(last.agent_id.as_deref()),
                page::text(last.tool_name.as_deref()),
                page::text(last.tool_arguments.as_deref()),
                if last.violations.is_empty() { "—".into() } else { esc(&last.violations.join(", ")) },
            );
        }
        (None, _) => s.push_str("<p>The window this alert names is not in the lake (yet).</p>"),
    }
    let _ = write!(s, "<h2>Runs behind it</h2>");
    if v.runs.is_empty() {
        s.push_str("<p>No run with observations of the metric in the window.</p>");
    } else {
        let _ = write!(
            s,
            "<table id=\"runs\"><caption>{}</caption><thead><tr><th scope=\"col\">Run</th><th scope=\"col\">Step</th>\
             <th scope=\"col\">Most unsafe value</th><th scope=\"col\">Unsafe-side total</th><th scope=\"col\">Observations</th></tr></thead><tbody>",
            if last.kind == AlertKind::Incident {
                "The run of the unsafe step.".to_string()
            } else {
                format!(
                    "{} of the {} runs with observations of the metric in the window, the most unsafe first.",
                    v.runs.len(),
                    v.runs_in_window
                )
            }
        );
        for r in &v.runs {
            let anchor = r.step.map(|st| format!("#step-{st}")).unwrap_or_default();
            let _ = write!(
                s,
                "<tr><td><a href=\"/runs/{}{anchor}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&urlencode(&r.run_id)),
                esc(&r.run_id),
                r.step.map_or_else(|| "—".into(), |st| st.to_string()),
                r.value,
                r.unsafe_total,
                r.observations
            );
        }
        s.push_str("</tbody></table>");
    }
    s.push_str("</main></body></html>\n");
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use octant_contracts::{Observation, Severity, Source};

    /// A lake at `dir` holding `records` in `table` (system `s`, date 1970-01-01), written as the
    /// lake writer writes them: one unit of topic `octant.<table>`, partition 0, offsets from 0.
    pub(crate) fn lake_of<T: Serialize>(dir: &std::path::Path, table: &'static str, records: &[T]) {
        let mut rows = String::new();
        for (offset, r) in records.iter().enumerate() {
            let mut v = serde_json::to_value(r).unwrap();
            let o = v.as_object_mut().unwrap();
            o.insert("kafka_topic".into(), format!("octant.{table}").into());
            o.insert("kafka_partition".into(), 0.into());
            o.insert("kafka_offset".into(), offset.into());
            rows.push_str(&format!("{v}\n"));
        }
        let schema = octant_lake::schema::arrow_schema(octant_lake::schema::table(table).unwrap());
        let batch = arrow::json::ReaderBuilder::new(schema).build(std::io::Cursor::new(rows)).unwrap().next().unwrap().unwrap();
        assert_eq!(batch.num_rows(), records.len());
        let spec = vec![(table, octant_lake::lake::FileSpec { date: "1970-01-01".into(), batch })];
        let last = records.len() as i64 - 1;
        octant_lake::Lake::new(dir).append(&format!("octant.{table}"), 0, 0, last, spec, &octant_lake::lake::writer_properties()).unwrap();
    }

    /// The runs behind a veto on a real lake: the most unsafe first (value, then how much of
    /// the run is on the unsafe side, then id), an observation delivered twice counted once,
    /// the first [`MAX_RUNS`] read and all runs of the window counted; observations outside
    /// the window or of another metric are not the alert's.
    #[tokio::test]
    async fn runs_behind_a_veto_are_the_most_unsafe_first_and_all_counted() {
        let obs = |run: String, metric: &str, step: i64, t: i64, value: f64| Observation {
            observation_id: format!("{run}/{metric}/{step}"),
            metric: metric.into(),
            system_id: "s".into(),
            system_version: "1".into(),
            source: octant_contracts::Source::Production,
            agent_id: None,
            cluster_id: run.clone(),
            run_id: run,
            task_id: None,
            attempt: None,
            groups: vec![],
            benchmark: None,
            task_family: None,
            step: Some(step),
            event_time: t,
            value,
            weight: 1.0,
            confidence: None,
            provenance: None,
            rerun_of: None,
        };
        // Run i has i % 4 unsafe steps of 3 (none for i % 4 == 0).
        let mut all = Vec::new();
        for i in 0..30 {
            for step in 0..3 {
                all.push(obs(format!("r{i:02}"), "unsafe_action_rate", step, 1_000 * step, f64::from(u8::from(step < i % 4))));
            }
        }
        all.push(all[7 * 3].clone()); // r07's first unsafe step, delivered twice
        all.push(obs("r98".into(), "tool_error_rate", 0, 1_000, 1.0));
        all.push(obs("r99".into(), "unsafe_action_rate", 0, 600_000, 1.0)); // the window ends before it
        let dir = std::env::temp_dir().join(format!("octant-profiler-runs-behind-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        lake_of(&dir, "observations", &all);
        let ctx = octant_lake::reader::open(&dir).await.unwrap();
        let a = record(AlertStatus::Firing, Severity::Warning, 1);
        let (runs, in_window) = runs_behind(&ctx, &a, VetoRule::UNSAFE_ACTION).await.unwrap();
        assert_eq!((runs.len(), in_window), (MAX_RUNS, 30));
        let ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(&ids[..8], ["r03", "r07", "r11", "r15", "r19", "r23", "r27", "r02"], "r07 counted once: {ids:?}");
        assert_eq!(&ids[22..], ["r00", "r04", "r08"], "{ids:?}");
        assert_eq!((runs[1].value, runs[1].unsafe_total, runs[1].observations), (1.0, 3.0, 3));
        let _ = std::fs::remove_dir_all(&dir);
    }

    pub(crate) fn record(status: AlertStatus, severity: Severity, at: i64) -> Alert {
        Alert {
            alert_id: format!("a{at}"),
            fingerprint: "s/1/production/unsafe_action_veto".into(),
            status,
            severity,
            kind: AlertKind::Veto,
            alertname: "OctantUnsafeActionVeto".into(),
            rule: "unsafe_action_veto".into(),
            system_id: "s".into(),
            system_version: "1".into(),
            source: Source::Production,
            dimension: Some("safety".into()),
            metric: Some("unsafe_action_rate".into()),
            veto_state: Some("past".into()),
            estimate: Some(0.3),
            ci_low: Some(0.22),
            ci_high: Some(0.38),
            threshold: Some(0.2),
            window_start: Some(0),
            window_end: Some(600_000),
            run_id: None,
            step: None,
            agent_id: None,
            tool_name: None,
            tool_arguments: None,
            violations: vec![],
            starts_at: at,
            ends_at: None,
            summary: "<b>unsafe</b> rate past 0.20".into(),
            runbook_url: "https://runbooks/#unsafe".into(),
        }
    }

    #[test]
    fn history_says_firing_escalated_resolved_and_links_the_runs() {
        let v = AlertView {
            fingerprint: "s/1/production/unsafe_action_veto".into(),
            // As the alerter publishes them: warning fires; the escalation resolves the
            // warning and fires the critical; the critical resolves.
            history: vec![
                record(AlertStatus::Firing, Severity::Warning, 1),
                record(AlertStatus::Resolved, Severity::Warning, 2),
                record(AlertStatus::Firing, Severity::Critical, 2),
                record(AlertStatus::Resolved, Severity::Critical, 3),
            ],
            window: None,
            runs: vec![RunBehind { run_id: "run/1".into(), value: 1.0, observations: 4, unsafe_total: 2.0, step: None }],
            runs_in_window: 9,
        };
        let html = to_html(&v);
        for change in ["<td>firing</td>", "<td>escalating (lower severity closed)</td>", "<td>escalated</td>", "<td>resolved</td>"] {
            assert!(html.contains(change), "{change}: {html}");
        }
        assert!(html.contains("RESOLVED") && html.contains("&lt;b&gt;unsafe&lt;/b&gt;"));
        assert!(html.contains("<a href=\"/runs/run%2F1\">run/1</a>") && html.contains("1 of the 9 runs"), "{html}");
        assert_eq!(rule("confirmation_gating_veto").map(|r| r.direction), Some(Direction::Below));
        let mut c = record(AlertStatus::Firing, Severity::Warning, 1);
        c.rule = "contamination_veto".into();
        c.source = Source::Evaluation;
        c.fingerprint = "s/1/evaluation/contamination_veto/leaky/x".into();
        assert_eq!(benchmark_of(&c), Some("leaky/x"));
        c.system_id = "org/model".into();
        c.fingerprint = "org/model/1/evaluation/contamination_veto/leaky".into();
        assert_eq!(benchmark_of(&c), Some("leaky"), "a system id with a slash");
        assert!(
            html.contains("runbook</a>")
                && !to_html(&AlertView {
                    history: vec![{
                        let mut r = record(AlertStatus::Firing, Severity::Warning, 1);
                        r.runbook_url = "javascript:alert(1)".into();
                        r
                    }],
                    ..v.clone()
                })
                .contains("href=\"javascript")
        );
    }
}
