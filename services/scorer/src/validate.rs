//! Validation of trajectory events: the rules for "schema-valid but impossible" input.
//! Each rejected event becomes a dead letter of class `invalid_value` with the reason.
//!
//! | rule | reason |
//! |---|---|
//! | exactly one body, the one `kind` names | `kind STEP without a step body`, `more than one body` |
//! | `run_id` non-empty and equal to the Kafka key | partitioning by run id is the contract |
//! | `sequence` ≥ 0 (a run start is at 0, or — a run written in parts — after the part before) | |
//! | `event_time` > 0 | milliseconds since the epoch |
//! | step: tokens, cost, latency ≥ 0 and finite; confidence in [0, 1] | |
//! | run started: attempt ≥ 0, optimal steps ≥ 1, required sub-goals ≥ 0, contamination in [0, 1] | |
//! | run ended: verdicts and confidence in [0, 1]; counts ≥ 0; unsupported ≤ assertive | |
//! | run ended, grounding: counts ≥ 0; each part ≤ its whole (strict ≤ lenient ≤ citations, cited sentences ≤ assertive, …) | `grounding.claims_unsupported 5 exceeds claims 4` |
//! | run ended, coordination: counts ≥ 0; correct delegations ≤ delegations, contained faults ≤ injected, relevant ≤ judged messages, resolved ≤ conflicts, correct ≤ verifications, unproductive ≤ reasoning paths | `coordination.faults_contained 3 exceeds faults_injected 2` |
//! | run ended, review: counts and minutes ≥ 0, caught ≤ seeded; a manual baseline > 0 and with its kind | `review.manual_minutes without manual_baseline …` |
//!
//! Parse, don't validate: a valid event comes back as a [`Valid`] event with its one [`Body`],
//! typed, so run assembly needs no `expect` on an unwritten agreement.

use octant_contracts::{Coordination, EventKind, Grounding, Intervention, Review, RunEnded, RunStarted, Step, TrajectoryEvent};

/// The one body of a valid event: a run's start, or something inside a started run.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    Start(&'a RunStarted),
    InRun(InRun<'a>),
}

/// The body of an event inside a run.
#[derive(Debug, Clone, Copy)]
pub enum InRun<'a> {
    Step(&'a Step),
    Intervention(&'a Intervention),
    End(&'a RunEnded),
}

/// An event that passed every rule above, with its body.
#[derive(Debug, Clone, Copy)]
pub struct Valid<'a> {
    pub event: &'a TrajectoryEvent,
    pub body: Body<'a>,
}

fn unit(name: &str, v: Option<f64>) -> Result<(), String> {
    match v {
        Some(x) if !(0.0..=1.0).contains(&x) || !x.is_finite() => Err(format!("{name} {x} is outside [0, 1]")),
        _ => Ok(()),
    }
}

fn non_negative(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 { Ok(()) } else { Err(format!("{name} {v} is negative or not finite")) }
}

/// Checks an event against the rules above (`key` is the Kafka key, when present) and returns
/// it with its body, or the reason it is impossible.
pub fn validate<'a>(ev: &'a TrajectoryEvent, key: Option<&[u8]>) -> Result<Valid<'a>, String> {
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
    let set =
        [ev.run_started.is_some(), ev.step.is_some(), ev.intervention.is_some(), ev.run_ended.is_some()].iter().filter(|b| **b).count();
    if set != 1 {
        return Err(format!("{set} bodies set; exactly one is required"));
    }
    let body = match (ev.kind, &ev.run_started, &ev.step, &ev.intervention, &ev.run_ended) {
        (EventKind::RunStarted, Some(b), ..) => Body::Start(b),
        (EventKind::Step, _, Some(b), ..) => Body::InRun(InRun::Step(b)),
        (EventKind::Intervention, _, _, Some(b), _) => Body::InRun(InRun::Intervention(b)),
        (EventKind::RunEnded, .., Some(b)) => Body::InRun(InRun::End(b)),
        _ => return Err(format!("kind {:?} does not name the body that is set", ev.kind)),
    };
    if let Some(s) = &ev.run_started {
        // A run start is usually at 0; a run written in parts starts each part after the one
        // before (the assembler tells a resumption from a second start).
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
        if let Some(t) = s.tokens.filter(|t| *t < 0) {
            return Err(format!("negative tokens {t}"));
        }
        if let Some(cost) = s.cost {
            non_negative("cost", cost)?;
        }
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
        if let Some(g) = &e.grounding {
            grounding(g, e.sentences_assertive)?;
        }
        if let Some(r) = &e.review {
            review(r)?;
        }
        if let Some(c) = &e.coordination {
            coordination(c)?;
        }
    }
    Ok(Valid { event: ev, body })
}

