//! The system page (`/systems/<system>`): how one system's eight bands moved, from the
//! **lake** (`dimension_profiles` over a period ending at the system's newest window), the
//! metrics behind each band at the newest window (`metric_windows`: estimate, interval, units,
//! band, N/A reason, veto state), the alerts of the period (`alerts`, each linking its alert
//! page), and the evidence packages of the latest profiles to download.
//!
//! The chart is inline SVG, one row per dimension: the band as a line, its interval as a
//! shaded area, N/A windows as gaps; its text alternative says, per dimension, the latest band
//! and the range over the period. No script.

use std::collections::BTreeMap;
use std::fmt::Write;

use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use octant_contracts::{Alert, DimensionProfile, MetricWindow, Source};
use serde::{Deserialize, Serialize};

use crate::fleet::DIMENSIONS;
use crate::page::{self, esc, urlencode};
use crate::query;
use octant_report::sql::{Period, lit, period_filter};

/// How many alert records the system page lists at a time unless asked otherwise
/// (`?alerts_per_page=`, 1–1000); older and newer pages are links (`?alerts_page=`, from 0).
pub const ALERTS_PER_PAGE: usize = 100;

/// The most points a chart draws per dimension (every k-th window beyond that, the newest kept).
pub const MAX_POINTS: usize = 400;

/// One system over a period, from the lake.
#[derive(Debug, Clone, Serialize)]
pub struct SystemView {
    pub system: String,
    /// The period: `days` ending at the newest window of the system.
    pub days: u32,
    pub start: i64,
    pub end: i64,
    /// Per (version, source): its dimension profiles in window order.
    pub series: Vec<Series>,
    /// Per (version, source): the metric windows of its newest window end.
    pub metrics: Vec<MetricWindow>,
    /// One page of the period's alert records, newest first.
    pub alerts: Vec<Alert>,
    /// Which page `alerts` is (from 0, the newest), how many records a page holds, and how
    /// many records the period has in all.
    pub alerts_page: usize,
    pub alerts_per_page: usize,
    pub alerts_total: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub version: String,
    pub source: Source,
    pub profiles: Vec<DimensionProfile>,
}

/// An evidence package of a latest profile, for the download links.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Package {
    pub version: String,
    pub source: Source,
    pub period: String,
    pub generated_at: i64,
    pub unsuitable: bool,
    /// The profile's meta-evaluation, when its period had evaluator results (shown on the page).
    #[serde(skip)]
    pub meta: Option<octant_report::meta_evaluation::MetaEvaluation>,
}

impl Package {
    /// The package's files under `/evidence/…` (served by the profiler).
    pub fn url(&self, system: &str, file: &str) -> String {
        format!("/evidence/{}/{}/{}/{}/{file}", urlencode(system), urlencode(&self.version), self.source.as_str(), urlencode(&self.period))
    }
}

/// Which alert records of the period the system page shows: page `page` (from 0, the newest)
/// of `per_page` records.
#[derive(Debug, Clone, Copy)]
pub struct AlertsPage {
    pub page: usize,
    pub per_page: usize,
}

/// `system` over the `days` ending at its newest window in the lake, with one page of its
/// alerts; `None` when the lake has no dimension profile of it.
pub async fn load(ctx: &SessionContext, system: &str, days: u32, alerts_page: AlertsPage) -> Result<Option<SystemView>> {
    #[derive(Deserialize)]
    struct Newest {
        e: Option<i64>,
    }
    let newest: Vec<Newest> =
        query::rows(ctx, &format!("SELECT MAX(CAST(window_end AS BIGINT)) AS e FROM dimension_profiles WHERE system_id = {}", lit(system)))
            .await?;
    let Some(end) = newest.first().and_then(|n| n.e) else { return Ok(None) };
    let period = Period { name: format!("{days}d"), start: end - i64::from(days) * 86_400_000, end: end + 1 };
    let sql = format!(
        "{} WHERE {} ORDER BY system_version, source, window_end",
        query::select_all("dimension_profiles", query::PROFILE_TIMES),
        period_filter(&period, "window_end", Some(system))
    );
    let mut by: BTreeMap<(String, &'static str), Series> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for mut p in query::rows::<DimensionProfile>(ctx, &sql).await? {
        // At-least-once delivery: the lake may hold a record twice.
        if !seen.insert(p.profile_id.clone()) {
            continue;
        }
        p.system_id = system.to_string();
        by.entry((p.system_version.clone(), p.source.as_str()))
            .or_insert_with(|| Series { version: p.system_version.clone(), source: p.source, profiles: Vec::new() })
            .profiles
            .push(p);
    }
    let series: Vec<Series> = by.into_values().collect();
    let mut metrics = Vec::new();
    for s in &series {
        let Some(last) = s.profiles.last() else { continue };
        let sql = format!(
            "{} WHERE system_id = {} AND date = {} AND system_version = {} AND source = {} AND CAST(window_end AS BIGINT) = {} \
             ORDER BY dimension, metric, benchmark, slice_kind, slice",
            query::select_all("metric_windows", query::WINDOW_TIMES),
            lit(system),
            lit(&octant_lake::date_of(last.window_end)),
            lit(&s.version),
            lit(&query::wire(&s.source)),
            last.window_end
        );
        let mut ids = std::collections::HashSet::new();
        for mut w in query::rows::<MetricWindow>(ctx, &sql).await? {
            if ids.insert(w.window_id.clone()) {
                w.system_id = system.to_string();
                metrics.push(w);
            }
        }
    }
    let (alerts, alerts_total) = alerts_of(ctx, system, period.start, alerts_page).await?;
    Ok(Some(SystemView {
        system: system.to_string(),
        days,
        start: period.start,
        end: period.end,
        series,
        metrics,
        alerts,
        alerts_page: alerts_page.page,
        alerts_per_page: alerts_page.per_page,
        alerts_total,
    }))
}

