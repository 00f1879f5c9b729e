"""OpenAI Agents SDK scenarios (run inside a family venv by runner.py)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import setups as S

SUPPORT = "Support agent"
TRIAGE = "Triage agent"
BILLING = "Billing agent"
WORKFLOW = "Customer support"
HANDOFF_TOOL = "transfer_to_billing_agent"
CHAT_SCENARIOS = ("chat_completions", "run_fails_chat")


def uninstrument(instrumentors: list, problems: list[str]) -> None:
    """Disable what the runner's `instrument` enabled; a failure is a problem of the recording."""
    for inst in instrumentors:
        try:
            inst.uninstrument()
        except Exception as e:  # pragma: no cover
            problems.append(f"uninstrument failed: {e!r}")


def usage(run: int, k: int) -> list[int]:
    """Deterministic, distinct token usage for model call k of run `run`."""
    return [100 + 50 * k + run, 10 + 5 * k + run]


def script_for(scenario: str, run: int) -> list[dict[str, Any]]:
    order = f"A-{100 + run}"
    if scenario in ("tool_ok", "chat_completions"):
        return [
            {"kind": "tool", "tool": "get_order_status", "args": {"order_id": order}, "usage": usage(run, 0)},
            {"kind": "text", "text": f"Order {order} has shipped.", "usage": usage(run, 1)},
        ]
    if scenario == "tool_error":
        return [
            {"kind": "tool", "tool": "lookup_account", "args": {"account_id": f"acct-{run}"}, "usage": usage(run, 0)},
            {"kind": "text", "text": "Sorry, I could not look up your account right now.", "usage": usage(run, 1)},
        ]
    if scenario in ("run_fails", "run_fails_chat"):
        return [
            {"kind": "tool", "tool": "get_order_status", "args": {"order_id": order}, "usage": usage(run, 0)},
            {"kind": "error", "status": 500, "message": "scripted upstream failure"},
        ]
    if scenario == "run_fails_max_turns":
        return [
            {"kind": "tool", "tool": "get_order_status", "args": {"order_id": order}, "usage": usage(run, 0)},
            {"kind": "tool", "tool": "get_order_status", "args": {"order_id": order}, "usage": usage(run, 1)},
        ]
    if scenario == "handoff":
        return [
            {"kind": "tool", "tool": HANDOFF_TOOL, "args": {}, "usage": usage(run, 0)},
            {"kind": "tool", "tool": "get_invoice", "args": {"invoice_id": f"INV-{7 + run}"}, "usage": usage(run, 1)},
            {"kind": "text", "text": f"Invoice INV-{7 + run} is paid.", "usage": usage(run, 2)},
        ]
    raise SystemExit(f"unknown agents scenario {scenario}")


EXPECT = {  # scenario -> (outcome, error_where or None)
    "tool_ok": ("success", None),
    "chat_completions": ("success", None),
    "tool_error": ("success", None),
    "handoff": ("success", None),
    "run_fails": ("error", "model call #2 of the run (Support agent, after the tool result) got HTTP 500; "
                           "Runner.run raised openai.InternalServerError (client max_retries=0)"),
    "run_fails_chat": ("error", "model call #2 of the run (Support agent, after the tool result; Chat Completions API) got "
                                "HTTP 500; Runner.run raised openai.InternalServerError (client max_retries=0)"),
    "run_fails_max_turns": ("error", "Runner.run raised agents.exceptions.MaxTurnsExceeded (max_turns=2) after "
                                     "2 model calls and 2 successful tool calls, before a 3rd model call"),
}

USER_INPUT = {
    "tool_ok": "Where is my order A-100?",
    "chat_completions": "Where is my order A-100?",
    "tool_error": "Can you check my account?",
    "run_fails": "Where is my order A-100?",
    "run_fails_max_turns": "Where is my order A-100?",
    "run_fails_chat": "Where is my order A-100?",
    "handoff": "I have a question about my invoice.",
}


