//! `octant`: the command line. `octant demo` runs the whole pipeline in one process on an
//! embedded broker; `octant gen` produces a synthetic agent fleet to a cluster.

mod demo;
mod gen_cmd;

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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    octant_runtime::shutdown::init_tracing("warn,octant=info");
    match cli.command {
        Command::Demo(a) => demo::run(a).await,
        Command::Gen(a) => gen_cmd::run(a).await,
    }
}
