//! SQL over the lake, shared by every report and page: the span a report covers and the
//! filters, literals and column reads its queries use.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result};
use octant_lake::date_of;
use serde::{Deserialize, Serialize};

/// The span a profile covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Period {
    /// `24h`, `7d`, or `window` for an explicit span.
    pub name: String,
    /// Inclusive, epoch ms.
    pub start: i64,
    /// Exclusive, epoch ms.
    pub end: i64,
}

impl Period {
    /// The period with the span of its own length before it: where a re-run's start or its
    /// original is looked up.
    pub fn with_lookback(&self) -> Period {
        Period { name: self.name.clone(), start: self.start - (self.end - self.start), end: self.end }
    }
}

pub fn df_err(e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(e.to_string())
}

/// How the lake stores a run's source (the Avro enum's symbol).
pub fn lake_source(s: octant_contracts::Source) -> &'static str {
    match s {
        octant_contracts::Source::Evaluation => "EVALUATION",
        octant_contracts::Source::Production => "PRODUCTION",
    }
}

/// SQL string literal.
pub fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The WHERE clause shared by the queries: the period (event time and the `date` partition,
/// so whole days outside it are never opened) and the system.
pub fn period_filter(period: &Period, time_col: &str, system: Option<&str>) -> String {
    let mut f = format!(
        "date >= {} AND date <= {} AND CAST({time_col} AS BIGINT) >= {} AND CAST({time_col} AS BIGINT) < {}",
        lit(&date_of(period.start)),
        lit(&date_of(period.end - 1)),
        period.start,
        period.end
    );
    if let Some(s) = system {
        f.push_str(&format!(" AND system_id = {}", lit(s)));
    }
    f
}

pub fn col(b: &RecordBatch, name: &str, dt: &DataType) -> Result<ArrayRef> {
    let c = b.column_by_name(name).ok_or_else(|| df_err(format!("column {name} missing")))?;
    if c.data_type() == dt { Ok(c.clone()) } else { Ok(arrow::compute::cast(c, dt)?) }
}

/// A condition on `trajectory_events` rows: not a re-run's (a harness's answer to a re-run
/// request is compared with its original and counted nowhere else). A run's start carries
/// `rerun_of`; its other events are known by their run id, whose start is looked up in `period`
/// and the span of the same length before it (a re-run that started before the period).
pub fn not_rerun(period: &Period) -> String {
    format!(
        "run_id NOT IN (SELECT run_id FROM trajectory_events WHERE kind = 'RUN_STARTED' AND get_field(run_started, 'rerun_of') IS NOT NULL AND {})",
        period_filter(&period.with_lookback(), "event_time", None)
    )
}
