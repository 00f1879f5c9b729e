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
//! - [`reruns`]: independent re-runs — the draw of runs to re-execute and the check of the
//!   re-runs against their originals.
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
pub mod reruns;
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

/// The re-run requests every period's draw adds (`[reruns]`; none when the share is 0): runs
/// already requested — in the lake's `rerun_requests` or in `sent` (what the caller sent) —
/// are not drawn again, nor is a run twice across the periods. The caller adds a request to
/// `sent` once it is sent.
pub async fn draw_reruns(
    cfg: &ReportConfig,
    periods: &[Period],
    sent: &std::collections::BTreeMap<String, String>,
    now: i64,
) -> anyhow::Result<Vec<octant_contracts::ReRunRequest>> {
    let mut out = Vec::new();
    if cfg.reruns.share <= 0.0 {
        return Ok(out);
    }
    // One session for every period's draw (a draw stores nothing, unlike a profile's build).
    let ctx = octant_lake::reader::open_versions(&cfg.lake, &cfg.storage)
        .await
        .with_context(|| format!("cannot open the lake {}", cfg.lake.display()))?
        .0;
    let mut known = sent.clone();
    for p in periods {
        let (candidates, covered) =
            reruns::candidates(&ctx, &cfg.reruns, p, &known).await.with_context(|| format!("re-run draw of period {} failed", p.name))?;
        for r in reruns::draw(&cfg.reruns, p, &candidates, &covered, now) {
            known.insert(r.run_id.clone(), r.reason.clone());
            out.push(r);
        }
    }
    Ok(out)
}
