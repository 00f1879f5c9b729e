//! Validation of trajectory events: the rules for "schema-valid but impossible" input.
//! Each rejected event becomes a dead letter of class `invalid_value` with the reason.
//!
//! | rule | reason |
//! |---|---|
//! | exactly one body, the one `kind` names | `kind STEP without a step body`, `more than one body` |
//! | `run_id` non-empty and equal to the Kafka key | partitioning by run id is the contract |
//! | `sequence` ≥ 0, and 0 exactly for run started | |
//! | `event_time` > 0 | milliseconds since the epoch |
//! | step: tokens, cost, latency ≥ 0 and finite; confidence in [0, 1] | |
//! | run started: attempt ≥ 0, optimal steps ≥ 1, required sub-goals ≥ 0, contamination in [0, 1] | |
//! | run ended: verdicts and confidence in [0, 1]; counts ≥ 0; unsupported ≤ assertive | |

use octant_contracts::{EventKind, TrajectoryEvent};

fn unit(name: &str, v: Option<f64>) -> Result<(), String> {
    match v {
        Some(x) if !(0.0..=1.0).contains(&x) || !x.is_finite() => Err(format!("{name} {x} is outside [0, 1]")),
        _ => Ok(()),
    }
}

fn non_negative(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 { Ok(()) } else { Err(format!("{name} {v} is negative or not finite")) }
}

/// Checks an event against the rules above. `key` is the Kafka key, when present.
pub fn validate(ev: &TrajectoryEvent, key: Option<&[u8]>) -> Result<(), String> {
    if ev.run_id.is_empty() {
        return Err("empty run_id".into());
    }
    if let Some(k) = key
        && k != ev.run_id.as_bytes()
    {
        return Err(format!("Kafka key {:?} is not the run id {:?}", String::from_utf8_lossy(k), ev.run_id));
    }
    if ev.system.id.is_empty() {
        return Err("empty system id".into());
    }
    if ev.sequence < 0 {
        return Err(format!("negative sequence {}", ev.sequence));
    }
    if ev.event_time <= 0 {
        return Err(format!("event_time {} is not a positive epoch-millisecond time", ev.event_time));
    }
    let bodies = [ev.run_started.is_some(), ev.step.is_some(), ev.intervention.is_some(), ev.run_ended.is_some()];
    if bodies.iter().filter(|b| **b).count() != 1 {
        return Err(format!("{} bodies set; exactly one is required", bodies.iter().filter(|b| **b).count()));
    }
    let matches = match ev.kind {
        EventKind::RunStarted => bodies[0],
        EventKind::Step => bodies[1],
        EventKind::Intervention => bodies[2],
        EventKind::RunEnded => bodies[3],
    };
    if !matches {
        return Err(format!("kind {:?} does not name the body that is set", ev.kind));
    }
    if let Some(s) = &ev.run_started {
        if ev.sequence != 0 {
            return Err(format!("run started at sequence {} (must be 0)", ev.sequence));
        }
        if s.attempt < 0 {
            return Err(format!("negative attempt {}", s.attempt));
        }
        if s.optimal_steps.is_some_and(|n| n < 1) {
            return Err("optimal_steps must be at least 1".into());
        }
        if s.required_subgoals.is_some_and(|n| n < 0) {
            return Err("negative required_subgoals".into());
        }
        unit("contamination", s.benchmark.as_ref().and_then(|b| b.contamination))?;
    }
    if let Some(s) = &ev.step {
        if s.tokens < 0 {
            return Err(format!("negative tokens {}", s.tokens));
        }
        non_negative("cost", s.cost)?;
        non_negative("latency_ms", s.latency_ms)?;
        unit("confidence", s.confidence)?;
    }
    if let Some(e) = &ev.run_ended {
        unit("judge_verdict", e.judge_verdict)?;
        unit("human_verdict", e.human_verdict)?;
        unit("confidence", e.confidence)?;
        for (name, v) in [
            ("subgoals_done", e.subgoals_done),
            ("sentences_assertive", e.sentences_assertive),
            ("sentences_unsupported", e.sentences_unsupported),
        ] {
            if v.is_some_and(|n| n < 0) {
                return Err(format!("negative {name}"));
            }
        }
        if let (Some(a), Some(u)) = (e.sentences_assertive, e.sentences_unsupported)
            && u > a
        {
            return Err(format!("{u} unsupported sentences of {a} assertive ones"));
        }
    }
    Ok(())
}
