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
    /// watermarks, metric_windows, dimension_profiles, alerts, profiles, dead_letters,
    /// raw_records), with a `system_id` column and the `date` partition column. A directory or
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
}

pub async fn lake(a: LakeArgs) -> anyhow::Result<()> {
    let LakeCommand::Migrate { lake } = a.command;
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
    let Some(run) = octant_web::runs::load(&ctx, &run_id).await.map_err(|e| anyhow::anyhow!("{e}"))? else {
        anyhow::bail!("no event of run {} in {}", octant_web::runs::terminal_safe(&run_id, 200), lake.display());
    };
    match format.as_str() {
        "json" => println!("{}", serde_json::to_string_pretty(&run)?),
        _ => print!("{}", octant_web::runs::to_text(&run)),
    }
    Ok(())
}
