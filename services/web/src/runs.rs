//! One run as an incident responder reads it: its trajectory from the lake (steps, tools,
//! impact, confirmations, violations, interventions, the agent of every event), the unsafe
//! steps marked, and the observations the scorer made of it. `octant runs show RUN_ID` prints
//! it; the web view's run page is built on the same [`RunView`].
//!
//! Arguments and results are shown as the lake stores them: the lake writer has already
//! applied the configured redaction. Text from the data never reaches a terminal raw: control
//! characters (escape sequences included) are shown escaped.

use crate::query::{self, wire};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use octant_contracts::{EventKind, TrajectoryEvent};
use octant_report::sql::lit;
use serde::Serialize;

/// One run, from the lake.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunView {
    pub run_id: String,
    pub system: String,
    pub version: String,
    pub source: String,
    pub task: Option<String>,
    pub attempt: Option<i32>,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    /// `SUCCESS`, `FAILURE`, … from the run end; `None` while the run is open (or abandoned).
    pub outcome: Option<String>,
    /// Every agent that acted, in order of first appearance (one lane each).
    pub agents: Vec<String>,
    pub events: Vec<EventView>,
    pub observations: Vec<ObservationView>,
}

/// One event of the run, in sequence order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventView {
    pub sequence: i64,
    pub event_time: i64,
    pub agent: Option<String>,
    /// `RUN_STARTED`, `STEP`, `INTERVENTION`, `RUN_ENDED`.
    pub kind: String,
    /// For a step: `TOOL_CALL`, `MODEL_CALL`, … ; for an intervention: `STOP`, `OVERRIDE`, ….
    pub detail: Option<String>,
    pub tool: Option<String>,
    /// The permission the call ran under, as logged.
    pub permission: Option<String>,
    pub arguments: Option<String>,
    pub impact: Option<String>,
    pub confirmed: Option<bool>,
    pub result_status: Option<String>,
    pub violations: Vec<String>,
    /// A step with a safety violation (one not a declared policy's): what
    /// `unsafe_action_rate` counts.
    pub unsafe_: bool,
}

/// One observation the scorer made of the run.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ObservationView {
    pub metric: String,
    #[serde(default)]
    pub step: Option<i64>,
    pub value: f64,
    pub weight: f64,
}

/// The run `run_id` from the lake, or `None` when the lake holds none of its events.
pub async fn load(ctx: &SessionContext, run_id: &str, classes: &octant_engine::config::ViolationClasses) -> Result<Option<RunView>> {
    let sql = format!(
        "SELECT event_id, run_id, system, source, agent_id, CAST(event_time AS BIGINT) AS event_time, sequence, kind, \
                run_started, step, intervention, run_ended \
         FROM trajectory_events WHERE run_id = {} ORDER BY sequence, event_id",
        lit(run_id)
    );
    let mut events: Vec<TrajectoryEvent> = Vec::new();
    for e in query::rows::<TrajectoryEvent>(ctx, &sql).await? {
        // The lake may hold a record twice (at-least-once delivery): one per event id.
        if !events.iter().any(|x| x.event_id == e.event_id) {
            events.push(e);
        }
    }
    let Some(first) = events.first() else { return Ok(None) };
    let (system, version, source) = (first.system.id.clone(), first.system.version.clone(), wire(&first.source));
    let start = events.iter().find_map(|e| e.run_started.as_ref().map(|s| (s, e.event_time)));
    let end = events.iter().find_map(|e| e.run_ended.as_ref().map(|s| (s, e.event_time)));
    let mut agents: Vec<String> = Vec::new();
    for a in events.iter().filter_map(|e| e.agent_id.as_ref()) {
        if !agents.contains(a) {
            agents.push(a.clone());
        }
    }
    let views = events
        .iter()
        .map(|e| {
            let step = e.step.as_ref();
            EventView {
                sequence: e.sequence,
                event_time: e.event_time,
                agent: e.agent_id.clone(),
                kind: wire(&e.kind),
                // A step that read a prompt-injection attempt says so where a responder reads
                // what the step was.
                detail: step
                    .map(|s| {
                        let kind = wire(&s.step_kind);
                        if s.injection_attempt == Some(true) { format!("{kind} (read a prompt-injection attempt)") } else { kind }
                    })
                    .or_else(|| e.intervention.as_ref().map(|i| wire(&i.intervention_kind))),
                tool: step.and_then(|s| s.tool_name.clone()),
                permission: step.and_then(|s| s.permission.clone()),
                arguments: step.and_then(|s| s.arguments.clone()),
                impact: step.map(|s| wire(&s.impact)),
                confirmed: step.map(|s| s.confirmed),
                result_status: step.and_then(|s| s.result_status.map(|r| wire(&r))),
                violations: step.map(|s| s.violations.clone()).unwrap_or_default(),
                unsafe_: e.kind == EventKind::Step && step.is_some_and(|s| classes.any_safety(&s.violations)),
            }
        })
        .collect();
    let sql = format!(
        "SELECT DISTINCT observation_id, metric, step, value, weight FROM observations WHERE run_id = {} ORDER BY metric, step",
        lit(run_id)
    );
    let observations: Vec<ObservationView> = query::rows(ctx, &sql).await?;
    Ok(Some(RunView {
        run_id: run_id.to_string(),
        system,
        version,
        source,
        task: start.and_then(|(s, _)| s.task_id.clone()),
        attempt: start.map(|(s, _)| s.attempt),
        started_at: start.map(|(_, t)| t),
        ended_at: end.map(|(_, t)| t),
        outcome: end.map(|(e, _)| wire(&e.outcome)),
        agents,
        events: views,
        observations,
    }))
}

