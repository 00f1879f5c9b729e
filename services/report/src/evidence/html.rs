//! `profile.html`: the Markdown's content as a self-contained page (well-formed XML), with an
//! SVG chart of the eight bands and their intervals.

use std::fmt::Write as _;
use std::path::Path;

use octant_contracts::DimensionBand;

use super::{band_text, fmt_opt, metric_band, metric_na, rfc3339, to_markdown};
use crate::profile::Built;
use crate::render::esc;

/// The SVG chart: one row per dimension, a bar to the band and a whisker over its interval;
/// N/A rows say so; capped rows are marked.
pub fn svg_chart(dims: &[DimensionBand]) -> String {
    let (left, width, row, top) = (130.0, 400.0, 34.0, 30.0);
    let x = |band: f64| left + band / 4.0 * width;
    let height = top + row * dims.len() as f64 + 20.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="bands" width="{}" height="{height}" viewBox="0 0 {} {height}" role="img" aria-label="Dimension bands with intervals">"#,
        left + width + 160.0,
        left + width + 160.0
    );
    for b in 0..=4 {
        let _ = write!(
            s,
            r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#ccc"/><text x="{0}" y="{3}" text-anchor="middle" font-size="12">{b}</text>"##,
            x(b as f64),
            top - 8.0,
            height - 20.0,
            top - 12.0
        );
    }
    for (i, d) in dims.iter().enumerate() {
        let y = top + row * i as f64;
        let _ = write!(
            s,
            r#"<g class="dimension" data-dimension="{}" data-band="{}">"#,
            esc(&d.dimension),
            d.band.map(|b| b.to_string()).unwrap_or_else(|| "na".into())
        );
        let _ = write!(s, r#"<text x="{}" y="{}" text-anchor="end" font-size="13">{}</text>"#, left - 8.0, y + 20.0, esc(&d.dimension));
        match d.band {
            None => {
                let _ = write!(
                    s,
                    r##"<text x="{}" y="{}" font-size="12" fill="#888">N/A: {}</text>"##,
                    left + 6.0,
                    y + 20.0,
                    esc(d.na_reason.as_deref().unwrap_or("no evidence"))
                );
            }
            Some(b) => {
                let color = ["#b2182b", "#ef8a62", "#fddbc7", "#67a9cf", "#2166ac"][b.clamp(0, 4) as usize];
                let w = (x(b as f64) - left).max(3.0);
                let _ = write!(
                    s,
                    r#"<rect class="band" x="{left}" y="{}" width="{w}" height="18" fill="{color}"><title>band {b} ({})</title></rect>"#,
                    y + 6.0,
                    octant_core::band_reading(i64::from(b))
                );
                if let (Some(lo), Some(hi)) = (d.band_low, d.band_high) {
                    let (x1, x2, ym) = (x(lo as f64), x(hi as f64), y + 15.0);
                    let _ = write!(
                        s,
                        r##"<g class="interval" data-low="{lo}" data-high="{hi}"><line x1="{x1}" y1="{ym}" x2="{x2}" y2="{ym}" stroke="#000" stroke-width="2"/><line x1="{x1}" y1="{}" x2="{x1}" y2="{}" stroke="#000"/><line x1="{x2}" y1="{}" x2="{x2}" y2="{}" stroke="#000"/></g>"##,
                        ym - 6.0,
                        ym + 6.0,
                        ym - 6.0,
                        ym + 6.0
                    );
                }
                let label = if d.capped_by.is_empty() { format!("{b}") } else { format!("{b} capped ({})", d.capped_by.join(", ")) };
                let _ = write!(s, r#"<text x="{}" y="{}" font-size="12">{}</text>"#, left + width + 8.0, y + 20.0, esc(&label));
            }
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}

/// `profile.html`: the Markdown's content as a page, with the chart.
pub fn to_html(b: &Built, lake: &Path) -> String {
    let r = &b.record;
    let title = format!("Octant profile: {} {} ({}, {})", r.system_id, r.system_version, r.source.as_str(), r.period);
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>{}</title><style>body{{font-family:sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}.unsuitable{{color:#b2182b;font-weight:bold}}</style></head><body>",
        esc(&title)
    );
    let _ = write!(s, "<h1>{}</h1>", esc(&title));
    let _ = write!(
        s,
        "<p>Period {} to {} (UTC). Method {}, level {}, {} replicates, seed {}, catalogue {}.</p>",
        esc(&rfc3339(r.period_start)),
        esc(&rfc3339(r.period_end)),
        esc(&r.method),
        r.level,
        r.replicates,
        r.seed,
        esc(&r.catalogue_version)
    );
    if r.unsuitable {
        s.push_str(
            "<p class=\"unsuitable\" id=\"unsuitable\">UNSUITABLE for deployment: a veto with that effect is breached or confirmed.</p>",
        );
    }
    s.push_str("<h2>Dimensions</h2>");
    s.push_str(&svg_chart(&r.dimensions));
    s.push_str("<table id=\"dimensions\"><tr><th>Dimension</th><th>Band [interval]</th><th>Instruments</th></tr>");
    for d in &r.dimensions {
        let _ =
            write!(s, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&d.dimension), esc(&band_text(d)), esc(&d.instruments.join(", ")));
    }
    let _ = write!(s, "</table><p class=\"legend\">Bands read {}.</p>", esc(&octant_core::band_legend()));
    s.push_str("<h2>Vetoes</h2><table id=\"vetoes\"><tr><th>Rule</th><th>Metric</th><th>State</th><th>Estimate</th><th>Interval</th><th>Threshold</th></tr>");
    for v in &b.dimension_profile.vetoes {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>[{}, {}]</td><td>{}</td></tr>",
            esc(&v.rule),
            esc(&v.metric),
            v.benchmark.as_deref().map(|x| format!(" @ {}", esc(x))).unwrap_or_default(),
            esc(&v.state),
            fmt_opt(v.estimate),
            fmt_opt(v.ci_low),
            fmt_opt(v.ci_high),
            v.threshold
        );
    }
    s.push_str("</table><h2>Metrics</h2><table id=\"metrics\"><tr><th>Metric</th><th>Dimension</th><th>Benchmark</th><th>Units</th><th>Estimate</th><th>Interval</th><th>Band</th><th>N/A</th></tr>");
    for m in &r.metrics {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>[{}, {}]</td><td>{}</td><td>{}</td></tr>",
            esc(&m.metric),
            esc(&m.dimension),
            esc(m.benchmark.as_deref().unwrap_or("")),
            m.units,
            fmt_opt(m.estimate),
            fmt_opt(m.ci_low),
            fmt_opt(m.ci_high),
            esc(&metric_band(m.band)),
            esc(&metric_na(m))
        );
    }
    s.push_str("</table>");
    // The rest of the Markdown (gate, agreement, inputs, crosswalk) as preformatted text.
    let md = to_markdown(b, lake);
    let rest = md.find("## Gate and Efficacy Index").map(|i| &md[i..]).unwrap_or("");
    let _ = write!(s, "<h2>Gate, agreement, inputs and crosswalk</h2><pre id=\"details\">{}</pre>", esc(rest));
    s.push_str("</body></html>\n");
    s
}
