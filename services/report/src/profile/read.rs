//! Phases 1 and 2: read the period — whole hours from the pane-sum store when stored and still
//! complete, every other hour from the observations through the window code — and merge them
//! into the period's pane sums, storing the settled hours read here for the next profiles.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Field, Float64Type, Int32Type, Int64Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use octant_contracts::{Observation, Source};
use octant_core::stats::bootstrap::BootstrapSpec;
use octant_engine::panes::Period as Period_;
use octant_engine::window::{Added, Emission, WindowSpec, Windows};

use super::{Group, GroupKey, StoredPart, blocking, lists_observation_files, observations_sql_in, opt_str, provenance_of, source_of};
use crate::config::ReportConfig;
use crate::pane_store::{GroupMeta, HOUR_MS, Store, SystemHour};
use crate::sql::{Period, col};

/// The state of a profile while its period is read.
pub(super) struct Reading<'a> {
    pub(super) cfg: &'a ReportConfig,
    pub(super) period: &'a Period,
    system: Option<&'a str>,
    generated_at: i64,
    pub(super) boot: BootstrapSpec,
    threads: usize,
    /// The period's hours: `[h0, h_end)`, the first and last possibly partial.
    h0: i64,
    h_end: i64,
    store: Option<Store>,
    /// The lake's observation files and commit marks before any observation is read (what a
    /// stored hour is known to hold).
    lake_files_now: Vec<String>,
    marks: BTreeMap<String, i64>,
    /// Whether this session sees the lake's files (a table registered empty, because the lake
    /// had no file when the session opened, would store empty hours).
    listed: bool,
    merged: Period_,
    pub(super) groups: BTreeMap<GroupKey, Group>,
    pub(super) duplicates: BTreeMap<GroupKey, u64>,
    pub(super) stored_hours: BTreeSet<i64>,
}

/// What the observations read here leave for phase 2: the window code's panes, and per hour and
/// (system, version, source) what a stored hour keeps of its rows.
pub(super) struct Fresh {
    windows: Windows,
    hour_groups: BTreeMap<(i64, GroupKey), GroupMeta>,
}

impl<'a> Reading<'a> {
    pub(super) async fn open(
        ctx: &SessionContext,
        cfg: &'a ReportConfig,
        period: &'a Period,
        system: Option<&'a str>,
        generated_at: i64,
    ) -> Result<Reading<'a>> {
        let (h0, h_end) = (period.start.div_euclid(HOUR_MS) * HOUR_MS, (period.end - 1).div_euclid(HOUR_MS) * HOUR_MS + HOUR_MS);
        let store = cfg.pane_store().map(|d| Store::new(d, &cfg.evaluation));
        let lake_files_now: Vec<String> = match &store {
            Some(_) => octant_lake::reader::table_files(&cfg.lake, &cfg.storage, "observations")
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
                .into_iter()
                .map(|(f, _)| f)
                .collect(),
            None => Vec::new(),
        };
        let marks = match &store {
            Some(_) => crate::pane_store::commit_marks(&cfg.lake, &cfg.storage, &lake_files_now)
                .map_err(|e| DataFusionError::External(Box::new(e)))?,
            None => BTreeMap::new(),
        };
        Ok(Reading {
            cfg,
            period,
            system,
            generated_at,
            boot: cfg.bootstrap_spec(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            h0,
            h_end,
            store,
            lake_files_now,
            marks,
            listed: lists_observation_files(ctx).await,
            merged: Period_::new(),
            groups: BTreeMap::new(),
            duplicates: BTreeMap::new(),
            stored_hours: BTreeSet::new(),
        })
    }

    /// A whole hour of the period that ended `pane_settle` before the run.
    fn settled(&self, h: i64) -> bool {
        h >= self.period.start
            && h + HOUR_MS <= self.period.end
            && h + HOUR_MS + self.cfg.pane_settle.as_millis() as i64 <= self.generated_at
    }

    fn hours(&self) -> impl Iterator<Item = i64> + use<> {
        (self.h0..self.h_end).step_by(HOUR_MS as usize)
    }

    /// Phase 1a: the settled hours the store holds and still complete, read and merged on every
    /// core, each thread into its own period state.
    pub(super) fn read_stored(&mut self) {
        let Some(store) = &self.store else { return };
        let candidates: Vec<(i64, Vec<String>)> = self
            .hours()
            .filter(|h| self.settled(*h))
            .filter_map(|h| {
                let marker = store.marker(h)?;
                if crate::pane_store::stale(&self.cfg.lake, &self.lake_files_now, &marker, h) {
                    return None;
                }
                Some((h, marker.systems.into_iter().filter(|s| self.system.is_none_or(|x| x == s.as_str())).collect()))
            })
            .collect();
        let per = candidates.len().div_ceil(self.threads).max(1);
        let boot = self.boot;
        let parts: Vec<StoredPart> = blocking(|| {
            std::thread::scope(|scope| {
                let handles: Vec<_> = candidates.chunks(per).map(|chunk| scope.spawn(move || read_hours(store, chunk, &boot))).collect();
                handles.into_iter().map(|h| h.join().expect("reading the store never panics")).collect()
            })
        });
        for (hours, part, metas) in parts {
            if !self.merged.absorb(part, &self.boot) {
                tracing::warn!("stored panes that do not merge with each other were left out");
            }
            self.stored_hours.extend(hours);
            for (sys, g) in metas {
                let key = (sys, g.version.clone(), source_of(&g.source));
                let group = self.groups.entry(key.clone()).or_default();
                for (topic, partition, first, last, rows) in &g.offsets {
                    group.observations.merge(topic, *partition, *first, *last, *rows);
                }
                for (metric, by) in g.provenance {
                    for (p, n) in by {
                        *group.provenance.entry(metric.clone()).or_default().entry(p).or_default() += n;
                    }
                }
                *self.duplicates.entry(key).or_default() += g.duplicates;
            }
        }
    }

