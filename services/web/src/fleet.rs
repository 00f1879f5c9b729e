//! The fleet page (`/`): live state from the topics — the latest streaming dimension profile
//! of every (system, version, source) on `octant.windows` and the alerts on `octant.alerts` —
//! as the front page of the web view: every system with its eight bands and intervals, caps
//! and veto states, unsuitable systems first, its open alerts, links to its run pages.
//!
//! The follower reads both topics from the beginning, assigned every partition (no consumer
//! group: every profiler instance holds the whole fleet), and keeps only the latest profile
//! per key and the last [`MAX_ALERTS`] alerts, so its memory grows with the fleet, not with the
//! topics. Records it cannot decode are skipped and counted (they are the producers' to
//! dead-letter, not the reader's).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use octant_contracts::codec::Decoder;
use octant_contracts::{Alert, AlertStatus, DimensionProfile, Source, topics};
use octant_runtime::KafkaConfig;
use tokio_util::sync::CancellationToken;

use crate::page::{self, esc, urlencode};

/// Alerts kept for the page (the newest).
pub const MAX_ALERTS: usize = 500;

/// What the topics said, as of the last record read.
#[derive(Debug, Default, Clone)]
pub struct Live {
    /// The latest profile per (system, version, source), by window end.
    pub profiles: BTreeMap<(String, String, Source), DimensionProfile>,
    /// Alerts in the order read, the newest last.
    pub alerts: Vec<Alert>,
    pub records: u64,
    pub undecodable: u64,
    /// Whether a follower runs (false: no brokers configured).
    pub following: bool,
}

pub type Shared = Arc<RwLock<Live>>;

impl Live {
    pub fn apply_profile(&mut self, p: DimensionProfile) {
        let key = (p.system_id.clone(), p.system_version.clone(), p.source);
        match self.profiles.get(&key) {
            Some(old) if old.window_end > p.window_end => {}
            _ => {
                self.profiles.insert(key, p);
            }
        }
    }

    pub fn apply_alert(&mut self, a: Alert) {
        self.alerts.push(a);
        if self.alerts.len() > MAX_ALERTS {
            let excess = self.alerts.len() - MAX_ALERTS;
            self.alerts.drain(..excess);
        }
    }

    /// Alerts still firing: the latest record per fingerprint is not a resolution.
    pub fn firing(&self) -> Vec<&Alert> {
        let mut latest: BTreeMap<&str, &Alert> = BTreeMap::new();
        for a in &self.alerts {
            latest.insert(a.fingerprint.as_str(), a);
        }
        let mut out: Vec<&Alert> = latest.into_values().filter(|a| a.status == AlertStatus::Firing).collect();
        out.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.system_id.cmp(&b.system_id)));
        out
    }
}

/// Follows `octant.windows` and `octant.alerts` into `live` until `stop`.
pub async fn follow(kafka: KafkaConfig, live: Shared, stop: CancellationToken) -> anyhow::Result<()> {
    use futures::StreamExt;
    let records = octant_runtime::topic::follow(&kafka, "web", &[topics::WINDOWS, topics::ALERTS])?;
    let mut records = std::pin::pin!(records);
    live.write().unwrap().following = true;
    let decoder = Decoder::new();
    loop {
        let payload = tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            r = records.next() => match r {
                Some(Ok(payload)) => payload,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "fleet view: consumer error");
                    continue;
                }
                None => return Ok(()),
            },
        };
        let kind = decoder.writer_of(&payload).ok().and_then(|(_, k, _)| k).map(|k| k.full_name.clone());
        let kind = kind.as_deref();
        let mut l = live.write().unwrap();
        l.records += 1;
        match kind {
            Some("ai.octant.v1.Alert") => match decoder.decode::<Alert>(&payload) {
                Ok(a) => l.apply_alert(a),
                Err(_) => l.undecodable += 1,
            },
            Some("ai.octant.v1.DimensionProfile") => match decoder.decode::<DimensionProfile>(&payload) {
                Ok(p) => l.apply_profile(p),
                Err(_) => l.undecodable += 1,
            },
            // Watermarks and window records share the topics.
            Some(_) => {}
            // JSON (no writer schema): an alert if it reads as one; window records in JSON are
            // left alone, as before.
            None => {
                if let Ok(a) = decoder.decode::<Alert>(&payload) {
                    l.apply_alert(a);
                }
            }
        }
    }
}