/// Counts per class: none negative, no part larger than its whole.
fn grounding(g: &Grounding, assertive: Option<i32>) -> Result<(), String> {
    let pairs = [
        ("citations_used_strict", g.citations_used_strict, "citations", g.citations),
        ("citations_used_lenient", g.citations_used_lenient, "citations", g.citations),
        ("citations_used_strict", g.citations_used_strict, "citations_used_lenient", g.citations_used_lenient),
        ("citations_required_cited", g.citations_required_cited, "citations_required", g.citations_required),
        ("sentences_cited", g.sentences_cited, "sentences_assertive", assertive),
        ("sentences_irrelevant", g.sentences_irrelevant, "sentences_total", g.sentences_total),
        ("key_elements_captured", g.key_elements_captured, "key_elements_expected", g.key_elements_expected),
        ("claims_unsupported", g.claims_unsupported, "claims", g.claims),
    ];
    parts_within_wholes("grounding", &pairs)
}

/// Counts of the record `record`: none negative, no part above its whole.
fn parts_within_wholes(record: &str, pairs: &[(&str, Option<i32>, &str, Option<i32>)]) -> Result<(), String> {
    for &(part, p, whole, w) in pairs {
        for (name, v) in [(part, p), (whole, w)] {
            if v.is_some_and(|n| n < 0) {
                return Err(format!("negative {record}.{name}"));
            }
        }
        if let (Some(p), Some(w)) = (p, w)
            && p > w
        {
            return Err(format!("{record}.{part} {p} exceeds {whole} {w}"));
        }
    }
    Ok(())
}

/// Coordination counts: none negative, no part above its whole (messages may exceed the
/// reference trace's: that is what coordination efficiency measures).
fn coordination(c: &Coordination) -> Result<(), String> {
    for (name, v) in [("messages", c.messages), ("messages_optimal", c.messages_optimal)] {
        if v.is_some_and(|n| n < 0) {
            return Err(format!("negative coordination.{name}"));
        }
    }
    let pairs = [
        ("delegations_correct", c.delegations_correct, "delegations", c.delegations),
        ("faults_contained", c.faults_contained, "faults_injected", c.faults_injected),
        ("messages_relevant", c.messages_relevant, "messages_judged", c.messages_judged),
        ("conflicts_resolved", c.conflicts_resolved, "conflicts", c.conflicts),
        ("verifications_correct", c.verifications_correct, "verifications", c.verifications),
        ("unproductive_paths", c.unproductive_paths, "reasoning_paths", c.reasoning_paths),
    ];
    parts_within_wholes("coordination", &pairs)
}

/// Review counts and minutes: none negative, caught ≤ seeded, a manual baseline positive and
/// of a declared kind (estimated and observed baselines are never pooled).
fn review(r: &Review) -> Result<(), String> {
    for (name, v) in [("seeded_defects", r.seeded_defects), ("seeded_caught", r.seeded_caught)] {
        if v.is_some_and(|n| n < 0) {
            return Err(format!("negative review.{name}"));
        }
    }
    if let (Some(s), Some(c)) = (r.seeded_defects, r.seeded_caught)
        && c > s
    {
        return Err(format!("review.seeded_caught {c} exceeds seeded_defects {s}"));
    }
    for (name, v) in [("review_minutes", r.review_minutes), ("generation_minutes", r.generation_minutes)] {
        if let Some(v) = v {
            non_negative(&format!("review.{name}"), v)?;
        }
    }
    if let Some(m) = r.manual_minutes {
        if !(m.is_finite() && m > 0.0) {
            return Err(format!("review.manual_minutes {m} must be a positive number"));
        }
        if r.manual_baseline.is_none() {
            return Err("review.manual_minutes without manual_baseline (estimated or observed; never pooled)".into());
        }
    }
    Ok(())
}
