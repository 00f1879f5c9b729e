"""Writes the aggregator's golden inputs (observations, as the scorer would emit them).

    python3 services/aggregator/golden/make_inputs.py

Deterministic (seeded); rerun only to change the inputs, then bless the expected windows
(`OCTANT_BLESS_GOLDEN=1 cargo test -p octant-aggregator golden`) and review the diff.

- `production.json`: one system, 80 runs of 3 steps in the hour from 08:00Z, half of whose
  steps are unsafe actions (a breached veto, confirmed by the sequential evidence),
  with gating, tool errors, audit, task success by verifier and the per-run costs.
- `evaluation.json`: one system on two benchmarks, each 30 tasks x 3 attempts of task success
  (pass@k, pass^k, consistency are derived from these) in two groups (fairness gap): `swe-mini`
  is contaminated (0.45: the veto, every construct on it void), `swe-fresh` is clean (0.02);
  and a second system too small to judge (N/A everywhere).
"""
import json
import os
import random

T0 = 1_764_489_600_000  # 2025-11-30T08:00:00Z
HERE = os.path.dirname(os.path.abspath(__file__))


def obs(metric, system, run, value, t, *, source="PRODUCTION", step=None, task=None, attempt=None, groups=(),
        benchmark=None, cluster=None, provenance=None, version="1.0.0"):
    oid = f"{run}/{metric}" + (f"/{step}" if step is not None else "")
    return {
        "observation_id": oid, "metric": metric, "system_id": system, "system_version": version, "source": source,
        "agent_id": None, "run_id": run, "task_id": task, "attempt": attempt, "groups": list(groups), "benchmark": benchmark,
        "cluster_id": cluster or run, "step": step, "event_time": t, "value": value, "weight": 1.0, "confidence": None,
        "provenance": provenance,
    }


def production(rng):
    out = []
    for r in range(80):
        run = f"g-prod-{r:02d}"
        t = T0 + r * 44_000 + 1_000
        p_unsafe = 0.5
        errors = 0
        for s in range(1, 4):
            ts = t + s * 5_000
            out.append(obs("unsafe_action_rate", "golden-bot", run, float(rng.random() < p_unsafe), ts, step=s))
            error = rng.random() < 0.1
            errors += error
            out.append(obs("tool_error_rate", "golden-bot", run, float(error), ts, step=s))
            out.append(obs("audit_completeness", "golden-bot", run, float(rng.random() < 0.97), ts, step=s))
            if s == 2:
                out.append(obs("confirmation_gating", "golden-bot", run, float(rng.random() < 0.9), ts, step=s))
        te = t + 20_000
        success = float(rng.random() < 0.8 - 0.2 * errors)
        out.append(obs("task_success", "golden-bot", run, success, te, task=f"task-{r % 10}", attempt=0, provenance="VERIFIER"))
        out.append(obs("cost_per_run", "golden-bot", run, round(rng.uniform(0.01, 0.05), 4), te))
        out.append(obs("tokens_per_run", "golden-bot", run, float(rng.randint(800, 4000)), te))
        out.append(obs("latency_per_run", "golden-bot", run, float(rng.randint(2_000, 15_000)), te))
        out.append(obs("step_efficiency", "golden-bot", run, round(min(1.0, 2 / 3 + rng.uniform(-0.1, 0.3)), 4), te))
    return out


def evaluation(rng):
    out = []
    for benchmark, contamination in (("swe-mini", 0.45), ("swe-fresh", 0.02)):
        for task in range(30):
            skill = rng.random()
            for attempt in range(3):
                run = f"g-{benchmark}-{task:02d}-{attempt}"
                t = T0 + (task * 3 + attempt) * 38_000 + 2_000
                group = "lang=en" if task % 2 == 0 else "lang=fr"
                kw = dict(source="EVALUATION", task=f"{benchmark}-{task}", attempt=attempt, groups=[group], benchmark=benchmark,
                          version="0.9")
                out.append(obs("task_success", "coder", run, float(rng.random() < skill), t + 10_000, provenance="VERIFIER", **kw))
                out.append(obs("contamination", "coder", run, contamination, t, cluster=benchmark, **kw))
    for r in range(3):
        run = f"g-small-{r}"
        out.append(obs("unsafe_action_rate", "tiny-bot", run, 0.0, T0 + r * 60_000 + 5_000, step=1))
        out.append(obs("task_success", "tiny-bot", run, 1.0, T0 + r * 60_000 + 9_000, task="t", attempt=0, provenance="VERIFIER"))
    return out


def write(name, rows):
    with open(os.path.join(HERE, "inputs", name), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]\n")


if __name__ == "__main__":
    rng = random.Random(7)
    write("production.json", production(rng))
    write("evaluation.json", evaluation(rng))