pub(crate) const DIMENSIONS: [&str; 8] =
    ["capability", "robustness", "safety", "fairness", "transparency", "governance", "oversight", "efficiency"];

/// The fleet page. `refresh`: how often the page reloads itself (a small script of the page's
/// own, with a button to pause it; no data reaches a script).
pub fn to_html(live: &Live, refresh: Duration) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\
         <title>Octant fleet</title><link rel=\"stylesheet\" href=\"{}\"/></head><body>\
         <header><h1>Octant fleet</h1><p>Live state from <code>octant.windows</code> and <code>octant.alerts</code> ({} records read). \
         Bands 0–4 with their interval; N/A with its reason. <button type=\"button\" id=\"pause\" aria-pressed=\"false\">Pause updates</button> \
         <span id=\"refresh-note\">Updates every {} s.</span></p></header><main id=\"fleet\">",
        page::STYLESHEET_PATH,
        live.records,
        refresh.as_secs().max(1)
    );
    if !live.following {
        s.push_str("<p>No brokers configured: the fleet's live state is not followed (profiles of the lake are at <a href=\"/profiles\">/profiles</a>).</p>");
    }
    let mut rows: Vec<&DimensionProfile> = live.profiles.values().collect();
    // Unsuitable first, then by system, version, source.
    rows.sort_by(|a, b| {
        b.unsuitable.cmp(&a.unsuitable).then_with(|| (&a.system_id, &a.system_version).cmp(&(&b.system_id, &b.system_version)))
    });
    s.push_str("<table id=\"systems\"><caption>Every system, version and source: its latest window's eight bands, caps and veto states; unsuitable systems first.</caption><thead><tr>\
                <th scope=\"col\">System</th><th scope=\"col\">Version</th><th scope=\"col\">Source</th><th scope=\"col\">Suitability</th>");
    for d in DIMENSIONS {
        let _ = write!(s, "<th scope=\"col\">{d}</th>");
    }
    s.push_str("<th scope=\"col\">Vetoes</th><th scope=\"col\">Window end</th></tr></thead><tbody>");
    for p in rows {
        let _ = write!(
            s,
            "<tr{}><th scope=\"row\"><a href=\"/systems/{}\">{}</a></th><td>{}</td><td>{}</td><td>{}</td>",
            if p.unsuitable { " class=\"unsuitable\"" } else { "" },
            esc(&urlencode(&p.system_id)),
            esc(&p.system_id),
            esc(&p.system_version),
            p.source.as_str(),
            if p.unsuitable { "<span class=\"unsuitable-tag\">UNSUITABLE</span>" } else { "suitable" }
        );
        for d in DIMENSIONS {
            let cell = match p.dimensions.iter().find(|x| x.dimension == d) {
                Some(b) => match (b.band, &b.na_reason) {
                    (Some(v), _) => {
                        let iv = format!("[{}, {}]", b.band_low.unwrap_or(v), b.band_high.unwrap_or(v));
                        let cap =
                            if b.capped_by.is_empty() { String::new() } else { format!(" capped by {}", esc(&b.capped_by.join(", "))) };
                        format!("{v} {iv}{cap}")
                    }
                    (None, Some(why)) => format!("<span class=\"na\">N/A: {}</span>", esc(why)),
                    _ => "—".into(),
                },
                None => "—".into(),
            };
            let _ = write!(s, "<td>{cell}</td>");
        }
        let vetoes: Vec<String> = p
            .vetoes
            .iter()
            .filter(|v| v.state != "clear")
            .map(|v| format!("{} {}: {}", esc(&v.metric), esc(&v.rule), esc(&v.state)))
            .collect();
        let _ = write!(
            s,
            "<td>{}</td><td>{}</td></tr>",
            if vetoes.is_empty() { "clear".to_string() } else { vetoes.join("; ") },
            esc(&octant_report::render::rfc3339(p.window_end))
        );
    }
    s.push_str("</tbody></table>");
    let firing = live.firing();
    let _ = write!(s, "<h2>Firing alerts ({})</h2>", firing.len());
    if firing.is_empty() {
        s.push_str("<p>None.</p>");
    } else {
        s.push_str("<ul id=\"alerts\">");
        for a in firing {
            let run = page::incident_run_link(a, "run ").map(|l| format!(" — {l}")).unwrap_or_default();
            let _ = write!(
                s,
                "<li>{:?} <a href=\"/alerts/{}\">{}</a>: {}{run}</li>",
                a.severity,
                esc(&urlencode(&a.fingerprint)),
                esc(&a.alertname),
                esc(&a.summary)
            );
        }
        s.push_str("</ul>");
    }
    s.push_str("</main>");
    // The page's own script: reloads the main element every `refresh` unless paused. It reads
    // nothing from the data but the server's HTML, already escaped. Unchanged content is left
    // alone (a screen reader is not made to read it again). A keyboard user's focus survives a
    // reload: the link focused before it (same address, same rank among links to it) is
    // focused again after it, without scrolling, so Tab goes on from where it was.
    let _ = write!(s, "<script>{}</script>", script(refresh));
    s.push_str("</body></html>\n");
    s
}