/// A handoff: the run passes from one agent to another between two consecutive events that
/// name an agent (the trajectory has no handoff event of its own: a change of acting agent is
/// the handoff).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Handoff {
    pub from_sequence: i64,
    pub to_sequence: i64,
    pub from: String,
    pub to: String,
}

impl RunView {
    /// Every handoff of the run, in order.
    pub fn handoffs(&self) -> Vec<Handoff> {
        let acting: Vec<(&EventView, &String)> = self.events.iter().filter_map(|e| e.agent.as_ref().map(|a| (e, a))).collect();
        acting
            .windows(2)
            .filter(|w| w[0].1 != w[1].1)
            .map(|w| Handoff { from_sequence: w[0].0.sequence, to_sequence: w[1].0.sequence, from: w[0].1.clone(), to: w[1].1.clone() })
            .collect()
    }
}

/// At most this many handoffs are named in the text alternative and the terminal header.
const HANDOFFS_NAMED: usize = 20;

fn handoff_text(h: &[Handoff], name: impl Fn(&str) -> String) -> String {
    let mut parts: Vec<String> = h
        .iter()
        .take(HANDOFFS_NAMED)
        .map(|h| format!("{} → {} (seq {} → {})", name(&h.from), name(&h.to), h.from_sequence, h.to_sequence))
        .collect();
    if h.len() > HANDOFFS_NAMED {
        parts.push(format!("and {} more", h.len() - HANDOFFS_NAMED));
    }
    parts.join(", ")
}

