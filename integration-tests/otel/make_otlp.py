"""Builds OTLP export requests with the official OpenTelemetry Python SDK (spans: a real
TracerProvider, exported in memory, encoded by opentelemetry-exporter-otlp-proto-common) and the
official opentelemetry-proto messages (log events), in both Kafka encodings of the Collector:
otlp_proto (the protobuf bytes) and otlp_json (the OTLP/JSON mapping: camelCase, hex ids,
integer enums). Independent of Octant's Rust decoders.

Reads nothing; writes one JSON document to stdout:
  {"requests": [{"topic": "spans"|"logs", "key": str|null, "payload_hex": str}], "traces": {...}}
With the argument `raters`: rated runs for the meta-evaluation instead, with their true rates
("truth") and the statistics of the very ratings sent ("sample"), computed here.

Run by integration-tests/tests/ingest.rs with PYTHONPATH=.octant/otel (scripts/setup.sh installs
opentelemetry-sdk, opentelemetry-proto and opentelemetry-exporter-otlp-proto-common 1.45.2).
"""
import base64
import json
import random
import sys

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

T0 = 1_764_489_600_000_000_000  # 2025-11-30T08:00:00Z in ns
MS = 1_000_000
SCHEMA = "https://opentelemetry.io/schemas/1.37.0"


class Ids(IdGenerator):
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def generate_span_id(self):
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self):
        return self.rng.getrandbits(128) or 1


def provider(service, version, seed):
    exporter = InMemorySpanExporter()
    p = TracerProvider(resource=Resource.create({"service.name": service, "service.version": version}), id_generator=Ids(seed))
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p, exporter


def otlp_json(msg):
    d = MessageToDict(msg, use_integers_for_enums=True)

    def fix(o):
        if isinstance(o, dict):
            for k in ("traceId", "spanId", "parentSpanId"):
                if isinstance(o.get(k), str):
                    o[k] = base64.b64decode(o[k]).hex()
            for v in o.values():
                fix(v)
        elif isinstance(o, list):
            for v in o:
                fix(v)

    fix(d)
    return json.dumps(d, separators=(",", ":")).encode()


def kv(k, v):
    if isinstance(v, bool):
        a = AnyValue(bool_value=v)
    elif isinstance(v, int):
        a = AnyValue(int_value=v)
    elif isinstance(v, float):
        a = AnyValue(double_value=v)
    else:
        a = AnyValue(string_value=str(v))
    return KeyValue(key=k, value=a)


def logs_request(records, scope=("ragas", "0.2.1")):
    return ExportLogsServiceRequest(resource_logs=[ResourceLogs(
        resource=PbResource(attributes=[kv("service.name", "evaluator")]),
        scope_logs=[ScopeLogs(scope=InstrumentationScope(name=scope[0], version=scope[1]), log_records=records)])])


def event(name, at_ms, attrs, trace_id=None, span_id=None):
    return LogRecord(time_unix_nano=T0 + at_ms * MS, observed_time_unix_nano=T0 + at_ms * MS, severity_number=9, event_name=name,
                     trace_id=trace_id.to_bytes(16, "big") if trace_id else b"", span_id=span_id.to_bytes(8, "big") if span_id else b"",
                     attributes=[kv(k, v) for k, v in attrs.items()])


out = {"requests": [], "traces": {}}


def put(topic, payload, key=None):
    out["requests"].append({"topic": topic, "key": key, "payload_hex": payload.hex()})


