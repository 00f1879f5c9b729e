//! Reading contract records from the lake for the pages (DataFusion SQL through
//! `octant_lake::reader`).

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use octant_lake::reader as lakedb;
use serde::de::DeserializeOwned;

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
    }
}