/// Text from the data, safe for a terminal: control characters (ESC of an escape sequence,
/// carriage returns, C1 controls) shown escaped, and cut to `max` characters.
pub fn terminal_safe(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The run as text: a header, the timeline (one line per event, the agent's lane named, unsafe
/// steps marked `!!`), and the observations.
pub fn to_text(r: &RunView) -> String {
    let safe = |s: &str| terminal_safe(s, 60);
    let opt = |s: &Option<String>| s.as_deref().map(safe).unwrap_or_else(|| "—".into());
    let mut s = format!(
        "run {} · {} {} · {} · task {} (attempt {})\n",
        safe(&r.run_id),
        safe(&r.system),
        safe(&r.version),
        r.source,
        opt(&r.task),
        r.attempt.map(|a| a.to_string()).unwrap_or_else(|| "—".into())
    );
    s.push_str(&format!(
        "started {} · ended {} · outcome {}\n",
        r.started_at.map(octant_report::render::rfc3339).unwrap_or_else(|| "—".into()),
        r.ended_at.map(octant_report::render::rfc3339).unwrap_or_else(|| "— (open or abandoned)".into()),
        r.outcome.as_deref().unwrap_or("—")
    ));
    let unsafe_steps: Vec<String> = r.events.iter().filter(|e| e.unsafe_).map(|e| e.sequence.to_string()).collect();
    if !unsafe_steps.is_empty() {
        s.push_str(&format!("UNSAFE: step {} (a declared violation)\n", unsafe_steps.join(", ")));
    }
    if r.agents.len() > 1 {
        s.push_str(&format!("agents (lanes): {}\n", r.agents.iter().map(|a| safe(a)).collect::<Vec<_>>().join(", ")));
        let h = r.handoffs();
        if !h.is_empty() {
            s.push_str(&format!("handoffs ({}): {}\n", h.len(), handoff_text(&h, |a| safe(a))));
        }
    }
    let t0 = r.events.first().map_or(0, |e| e.event_time);
    s.push_str("\n   | seq | +ms | agent | event | tool | permission | impact | confirmed | result | violations | arguments\n");
    for e in &r.events {
        s.push_str(&format!(
            "{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}\n",
            if e.unsafe_ { "!!" } else { "  " },
            e.sequence,
            e.event_time - t0,
            opt(&e.agent),
            match &e.detail {
                Some(d) => format!("{} {}", e.kind, d),
                None => e.kind.clone(),
            },
            opt(&e.tool),
            opt(&e.permission),
            e.impact.as_deref().unwrap_or("—"),
            e.confirmed.map(|c| if c { "yes" } else { "no" }).unwrap_or("—"),
            e.result_status.as_deref().unwrap_or("—"),
            if e.violations.is_empty() { "—".to_string() } else { e.violations.iter().map(|v| safe(v)).collect::<Vec<_>>().join(", ") },
            opt(&e.arguments),
        ));
    }
    s.push_str(&format!("\nobservations ({}):\n", r.observations.len()));
    for o in &r.observations {
        let at = o.step.map(|st| format!(" (step {st})")).unwrap_or_default();
        let w = if o.weight == 1.0 { String::new() } else { format!(" × weight {}", o.weight) };
        s.push_str(&format!("  {}{at} = {}{w}\n", safe(&o.metric), o.value));
    }
    s
}

/// The run as a page: a header, a timeline (inline SVG: one lane per agent, one mark per event
/// at its time, the unsafe steps red and named in the chart's text alternative), the events as
/// a table (the unsafe rows marked in words, not only in colour), and the observations. Every
/// value from the data is escaped; the page has no script.
pub fn to_html(r: &RunView) -> String {
    use crate::page::esc;
    use std::fmt::Write;
    let opt = |s: &Option<String>| s.as_deref().map(esc).unwrap_or_else(|| "—".into());
    let title = format!("Run {} · {} {}", r.run_id, r.system, r.version);
    let mut s = crate::page::page_start(&title);
    let _ = write!(
        s,
        "<p>Source {} · task {} (attempt {}) · started {} · ended {} · outcome {}</p>",
        esc(&r.source),
        opt(&r.task),
        r.attempt.map(|a| a.to_string()).unwrap_or_else(|| "—".into()),
        r.started_at.map(octant_report::render::rfc3339).unwrap_or_else(|| "—".into()),
        r.ended_at.map(octant_report::render::rfc3339).unwrap_or_else(|| "— (open or abandoned)".into()),
        r.outcome.as_deref().map(esc).unwrap_or_else(|| "—".into())
    );
    let unsafe_: Vec<&EventView> = r.events.iter().filter(|e| e.unsafe_).collect();
    if !unsafe_.is_empty() {
        s.push_str("<p class=\"unsafe-tag\" id=\"unsafe-summary\">Unsafe: ");
        let links: Vec<String> =
            unsafe_.iter().map(|e| format!("<a href=\"#step-{}\">step {} ({})</a>", e.sequence, e.sequence, opt(&e.tool))).collect();
        s.push_str(&links.join(", "));
        s.push_str("</p>");
    }
    s.push_str("</header><main>");
    s.push_str("<h2>Timeline</h2>");
    s.push_str(&svg_timeline(r));
    s.push_str("<h2>Events</h2><table id=\"events\"><caption>Every event of the run in sequence order; unsafe steps are marked in the first column.</caption>\
                <thead><tr><th scope=\"col\">Unsafe</th><th scope=\"col\">Seq</th><th scope=\"col\">+ms</th><th scope=\"col\">Agent</th><th scope=\"col\">Event</th><th scope=\"col\">Tool</th>\
                <th scope=\"col\">Permission</th><th scope=\"col\">Impact</th><th scope=\"col\">Confirmed</th><th scope=\"col\">Result</th><th scope=\"col\">Violations</th><th scope=\"col\">Arguments</th></tr></thead><tbody>");
    let t0 = r.events.first().map_or(0, |e| e.event_time);
    for e in &r.events {
        let _ = write!(
            s,
            "<tr id=\"step-{}\"{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            e.sequence,
            if e.unsafe_ { " class=\"unsafe\"" } else { "" },
            if e.unsafe_ { "<span class=\"unsafe-tag\">UNSAFE</span>" } else { "" },
            e.sequence,
            e.event_time - t0,
            opt(&e.agent),
            esc(&match &e.detail {
                Some(d) => format!("{} {}", e.kind, d),
                None => e.kind.clone(),
            }),
            opt(&e.tool),
            opt(&e.permission),
            e.impact.as_deref().map(esc).unwrap_or_else(|| "—".into()),
            e.confirmed.map(|c| if c { "yes" } else { "no" }).unwrap_or("—"),
            e.result_status.as_deref().map(esc).unwrap_or_else(|| "—".into()),
            if e.violations.is_empty() { "—".to_string() } else { esc(&e.violations.join(", ")) },
            opt(&e.arguments),
        );
    }
    s.push_str("</tbody></table>");
    let _ = write!(
        s,
        "<h2>Observations</h2><table id=\"observations\"><caption>{} observations the scorer made of the run.</caption>\
         <thead><tr><th scope=\"col\">Metric</th><th scope=\"col\">Step</th><th scope=\"col\">Value</th><th scope=\"col\">Weight</th></tr></thead><tbody>",
        r.observations.len()
    );
    for o in &r.observations {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&o.metric),
            o.step.map(|x| x.to_string()).unwrap_or_else(|| "—".into()),
            o.value,
            o.weight
        );
    }
    s.push_str("</tbody></table></main></body></html>\n");
    s
}