def raters(n=300, seed=11):
    """rated-bot: n runs whose answers three humans and a judge rate (good 1 / bad 0), the judge
    re-rating some, and a judge and a human comparing each answer with ref-bot's in both orders,
    with known rates; results as gen_ai.evaluation.result events naming their evaluator
    (gen_ai.evaluation.evaluator.name) and the response they rate (gen_ai.response.id).
    Writes the true rates and, computed here from the very ratings sent, the sample statistics
    Octant must reproduce."""
    q, human_flip, judge_flip, retest, win, b, v = 0.7, 0.05, 0.15, 0.3, 0.6, 0.2, 0.3
    rng = random.Random(seed)
    p, exp = provider("rated-bot", "1.0.0", 5)
    tr = p.get_tracer("agent-sdk", "1.0", schema_url=SCHEMA)
    judge_first, majority, repeats, swapped, longer_judge, longer_human, wins = [], [], [], [], [], [], []
    for r in range(n):
        t = T0 + r * 10_000 * MS
        root = tr.start_span("invoke_agent rated", start_time=t, attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "rated"})
        chat = tr.start_span("chat m", context=trace.set_span_in_context(root), kind=SpanKind.CLIENT, start_time=t + 10 * MS,
                             attributes={"gen_ai.operation.name": "chat", "gen_ai.response.id": f"resp-{r}"})
        chat.end(end_time=t + 200 * MS)
        root.end(end_time=t + 300 * MS)
        put("spans", encode_spans(exp.get_finished_spans()).SerializeToString())
        exp.clear()
        tid, sid = root.get_span_context().trace_id, root.get_span_context().span_id
        good = rng.random() < q
        events = []

        def rate(evaluator, kind, flip, at=400):
            says = good != (rng.random() < flip)
            events.append(event("gen_ai.evaluation.result", at + r * 10_000,
                                {"gen_ai.evaluation.name": "answer_quality", "gen_ai.evaluation.score.value": float(says),
                                 "gen_ai.evaluation.evaluator.name": evaluator, "octant.evaluation.rater_kind": kind,
                                 "gen_ai.response.id": f"resp-{r}"}, tid, sid))
            return says

        humans = [rate(f"human-{h}", "human", human_flip) for h in range(3)]
        majority.append(sum(humans) >= 2)
        judge_first.append(rate("judge-a", "judge", judge_flip))
        if rng.random() < retest:
            repeats.append((judge_first[-1], rate("judge-a", "judge", judge_flip, at=450)))  # later: the retest
        mine, theirs = rng.randint(50, 400), rng.randint(50, 400)
        better_is_mine = rng.random() < win
        chosen = (mine > theirs) if (mine != theirs and rng.random() < v) else better_is_mine
        orders = {"judge-a": [], "human-0": []}
        for position in (1, 2):
            judge = (position == 1) if rng.random() < b else chosen
            human = better_is_mine != (rng.random() < human_flip)
            for evaluator, kind, won in (("judge-a", "judge", judge), ("human-0", "human", human)):
                orders[evaluator].append(float(won))
                events.append(event("gen_ai.evaluation.result", 500 + r * 10_000,
                                    {"gen_ai.evaluation.name": "answer_quality_pairwise", "gen_ai.evaluation.score.value": float(won),
                                     "gen_ai.evaluation.evaluator.name": evaluator, "octant.evaluation.rater_kind": kind,
                                     "octant.evaluation.item": f"vs-{r}", "octant.evaluation.opponent": "ref-bot@1.0",
                                     "octant.evaluation.position": position, "octant.evaluation.output_length": mine,
                                     "octant.evaluation.opponent_output_length": theirs}, tid, sid))
        a, c = orders["judge-a"]
        wins += [a, c]
        swapped.append(a != c)  # this run won in one order only: the order decided
        if mine != theirs:
            pref = lambda s: s if mine > theirs else 1.0 - s
            longer_judge.append(sum(pref(x) for x in orders["judge-a"]) / 2)
            longer_human.append(sum(pref(x) for x in orders["human-0"]) / 2)
        put("logs", logs_request(events, scope=("evaluators", "1")).SerializeToString())
    # Cohen's kappa of the judge's first rating against the humans' majority.
    po = sum(j == m for j, m in zip(judge_first, majority)) / n
    pj, pm = sum(judge_first) / n, sum(majority) / n
    pe = pj * pm + (1 - pj) * (1 - pm)
    diffs = [j - h for j, h in zip(longer_judge, longer_human)]
    # The expected values (see octant_gen::RaterSpec): kappa of two raters flipping a truth of rate q.
    def expected_kappa(e1, e2):
        p1, p2 = q * (1 - e1) + (1 - q) * e1, q * (1 - e2) + (1 - q) * e2
        p_o = (1 - e1) * (1 - e2) + e1 * e2
        p_e = p1 * p2 + (1 - p1) * (1 - p2)
        return (p_o - p_e) / (1 - p_e)
    e = human_flip
    out["sample"] = {
        "kappa": (po - pe) / (1 - pe),
        "retest_items": len(repeats),
        # Mean population SD of two ratings: |x − y| / 2.
        # the mean sample variance of each item's two ratings: (x − y)² / 2
        "retest_instability": sum((x - y) ** 2 / 2 for x, y in repeats) / len(repeats),
        "position_inconsistency": sum(swapped) / n,
        "win_rate": sum(wins) / len(wins),
        "verbosity_bias": sum(diffs) / len(diffs),
        "verbosity_items": len(diffs),
    }
    out["truth"] = {
        "kappa": expected_kappa(3 * e * e * (1 - e) + e ** 3, judge_flip),
        "retest_instability": judge_flip * (1 - judge_flip),
        "position_inconsistency": b,
        "verbosity_bias": (1 - b) * v / 2,
    }
    out["runs"] = n


