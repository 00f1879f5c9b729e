"""Runs ONE (setup, scenario) inside the setup's family venv.

Invoked by record.py as:
    <venv>/bin/python conformance/runner.py --setup NAME --scenario NAME --out DIR

Starts the scripted model server, installs the OTel SDK providers with
in-memory exporters, enables the setup's instrumentations, runs the scenario
twice via the framework module, then writes spans.pb / logs.pb (OTLP protobuf,
as the Collector's Kafka exporter writes ``otlp_proto``), truth.json and
spans.summary.txt.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import setups as S  # noqa: E402
from model_server import ScriptedServer  # noqa: E402


def dist_version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _run_key_processor_base():
    from opentelemetry.sdk.trace import SpanProcessor
    return SpanProcessor


class RunKeyProcessor(_run_key_processor_base()):
    """What a team adds to trace one run across the traces it becomes: an OpenTelemetry span
    processor that sets `attr` to the current run id on every span it sees start."""

    def __init__(self, attr: str):
        self.attr = attr

    def on_start(self, span, parent_context=None):
        v = S.RUN_ID.get()
        if v:
            span.set_attribute(self.attr, v)


class Providers:
    def __init__(self, system_id: str):
        from opentelemetry import trace
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        try:
            from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as LogExp
        except ImportError:  # older SDKs
            from opentelemetry.sdk._logs.export import InMemoryLogExporter as LogExp

        resource = Resource.create({"service.name": system_id, "service.version": "1.0.0"})
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        run_key = os.environ.get("OCTANT_CONFORMANCE_RUN_KEY")
        if run_key:
            self.tracer_provider.add_span_processor(RunKeyProcessor(run_key))
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        trace.set_tracer_provider(self.tracer_provider)

        self.log_exporter = LogExp()
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))
        set_logger_provider(self.logger_provider)
        try:  # the deprecated Events API, still used by some instrumentations
            from opentelemetry._events import set_event_logger_provider
            from opentelemetry.sdk._events import EventLoggerProvider

            set_event_logger_provider(EventLoggerProvider(self.logger_provider))
        except Exception:
            pass

    def flush(self) -> None:
        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()

    def encode(self) -> tuple[bytes, bytes | None, int, int]:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        spans = self.span_exporter.get_finished_spans()
        span_bytes = encode_spans(spans).SerializeToString()
        logs = self.log_exporter.get_finished_logs()
        log_bytes = None
        if logs:
            from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

            log_bytes = encode_logs(logs).SerializeToString()
        return span_bytes, log_bytes, len(spans), len(logs)


# Instrumentation key -> (module, instrumentor class, whether it takes the logger provider).
INSTRUMENTORS = {
    "contrib-openai-agents": ("opentelemetry.instrumentation.openai_agents", "OpenAIAgentsInstrumentor", True),
    "contrib-openai": ("opentelemetry.instrumentation.openai_v2", "OpenAIInstrumentor", True),
    "oi-openai-agents": ("openinference.instrumentation.openai_agents", "OpenAIAgentsInstrumentor", False),
    "oi-openai": ("openinference.instrumentation.openai", "OpenAIInstrumentor", False),
    "oi-langchain": ("openinference.instrumentation.langchain", "LangChainInstrumentor", False),
    "tl-openai-agents": ("opentelemetry.instrumentation.openai_agents", "OpenAIAgentsInstrumentor", False),
    "tl-openai": ("opentelemetry.instrumentation.openai", "OpenAIInstrumentor", True),
    "tl-langchain": ("opentelemetry.instrumentation.langchain", "LangchainInstrumentor", False),
}


def instrument(keys: list[str], prov: Providers) -> list:
    """Enable the given instrumentations; returns the instrumentor objects."""
    import importlib

    out = []
    for key in keys:
        if key not in INSTRUMENTORS:
            raise SystemExit(f"unknown instrumentation key {key}")
        module, cls, with_logs = INSTRUMENTORS[key]
        inst = getattr(importlib.import_module(module), cls)()
        kwargs = {"tracer_provider": prov.tracer_provider}
        if with_logs:
            kwargs["logger_provider"] = prov.logger_provider
        inst.instrument(**kwargs)
        out.append(inst)
    return out



def summarize_run(server: ScriptedServer, run_index: int, tool_log: list[dict], outcome: str,
                  error_where: str | None, task_id: str | None, task_id_sent: str | None,
                  handoff_tools: set[str] = frozenset(), extra: dict | None = None) -> dict:
    calls = server.calls_for_run(run_index)
    by_agent: dict[str, int] = {}
    agents: list[str] = []
    for c in calls:
        a = c.get("agent") or "<unknown>"
        by_agent[a] = by_agent.get(a, 0) + 1
        if not agents or agents[-1] != a:
            agents.append(a)
    ok = [c for c in calls if c.get("status") == 200]
    in_tok = sum(c["input_tokens"] for c in ok)
    out_tok = sum(c["output_tokens"] for c in ok)
    # attach tool call ids from the server log (tool steps, in order, minus handoffs)
    # (a "tools" step - several calls in one response - logs them under "tool_calls")
    scripted_tool_calls = [tc for c in ok for tc in (c.get("tool_calls") or [c])
                           if tc.get("tool") and tc["tool"] not in handoff_tools]
    tool_calls = []
    for i, t in enumerate(tool_log):
        t = dict(t)
        # a tool that logged its own call id (from its ToolContext) keeps it
        if "tool_call_id" not in t and i < len(scripted_tool_calls) and scripted_tool_calls[i]["tool"] == t["tool"]:
            t["tool_call_id"] = scripted_tool_calls[i]["tool_call_id"]
        tool_calls.append(t)
    handoffs = [{"tool": c["tool"], "from_agent": c.get("agent"), "tool_call_id": c["tool_call_id"]}
                for c in ok if c.get("tool") in handoff_tools]
    run = {
        "task_id": task_id,
        "task_id_sent": task_id_sent,
        "outcome": outcome,
        "tool_calls": tool_calls,
        "handoffs": handoffs,
        "model_calls": len(calls),
        "model_calls_ok": len(ok),
        "model_calls_by_agent": by_agent,
        "tokens": in_tok + out_tok,
        "input_tokens": in_tok,
        "output_tokens": out_tok,
        "agents": agents,
        "error_where": error_where,
        "model_call_log": [{k: c.get(k) for k in ("seq", "api", "agent", "status", "stream", "response_id", "tool",
                                                   "tool_call_id", "tool_calls", "input_tokens", "output_tokens", "usage_sent", "warning")
                            if c.get(k) is not None} for c in calls],
    }
    if extra:
        run.update(extra)
    return run


def compact_json(obj, indent: int = 0) -> str:
    """Pretty JSON, but lists of scalars and dicts of scalars / short values stay on one line."""
    one = json.dumps(obj, ensure_ascii=False)
    if len(one) <= 110 or not isinstance(obj, (dict, list)):
        return one
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(obj, list):
        if obj and all(isinstance(x, dict) and all(not isinstance(v, (dict, list)) for v in x.values()) for x in obj):
            return "[\n" + ",\n".join(inner + json.dumps(x, ensure_ascii=False) for x in obj) + "\n" + pad + "]"
        return "[\n" + ",\n".join(inner + compact_json(x, indent + 1) for x in obj) + "\n" + pad + "]"
    return "{\n" + ",\n".join(f"{inner}{json.dumps(k)}: {compact_json(v, indent + 1)}" for k, v in obj.items()) + "\n" + pad + "}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--setup", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    setup = S.SETUPS[args.setup]
    sid = S.system_id(args.setup, args.scenario)
    outdir = Path(args.out) / args.setup / args.scenario
    outdir.mkdir(parents=True, exist_ok=True)

    prov = Providers(sid)
    server = ScriptedServer().start()
    if setup["framework"] == "openai-agents":
        import fw_agents as fw
    elif setup["framework"] == "langgraph":
        import fw_langgraph as fw
    elif setup["framework"] == "pydantic-ai":
        import fw_pydantic_ai as fw
    elif setup["framework"] == "strands":
        import fw_strands as fw
    elif setup["framework"] == "google-adk":
        import fw_adk as fw
    else:
        raise SystemExit(f"unknown framework {setup['framework']}")

    t0 = time.time()
    result = fw.run_scenario(args.setup, setup, args.scenario, server, prov, instrument)
    prov.flush()
    server.stop()
    span_bytes, log_bytes, nspans, nlogs = prov.encode()
    (outdir / "spans.pb").write_bytes(span_bytes)
    if log_bytes:
        (outdir / "logs.pb").write_bytes(log_bytes)
    elif (outdir / "logs.pb").exists():
        (outdir / "logs.pb").unlink()

    env_used = {k: v for k, v in S.env_for(args.setup, args.scenario).items() if k != "OPENAI_API_KEY"}
    truth = {
        "library": setup["library"],
        "library_version": None,
        # A framework that traces itself (setup "native_dist") is its own instrumentation.
        "instrumentations": ({S.INSTRUMENTATIONS[k]: dist_version(S.INSTRUMENTATIONS[k]) for k in setup["instrument"]}
                             or ({setup["native_dist"]: dist_version(setup["native_dist"])}
                                 if setup.get("native_dist") else {})),
        "framework": result["framework"],
        "framework_version": dist_version(result["framework_dist"]),
        "api": result["api"],
        "scenario": args.scenario,
        "setup": args.setup,
        "system_id": sid,
        "resource": {"service.name": sid, "service.version": "1.0.0"},
        "otel_sdk_version": dist_version("opentelemetry-sdk"),
        "other_versions": {d: dist_version(d) for d in result.get("other_dists", []) + ["openai", "opentelemetry-semantic-conventions",
                                                                                          "opentelemetry-instrumentation", "opentelemetry-util-genai"]
                           if dist_version(d)},
        "env": env_used,
        "model_server": {"base_url": server.base_url, "model": "gpt-4o-mini"},
        "runs": result["runs"],
        "span_count": nspans,
        "log_record_count": nlogs,
        "notes": result.get("notes", ""),
        **({"content_capture": result["content_capture"]} if "content_capture" in result else {}),
        "elapsed_s": round(time.time() - t0, 2),
    }
    # library_version: the (first) instrumentation's version
    truth["library_version"] = next(iter(truth["instrumentations"].values()), None)
    (outdir / "truth.json").write_text(compact_json(truth) + "\n")

    from summary import write_summary

    write_summary(outdir)
    problems = result.get("problems", [])
    print(json.dumps({"setup": args.setup, "scenario": args.scenario, "spans": nspans, "logs": nlogs,
                      "runs": [(r["outcome"], r["model_calls"], r["tokens"]) for r in truth["runs"]],
                      "problems": problems}))
    return 1 if problems else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.exit(2)
