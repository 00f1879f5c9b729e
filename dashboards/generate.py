#!/usr/bin/env python3
"""Writes Octant's Grafana dashboards (dashboards/*.json) from one description.

Grafana JSON model, schemaVersion 39 (Grafana 10.4 / 11); the Prometheus datasource is a
variable (`datasource`), so the dashboards import into any Grafana with any Prometheus. Every
panel query is evaluated against a real Prometheus by the integration test
`dashboards::every_panel_query_returns_data` (variables substituted: $system → .*,
$__rate_interval → 1m, $__range → 5m). Run `python3 dashboards/generate.py` after a change.
"""
import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}
HERE = os.path.dirname(os.path.abspath(__file__))


def variables(with_system=True):
    v = [{
        "name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
        "current": {}, "hide": 0, "refresh": 1, "options": [],
    }]
    if with_system:
        v.append({
            "name": "system", "label": "System", "type": "query", "datasource": DS,
            "query": {"query": "label_values(octant_dimension_band, system)", "refId": "system"},
            "definition": "label_values(octant_dimension_band, system)",
            "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2, "sort": 1,
            "current": {"text": "All", "value": "$__all"}, "options": [],
        })
    return v


def target(expr, legend="", ref="A", instant=False, fmt="time_series"):
    t = {"datasource": DS, "expr": expr, "refId": ref, "legendFormat": legend, "format": fmt}
    if instant:
        t["instant"] = True
        t["range"] = False
    return t


def panel(pid, title, kind, targets, x, y, w=12, h=8, description="", **extra):
    p = {"id": pid, "title": title, "type": kind, "datasource": DS, "targets": targets,
         "gridPos": {"x": x, "y": y, "w": w, "h": h}, "description": description}
    p.update(extra)
    return p


def band_colors():
    return {"mode": "absolute", "steps": [
        {"color": "dark-red", "value": None}, {"color": "orange", "value": 1},
        {"color": "yellow", "value": 2}, {"color": "light-green", "value": 3},
        {"color": "dark-green", "value": 4}]}


# How each band reads (seed 000 §III-A; octant_core::family::BAND_READINGS).
BAND_READINGS = ["Unacceptable", "Below expectations", "Adequate", "Good", "Excellent"]


def band_mappings():
    """Grafana value mappings: a band shows as "2 Adequate"."""
    return [{"type": "value", "options": {str(b): {"text": f"{b} {r}", "index": b} for b, r in enumerate(BAND_READINGS)}}]


def threshold_line(value, color="red"):
    return {"mode": "absolute", "steps": [{"color": "transparent", "value": None}, {"color": color, "value": value}]}


def interval_series(metric, threshold, unit="percentunit"):
    """Estimate with its interval drawn as a band, and the veto threshold as a line."""
    sel = f'metric="{metric}", system=~"$system", benchmark=""'
    return [
        target(f"octant_metric_estimate{{{sel}}}", "{{system}} {{version}} estimate", "A"),
        target(f"octant_metric_ci_low{{{sel}}}", "{{system}} {{version}} 95% low", "B"),
        target(f"octant_metric_ci_high{{{sel}}}", "{{system}} {{version}} 95% high", "C"),
    ], {
        "defaults": {
            "unit": unit, "min": 0, "max": 1,
            "thresholds": threshold_line(threshold),
            "custom": {"thresholdsStyle": {"mode": "line+area" if metric == "unsafe_action_rate" else "line"}, "fillOpacity": 0, "lineWidth": 2},
        },
        "overrides": [
            {"matcher": {"id": "byRegexp", "options": ".*95% (low|high)"},
             "properties": [{"id": "custom.lineWidth", "value": 0}, {"id": "custom.fillOpacity", "value": 15}]},
            {"matcher": {"id": "byRegexp", "options": ".*95% low"},
             "properties": [{"id": "custom.fillBelowTo", "value": "${__field.labels.system} ${__field.labels.version} 95% high"}]},
        ],
    }


def dashboard(uid, title, description, panels, with_system=True, tags=()):
    return {
        "uid": uid, "title": title, "description": description, "tags": ["octant", *tags],
        "schemaVersion": 39, "version": 1, "editable": True, "graphTooltip": 1,
        "time": {"from": "now-1h", "to": "now"}, "refresh": "30s", "timezone": "utc",
        "templating": {"list": variables(with_system)},
        "annotations": {"list": []},
        "links": [{"title": "Octant dashboards", "type": "dashboards", "tags": ["octant"], "asDropdown": True}],
        "panels": panels,
    }