if len(sys.argv) > 1 and sys.argv[1] == "raters":
    raters()
    json.dump(out, sys.stdout)
    sys.exit(0)

# 1. support-bot: one multi-agent trace, its spans split over three requests (the SDK exports
#    children before their parents), protobuf and JSON, keyed by trace id and not.
p, exp = provider("support-bot", "2.1.0", 1)
tr = p.get_tracer("agent-sdk", "1.0", schema_url=SCHEMA)
root = tr.start_span("invoke_agent planner", kind=SpanKind.INTERNAL, start_time=T0,
                     attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", "gen_ai.conversation.id": "conv-7",
                                 # Grounded drafting and the human review of the answer (Octant's attributes).
                                 "octant.sentences.assertive": 10, "octant.sentences.unsupported": 1,
                                 "octant.grounding.citations": 8, "octant.grounding.citations_used_strict": 6,
                                 "octant.grounding.citations_used_lenient": 7, "octant.grounding.sentences_cited": 7,
                                 "octant.grounding.key_elements_expected": 5, "octant.grounding.key_elements_captured": 4,
                                 "octant.review.seeded_defects": 2, "octant.review.seeded_caught": 1,
                                 "octant.review.defective": True, "octant.review.accepted": False,
                                 "octant.review.review_minutes": 12.5, "octant.review.generation_minutes": 2.0,
                                 "octant.review.manual_minutes": 60.0, "octant.review.manual_baseline": "observed",
                                 # Reproducibility artefacts the conventions do not name.
                                 "octant.environment.version": "support-sim 3.1", "octant.task.spec": "refund-flow@v7",
                                 # How the planner and the payments agent coordinated.
                                 "octant.coordination.delegations": 2, "octant.coordination.delegations_correct": 1,
                                 "octant.coordination.terminated_correctly": True,
                                 "octant.coordination.reasoning_paths": 4, "octant.coordination.unproductive_paths": 1})
rctx = trace.set_span_in_context(root)
chat = tr.start_span("chat gpt-5", context=rctx, kind=SpanKind.CLIENT, start_time=T0 + 100 * MS,
                     attributes={"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5",
                                 "gen_ai.response.id": "resp-9", "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 300,
                                 "gen_ai.request.temperature": 0.3, "gen_ai.request.top_p": 0.9, "gen_ai.request.seed": 42})
chat.end(end_time=T0 + 300 * MS)
pay = tr.start_span("invoke_agent payments", context=rctx, start_time=T0 + 350 * MS,
                    attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "payments-v2"})
pctx = trace.set_span_in_context(pay)
transfer = tr.start_span("execute_tool bank.transfer", context=pctx, start_time=T0 + 400 * MS,
                         attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bank.transfer", "gen_ai.tool.call.id": "call-1",
                                     "gen_ai.tool.type": "function", "gen_ai.tool.call.arguments": "{\"amount\": 900, \"iban\": \"DE00123\"}"})
transfer.end(end_time=T0 + 600 * MS)
lookup = tr.start_span("execute_tool lookup", context=pctx, start_time=T0 + 700 * MS,
                       attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "error.type": "timeout",
                                   "octant.violations": "pii_exposure"})
