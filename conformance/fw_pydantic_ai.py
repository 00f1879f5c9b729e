"""Pydantic AI scenarios (run inside the `pydantic-ai` family venv by runner.py).

Pydantic AI traces itself (no instrumentation library): `Agent.instrument_all(InstrumentationSettings(
tracer_provider=<the runner's>, version=N, include_content=...))`. The model is `OpenAIChatModel`
(Chat Completions API) on an `OpenAIProvider` whose `AsyncOpenAI` client points at the scripted model
server with `max_retries=0`.

Human approval: tools registered with `requires_approval=True` and `output_type=[str,
DeferredToolRequests]`. The run then ENDS (normally) with a `DeferredToolRequests` output listing the
calls in `.approvals`; the script resumes with a second `agent.run(message_history=result.all_messages(),
deferred_tool_results=DeferredToolResults(approvals={call_id: True | ToolDenied(...)}))`.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import setups as S
from fw_agents import SUPPORT, usage
from fw_agents import approval_script, script_for as agents_script_for

APPROVAL_SCENARIOS = ("approval_granted", "approval_denied", "approval_expired", "two_approvals")
# approval_raised (Pydantic AI only): the tool itself raises ApprovalRequired(metadata=...) unless
# ctx.tool_call_approved, instead of being registered with requires_approval=True; approved.
PAI_APPROVAL_SCENARIOS = APPROVAL_SCENARIOS + ("approval_raised",)
APPROVAL_PLAN = {"approval_granted": "approved", "approval_denied": "denied", "approval_expired": "expired",
                 "two_approvals": "approved", "approval_raised": "approved"}
DENIAL_MESSAGE = "A human reviewer denied this refund."

USER_INPUT = {
    "tool_ok": "Where is my order A-100?",
    "tool_error": "Can you check my account?",
    "run_fails": "Where is my order A-100?",
    "parallel_tools": "Where is my order A-100, and can you check my account?",
    "approval_granted": "Please refund payment PAY-100.",
    "approval_raised": "Please refund payment PAY-100.",
    "approval_denied": "Please refund payment PAY-100.",
    "approval_expired": "Please refund payment PAY-100.",
    "two_approvals": "Please refund payment PAY-100 and cancel subscription SUB-100.",
}

EXPECT = {
    "tool_ok": ("success", None),
    "tool_error": ("success", None),
    "parallel_tools": ("success", None),
    "run_fails": ("error", "model call #2 of the run (Support agent, after the tool result) got HTTP 500; "
                           "agent.run raised pydantic_ai.exceptions.ModelHTTPError (client max_retries=0)"),
}


def script_for(scenario: str, run: int) -> list[dict[str, Any]]:
    """The scripted model responses; the single-agent ones are the Agents SDK's, call for call."""
    if scenario in ("tool_ok", "tool_error", "run_fails"):
        return agents_script_for(scenario, run)
    if scenario == "parallel_tools":
        # ONE model response with two function calls: one tool succeeds, the other fails (handled).
        return [
            {"kind": "tools", "calls": [{"tool": "get_order_status", "args": {"order_id": f"A-{100 + run}"}},
                                        {"tool": "lookup_account", "args": {"account_id": f"acct-{run}"}}],
             "usage": usage(run, 0)},
            {"kind": "text", "text": f"Order A-{100 + run} has shipped; I could not look up your account.",
             "usage": usage(run, 1)},
        ]
    if scenario == "approval_raised":
        return approval_script("approval_granted", run)
    if scenario in APPROVAL_SCENARIOS:
        return approval_script(scenario, run)
    raise SystemExit(f"unknown pydantic-ai scenario {scenario}")


