"""Google ADK scenarios with LiteLLM (run inside the `adk` family venv by runner.py).

ADK traces itself (google.adk.telemetry, no instrumentation library): its tracer and its OTel logger
(scope 'gcp.vertex.agent') come from the GLOBAL tracer / logger provider (`trace.get_tracer` /
`_logs.get_logger` at import, proxies until a provider is set). runner.py sets its TracerProvider and
LoggerProvider as the global ones before this module imports google.adk, so ADK's spans and log
records reach the runner's exporters (the script checks it). ADK sets up no provider or exporter of
its own unless its CLI / API server calls `maybe_set_otel_providers` (not used here), and the
Google Cloud exporters need GOOGLE_CLOUD_* settings that record.py strips from the environment.

The telemetry format is ADK's "schema version", chosen by ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN
(setups.py): `2` (alias `otel_semconv_1_44`, the default) or `1` (alias `otel_semconv_1_36`, the
legacy format). Message content: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_AND_EVENT
(spans and log records) and ADK's own ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS (default on) for the
legacy spans; run_fails turns both off.

The model is `LiteLlm(model="openai/gpt-4o-mini", api_base=<scripted server>/v1, api_key=...,
max_retries=0, num_retries=0)`: LiteLLM's OpenAI provider, Chat Completions, non-streaming. LiteLLM
runs offline (LITELLM_OFFLINE_MODE, LITELLM_LOCAL_MODEL_COST_MAP: no cost-map download). ADK agent
names must be identifiers, so the agent is `support_agent` and its instruction carries the
`[agent:support_agent]` marker the model server reads. The task id is the ADK session id
(`session_service.create_session(session_id=...)`), which ADK emits as gen_ai.conversation.id.

A handled tool error: the tool raises and the agent's `on_tool_error_callback` (ADK's hook for tool
errors) returns an error dict that the model gets as the tool result; without the callback an ADK
tool that raises fails the whole run.

Human approval: ADK's tool confirmation, `FunctionTool(func, require_confirmation=True)`. The first
`runner.run_async` ends after an event whose function call `adk_request_confirmation` (its own id,
args {originalFunctionCall: {id, name, args}, toolConfirmation: {hint, confirmed}}) is a long-running
call; the script resumes with a second `runner.run_async` on the same session whose new message is a
FunctionResponse(id=<that id>, name='adk_request_confirmation', response={'confirmed': True|False}),
as ADK documents.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import setups as S
from fw_pydantic_ai import APPROVAL_PLAN, APPROVAL_SCENARIOS, USER_INPUT, script_for

AGENT = "support_agent"  # ADK requires an identifier
APP = "conformance"
USER = "conformance-user"
CONFIRM = "adk_request_confirmation"

EXPECT = {
    "tool_ok": ("success", None),
    "tool_error": ("success", None),
    "parallel_tools": ("success", None),
    "run_fails": ("error", "model call #2 of the run (support_agent, after the tool result) got HTTP 500; "
                           "runner.run_async raised litellm.exceptions.InternalServerError (max_retries=0, "
                           "num_retries=0)"),
}


def _parts(ev) -> list:
    return list(ev.content.parts or []) if ev.content is not None else []


def run_scenario(setup_name: str, setup: dict, scenario: str, server, prov, instrument) -> dict:
    import litellm
    from opentelemetry import _logs, trace as otel_trace
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.adk.tools import FunctionTool, ToolContext
    from google.adk.telemetry._schema_version import resolve_schema_version
    from google.genai import types

    litellm.suppress_debug_info = True
    globals()["ToolContext"] = ToolContext  # the tools' (string) annotations resolve in this module
    problems: list[str] = []
    if otel_trace.get_tracer_provider() is not prov.tracer_provider:
        problems.append("the global TracerProvider (ADK's) is not the runner's")
    if _logs.get_logger_provider() is not prov.logger_provider:
        problems.append("the global LoggerProvider (ADK's) is not the runner's")
    schema = resolve_schema_version()
    if str(schema) != setup["env"]["ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN"]:
        problems.append(f"ADK resolved telemetry schema version {schema}")

    tool_log: list[dict] = []

    def get_order_status(order_id: str, tool_context: ToolContext) -> str:
        """Look up the shipping status of an order."""
        tool_log.append({"tool": "get_order_status", "error": False, "agent": AGENT,
                         "tool_call_id": tool_context.function_call_id})
        return f"Order {order_id}: shipped yesterday"

    def lookup_account(account_id: str, tool_context: ToolContext) -> str:
        """Look up a customer account."""
        tool_log.append({"tool": "lookup_account", "error": True, "agent": AGENT,
                         "tool_call_id": tool_context.function_call_id})
        raise ValueError(f"account database unavailable for {account_id}")  # handled by on_tool_error_callback

    def refund_payment(payment_id: str, tool_context: ToolContext) -> str:
        """Refund a payment (needs a human's approval)."""
        tool_log.append({"tool": "refund_payment", "error": False, "agent": AGENT,
                         "tool_call_id": tool_context.function_call_id})
        return f"Payment {payment_id}: refunded"

    def cancel_subscription(subscription_id: str, tool_context: ToolContext) -> str:
        """Cancel a subscription (needs a human's approval)."""
        tool_log.append({"tool": "cancel_subscription", "error": False, "agent": AGENT,
                         "tool_call_id": tool_context.function_call_id})
        return f"Subscription {subscription_id}: cancelled"

    def on_tool_error(tool, args, tool_context, error):
        """ADK's hook for a tool that raised: the returned dict is the tool result the model gets."""
        return {"error": f"{type(error).__name__}: {error}"}

    approval = scenario in APPROVAL_SCENARIOS
    tools: list[Any] = {
        "tool_ok": [get_order_status], "run_fails": [get_order_status], "tool_error": [lookup_account],
        "parallel_tools": [get_order_status, lookup_account],
        "two_approvals": [FunctionTool(refund_payment, require_confirmation=True),
                          FunctionTool(cancel_subscription, require_confirmation=True)],
    }.get(scenario) or [FunctionTool(refund_payment, require_confirmation=True)]

    def make_runner():
        model = LiteLlm(model="openai/gpt-4o-mini", api_base=server.base_url, api_key="sk-conformance",
                        max_retries=0, num_retries=0)
        agent = LlmAgent(
            name=AGENT,
            model=model,
            instruction=f"[agent:{AGENT}] You are the support agent. "
                        + ("Help customers with payments; refunds and cancellations need a human's approval."
                           if approval else "Help customers with their orders."),
            tools=tools,
            on_tool_error_callback=on_tool_error,
        )
        sessions = InMemorySessionService()
        return Runner(app_name=APP, agent=agent, session_service=sessions), sessions

    def spans_so_far() -> int:
        prov.flush()
        return len(prov.span_exporter.get_finished_spans())

    async def run_part(runner, session_id: str, message) -> list:
        events = []
        async for ev in runner.run_async(user_id=USER, session_id=session_id, new_message=message):
            events.append(ev)
        return events

    def usage_of(events: list) -> dict:
        ins = sum((e.usage_metadata.prompt_token_count or 0) for e in events if e.usage_metadata)
        outs = sum((e.usage_metadata.candidates_token_count or 0) for e in events if e.usage_metadata)
        return {"input_tokens": ins, "output_tokens": outs}

    def final_text(events: list) -> str | None:
        for ev in reversed(events):
            texts = [p.text for p in _parts(ev) if p.text]
            if texts:
                return "".join(texts).strip()
        return None

    def user_text(text: str):
        return types.Content(role="user", parts=[types.Part(text=text)])

    sid = S.system_id(setup_name, scenario)
    runs = []
    run_key = os.environ.get("OCTANT_CONFORMANCE_RUN_KEY")
    loop = asyncio.new_event_loop()
    from runner import summarize_run

    for r in range(2):
        tool_log.clear()
        server.set_script(script_for(scenario, r), r)
        task_id = f"{sid}-task-{r + 1}"
        runner, sessions = make_runner()
        loop.run_until_complete(sessions.create_session(app_name=APP, user_id=USER, session_id=task_id))
        if not approval:
            exp_outcome, exp_where = EXPECT[scenario]
            outcome, where, extra = "success", None, {}
            events: list = []
            try:
                events = loop.run_until_complete(run_part(runner, task_id, user_text(USER_INPUT[scenario])))
                extra = {"final_output": final_text(events), "framework_usage": usage_of(events)}
            except Exception as e:  # litellm.exceptions.InternalServerError for run_fails
                outcome, where = "error", exp_where
                extra = {"exception": f"{type(e).__module__}.{type(e).__name__}: {e}"[:300]}
            run = summarize_run(server, r, tool_log, outcome, where, task_id, task_id, frozenset(), extra)
            if outcome != exp_outcome:
                problems.append(f"run {r}: outcome {outcome} != expected {exp_outcome} ({extra})")
            fu = extra.get("framework_usage")
            if fu and fu["input_tokens"] + fu["output_tokens"] != run["tokens"]:
                problems.append(f"run {r}: framework usage {fu} != server tokens {run['tokens']}")
        else:
            run_id = f"{sid}-run-{r + 1}" if run_key else None
            S.RUN_ID.set(run_id)
            decision = APPROVAL_PLAN[scenario]
            approvals, parts, all_events = [], [], []

            def confirmation_requests(events: list) -> list:
                return [p.function_call for ev in events for p in _parts(ev)
                        if p.function_call is not None and p.function_call.name == CONFIRM]

            def part(name, events, a, b):
                finished = prov.span_exporter.get_finished_spans()[a:b]
                tids = list(dict.fromkeys(format(sp.context.trace_id, "032x") for sp in finished))
                return {"part": name, "confirmation_requests": len(confirmation_requests(events)),
                        "invocation_ids": list(dict.fromkeys(e.invocation_id for e in events)),
                        "events": len(events), "spans": b - a, "trace_ids": tids}

            start = spans_so_far()
            events = loop.run_until_complete(run_part(runner, task_id, user_text(USER_INPUT[scenario])))
            all_events += events
            end = spans_so_far()
            parts.append(part("initial", events, start, end))
            requests = confirmation_requests(events)
            paused = bool(requests)
            resumed = False
            if paused:
                responses = []
                for fc in requests:
                    orig = (fc.args or {}).get("originalFunctionCall") or {}
                    approvals.append({"tool": orig.get("name"), "tool_call_id": orig.get("id"), "decision": decision,
                                      "agent": AGENT, "confirmation_call_id": fc.id})
                    responses.append(types.Part(function_response=types.FunctionResponse(
                        id=fc.id, name=CONFIRM, response={"confirmed": decision == "approved"})))
                if decision != "expired":  # expired: the confirmation is never answered, the run never resumed
                    resumed = True
                    events = loop.run_until_complete(
                        run_part(runner, task_id, types.Content(role="user", parts=responses)))
                    all_events += events
                    end2 = spans_so_far()
                    parts.append(part("resume", events, end, end2))
            S.RUN_ID.set(None)
            all_tids = list(dict.fromkeys(t for p in parts for t in p["trace_ids"]))
            completed = not (paused and not resumed)
            fu = usage_of(all_events)
            extra = {"approvals": approvals, "paused": paused, "resumed": resumed, "traces": len(all_tids),
                     "trace_ids": all_tids, "parts": parts,
                     "final_output": final_text(events) if completed else None, "interrupted": not completed,
                     "framework_usage": fu}
            if run_key:
                extra["run_key"] = {"attribute": run_key, "value": run_id}
            # Outcome as the framework reports it: every run_async call ended without raising.
            run = summarize_run(server, r, tool_log, "success", None, task_id, task_id, frozenset(), extra)
            want_ran = {"approval_granted": ["refund_payment"], "approval_denied": [], "approval_expired": [],
                        "two_approvals": ["refund_payment", "cancel_subscription"]}[scenario]
            if sorted(t["tool"] for t in tool_log) != sorted(want_ran):
                problems.append(f"run {r}: tools ran {tool_log} != {want_ran}")
            if len(approvals) != (2 if scenario == "two_approvals" else 1):
                problems.append(f"run {r}: approvals {approvals}")
            scripted_ids = [tc["tool_call_id"] for c in server.calls_for_run(r) if c.get("status") == 200
                            for tc in (c.get("tool_calls") or ([c] if c.get("tool") else []))]
            if sorted(a["tool_call_id"] for a in approvals) != sorted(scripted_ids):
                problems.append(f"run {r}: approval call ids {approvals} != server's {scripted_ids}")
            if fu["input_tokens"] + fu["output_tokens"] != run["tokens"]:
                problems.append(f"run {r}: framework usage {fu} != server tokens {run['tokens']}")
        runs.append(run)
        if server.remaining():
            problems.append(f"run {r}: {server.remaining()} scripted steps not consumed")
    loop.close()
    prov.flush()
    scopes = {(sp.instrumentation_scope.name, sp.instrumentation_scope.version)
              for sp in prov.span_exporter.get_finished_spans()}
    if ("gcp.vertex.agent", _dist_version("google-adk")) not in scopes:
        problems.append(f"no ADK spans reached the runner's exporter (scopes {scopes})")
    return {
        "framework": "google-adk",
        "framework_dist": "google-adk",
        "api": "chat_completions",
        "runs": runs,
        "problems": problems,
        "notes": S.notes_for(setup_name, scenario),
        "content_capture": {k: os.environ.get(k) for k in ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                                                            "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS")},
        "other_dists": ["google-adk", "litellm", "google-genai"],
    }


def _dist_version(name: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
