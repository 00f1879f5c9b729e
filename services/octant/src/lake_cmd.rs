//! `octant profile` and `octant sql`: the lake from the command line.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use octant_lake::reader::{self as lakedb, Format};
use octant_lake::store::is_url;
use octant_profiler::{Period, ProfilerConfig};
use octant_report::evidence;

#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// The lake (what the lake writer writes): a directory or an object-store URL
    /// (`s3://bucket/prefix`, credentials from `AWS_*` or the config's `[storage]`).
    #[arg(long, default_value = "octant-lake")]
    pub lake: PathBuf,
    /// Only this system.
    #[arg(long)]
    pub system: Option<String>,
    /// Length of the period, ending at --until.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub since: Duration,
    /// End of the period (RFC 3339, e.g. 2026-11-30T12:00:00Z; default now).
    #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
    pub until: Option<std::time::SystemTime>,
    #[arg(long, default_value = "table", value_parser = ["table", "json", "md", "html"])]
    pub format: String,
    /// Where the evidence packages are written.
    #[arg(long, default_value = "octant-evidence")]
    pub evidence: PathBuf,
    /// Profiler configuration (bootstrap, budgets, gates, weights); its lake and evidence
    /// settings are overridden by the flags.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SqlArgs {
    /// The lake; every table is registered by name (trajectory_events, observations,
    /// watermarks, metric_windows, dimension_profiles, alerts, profiles, rerun_requests,
    /// dead_letters, raw_records), with a `system_id` column and the `date` partition column. A directory or
    /// an object-store URL (`s3://bucket/prefix`, credentials from `AWS_*`).
    #[arg(long, default_value = "octant-lake")]
    pub lake: PathBuf,
    /// The statement, e.g. "SELECT metric, count(*) FROM observations GROUP BY metric".
    pub sql: String,
    #[arg(long, default_value = "table")]
    pub format: Format,
}

pub async fn profile(a: ProfileArgs) -> anyhow::Result<()> {
    let mut cfg: ProfilerConfig =
        octant_runtime::config::load(a.config.as_deref(), "OCTANT_PROFILER").context("failed to load configuration")?;
    cfg.report.lake = a.lake.clone();
    cfg.evidence = a.evidence.clone();
    cfg.check().map_err(anyhow::Error::msg)?;
    let (period, until) = lake_period(&a.lake, a.since, a.until)?;
    let now = octant_runtime::dlq::now_ms();
    let built = octant_profiler::run_once(&cfg, std::slice::from_ref(&period), a.system.as_deref(), now).await?;
    if built.is_empty() {
        eprintln!("no observations in {} for the period ending {}", a.lake.display(), humantime::format_rfc3339_seconds(until));
        return Ok(());
    }
    match a.format.as_str() {
        "json" => {
            let v: Vec<serde_json::Value> = built.iter().map(|b| evidence::to_json(b, &cfg.report, &cfg.report.lake)).collect();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        "md" => {
            for b in &built {
                println!("{}", evidence::to_markdown(b, &cfg.report.lake));
            }
        }
        "html" => {
            for b in &built {
                println!("{}", evidence::to_html(b, &cfg.report.lake));
            }
        }
        _ => {
            let header = format!("{:<12} {:<8} {:<5} {:>8}", "system", "version", "src", "units");
            let rows = built.iter().map(|b| {
                let units: i64 = b.record.metrics.iter().filter(|m| m.metric == "task_success").map(|m| m.units).sum();
                (
                    format!("{:<12} {:<8} {:<5} {:>8}", b.record.system_id, b.record.system_version, &b.record.source.as_str()[..4], units),
                    &b.dimension_profile,
                )
            });
            print!("{}", crate::view::profile_table(rows, &header));
            println!(
                "period {} ({} to {}); units = runs ended; {} bootstrap replicates, seed {}",
                period.name,
                humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(period.start.max(0) as u64)),
                humantime::format_rfc3339_seconds(until),
                cfg.report.evaluation.bootstrap.replicates,
                cfg.report.evaluation.bootstrap.seed
            );
        }
    }
    for b in &built {
        eprintln!("evidence: {}", b.record.evidence_uri.as_deref().unwrap_or("?"));
    }
    Ok(())
}

/// Checks that `lake` is there and returns the period of length `since` ending at `until`
/// (default now), and that end.
pub fn lake_period(
    lake: &std::path::Path,
    since: Duration,
    until: Option<std::time::SystemTime>,
) -> anyhow::Result<(Period, std::time::SystemTime)> {
    anyhow::ensure!(
        is_url(&lake.to_string_lossy()) || lake.is_dir(),
        "no lake at {} (run the lake writer, or `octant demo`, first)",
        lake.display()
    );
    let until = until.unwrap_or_else(std::time::SystemTime::now);
    let end = until.duration_since(std::time::UNIX_EPOCH).context("--until is before 1970")?.as_millis() as i64;
    Ok((Period { name: octant_report::config::period_name(since), start: end - since.as_millis() as i64, end }, until))
}

