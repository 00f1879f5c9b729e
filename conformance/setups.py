"""Setup / family / scenario registry for the conformance suite (stdlib only).

A *family* is one virtual environment (``.octant/conformance/venvs/<family>``)
installed from ``conformance/requirements/<family>.txt`` (exact pins).
A *setup* is one framework traced by one combination of instrumentations
inside a family venv.  Every setup runs each of its scenarios in its own
Python subprocess, so instrumentation never leaks between setups.
"""

from __future__ import annotations

# Environment common to every setup (recorded in truth.json).
COMMON_ENV = {
    "OPENAI_API_KEY": "sk-conformance-not-a-real-key",
    "OTEL_SDK_DISABLED": "false",
    "TOKENIZERS_PARALLELISM": "false",
    "TRACELOOP_TELEMETRY": "false",  # stop OpenLLMetry's anonymous usage telemetry (no network here anyway)
    "ANONYMIZED_TELEMETRY": "false",
}

CONTRIB_ENV = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
}

# To keep the committed fixtures small (~2 MB), the run_fails* scenarios record
# with message-content capture OFF (their point is the error shapes); every other
# scenario records with content capture ON.  The env actually used is in truth.json.
NO_CONTENT_SCENARIOS = ("run_fails", "run_fails_max_turns", "run_fails_chat")
NO_CONTENT_ENV = {
    "opentelemetry-python-contrib": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "no_content"},
    "openinference": {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"},
    "openllmetry": {"TRACELOOP_TRACE_CONTENT": "false"},
}


def env_for(setup: str, scenario: str) -> dict:
    cfg = SETUPS[setup]
    env = {**COMMON_ENV, **cfg["env"]}
    if scenario in NO_CONTENT_SCENARIOS:
        env.update(NO_CONTENT_ENV[cfg["library"]])
    return env


FAMILIES = {
    "contrib": {"requirements": "requirements/contrib.txt", "framework": "openai-agents"},
    "openinference": {"requirements": "requirements/openinference.txt", "framework": "openai-agents"},
    "openllmetry": {"requirements": "requirements/openllmetry.txt", "framework": "openai-agents"},
    "lg-openinference": {"requirements": "requirements/lg-openinference.txt", "framework": "langgraph"},
    "lg-openllmetry": {"requirements": "requirements/lg-openllmetry.txt", "framework": "langgraph"},
}

AGENTS_SCENARIOS = ["tool_ok", "tool_error", "run_fails", "run_fails_max_turns", "handoff", "chat_completions"]
# run_fails_chat (a failing Chat Completions call) only matters where a client instrumentation nests.
AGENTS_CLIENT_SCENARIOS = AGENTS_SCENARIOS + ["run_fails_chat"]
LANGGRAPH_SCENARIOS = ["tool_ok", "tool_error", "run_fails", "multi_node"]
# Human-in-the-loop approvals (function_tool(needs_approval=True), RunState approve/reject/resume),
# recorded for the three plain (no client instrumentation) Agents SDK setups.
APPROVAL_SCENARIOS = ["approval_granted", "approval_denied", "approval_expired", "two_approvals"]
AGENTS_APPROVAL_SCENARIOS = AGENTS_SCENARIOS + APPROVAL_SCENARIOS

# instrumentation key -> (distribution name, library label)
INSTRUMENTATIONS = {
    "contrib-openai-agents": "opentelemetry-instrumentation-openai-agents-v2",
    "contrib-openai": "opentelemetry-instrumentation-openai-v2",
    "oi-openai-agents": "openinference-instrumentation-openai-agents",
    "oi-openai": "openinference-instrumentation-openai",
    "oi-langchain": "openinference-instrumentation-langchain",
    "tl-openai-agents": "opentelemetry-instrumentation-openai-agents",
    "tl-openai": "opentelemetry-instrumentation-openai",
    "tl-langchain": "opentelemetry-instrumentation-langchain",
}

