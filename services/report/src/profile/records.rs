//! Phases 3 to 6: the period's window as records — one profile per (system, version, source)
//! with its metrics, gate, inputs and what the lake says beside it — then what is judged across
//! profiles (discriminative power) and each declared release's decision.

use std::collections::{BTreeMap, BTreeSet};

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use octant_contracts::{MetricWindow, Profile, ProfileMetric};
use octant_core::catalogue::CATALOGUE_VERSION;
use octant_core::stats::bootstrap::METHOD;
use octant_engine::verdicts;
use octant_engine::window::Emission;

use super::inputs::{Beside, agent_reports, family_reports};
use super::read::Reading;
use super::{Built, GroupKey, TableInput, gates};
use crate::config::ReportConfig;
use crate::sql::Period;

/// Phase 3b (with phase 4 for each): the profiles of the period's window.
pub(super) async fn records(
    cfg: &ReportConfig,
    period: &Period,
    generated_at: i64,
    mut reading: Reading<'_>,
    window: Emission,
    mut beside: Beside,
) -> Result<Vec<Built>> {
    let boot = reading.boot;
    let out = verdicts::build(&window, &cfg.evaluation);
    let mut by_group: BTreeMap<GroupKey, Vec<MetricWindow>> = BTreeMap::new();
    for w in out.windows {
        by_group.entry((w.system_id.clone(), w.system_version.clone(), w.source)).or_default().push(w);
    }
    let mut built = Vec::new();
    for (dp, core) in out.profiles {
        let key = (dp.system_id.clone(), dp.system_version.clone(), dp.source);
        let mut g = reading.groups.remove(&key).unwrap_or_default();
        g.files = lake_files(cfg, "observations", &dp.system_id, period).await?;
        let metrics: Vec<ProfileMetric> = core
            .metrics
            .iter()
            .map(|m| ProfileMetric {
                metric: m.metric.id.to_string(),
                dimension: m.metric.dimension.as_str().to_string(),
                benchmark: m.benchmark.clone(),
                units: m.units as i64,
                estimate: m.estimate,
                ci_low: m.interval.map(|i| i.0),
                ci_high: m.interval.map(|i| i.1),
                band: m.band.map(i32::from),
                band_low: m.band_interval.map(|b| b.0 as i32),
                band_high: m.band_interval.map(|b| b.1 as i32),
                na_reason: m.not_applicable.as_ref().map(|n| n.describe()),
                veto_state: m.veto.map(|v| v.as_str().to_string()),
                pool_version: cfg.evaluation.pool(m.metric.id, &dp.system_id).map(|(_, v)| v),
            })
            .collect();
        let agreement = beside.agreements.get(&key).cloned();
        let meta = beside.metas.remove(&key).unwrap_or_default();
        let gate = gates::gate_lines(cfg, &metrics, &g.provenance, agreement.as_ref(), &meta);
        let (gate_outcome, ei, ei_g) = gates::gate_summary(cfg, &gate);
        let gate_na_reason = (!gate.is_empty() && gate_outcome.is_none()).then(|| {
            let reasons: Vec<String> = gate.iter().filter_map(|l| l.na_reason.as_ref().map(|r| format!("{}: {r}", l.metric))).collect();
            format!("no gate outcome: {}", reasons.join("; "))
        });
        let (ev_offsets, ev_rows) = beside.events.get(&key).map(|o| (o.ranges(), o.0.values().map(|v| v.2).sum())).unwrap_or_default();
        let record = Profile {
            profile_id: format!("{}/{}/{}/{}/{}", dp.system_id, dp.system_version, dp.source.as_str(), period.name, period.end),
            system_id: dp.system_id.clone(),
            system_version: dp.system_version.clone(),
            source: dp.source,
            period: period.name.clone(),
            period_start: period.start,
            period_end: period.end,
            generated_at,
            catalogue_version: CATALOGUE_VERSION.to_string(),
            method: METHOD.to_string(),
            level: boot.level,
            replicates: boot.replicates as i32,
            seed: boot.seed as i64,
            metrics,
            dimensions: dp.dimensions.clone(),
            unsuitable: dp.unsuitable,
            gate: gate_outcome.map(|g| format!("{g:?}").to_lowercase()),
            gate_na_reason: gate_na_reason.clone(),
            efficacy_index: ei,
            efficacy_index_geometric: ei_g,
            judge_human_kappa: agreement.as_ref().and_then(|a| a.kappa),
            ppi_success: agreement.as_ref().and_then(|a| a.ppi.map(|p| p.estimate)),
            ppi_ci_low: agreement.as_ref().and_then(|a| a.ppi.map(|p| p.lo)),
            ppi_ci_high: agreement.as_ref().and_then(|a| a.ppi.map(|p| p.hi)),
            evidence_uri: None,
        };
        let rows = g.observations.0.values().map(|v| v.2).sum();
        let success_provenance = std::mem::take(&mut g.provenance);
        let suites = record
            .metrics
            .iter()
            .filter_map(|m| Some((m.benchmark.clone()?, cfg.evaluation.profile.suite(m.benchmark.as_deref())?)))
            .collect();
        built.push(Built {
            suites,
            success_provenance,
            gate_na_reason,
            windows: by_group.remove(&key).unwrap_or_default(),
            dimension_profile: dp,
            core,
            gate,
            agreement,
            reproducibility: beside.reproducibility.remove(&key).unwrap_or_default(),
            system_type: cfg.evaluation.system_type(&key.0),
            families: family_reports(&beside.families.remove(&key).unwrap_or_default(), cfg),
            agents: agent_reports(&beside.agents.remove(&key).unwrap_or_default()),
            observations: TableInput { files: g.files.into_iter().collect(), offsets: g.observations.ranges(), rows },
            trajectory_events: TableInput {
                files: lake_files(cfg, "trajectory_events", &key.0, period).await?.into_iter().collect(),
                offsets: ev_offsets,
                rows: ev_rows,
            },
            // Set by `crate::run`, which opened the session.
            lake_versions: BTreeMap::new(),
            duplicates: reading.duplicates.get(&key).copied().unwrap_or(0),
            hours_from_store: reading.stored_hours.len(),
            release: None,
            reruns: None,
            meta,
            record,
            period: period.clone(),
        });
    }
    Ok(built)
}

