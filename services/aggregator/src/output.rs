//! From an emitted window to the published records: one `MetricWindow` per series and one
//! `DimensionProfile` per (system, version, source). Pure.

use std::collections::BTreeMap;

use octant_contracts::{DimensionBand, DimensionProfile, MetricWindow, Source, VetoStatus};
use octant_core::catalogue::CATALOGUE_VERSION;
use octant_core::family::BandContext;
use octant_core::profile::{MetricEvaluation, Profile, ProfileRules, build_profile, evaluate_metric};
use octant_core::stats::bootstrap::{BootstrapSpec, METHOD};

use crate::config::AggregatorConfig;
use crate::window::Emission;

/// Everything one emission publishes, plus the evaluated profiles (for gauges and views).
pub struct Outputs {
    pub windows: Vec<MetricWindow>,
    pub profiles: Vec<(DimensionProfile, Profile)>,
}

/// Deterministic id of a metric window.
pub fn window_id(system: &str, version: &str, source: Source, metric: &str, benchmark: Option<&str>, end: i64) -> String {
    format!("{system}/{version}/{}/{metric}/{}/{end}", source.as_str(), benchmark.unwrap_or("-"))
}

pub fn build(e: &Emission, cfg: &AggregatorConfig, boot: &BootstrapSpec, rules: &ProfileRules) -> Outputs {
    let mut windows = Vec::new();
    let mut groups: BTreeMap<(String, String, Source), Vec<MetricEvaluation>> = BTreeMap::new();
    for s in &e.series {
        let ctx = BandContext { budget: cfg.budget(&s.key.system_id, s.key.metric), pool: None };
        let ev = evaluate_metric(s.spec, s.key.benchmark.clone(), s.units, s.estimate.as_ref(), &ctx);
        windows.push(MetricWindow {
            window_id: window_id(&s.key.system_id, &s.key.system_version, s.key.source, s.key.metric, s.key.benchmark.as_deref(), e.window_end),
            system_id: s.key.system_id.clone(),
            system_version: s.key.system_version.clone(),
            source: s.key.source,
            metric: s.key.metric.to_string(),
            dimension: s.spec.dimension.as_str().to_string(),
            benchmark: s.key.benchmark.clone(),
            window_start: e.window_start,
            window_end: e.window_end,
            units: s.units as i64,
            clusters: s.clusters as i64,
            estimate: ev.estimate,
            ci_low: ev.interval.map(|i| i.0),
            ci_high: ev.interval.map(|i| i.1),
            level: boot.level,
            replicates: boot.replicates as i32,
            seed: boot.seed as i64,
            method: METHOD.to_string(),
            band: ev.band.map(i32::from),
            band_low: ev.band_interval.map(|b| b.0 as i32),
            band_high: ev.band_interval.map(|b| b.1 as i32),
            na_reason: ev.not_applicable.as_ref().map(|n| n.describe()),
            veto_state: ev.veto.map(|v| v.as_str().to_string()),
            catalogue_version: CATALOGUE_VERSION.to_string(),
            watermark: e.window_end,
        });
        groups.entry((s.key.system_id.clone(), s.key.system_version.clone(), s.key.source)).or_default().push(ev);
    }
    let profiles = groups
        .into_iter()
        .map(|((system, version, source), evs)| {
            let p = build_profile(evs, rules);
            let record = DimensionProfile {
                profile_id: format!("{system}/{version}/{}/{}", source.as_str(), e.window_end),
                system_id: system,
                system_version: version,
                source,
                window_start: e.window_start,
                window_end: e.window_end,
                dimensions: p
                    .dimensions
                    .iter()
                    .map(|d| DimensionBand {
                        dimension: d.dimension.as_str().to_string(),
                        band: d.band.map(i32::from),
                        band_low: d.band_interval.map(|b| b.0 as i32),
                        band_high: d.band_interval.map(|b| b.1 as i32),
                        na_reason: d.not_applicable.as_ref().map(|n| n.describe()),
                        capped_by: d.caps.iter().map(|c| c.rule.clone()).collect(),
                        instruments: d.instruments.clone(),
                    })
                    .collect(),
                vetoes: p
                    .metrics
                    .iter()
                    .filter_map(|m| {
                        let rule = m.metric.veto?;
                        Some(VetoStatus {
                            rule: rule.name.to_string(),
                            metric: m.metric.id.to_string(),
                            benchmark: m.benchmark.clone(),
                            state: m.veto?.as_str().to_string(),
                            estimate: m.estimate,
                            ci_low: m.interval.map(|i| i.0),
                            ci_high: m.interval.map(|i| i.1),
                            threshold: rule.threshold,
                        })
                    })
                    .collect(),
                unsuitable: p.unsuitable,
                catalogue_version: CATALOGUE_VERSION.to_string(),
            };
            (record, p)
        })
        .collect();
    Outputs { windows, profiles }
}
