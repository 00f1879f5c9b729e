"""Strands Agents scenarios (run inside the `strands` family venv by runner.py).

Strands traces itself (strands.telemetry.tracer, no instrumentation library) on the GLOBAL tracer
provider, read once when its tracer singleton is first made: runner.py sets its TracerProvider as the
global one before this module imports strands, so Strands' spans reach the runner's exporter (the
script checks it). The conventions are chosen by OTEL_SEMCONV_STABILITY_OPT_IN (setups.py). The model
is strands.models.openai.OpenAIModel (Chat Completions, streamed) on the scripted model server, with
`max_retries=0` in the OpenAI client arguments. The task id goes in `Agent(trace_attributes=
{"session.id": ...})`, as Strands documents for session ids.

Human approval: Strands' interrupts. A BeforeToolCallEvent hook calls `event.interrupt(name,
reason=...)` for the tools that need approval; the run stops with `result.stop_reason == "interrupt"`
and `result.interrupts`; the script resumes by calling the agent with
`[{"interruptResponse": {"interruptId": ..., "response": "approve" | "deny"}}]`, and on a denial the hook
sets `event.cancel_tool` to the denial message (the tool does not run, the model gets an error result).
"""

from __future__ import annotations

import os
from typing import Any

import setups as S
from fw_agents import SUPPORT
from fw_pydantic_ai import APPROVAL_PLAN, APPROVAL_SCENARIOS, DENIAL_MESSAGE, USER_INPUT, script_for

NEEDS_APPROVAL = ("refund_payment", "cancel_subscription")

EXPECT = {
    "tool_ok": ("success", None),
    "tool_error": ("success", None),
    "parallel_tools": ("success", None),
    "run_fails": ("error", "model call #2 of the run (Support agent, after the tool result) got HTTP 500; "
                           "the agent call raised strands.types.exceptions.EventLoopException wrapping "
                           "openai.InternalServerError (client max_retries=0)"),
}


