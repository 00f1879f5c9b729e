"""LangGraph scenarios (run inside a family venv by runner.py).

Agents are built with the current prebuilt agent factory,
``langchain.agents.create_agent`` (LangGraph's ``create_react_agent`` successor),
on ``langchain_openai.ChatOpenAI`` (Chat Completions API) pointed at the
scripted model server.
"""

from __future__ import annotations

from typing import Any

import setups as S
from fw_agents import BILLING, SUPPORT, TRIAGE, uninstrument, usage
from fw_agents import script_for as agents_script_for


def script_for(scenario: str, run: int) -> list[dict[str, Any]]:
    # The single-agent scenarios are the Agents SDK's, call for call.
    if scenario in ("tool_ok", "tool_error", "run_fails"):
        return agents_script_for(scenario, run)
    if scenario == "multi_node":
        return [
            {"kind": "text", "text": "This is a billing question; passing you to the Billing agent.", "usage": usage(run, 0)},
            {"kind": "tool", "tool": "get_invoice", "args": {"invoice_id": f"INV-{7 + run}"}, "usage": usage(run, 1)},
            {"kind": "text", "text": f"Invoice INV-{7 + run} is paid.", "usage": usage(run, 2)},
        ]
    raise SystemExit(f"unknown langgraph scenario {scenario}")


EXPECT = {
    "tool_ok": ("success", None),
    "tool_error": ("success", None),
    "multi_node": ("success", None),
    "run_fails": ("error", "model call #2 of the run (Support agent, after the tool result) got HTTP 500; "
                           "graph.invoke raised openai.InternalServerError (ChatOpenAI max_retries=0)"),
}

USER_INPUT = {
    "tool_ok": "Where is my order A-100?",
    "tool_error": "Can you check my account?",
    "run_fails": "Where is my order A-100?",
    "multi_node": "I have a question about my invoice.",
}


def run_scenario(setup_name: str, setup: dict, scenario: str, server, prov, instrument) -> dict:
    instrumentors = instrument(setup["instrument"], prov)

    import openai
    from langchain.agents import create_agent
    from langchain_core.tools import StructuredTool, ToolException
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph

    tool_log: list[dict] = []

    def make_tools(agent_name: str):
        def get_order_status(order_id: str) -> str:
            """Look up the shipping status of an order."""
            tool_log.append({"tool": "get_order_status", "error": False, "agent": agent_name})
            return f"Order {order_id}: shipped yesterday"

        def lookup_account(account_id: str) -> str:
            """Look up a customer account."""
            tool_log.append({"tool": "lookup_account", "error": True, "agent": agent_name})
            raise ToolException(f"account database unavailable for {account_id}")

        def get_invoice(invoice_id: str) -> str:
            """Fetch an invoice."""
            tool_log.append({"tool": "get_invoice", "error": False, "agent": agent_name})
            return f"Invoice {invoice_id}: paid"

        return {
            "get_order_status": StructuredTool.from_function(get_order_status),
            # handle_tool_error=True: the ToolException becomes an error ToolMessage the model sees
            "lookup_account": StructuredTool.from_function(lookup_account, handle_tool_error=True),
            "get_invoice": StructuredTool.from_function(get_invoice),
        }

    def model():
        return ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="sk-conformance", max_retries=0)

    def prompt(name: str, extra: str) -> str:
        return f"[agent:{name}] You are the {name}. {extra}"

    if scenario == "multi_node":
        triage = create_agent(model(), [], system_prompt=prompt(TRIAGE, "Decide which team handles the question."),
                              name=TRIAGE)
        billing = create_agent(model(), [make_tools(BILLING)["get_invoice"]],
                               system_prompt=prompt(BILLING, "Answer billing questions with get_invoice."), name=BILLING)
        g = StateGraph(MessagesState)
        g.add_node(TRIAGE, triage)
        g.add_node(BILLING, billing)
        g.add_edge(START, TRIAGE)
        g.add_edge(TRIAGE, BILLING)
        g.add_edge(BILLING, END)
        graph = g.compile(name="Customer support")
    else:
        tools = make_tools(SUPPORT)
        tool = tools["lookup_account"] if scenario == "tool_error" else tools["get_order_status"]
        graph = create_agent(model(), [tool], system_prompt=prompt(SUPPORT, "Help customers with their orders."),
                             name=SUPPORT)

    sid = S.system_id(setup_name, scenario)
    runs, problems = [], []
    exp_outcome, exp_where = EXPECT[scenario]
    for r in range(2):
        tool_log.clear()
        server.set_script(script_for(scenario, r), r)
        thread_id = f"{sid}-task-{r + 1}"
        config = {"configurable": {"thread_id": thread_id}, "metadata": {"thread_id": thread_id}}
        outcome, where, extra = "success", None, {}
        try:
            result = graph.invoke({"messages": [{"role": "user", "content": USER_INPUT[scenario]}]}, config=config)
            msgs = result["messages"]
            in_t = sum((getattr(m, "usage_metadata", None) or {}).get("input_tokens", 0) for m in msgs)
            out_t = sum((getattr(m, "usage_metadata", None) or {}).get("output_tokens", 0) for m in msgs)
            extra = {"final_output": str(msgs[-1].content),
                     "framework_usage": {"input_tokens": in_t, "output_tokens": out_t,
                                         "source": "sum of AIMessage.usage_metadata in the final state"},
                     "tool_message_status": [getattr(m, "status", None) for m in msgs if m.type == "tool"]}
        except openai.APIError as e:
            outcome, where = "error", exp_where
            extra = {"exception": f"{type(e).__module__}.{type(e).__name__}: {e}"[:300]}
        from runner import summarize_run

        task_id = thread_id if setup.get("task_id_attr") else None
        run = summarize_run(server, r, tool_log, outcome, where, task_id, thread_id, frozenset(), extra)
        runs.append(run)
        if outcome != exp_outcome:
            problems.append(f"run {r}: outcome {outcome} != expected {exp_outcome} ({extra})")
        if server.remaining():
            problems.append(f"run {r}: {server.remaining()} scripted steps not consumed")
        fu = extra.get("framework_usage")
        if fu and fu["input_tokens"] + fu["output_tokens"] != run["tokens"]:
            problems.append(f"run {r}: framework usage {fu} != server tokens {run['tokens']}")
    uninstrument(instrumentors, problems)
    notes = S.notes_for(setup_name, scenario)
    return {
        "framework": "langgraph",
        "framework_dist": "langgraph",
        "api": "chat_completions",
        "runs": runs,
        "problems": problems,
        "notes": notes,
        "other_dists": ["langchain", "langchain-core", "langchain-openai", "openinference-instrumentation",
                        "openinference-semantic-conventions", "opentelemetry-semantic-conventions-ai"],
    }
