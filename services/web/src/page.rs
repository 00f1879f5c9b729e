//! What the pages of the web view share: the stylesheet, the page's head and navigation, the
//! security headers, and small formatting helpers. Every value from the data goes through
//! [`esc`]; no page carries inline style, and the one script (the fleet page's) is allowed by
//! its hash.

pub use octant_report::render::esc;
pub use octant_runtime::web::path_segment as urlencode;

/// The opening of the web view's navigation (`page_start`), where the auth middleware adds who
/// is signed in.
pub const NAV: &str = "<nav aria-label=\"Octant\">";

/// Where the stylesheet is served (open: the sign-in page needs it too).
pub const STYLESHEET_PATH: &str = "/style.css";

/// The one stylesheet of every page (no external asset). Words are never cut on a wide screen;
/// a table wider than the screen scrolls inside itself, never the page; on a phone tables set
/// smaller and long identifiers break anywhere; charts shrink to fit; printed, the navigation
/// and buttons go and the tables keep their full width.
pub const STYLESHEET: &str = "\
*{box-sizing:border-box}\
body{font-family:system-ui,sans-serif;margin:1.5em auto;padding:0 1em;max-width:80em;color:#111;background:#fff;line-height:1.4}\
h1{font-size:1.6em;overflow-wrap:anywhere}h2{font-size:1.25em;margin-top:1.5em}\
table{border-collapse:collapse;margin:0.5em 0;display:block;max-width:100%;overflow-x:auto}\
td,th{border:1px solid #999;padding:2px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}\
caption{text-align:left;font-style:italic}\
code,pre{overflow-wrap:anywhere;white-space:pre-wrap}\
svg{max-width:100%;height:auto}\
tr.unsafe,tr.firing,tr.unsuitable{background:#fde0dd}.unsafe-tag,.unsuitable-tag{color:#8b0000;font-weight:bold}.na{color:#555}\
nav{display:flex;flex-wrap:wrap;gap:0.25em 1em;align-items:center}nav form{display:inline;margin-left:auto}\
a{color:#0b4aa2}a:focus,button:focus,input:focus,tr:focus{outline:3px solid #1a4f9c}\
input{max-width:100%}\
@media (max-width:600px){body{margin:0.5em auto;padding:0 0.5em}table{font-size:0.85em}td,th{padding:2px 4px}td{overflow-wrap:anywhere}}\
@media print{nav,button,form.signout,#pause,#refresh-note{display:none}body{margin:0;max-width:none}\
table{display:table;overflow:visible}a{color:inherit;text-decoration:none}tr{break-inside:avoid}}\
";

/// The start of a page: doctype, head with `title` and the stylesheet, the navigation, and
/// the opening of `<header>` with an `<h1>` of the title. The caller closes the header.
pub fn page_start(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/><title>{t}</title>\
         <link rel=\"stylesheet\" href=\"{STYLESHEET_PATH}\"/></head><body>\
         {NAV}<a href=\"/\">Fleet</a><a href=\"/profiles\">Profiles (JSON)</a></nav><header><h1>{t}</h1>",
        t = esc(title)
    )
}

/// A page's tables made reachable with the keyboard: a table wider than the screen scrolls
/// inside itself, and a region that scrolls must take the focus (WCAG 2.1.1; axe-core's
/// `scrollable-region-focusable`), so every table is a tab stop.
pub fn focusable_tables(html: String) -> String {
    html.replace("<table ", "<table tabindex=\"0\" ")
}

/// The Content-Security-Policy of the pages: nothing loads but this server's stylesheet, SVG
/// and data images inline, forms post to this server, no framing, no script.
pub const CSP: &str =
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// An evidence package's own page (`profile.html`, self-contained: its style is inline), no script.
pub const CSP_EVIDENCE: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// [`CSP`] with one inline script allowed by its SHA-256 (the fleet page's), and fetches to
/// this server.
pub fn csp_with_script(script: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, script.as_bytes());
    format!(
        "default-src 'none'; script-src 'sha256-{}'; connect-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        base64(digest.as_ref())
    )
}

/// Standard base64 with padding (what a CSP hash source is written in).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            out.push(if i <= c.len() { A[(n >> shift & 63) as usize] as char } else { '=' });
        }
    }
    out
}

/// Middleware: every response of the web view says `nosniff`, sends no referrer off the
/// server, and an HTML one carries a Content-Security-Policy ([`CSP`] unless the handler set
/// its own).
pub async fn security_headers(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    let mut res = next.run(req).await;
    let html = res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/html"));
    let h = res.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if html && !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    }
    res
}

/// An optional number with 4 decimals, or a dash.
pub fn num(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.4}"))
}

/// An optional interval `[lo, hi]`, or a dash.
pub fn interval(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("[{lo:.4}, {hi:.4}]"),
        _ => "—".into(),
    }
}

/// An optional text, escaped, or a dash.
pub fn text(v: Option<&str>) -> String {
    v.map_or_else(|| "—".into(), esc)
}

/// An optional time (epoch ms) as RFC 3339, or a dash.
pub fn time(v: Option<i64>) -> String {
    v.map_or_else(|| "—".into(), octant_report::render::rfc3339)
}

/// An incident's run page link, `<a href="/runs/<run>">{prefix}<run>, step <n></a>`; `None`
/// for other alerts.
pub fn incident_run_link(a: &octant_contracts::Alert, prefix: &str) -> Option<String> {
    match (&a.run_id, a.kind) {
        (Some(r), octant_contracts::AlertKind::Incident) => Some(format!(
            "<a href=\"/runs/{}\">{prefix}{}{}</a>",
            esc(&urlencode(r)),
            esc(r),
            a.step.map(|st| format!(", step {st}")).unwrap_or_default()
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_link_the_stylesheet_and_format_what_they_show() {
        let p = page_start("<x>");
        assert!(p.contains("<title>&lt;x&gt;</title>") && p.contains("href=\"/style.css\"") && !p.contains("<style"));
        assert_eq!((num(None), interval(Some(0.1), Some(0.25)), text(Some("<"))), ("—".into(), "[0.1000, 0.2500]".into(), "&lt;".into()));
        assert_eq!(focusable_tables("<table id=\"x\"><tr></tr></table>".into()), "<table tabindex=\"0\" id=\"x\"><tr></tr></table>");
        let csp = csp_with_script("alert(1)");
        assert!(
            csp.contains("script-src 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
    }
}