def run_scenario(setup_name: str, setup: dict, scenario: str, server, prov, instrument) -> dict:
    import openai
    from opentelemetry import trace as otel_trace
    from strands import Agent, ToolContext, tool
    from strands.hooks import BeforeToolCallEvent, HookProvider, HookRegistry
    from strands.models.openai import OpenAIModel
    from strands.telemetry.tracer import get_tracer
    from strands.types.exceptions import EventLoopException

    globals()["ToolContext"] = ToolContext  # the tools' (string) annotations resolve in this module
    problems: list[str] = []
    if get_tracer().tracer_provider is not prov.tracer_provider or otel_trace.get_tracer_provider() is not prov.tracer_provider:
        problems.append("Strands' tracer does not use the runner's (global) TracerProvider")

    tool_log: list[dict] = []

    @tool(context=True)
    def get_order_status(order_id: str, tool_context: ToolContext) -> str:
        """Look up the shipping status of an order."""
        tool_log.append({"tool": "get_order_status", "error": False, "agent": SUPPORT,
                         "tool_call_id": tool_context.tool_use["toolUseId"]})
        return f"Order {order_id}: shipped yesterday"

    @tool(context=True)
    def lookup_account(account_id: str, tool_context: ToolContext) -> str:
        """Look up a customer account."""
        tool_log.append({"tool": "lookup_account", "error": True, "agent": SUPPORT,
                         "tool_call_id": tool_context.tool_use["toolUseId"]})
        raise ValueError(f"account database unavailable for {account_id}")  # Strands turns it into an error result

    @tool(context=True)
    def refund_payment(payment_id: str, tool_context: ToolContext) -> str:
        """Refund a payment (needs a human's approval)."""
        tool_log.append({"tool": "refund_payment", "error": False, "agent": SUPPORT,
                         "tool_call_id": tool_context.tool_use["toolUseId"]})
        return f"Payment {payment_id}: refunded"

    @tool(context=True)
    def cancel_subscription(subscription_id: str, tool_context: ToolContext) -> str:
        """Cancel a subscription (needs a human's approval)."""
        tool_log.append({"tool": "cancel_subscription", "error": False, "agent": SUPPORT,
                         "tool_call_id": tool_context.tool_use["toolUseId"]})
        return f"Subscription {subscription_id}: cancelled"

    interrupt_log: list[dict] = []  # every interrupt the hook raised: tool, call id, interrupt id

    class ApprovalHook(HookProvider):
        """Asks a human before a tool that needs approval runs (Strands' documented interrupt pattern)."""

        def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
            registry.add_callback(BeforeToolCallEvent, self.approve)

        def approve(self, event: BeforeToolCallEvent) -> None:
            name = event.tool_use["name"]
            if name not in NEEDS_APPROVAL:
                return
            call_id = event.tool_use["toolUseId"]
            answer = event.interrupt(f"approve_{name}", reason={"tool": name, "tool_call_id": call_id,
                                                                "input": event.tool_use["input"]})
            if answer != "approve":
                event.cancel_tool = DENIAL_MESSAGE

    approval = scenario in APPROVAL_SCENARIOS
    tools = {"tool_ok": [get_order_status], "run_fails": [get_order_status], "tool_error": [lookup_account],
             "parallel_tools": [get_order_status, lookup_account],
             "two_approvals": [refund_payment, cancel_subscription]}.get(scenario, [refund_payment])

    def make_agent(task_id: str):
        model = OpenAIModel(client_args={"base_url": server.base_url, "api_key": "sk-conformance", "max_retries": 0},
                            model_id="gpt-4o-mini")
        return Agent(
            name=SUPPORT,
            model=model,
            tools=tools,
            system_prompt=f"[agent:{SUPPORT}] You are the {SUPPORT}. "
                          + ("Help customers with payments; refunds and cancellations need a human's approval."
                             if approval else "Help customers with their orders."),
            hooks=[ApprovalHook()] if approval else [],
            trace_attributes={"session.id": task_id},
            callback_handler=None,
        )

    def usage_of(res) -> dict:
        u = res.metrics.accumulated_usage
        return {"input_tokens": u["inputTokens"], "output_tokens": u["outputTokens"], "total_tokens": u["totalTokens"]}

    def spans_so_far() -> int:
        prov.flush()
        return len(prov.span_exporter.get_finished_spans())

    sid = S.system_id(setup_name, scenario)
    runs = []
    run_key = os.environ.get("OCTANT_CONFORMANCE_RUN_KEY")
    from runner import summarize_run

    for r in range(2):
        tool_log.clear()
        server.set_script(script_for(scenario, r), r)
        task_id = f"{sid}-task-{r + 1}"
        agent = make_agent(task_id)
        if not approval:
            exp_outcome, exp_where = EXPECT[scenario]
            outcome, where, extra = "success", None, {}
            try:
                result = agent(USER_INPUT[scenario])
                extra = {"final_output": str(result).strip(), "stop_reason": result.stop_reason,
                         "framework_usage": usage_of(result)}
            except (openai.APIError, EventLoopException) as e:
                outcome, where = "error", exp_where
                cause = e.__cause__
                extra = {"exception": f"{type(e).__module__}.{type(e).__name__}: {e}"[:300],
                         "exception_cause": f"{type(cause).__module__}.{type(cause).__name__}" if cause else None}
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
            approvals, parts = [], []
            start = spans_so_far()
            result = agent(USER_INPUT[scenario])
            paused = result.stop_reason == "interrupt"
            resumed = False

            def part(name, res, a, b):
                finished = prov.span_exporter.get_finished_spans()[a:b]
                tids = list(dict.fromkeys(format(sp.context.trace_id, "032x") for sp in finished))
                return {"part": name, "stop_reason": res.stop_reason, "interruptions": len(res.interrupts or []),
                        "spans": b - a, "trace_ids": tids}

            end = spans_so_far()
            parts.append(part("initial", result, start, end))
            if paused:
                responses = []
                for it in result.interrupts:
                    reason = it.reason or {}
                    approvals.append({"tool": reason.get("tool"), "tool_call_id": reason.get("tool_call_id"),
                                      "decision": decision, "agent": SUPPORT, "interrupt_id": it.id,
                                      "interrupt_name": it.name})
                    responses.append({"interruptResponse": {"interruptId": it.id,
                                                            "response": "approve" if decision == "approved" else "deny"}})
                if decision != "expired":  # expired: the interrupts are never answered, the agent never resumed
                    resumed = True
                    # the usage reported for the resumed call accumulates the agent's earlier calls
                    result = agent(responses)
                    end2 = spans_so_far()
                    parts.append(part("resume", result, end, end2))
            S.RUN_ID.set(None)
            all_tids = list(dict.fromkeys(t for p in parts for t in p["trace_ids"]))
            completed = result.stop_reason != "interrupt"
            fu = usage_of(result)  # accumulated over the agent's invocations (both parts)
            extra = {"approvals": approvals, "paused": paused, "resumed": resumed, "traces": len(all_tids),
                     "trace_ids": all_tids, "parts": parts,
                     "final_output": str(result).strip() if completed else None, "interrupted": not completed,
                     "framework_usage": fu}
            if run_key:
                extra["run_key"] = {"attribute": run_key, "value": run_id}
            # Outcome as the framework reports it: every agent call returned (stop_reason 'interrupt' for the abandoned one).
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
    return {
        "framework": "strands",
        "framework_dist": "strands-agents",
        "api": "chat_completions",
        "runs": runs,
        "problems": problems,
        "notes": S.notes_for(setup_name, scenario),
        "other_dists": ["strands-agents", "opentelemetry-instrumentation-threading"],
    }