def run_scenario(setup_name: str, setup: dict, scenario: str, server, prov, instrument) -> dict:
    if scenario in APPROVAL_SCENARIOS:
        return run_approval_scenario(setup_name, setup, scenario, server, prov, instrument)
    import openai
    from agents import (
        Agent,
        MaxTurnsExceeded,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        function_tool,
        set_default_openai_api,
        set_default_openai_client,
    )
    from agents.tracing import get_trace_provider, set_trace_processors

    # Drop the SDK's default exporter to platform.openai.com; keep SDK tracing on
    # so the OTel instrumentations (which are SDK trace processors) see spans.
    set_trace_processors([])
    instrumentors = instrument(setup["instrument"], prov)

    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-conformance", max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    api = "chat_completions" if scenario in CHAT_SCENARIOS else "responses"
    set_default_openai_api("responses")

    tool_log: list[dict] = []

    def make_tools(agent_name: str):
        @function_tool
        def get_order_status(order_id: str) -> str:
            """Look up the shipping status of an order."""
            tool_log.append({"tool": "get_order_status", "error": False, "agent": agent_name})
            return f"Order {order_id}: shipped yesterday"

        @function_tool
        def lookup_account(account_id: str) -> str:
            """Look up a customer account."""
            tool_log.append({"tool": "lookup_account", "error": True, "agent": agent_name})
            raise ValueError(f"account database unavailable for {account_id}")

        @function_tool
        def get_invoice(invoice_id: str) -> str:
            """Fetch an invoice."""
            tool_log.append({"tool": "get_invoice", "error": False, "agent": agent_name})
            return f"Invoice {invoice_id}: paid"

        return {"get_order_status": get_order_status, "lookup_account": lookup_account, "get_invoice": get_invoice}

    def instructions(name: str, extra: str) -> str:
        return f"[agent:{name}] You are the {name}. {extra}"

    if scenario == "handoff":
        billing = Agent(name=BILLING, instructions=instructions(BILLING, "Answer billing questions with get_invoice."),
                        tools=[make_tools(BILLING)["get_invoice"]], model="gpt-4o-mini")
        entry = Agent(name=TRIAGE, instructions=instructions(TRIAGE, "Route billing questions to the Billing agent."),
                      handoffs=[billing], model="gpt-4o-mini")
    else:
        tools = make_tools(SUPPORT)
        tool = tools["lookup_account"] if scenario == "tool_error" else tools["get_order_status"]
        model: Any = "gpt-4o-mini"
        if scenario in CHAT_SCENARIOS:
            model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        entry = Agent(name=SUPPORT, instructions=instructions(SUPPORT, "Help customers with their orders."),
                      tools=[tool], model=model)

    sid = S.system_id(setup_name, scenario)
    runs = []
    problems = []
    exp_outcome, exp_where = EXPECT[scenario]
    async def one_run(cfg, kwargs):
        return await Runner.run(entry, USER_INPUT[scenario], run_config=cfg, **kwargs)

    loop = asyncio.new_event_loop()
    for r in range(2):
        tool_log.clear()
        script = script_for(scenario, r)
        server.set_script(script, r)
        group_id = f"{sid}-task-{r + 1}"
        cfg = RunConfig(workflow_name=WORKFLOW, group_id=group_id)
        kwargs = {"max_turns": 2} if scenario == "run_fails_max_turns" else {}
        outcome, where, extra = "success", None, {}
        try:
            result = loop.run_until_complete(one_run(cfg, kwargs))
            u = result.context_wrapper.usage
            extra = {"final_output": str(result.final_output), "last_agent": result.last_agent.name,
                     "framework_usage": {"requests": u.requests, "input_tokens": u.input_tokens,
                                         "output_tokens": u.output_tokens, "total_tokens": u.total_tokens}}
        except (openai.APIError, MaxTurnsExceeded) as e:  # expected failure kinds
            outcome = "error"
            where = exp_where
            extra = {"exception": f"{type(e).__module__}.{type(e).__name__}: {e}"[:300]}
        get_trace_provider().force_flush()
        run = S_summarize(server, r, tool_log, outcome, where, group_id, setup,
                          {HANDOFF_TOOL}, extra)
        runs.append(run)
        if outcome != exp_outcome:
            problems.append(f"run {r}: outcome {outcome} != expected {exp_outcome} ({extra})")
        if server.remaining():
            problems.append(f"run {r}: {server.remaining()} scripted steps not consumed")
        fu = extra.get("framework_usage")
        if fu and fu["input_tokens"] + fu["output_tokens"] != run["tokens"]:
            problems.append(f"run {r}: framework usage {fu} != server tokens {run['tokens']}")
    loop.run_until_complete(client.close())
    loop.close()
    uninstrument(instrumentors, problems)
    return {
        "framework": "openai-agents",
        "framework_dist": "openai-agents",
        "api": api,
        "runs": runs,
        "problems": problems,
        "notes": S.notes_for(setup_name, scenario),
        "other_dists": ["openinference-semantic-conventions", "openinference-instrumentation",
                        "opentelemetry-semantic-conventions-ai"],
    }