# task_id_attr: the span attribute (found by reading the instrumentation's
# source) that carries the task id we pass (Agents SDK RunConfig.group_id /
# LangGraph thread_id).  None = the instrumentation has no place for it, so
# truth.json's task_id is null (task_id_sent still records what we passed).
SETUPS = {
    "contrib-agents": {
        "family": "contrib",
        "library": "opentelemetry-python-contrib",
        "framework": "openai-agents",
        "instrument": ["contrib-openai-agents"],
        "env": CONTRIB_ENV,
        "scenarios": AGENTS_APPROVAL_SCENARIOS,
        "task_id_attr": None,
    },
    "contrib-agents-client": {
        "family": "contrib",
        "library": "opentelemetry-python-contrib",
        "framework": "openai-agents",
        "instrument": ["contrib-openai-agents", "contrib-openai"],
        "env": CONTRIB_ENV,
        "scenarios": AGENTS_CLIENT_SCENARIOS,
        "task_id_attr": None,
    },
    "contrib-agents-client-events": {
        "family": "contrib",
        "library": "opentelemetry-python-contrib",
        "framework": "openai-agents",
        "instrument": ["contrib-openai-agents", "contrib-openai"],
        "env": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only"},
        "scenarios": ["chat_completions", "run_fails_chat"],
        "task_id_attr": None,
    },
    "openinference-agents": {
        "family": "openinference",
        "library": "openinference",
        "framework": "openai-agents",
        "instrument": ["oi-openai-agents"],
        "env": {},
        "scenarios": AGENTS_APPROVAL_SCENARIOS,
        "task_id_attr": None,
    },
    "openinference-agents-client": {
        "family": "openinference",
        "library": "openinference",
        "framework": "openai-agents",
        "instrument": ["oi-openai-agents", "oi-openai"],
        "env": {},
        "scenarios": AGENTS_CLIENT_SCENARIOS,
        "task_id_attr": None,
    },
    "openllmetry-agents": {
        "family": "openllmetry",
        "library": "openllmetry",
        "framework": "openai-agents",
        "instrument": ["tl-openai-agents"],
        "env": {"TRACELOOP_TRACE_CONTENT": "true"},
        "scenarios": AGENTS_APPROVAL_SCENARIOS,
        "task_id_attr": None,
    },
    "openllmetry-agents-client": {
        "family": "openllmetry",
        "library": "openllmetry",
        "framework": "openai-agents",
        "instrument": ["tl-openai-agents", "tl-openai"],
        "env": {"TRACELOOP_TRACE_CONTENT": "true"},
        "scenarios": AGENTS_CLIENT_SCENARIOS,
        "task_id_attr": None,
    },
    "openinference-langgraph": {
        "family": "lg-openinference",
        "library": "openinference",
        "framework": "langgraph",
        "instrument": ["oi-langchain"],
        "env": {},
        "scenarios": LANGGRAPH_SCENARIOS,
        "task_id_attr": "session.id",  # from LangChain run metadata thread_id / session_id / conversation_id
    },
    "openllmetry-langgraph": {
        "family": "lg-openllmetry",
        "library": "openllmetry",
        "framework": "langgraph",
        "instrument": ["tl-langchain"],
        "env": {"TRACELOOP_TRACE_CONTENT": "true"},
        "scenarios": LANGGRAPH_SCENARIOS,
        "task_id_attr": "gen_ai.conversation.id",  # + traceloop.association.properties.thread_id (from run metadata)
    },
}