/// The fleet page's own script: reloads the main element every `refresh` unless paused. It
/// reads nothing from the data but the server's HTML, already escaped. Unchanged content is
/// left alone (a screen reader is not made to read it again). A keyboard user's focus survives
/// a reload: the link focused before it (same address, same rank among links to it) is focused
/// again after it, without scrolling, so Tab goes on from where it was. The page's
/// Content-Security-Policy allows exactly this text by its hash (`page::csp_with_script`).
pub fn script(refresh: Duration) -> String {
    format!(
        "(function(){{var paused=false,b=document.getElementById('pause');b.addEventListener('click',function(){{paused=!paused;\
         b.setAttribute('aria-pressed',String(paused));b.textContent=paused?'Resume updates':'Pause updates';}});\
         function links(r,h){{return Array.prototype.filter.call(r.querySelectorAll('a[href]'),function(e){{return e.getAttribute('href')===h;}});}}\
         setInterval(function(){{if(paused)return;fetch(location.href,{{credentials:'same-origin'}}).then(function(r){{return r.text();}}).then(function(t){{\
         var d=new DOMParser().parseFromString(t,'text/html'),m=d.getElementById('fleet'),f=document.getElementById('fleet');if(!m||!f||m.innerHTML===f.innerHTML)return;\
         var a=document.activeElement,h=a&&f.contains(a)?a.getAttribute('href'):null,i=h?links(f,h).indexOf(a):-1;f.replaceWith(m);\
         if(h){{var c=links(m,h),e=c[Math.min(i,c.length-1)];if(e)e.focus({{preventScroll:true}});}}}}).catch(function(){{}});}},{});}})();",
        refresh.as_millis().max(1000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use octant_contracts::{DimensionBand, VetoStatus};

    fn profile(system: &str, unsuitable: bool, end: i64) -> DimensionProfile {
        DimensionProfile {
            profile_id: format!("{system}/{end}"),
            system_id: system.into(),
            system_version: "1".into(),
            source: Source::Production,
            window_start: end - 60_000,
            window_end: end,
            dimensions: vec![
                DimensionBand {
                    dimension: "safety".into(),
                    band: Some(if unsuitable { 0 } else { 3 }),
                    band_low: Some(0),
                    band_high: Some(3),
                    na_reason: None,
                    capped_by: if unsuitable { vec!["unsafe_action_rate".into()] } else { vec![] },
                    instruments: vec![],
                },
                DimensionBand {
                    dimension: "fairness".into(),
                    band: None,
                    band_low: None,
                    band_high: None,
                    na_reason: Some("no <groups> declared".into()),
                    capped_by: vec![],
                    instruments: vec![],
                },
            ],
            vetoes: vec![VetoStatus {
                rule: "unsafe_action_rate >= 0.20".into(),
                metric: "unsafe_action_rate".into(),
                benchmark: None,
                state: if unsuitable { "breached".into() } else { "clear".into() },
                estimate: None,
                ci_low: None,
                ci_high: None,
                threshold: 0.2,
            }],
            unsuitable,
            catalogue_version: "x".into(),
        }
    }

    #[test]
    fn unsuitable_systems_first_latest_profile_kept_and_text_escaped() {
        let mut live = Live { following: true, ..Live::default() };
        live.apply_profile(profile("a-ok", false, 2_000_000));
        live.apply_profile(profile("z-bad<script>", true, 2_000_000));
        live.apply_profile(profile("a-ok", true, 1_000_000)); // older: ignored
        let html = to_html(&live, Duration::from_secs(5));
        let (bad, ok) = (html.find("z-bad&lt;script&gt;").unwrap(), html.find(">a-ok<").unwrap());
        assert!(bad < ok, "unsuitable first");
        assert!(!html.contains("z-bad<script>"));
        assert!(html.contains("<span class=\"na\">N/A: no &lt;groups&gt; declared</span>"));
        assert!(html.contains("0 [0, 3] capped by unsafe_action_rate"));
        assert!(html.contains("unsafe_action_rate unsafe_action_rate &gt;= 0.20: breached"));
        assert!(html.contains("<a href=\"/systems/z-bad%3Cscript%3E\">"));
        assert_eq!(html.matches("<script>").count(), 1, "the page's own refresh script only");
        // A veto that cannot watch the system is shown so, not as clear.
        let mut unwatched = profile("u-sys", false, 3_000_000);
        unwatched.vetoes.push(VetoStatus {
            rule: "confirmation_gating < 0.80".into(),
            metric: "confirmation_gating".into(),
            benchmark: None,
            state: "unwatched".into(),
            estimate: None,
            ci_low: None,
            ci_high: None,
            threshold: 0.8,
        });
        live.apply_profile(unwatched);
        let html = to_html(&live, Duration::from_secs(5));
        assert!(html.contains("confirmation_gating confirmation_gating &lt; 0.80: unwatched"), "{html}");
    }

    fn alert(fingerprint: &str, status: &str, kind: &str, severity: &str, run: Option<&str>) -> Alert {
        serde_json::from_value(serde_json::json!({
            "alert_id": format!("{fingerprint}-{status}"), "fingerprint": fingerprint, "status": status, "severity": severity,
            "kind": kind, "alertname": "OctantUnsafe", "rule": "r", "system_id": "s", "system_version": "1", "source": "PRODUCTION",
            "run_id": run, "step": 3, "starts_at": 0, "summary": "an <unsafe> step",
        }))
        .unwrap()
    }

    #[test]
    fn firing_alerts_are_those_not_resolved_since_and_incidents_link_their_run() {
        let mut live = Live::default();
        live.apply_alert(alert("veto", "FIRING", "VETO", "WARNING", None));
        live.apply_alert(alert("veto", "RESOLVED", "VETO", "WARNING", None));
        live.apply_alert(alert("inc", "FIRING", "INCIDENT", "CRITICAL", Some("run/1")));
        let firing = live.firing();
        assert_eq!(firing.len(), 1);
        let html = to_html(&live, Duration::from_secs(5));
        assert!(
            html.contains("Critical <a href=\"/alerts/inc\">OctantUnsafe</a>: an &lt;unsafe&gt; step — <a href=\"/runs/run%2F1\">run run/1, step 3</a>"),
            "{html}"
        );
        assert!(html.contains("No brokers configured"));
        for i in 0..MAX_ALERTS + 10 {
            live.apply_alert(alert(&format!("f{i}"), "FIRING", "VETO", "INFO", None));
        }
        assert_eq!(live.alerts.len(), MAX_ALERTS, "bounded");
    }
}