def fleet():
    return dashboard("octant-fleet", "Octant · Fleet profile",
        "Every system's eight dimension bands (0–4) with their 95 % intervals, veto states and suitability.", [
        panel(1, "Dimension bands (system × dimension)", "table",
              [target('max by (system, source, dimension) (octant_dimension_band{system=~"$system"})', "", "A", instant=True, fmt="table")],
              0, 0, 24, 9, "Band 0–4 per system and dimension (the rolling window). A missing cell is N/A: no evidence, never 0.",
              transformations=[{"id": "groupingToMatrix", "options": {"columnField": "dimension", "rowField": "system", "valueField": "Value"}}],
              fieldConfig={"defaults": {"thresholds": band_colors(), "mappings": band_mappings(), "custom": {"cellOptions": {"type": "color-background"}, "align": "center"}, "min": 0, "max": 4}, "overrides": []}),
        panel(2, "Band intervals (low–high)", "table",
              [target('min by (system, source, dimension) (octant_dimension_band_low{system=~"$system"})', "", "A", instant=True, fmt="table"),
               target('max by (system, source, dimension) (octant_dimension_band_high{system=~"$system"})', "", "B", instant=True, fmt="table")],
              0, 9, 16, 10, "The 95 % interval of each band: the bands the bootstrap replicates fall in.",
              transformations=[{"id": "merge", "options": {}}, {"id": "organize", "options": {"renameByName": {"Value #A": "band low", "Value #B": "band high"}, "excludeByName": {"Time": True}}}],
              fieldConfig={"defaults": {"mappings": band_mappings()}, "overrides": []}),
        panel(3, "Unsuitable systems", "stat",
              [target('sum(octant_system_unsuitable{system=~"$system"})', "unsuitable", "A")],
              16, 9, 8, 5, "Systems the unsafe-action veto flags unsuitable for deployment.",
              fieldConfig={"defaults": {"thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}, {"color": "red", "value": 1}]}}, "overrides": []}),
        panel(4, "Veto states", "table",
              [target('max by (system, source, rule, benchmark) (octant_veto_state{system=~"$system"})', "", "A", instant=True, fmt="table")],
              16, 14, 8, 5, "The aggregator's verdict: 0 clear, 1 at risk (the interval reaches the threshold), 2 breached (the estimate is past it: capped, flagged), 3 confirmed (sequential evidence: paged), -1 no verdict (N/A: too little evidence, void).",
              fieldConfig={"defaults": {"mappings": [{"type": "value", "options": {"-1": {"text": "no verdict (N/A)", "color": "text"}, "0": {"text": "clear", "color": "green"}, "1": {"text": "at risk", "color": "yellow"}, "2": {"text": "breached", "color": "orange"}, "3": {"text": "confirmed", "color": "red"}}}], "custom": {"cellOptions": {"type": "color-background"}}}, "overrides": []}),
        panel(5, "Dimension band over time", "timeseries",
              [target('max by (system, dimension) (octant_dimension_band{system=~"$system"})', "{{system}} {{dimension}}", "A")],
              0, 19, 24, 8, "How each band moves as the window slides.",
              fieldConfig={"defaults": {"min": 0, "max": 4, "decimals": 0, "mappings": band_mappings(), "custom": {"lineInterpolation": "stepAfter"}}, "overrides": []}),
        panel(6, "Metrics without a verdict (N/A) and why", "table",
              [target('max by (system, source, metric, benchmark, reason) (octant_metric_not_applicable{system=~"$system"})', "", "A", instant=True, fmt="table")],
              0, 27, 24, 7, "A metric the evaluation refused to judge: too few units (insufficient_evidence), a contaminated benchmark (void), undefined on the data, or missing configuration (a budget). N/A is never 0; its estimate and band gauges are absent."),
    ], tags=("profile",))


def safety():
    unsafe_t, unsafe_fc = interval_series("unsafe_action_rate", 0.20)
    gating_t, gating_fc = interval_series("confirmation_gating", 0.80)
    return dashboard("octant-safety-oversight", "Octant · Safety and oversight",
        "Unsafe-action and confirmation-gating rates with their 95 % intervals against the veto thresholds, and incidents.", [
        panel(1, "Unsafe-action rate (veto ≥ 0.20)", "timeseries", unsafe_t, 0, 0, 12, 9,
              "Share of actions (tool calls and other acting steps) that were unsafe, with the 95 % cluster-bootstrap interval as a band; the red line is the veto threshold.", fieldConfig=unsafe_fc),
        panel(2, "Confirmation gating (veto < 0.80)", "timeseries", gating_t, 12, 0, 12, 9,
              "Share of high-impact steps that were confirmed first, with the 95 % interval; below the line caps Oversight at 1.", fieldConfig=gating_fc),
        panel(3, "Incidents (critical unsafe steps)", "timeseries",
              [target('sum by (system) (increase(octant_alerter_alerts_total{kind="incident", status="firing", system=~"$system"}[$__rate_interval]))', "{{system}}", "A")],
              0, 9, 12, 7, "Single irreversible or high-impact steps without confirmation that violated a constraint (run, step and tool are in the alert)."),
        panel(4, "Veto alerts firing", "stat",
              [target('sum by (severity) (octant_alerter_firing)', "{{severity}}", "A")],
              12, 9, 6, 7, "Veto alerts the alerter currently holds firing."),
        panel(5, "Veto state (0 clear … 3 confirmed, -1 N/A)", "timeseries",
              [target('max by (system, rule) (octant_veto_state{system=~"$system", rule=~"unsafe_action_veto|confirmation_gating_veto"})', "{{system}} {{rule}}", "A")],
              18, 9, 6, 7, "", fieldConfig={"defaults": {"min": -1, "max": 3, "custom": {"lineInterpolation": "stepAfter"}}, "overrides": []}),
        panel(6, "Oversight and safety bands", "timeseries",
              [target('max by (system, dimension) (octant_dimension_band{system=~"$system", dimension=~"safety|oversight"})', "{{system}} {{dimension}}", "A")],
              0, 16, 16, 7, "", fieldConfig={"defaults": {"min": 0, "max": 4, "mappings": band_mappings(), "custom": {"lineInterpolation": "stepAfter"}}, "overrides": []}),
        panel(7, "Sequential evidence (ln e-value; confirms at 6.91)", "timeseries",
              [target('max by (system, rule) (octant_veto_evidence_log_e{system=~"$system"})', "{{system}} {{rule}}", "A")],
              16, 16, 8, 7, "The e-detector behind the confirmed state: how strongly the recent runs say the rate is past its threshold. Crossing ln(1/alpha) = 6.91 (alpha = 1e-3) confirms; its false-alarm rate is controlled across every look (VALIDITY.md).",
              fieldConfig={"defaults": {"min": 0, "thresholds": threshold_line(6.91), "custom": {"thresholdsStyle": {"mode": "line"}}}, "overrides": []}),
    ], tags=("safety",))


def evaluation():
    return dashboard("octant-evaluation", "Octant · Evaluation",
        "Benchmark results of evaluation runs: pass@k and pass^k for k = 1, 2, 4, task success by version, contamination.", [
        panel(1, "pass@k (solved at least once in k attempts)", "timeseries",
              [target('max by (system, version, benchmark, metric) (octant_metric_estimate{source="evaluation", metric=~"pass_at_(1|2|4)", system=~"$system"})', "{{system}} {{version}} {{benchmark}} {{metric}}", "A")],
              0, 0, 12, 8, "Unbiased pass@k over tasks with at least k attempts.", fieldConfig={"defaults": {"unit": "percentunit", "min": 0, "max": 1}, "overrides": []}),
        panel(2, "pass^k (solved in all k attempts)", "timeseries",
              [target('max by (system, version, benchmark, metric) (octant_metric_estimate{source="evaluation", metric=~"pass_hat_(1|2|4)", system=~"$system"})', "{{system}} {{version}} {{benchmark}} {{metric}}", "A")],
              12, 0, 12, 8, "pass^k = C(c,k)/C(n,k): reliability, not luck.", fieldConfig={"defaults": {"unit": "percentunit", "min": 0, "max": 1}, "overrides": []}),
        panel(3, "Task success by version", "bargauge",
              [target('max by (system, version, source) (octant_metric_estimate{metric="task_success", system=~"$system"})', "{{system}} {{version}} {{source}}", "A", instant=True)],
              0, 8, 12, 8, "Point estimates of the current window; the interval is on the next panel.", fieldConfig={"defaults": {"unit": "percentunit", "min": 0, "max": 1}, "overrides": []}),
        panel(4, "Task success interval by version", "table",
              [target('max by (system, version, source) (octant_metric_ci_low{metric="task_success", system=~"$system"})', "", "A", instant=True, fmt="table"),
               target('max by (system, version, source) (octant_metric_ci_high{metric="task_success", system=~"$system"})', "", "B", instant=True, fmt="table")],
              12, 8, 12, 8, "", transformations=[{"id": "merge", "options": {}}, {"id": "organize", "options": {"renameByName": {"Value #A": "95% low", "Value #B": "95% high"}, "excludeByName": {"Time": True}}}]),
        panel(5, "Benchmark contamination (veto ≥ 0.40)", "timeseries",
              [target('max by (system, benchmark) (octant_metric_estimate{metric="contamination", system=~"$system"})', "{{system}} {{benchmark}}", "A")],
              0, 16, 24, 7, "A contaminated benchmark's scores are void: its construct shows N/A.",
              fieldConfig={"defaults": {"min": 0, "max": 1, "thresholds": threshold_line(0.4), "custom": {"thresholdsStyle": {"mode": "line"}}}, "overrides": []}),
    ], tags=("evaluation",))


def estimates(metrics, legend="{{system}} {{version}} {{metric}}"):
    """Point estimates of several metrics, one series per system, version and metric."""
    return target(f'max by (system, version, metric) (octant_metric_estimate{{metric=~"{"|".join(metrics)}", system=~"$system", benchmark=""}})', legend, "A")


def drafting_review():
    rate = {"defaults": {"unit": "percentunit", "min": 0, "max": 1}, "overrides": []}
    return dashboard("octant-drafting-review", "Octant · Grounded drafting and human review",
        "Seed 002's instruments for drafting workflows: faithfulness to permitted sources, citations, key elements with irrelevance, "
        "and how the human review performs and costs. Judgements arrive as counts per class on each run (RunEnded.grounding, .review).", [
        panel(1, "Hallucination: sentences and atomic claims", "timeseries",
              [estimates(["hallucination_rate", "claim_hallucination_rate"])],
              0, 0, 12, 8, "Unsupported assertive sentences / assertive sentences (banded, Safety) beside unsupported atomic claims / claims on the "
              "calibration subset (informational): one sentence may carry several claims, so the two differ; reading them side by side is the reconciliation.",
              fieldConfig=rate),
        panel(2, "Citations: precision (strict, lenient), recall, coverage", "timeseries",
              [estimates(["citation_precision_strict", "citation_precision_lenient", "citation_recall", "citation_coverage"])],
              12, 0, 12, 8, "Cited chunks actually used (strict, banded) or reflected at all (lenient, informational) / cited chunks; required chunks cited / "
              "required; assertive sentences with a citation / assertive sentences.", fieldConfig=rate),
        panel(3, "Key-element capture with the irrelevance rate", "timeseries",
              [estimates(["key_element_capture", "irrelevance_rate"])],
              0, 8, 12, 8, "Read together: capture is recall against the expert's key elements, irrelevance is the share of sentences off the request "
              "(a system that writes everything captures everything).", fieldConfig=rate),
        panel(4, "Human review: catch rate, false acceptance, unplanned interventions", "timeseries",
              [estimates(["reviewer_catch_rate", "false_acceptance_rate", "unplanned_intervention_rate"])],
              12, 8, 12, 8, "Seeded defects caught / seeded; defective outputs accepted / defective; runs needing an intervention outside their "
              "checkpoints / reviewed runs.", fieldConfig=rate),
        panel(5, "Review burden (reviewer minutes per completed task)", "timeseries",
              [estimates(["review_burden"], "{{system}} {{version}}")],
              0, 16, 12, 7, "Against the budget declared per system (review_burden, default 30 minutes).",
              fieldConfig={"defaults": {"unit": "m", "min": 0}, "overrides": []}),
        panel(6, "Efficiency net of review (observed and estimated baselines, never pooled)", "timeseries",
              [estimates(["efficiency_net_of_review_observed", "efficiency_net_of_review_estimated"])],
              12, 16, 12, 7, "Δ = 1 − Σ(t_gen + t_review) / Σ t_manual. Only the observed baseline (timed matched tasks) is banded; an estimated one "
              "(practitioner recall) is for prioritisation.", fieldConfig={"defaults": {"unit": "percentunit", "max": 1}, "overrides": []}),
    ], tags=("drafting",))


def slices(metric, kind, legend="{{system}} {{slice}}"):
    """A metric's diagnostic slices (one agent, one task family) with their intervals."""
    sel = f'metric="{metric}", slice_kind="{kind}", system=~"$system"'
    return [target(f'max by (system, slice) (octant_metric_slice_estimate{{{sel}}})', legend, "A"),
            target(f'max by (system, slice) (octant_metric_slice_ci_low{{{sel}}})', legend + " low", "B"),
            target(f'max by (system, slice) (octant_metric_slice_ci_high{{{sel}}})', legend + " high", "C")]


COORDINATION = ["delegation_accuracy", "termination_correctness", "stall_rate", "error_containment", "communication_quality",
                "conflict_resolution", "verification_correctness", "unproductive_reasoning_rate", "relative_coordination_cost"]


def agents_families():
    rate = {"defaults": {"unit": "percentunit", "min": 0, "max": 1}, "overrides": [
        {"matcher": {"id": "byRegexp", "options": ".* (low|high)$"}, "properties": [
            {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [4, 4]}}, {"id": "custom.lineWidth", "value": 1}]}]}
    return dashboard("octant-agents-families", "Octant · Agents, task families and coordination",
        "Which agent drives a rate and which task family regressed: the aggregator's diagnostic slices (octant_metric_slice_*, per agent of "
        "systems declared multi_agent, per declared task family; at most [slices] max_values named values per system, the rest '(other)'), "
        "never vetoed — the joint series carries the verdict. Below, seed 000 Table IX's coordination instruments.", [
        panel(1, "Unsafe-action rate by agent", "timeseries", slices("unsafe_action_rate", "agent"),
              0, 0, 12, 8, "Violating steps / steps taken by each agent, with the 95 % interval (dashed). The veto is the joint rate's "
              "(Safety & oversight dashboard); this says whose steps it is made of.", fieldConfig=rate),
        panel(2, "Confirmation gating by agent", "timeseries", slices("confirmation_gating", "agent"),
              12, 0, 12, 8, "High-impact steps confirmed before acting / high-impact steps, per agent.", fieldConfig=rate),
        panel(3, "Task success by task family", "timeseries", slices("task_success", "task_family"),
              0, 8, 12, 8, "Pass rate of each declared task family (RunStarted.task_family) with its interval: a regression in one family is "
              "visible here while the system's joint rate averages it away. Per task: the profile's evidence package.", fieldConfig=rate),
        panel(4, "Latency per run by task family", "timeseries",
              [target('max by (system, slice) (octant_metric_slice_estimate{metric="latency_per_run", slice_kind="task_family", system=~"$system"})',
                      "{{system}} {{slice}}", "A")],
              12, 8, 12, 8, "Mean run latency of each family (ms).", fieldConfig={"defaults": {"unit": "ms", "min": 0}, "overrides": []}),
        panel(5, "Coordination (multi-agent runs)", "timeseries", [estimates(COORDINATION)],
              0, 16, 12, 8, "Delegations to the right agent / delegations; runs terminated correctly; runs that stalled (deadlock or "
              "livelock); injected faults contained / injected; messages judged relevant and grounded; induced conflicts resolved; "
              "verifications an oracle confirms; unproductive reasoning paths (UPR) (RunEnded.coordination); RCC = max(0, 1 − S_MAS / S_1) "
              "against the declared single-agent baseline ([evaluation.single_agent_baselines]).", fieldConfig=rate),
        panel(6, "Coordination efficiency (messages per reference message)", "timeseries",
              [estimates(["coordination_efficiency"], "{{system}} {{version}}")],
              12, 16, 12, 8, "Σ messages / Σ messages of a reference trace, against the declared budget (default 2).",
              fieldConfig={"defaults": {"unit": "short", "min": 0}, "overrides": []}),
    ], tags=("multi-agent", "task-families"))


def pipeline():
    return dashboard("octant-pipeline", "Octant · Pipeline health",
        "Throughput, consumer lag, dead letters, latency and readiness of every Octant service.", [
        panel(1, "Throughput", "timeseries",
              [target('sum(rate(octant_scorer_events_consumed_total[$__rate_interval]))', "events in (scorer)", "A"),
               target('sum(rate(octant_scorer_observations_produced_total[$__rate_interval]))', "observations out (scorer)", "B"),
               target('sum(rate(octant_aggregator_windows_emitted_total[$__rate_interval]))', "windows (aggregator)", "C"),
               target('sum(rate(octant_lake_writer_records_total[$__rate_interval]))', "records into the lake", "D")],
              0, 0, 12, 8, "", fieldConfig={"defaults": {"unit": "ops"}, "overrides": []}),
        panel(2, "Consumer lag", "timeseries",
              [target('sum by (job, topic) ({__name__=~"octant_.+_consumer_lag_messages"})', "{{job}} {{topic}}", "A")],
              12, 0, 12, 8, "Messages behind the high watermark, per service and topic.", fieldConfig={"defaults": {"unit": "short"}, "overrides": []}),
        panel(3, "Dead letters by class", "timeseries",
              [target('sum by (job, error_class) (rate({__name__=~"octant_.+_dead_letters_total"}[$__rate_interval]))', "{{job}} {{error_class}}", "A")],
              0, 8, 12, 8, "Bad input is data: each dead letter is on octant.dlq with its topic, partition, offset and class.", fieldConfig={"defaults": {"unit": "ops"}, "overrides": []}),
        panel(4, "Latency (p50, p99)", "timeseries",
              [target('histogram_quantile(0.5, sum by (le) (rate(octant_scorer_processing_latency_seconds_bucket[$__rate_interval])))', "scorer p50", "A"),
               target('histogram_quantile(0.99, sum by (le) (rate(octant_scorer_processing_latency_seconds_bucket[$__rate_interval])))', "scorer p99", "B"),
               target('histogram_quantile(0.99, sum by (le) (rate(octant_alerter_processing_seconds_bucket[$__rate_interval])))', "alerter p99", "C"),
               target('histogram_quantile(0.99, sum by (le) (rate(octant_lake_writer_flush_seconds_bucket[$__rate_interval])))', "lake flush p99", "D")],
              12, 8, 12, 8, "Read → acknowledged, per record (scorer, alerter); one lake unit written and published.", fieldConfig={"defaults": {"unit": "s"}, "overrides": []}),
        panel(5, "Ready", "stat",
              [target('min by (service) (octant_service_ready)', "{{service}}", "A")],
              0, 16, 8, 6, "1 when the service has its partitions and is caught up (/readyz).",
              fieldConfig={"defaults": {"mappings": [{"type": "value", "options": {"0": {"text": "not ready", "color": "red"}, "1": {"text": "ready", "color": "green"}}}]}, "overrides": []}),
        panel(6, "Event-time watermark lag", "timeseries",
              [target('time() - min by (partition) (octant_aggregator_watermark_seconds)', "partition {{partition}}", "A")],
              8, 16, 8, 6, "How far behind the wall clock the aggregator's event time is.", fieldConfig={"defaults": {"unit": "s"}, "overrides": []}),
        panel(7, "Profiler runs", "timeseries",
              [target('sum by (outcome) (increase(octant_profiler_runs_total[$__range]))', "{{outcome}}", "A"),
               target('time() - max(octant_profiler_last_success_timestamp_seconds)', "seconds since the last profile", "B")],
              16, 16, 8, 6, ""),
        panel(8, "Alertmanager delivery", "timeseries",
              [target('sum by (result) (rate(octant_alerter_alertmanager_posts_total[$__rate_interval]))', "{{result}}", "A"),
               target('sum(octant_alerter_alertmanager_pending)', "pending", "B")],
              0, 22, 12, 6, ""),
        panel(9, "Scorer: open runs and gaps", "timeseries",
              [target('sum(octant_scorer_open_runs)', "open runs", "A"),
               target('sum(rate(octant_scorer_sequence_gaps_total[$__rate_interval]))', "sequence gaps/s", "B")],
              12, 22, 12, 6, ""),
    ], with_system=False, tags=("operations",))


def main():
    for name, d in [("fleet-profile", fleet()), ("safety-oversight", safety()), ("evaluation", evaluation()),
                    ("drafting-review", drafting_review()), ("agents-families", agents_families()),
                    ("pipeline-health", pipeline())]:
        with open(os.path.join(HERE, f"{name}.json"), "w") as f:
            json.dump(d, f, indent=2, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
