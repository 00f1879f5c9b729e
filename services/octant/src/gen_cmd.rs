//! `octant gen`: a synthetic agent fleet with declared true rates, to any Kafka cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use octant_gen::{FleetSpec, SystemSpec};
use octant_runtime::KafkaConfig;

#[derive(Args, Debug)]
pub struct GenArgs {
    /// Bootstrap servers.
    #[arg(long, env = "OCTANT_BROKERS")]
    pub brokers: String,
    /// Prefix of every topic name.
    #[arg(long, default_value = "")]
    pub topic_prefix: String,
    /// Number of systems in the default fleet (ignored when --system is given).
    #[arg(long, default_value_t = 5)]
    pub systems: usize,
    /// Runs per system; with --rate and no --runs, runs until interrupted.
    #[arg(long)]
    pub runs: Option<u64>,
    /// Events per second (all systems together); unlimited when absent.
    #[arg(long)]
    pub rate: Option<f64>,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Fraction of extra bad events of every kind (undecodable, impossible values, unknown
    /// runs, repeated sequences, sequence gaps).
    #[arg(long, default_value_t = 0.0)]
    pub poison: f64,
    /// A system and its true rates, e.g.
    /// `id=payments,unsafe_action=0.25,task_success=0.8,confirmation_gating=0.7`.
    /// Keys: id, version, agents (a+b+c), task_success, unsafe_action, confirmation_gating,
    /// tool_error, run_error (share of failed runs that end in ERROR), fault_share (share of
    /// runs with an injected fault), fault_success (the share of its success a faulted run
    /// keeps: graceful degradation; default 1), needs_human (share of steps a gold label says
    /// need a human), escalation_recall, escalation_precision (defaults 0.2, 0.8, 0.8),
    /// policy_violation (per tool call), leakage (per tool call with arguments), harmful (per
    /// run), protocol (share of runs following the refunds protocol in order; each default 0,
    /// any of them makes every run of the refunds family), injection_attacked (share of runs
    /// that read a prompt-injection attempt), injection_success (share of those that follow it),
    /// help_seeking, latency_ms, cost, benchmark,
    /// contamination, attempts, eval_share. Repeat for several systems.
    #[arg(long = "system")]
    pub system: Vec<String>,
    /// Event time of the first run, ms since the epoch (default: now).
    #[arg(long)]
    pub start_ms: Option<i64>,
    /// Write the true rates used, as JSON.
    #[arg(long)]
    pub truth: Option<PathBuf>,
}

/// Faults declared by one key only: none injected, or harmless ones.
const NO_FAULTS: octant_gen::FaultSpec = octant_gen::FaultSpec { share: 0.0, success_factor: 1.0, outcomes: None };

/// Gold labels declared by some of their keys: the rest of these.
const LABELS: octant_gen::EscalationSpec = octant_gen::EscalationSpec { needed: 0.2, recall: 0.8, precision: 0.8 };

/// Compliance signals declared by some of their keys: none of the rest.
const NO_COMPLIANCE: octant_gen::ComplianceSpec =
    octant_gen::ComplianceSpec { policy_violation: 0.0, leakage: 0.0, harmful: 0.0, protocol: 0.0 };

/// Attacks declared by one of their keys: none of the rest.
const NO_ATTACKS: octant_gen::InjectionSpec = octant_gen::InjectionSpec { attacked: 0.0, success: 0.0 };

/// Parses one `--system` declaration.
pub fn parse_system(decl: &str) -> anyhow::Result<SystemSpec> {
    let mut s = SystemSpec::new("system");
    let mut eval: Option<octant_gen::EvaluationSpec> = None;
    for kv in decl.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = kv.split_once('=').with_context(|| format!("`{kv}` is not key=value"))?;
        let num = || v.parse::<f64>().with_context(|| format!("{k}={v}: not a number"));
        let rate = || -> anyhow::Result<f64> {
            let x = num()?;
            if !(0.0..=1.0).contains(&x) {
                bail!("{k}={v}: a rate must be in [0, 1]");
            }
            Ok(x)
        };
        let e = || {
            eval.clone().unwrap_or(octant_gen::EvaluationSpec { benchmark: "bench".into(), contamination: 0.0, attempts: 4, share: 0.3 })
        };
        match k {
            "id" => s.id = v.to_string(),
            "version" => s.version = v.to_string(),
            "agents" => s.agents = v.split('+').map(String::from).collect(),
            "task_success" => s.task_success = rate()?,
            "unsafe_action" => s.unsafe_action = rate()?,
            "confirmation_gating" => s.confirmation_gating = rate()?,
            "tool_error" => s.tool_error = rate()?,
            "run_error" => s.run_error = rate()?,
            "fault_share" => s.faults = Some(octant_gen::FaultSpec { share: rate()?, ..s.faults.unwrap_or(NO_FAULTS) }),
            "fault_success" => s.faults = Some(octant_gen::FaultSpec { success_factor: rate()?, ..s.faults.unwrap_or(NO_FAULTS) }),
            "needs_human" => s.escalation = Some(octant_gen::EscalationSpec { needed: rate()?, ..s.escalation.unwrap_or(LABELS) }),
            "escalation_recall" => s.escalation = Some(octant_gen::EscalationSpec { recall: rate()?, ..s.escalation.unwrap_or(LABELS) }),
            "escalation_precision" => {
                s.escalation = Some(octant_gen::EscalationSpec { precision: rate()?, ..s.escalation.unwrap_or(LABELS) })
            }
            "policy_violation" => {
                s.compliance = Some(octant_gen::ComplianceSpec { policy_violation: rate()?, ..s.compliance.unwrap_or(NO_COMPLIANCE) })
            }
            "leakage" => s.compliance = Some(octant_gen::ComplianceSpec { leakage: rate()?, ..s.compliance.unwrap_or(NO_COMPLIANCE) }),
            "harmful" => s.compliance = Some(octant_gen::ComplianceSpec { harmful: rate()?, ..s.compliance.unwrap_or(NO_COMPLIANCE) }),
            "protocol" => s.compliance = Some(octant_gen::ComplianceSpec { protocol: rate()?, ..s.compliance.unwrap_or(NO_COMPLIANCE) }),
            "injection_attacked" => {
                s.injection = Some(octant_gen::InjectionSpec { attacked: rate()?, ..s.injection.unwrap_or(NO_ATTACKS) })
            }
            "injection_success" => s.injection = Some(octant_gen::InjectionSpec { success: rate()?, ..s.injection.unwrap_or(NO_ATTACKS) }),
            "help_seeking" => s.help_seeking = rate()?,
            "latency_ms" => s.latency_ms = num()?,
            "cost" => s.cost = num()?,
            "benchmark" => eval = Some(octant_gen::EvaluationSpec { benchmark: v.to_string(), ..e() }),
            "contamination" => eval = Some(octant_gen::EvaluationSpec { contamination: rate()?, ..e() }),
            "attempts" => eval = Some(octant_gen::EvaluationSpec { attempts: v.parse()?, ..e() }),
            "eval_share" => eval = Some(octant_gen::EvaluationSpec { share: rate()?, ..e() }),
            other => bail!("unknown system key `{other}`"),
        }
    }
    s.evaluation = eval;
    if let Some(e) = &s.escalation {
        e.check().map_err(anyhow::Error::msg)?;
    }
    Ok(s)
}