    /// Phase 1b: every hour not read from the store, from the observations (contiguous spans of
    /// hours in one query), through the window code.
    pub(super) async fn read_observations(&mut self, ctx: &SessionContext) -> Result<Fresh> {
        let mut ranges: Vec<(i64, i64)> = Vec::new();
        for h in self.hours().filter(|h| !self.stored_hours.contains(h)) {
            match ranges.last_mut() {
                Some(r) if r.1 == h => r.1 = h + HOUR_MS,
                _ => ranges.push((h, h + HOUR_MS)),
            }
        }
        let spec = WindowSpec { length_ms: self.h_end - self.h0, slide_ms: HOUR_MS, lateness_ms: 0 };
        let mut fresh = Fresh { windows: Windows::new(spec, self.boot, None), hour_groups: BTreeMap::new() };
        if ranges.is_empty() {
            return Ok(fresh);
        }
        let mut stream = ctx.sql(&observations_sql_in(self.period, self.system, &ranges)).await?.execute_stream().await?;
        while let Some(batch) = stream.next().await {
            self.add_batch(&batch?, &mut fresh)?;
        }
        Ok(fresh)
    }

    /// One batch of observation rows into the window code and the bookkeeping of their groups
    /// and hours.
    fn add_batch(&mut self, b: &arrow::array::RecordBatch, fresh: &mut Fresh) -> Result<()> {
        let list = DataType::List(std::sync::Arc::new(Field::new("item", DataType::Utf8, true)));
        let s = |n: &str| col(b, n, &DataType::Utf8);
        let (id, metric, sys, ver, source, agent, run, task, bench, cluster, topic) = (
            s("observation_id")?,
            s("metric")?,
            s("system_id")?,
            s("system_version")?,
            s("source")?,
            s("agent_id")?,
            s("run_id")?,
            s("task_id")?,
            s("benchmark")?,
            s("cluster_id")?,
            s("kafka_topic")?,
        );
        let prov = s("provenance")?;
        let attempt = col(b, "attempt", &DataType::Int32)?;
        let groups_col = col(b, "groups", &list)?;
        let step = col(b, "step", &DataType::Int64)?;
        let t = col(b, "t", &DataType::Int64)?;
        let value = col(b, "value", &DataType::Float64)?;
        let weight = col(b, "weight", &DataType::Float64)?;
        let conf = col(b, "confidence", &DataType::Float64)?;
        let part = col(b, "kafka_partition", &DataType::Int32)?;
        let off = col(b, "kafka_offset", &DataType::Int64)?;
        let (attempt, step, t, value, weight, conf, part, off) = (
            attempt.as_primitive::<Int32Type>(),
            step.as_primitive::<Int64Type>(),
            t.as_primitive::<Int64Type>(),
            value.as_primitive::<Float64Type>(),
            weight.as_primitive::<Float64Type>(),
            conf.as_primitive::<Float64Type>(),
            part.as_primitive::<Int32Type>(),
            off.as_primitive::<Int64Type>(),
        );
        let gl = groups_col.as_list::<i32>();
        for i in 0..b.num_rows() {
            let source = match source.as_string::<i32>().value(i) {
                "EVALUATION" | "evaluation" => Source::Evaluation,
                _ => Source::Production,
            };
            let o = Observation {
                observation_id: id.as_string::<i32>().value(i).to_string(),
                metric: metric.as_string::<i32>().value(i).to_string(),
                system_id: sys.as_string::<i32>().value(i).to_string(),
                system_version: ver.as_string::<i32>().value(i).to_string(),
                source,
                agent_id: opt_str(&agent, i),
                run_id: run.as_string::<i32>().value(i).to_string(),
                task_id: opt_str(&task, i),
                attempt: (!attempt.is_null(i)).then(|| attempt.value(i)),
                groups: if gl.is_null(i) {
                    Vec::new()
                } else {
                    let v = gl.value(i);
                    let v = v.as_string::<i32>();
                    (0..v.len()).filter(|j| !v.is_null(*j)).map(|j| v.value(j).to_string()).collect()
                },
                benchmark: opt_str(&bench, i),
                task_family: None,
                cluster_id: cluster.as_string::<i32>().value(i).to_string(),
                step: (!step.is_null(i)).then(|| step.value(i)),
                event_time: t.value(i),
                value: value.value(i),
                weight: if weight.is_null(i) { 1.0 } else { weight.value(i) },
                confidence: (!conf.is_null(i)).then(|| conf.value(i)),
                provenance: opt_str(&prov, i).as_deref().and_then(provenance_of),
                rerun_of: None,
            };
            self.add(o, (topic.as_string::<i32>().value(i), part.value(i), off.value(i)), fresh);
        }
        Ok(())
    }