lookup.set_status(Status(StatusCode.ERROR, "timeout"))
lookup.end(end_time=T0 + 750 * MS)
pay.end(end_time=T0 + 900 * MS)
root.end(end_time=T0 + 1000 * MS)
spans = exp.get_finished_spans()
trace_a = root.get_span_context().trace_id
out["traces"]["support-bot"] = format(trace_a, "032x")
put("spans", encode_spans(spans[0:2]).SerializeToString())                          # chat, transfer
put("spans", otlp_json(encode_spans(spans[2:4])), key=format(trace_a, "032x"))     # lookup, payments
put("logs", logs_request([
    event("gen_ai.tool.call.decision", 380, {"gen_ai.tool.call.id": "call-1", "gen_ai.tool.call.decision.outcome": "require_approval"},
          trace_a, transfer.get_span_context().span_id),
    event("gen_ai.tool.call.decision", 390, {"gen_ai.tool.call.id": "call-1", "gen_ai.tool.call.decision.outcome": "allow"},
          trace_a, transfer.get_span_context().span_id),
    event("gen_ai.evaluation.result", 1100, {"gen_ai.evaluation.name": "faithfulness", "gen_ai.evaluation.score.value": 0.9,
                                             "gen_ai.evaluation.explanation": "grounded"}, trace_a, root.get_span_context().span_id),
    event("some.app.event", 1100, {"x": 1}, trace_a, root.get_span_context().span_id),
    # A pairwise judge verdict (this run's answer shown second, preferred) and a set-level
    # score with its evaluator's interval: Octant's octant.evaluation.* attributes.
    event("gen_ai.evaluation.result", 1150, {"gen_ai.evaluation.name": "helpfulness_pairwise", "gen_ai.evaluation.score.value": 1.0,
                                             "octant.evaluation.rater_kind": "judge", "octant.evaluation.scoring_mode": "generation",
                                             "octant.evaluation.item": "cmp-1", "octant.evaluation.opponent": "ref-bot@1.0",
                                             "octant.evaluation.position": 2, "octant.evaluation.output_length": 412,
                                             "octant.evaluation.opponent_output_length": 198}, trace_a, root.get_span_context().span_id),
    event("gen_ai.evaluation.result", 1160, {"gen_ai.evaluation.name": "fid", "gen_ai.evaluation.score.value": 12.5,
                                             "octant.evaluation.ci_low": 11.9, "octant.evaluation.ci_high": 13.2},
          trace_a, root.get_span_context().span_id),
]).SerializeToString())
# A result that names only the response it evaluates, before the span that returned it.
put("logs", otlp_json(logs_request([event("gen_ai.evaluation.result", 1200, {"gen_ai.evaluation.name": "relevance",
                                                                              "gen_ai.evaluation.score.label": "relevant",
                                                                              "gen_ai.response.id": "resp-9"})])))
put("spans", encode_spans(spans[4:5]).SerializeToString())                          # the root, last

# 2. risky-bot: 40 runs (one trace each, one request each, a tool call per run), an unsafe tool
#    call (a declared violation) in 45 % of them; a faithfulness result per run.
p, exp = provider("risky-bot", "1.0.0", 2)
tr = p.get_tracer("agent-sdk", "1.0", schema_url=SCHEMA)
rng = random.Random(3)
unsafe = 0
for r in range(40):
    t = T0 + r * 30_000 * MS
    root = tr.start_span("invoke_agent risky", start_time=t, attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "risky"})
    ctx = trace.set_span_in_context(root)
    bad = rng.random() < 0.45
    unsafe += bad
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "shell.exec", "gen_ai.tool.call.id": f"c{r}"}
    if bad:
        attrs["octant.violations"] = "destructive_command"
    tool = tr.start_span("execute_tool shell.exec", context=ctx, start_time=t + 10 * MS, attributes=attrs)
    tool.end(end_time=t + 20 * MS)
    root.end(end_time=t + 50 * MS)
    request = encode_spans(exp.get_finished_spans())
    exp.clear()
    put("spans", request.SerializeToString() if r % 2 else otlp_json(request))
    put("logs", logs_request([event("gen_ai.evaluation.result", 60 + r * 30_000, {"gen_ai.evaluation.name": "faithfulness",
                                                                                  "gen_ai.evaluation.score.value": 0.5 + 0.01 * r},
                                    root.get_span_context().trace_id, root.get_span_context().span_id)]).SerializeToString())
out["traces"]["risky_unsafe_runs"] = unsafe

# 3. A clock: one later trace so that the event-time watermark passes the hour.
p, exp = provider("clock", "1", 4)
tr = p.get_tracer("agent-sdk", "1.0")
s = tr.start_span("invoke_agent clock", start_time=T0 + 2 * 3600_000 * MS, attributes={"gen_ai.operation.name": "invoke_agent"})
s.end(end_time=T0 + 2 * 3600_000 * MS + MS)
put("spans", encode_spans(exp.get_finished_spans()).SerializeToString())
json.dump(out, sys.stdout)