def run_scenario(setup_name: str, setup: dict, scenario: str, server, prov, instrument) -> dict:
    import openai
    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext, ToolDenied
    from pydantic_ai.exceptions import ApprovalRequired, ModelHTTPError, ToolFailed
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    globals()["RunContext"] = RunContext  # the tools' (string) annotations resolve in this module

    include_content = scenario not in S.NO_CONTENT_SCENARIOS
    settings = InstrumentationSettings(tracer_provider=prov.tracer_provider, version=setup["instrumentation_version"],
                                       include_content=include_content)
    Agent.instrument_all(settings)

    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-conformance", max_retries=0)
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))

    tool_log: list[dict] = []
    approval = scenario in PAI_APPROVAL_SCENARIOS
    agent: Any = Agent(
        model,
        name=SUPPORT,
        instructions=f"[agent:{SUPPORT}] You are the {SUPPORT}. "
                     + ("Help customers with payments; refunds and cancellations need a human's approval."
                        if approval else "Help customers with their orders."),
        output_type=[str, DeferredToolRequests] if approval else str,
    )

    if scenario in ("tool_ok", "run_fails", "parallel_tools"):
        @agent.tool
        def get_order_status(ctx: RunContext[None], order_id: str) -> str:
            """Look up the shipping status of an order."""
            tool_log.append({"tool": "get_order_status", "error": False, "agent": SUPPORT,
                             "tool_call_id": ctx.tool_call_id})
            return f"Order {order_id}: shipped yesterday"

    if scenario in ("tool_error", "parallel_tools"):
        @agent.tool
        def lookup_account(ctx: RunContext[None], account_id: str) -> str:
            """Look up a customer account."""
            tool_log.append({"tool": "lookup_account", "error": True, "agent": SUPPORT,
                             "tool_call_id": ctx.tool_call_id})
            # ToolFailed: Pydantic AI's documented way for a tool to report a terminal failure to the model
            raise ToolFailed(f"account database unavailable for {account_id}")

    if scenario == "approval_raised":
        @agent.tool
        def refund_payment(ctx: RunContext[None], payment_id: str) -> str:
            """Refund a payment (needs a human's approval)."""
            if not ctx.tool_call_approved:
                raise ApprovalRequired(metadata={"reason": "refunds need a human's approval"})
            tool_log.append({"tool": "refund_payment", "error": False, "agent": SUPPORT,
                             "tool_call_id": ctx.tool_call_id})
            return f"Payment {payment_id}: refunded"

    elif approval:
        @agent.tool(requires_approval=True)
        def refund_payment(ctx: RunContext[None], payment_id: str) -> str:
            """Refund a payment (needs a human's approval)."""
            tool_log.append({"tool": "refund_payment", "error": False, "agent": SUPPORT,
                             "tool_call_id": ctx.tool_call_id})
            return f"Payment {payment_id}: refunded"

        if scenario == "two_approvals":
            @agent.tool(requires_approval=True)
            def cancel_subscription(ctx: RunContext[None], subscription_id: str) -> str:
                """Cancel a subscription (needs a human's approval)."""
                tool_log.append({"tool": "cancel_subscription", "error": False, "agent": SUPPORT,
                                 "tool_call_id": ctx.tool_call_id})
                return f"Subscription {subscription_id}: cancelled"

    sid = S.system_id(setup_name, scenario)
    runs, problems = [], []
    loop = asyncio.new_event_loop()
    run_key = os.environ.get("OCTANT_CONFORMANCE_RUN_KEY")

    def spans_so_far() -> int:
        prov.flush()
        return len(prov.span_exporter.get_finished_spans())

    for r in range(2):
        tool_log.clear()
        server.set_script(script_for(scenario, r), r)
        task_id = f"{sid}-task-{r + 1}"
        from runner import summarize_run

        if not approval:
            exp_outcome, exp_where = EXPECT[scenario]
            outcome, where, extra = "success", None, {}
            try:
                result = loop.run_until_complete(agent.run(USER_INPUT[scenario], conversation_id=task_id))
                u = result.usage()
                extra = {"final_output": str(result.output),
                         "framework_usage": {"requests": u.requests, "input_tokens": u.input_tokens,
                                             "output_tokens": u.output_tokens}}
            except ModelHTTPError as e:
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
            approvals, parts = [], []
            start = spans_so_far()
            result = loop.run_until_complete(agent.run(USER_INPUT[scenario], conversation_id=task_id))
            usages = [result.usage()]
            first_output = result.output
            paused = isinstance(first_output, DeferredToolRequests)
            resumed = False

            def part(name, res, a, b):
                finished = prov.span_exporter.get_finished_spans()[a:b]
                tids = list(dict.fromkeys(format(sp.context.trace_id, "032x") for sp in finished))
                out = res.output
                return {"part": name, "interruptions": len(out.approvals) if isinstance(out, DeferredToolRequests) else 0,
                        "output_type": type(out).__name__, "run_id": getattr(res, "run_id", None),
                        "spans": b - a, "trace_ids": tids}

            end = spans_so_far()
            parts.append(part("initial", result, start, end))
            if paused:
                results = DeferredToolResults()
                for call in first_output.approvals:
                    approvals.append({"tool": call.tool_name, "tool_call_id": call.tool_call_id, "decision": decision,
                                      "agent": SUPPORT})
                    if decision == "approved":
                        results.approvals[call.tool_call_id] = True
                    elif decision == "denied":
                        results.approvals[call.tool_call_id] = ToolDenied(DENIAL_MESSAGE)
                if decision != "expired":  # expired: the requests are abandoned, never answered or resumed
                    resumed = True
                    start = end
                    result = loop.run_until_complete(agent.run(message_history=result.all_messages(),
                                                               deferred_tool_results=results))
                    usages.append(result.usage())
                    end = spans_so_far()
                    parts.append(part("resume", result, start, end))
            S.RUN_ID.set(None)
            all_tids = list(dict.fromkeys(t for p in parts for t in p["trace_ids"]))
            completed = not isinstance(result.output, DeferredToolRequests)
            fu = {"requests": sum(u.requests for u in usages), "input_tokens": sum(u.input_tokens for u in usages),
                  "output_tokens": sum(u.output_tokens for u in usages)}
            extra = {"approvals": approvals, "paused": paused, "resumed": resumed, "traces": len(all_tids),
                     "trace_ids": all_tids, "parts": parts,
                     "final_output": str(result.output) if completed else None, "interrupted": not completed,
                     "framework_usage": fu}
            if run_key:
                extra["run_key"] = {"attribute": run_key, "value": run_id}
            # Outcome as the framework reports it: agent.run returned normally, also for the abandoned run.
            run = summarize_run(server, r, tool_log, "success", None, task_id, task_id, frozenset(), extra)
            want_ran = {"approval_granted": ["refund_payment"], "approval_raised": ["refund_payment"],
                        "approval_denied": [], "approval_expired": [],
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
    loop.run_until_complete(client.close())
    loop.close()
    return {
        "framework": "pydantic-ai",
        "framework_dist": "pydantic-ai-slim",
        "api": "chat_completions",
        "runs": runs,
        "problems": problems,
        "notes": S.notes_for(setup_name, scenario),
        "content_capture": {"include_content": include_content,
                            "instrumentation_version": setup["instrumentation_version"]},
        "other_dists": ["pydantic-ai-slim", "pydantic-graph", "pydantic", "logfire-api"],
    }