/// One page of `system`'s alert records since `since` (epoch ms), newest first, and how many
/// there are in all: every record that ends, judges a window or starts then or later (an alert
/// that started before and resolved after is in; so are incidents after the newest window).
/// One row per alert id (the lake may hold a record twice); only the page is read into records,
/// the rest are counted.
pub async fn alerts_of(ctx: &SessionContext, system: &str, since: i64, page: AlertsPage) -> Result<(Vec<Alert>, usize)> {
    let filter = format!("system_id = {} AND CAST(COALESCE(ends_at, window_end, starts_at) AS BIGINT) >= {since}", lit(system));
    let total = query::count(ctx, &format!("SELECT COUNT(DISTINCT alert_id) AS n FROM alerts WHERE {filter}")).await?;
    let sql = format!(
        "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY alert_id ORDER BY kafka_partition, kafka_offset) AS copy FROM ({} WHERE {filter}) AS a) AS d \
         WHERE copy = 1 ORDER BY COALESCE(window_end, starts_at) DESC, kafka_partition, kafka_offset DESC LIMIT {} OFFSET {}",
        query::select_all("alerts", query::ALERT_TIMES),
        page.per_page,
        page.page.saturating_mul(page.per_page),
    );
    let alerts = query::rows::<Alert>(ctx, &sql)
        .await?
        .into_iter()
        .map(|mut a| {
            a.system_id = system.to_string();
            a
        })
        .collect();
    Ok((alerts, total))
}

/// Where the shown alert records lie among the period's, with links to the newer and older
/// pages (empty when one page holds them all).
fn alert_pages(v: &SystemView) -> String {
    let per = v.alerts_per_page.max(1);
    if v.alerts_page == 0 && v.alerts_total <= per {
        return String::new();
    }
    let first = v.alerts_page.saturating_mul(per);
    let last = (first + v.alerts.len()).min(v.alerts_total);
    let link = |page: usize, rel: &str, words: &str| {
        format!(
            "<a rel=\"{rel}\" href=\"/systems/{}?days={}&amp;alerts_page={page}{}#alerts-of-the-period\">{words}</a>",
            esc(&urlencode(&v.system)),
            v.days,
            if per == ALERTS_PER_PAGE { String::new() } else { format!("&amp;alerts_per_page={per}") }
        )
    };
    let mut out = String::from("<nav class=\"pages\" aria-label=\"Alert pages\"><p>");
    if v.alerts.is_empty() {
        out.push_str("Past the last record. ");
    } else {
        let _ = write!(out, "Records {}–{} of {}, newest first. ", first + 1, last, v.alerts_total);
    }
    if v.alerts_page > 0 {
        let newer = v.alerts_page.min(v.alerts_total.div_ceil(per)).saturating_sub(1);
        out.push_str(&link(0, "first", "Newest"));
        out.push(' ');
        out.push_str(&link(newer, "prev", "Newer"));
        out.push(' ');
    }
    if first + v.alerts.len() < v.alerts_total && !v.alerts.is_empty() {
        out.push_str(&link(v.alerts_page + 1, "next", "Older"));
    }
    out.push_str("</p></nav>");
    out
}

