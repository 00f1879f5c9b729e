//! One profile run: DataFusion SQL over the lake, then the aggregator's own window code over
//! the rows, so a profile over `[start, end)` carries exactly the values a streaming window
//! over the same span would (the bootstrap weights depend only on the cluster, the seed and the
//! replicate, never on order or panes).
//!
//! The period is cut into wall-clock hours (the first and last may be partial): each hour's
//! state per series ([`octant_engine::panes::PaneSums`]) comes from the pane-sum store
//! ([`crate::pane_store`]) when the hour is stored and still complete, else from the observations
//! through the window code; [`octant_engine::panes::Period`] merges them (exactly: integer
//! sums) into the period's window.
//!
//! [`build`] runs the phases in order, each in its own module:
//! 1. read the period ([`read`]): the stored hours, then the observations of the others;
//! 2. pane sums ([`read::Reading::merge_and_store`]): every hour merged, the settled ones stored;
//! 3. windows and records ([`records`]): the period's window, one profile per (system, version,
//!    source) with what the lake says beside it ([`inputs`]: agreement, reproducibility,
//!    families, agents, trajectory offsets);
//! 4. gates ([`gates`]): each gated metric's verdict and the Efficacy Index;
//! 5. meta-evaluation and 6. release decision ([`records::across_profiles`]).

mod gates;
mod inputs;
mod read;
mod records;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, ArrayRef, AsArray};
use datafusion::error::Result;
use datafusion::prelude::SessionContext;
use octant_contracts::{DimensionProfile, MetricWindow, Profile, Provenance, Source};
use octant_core::profile::Profile as CoreProfile;
use octant_engine::panes::Period as Period_;
use serde::Serialize;

pub use gates::GateLine;
pub use inputs::{
    ARTEFACTS, AgentInstrument, AgentReport, Agreement, Artefact, ArtefactValue, FamilyReport, PER_AGENT, Reproducibility, TOP_VALUES,
    TaskCounts, UNDECLARED_FAMILY, agent_reports, family_reports,
};

use crate::config::ReportConfig;
use crate::sql::{Period, df_err, period_filter};

/// Which lake rows a profile read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TableInput {
    /// Files of the table in the partitions the query touched (paths relative to the lake).
    pub files: Vec<String>,
    /// Per Kafka topic partition: first and last offset read and rows.
    pub offsets: Vec<OffsetRange>,
    pub rows: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffsetRange {
    pub topic: String,
    pub partition: i32,
    pub first: i64,
    pub last: i64,
    pub rows: u64,
}

/// One profile of one (system, version, source) with everything its evidence package needs.
#[derive(Debug, Clone, Serialize)]
pub struct Built {
    pub record: Profile,
    pub period: Period,
    /// The per-metric windows (identical to the aggregator's for the same span).
    pub windows: Vec<MetricWindow>,
    pub dimension_profile: DimensionProfile,
    #[serde(skip)]
    pub core: CoreProfile,
    pub gate: Vec<GateLine>,
    pub agreement: Option<Agreement>,
    /// The reproducibility artefacts the period's runs recorded.
    pub reproducibility: Reproducibility,
    /// The system's declared type (`[evaluation.system_types]`), which decides its coverage.
    pub system_type: octant_core::catalogue::SystemType,
    /// Task families (seed 001), each with its tasks.
    pub families: Vec<FamilyReport>,
    /// Per agent of a system declared multi-agent (seed 000 Table IX); empty otherwise.
    pub agents: Vec<AgentReport>,
    pub observations: TableInput,
    pub trajectory_events: TableInput,
    /// Each lake table's Delta version the profile's session read (`octant_lake::reader::
    /// open_versions`): the cut to read it again at.
    pub lake_versions: BTreeMap<String, u64>,
    /// Observations the window code dropped as replays (same observation id).
    pub duplicates: u64,
    /// Who judged success, per success metric: metric → provenance → runs (the split of
    /// verified and self-reported success).
    pub success_provenance: BTreeMap<String, BTreeMap<String, u64>>,
    /// Why the gate has no outcome, when gates are declared and one cannot be given.
    pub gate_na_reason: Option<String>,
    /// Hours of the period read from the pane-sum store rather than the observations.
    pub hours_from_store: usize,
    /// This version against its declared baseline (`[[compare.releases]]` naming it the
    /// candidate), over the same period.
    pub release: Option<crate::compare::Comparison>,
    /// Its re-runs of the period against their originals (seed 000 §IV-G), when some came back.
    pub reruns: Option<crate::reruns::ReRunCheck>,
    /// How far the raters behind the period's evaluation results can be trusted.
    pub meta: crate::meta_evaluation::MetaEvaluation,
    /// The declared stress and adversarial suites among its benchmarks (`[evaluation.profile.
    /// suites]`): their metrics are reported apart, outside every dimension band and cap.
    pub suites: BTreeMap<String, octant_core::profile::SuiteKind>,
}