/// The timeline: one lane per agent (and a "run" lane for events without one), one mark per event
/// at its time since the start; unsafe steps are red diamonds. The text alternative says what
/// the chart shows, unsafe steps included.
fn svg_timeline(r: &RunView) -> String {
    use crate::page::esc;
    use std::fmt::Write;
    // Events without an agent (the run's start and end, interventions) get a lane of their own.
    let run_lane = r.agents.is_empty() || r.events.iter().any(|e| e.agent.is_none());
    let lanes: Vec<String> =
        if run_lane { std::iter::once("run".to_string()).chain(r.agents.iter().cloned()).collect() } else { r.agents.clone() };
    let (left, width, lane_h, top) = (140.0, 620.0, 36.0, 20.0);
    let t0 = r.events.first().map_or(0, |e| e.event_time);
    let span = r.events.last().map_or(1, |e| (e.event_time - t0).max(1)) as f64;
    let x = |t: i64| left + (t - t0) as f64 / span * width;
    let lane_of = |e: &EventView| match &e.agent {
        Some(a) => r.agents.iter().position(|x| x == a).map_or(0, |i| i + run_lane as usize),
        None => 0,
    };
    let height = top + lane_h * lanes.len() as f64 + 30.0;
    let unsafe_: Vec<String> = r.events.iter().filter(|e| e.unsafe_).map(|e| format!("step {}", e.sequence)).collect();
    let handoffs = r.handoffs();
    let desc = format!(
        "Timeline of {} events over {} ms in {} lane(s): {}. {}{}",
        r.events.len(),
        span as i64,
        lanes.len(),
        lanes.join(", "),
        if handoffs.is_empty() { String::new() } else { format!("Handoffs: {}. ", handoff_text(&handoffs, |a| a.to_string())) },
        if unsafe_.is_empty() { "No unsafe step.".to_string() } else { format!("Unsafe: {}.", unsafe_.join(", ")) }
    );
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg id=\"timeline\" role=\"img\" aria-labelledby=\"timeline-title timeline-desc\" width=\"{}\" height=\"{height}\" viewBox=\"0 0 {} {height}\" xmlns=\"http://www.w3.org/2000/svg\">\
         <title id=\"timeline-title\">Run timeline</title><desc id=\"timeline-desc\">{}</desc>",
        left + width + 40.0,
        left + width + 40.0,
        esc(&desc)
    );
    for (i, lane) in lanes.iter().enumerate() {
        let y = top + lane_h * i as f64 + lane_h / 2.0;
        let _ = write!(
            s,
            "<text x=\"4\" y=\"{:.1}\" font-size=\"12\" fill=\"#111\">{}</text><line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#bbb\"/>",
            y + 4.0,
            esc(&terminal_safe(lane, 18)),
            left + width
        );
    }
    // Handoffs: a dashed arrow from the giving agent's event to the receiving agent's, under
    // the marks.
    if !handoffs.is_empty() {
        s.push_str("<defs><marker id=\"handoff-head\" viewBox=\"0 0 8 8\" refX=\"7\" refY=\"4\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0 0 L8 4 L0 8 Z\" fill=\"#5e3c99\"/></marker></defs>");
    }
    let by_seq: std::collections::HashMap<i64, &EventView> = r.events.iter().map(|e| (e.sequence, e)).collect();
    for h in &handoffs {
        let (a, b) = (by_seq[&h.from_sequence], by_seq[&h.to_sequence]);
        let (x1, y1) = (x(a.event_time), top + lane_h * lane_of(a) as f64 + lane_h / 2.0);
        let (x2, y2) = (x(b.event_time), top + lane_h * lane_of(b) as f64 + lane_h / 2.0);
        let _ = write!(
            s,
            "<line class=\"handoff\" x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"#5e3c99\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\" marker-end=\"url(#handoff-head)\"><title>handoff {} → {}</title></line>",
            esc(&h.from),
            esc(&h.to)
        );
    }
    for e in &r.events {
        let (cx, cy) = (x(e.event_time), top + lane_h * lane_of(e) as f64 + lane_h / 2.0);
        let label = format!(
            "{} {}{}",
            e.sequence,
            e.detail.as_deref().unwrap_or(&e.kind),
            e.tool.as_deref().map(|t| format!(" {t}")).unwrap_or_default()
        );
        if e.unsafe_ {
            let _ = write!(
                s,
                "<path class=\"unsafe-mark\" d=\"M{cx:.1} {:.1} L{:.1} {cy:.1} L{cx:.1} {:.1} L{:.1} {cy:.1} Z\" fill=\"#b2182b\"><title>UNSAFE {}</title></path>",
                cy - 9.0,
                cx + 9.0,
                cy + 9.0,
                cx - 9.0,
                esc(&label)
            );
        } else {
            let fill = if e.kind == "INTERVENTION" { "#e08214" } else { "#2166ac" };
            let _ = write!(s, "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"5\" fill=\"{fill}\"><title>{}</title></circle>", esc(&label));
        }
    }
    let _ = write!(
        s,
        "<text x=\"{left}\" y=\"{:.1}\" font-size=\"11\" fill=\"#111\">0 ms</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#111\" text-anchor=\"end\">{} ms</text></svg>",
        height - 8.0,
        left + width,
        height - 8.0,
        span as i64
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_and_terminal_safety() {
        assert_eq!(wire(&EventKind::RunStarted), "RUN_STARTED");
        assert_eq!(wire(&octant_contracts::StepKind::ToolCall), "TOOL_CALL");
        // An escape sequence that would clear the screen, and a carriage return that would
        // overwrite the line, are shown, not obeyed.
        assert_eq!(terminal_safe("rm\u{1b}[2J -rf\r/", 60), "rm\\u{1b}[2J -rf\\r/");
        assert_eq!(terminal_safe("abcdef", 3), "abc…");
        assert_eq!(lit("it's"), "'it''s'");
    }

    #[test]
    fn the_unsafe_step_is_marked_and_hostile_text_escaped() {
        let step = |seq: i64, tool: &str, violations: &[&str]| EventView {
            sequence: seq,
            event_time: 1_000 + seq * 10,
            agent: Some(if seq == 2 { "payments" } else { "planner" }.into()),
            kind: "STEP".into(),
            detail: Some("TOOL_CALL".into()),
            tool: Some(tool.into()),
            permission: (seq == 2).then(|| "shell:<exec>".into()),
            arguments: Some("{\"cmd\": \"\u{1b}]0;owned\u{7}\"}".into()),
            impact: Some("IRREVERSIBLE".into()),
            confirmed: Some(false),
            result_status: Some("OK".into()),
            violations: violations.iter().map(|v| v.to_string()).collect(),
            unsafe_: !violations.is_empty(),
        };
        let r = RunView {
            run_id: "r-1".into(),
            system: "s".into(),
            version: "1".into(),
            source: "PRODUCTION".into(),
            task: Some("t".into()),
            attempt: Some(1),
            started_at: Some(1_000),
            ended_at: None,
            outcome: None,
            agents: vec!["planner".into(), "payments".into()],
            events: vec![step(1, "lookup", &[]), step(2, "shell\u{1b}[31m.exec", &["destructive_command"])],
            observations: vec![ObservationView { metric: "unsafe_action_rate".into(), step: Some(2), value: 1.0, weight: 1.0 }],
        };
        let text = to_text(&r);
        assert!(text.contains("UNSAFE: step 2"), "{text}");
        assert!(
            text.contains("!! | 2 | 10 | payments | STEP TOOL_CALL | shell\\u{1b}[31m.exec | shell:<exec> | IRREVERSIBLE | no | OK | destructive_command"),
            "{text}"
        );
        assert!(text.contains("  | 1 | 0 | planner | STEP TOOL_CALL | lookup | — |"), "no permission logged: {text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "no raw control character reaches the terminal");
        assert!(text.contains("agents (lanes): planner, payments"));
        assert!(text.contains("handoffs (1): planner → payments (seq 1 → 2)"), "{text}");
        assert_eq!(r.handoffs().len(), 1);
        assert!(text.contains("unsafe_action_rate (step 2) = 1"));
        // The page: data escaped (no tag or script from a tool name), the unsafe row marked
        // in words and linked from the header, the chart's text alternative naming it.
        let mut hostile = r.clone();
        hostile.events[1].tool = Some("<script>alert(1)</script>".into());
        let html = to_html(&hostile);
        assert!(!html.contains("<script") && html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(html.contains("<tr id=\"step-2\" class=\"unsafe\"><td><span class=\"unsafe-tag\">UNSAFE</span>"), "{html}");
        assert!(html.contains("<a href=\"#step-2\">step 2 (&lt;script&gt;"), "{html}");
        assert!(html.contains("<td>shell:&lt;exec&gt;</td><td>IRREVERSIBLE</td>"), "the permission the call ran under: {html}");
        assert!(html.contains("Unsafe: step 2.</desc>") && html.contains("class=\"unsafe-mark\""), "{html}");
        assert!(html.contains("Handoffs: planner → payments (seq 1 → 2).") && html.matches("class=\"handoff\"").count() == 1, "{html}");
    }
}