/// The page.
pub fn to_html(v: &SystemView, packages: &[Package]) -> String {
    let title = format!("System {}", v.system);
    let mut s = page::page_start(&title);
    let _ = write!(
        s,
        "<p>From the lake: {} to {} (the period ends at the system's newest window). Bands 0–4 with their interval; N/A with its reason.</p></header><main>",
        esc(&octant_report::render::rfc3339(v.start)),
        esc(&octant_report::render::rfc3339(v.end - 1))
    );
    s.push_str("<h2>Bands over time</h2>");
    for (i, series) in v.series.iter().enumerate() {
        let _ = write!(s, "<h3>Version {} · {}</h3>", esc(&series.version), series.source.as_str());
        if let Some(last) = series.profiles.last() {
            if last.unsuitable {
                s.push_str("<p class=\"unsafe-tag\">UNSUITABLE at the newest window.</p>");
            }
            s.push_str(&latest_table(i, last));
        }
        // The time axis spans the windows there are (a period mostly without data would
        // squeeze them into a corner).
        let first = series.profiles.first().map_or(v.start, |p| p.window_end);
        let last = series.profiles.last().map_or(v.end, |p| p.window_end);
        s.push_str(&chart(i, series, first, last.max(first + 1) + 1));
    }
    s.push_str("<h2>Metrics behind the bands</h2>");
    for (i, series) in v.series.iter().enumerate() {
        let rows: Vec<&MetricWindow> =
            v.metrics.iter().filter(|m| m.system_version == series.version && m.source == series.source).collect();
        let _ = write!(
            s,
            "<table id=\"metrics-{i}\"><caption>Version {} · {}: every metric of the newest window ({}), by dimension.</caption><thead><tr>\
             <th scope=\"col\">Dimension</th><th scope=\"col\">Metric</th><th scope=\"col\">Benchmark / slice</th><th scope=\"col\">Estimate</th>\
             <th scope=\"col\">Interval (level)</th><th scope=\"col\">Units</th><th scope=\"col\">Clusters</th><th scope=\"col\">Band</th>\
             <th scope=\"col\">N/A reason</th><th scope=\"col\">Veto</th></tr></thead><tbody>",
            esc(&series.version),
            series.source.as_str(),
            esc(&series.profiles.last().map(|p| octant_report::render::rfc3339(p.window_end)).unwrap_or_default())
        );
        for m in rows {
            let slice = match (&m.benchmark, &m.slice_kind, &m.slice) {
                (Some(b), _, _) => b.clone(),
                (None, Some(k), Some(v)) => format!("{k}={v}"),
                _ => String::new(),
            };
            let band = match m.band {
                Some(b) => format!("{b} [{}, {}]", m.band_low.unwrap_or(b), m.band_high.unwrap_or(b)),
                None => "N/A".into(),
            };
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&m.dimension),
                esc(&m.metric),
                if slice.is_empty() { "—".into() } else { esc(&slice) },
                page::num(m.estimate),
                match (m.ci_low, m.ci_high) {
                    (Some(_), Some(_)) => format!("{} ({} %)", page::interval(m.ci_low, m.ci_high), (m.level * 100.0).round()),
                    _ => "—".into(),
                },
                m.units,
                m.clusters,
                band,
                page::text(m.na_reason.as_deref()),
                page::text(m.veto_state.as_deref()),
            );
        }
        s.push_str("</tbody></table>");
    }
    let _ = write!(s, "<h2 id=\"alerts-of-the-period\">Alerts of the period ({})</h2>", v.alerts_total);
    let pages = alert_pages(v);
    if v.alerts.is_empty() && v.alerts_total == 0 {
        s.push_str("<p>None.</p>");
    } else if v.alerts.is_empty() {
        let _ = write!(s, "<p>No records on this page: the period has {}.</p>{pages}", v.alerts_total);
    } else {
        s.push_str(&pages);
        s.push_str("<table id=\"alerts\"><caption>This page's alert records of the period, newest first: firing, escalated and resolved.</caption><thead><tr>\
                    <th scope=\"col\">Window end (event time)</th><th scope=\"col\">Alert</th><th scope=\"col\">Status</th><th scope=\"col\">Severity</th>\
                    <th scope=\"col\">Version</th><th scope=\"col\">Summary</th><th scope=\"col\">Run</th></tr></thead><tbody>");
        for a in &v.alerts {
            let run = page::incident_run_link(a, "").unwrap_or_else(|| "—".into());
            let _ = write!(
                s,
                "<tr><td>{}</td><td><a href=\"/alerts/{}\">{}</a></td><td>{:?}</td><td>{:?}</td><td>{}</td><td>{}</td><td>{run}</td></tr>",
                esc(&octant_report::render::rfc3339(a.window_end.unwrap_or(a.starts_at))),
                esc(&urlencode(&a.fingerprint)),
                esc(&a.alertname),
                a.status,
                a.severity,
                esc(&a.system_version),
                esc(&a.summary),
            );
        }
        s.push_str("</tbody></table>");
    }
    meta_section(&mut s, packages);
    s.push_str("<h2>Evidence packages</h2>");
    if packages.is_empty() {
        s.push_str("<p>No profile of this system yet (the profiler builds them every run).</p>");
    } else {
        s.push_str("<ul id=\"packages\">");
        for p in packages {
            let _ = write!(
                s,
                "<li>Version {} · {} · period {} (generated {}{}): <a href=\"{}\">HTML</a>, <a href=\"{}\">JSON</a>, <a href=\"{}\">Markdown</a></li>",
                esc(&p.version),
                p.source.as_str(),
                esc(&p.period),
                esc(&octant_report::render::rfc3339(p.generated_at)),
                if p.unsuitable { ", unsuitable" } else { "" },
                esc(&p.url(&v.system, "profile.html")),
                esc(&p.url(&v.system, "profile.json")),
                esc(&p.url(&v.system, "profile.md")),
            );
        }
        s.push_str("</ul>");
    }
    s.push_str("</main></body></html>\n");
    s
}

