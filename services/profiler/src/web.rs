//! What the pages of the web view share: reading contract records from the lake, the page's
//! head and navigation, and small formatting helpers. Every value from the data goes through
//! [`esc`]; no page built here carries a script.

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use octant_lake::reader as lakedb;
use serde::de::DeserializeOwned;

pub use crate::evidence::esc;
pub use crate::fleet::urlencode;

/// Rows of a lake query as records of type `T` (by field name; extra columns are ignored).
/// Timestamp columns must be cast to BIGINT in the query: the contracts hold epoch ms.
pub async fn rows<T: DeserializeOwned>(ctx: &SessionContext, sql: &str) -> Result<Vec<T>> {
    let (schema, batches) = lakedb::query(ctx, sql).await?;
    let text = lakedb::render(&schema, &batches, lakedb::Format::Json)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| DataFusionError::Execution(format!("a lake row did not read as a record: {e}"))))
        .collect()
}

/// The number a `SELECT COUNT(…) AS n …` query returns (0 for no row).
pub async fn count(ctx: &SessionContext, sql: &str) -> Result<usize> {
    #[derive(serde::Deserialize)]
    struct Count {
        n: i64,
    }
    Ok(rows::<Count>(ctx, sql).await?.first().map_or(0, |c| c.n.max(0) as usize))
}

/// An enum's name on the wire and in the lake (`TOOL_CALL`, `PRODUCTION`): its serde name.
pub fn wire<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// `SELECT` of every column of `table`, with `timestamps` cast to epoch milliseconds.
pub fn select_all(table: &str, timestamps: &[&str]) -> String {
    if timestamps.is_empty() {
        return format!("SELECT * FROM {table}");
    }
    let casts: Vec<String> = timestamps.iter().map(|c| format!("CAST({c} AS BIGINT) AS {c}")).collect();
    format!("SELECT * EXCLUDE ({}), {} FROM {table}", timestamps.join(", "), casts.join(", "))
}

/// The timestamp columns of the lake tables the pages read.
pub const WINDOW_TIMES: &[&str] = &["window_start", "window_end", "evidence_since", "watermark"];
pub const PROFILE_TIMES: &[&str] = &["window_start", "window_end"];
pub const ALERT_TIMES: &[&str] = &["window_start", "window_end", "starts_at", "ends_at"];

/// The opening of the web view's navigation (`page_start`), where the auth middleware adds who
/// is signed in.
pub const NAV: &str = "<nav aria-label=\"Octant\">";

/// The start of a page: doctype, head with `title` and the shared style, the navigation, and
/// the opening of `<header>` with an `<h1>` of the title. The caller closes the header.
pub fn page_start(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><meta name=\"viewport\" content=\"width=device-width\"/><title>{t}</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:80em;color:#111}}table{{border-collapse:collapse;margin:0.5em 0}}\
         td,th{{border:1px solid #999;padding:2px 6px;text-align:left}}caption{{text-align:left;font-style:italic}}\
         tr.unsafe,tr.firing{{background:#fde0dd}}.unsafe-tag{{color:#8b0000;font-weight:bold}}.na{{color:#555}}\
         nav a{{margin-right:1em}}nav form{{display:inline;margin-left:2em}}a:focus,button:focus,input:focus,tr:focus{{outline:3px solid #1a4f9c}}</style></head><body>\
         {NAV}<a href=\"/\">Fleet</a><a href=\"/profiles\">Profiles (JSON)</a></nav><header><h1>{t}</h1>",
        t = esc(title)
    )
}

/// The Content-Security-Policy of pages without script: nothing loads from anywhere, inline
/// style and SVG only, forms post to this server, no framing.
pub const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// The fleet page's: its own inline script, which fetches the page again.
pub const CSP_FLEET: &str = "default-src 'none'; script-src 'unsafe-inline'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Middleware: every response of the web view says `nosniff`, sends no referrer off the
/// server, and an HTML one carries its Content-Security-Policy (the fleet page `/` its own).
pub async fn security_headers(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    let fleet = req.uri().path() == "/";
    let mut res = next.run(req).await;
    let html = res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/html"));
    let h = res.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if html {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(if fleet { CSP_FLEET } else { CSP }));
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
    v.map_or_else(|| "—".into(), crate::evidence::rfc3339)
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
    fn select_casts_the_timestamps() {
        assert_eq!(select_all("alerts", &[]), "SELECT * FROM alerts");
        assert_eq!(
            select_all("alerts", &["starts_at", "ends_at"]),
            "SELECT * EXCLUDE (starts_at, ends_at), CAST(starts_at AS BIGINT) AS starts_at, CAST(ends_at AS BIGINT) AS ends_at FROM alerts"
        );
        assert!(page_start("<x>").contains("<title>&lt;x&gt;</title>"));
        assert_eq!((num(None), interval(Some(0.1), Some(0.25)), text(Some("<"))), ("—".into(), "[0.1000, 0.2500]".into(), "&lt;".into()));
    }
}