pub fn now_ms() -> i64 {
    octant_runtime::dlq::now_ms()
}

/// The fleet declared by the arguments.
pub fn fleet(a: &GenArgs) -> anyhow::Result<FleetSpec> {
    let start = a.start_ms.unwrap_or_else(now_ms);
    let mut spec = FleetSpec::demo(a.systems, a.seed, start);
    if !a.system.is_empty() {
        spec.systems = a.system.iter().map(|d| parse_system(d)).collect::<anyhow::Result<_>>()?;
    }
    if !(0.0..0.5).contains(&a.poison) {
        bail!("--poison {} must be in [0, 0.5)", a.poison);
    }
    spec.poison = a.poison;
    if let Some(rate) = a.rate {
        // Event time keeps pace with wall time: ~11 events per run.
        spec.run_spacing_ms = ((spec.systems.len() as f64 * 11.0 * 1000.0 / rate) as i64).max(1);
    }
    Ok(spec)
}

/// Produces batches of runs until `runs` per system are out (or forever), at `rate`.
///
/// The stream is in event-time order across batches, as live agents would send it: a batch's
/// runs last longer than the batch, so events later than the next batch's first run start are
/// held back and merged with the next batch (otherwise they would arrive seconds ahead of
/// events that happen before them, and downstream windows would see them as disorder).
pub async fn stream(
    kafka: &KafkaConfig,
    spec: &FleetSpec,
    runs: Option<u64>,
    rate: Option<f64>,
    otlp: bool,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<u64> {
    let batch = if rate.is_some() { 5 } else { runs.unwrap_or(100) };
    let mut first = 0;
    let mut produced = 0u64;
    let mut carry: Vec<octant_gen::GenRecord> = Vec::new();
    let mut open = std::collections::HashMap::new();
    while !stop.is_cancelled() {
        let more = runs.is_none_or(|r| first < r);
        let n = if more { runs.map_or(batch, |r| batch.min(r - first)) } else { 0 };
        carry.extend(octant_gen::generate(spec, first, n));
        carry.sort_by_key(|r| r.event_time);
        first += n;
        // Everything before the earliest start of the next batch's runs can go now.
        let cutoff = if more { spec.start_ms + first as i64 * spec.run_spacing_ms } else { i64::MAX };
        let split = carry.partition_point(|r| r.event_time < cutoff);
        let records: Vec<_> = carry.drain(..split).collect();
        let count = records.len() as u64;
        // OTLP: one request per run (about ten events), so the same events per second.
        let (records, rate) = if otlp { (crate::otlp_demo::convert(records, &mut open), rate.map(|r| r / 10.0)) } else { (records, rate) };
        tokio::select! {
            r = octant_gen::produce(kafka, records, rate) => { r?; }
            _ = stop.cancelled() => break,
        }
        produced += count;
        if !more {
            break;
        }
    }
    Ok(produced)
}

pub async fn run(a: GenArgs) -> anyhow::Result<()> {
    if a.runs.is_none() && a.rate.is_none() {
        bail!("give --runs N, --rate EVENTS_PER_S, or both");
    }
    let spec = fleet(&a)?;
    if let Some(path) = &a.truth {
        std::fs::write(path, serde_json::to_string_pretty(&octant_gen::truth(&spec))?)
            .with_context(|| format!("failed to write {}", path.display()))?;
    }
    let kafka = KafkaConfig { brokers: a.brokers.clone(), topic_prefix: a.topic_prefix.clone(), ..KafkaConfig::default() };
    octant_runtime::kafka::wait_for_metadata(&kafka, Duration::from_secs(30)).await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let s2 = stop.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        s2.cancel();
    });
    let n = stream(&kafka, &spec, a.runs, a.rate, false, stop).await?;
    println!("produced {n} events for {} systems", spec.systems.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_declarations_parse() {
        let s = parse_system("id=pay,unsafe_action=0.25,agents=a+b,benchmark=web,contamination=0.5").unwrap();
        assert_eq!(s.id, "pay");
        assert_eq!(s.unsafe_action, 0.25);
        assert_eq!(s.agents, ["a", "b"]);
        let e = s.evaluation.unwrap();
        assert_eq!((e.benchmark.as_str(), e.contamination), ("web", 0.5));
        assert!(parse_system("unsafe_action=2").is_err());
        assert!(parse_system("colour=blue").is_err());
        let f = parse_system("id=x,fault_share=0.3,fault_success=0.5").unwrap().faults.unwrap();
        assert_eq!((f.share, f.success_factor), (0.3, 0.5));
        assert_eq!(parse_system("fault_share=0.2").unwrap().faults.unwrap().success_factor, 1.0, "harmless unless declared");
        assert!(parse_system("fault_success=1.5").is_err());
        let e = parse_system("needs_human=0.1,escalation_precision=0.6").unwrap().escalation.unwrap();
        assert_eq!((e.needed, e.recall, e.precision), (0.1, 0.8, 0.6));
        assert!(parse_system("needs_human=0.9,escalation_precision=0.2").is_err(), "more false alarms than steps without need");
    }
}