/// The evaluators behind the judged and comparative metrics, per latest profile: agreement
/// among raters, judge–human κ, stability, judge biases and set-level scores (the evidence
/// package's "Meta-evaluation" section, as tables).
fn meta_section(s: &mut String, packages: &[Package]) {
    let with: Vec<(&Package, &octant_report::meta_evaluation::MetaEvaluation)> = packages
        .iter()
        .filter_map(|p| p.meta.as_ref().map(|m| (p, m)))
        .filter(|(_, m)| !(m.raters.is_empty() && m.pairwise.is_empty() && m.set_level.is_empty()))
        .collect();
    if with.is_empty() {
        return;
    }
    s.push_str("<h2 id=\"evaluators\">Evaluators (meta-evaluation)</h2>");
    let num = |v: Option<f64>| v.map_or_else(|| "—".to_string(), |x| format!("{x:.3}"));
    let band = |b: Option<u8>| b.map_or_else(|| "—".to_string(), |b| b.to_string());
    let iv = |v: Option<[f64; 2]>| v.map_or_else(String::new, |[l, h]| format!(" [{l:.3}, {h:.3}]"));
    for (i, (p, m)) in with.iter().enumerate() {
        let whose = format!("version {} · {} · period {}", esc(&p.version), p.source.as_str(), esc(&p.period));
        if !m.raters.is_empty() {
            let _ = write!(
                s,
                "<table class=\"meta\" id=\"raters-{i}\"><caption>Raters, {whose}</caption><thead><tr><th scope=\"col\">Evaluation</th>\
                 <th scope=\"col\">Items</th><th scope=\"col\">α among humans</th><th scope=\"col\">Judge–human κ [95 %]</th>\
                 <th scope=\"col\">κ band</th><th scope=\"col\">Test–retest variance (band C(0.10))</th></tr></thead><tbody>"
            );
            for r in &m.raters {
                let (k, kb) = match &r.judge_human {
                    Some(k) => (format!("{:.3} [{:.3}, {:.3}] ({} items)", k.kappa, k.lo, k.hi, k.items), band(k.band)),
                    None => ("—".into(), "—".into()),
                };
                let _ = write!(
                    s,
                    "<tr><th scope=\"row\">{}</th><td>{}</td><td>{} ({} humans)</td><td>{}</td><td>{}</td><td>{} ({})</td></tr>",
                    esc(&r.name),
                    r.items,
                    num(r.human_alpha),
                    r.humans,
                    k,
                    kb,
                    num(r.retest_instability),
                    band(r.retest_band)
                );
            }
            s.push_str("</tbody></table>");
        }
        if !m.pairwise.is_empty() {
            let _ = write!(
                s,
                "<table class=\"meta\" id=\"pairwise-{i}\"><caption>Pairwise judges, {whose}</caption><thead><tr><th scope=\"col\">Evaluation</th>\
                 <th scope=\"col\">Verdicts</th><th scope=\"col\">Win rate (both orders)</th><th scope=\"col\">Position inconsistency (band C(0.15))</th>\
                 <th scope=\"col\">Verbosity bias [95 %] (band C(0.15))</th><th scope=\"col\">Elo [95 %] (band, pool)</th></tr></thead><tbody>"
            );
            for q in &m.pairwise {
                let _ = write!(
                    s,
                    "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{} ({})</td><td>{}{} ({})</td><td>{}{} ({}, {})</td></tr>",
                    esc(&q.name),
                    q.verdicts,
                    num(q.win_rate),
                    num(q.position_inconsistency),
                    band(q.position_band),
                    num(q.verbosity_bias),
                    iv(q.verbosity_interval),
                    band(q.verbosity_band),
                    q.elo.map_or_else(|| "—".to_string(), |e| format!("{e:.0}")),
                    q.elo_interval.map_or_else(String::new, |[l, h]| format!(" [{l:.0}, {h:.0}]")),
                    band(q.elo_band),
                    esc(q.pool_version.as_deref().unwrap_or("no pool declared"))
                );
            }
            s.push_str("</tbody></table>");
        }
        if !m.set_level.is_empty() {
            let _ = write!(
                s,
                "<table class=\"meta\" id=\"set-level-{i}\"><caption>Set-level scores, {whose}</caption><thead><tr><th scope=\"col\">Score</th>\
                 <th scope=\"col\">Evaluator</th><th scope=\"col\">Value [evaluator's interval]</th><th scope=\"col\">Band or N/A</th></tr></thead><tbody>"
            );
            for r in &m.set_level {
                let (reported, b) = (r.reported_interval(), esc(&r.band_text()));
                let _ = write!(
                    s,
                    "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}{reported}</td><td>{b}</td></tr>",
                    esc(&r.name),
                    esc(&r.evaluator),
                    r.value
                );
            }
            s.push_str("</tbody></table>");
        }
    }
}