/// Whether the session reads the lake's observation files (a table registered empty, because
/// the lake had none when the session opened, does not see files written since).
pub(super) async fn lists_observation_files(ctx: &SessionContext) -> bool {
    match ctx.table_provider("observations").await {
        Ok(t) => (t.as_ref() as &dyn std::any::Any).downcast_ref::<datafusion::datasource::MemTable>().is_none(),
        Err(_) => false,
    }
}

/// What one reader of the pane-sum store found: the hours it read whole, their merged state,
/// and each system's group bookkeeping.
pub(super) type StoredPart = (Vec<i64>, Period_, Vec<(String, crate::pane_store::GroupMeta)>);

/// Runs blocking work (reading the pane-sum store) off the async runtime's worker threads when
/// the runtime has several; in place otherwise.
pub(super) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// The SQL that selects a profile's observations (also what the benchmark runs).
pub fn observations_sql(period: &Period, system: Option<&str>) -> String {
    observations_sql_in(period, system, &[(period.start, period.end)])
}

/// The SQL that selects a period's observations with event times in `ranges` (the hours not
/// read from the pane-sum store).
pub fn observations_sql_in(period: &Period, system: Option<&str>, ranges: &[(i64, i64)]) -> String {
    let spans: Vec<String> =
        ranges.iter().map(|(a, b)| format!("(CAST(event_time AS BIGINT) >= {a} AND CAST(event_time AS BIGINT) < {b})")).collect();
    format!(
        "SELECT observation_id, metric, system_id, system_version, source, agent_id, run_id, task_id, attempt, \
         groups, benchmark, cluster_id, step, CAST(event_time AS BIGINT) AS t, value, weight, confidence, provenance, \
         kafka_topic, kafka_partition, kafka_offset FROM observations WHERE rerun_of IS NULL AND {} AND ({})",
        period_filter(period, "event_time", system),
        spans.join(" OR ")
    )
}

pub(super) fn opt_str(a: &ArrayRef, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.as_string::<i32>().value(i).to_string())
}

/// Per-partition offset bookkeeping.
#[derive(Default)]
pub(super) struct Offsets(pub(super) BTreeMap<(String, i32), (i64, i64, u64)>);

impl Offsets {
    pub(super) fn add(&mut self, topic: &str, partition: i32, offset: i64) {
        let e = self.0.entry((topic.to_string(), partition)).or_insert((offset, offset, 0));
        e.0 = e.0.min(offset);
        e.1 = e.1.max(offset);
        e.2 += 1;
    }

    pub(super) fn merge(&mut self, topic: &str, partition: i32, first: i64, last: i64, rows: u64) {
        let e = self.0.entry((topic.to_string(), partition)).or_insert((first, last, 0));
        e.0 = e.0.min(first);
        e.1 = e.1.max(last);
        e.2 += rows;
    }

    pub(super) fn ranges(&self) -> Vec<OffsetRange> {
        self.0
            .iter()
            .map(|((topic, partition), (first, last, rows))| OffsetRange {
                topic: topic.clone(),
                partition: *partition,
                first: *first,
                last: *last,
                rows: *rows,
            })
            .collect()
    }
}

/// State per (system, version, source) while reading.
#[derive(Default)]
pub(super) struct Group {
    observations: Offsets,
    files: BTreeSet<String>,
    /// metric → provenance → accepted observations.
    provenance: BTreeMap<String, BTreeMap<String, u64>>,
}

pub(super) fn provenance_of(s: &str) -> Option<Provenance> {
    Provenance::ALL.into_iter().find(|p| p.as_str().eq_ignore_ascii_case(s) || format!("{p:?}").eq_ignore_ascii_case(&s.replace('_', "")))
}

pub(super) type GroupKey = (String, String, Source);

/// Builds the profiles of every (system, version, source) with observations in `period`
/// (or only `system`'s).
pub async fn build(
    ctx: &SessionContext,
    cfg: &ReportConfig,
    period: &Period,
    system: Option<&str>,
    generated_at: i64,
) -> Result<Vec<Built>> {
    if period.end <= period.start {
        return Err(df_err(format!("empty period [{}, {})", period.start, period.end)));
    }
    // 1. Read the period: the stored hours, then the observations of every other hour.
    let mut reading = read::Reading::open(ctx, cfg, period, system, generated_at).await?;
    reading.read_stored();
    let fresh = reading.read_observations(ctx).await?;
    // 2. Pane sums: every hour merged into the period; the settled ones stored.
    reading.merge_and_store(fresh);
    // 3. Windows and records, with 4. the gates of each.
    let Some(window) = reading.window() else { return Ok(Vec::new()) };
    let beside = inputs::Beside::read(ctx, cfg, period, system).await?;
    let mut built = records::records(cfg, period, generated_at, reading, window, beside).await?;
    // 5. Meta-evaluation across the profiles, and 6. the release decisions.
    records::across_profiles(ctx, cfg, period, &mut built).await?;
    Ok(built)
}

pub(super) fn source_of(s: &str) -> Source {
    if s.eq_ignore_ascii_case("evaluation") { Source::Evaluation } else { Source::Production }
}