/// Phases 5 and 6: each profile's discriminative power among the period's profiles of its
/// source (meta-evaluation), and each declared release's comparison with its baseline.
pub(super) async fn across_profiles(ctx: &SessionContext, cfg: &ReportConfig, period: &Period, built: &mut [Built]) -> Result<()> {
    let records: Vec<&Profile> = built.iter().map(|b| &b.record).collect();
    let power = crate::meta_evaluation::discriminative_power(&records, cfg.evaluation.bootstrap.level);
    // The run starts of the period, read once when some version may need them.
    let mut firsts: Option<crate::compare::FirstRuns> = None;
    // Re-runs against their originals: one read for every profile of the period.
    // Not when no share is declared (a re-run nobody requested is never tested). A check that
    // fails is logged and left out: the profiles stand without it.
    let mut reruns = if cfg.reruns.share > 0.0 {
        crate::reruns::check(ctx, &cfg.reruns, cfg.compare.alpha, cfg.evaluation.bootstrap.seed, period).await.unwrap_or_else(|e| {
            tracing::error!(error = %e, period = %period.name, "the re-run check failed");
            Vec::new()
        })
    } else {
        Vec::new()
    };
    for b in built.iter_mut() {
        let r = &b.record;
        if let Some(i) = reruns
            .iter()
            .position(|c| c.system == r.system_id && c.version == r.system_version && c.source == crate::sql::lake_source(r.source))
        {
            let c = reruns.swap_remove(i);
            if c.flagged() && c.tested() {
                tracing::warn!(system = %c.system, version = %c.version, diverged = ?c.diverged, "re-runs diverged from their originals: flagged for resolution");
            }
            b.reruns = Some(c);
        }
        b.meta.discriminative_power = power.iter().filter(|d| d.source == b.record.source.as_str()).cloned().collect();
        let r = &b.record;
        if let Some(release) =
            cfg.compare.releases.iter().find(|x| x.system == r.system_id && x.candidate == r.system_version && x.source == r.source)
        {
            b.release = Some(crate::compare::compare(ctx, &cfg.compare, cfg.evaluation.bootstrap.seed, release, period).await?);
        } else if cfg.compare.automatic
            // A version a declared release names as the baseline is the older one: the
            // declaration's order wins over the order of first runs.
            && !cfg.compare.releases.iter().any(|x| x.system == r.system_id && x.baseline == r.system_version)
        {
            if firsts.is_none() {
                firsts = Some(crate::compare::first_runs(ctx, period).await?);
            }
            let Some(previous) =
                crate::compare::previous_version(firsts.as_ref().expect("read above"), &r.system_id, r.source, &r.system_version)
            else {
                continue;
            };
            // Re-evaluation on change: a new version is compared with the one before it.
            let release = crate::compare::Release::new(&r.system_id, &previous, &r.system_version, r.source);
            let mut c = crate::compare::compare(ctx, &cfg.compare, cfg.evaluation.bootstrap.seed, &release, period).await?;
            c.automatic = true;
            tracing::info!(
                system = %r.system_id,
                baseline = %previous,
                candidate = %r.system_version,
                decision = %c.decision,
                "release comparison started by a new version"
            );
            b.release = Some(c);
        }
    }
    Ok(())
}

/// The table's files that can hold the system's rows (the log's statistics) in the `date`
/// partitions the period covers.
async fn lake_files(cfg: &ReportConfig, table: &str, system: &str, period: &Period) -> Result<BTreeSet<String>> {
    let (first, last) = (octant_lake::date_of(period.start), octant_lake::date_of(period.end - 1));
    let files = octant_lake::reader::system_files(&cfg.lake, &cfg.storage, table, system)
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    Ok(files.into_iter().filter(|(_, d)| d.as_str() >= first.as_str() && d.as_str() <= last.as_str()).map(|(f, _)| f).collect())
}