/// The newest window's eight bands as text.
fn latest_table(i: usize, p: &DimensionProfile) -> String {
    let mut s = format!(
        "<table id=\"bands-{i}\"><caption>The newest window, ending {}: band, interval, caps or N/A reason per dimension; vetoes not clear: {}.</caption>\
         <thead><tr><th scope=\"col\">Dimension</th><th scope=\"col\">Band</th><th scope=\"col\">Interval</th><th scope=\"col\">Capped by / N/A reason</th></tr></thead><tbody>",
        esc(&octant_report::render::rfc3339(p.window_end)),
        {
            let v: Vec<String> =
                p.vetoes.iter().filter(|v| v.state != "clear").map(|v| format!("{} {}", esc(&v.metric), esc(&v.state))).collect();
            if v.is_empty() { "none".to_string() } else { v.join(", ") }
        }
    );
    for d in DIMENSIONS {
        let b = p.dimensions.iter().find(|x| x.dimension == d);
        let (band, iv, note) = match b {
            Some(b) => match b.band {
                Some(v) => (
                    v.to_string(),
                    format!("[{}, {}]", b.band_low.unwrap_or(v), b.band_high.unwrap_or(v)),
                    if b.capped_by.is_empty() { "—".into() } else { format!("capped by {}", esc(&b.capped_by.join(", "))) },
                ),
                None => ("N/A".into(), "—".into(), page::text(b.na_reason.as_deref())),
            },
            None => ("—".into(), "—".into(), "—".into()),
        };
        let _ = write!(s, "<tr><th scope=\"row\">{d}</th><td>{band}</td><td>{iv}</td><td>{note}</td></tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// Band, interval low, interval high.
type Bands = (i32, i32, i32);

/// One point of a dimension's line: window end, band and interval (None: N/A).
type Point = (i64, Option<Bands>);

fn points(series: &Series, dimension: &str) -> Vec<Point> {
    series
        .profiles
        .iter()
        .map(|p| {
            let b = p.dimensions.iter().find(|x| x.dimension == dimension);
            (p.window_end, b.and_then(|b| b.band.map(|v| (v, b.band_low.unwrap_or(v), b.band_high.unwrap_or(v)))))
        })
        .collect()
}

/// At most [`MAX_POINTS`] points for drawing: the period cut into as many equal buckets, each
/// drawn as its newest window — or as N/A if any window in it was N/A (a gap is never
/// thinned away).
fn thin(all: &[Point], start: i64, end: i64) -> Vec<Point> {
    if all.len() <= MAX_POINTS {
        return all.to_vec();
    }
    let bucket = ((end - start) / MAX_POINTS as i64).max(1);
    let mut out: Vec<(i64, Point)> = Vec::new();
    for &(t, p) in all {
        let k = (t - start).div_euclid(bucket);
        match out.last_mut() {
            Some((last, q)) if *last == k => *q = (t, if q.1.is_none() { None } else { p }),
            _ => out.push((k, (t, p))),
        }
    }
    out.into_iter().map(|(_, p)| p).collect()
}

/// The usual time between consecutive windows (the median), to tell a missing stretch (no
/// windows: an outage) from the next window.
fn spacing(all: &[Point]) -> i64 {
    let mut d: Vec<i64> = all.windows(2).map(|w| w[1].0 - w[0].0).filter(|d| *d > 0).collect();
    d.sort_unstable();
    d.get(d.len() / 2).copied().unwrap_or(i64::MAX)
}

/// The chart of one series: a row per dimension.
fn chart(i: usize, series: &Series, start: i64, end: i64) -> String {
    let (left, width, row_h, gap, top) = (120.0, 720.0, 44.0, 14.0, 10.0);
    let span = (end - start).max(1) as f64;
    let x = |t: i64| left + (t - start) as f64 / span * width;
    let height = top + (row_h + gap) * DIMENSIONS.len() as f64 + 24.0;
    let mut desc = Vec::new();
    let mut body = String::new();
    for (r, d) in DIMENSIONS.iter().enumerate() {
        let y0 = top + (row_h + gap) * r as f64;
        let y = |b: i32| y0 + row_h - f64::from(b) / 4.0 * row_h;
        let _ = write!(
            body,
            "<text x=\"4\" y=\"{:.1}\" font-size=\"12\" fill=\"#111\">{d}</text><rect x=\"{left}\" y=\"{y0:.1}\" width=\"{width}\" height=\"{row_h}\" fill=\"none\" stroke=\"#ccc\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" fill=\"#333\">4</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" fill=\"#333\">0</text>",
            y0 + row_h / 2.0 + 4.0,
            left - 10.0,
            y0 + 8.0,
            left - 10.0,
            y0 + row_h
        );
        let all = points(series, d);
        let pts = thin(&all, start, end);
        // A stretch without windows longer than this is a gap too.
        let max_step = spacing(&all).saturating_mul(5).max(spacing(&pts).saturating_mul(2));
        // Runs of consecutive banded points: one shaded interval and one line each.
        let mut runs: Vec<Vec<(i64, Bands)>> = Vec::new();
        let mut open = false;
        let mut previous: Option<i64> = None;
        for (t, p) in &pts {
            if previous.is_some_and(|q| t - q > max_step) {
                open = false;
            }
            previous = Some(*t);
            match p {
                Some(p) => {
                    if !open {
                        runs.push(Vec::new());
                        open = true;
                    }
                    runs.last_mut().expect("pushed").push((*t, *p));
                }
                None => open = false,
            }
        }
        for run in runs.iter().filter(|r| r.len() > 1) {
            let upper: Vec<String> = run.iter().map(|(t, (_, _, hi))| format!("{:.1},{:.1}", x(*t), y(*hi))).collect();
            let lower: Vec<String> = run.iter().rev().map(|(t, (_, lo, _))| format!("{:.1},{:.1}", x(*t), y(*lo))).collect();
            let line: Vec<String> = run.iter().map(|(t, (b, _, _))| format!("{:.1},{:.1}", x(*t), y(*b))).collect();
            let _ = write!(
                body,
                "<polygon class=\"interval\" points=\"{} {}\" fill=\"#9ecae1\" fill-opacity=\"0.6\"/><polyline class=\"band\" points=\"{}\" fill=\"none\" stroke=\"#08519c\" stroke-width=\"2\"/>",
                upper.join(" "),
                lower.join(" "),
                line.join(" ")
            );
        }
        // One window alone: its interval as a bar, its band as a dot.
        for run in runs.iter().filter(|r| r.len() == 1) {
            let (t, (b, lo, hi)) = run[0];
            let _ = write!(
                body,
                "<line class=\"interval\" x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"#9ecae1\" stroke-width=\"6\"/>\
                 <circle class=\"band\" cx=\"{0:.1}\" cy=\"{3:.1}\" r=\"2.5\" fill=\"#08519c\"/>",
                x(t),
                y(hi),
                y(lo),
                y(b)
            );
        }
        // The words say what every window said, not only the drawn ones.
        let banded: Vec<i32> = all.iter().filter_map(|(_, p)| p.map(|p| p.0)).collect();
        let na = all.iter().filter(|(_, p)| p.is_none()).count();
        desc.push(match (all.last(), banded.iter().min(), banded.iter().max()) {
            (Some((_, Some((b, lo, hi)))), Some(mn), Some(mx)) => {
                format!("{d}: band {b} [{lo}, {hi}] at the newest window, between {mn} and {mx} over the period{}", na_note(na))
            }
            (Some((_, None)), Some(mn), Some(mx)) => format!("{d}: N/A at the newest window, between {mn} and {mx} before{}", na_note(na)),
            _ => format!("{d}: N/A throughout"),
        });
    }
    let title = format!("Bands over time: version {} · {}", series.version, series.source.as_str());
    format!(
        "<figure><svg id=\"chart-{i}\" class=\"bands-chart\" role=\"img\" aria-labelledby=\"chart-{i}-title\" aria-describedby=\"chart-{i}-desc\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" xmlns=\"http://www.w3.org/2000/svg\">\
         <title id=\"chart-{i}-title\">{}</title><desc id=\"chart-{i}-desc\">{} windows. {}.</desc>{body}\
         <text x=\"{left}\" y=\"{:.1}\" font-size=\"11\" fill=\"#111\">{}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#111\" text-anchor=\"end\">{}</text></svg>\
         <figcaption>The band (line) and its interval (shaded) per dimension; gaps are N/A windows or stretches without windows.</figcaption></figure>",
        esc(&title),
        series.profiles.len(),
        esc(&desc.join("; ")),
        height - 6.0,
        esc(&octant_report::render::rfc3339(start)),
        left + width,
        height - 6.0,
        esc(&octant_report::render::rfc3339(end - 1)),
        w = left + width + 20.0,
    )
}

fn na_note(n: usize) -> String {
    if n == 0 { String::new() } else { format!(" (N/A in {n} windows)") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use octant_contracts::DimensionBand;

    fn profile(end: i64, safety: Option<i32>) -> DimensionProfile {
        DimensionProfile {
            profile_id: format!("p{end}"),
            system_id: "s<1>".into(),
            system_version: "1.0.0".into(),
            source: Source::Production,
            window_start: end - 600_000,
            window_end: end,
            dimensions: vec![DimensionBand {
                dimension: "safety".into(),
                band: safety,
                band_low: safety.map(|b| (b - 1).max(0)),
                band_high: safety,
                na_reason: if safety.is_none() { Some("too few units".into()) } else { None },
                capped_by: vec![],
                instruments: vec![],
            }],
            vetoes: vec![],
            unsuitable: safety == Some(0),
            catalogue_version: "c".into(),
        }
    }

    #[test]
    fn the_chart_draws_bands_intervals_and_gaps_and_says_so_in_words() {
        let series = Series {
            version: "1.0.0".into(),
            source: Source::Production,
            profiles: vec![profile(60_000, Some(3)), profile(120_000, None), profile(180_000, Some(2)), profile(240_000, Some(0))],
        };
        let svg = chart(0, &series, 0, 300_000);
        assert_eq!(svg.matches("<polyline class=\"band\"").count(), 1, "the N/A window splits the line: {svg}");
        assert_eq!(svg.matches("<circle class=\"band\"").count(), 1, "the window alone before it is a dot");
        assert_eq!(svg.matches("class=\"interval\"").count(), 2);
        assert!(svg.contains("safety: band 0 [0, 0] at the newest window, between 0 and 3 over the period (N/A in 1 windows)"), "{svg}");
        assert!(svg.contains("capability: N/A throughout"));
        let v = SystemView {
            system: "s<1>".into(),
            days: 7,
            start: 0,
            end: 300_000,
            series: vec![series],
            metrics: vec![],
            alerts: vec![],
            alerts_page: 0,
            alerts_per_page: 100,
            alerts_total: 0,
        };
        let package = Package {
            version: "1.0.0".into(),
            source: Source::Production,
            period: "24h".into(),
            generated_at: 0,
            unsuitable: true,
            meta: None,
        };
        let html = to_html(&v, &[package]);
        assert!(html.contains("<h1>System s&lt;1&gt;</h1>") && !html.contains("s<1>"), "escaped");
        assert!(html.contains("href=\"/evidence/s%3C1%3E/1.0.0/production/24h/profile.json\""), "{html}");
        assert!(html.contains("UNSUITABLE at the newest window"));
        assert!(!html.contains("id=\"evaluators\""), "no meta-evaluation, no section");
        // The evaluators' section: tables with captions and header cells, names escaped.
        let meta = octant_report::meta_evaluation::MetaEvaluation {
            raters: vec![octant_report::meta_evaluation::RaterReport {
                name: "<b>quality</b>".into(),
                items: 300,
                humans: 3,
                human_alpha: Some(0.712),
                judge_human: Some(octant_report::meta_evaluation::KappaReport {
                    kappa: 0.64,
                    lo: 0.55,
                    hi: 0.73,
                    items: 300,
                    band: Some(3),
                    band_low: Some(2),
                    band_high: Some(3),
                }),
                retest_instability: Some(0.05),
                retest_band: Some(3),
                ..Default::default()
            }],
            pairwise: vec![octant_report::meta_evaluation::PairwiseReport {
                name: "quality_pairwise".into(),
                verdicts: 600,
                win_rate: Some(0.31),
                position_inconsistency: Some(0.2),
                position_band: Some(0),
                verbosity_bias: Some(0.16),
                verbosity_interval: Some([0.1, 0.22]),
                verbosity_band: Some(0),
                ..Default::default()
            }],
            ..Default::default()
        };
        let package = Package {
            version: "2.0.0".into(),
            source: Source::Evaluation,
            period: "7d".into(),
            generated_at: 0,
            unsuitable: false,
            meta: Some(meta),
        };
        let html = to_html(&v, &[package]);
        assert!(html.contains("<h2 id=\"evaluators\">"), "{html}");
        assert!(html.contains("<caption>Raters, version 2.0.0 · evaluation · period 7d</caption>"), "{html}");
        assert!(html.contains("<th scope=\"row\">&lt;b&gt;quality&lt;/b&gt;</th>") && !html.contains("<b>quality"), "escaped");
        assert!(html.contains("<td>0.640 [0.550, 0.730] (300 items)</td><td>3</td>"), "{html}");
        assert!(html.contains("<td>0.160 [0.100, 0.220] (0)</td>") && html.contains("no pool declared"), "{html}");
        // Thinning keeps the newest point.
        let many = Series {
            version: "1".into(),
            source: Source::Production,
            profiles: (0..1000).map(|i| profile(i * 1000, Some((i % 5) as i32))).collect(),
        };
        let all = points(&many, "safety");
        let p = thin(&all, 0, 1_000_000);
        assert!(p.len() <= MAX_POINTS + 1 && p.last().unwrap().0 == 999_000, "{}", p.len());
        // An N/A window among thousands stays visible, and the words count every window.
        let mut gappy = many.clone();
        gappy.profiles[500] = profile(500_000, None);
        let thinned = thin(&points(&gappy, "safety"), 0, 1_000_000);
        assert_eq!(thinned.iter().filter(|(_, p)| p.is_none()).count(), 1, "the bucket with the N/A window is N/A");
        let svg = chart(0, &gappy, 0, 1_000_000);
        assert!(svg.contains("(N/A in 1 windows)") && svg.matches("<polyline class=\"band\"").count() == 2, "{svg}");
        // A stretch without windows (an outage) breaks the line too.
        let outage = Series {
            version: "1".into(),
            source: Source::Production,
            profiles: (0..10).chain(40..50).map(|i| profile(i * 60_000, Some(3))).collect(),
        };
        let svg = chart(0, &outage, 0, 50 * 60_000);
        assert_eq!(svg.matches("<polyline class=\"band\"").count(), 2, "{svg}");
    }

    #[test]
    fn alert_pages_say_which_records_and_link_newer_and_older() {
        use octant_contracts::{AlertStatus, Severity};
        let alerts = |n: usize| (0..n).map(|i| crate::alert::tests::record(AlertStatus::Firing, Severity::Warning, i as i64)).collect();
        let view = |page: usize, per: usize, shown: usize, total: usize| SystemView {
            system: "org/s".into(),
            days: 30,
            start: 0,
            end: 1,
            series: vec![],
            metrics: vec![],
            alerts: alerts(shown),
            alerts_page: page,
            alerts_per_page: per,
            alerts_total: total,
        };
        let href = |page: usize, per: &str| format!("href=\"/systems/org%2Fs?days=30&amp;alerts_page={page}{per}#alerts-of-the-period\"");
        // One page holds them all: no navigation.
        assert_eq!(alert_pages(&view(0, ALERTS_PER_PAGE, 3, 3)), "");
        let html = to_html(&view(0, ALERTS_PER_PAGE, 3, 3), &[]);
        assert!(html.contains("Alerts of the period (3)") && html.matches("<tr><td>").count() == 3, "{html}");
        // The newest page of 250: where it lies, and the older page.
        let p = alert_pages(&view(0, ALERTS_PER_PAGE, 100, 250));
        assert!(p.contains("Records 1–100 of 250, newest first.") && p.contains(&format!("rel=\"next\" {}", href(1, ""))), "{p}");
        assert!(!p.contains("rel=\"prev\""), "{p}");
        // The last page: newer and newest, no older; a page size asked for is kept in the links.
        let p = alert_pages(&view(2, 2, 1, 5));
        assert!(p.contains("Records 5–5 of 5") && p.contains(&format!("rel=\"prev\" {}", href(1, "&amp;alerts_per_page=2"))), "{p}");
        assert!(p.contains(&format!("rel=\"first\" {}", href(0, "&amp;alerts_per_page=2"))) && !p.contains("rel=\"next\""), "{p}");
        // Past the end: said, with a way back to the last page.
        let html = to_html(&view(40, 2, 0, 5), &[]);
        assert!(html.contains("No records on this page: the period has 5.") && html.contains("Past the last record."), "{html}");
        assert!(html.contains(&format!("rel=\"prev\" {}", href(2, "&amp;alerts_per_page=2"))), "{html}");
        assert!(to_html(&view(0, ALERTS_PER_PAGE, 0, 0), &[]).contains("Alerts of the period (0)</h2><p>None.</p>"));
    }

    /// The alerts query on a real lake: a record delivered twice is one row, the count agrees
    /// with the rows, and pages of two walk the records newest first without a gap or a repeat.
    #[tokio::test]
    async fn alert_pages_read_from_the_lake_once_each_newest_first() {
        use octant_contracts::{AlertStatus, Severity};
        let mut records = Vec::new();
        for i in 0..5i64 {
            let mut a = crate::alert::tests::record(AlertStatus::Firing, Severity::Warning, 1_000 * i);
            a.alert_id = format!("a{i}");
            a.window_end = Some(600_000 * (i + 1));
            records.push(a.clone());
            if i == 2 {
                records.push(a); // delivered twice (at-least-once)
            }
        }
        let dir = std::env::temp_dir().join(format!("octant-profiler-alert-pages-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        crate::alert::tests::lake_of(&dir, "alerts", &records);
        let ctx = octant_lake::reader::open(&dir).await.unwrap();
        let mut seen = Vec::new();
        for page in 0..4 {
            let (alerts, total) = alerts_of(&ctx, "s", 0, AlertsPage { page, per_page: 2 }).await.unwrap();
            assert_eq!(total, 5, "page {page}");
            assert!(alerts.iter().all(|a| a.system_id == "s"));
            seen.extend(alerts.into_iter().map(|a| a.alert_id));
        }
        assert_eq!(seen, ["a4", "a3", "a2", "a1", "a0"], "newest first, each once, nothing past the end");
        // The period's start filters on the record's end, window or start.
        let (alerts, total) = alerts_of(&ctx, "s", 1_800_000, AlertsPage { page: 0, per_page: 100 }).await.unwrap();
        assert_eq!((alerts.len(), total), (3, 3));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