def S_summarize(server, r, tool_log, outcome, where, group_id, setup, handoff_tools, extra):
    from runner import summarize_run

    task_id = group_id if setup.get("task_id_attr") else None
    return summarize_run(server, r, tool_log, outcome, where, task_id, group_id, handoff_tools, extra)


# ---------------------------------------------------------------------------
# Human-in-the-loop approval scenarios (function_tool(needs_approval=True)).
#
# Runner.run returns a RunResult with .interruptions (ToolApprovalItem) instead of
# running a tool that needs approval; the script turns it into a RunState
# (result.to_state()), calls state.approve(item) / state.reject(item) and resumes
# with Runner.run(agent, state, run_config=<same RunConfig>).  The resumed call
# reattaches the SDK trace (same SDK trace_id, group_id, workflow name) WITHOUT
# notifying the trace processors again (agents/tracing/context.py
# create_trace_for_run -> reattach_trace) - what that does to each OTel
# instrumentation is what these fixtures record.

APPROVAL_BASE = ("approval_granted", "approval_denied", "approval_expired", "two_approvals")
# The same four through OpenAIChatCompletionsModel (Chat Completions API) instead of the Responses API.
APPROVAL_CHAT = tuple(f"{b}_chat" for b in APPROVAL_BASE)
APPROVAL_SCENARIOS = APPROVAL_BASE + APPROVAL_CHAT


def approval_base(scenario: str) -> str:
    """The Responses-API scenario a `<name>_chat` approval scenario repeats."""
    return scenario.removesuffix("_chat")

# scenario -> decisions applied to the interruptions, one list per pause
APPROVAL_PLAN = {
    "approval_granted": ["approved"],
    "approval_denied": ["denied"],
    "approval_expired": ["expired"],
    "two_approvals": ["approved"],  # one model response with two calls -> ONE pause with TWO interruptions
}

APPROVAL_INPUT = {
    "approval_granted": "Please refund payment PAY-100.",
    "approval_denied": "Please refund payment PAY-100.",
    "approval_expired": "Please refund payment PAY-100.",
    "two_approvals": "Please refund payment PAY-100 and cancel subscription SUB-100.",
}


def approval_script(scenario: str, run: int) -> list[dict[str, Any]]:
    scenario = approval_base(scenario)
    pay, sub = f"PAY-{100 + run}", f"SUB-{100 + run}"
    refund = {"kind": "tool", "tool": "refund_payment", "args": {"payment_id": pay}, "usage": usage(run, 0)}
    if scenario == "approval_granted":
        return [refund, {"kind": "text", "text": f"Payment {pay} has been refunded.", "usage": usage(run, 1)}]
    if scenario == "approval_denied":
        return [refund, {"kind": "text", "text": f"The refund of {pay} was not approved, so I did not issue it.",
                         "usage": usage(run, 1)}]
    if scenario == "approval_expired":
        return [refund]  # the run pauses and is never resumed: no second model call
    if scenario == "two_approvals":
        return [
            {"kind": "tools", "calls": [{"tool": "refund_payment", "args": {"payment_id": pay}},
                                        {"tool": "cancel_subscription", "args": {"subscription_id": sub}}],
             "usage": usage(run, 0)},
            {"kind": "text", "text": f"Payment {pay} has been refunded and subscription {sub} cancelled.",
             "usage": usage(run, 1)},
        ]
    raise SystemExit(f"unknown approval scenario {scenario}")