# Notes copied into truth.json["notes"] ("*" = every scenario of the setup).
# They describe what the library does NOT emit / emits oddly; they were
# written from reading the instrumentations' source and the recorded spans.
NOTES = {
    "contrib-agents": {
        "*": "Root span = the SDK trace (name = RunConfig.workflow_name 'Customer support', kind SERVER, "
             "gen_ai.operation.name='invoke_agent', NO agent name) and its status is OK even when the run fails. "
             "SDK task/turn spans become INTERNAL spans named 'unknown' (gen_ai.operation.name='unknown'). "
             "Every span carries the instrumentation defaults gen_ai.agent.name='OpenAI Agent', gen_ai.agent.id='agent', "
             "gen_ai.agent.description='OpenAI Agents instrumentation' except 'invoke_agent <name>' spans, whose "
             "gen_ai.agent.name is the real agent (gen_ai.agent.id is still 'agent'). server.address/port are always "
             "api.openai.com:443 (defaults, not the real base_url). RunConfig.group_id is not emitted (task_id null). "
             "Tool spans have no gen_ai.tool.call.id. Tokens: gen_ai.usage.input_tokens/output_tokens on 'chat <model>' "
             "spans (kind CLIENT), which also carry gen_ai.response.id for the Responses API.",
        "tool_error": "The failing tool's 'execute_tool' span has status ERROR ('Error running tool (non-fatal)'); "
                      "the run still succeeds.",
        "run_fails": "Failed run: 'invoke_agent Support agent' span ERROR ('Error in agent run') and the failed "
                     "'chat' span ERROR (no usage, no response id); root and task spans stay OK. No exception events.",
        "run_fails_chat": "As run_fails, with the Chat Completions model.",
        "run_fails_max_turns": "MaxTurnsExceeded: only the 'invoke_agent' span is ERROR ('Max turns exceeded'); "
                               "no model call failed, root OK.",
        "handoff": "Handoff = span 'agent_handoff OpenAI Agent' with gen_ai.handoff.from_agent / to_agent, under "
                   "the first agent's turn; the second agent gets its own 'invoke_agent Billing agent' span as a "
                   "sibling of the first agent span (both under the task span). The scripted handoff tool call "
                   "(transfer_to_billing_agent) is listed under runs[].handoffs, not tool_calls.",
        "chat_completions": "For the Chat Completions model the framework 'chat gpt-4o-mini' span has usage but NO "
                            "gen_ai.response.id.",
    },
    "contrib-agents-client": {
        "*": "Same as contrib-agents plus opentelemetry-instrumentation-openai-v2 (client). The client "
             "instrumentation only wraps chat.completions and embeddings, NOT the Responses API, so client spans "
             "appear only in chat_completions / run_fails_chat. There, a client span 'chat gpt-4o-mini' "
             "(scope opentelemetry.util.genai.handler 1.1b0, schema 1.37.0, status UNSET) nests under the "
             "framework's 'chat gpt-4o-mini' span; BOTH carry gen_ai.usage.input_tokens/output_tokens (same "
             "numbers) but only the client span has gen_ai.response.id - count tokens once per model call. The "
             "client span has no server.address (openai 3.x uses httpx2, the instrumentation checks httpx.URL).",
        "tool_error": "See contrib-agents.",
        "run_fails": "See contrib-agents (Responses API: no client span).",
        "run_fails_chat": "Failed chat call: framework 'chat gpt-4o-mini' span ERROR, nested client span ERROR "
                          "with error.type=\"<class 'openai.InternalServerError'>\" (a Python class repr) and no "
                          "exception event; 'invoke_agent' ERROR; root OK.",
    },
    "contrib-agents-client-events": {
        "*": "contrib-agents-client with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only: message "
             "content leaves the span attributes and is emitted as events (see logs.pb / span events). NB: "
             "opentelemetry-util-genai >= 1.x only supports the latest-experimental conventions "
             "(is_experimental_mode() always returns True), so there is no legacy-semconv path to record.",
    },
    "openinference-agents": {
        "*": "All spans INTERNAL, typed by openinference.span.kind (AGENT/CHAIN/LLM/TOOL). Root = SDK trace span "
             "(name 'Customer support', openinference.span.kind='AGENT', no agent.name), child = task span (same "
             "name, CHAIN), then one span per agent named after the agent with agent.name and graph.node.id, then "
             "'turn' (CHAIN) spans, under which 'response' (LLM) and tool spans (TOOL, tool.name, "
             "tool.description, tool.parameters). Tokens: llm.token_count.prompt / completion / total. No "
             "gen_ai.response.id attribute - the response id is only inside output.value JSON. Tool spans have no "
             "tool call id (ids only in llm.output_messages.N.message.tool_calls.M.tool_call.id). No schema_url, "
             "group_id not emitted (task_id null). The instrumentor REPLACES all SDK trace processors "
             "(exclusive_processor=True default).",
        "tool_error": "The failing tool span is ERROR ('Error running tool (non-fatal)').",
        "run_fails": "Agent span ERROR ('Error in agent run'), failed 'response' span ERROR; root/task OK. No "
                     "exception events from the agents instrumentation.",
        "run_fails_max_turns": "Only the agent span is ERROR ('Max turns exceeded').",
        "handoff": "Handoff = TOOL-less CHAIN span 'handoff to Billing agent' under the Triage agent's turn.",
    },
    "openinference-agents-client": {
        "*": "openinference-agents + openinference-instrumentation-openai: a client LLM span 'Response' "
             "(Responses API) or 'ChatCompletion' (Chat Completions) nests under each framework 'response'/"
             "'generation' LLM span; both carry llm.token_count.* (same numbers) - count once. The client span "
             "records exceptions as an 'exception' event with status ERROR.",
    },
    "openllmetry-agents": {
        "*": "Root span is always named 'Agent Workflow' (traceloop.span.kind='workflow', traceloop.workflow.name="
             "'Agent Workflow'; RunConfig.workflow_name is ignored). No task/turn spans. Agent spans '<name>.agent' "
             "(gen_ai.agent.name, gen_ai.operation.name='invoke_agent'), model spans 'openai.response' kind CLIENT "
             "(gen_ai.response.id, gen_ai.usage.input_tokens/output_tokens/total_tokens/cache_read.input_tokens/"
             "reasoning_tokens), tool spans '<tool>.tool' (gen_ai.tool.name, no tool call id). No schema_url, no "
             "scope attributes. group_id not emitted (task_id null). Statuses of successful spans: OK.",
        "tool_error": "Failing tool span ERROR with a dict-like message \"{'message': 'Error running tool "
                      "(non-fatal)', ...}\".",
        "run_fails": "Agent span ERROR and failed 'openai.response' span ERROR; root OK.",
        "run_fails_max_turns": "Only the agent span is ERROR ('Max turns exceeded').",
        "handoff": "Handoff span 'Triage agent → unknown.handoff' (gen_ai.handoff.from_agent only; the target "
                   "agent is 'unknown'); the Billing agent span is a sibling under the root.",
    },
    "openllmetry-agents-client": {
        "*": "openllmetry-agents + Traceloop's opentelemetry-instrumentation-openai: a client span "
             "'openai.response' (Responses) / 'openai.chat' (Chat Completions), status UNSET, scope "
             "opentelemetry.instrumentation.openai.v1, nests under the framework's 'openai.response' span; both "
             "carry the SAME gen_ai.response.id and the same gen_ai.usage.* - dedupe by response id. NB the "
             "framework span is named 'openai.response' even for the Chat Completions model. Failed client calls: "
             "status ERROR, error.type='InternalServerError' and an 'exception' event.",
    },
    "openinference-langgraph": {
        "*": "All spans INTERNAL with openinference.span.kind. Root = the graph (CHAIN) named after the agent / "
             "compiled graph name; node spans ('model', 'tools', or the agent node names) are CHAIN; LLM spans "
             "'ChatOpenAI' (llm.token_count.prompt/completion/total, llm.model_name, no response id attribute); "
             "tool spans TOOL (tool.name). Every span has session.id = the LangGraph thread_id (from run metadata) "
             "and a JSON 'metadata' attribute (lc_agent_name, langgraph_node, langgraph_step, thread_id). No "
             "agent.name attribute: the agent name is only in metadata.lc_agent_name / the root span name.",
        "tool_error": "A ToolException handled by the tool (handle_tool_error=True) leaves every span OK; the "
                      "error is only visible in the ToolMessage content/status inside output.value.",
        "run_fails": "The failing 'ChatOpenAI' LLM span, its 'model' node span and the root are all ERROR with "
                     "an 'exception' event (status message includes a Python traceback).",
        "multi_node": "Two create_agent subgraphs (Triage agent -> Billing agent) as nodes of a StateGraph "
                      "compiled with name 'Customer support'.",
    },
    "openllmetry-langgraph": {
        "*": "Each create_agent() call emits its OWN one-span trace 'create_agent <name>' (gen_ai.operation.name="
             "'create_agent') at agent construction time, separate from the runs - it is not a run (the fixtures "
             "have 1 or 2 such traces + 2 run traces). Run root = 'invoke_agent <graph name>' (gen_ai.agent.name, "
             "gen_ai.conversation.id = thread_id, gen_ai.workflow.nodes/edges), child '<name>.workflow' "
             "(traceloop.span.kind='workflow', gen_ai.agent.id = a LangChain run UUID), node spans "
             "'execute_task <node>' (gen_ai.task.id/name/status), model spans 'ChatOpenAI.chat' kind CLIENT "
             "(gen_ai.response.id, gen_ai.usage.input_tokens/output_tokens/total_tokens), tool spans "
             "'execute_tool <tool>' (gen_ai.tool.name, no tool call id). traceloop.association.properties.* "
             "mirror the run metadata (thread_id, lc_agent_name, langgraph_node...). Statuses of successful "
             "spans are UNSET.",
        "tool_error": "Handled ToolException: all spans UNSET/OK; gen_ai.task.status stays 'success'.",
        "run_fails": "Root, workflow, the failing 'execute_task model' and 'ChatOpenAI.chat' spans are ERROR "
                     "('Error code: 500 - ...').",
        "multi_node": "Nodes 'execute_task Triage agent' / 'execute_task Billing agent' each contain an empty "
                      "'invoke_agent <name>' span and a nested 'execute_task <name>' span with the agent's model/"
                      "tool spans.",
    },
}


def notes_for(setup: str, scenario: str) -> str:
    n = NOTES.get(setup, {})
    parts = [n.get("*", ""), n.get(scenario, "")]
    return " ".join(p for p in parts if p).strip()


def system_id(setup: str, scenario: str) -> str:
    return f"conf-{setup}-{scenario}"