pub async fn sql(a: SqlArgs) -> anyhow::Result<()> {
    anyhow::ensure!(is_url(&a.lake.to_string_lossy()) || a.lake.is_dir(), "no lake at {}", a.lake.display());
    let ctx = lakedb::open_with(&a.lake, &Default::default()).await?;
    let (schema, batches) = lakedb::query(&ctx, &a.sql).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    print!("{}", lakedb::render(&schema, &batches, a.format)?);
    Ok(())
}

#[derive(Args, Debug)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub command: RunsCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum RunsCommand {
    /// One run's trajectory from the lake as a timeline (steps, tools, impact, confirmations,
    /// violations, interventions, each agent's lane), its unsafe steps marked `!!`, and the
    /// observations it produced. Exit status 1 when the lake holds no event of the run.
    Show {
        run_id: String,
        /// The lake: a directory or an object-store URL.
        #[arg(long, default_value = "octant-lake")]
        lake: PathBuf,
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        format: String,
    },
}

#[derive(Args, Debug)]
pub struct LakeArgs {
    #[command(subcommand)]
    pub command: LakeCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum LakeCommand {
    /// Converts a lake written before Delta tables (`<table>/system_id=…/date=…/`, markers
    /// under `_commits/`) into Delta tables, once: committed units only, rewritten under
    /// `<table>/date=…/` with their `system_id` as a column; the lake writer then resumes
    /// after the markers. Stop the lake writer first. The old directories stay (hidden) until
    /// you delete them.
    Migrate {
        /// The lake directory.
        #[arg(long, default_value = "octant-lake")]
        lake: PathBuf,
    },
    /// Compacts every table (small files of each input partition and date merged), removes
    /// dates past a table's retention (`--keep`), deletes files removed or orphaned longer
    /// ago than `--vacuum-retention` (VACUUM), and writes a checkpoint of each table. Safe
    /// while the lake writers run (they compact their own partitions in the background too);
    /// schedule it daily (deploy/kubernetes/lake-maintain.yaml).
    Maintain(MaintainArgs),
    /// Erases one system's or one run's rows from every table of the lake (a data-protection
    /// request), deletes the files that held them at once (older versions of the tables can no
    /// longer be read where they listed those files), removes the pane-sum hours and evidence
    /// packages that included them, and records who asked, when and the predicate in the
    /// `erasures` table (never the values). Records still on the Kafka topics age out with
    /// the topics' retention.
    Erase(EraseArgs),
}

#[derive(Args, Debug)]
pub struct MaintainArgs {
    /// The lake: a directory or an object-store URL.
    #[arg(long, default_value = "octant-lake")]
    pub lake: PathBuf,
    /// Compacted files are at most this many bytes.
    #[arg(long, default_value_t = octant_lake::maintain::TARGET_FILE_BYTES)]
    pub target_bytes: i64,
    /// A table's retention: `TABLE=DAYS` (repeat per table); dates older are removed. Tables
    /// without one keep everything.
    #[arg(long)]
    pub keep: Vec<String>,
    /// Files removed from a table (or never committed) are deleted this long after (Delta's
    /// default: readers of older versions and queries in flight still find them until then).
    #[arg(long, default_value = "7d", value_parser = humantime::parse_duration)]
    pub vacuum_retention: Duration,
}

#[derive(Args, Debug)]
pub struct EraseArgs {
    /// The lake: a directory or an object-store URL.
    #[arg(long, default_value = "octant-lake")]
    pub lake: PathBuf,
    /// Erase every row of this system.
    #[arg(long, conflicts_with = "run")]
    pub system: Option<String>,
    /// Erase every row of this run.
    #[arg(long)]
    pub run: Option<String>,
    /// Who asked (kept in the erasure record and the tables' commits).
    #[arg(long)]
    pub by: String,
    /// Why (a ticket or request id; kept in the record).
    #[arg(long, default_value = "")]
    pub reason: String,
    /// The pane-sum store (default: `<lake>/_pane_sums` for a local lake).
    #[arg(long)]
    pub pane_sums: Option<PathBuf>,
    /// The profiler's evidence directory.
    #[arg(long, default_value = "octant-evidence")]
    pub evidence: PathBuf,
    /// Files of interrupted units (in no table) written at least this long ago are deleted
    /// too; younger ones may belong to a unit a writer is about to commit (a writer commits
    /// its files within 10 minutes of writing them or writes them again; far above that, a
    /// writer paused between that check and its commit). With every lake writer stopped, `0s`
    /// deletes them all.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub orphan_age: Duration,
}

pub async fn lake(a: LakeArgs) -> anyhow::Result<()> {
    match a.command {
        LakeCommand::Migrate { lake } => migrate(lake).await,
        LakeCommand::Maintain(m) => tokio::task::spawn_blocking(move || maintain(m)).await?,
        LakeCommand::Erase(e) => tokio::task::spawn_blocking(move || erase(e)).await?,
    }
}

fn open_lake(lake: &std::path::Path) -> anyhow::Result<octant_lake::Lake> {
    let location = lake.to_string_lossy();
    anyhow::ensure!(is_url(&location) || lake.is_dir(), "no lake at {}", lake.display());
    octant_lake::Lake::open(&location, &Default::default()).with_context(|| format!("cannot open the lake {}", lake.display()))
}

fn maintain(m: MaintainArgs) -> anyhow::Result<()> {
    let lake = open_lake(&m.lake)?;
    let props = octant_lake::lake::writer_properties();
    let today = octant_lake::date_of(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64);
    let mut keep = std::collections::BTreeMap::new();
    for k in &m.keep {
        let (table, days) = k.split_once('=').with_context(|| format!("--keep {k}: expected TABLE=DAYS"))?;
        anyhow::ensure!(octant_lake::schema::table(table).is_some(), "--keep {k}: no table {table}");
        keep.insert(table.to_string(), days.parse::<u32>().with_context(|| format!("--keep {k}: DAYS is a whole number"))?);
    }
    for t in octant_lake::schema::TABLES {
        if let Some(days) = keep.get(t.name) {
            let before = octant_lake::date_of(
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64 - i64::from(*days) * 86_400_000,
            );
            let expired = lake.expire(t.name, &before)?;
            println!("{}: {} files of dates before {before} removed (kept {days} days up to {today})", t.name, expired.removed);
        }
        let c = lake.compact(t.name, None, m.target_bytes, &props)?;
        let deleted = lake.vacuum(t.name, m.vacuum_retention, true)?;
        lake.checkpoint(t.name)?;
        println!(
            "{}: {} files compacted into {}; {deleted} files deleted (removed or orphaned over {} ago)",
            t.name,
            c.removed,
            c.added,
            humantime::format_duration(m.vacuum_retention)
        );
    }
    Ok(())
}

fn erase(e: EraseArgs) -> anyhow::Result<()> {
    use octant_lake::maintain::Subject;
    let subject = match (e.system, e.run) {
        (Some(s), None) => Subject::System(s),
        (None, Some(r)) => Subject::Run(r),
        _ => anyhow::bail!("say which: --system ID or --run ID"),
    };
    anyhow::ensure!(!e.by.trim().is_empty(), "--by: who asked for the erasure (kept in the record)");
    let lake = open_lake(&e.lake)?;
    let done = lake.erase(&subject, &e.by, &e.reason, e.orphan_age, &octant_lake::lake::writer_properties())?;
    let pane_sums = e.pane_sums.or_else(|| (!is_url(&e.lake.to_string_lossy())).then(|| e.lake.join("_pane_sums")));
    let system = match &subject {
        Subject::System(s) => Some(s.as_str()),
        Subject::Run(_) => None,
    };
    let hours = match &pane_sums {
        Some(dir) => octant_report::pane_store::forget(dir, system, &done.hours)
            .with_context(|| format!("cannot remove stored hours from {}", dir.display()))?,
        None => 0,
    };
    let run = match &subject {
        Subject::Run(r) => Some(r.as_str()),
        Subject::System(_) => None,
    };
    let packages =
        evidence::forget(&e.evidence, system, run).with_context(|| format!("cannot remove evidence from {}", e.evidence.display()))?;
    let summary = serde_json::json!({
        "predicate": subject.predicate(),
        "tables": done.tables,
        "files_deleted": done.deleted,
        "pane_sum_hours_removed": hours,
        "evidence_packages_removed": packages.len(),
    });
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

async fn migrate(lake: PathBuf) -> anyhow::Result<()> {
    anyhow::ensure!(lake.is_dir(), "no lake directory at {}", lake.display());
    let done = tokio::task::spawn_blocking(move || octant_lake::migrate::migrate(&lake)).await??;
    for (table, (files, rows)) in &done.tables {
        println!("{table}: {files} files, {rows} rows");
    }
    println!("{} files of uncommitted units left out; the old system_id=… directories and _commits/ can be deleted", done.uncommitted);
    Ok(())
}

pub async fn runs(a: RunsArgs) -> anyhow::Result<()> {
    let RunsCommand::Show { run_id, lake, format } = a.command;
    anyhow::ensure!(is_url(&lake.to_string_lossy()) || lake.is_dir(), "no lake at {}", lake.display());
    let ctx = lakedb::open_with(&lake, &Default::default()).await?;
    // The shared `[evaluation]` section (`OCTANT_EVALUATION_FILE`): which violations are a
    // declared policy's, not unsafe actions.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Shared {
        #[serde(default)]
        evaluation: octant_engine::EvaluationConfig,
    }
    let shared: Shared = octant_runtime::config::load_with_shared(None, "OCTANT_RUNS", &["evaluation"])?;
    let Some(run) = octant_web::runs::load(&ctx, &run_id, &shared.evaluation.violations).await.map_err(|e| anyhow::anyhow!("{e}"))? else {
        anyhow::bail!("no event of run {} in {}", octant_web::runs::terminal_safe(&run_id, 200), lake.display());
    };
    match format.as_str() {
        "json" => println!("{}", serde_json::to_string_pretty(&run)?),
        _ => print!("{}", octant_web::runs::to_text(&run)),
    }
    Ok(())
}