def run_approval_scenario(setup_name: str, setup: dict, scenario: str, server, prov, instrument) -> dict:
    import openai
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool, \
        set_default_openai_api, set_default_openai_client
    from agents.tool_context import ToolContext

    globals()["ToolContext"] = ToolContext  # function_schema resolves the (string) annotation in this module
    from agents.tracing import get_trace_provider, set_trace_processors

    from agents.tracing import add_trace_processor
    from agents.tracing.processor_interface import TracingProcessor

    class SdkSpy(TracingProcessor):
        """Records what the SDK hands its trace processors (exports nothing), for truth.json."""

        def __init__(self):
            self.events: list[dict] = []

        def on_trace_start(self, trace):
            self.events.append({"ev": "trace_start", "trace_id": trace.trace_id})

        def on_trace_end(self, trace):
            self.events.append({"ev": "trace_end", "trace_id": trace.trace_id})

        def on_span_start(self, span):
            self.events.append({"ev": "span_start", "trace_id": span.trace_id})

        def on_span_end(self, span):
            d = span.span_data
            if getattr(d, "type", None) == "function":
                err = span.error
                self.events.append({"ev": "function_span", "trace_id": span.trace_id, "name": d.name,
                                    "output": None if d.output is None else str(d.output),
                                    "error": err.get("message") if err else None})

        def shutdown(self):
            pass

        def force_flush(self):
            pass

    set_trace_processors([])
    instrumentors = instrument(setup["instrument"], prov)
    spy = SdkSpy()
    add_trace_processor(spy)  # after the instrumentors (OpenInference replaces the processor list)
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-conformance", max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    set_default_openai_api("responses")

    tool_log: list[dict] = []

    @function_tool(needs_approval=True)
    def refund_payment(ctx: ToolContext, payment_id: str) -> str:
        """Refund a payment (needs a human's approval)."""
        tool_log.append({"tool": "refund_payment", "error": False, "agent": SUPPORT, "tool_call_id": ctx.tool_call_id})
        return f"Payment {payment_id}: refunded"

    @function_tool(needs_approval=True)
    def cancel_subscription(ctx: ToolContext, subscription_id: str) -> str:
        """Cancel a subscription (needs a human's approval)."""
        tool_log.append({"tool": "cancel_subscription", "error": False, "agent": SUPPORT,
                         "tool_call_id": ctx.tool_call_id})
        return f"Subscription {subscription_id}: cancelled"

    base = approval_base(scenario)
    chat = scenario in APPROVAL_CHAT
    tools = [refund_payment, cancel_subscription] if base == "two_approvals" else [refund_payment]
    model: Any = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client) if chat else "gpt-4o-mini"
    entry = Agent(name=SUPPORT, instructions=f"[agent:{SUPPORT}] You are the {SUPPORT}. Help customers with "
                                             "payments; refunds and cancellations need a human's approval.",
                  tools=tools, model=model)

    sid = S.system_id(setup_name, scenario)
    runs, problems = [], []
    plan = APPROVAL_PLAN[base]
    loop = asyncio.new_event_loop()

    def spans_so_far() -> int:
        get_trace_provider().force_flush()
        prov.flush()
        return len(prov.span_exporter.get_finished_spans())

    for r in range(2):
        tool_log.clear()
        script = approval_script(scenario, r)
        server.set_script(script, r)
        group_id = f"{sid}-task-{r + 1}"
        cfg = RunConfig(workflow_name=WORKFLOW, group_id=group_id)
        approvals: list[dict] = []
        parts: list[dict] = []  # one per Runner.run call: the SDK trace id and the OTel traces it produced
        paused = resumed = False
        start, spy_start = spans_so_far(), len(spy.events)
        run_key = os.environ.get("OCTANT_CONFORMANCE_RUN_KEY")
        run_id = f"{sid}-run-{r + 1}" if run_key else None
        S.RUN_ID.set(run_id)
        result = loop.run_until_complete(Runner.run(entry, APPROVAL_INPUT[base], run_config=cfg))
        pause_index = 0
        while True:
            state = result.to_state()
            end = spans_so_far()
            evs = spy.events[spy_start:]
            sdk_tids = list(dict.fromkeys(e["trace_id"] for e in evs))
            parts.append({
                "part": "resume" if parts else "initial",
                "interruptions": len(result.interruptions),
                "span_range": [start, end],
                # what the SDK handed its trace processors during this Runner.run call
                "sdk_trace_ids": sdk_tids,
                "sdk_trace_start_notified": any(e["ev"] == "trace_start" for e in evs),
                "sdk_trace_end_notified": any(e["ev"] == "trace_end" for e in evs),
                "sdk_spans": sum(e["ev"] == "span_start" for e in evs),
                "sdk_function_spans": [{k: e[k] for k in ("name", "output", "error")}
                                       for e in evs if e["ev"] == "function_span"],
            })
            start, spy_start = end, len(spy.events)
            if not result.interruptions:
                break
            paused = True
            decision = plan[pause_index] if pause_index < len(plan) else "approved"
            pause_index += 1
            for item in result.interruptions:
                approvals.append({"tool": item.tool_name, "tool_call_id": item.call_id, "decision": decision,
                                  "agent": item.agent.name})
                if decision == "approved":
                    state.approve(item)
                elif decision == "denied":
                    state.reject(item)
            if decision == "expired":
                del state  # abandoned: never approved, rejected or resumed
                break
            resumed = True
            result = loop.run_until_complete(Runner.run(entry, state, run_config=cfg))

        # which OTel traces each part's spans landed in
        finished = prov.span_exporter.get_finished_spans()
        all_tids: list[str] = []
        for part in parts:
            a, b = part.pop("span_range")
            tids: list[str] = []
            for sp in finished[a:b]:
                tid = format(sp.context.trace_id, "032x")
                if tid not in tids:
                    tids.append(tid)
            part["spans"] = b - a
            part["trace_ids"] = tids
            all_tids += [t for t in tids if t not in all_tids]

        u = result.context_wrapper.usage
        completed = not result.interruptions
        extra = {
            "approvals": approvals,
            "paused": paused,
            "resumed": resumed,
            "traces": len(all_tids),
            "trace_ids": all_tids,
            "parts": parts,
            "final_output": str(result.final_output) if completed else None,
            "interrupted": not completed,
            "last_agent": result.last_agent.name,
            "framework_usage": {"requests": u.requests, "input_tokens": u.input_tokens,
                                "output_tokens": u.output_tokens, "total_tokens": u.total_tokens},
        }
        if run_key:
            extra["run_key"] = {"attribute": run_key, "value": run_id}
        S.RUN_ID.set(None)
        # Outcome as the SDK reports it: every Runner.run call returned a RunResult without raising,
        # also the abandoned (expired) run, whose last RunResult has interruptions and final_output None.
        from runner import summarize_run

        run = summarize_run(server, r, tool_log, "success", None, None, group_id, frozenset(), extra)
        runs.append(run)

        # self-checks against the script
        want_ran = {"approval_granted": ["refund_payment"], "approval_denied": [], "approval_expired": [],
                    "two_approvals": ["refund_payment", "cancel_subscription"]}[base]
        if sorted(t["tool"] for t in tool_log) != sorted(want_ran):
            problems.append(f"run {r}: tools ran {tool_log} != {want_ran}")
        want_approvals = 2 if base == "two_approvals" else 1
        if len(approvals) != want_approvals:
            problems.append(f"run {r}: {len(approvals)} approvals != {want_approvals}")
        scripted_ids = [tc["tool_call_id"] for c in server.calls_for_run(r) if c.get("status") == 200
                        for tc in (c.get("tool_calls") or ([c] if c.get("tool") else []))]
        if sorted(a["tool_call_id"] for a in approvals) != sorted(scripted_ids):
            problems.append(f"run {r}: approval call ids {approvals} != server's {scripted_ids}")
        want_api = "chat_completions" if chat else "responses"
        if any(c.get("api") != want_api for c in server.calls_for_run(r)):
            problems.append(f"run {r}: model calls not all through the {want_api} API")
        if server.remaining():
            problems.append(f"run {r}: {server.remaining()} scripted steps not consumed")
        if u.input_tokens + u.output_tokens != run["tokens"]:
            problems.append(f"run {r}: framework usage {extra['framework_usage']} != server tokens {run['tokens']}")
    loop.run_until_complete(client.close())
    loop.close()
    uninstrument(instrumentors, problems)
    return {
        "framework": "openai-agents",
        "framework_dist": "openai-agents",
        "api": "chat_completions" if chat else "responses",
        "runs": runs,
        "problems": problems,
        "notes": S.notes_for(setup_name, scenario),
        "other_dists": ["openinference-semantic-conventions", "openinference-instrumentation",
                        "opentelemetry-semantic-conventions-ai"],
    }
