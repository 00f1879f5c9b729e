//! `octant compare`: a release decision, version against version of one system — from the lake
//! (paired tests on the same tasks), or live during a canary rollout (`--follow`, from
//! `octant.observations`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use octant_contracts::Source;
use octant_core::gate::GateOutcome;
use octant_core::stats::canary::Decision;
use octant_profiler::ProfilerConfig;
use octant_report::compare::{self, Release};

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[arg(long)]
    pub system: String,
    /// The version released now.
    #[arg(long)]
    pub baseline: String,
    /// The version that would replace it.
    #[arg(long)]
    pub candidate: String,
    /// Whose runs: `evaluation` (default from the lake: both versions ran the same tasks) or
    /// `production` (default with --follow: the canary's traffic).
    #[arg(long, value_parser = ["evaluation", "production"])]
    pub source: Option<String>,
    /// The lake (a directory or an object-store URL).
    #[arg(long, default_value = "octant-lake")]
    pub lake: PathBuf,
    /// Length of the period, ending at --until.
    #[arg(long, default_value = "7d", value_parser = humantime::parse_duration)]
    pub since: Duration,
    /// End of the period (RFC 3339; default now).
    #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
    pub until: Option<std::time::SystemTime>,
    /// The compared component: the recorded configuration fields that may differ between the
    /// versions (repeatable: config_hash, agent_config, decoding, environment_version,
    /// task_spec; default agent_config and config_hash). Anything else that differs, or that
    /// changed within a version, refuses the comparison (configuration freeze, harness parity).
    #[arg(long = "compared")]
    pub compared: Vec<String>,
    /// Only these metrics (repeatable; default the configuration's `[compare] metrics`).
    #[arg(long = "metric")]
    pub metrics: Vec<String>,
    #[arg(long, default_value = "table", value_parser = ["table", "json", "md"])]
    pub format: String,
    /// Profiler configuration: its `[compare]` section (gates on differences, α, canary
    /// margins) and `[evaluation.bootstrap]` seed.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Exit status says the decision: 0 promote, 2 promote with conditions, 3 hold / roll
    /// back, 4 undecided (no gated metric, or --follow reached --limit), 5 refused (the
    /// versions' configuration differs beyond the compared component).
    #[arg(long)]
    pub check: bool,
    /// Follow the live observation stream (a canary rollout) instead of reading the lake.
    #[arg(long)]
    pub follow: bool,
    /// Brokers of the stream (--follow).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// Stop following after this long, undecided (--follow; default: until decided).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub limit: Option<Duration>,
    /// Print the canary's state this often (--follow).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub every: Duration,
}

pub async fn run(a: CompareArgs) -> anyhow::Result<()> {
    let mut cfg: ProfilerConfig =
        octant_runtime::config::load(a.config.as_deref(), "OCTANT_PROFILER").context("failed to load configuration")?;
    if !a.metrics.is_empty() {
        if a.follow {
            let margins = std::mem::take(&mut cfg.report.compare.canary_margins);
            for m in &a.metrics {
                let margin = margins.get(m).copied().with_context(|| format!("--metric {m}: no [compare.canary_margins] entry"))?;
                cfg.report.compare.canary_margins.insert(m.clone(), margin);
            }
        } else {
            cfg.report.compare.metrics = a.metrics.clone();
        }
    }
    cfg.check().map_err(anyhow::Error::msg)?;
    let source = match a.source.as_deref() {
        Some("production") => Source::Production,
        Some(_) => Source::Evaluation,
        None if a.follow => Source::Production,
        None => Source::Evaluation,
    };
    if a.follow && !a.compared.is_empty() {
        anyhow::bail!(
            "--compared applies to comparisons from the lake: the canary (--follow) reads observations, which record no configuration"
        );
    }
    let mut release = Release::new(&a.system, &a.baseline, &a.candidate, source);
    if !a.compared.is_empty() {
        release.compared = a.compared.clone();
    }
    release.check().map_err(anyhow::Error::msg)?;
    if a.follow {
        return follow(&a, &cfg, release).await;
    }
    cfg.report.evaluation.declare_instruments().map_err(anyhow::Error::msg)?;
    let (period, _) = crate::lake_cmd::lake_period(&a.lake, a.since, a.until)?;
    let ctx = octant_lake::reader::open_with(&a.lake, &cfg.report.storage).await?;
    let c = compare::compare(&ctx, &cfg.report.compare, cfg.report.evaluation.bootstrap.seed, &release, &period).await?;
    match a.format.as_str() {
        "json" => println!("{}", serde_json::to_string_pretty(&c)?),
        "md" => print!("{}", compare::to_markdown(&c)),
        _ => print!("{}", compare::to_table(&c)),
    }
    if a.check {
        std::process::exit(match c.verdict {
            _ if c.parity.refused() => 5,
            Some(GateOutcome::Pass) => 0,
            Some(GateOutcome::Conditional) => 2,
            Some(GateOutcome::Fail) => 3,
            None => 4,
        });
    }
    Ok(())
}

async fn follow(a: &CompareArgs, cfg: &ProfilerConfig, release: Release) -> anyhow::Result<()> {
    let mut tracker = octant_report::canary::Tracker::new(&cfg.report.compare, release).map_err(anyhow::Error::msg)?;
    let kafka = octant_runtime::KafkaConfig { brokers: a.brokers.clone(), ..cfg.kafka.clone() };
    let json = a.format == "json";
    let observations = octant_runtime::topic::follow(&kafka, "compare", &[octant_contracts::topics::OBSERVATIONS])?;
    let decision = octant_report::canary::follow(observations, &mut tracker, a.limit, a.every, |t| {
        if json {
            let v = serde_json::json!({"decision": t.decision(), "runs": {"baseline": t.runs[0], "candidate": t.runs[1]}, "metrics": t.status()});
            println!("{v}");
        } else {
            print!("{}", t.render());
        }
    })
    .await?;
    if a.check {
        std::process::exit(match decision {
            Decision::NotWorse => 0,
            Decision::Worse => 3,
            Decision::Continue => 4,
        });
    }
    Ok(())
}
