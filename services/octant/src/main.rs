//! `octant`: the command line. `octant demo` runs the whole pipeline in one process on an
//! embedded broker; `octant gen` produces a synthetic agent fleet to a cluster; `octant import`
//! brings evaluation harness logs in; `octant profile` and
//! `octant sql` read the lake; `octant compare` decides a release.

#[global_allocator]
static ALLOC: octant_runtime::Allocator = octant_runtime::Allocator;

mod compare_cmd;
mod demo;
mod gen_cmd;
mod import_cmd;
mod lake_cmd;
mod otlp_demo;
mod up;
mod view;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "octant", version, about = "Continuous evaluation of deployed AI agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the pipeline on an embedded broker with a synthetic fleet, and show it live.
    Demo(demo::DemoArgs),
    /// Produce a synthetic agent fleet with declared true rates.
    Gen(gen_cmd::GenArgs),
    /// Build the eight-dimension profile of every system from the lake, with evidence packages.
    Profile(lake_cmd::ProfileArgs),
    /// A release decision: one version of a system against another, from the lake (paired
    /// tests on the same tasks) or live during a canary rollout (--follow).
    Compare(compare_cmd::CompareArgs),
    /// Evaluation harness logs in: `octant import inspect LOG…` (Inspect AI) and `octant import
    /// tau-bench FILE…` (τ-bench, τ²-bench), to the evaluation topic, each log once.
    Import(import_cmd::ImportArgs),
    /// Run SQL over the lake (DataFusion; every lake table registered by name).
    Sql(lake_cmd::SqlArgs),
    /// Runs from the lake: `octant runs show RUN_ID` prints one run's timeline.
    Runs(lake_cmd::RunsArgs),
    /// The lake's upkeep: `octant lake migrate` converts a lake of the layout before Delta
    /// tables.
    Lake(lake_cmd::LakeArgs),
    /// Run every service (ingest, scorer, aggregator, alerter, lake writer, profiler) in one
    /// process against a cluster.
    Up(up::UpArgs),
    /// Manage the topics Octant needs.
    Topics(up::TopicsArgs),
}

/// Default log filter of every command.
pub const LOG_FILTER: &str = "warn,octant=info";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The demo owns the terminal: its logs go to a file in its run directory (it sets that up).
    if !matches!(cli.command, Command::Demo(_)) {
        octant_runtime::shutdown::init_tracing(LOG_FILTER);
    }
    match cli.command {
        Command::Demo(a) => demo::run(a).await,
        Command::Gen(a) => gen_cmd::run(a).await,
        Command::Import(a) => import_cmd::run(a).await,
        Command::Profile(a) => lake_cmd::profile(a).await,
        Command::Sql(a) => lake_cmd::sql(a).await,
        Command::Runs(a) => lake_cmd::runs(a).await,
        Command::Lake(a) => lake_cmd::lake(a).await,
        Command::Compare(a) => compare_cmd::run(a).await,
        Command::Up(a) => up::run(a).await,
        Command::Topics(a) => up::topics(a).await,
    }
}