    /// One observation, read at `(topic, partition, offset)`.
    fn add(&mut self, o: Observation, (topic, partition, offset): (&str, i32, i64), fresh: &mut Fresh) {
        let key = (o.system_id.clone(), o.system_version.clone(), o.source);
        let added = fresh.windows.add(&o, offset);
        let g = self.groups.entry(key.clone()).or_default();
        g.observations.add(topic, partition, offset);
        let hour = o.event_time.div_euclid(HOUR_MS) * HOUR_MS;
        let hg = fresh.hour_groups.entry((hour, key.clone())).or_default();
        match hg.offsets.iter_mut().find(|r| r.0 == topic && r.1 == partition) {
            Some(r) => {
                (r.2, r.3, r.4) = (r.2.min(offset), r.3.max(offset), r.4 + 1);
            }
            None => hg.offsets.push((topic.to_string(), partition, offset, offset, 1)),
        }
        match added {
            Added::Duplicate => {
                *self.duplicates.entry(key).or_default() += 1;
                hg.duplicates += 1;
            }
            Added::Accepted => {
                if let Some(p) = o.provenance {
                    *g.provenance.entry(o.metric.clone()).or_default().entry(p.as_str().to_string()).or_default() += 1;
                    *hg.provenance.entry(o.metric).or_default().entry(p.as_str().to_string()).or_default() += 1;
                }
            }
            _ => {}
        }
    }

    /// Phase 2: the hours read here as pane sums, merged into the period; the whole, settled
    /// ones stored for the next profiles (only by a run over every system: a stored hour holds
    /// them all).
    pub(super) fn merge_and_store(&mut self, fresh: Fresh) {
        let mut hours: BTreeMap<i64, BTreeMap<String, SystemHour>> = BTreeMap::new();
        let storing = self.store.is_some() && self.system.is_none() && self.listed;
        for (key, h, p) in fresh.windows.pane_sums(self.threads) {
            if storing && self.settled(h) {
                hours.entry(h).or_default().entry(key.system_id.clone()).or_default().series.push((key.clone(), p.clone()));
            }
            if !self.merged.add(key.clone(), h, p, &self.boot) {
                tracing::warn!(hour = h, series = ?key, "a pane does not merge with the series' stored panes; left out");
            }
        }
        let Some(store) = self.store.as_ref().filter(|_| storing) else { return };
        for ((h, (sys, version, source)), meta) in fresh.hour_groups {
            if self.settled(h) {
                let meta = GroupMeta { version, source: source.as_str().to_string(), ..meta };
                hours.entry(h).or_default().entry(sys).or_default().groups.push(meta);
            }
        }
        for h in self.hours().filter(|h| self.settled(*h) && !self.stored_hours.contains(h)) {
            let hour = hours.remove(&h).unwrap_or_default();
            match store.write_hour(h, &hour, self.marks.clone()) {
                Ok(true) => {}
                Ok(false) => tracing::debug!(hour = h, "pane sums too large to store; the hour stays read from the observations"),
                Err(e) => tracing::warn!(hour = h, error = %e, "storing pane sums failed; the hour stays read from the observations"),
            }
        }
    }

    /// Phase 3a: the period's window over the merged hours (`None`: no series).
    pub(super) fn window(&self) -> Option<Emission> {
        let mut e = self.merged.emission(self.h0, self.h_end, &self.boot, self.threads)?;
        (e.window_start, e.window_end) = (self.period.start, self.period.end);
        // The first pane may start before the period (a partial hour): its data starts with it.
        for s in &mut e.series {
            if let Some(w) = &mut s.evidence {
                w.since = w.since.max(self.period.start);
            }
        }
        Some(e)
    }
}

/// The stored hours of `chunk`, each with the systems it holds: an hour counts only when every
/// one of its systems reads back.
fn read_hours(store: &Store, chunk: &[(i64, Vec<String>)], boot: &BootstrapSpec) -> StoredPart {
    let (mut hours, mut part, mut metas) = (Vec::new(), Period_::new(), Vec::new());
    for (h, systems) in chunk {
        let Some(read) = systems.iter().map(|s| store.read(*h, s).map(|x| (s, x))).collect::<Option<Vec<_>>>() else {
            continue;
        };
        for (sys, hour) in read {
            for (key, p) in hour.series {
                if !part.add(key.clone(), *h, p, boot) {
                    tracing::warn!(hour = h, series = ?key, "a stored pane does not merge with the series; left out");
                }
            }
            metas.extend(hour.groups.into_iter().map(|g| (sys.clone(), g)));
        }
        hours.push(*h);
    }
    (hours, part, metas)
}
