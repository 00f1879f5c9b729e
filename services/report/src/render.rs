//! Text made safe for where it goes, shared by the evidence packages and the web pages: HTML and
//! XML text, Markdown table cells (URL path segments: `octant_runtime::web::path_segment`).

/// Escapes text for HTML and XML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// Recorded text inside a Markdown table cell: no cell break, no line break, no backtick.
pub fn md_cell(v: &str) -> String {
    v.chars().map(|c| if matches!(c, '|' | '`' | '\n' | '\r') { ' ' } else { c }).collect()
}

/// Epoch milliseconds as RFC 3339 UTC with milliseconds.
pub fn rfc3339(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}
