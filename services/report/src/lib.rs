//! # octant-report
//!
//! Octant's reports over the lake, without HTTP or Kafka: what the profiler runs on its
//! schedule, `octant lake profile` and `octant compare` run on demand, and the web view reads.
//!
//! - [`profile`]: one period's profiles, in named phases — read the period, pane sums, windows
//!   and records, gates, meta-evaluation, release decision — each profile with everything its
//!   evidence package needs ([`profile::Built`]).
//! - [`pane_store`]: the pane-sum store (per system and hour, the mergeable state of every
//!   series), so a profile reads whole hours instead of observations.
//! - [`meta_evaluation`]: how far the raters behind evaluation results can be trusted
//!   (agreement among humans, judge–human κ, stability, judge biases, set-level scores).
//! - [`compare`]: a release against its baseline over one period (paired tests); [`canary`]:
//!   the same decision sequentially on the live observation stream.
//! - [`evidence`]: the evidence package of a profile (`profile.json`, `.md`, `.html`).
//! - [`config`]: [`ReportConfig`]; [`sql`]: the period and the SQL helpers every query shares;
//!   [`render`]: text made safe for HTML and Markdown.

pub mod canary;
pub mod compare;
pub mod config;
pub mod evidence;
pub mod meta_evaluation;
pub mod pane_store;
pub mod parity;
pub mod profile;
pub mod render;
pub mod sql;

use std::path::Path;

use anyhow::Context;

pub use config::ReportConfig;
pub use profile::Built;
pub use sql::Period;

/// Every period's profiles, built from the lake and written as evidence packages under
/// `evidence`; the returned records carry their package directory in `evidence_uri`.
pub async fn run(cfg: &ReportConfig, evidence: &Path, periods: &[Period], system: Option<&str>, now: i64) -> anyhow::Result<Vec<Built>> {
    cfg.evaluation.declare_instruments().map_err(anyhow::Error::msg)?;
    let mut all = Vec::new();
    for p in periods {
        // A session per period: a session lists each table once and keeps that listing (and
        // the lake's commit markers it filtered by), while `profile::build` records the markers
        // it reads first as what a stored hour holds — a listing from an earlier period's build
        // would be older than them, and the hour would be stored without files it claims.
        let (ctx, versions) = octant_lake::reader::open_versions(&cfg.lake, &cfg.storage)
            .await
            .with_context(|| format!("cannot open the lake {}", cfg.lake.display()))?;
        let built = profile::build(&ctx, cfg, p, system, now).await.with_context(|| format!("profile of period {} failed", p.name))?;
        for mut b in built {
            b.lake_versions = versions.clone();
            let dir = evidence::write_package(evidence, &b, cfg, &cfg.lake)
                .with_context(|| format!("cannot write the evidence package under {}", evidence.display()))?;
            b.record.evidence_uri = Some(dir.display().to_string());
            all.push(b);
        }
    }
    Ok(all)
}
