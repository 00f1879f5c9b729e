"""Setup / family / scenario registry for the conformance suite (stdlib only).

A *family* is one virtual environment (``.octant/conformance/venvs/<family>``)
installed from ``conformance/requirements/<family>.txt`` (exact pins).
A *setup* is one framework traced by one combination of instrumentations
inside a family venv.  Every setup runs each of its scenarios in its own
Python subprocess, so instrumentation never leaks between setups.
"""

from __future__ import annotations
import contextvars

# The application's run id (record.py --run-key), set around every Runner.run call of one logical
# run — both parts of a run paused for approval —; runner.RunKeyProcessor stamps it on every span
# started meanwhile. Here, in the one module the runner and the frameworks share.
RUN_ID: "contextvars.ContextVar[str | None]" = contextvars.ContextVar("octant_run_id", default=None)

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
    # Google ADK: the OTel GenAI content knob (schema v2 spans, log records) and ADK's own knob for its
    # legacy (schema v1) spans.
    "google-adk": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT",
                   "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS": "false"},
}

# Google ADK with LiteLLM (fw_adk.py), the framework outside the suite (OUTSIDE.md). LiteLLM offline
# (no cost-map download); content on spans and log records; no Google credentials or GOOGLE_CLOUD_*
# settings exist (record.py strips GOOGLE_*), so ADK's Cloud exporters stay off.
ADK_ENV = {
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT",
    "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS": "true",
}


def env_for(setup: str, scenario: str) -> dict:
    cfg = SETUPS[setup]
    env = {**COMMON_ENV, **cfg["env"]}
    if scenario in NO_CONTENT_SCENARIOS:
        if cfg["library"] == "strands-agents":
            # Strands redacts every sensitive attribute when the opt-in list has an empty
            # `gen_ai_unredacted_attributes=` token; the conventions tokens stay as they were.
            opt_in = [t for t in env.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",") if t]
            env["OTEL_SEMCONV_STABILITY_OPT_IN"] = ",".join(opt_in + ["gen_ai_unredacted_attributes="])
        else:
            # Pydantic AI has no env switch: fw_pydantic_ai passes InstrumentationSettings(include_content=False).
            env.update(NO_CONTENT_ENV.get(cfg["library"], {}))
    return env


FAMILIES = {
    "contrib": {"requirements": "requirements/contrib.txt", "framework": "openai-agents"},
    "openinference": {"requirements": "requirements/openinference.txt", "framework": "openai-agents"},
    "openllmetry": {"requirements": "requirements/openllmetry.txt", "framework": "openai-agents"},
    "lg-openinference": {"requirements": "requirements/lg-openinference.txt", "framework": "langgraph"},
    "lg-openllmetry": {"requirements": "requirements/lg-openllmetry.txt", "framework": "langgraph"},
    # Frameworks that trace themselves (no instrumentation library).
    "pydantic-ai": {"requirements": "requirements/pydantic-ai.txt", "framework": "pydantic-ai"},
    "strands": {"requirements": "requirements/strands.txt", "framework": "strands"},
    "adk": {"requirements": "requirements/adk.txt", "framework": "google-adk"},
}

AGENTS_SCENARIOS = ["tool_ok", "tool_error", "run_fails", "run_fails_max_turns", "handoff", "chat_completions"]
# run_fails_chat (a failing Chat Completions call) only matters where a client instrumentation nests.
AGENTS_CLIENT_SCENARIOS = AGENTS_SCENARIOS + ["run_fails_chat"]
LANGGRAPH_SCENARIOS = ["tool_ok", "tool_error", "run_fails", "multi_node"]
# Human-in-the-loop approvals (function_tool(needs_approval=True), RunState approve/reject/resume),
# recorded for the three plain (no client instrumentation) Agents SDK setups.
APPROVAL_SCENARIOS = ["approval_granted", "approval_denied", "approval_expired", "two_approvals"]
# The same four through OpenAIChatCompletionsModel (Chat Completions API), Agents SDK setups only.
APPROVAL_CHAT_SCENARIOS = [f"{s}_chat" for s in APPROVAL_SCENARIOS]
AGENTS_APPROVAL_SCENARIOS = AGENTS_SCENARIOS + APPROVAL_SCENARIOS
# Self-tracing frameworks (fw_pydantic_ai.py, fw_strands.py): parallel_tools = ONE model response with two
# function calls, get_order_status (succeeds) and lookup_account (raises, handled), then the answer.
NATIVE_SCENARIOS = ["tool_ok", "tool_error", "run_fails", "parallel_tools"] + APPROVAL_SCENARIOS
# Google ADK (fw_adk.py): the same eight scenarios.
ADK_SCENARIOS = list(NATIVE_SCENARIOS)
# approval_raised: the tool raises ApprovalRequired itself (Pydantic AI's other way to ask for approval).
PYDANTIC_AI_SCENARIOS = NATIVE_SCENARIOS + ["approval_raised"]

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
        "scenarios": AGENTS_SCENARIOS,
        # Recorded only when named (--scenario), into conformance/approvals/ (issue 39).
        "extra_scenarios": APPROVAL_SCENARIOS + APPROVAL_CHAT_SCENARIOS,
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
        "scenarios": AGENTS_SCENARIOS,
        # Recorded only when named (--scenario), into conformance/approvals/ (issue 39).
        "extra_scenarios": APPROVAL_SCENARIOS + APPROVAL_CHAT_SCENARIOS,
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
        "scenarios": AGENTS_SCENARIOS,
        # Recorded only when named (--scenario), into conformance/approvals/ (issue 39).
        "extra_scenarios": APPROVAL_SCENARIOS + APPROVAL_CHAT_SCENARIOS,
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
    # --- Frameworks that trace THEMSELVES (no instrumentation library). Not part of a bare
    # `record.py` run (opt_in): recorded when named, into conformance/frameworks/ (default --out for
    # them) and, with --run-key, conformance/frameworks-keyed/.
    "pydantic-ai-v6": {
        "family": "pydantic-ai",
        "library": "pydantic-ai",
        "framework": "pydantic-ai",
        "native_dist": "pydantic-ai-slim",
        "instrument": [],
        "instrumentation_version": 6,  # InstrumentationSettings(version=6): the newest format
        "env": {},
        "scenarios": PYDANTIC_AI_SCENARIOS,
        "opt_in": True,
        "task_id_attr": "gen_ai.conversation.id",  # agent.run(conversation_id=...); inherited on resume
    },
    "pydantic-ai-v5": {
        "family": "pydantic-ai",
        "library": "pydantic-ai",
        "framework": "pydantic-ai",
        "native_dist": "pydantic-ai-slim",
        "instrument": [],
        "instrumentation_version": 5,  # the default format (DEFAULT_INSTRUMENTATION_VERSION)
        "env": {},
        "scenarios": PYDANTIC_AI_SCENARIOS,
        "opt_in": True,
        "task_id_attr": "gen_ai.conversation.id",
    },
    "strands-default": {
        "family": "strands",
        "library": "strands-agents",
        "framework": "strands",
        "native_dist": "strands-agents",
        "instrument": [],
        "env": {},  # OTEL_SEMCONV_STABILITY_OPT_IN unset: Strands' default (legacy) GenAI conventions
        "scenarios": NATIVE_SCENARIOS,
        "opt_in": True,
        "task_id_attr": "session.id",  # Agent.trace_attributes={"session.id": ...}, as Strands documents
    },
    "strands-latest": {
        "family": "strands",
        "library": "strands-agents",
        "framework": "strands",
        "native_dist": "strands-agents",
        "instrument": [],
        "env": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"},
        "scenarios": NATIVE_SCENARIOS,
        "opt_in": True,
        "task_id_attr": "session.id",
    },
    # --- The framework OUTSIDE the suite (OUTSIDE.md): Google ADK with LiteLLM, tracing itself, in each
    # telemetry schema version it offers (ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN). Recorded when named, into
    # conformance/outside/ and, with --run-key, conformance/outside-keyed/.
    "adk-v2": {
        "family": "adk",
        "library": "google-adk",
        "framework": "google-adk",
        "native_dist": "google-adk",
        "instrument": [],
        # schema version 2 (alias otel_semconv_1_44), ADK's default
        "env": {**ADK_ENV, "ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "2"},
        "scenarios": ADK_SCENARIOS,
        "opt_in": True,
        "out_dir": "outside",
        "task_id_attr": "gen_ai.conversation.id",  # the ADK session id
    },
    "adk-v1": {
        "family": "adk",
        "library": "google-adk",
        "framework": "google-adk",
        "native_dist": "google-adk",
        "instrument": [],
        # schema version 1 (alias otel_semconv_1_36), the legacy format
        "env": {**ADK_ENV, "ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"},
        "scenarios": ADK_SCENARIOS,
        "opt_in": True,
        "out_dir": "outside",
        "task_id_attr": "gen_ai.conversation.id",
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


# Approval scenarios: what the Agents SDK does (read from agents 0.24.0 and checked by the
# runner's SDK spy processor, runs[].parts[].sdk_*), then per library what reaches the OTLP.
APPROVAL_NOTE = (
    "APPROVALS: the tools are function_tool(needs_approval=True). Runner.run returns a RunResult whose "
    ".interruptions (ToolApprovalItem) hold the proposed calls instead of running them; the script calls "
    "result.to_state(), state.approve(item) / state.reject(item) (default rejection message) and "
    "Runner.run(agent, state, run_config=<the same RunConfig>). The SDK emits a function span for the PAUSED call "
    "(input = the arguments, output None, no error) and then ends the SDK trace (processors get on_trace_end). The "
    "resumed Runner.run REATTACHES the same SDK trace_id without calling on_trace_start/on_trace_end again "
    "(agents.tracing.context.create_trace_for_run -> reattach_trace); it starts a new task span and agent span. "
    "On resume an approved call gets a SECOND function span (with the output), a rejected call gets NO span at "
    "all and the model gets 'Tool execution was not approved.' as the tool output. runs[].approvals = every "
    "interruption with its decision; runs[].tool_calls = only the tools that actually ran; runs[].traces / "
    "trace_ids = the OTel traces the run's spans landed in; runs[].parts = per Runner.run call (initial, resume) "
    "the SDK trace ids / notifications / function spans and the OTel span count and trace ids. group_id (task_id_sent) "
    "is passed on both calls and emitted by none of the libraries."
)
APPROVAL_SCENARIO_NOTES = {
    "approval_granted": "approval_granted: 1 pause, approved, resumed; the tool runs on resume, then model call #2.",
    "approval_denied": "approval_denied: 1 pause, rejected, resumed; the tool never runs, model call #2 answers "
                       "without it.",
    "approval_expired": "approval_expired: 1 pause, the RunState is abandoned (never approved, rejected or resumed): "
                        "1 model call, no tool ran. OUTCOME: Runner.run returned a RunResult without raising (its "
                        "interruptions non-empty, final_output None), so the outcome is 'success' as the SDK reports "
                        "it; runs[].interrupted=true and final_output null record that the run never finished.",
    "two_approvals": "two_approvals: ONE model response with two function calls (refund_payment, cancel_subscription) "
                     "-> the SDK makes ONE pause with TWO interruptions; both approved, one resume; both tools run "
                     "on resume, then model call #2.",
}
APPROVAL_LIB_NOTES = {
    "contrib-agents": (
        "contrib: the resumed part is a NEW OTel trace rooted at the SDK task span ('unknown', INTERNAL, no "
        "'Customer support' SERVER root, since the processor never saw the reattached trace start), so a resumed run "
        "has 2 traces and an expired run 1. The paused call is an 'execute_tool <tool>' span (status OK, "
        "gen_ai.tool.call.arguments, no gen_ai.tool.call.result) in the first trace; an approved call gets a second "
        "'execute_tool <tool>' span with gen_ai.tool.call.result in the resumed trace; a rejected call has no "
        "second span. No attribute, event or status marks the approval request, the decision or the interruption. "
        "Nothing joins the two traces: no group/conversation/session id; the tool call ids appear only inside the "
        "first trace's gen_ai.output.messages (a Python repr); the resumed 'chat' span's gen_ai.input.messages holds "
        "only the user message."
    ),
    "openinference-agents": (
        "OpenInference: the resumed part is MISSING. The processor records only spans of SDK traces it saw start "
        "(on_span_start returns when span.trace_id is not in _root_spans; on_trace_end popped it at the pause), and "
        "the reattached trace never starts again: every run is 1 trace with only model call #1 (model call #2, its "
        "tokens and the tools run on resume are absent; truth tokens are the server's). The paused call is a TOOL "
        "span '<tool>' (tool.name, input.value = the arguments, no output.value, status OK) - for approval_denied "
        "and approval_expired the only tool span is a call that never ran. No approval attribute or event; the call "
        "id only in llm.output_messages.0.message.tool_calls.N.tool_call.id of the 'response' span."
    ),
    "openllmetry-agents": (
        "OpenLLMetry: the resumed part is a NEW OTel trace rooted at '<agent>.agent' (no 'Agent Workflow' root), so "
        "a resumed run has 2 traces and an expired run 1. The paused call is a '<tool>.tool' span (status OK, "
        "gen_ai.tool.call.arguments, no gen_ai.tool.call.result) in the first trace; an approved call gets a second "
        "'<tool>.tool' span with gen_ai.tool.call.result in the resumed trace; a rejected call has none. No approval "
        "attribute or event. Only with content capture: the resumed 'openai.response' span's gen_ai.input.messages "
        "has a role 'tool' part {type: 'tool_call_response', id: <call id>, response: <tool output or 'Tool "
        "execution was not approved.'>} whose id equals the tool_call id in the first trace's gen_ai.output.messages "
        "- the only thing that joins the parts."
    ),
}

APPROVAL_CHAT_NOTE = (
    "CHAT: this <scenario>_chat repeats <scenario> with OpenAIChatCompletionsModel (Chat Completions API, "
    "non-streaming) instead of the Responses API; the script, decisions and truth are the same."
)
# What differs with the Chat Completions model (written from the recordings).
APPROVAL_CHAT_LIB_NOTES: dict[str, str] = {
    "contrib-agents": (
        "contrib, Chat Completions: same spans, traces and paused 'execute_tool <tool>' span (arguments, no "
        "result, status OK, last to start) as with the Responses API. The 'chat gpt-4o-mini' spans have usage but "
        "no gen_ai.response.id, server.address/port = the real base_url, and gen_ai.input.messages starts with the "
        "system message (+ gen_ai.system_instructions); gen_ai.output.messages of the paused call holds the tool "
        "call as a text part whose content is the Python dict repr of the chat message ({'content': None, ..., "
        "'tool_calls': [{'id': <call id>, 'function': {...}}]}). Unlike the Responses API, the resumed 'chat' "
        "span's gen_ai.input.messages replays the assistant tool_call part {id: <call id>} and the tool part "
        "{type: 'tool_call_response', id, result} (approved: the output; denied: the rejection message)."
    ),
    "openinference-agents": (
        "OpenInference, Chat Completions: the model span is 'generation' (not 'response'), kind INTERNAL, "
        "openinference.span.kind='LLM', with output.value = the chat message list JSON, "
        "llm.output_messages.0.message.tool_calls.N.tool_call.id/function.name/function.arguments, "
        "llm.token_count.prompt/completion (no total), llm.invocation_parameters = the base_url only, no response "
        "id. Resumed part missing and paused TOOL span as with the Responses API."
    ),
    "openllmetry-agents": (
        "OpenLLMetry, Chat Completions: the model span is still named 'openai.response' (CLIENT) but carries only "
        "gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model and gen_ai.input.messages: NO "
        "gen_ai.output.messages, usage, response id or finish reasons (the instrumentation reads the SDK "
        "GenerationSpanData's .response, which only ResponseSpanData has). So the first trace of a paused run "
        "captures no output anywhere (its only tool span is the paused call, without gen_ai.tool.call.result) and "
        "holds no tool call id; only the resumed 'openai.response' span's gen_ai.input.messages (assistant "
        "tool_call + tool tool_call_response parts with the call id) names the paused call."
    ),
}


NATIVE_APPROVAL_NOTES: dict[str, dict[str, str]] = {}
# The self-tracing frameworks (written from the recorded spans and the frameworks' source).
NOTES.update({
    'pydantic-ai-v6': {
        '*': (
            'Pydantic AI 2.78.0 traces itself: '
            "Agent.instrument_all(InstrumentationSettings(tracer_provider=<runner's>, version=6, "
            'include_content=True)); no instrumentation library, no logs (message content is in span '
            "attributes). Scope 'pydantic-ai' version = the package version, no schema_url. One trace per "
            "agent.run: root 'invoke_agent Support agent' (INTERNAL, status UNSET on success; "
            "gen_ai.operation.name='invoke_agent', gen_ai.agent.name and agent_name = the agent, "
            'gen_ai.agent.call.id = the run id (UUID7, new per agent.run), gen_ai.conversation.id = '
            'agent.run(conversation_id=...) (task_id), final_result = the output (JSON of a '
            'DeferredToolRequests for a paused run), pydantic_ai.all_messages, '
            "gen_ai.aggregated_usage.input_tokens/output_tokens = this run's total (NOT gen_ai.usage.*, so "
            'summing spans does not double count)). Children (all carry gen_ai.agent.name, '
            "gen_ai.agent.call.id, gen_ai.conversation.id): model spans 'chat gpt-4o-mini' (kind CLIENT, "
            "gen_ai.operation.name='chat', gen_ai.provider.name='openai', gen_ai.response.id, "
            "gen_ai.usage.input_tokens/output_tokens, gen_ai.response.finish_reasons ['tool_call'] / ['stop'], "
            'gen_ai.input.messages / gen_ai.output.messages JSON, server.address/port = the real base_url) and '
            "tool spans 'execute_tool <tool>' (INTERNAL, gen_ai.operation.name='execute_tool', "
            'gen_ai.tool.name, gen_ai.tool.call.id, gen_ai.tool.call.arguments, gen_ai.tool.call.result), '
            "siblings under the root (no per-step span). Parallel calls (parallel_tools): one 'execute_tool' "
            "span per call, no merged 'running N tools' span. FORMAT v6 (the newest): tool results in message "
            "JSON are role 'tool' (v5: role 'user')."
        ),
        'tool_error': (
            "The tool raises pydantic_ai.exceptions.ToolFailed (Pydantic AI's way to report a terminal tool "
            "failure to the model): its 'execute_tool' span is ERROR (empty status message) with an "
            "'exception' event (exception.type='pydantic_ai.exceptions.ToolFailedError') and "
            'gen_ai.tool.call.result = the failure message; the run succeeds (root UNSET).'
        ),
        'parallel_tools': (
            "ONE model response with two calls: two sibling 'execute_tool' spans (get_order_status UNSET with "
            'its result, lookup_account ERROR as in tool_error), no merged span.'
        ),
        'run_fails': (
            "Content capture off (include_content=False). The failed 'chat' span and the root are ERROR (empty "
            "status message) with an 'exception' event "
            "exception.type='pydantic_ai.exceptions.ModelServerError' (no exception.message without content); "
            'the failed chat span has no usage or response id. The client has max_retries=0; agent.run raises '
            'ModelHTTPError (ModelServerError).'
        ),
    },
    'pydantic-ai-v5': {
        '*': (
            'Pydantic AI 2.78.0 traces itself: '
            "Agent.instrument_all(InstrumentationSettings(tracer_provider=<runner's>, version=5, "
            'include_content=True)); no instrumentation library, no logs (message content is in span '
            "attributes). Scope 'pydantic-ai' version = the package version, no schema_url. One trace per "
            "agent.run: root 'invoke_agent Support agent' (INTERNAL, status UNSET on success; "
            "gen_ai.operation.name='invoke_agent', gen_ai.agent.name and agent_name = the agent, "
            'gen_ai.agent.call.id = the run id (UUID7, new per agent.run), gen_ai.conversation.id = '
            'agent.run(conversation_id=...) (task_id), final_result = the output (JSON of a '
            'DeferredToolRequests for a paused run), pydantic_ai.all_messages, '
            "gen_ai.aggregated_usage.input_tokens/output_tokens = this run's total (NOT gen_ai.usage.*, so "
            'summing spans does not double count)). Children (all carry gen_ai.agent.name, '
            "gen_ai.agent.call.id, gen_ai.conversation.id): model spans 'chat gpt-4o-mini' (kind CLIENT, "
            "gen_ai.operation.name='chat', gen_ai.provider.name='openai', gen_ai.response.id, "
            "gen_ai.usage.input_tokens/output_tokens, gen_ai.response.finish_reasons ['tool_call'] / ['stop'], "
            'gen_ai.input.messages / gen_ai.output.messages JSON, server.address/port = the real base_url) and '
            "tool spans 'execute_tool <tool>' (INTERNAL, gen_ai.operation.name='execute_tool', "
            'gen_ai.tool.name, gen_ai.tool.call.id, gen_ai.tool.call.arguments, gen_ai.tool.call.result), '
            "siblings under the root (no per-step span). Parallel calls (parallel_tools): one 'execute_tool' "
            "span per call, no merged 'running N tools' span. FORMAT v5 (the default): same spans and "
            'attributes as v6 except that tool results in gen_ai.input.messages / pydantic_ai.all_messages are '
            "role 'user' (v6: 'tool')."
        ),
        'tool_error': (
            "The tool raises pydantic_ai.exceptions.ToolFailed (Pydantic AI's way to report a terminal tool "
            "failure to the model): its 'execute_tool' span is ERROR (empty status message) with an "
            "'exception' event (exception.type='pydantic_ai.exceptions.ToolFailedError') and "
            'gen_ai.tool.call.result = the failure message; the run succeeds (root UNSET).'
        ),
        'parallel_tools': (
            "ONE model response with two calls: two sibling 'execute_tool' spans (get_order_status UNSET with "
            'its result, lookup_account ERROR as in tool_error), no merged span.'
        ),
        'run_fails': (
            "Content capture off (include_content=False). The failed 'chat' span and the root are ERROR (empty "
            "status message) with an 'exception' event "
            "exception.type='pydantic_ai.exceptions.ModelServerError' (no exception.message without content); "
            'the failed chat span has no usage or response id. The client has max_retries=0; agent.run raises '
            'ModelHTTPError (ModelServerError).'
        ),
    },
    'strands-default': {
        'tool_error': (
            'The tool raises ValueError; Strands catches it and hands the model an error tool result (status '
            "'error', text 'Error: <message>'). The 'execute_tool' span is ERROR (status message = the "
            "exception message) with gen_ai.tool.status='error' and an 'exception' event; the run succeeds "
            '(root OK).'
        ),
        'parallel_tools': (
            "ONE model response with two calls: two sibling 'execute_tool' spans under the cycle span "
            '(get_order_status OK, lookup_account ERROR as in tool_error), no merged span.'
        ),
        'run_fails': (
            "Content redacted ('[REDACTED]') via the opt-in token gen_ai_unredacted_attributes= (empty list). "
            "The failed 'chat' span, its 'execute_event_loop_cycle' span and the root are ERROR (status "
            "message 'Error code: 500 - scripted upstream failure'); exception events: "
            'openai.InternalServerError on the chat and cycle spans, '
            'strands.types.exceptions.EventLoopException on the root. The agent call raises EventLoopException '
            '(cause openai.InternalServerError); client max_retries=0.'
        ),
        '*': (
            'Strands Agents 1.65.0 traces itself (strands.telemetry.tracer) on the GLOBAL tracer provider; no '
            'instrumentation library, no logs. OTEL_SEMCONV_STABILITY_OPT_IN unset. Scope '
            "'strands.telemetry.tracer' with an EMPTY version, no schema_url. All spans INTERNAL, status OK on "
            'success; every span has gen_ai.event.start_time / gen_ai.event.end_time (ISO strings) and the '
            'Agent.trace_attributes (here session.id = the task id). One trace per agent call: root '
            "'invoke_agent Support agent' (gen_ai.operation.name='invoke_agent', gen_ai.agent.name, "
            "gen_ai.agent.tools, gen_ai.request.model, gen_ai.usage.* = the AGENT OBJECT's accumulated usage "
            "over all its calls so far), a child 'execute_event_loop_cycle' per model turn "
            "(event_loop.cycle_id, event_loop.parent_cycle_id), under which the model span 'chat' "
            "(gen_ai.operation.name='chat', kind INTERNAL, "
            'gen_ai.usage.input_tokens/output_tokens/total_tokens (+ prompt_tokens/completion_tokens), NO '
            "response id, NO gen_ai.response.finish_reasons attribute) and tool spans 'execute_tool <tool>' "
            "(gen_ai.tool.name, gen_ai.tool.call.id, gen_ai.tool.status 'success'/'error', "
            'gen_ai.tool.description, gen_ai.tool.json_schema). DEFAULT conventions: '
            "gen_ai.system='strands-agents' (no gen_ai.provider.name), deprecated "
            'gen_ai.usage.cache_read_input_tokens / cache_write_input_tokens alongside; message content only '
            "in span EVENTS 'gen_ai.system.message' / 'gen_ai.user.message' / 'gen_ai.assistant.message' / "
            "'gen_ai.tool.message' (content) and 'gen_ai.choice' (message, finish_reason: 'tool_use' / "
            "'end_turn' / 'interrupt'); tool arguments in the tool span's 'gen_ai.tool.message' event "
            "(content, id), the result in its 'gen_ai.choice' event (message, id); no "
            'gen_ai.tool.call.arguments/result attributes.'
        ),
    },
    'strands-latest': {
        'tool_error': (
            'The tool raises ValueError; Strands catches it and hands the model an error tool result (status '
            "'error', text 'Error: <message>'). The 'execute_tool' span is ERROR (status message = the "
            "exception message) with gen_ai.tool.status='error' and an 'exception' event; the run succeeds "
            '(root OK).'
        ),
        'parallel_tools': (
            "ONE model response with two calls: two sibling 'execute_tool' spans under the cycle span "
            '(get_order_status OK, lookup_account ERROR as in tool_error), no merged span.'
        ),
        'run_fails': (
            "Content redacted ('[REDACTED]') via the opt-in token gen_ai_unredacted_attributes= (empty list). "
            "The failed 'chat' span, its 'execute_event_loop_cycle' span and the root are ERROR (status "
            "message 'Error code: 500 - scripted upstream failure'); exception events: "
            'openai.InternalServerError on the chat and cycle spans, '
            'strands.types.exceptions.EventLoopException on the root. The agent call raises EventLoopException '
            '(cause openai.InternalServerError); client max_retries=0.'
        ),
        '*': (
            'Strands Agents 1.65.0 traces itself (strands.telemetry.tracer) on the GLOBAL tracer provider; no '
            'instrumentation library, no logs. OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental. Scope '
            "'strands.telemetry.tracer' with an EMPTY version, no schema_url. All spans INTERNAL, status OK on "
            'success; every span has gen_ai.event.start_time / gen_ai.event.end_time (ISO strings) and the '
            'Agent.trace_attributes (here session.id = the task id). One trace per agent call: root '
            "'invoke_agent Support agent' (gen_ai.operation.name='invoke_agent', gen_ai.agent.name, "
            "gen_ai.agent.tools, gen_ai.request.model, gen_ai.usage.* = the AGENT OBJECT's accumulated usage "
            "over all its calls so far), a child 'execute_event_loop_cycle' per model turn "
            "(event_loop.cycle_id, event_loop.parent_cycle_id), under which the model span 'chat' "
            "(gen_ai.operation.name='chat', kind INTERNAL, "
            'gen_ai.usage.input_tokens/output_tokens/total_tokens (+ prompt_tokens/completion_tokens), NO '
            "response id, NO gen_ai.response.finish_reasons attribute) and tool spans 'execute_tool <tool>' "
            "(gen_ai.tool.name, gen_ai.tool.call.id, gen_ai.tool.status 'success'/'error', "
            'gen_ai.tool.description, gen_ai.tool.json_schema). LATEST conventions '
            "(OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental): gen_ai.provider.name='strands-agents' "
            '(no gen_ai.system); root gen_ai.system_instructions attribute; message content in span EVENTS '
            "named 'gen_ai.client.inference.operation.details' with attribute gen_ai.input.messages / "
            'gen_ai.output.messages / gen_ai.system_instructions (JSON; finish_reason inside the output '
            'message); tool spans also carry the ATTRIBUTES gen_ai.tool.call.arguments and '
            'gen_ai.tool.call.result (the result only when the status is not error).'
        ),
    },
})

# Approval scenarios of the self-tracing frameworks, per framework ('*' = every approval scenario).
NATIVE_APPROVAL_NOTES.update({
    'pydantic-ai': {
        '*': (
            'APPROVALS (Pydantic AI): tools registered with requires_approval=True, output_type=[str, '
            'DeferredToolRequests]. agent.run RETURNS normally with output '
            'DeferredToolRequests(approvals=[ToolCallPart...]); the script answers with '
            'DeferredToolResults(approvals={call_id: True | ToolDenied(msg)}) and a SECOND '
            'agent.run(message_history=result.all_messages(), deferred_tool_results=...): a NEW trace with a '
            "NEW root 'invoke_agent Support agent' (new gen_ai.agent.call.id, SAME gen_ai.conversation.id, "
            'inherited from the message history; pydantic_ai.new_message_index). PAUSE: the first root is '
            'UNSET like a finished run; only its final_result = the DeferredToolRequests JSON ({"calls": [], '
            '"approvals": [{"tool_name", "args", "tool_call_id", ...}], "metadata", "validated_args"}) and the '
            'last pydantic_ai.all_messages entry being the assistant tool_call message (finish_reason '
            "'tool_call') show it; a requires_approval call gets NO 'execute_tool' span in the first part. "
            "DECISION: not recorded as such. Approved: the call's 'execute_tool' span (with "
            "gen_ai.tool.call.result) is in the resumed trace. Denied: no tool span at all; the resumed 'chat' "
            "span's gen_ai.input.messages has a tool_call_response part {id: <call id>, result: <the "
            'ToolDenied message>}. Expired: one trace, one model call, final_result = the DeferredToolRequests '
            'JSON; nothing marks that it was never answered. runs[].approvals = every requested approval with '
            'its decision; runs[].tool_calls = tools that ran; runs[].parts = per agent.run call (initial, '
            "resume) the output type, run id, span count and trace ids. Outcome 'success' as the framework "
            'reports it (agent.run returned).'
        ),
        'approval_raised': (
            'approval_raised: the tool has no requires_approval flag but raises '
            'ApprovalRequired(metadata={...}) unless ctx.tool_call_approved: the FIRST part has a held '
            "'execute_tool refund_payment' span (status UNSET in formats v5/v6 - ERROR with an exception event "
            'in v2-v4 -, gen_ai.tool.call.arguments, NO gen_ai.tool.call.result, '
            "pydantic_ai.tool.deferral.name='ApprovalRequired', pydantic_ai.tool.deferral.metadata = the "
            "metadata JSON); approved, the tool runs again on resume (second 'execute_tool' span, same "
            'gen_ai.tool.call.id, with the result). runs[].tool_calls lists the run that did the work (the '
            'resumed one).'
        ),
    },
    'strands': {
        '*': (
            "APPROVALS (Strands): a BeforeToolCallEvent hook calls event.interrupt('approve_<tool>', "
            'reason={tool, tool_call_id, input}) for refund_payment / cancel_subscription; the agent call '
            "RETURNS with stop_reason 'interrupt' and result.interrupts; the script resumes by calling the "
            "SAME agent with [{'interruptResponse': {'interruptId': ..., 'response': 'approve' | 'deny'}}]; on "
            "'deny' the hook sets event.cancel_tool = the denial message. The resumed call is a NEW trace with "
            "a new root 'invoke_agent Support agent' (same session.id from trace_attributes). PAUSE: the first "
            "root is status OK; default conventions: its 'gen_ai.choice' event has finish_reason='interrupt' "
            "and message = the Python repr of the Interrupt list ([{'id': 'v1:before_tool_call:<call "
            "id>:<uuid>', 'name': 'approve_refund_payment', 'reason': {...}, 'response': None}]); latest "
            'conventions: its gen_ai.output.messages event holds that repr as a text part with '
            '"finish_reason": "interrupt". The interrupted call gets NO \'execute_tool\' span in the first part '
            '(the hook interrupts before the span starts); the cycle span ends OK with no tool result. '
            "DECISION: not recorded as such; the resumed root's input messages are empty ('[]' in latest, no "
            "gen_ai.user.message event in default). Approved: an 'execute_tool' span (status OK, with the "
            "result) in the resumed trace, under a cycle span that has no 'chat' child. Denied: NO tool span; "
            "that cycle span's events carry the tool result {status: 'error', content: [{text: <denial "
            "message>}]} (default: the 'gen_ai.choice' event's tool.result, with the status; latest: a "
            'gen_ai.input.messages tool_call_response part with only the text, no status). TOKENS: the resumed '
            "root's gen_ai.usage.* = the agent's ACCUMULATED usage over both calls (the first call counted "
            "again) - count tokens from the 'chat' spans. Expired: one trace, stop_reason 'interrupt', never "
            'resumed. runs[].approvals = every interrupt (tool, call id, decision, interrupt id and name); '
            'runs[].tool_calls = tools that ran; runs[].parts = per agent call the stop_reason, interrupt '
            "count, span count and trace ids. Outcome 'success' as the framework reports it (the agent call "
            'returned).'
        ),
    },
})


# Google ADK 2.15.0 with LiteLLM 1.110.2 (fw_adk.py), the framework outside the suite (OUTSIDE.md).
_ADK_COMMON = (
    "Google ADK 2.15.0 traces itself (google.adk.telemetry) on the GLOBAL tracer and logger providers; no "
    "instrumentation library. Model = LiteLlm('openai/gpt-4o-mini', api_base=<server>) (LiteLLM 1.110.2, Chat "
    "Completions, non-streaming; LiteLLM itself emits no spans). Every span and log record has scope "
    "'gcp.vertex.agent' version '2.15.0' schema_url https://opentelemetry.io/schemas/1.36.0 (in both formats). "
    "All spans INTERNAL, status UNSET on success. The agent is named 'support_agent' (ADK wants an identifier): "
    "gen_ai.agent.name='support_agent', gen_ai.agent.description=''. Task id = the ADK session id, emitted as "
    "gen_ai.conversation.id. One trace per runner.run_async call. Model spans 'generate_content "
    "openai/gpt-4o-mini' (gen_ai.operation.name='generate_content', gen_ai.request.model='openai/gpt-4o-mini', "
    "gen_ai.response.model='gpt-4o-mini', gen_ai.agent.name, gen_ai.conversation.id, "
    "gcp.vertex.agent.invocation_id, gcp.vertex.agent.event_id, gen_ai.usage.input_tokens/output_tokens/"
    "cache_read.input_tokens, gen_ai.response.finish_reasons ['stop'] EVEN for a tool-call response; NO "
    "gen_ai.response.id anywhere). Tool spans 'execute_tool <tool>' (gen_ai.operation.name='execute_tool', "
    "gen_ai.tool.name, gen_ai.tool.description, gen_ai.tool.type='FunctionTool', gen_ai.tool.call.id = the "
    "model's call id, gen_ai.agent.name, gcp.vertex.agent.event_id = the function-response event), children of "
    "'invoke_agent support_agent' (gen_ai.operation.name='invoke_agent', gen_ai.agent.name, "
    "gen_ai.conversation.id). A tool span is ERROR (status message and error.type 'TOOL_ERROR', no exception "
    "event) whenever its result dict has an 'error' key (FunctionTool._detect_error_in_response), except the "
    "held call of a confirmation pause. Several calls in one model response: one 'execute_tool <tool>' span per "
    "call PLUS a synthetic sibling 'execute_tool (merged)' (gen_ai.operation.name='execute_tool', "
    "gen_ai.tool.name and gen_ai.tool.description '(merged tools)', gen_ai.tool.call.id = an ADK event UUID, "
    "NOT a model call id, = gcp.vertex.agent.event_id), which is not a tool call."
)
_ADK_V2 = (
    " FORMAT: ADK telemetry schema version 2 (ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=2, alias otel_semconv_1_44, "
    "the default): root 'invoke_workflow support_agent' (gen_ai.operation.name='invoke_workflow', "
    "gen_ai.workflow.name='support_agent', gen_ai.conversation.id; no agent name) > 'invoke_agent support_agent' "
    "> 'generate_content ...' / 'execute_tool ...' siblings; no call_llm span. Experimental GenAI conventions: "
    "generate_content has gen_ai.provider.name='openai' (no gen_ai.system) and, with content, "
    "gen_ai.input.messages / gen_ai.output.messages / gen_ai.system_instructions / gen_ai.tool.definitions "
    "(JSON; tool calls as parts {type: 'tool_call', id, name, arguments}, results {type: 'tool_call_response', "
    "id, response}); tool spans gen_ai.tool.call.arguments / gen_ai.tool.call.result (JSON, content only). LOGS: "
    "one record per model call, event_name 'gen_ai.client.inference.operation.details', empty body, trace/span "
    "ids of its generate_content span, attributes = the span's (agent, conversation id, invocation id, event "
    "id, provider, usage, finish reasons) + user.id + the content attributes as structured values (content "
    "capture SPAN_AND_EVENT)."
)
_ADK_V1 = (
    " FORMAT: ADK telemetry schema version 1 (ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1, alias otel_semconv_1_36, "
    "the legacy format): root 'invocation' with NO attributes > 'invoke_agent support_agent' > per model call a "
    "'call_llm' span (NO gen_ai.operation.name; gen_ai.system='gcp.vertex.agent', gen_ai.request.model, "
    "gen_ai.response.model, gen_ai.response.finish_reasons, gcp.vertex.agent.invocation_id / session_id (= the "
    "task id) / event_id, gcp.vertex.agent.llm_request / llm_response JSON, and gen_ai.usage.input_tokens/"
    "output_tokens/cache_read.input_tokens) with a child 'generate_content openai/gpt-4o-mini' that carries "
    "the SAME gen_ai.usage.* (gen_ai.system='openai', no gen_ai.provider.name, no message attributes): count "
    "tokens once per call (the generate_content span, or the call_llm span). Tool spans carry "
    "gcp.vertex.agent.tool_call_args / gcp.vertex.agent.tool_response (+ empty gcp.vertex.agent.llm_request / "
    "llm_response '{}'), NOT gen_ai.tool.call.arguments/result; the '(merged)' span adds "
    "gcp.vertex.agent.tool_response = the JSON list of every merged response [{id, name, response}] and "
    "tool_call_args 'N/A'. LOGS (stable conventions, content via OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT): "
    "per model call 'gen_ai.system.message', one 'gen_ai.user.message' per content of the request (also the "
    "assistant tool call and the tool response, as google.genai Content dumps), then 'gen_ai.choice' (body "
    "{content, index, finish_reason 'STOP'}); attribute gen_ai.system='openai' (+ user.id on user messages); "
    "trace/span ids of the generate_content span."
)
_ADK_SCENARIO_NOTES = {
    "tool_error": (
        "The tool raises ValueError and the agent's on_tool_error_callback (ADK's hook for a raising tool; "
        "without it the whole run fails) returns {'error': 'ValueError: <message>'} as the tool result: the "
        "'execute_tool lookup_account' span is ERROR 'TOOL_ERROR' (error.type='TOOL_ERROR', no exception "
        "event, the result dict in gen_ai.tool.call.result / gcp.vertex.agent.tool_response); the run succeeds "
        "(root UNSET)."
    ),
    "parallel_tools": (
        "ONE model response with two calls: 'execute_tool get_order_status' (UNSET, its result) and "
        "'execute_tool lookup_account' (ERROR 'TOOL_ERROR' as in tool_error), then the synthetic 'execute_tool "
        "(merged)' span (gen_ai.tool.name '(merged tools)'), all siblings under 'invoke_agent'."
    ),
    "run_fails": (
        "Content off (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=NO_CONTENT, "
        "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=false: no message/argument/result attributes, legacy JSON "
        "attributes '{}', v1 log bodies '<elided>'). The failed model call's span (v2 'generate_content'; v1 "
        "'call_llm' and its 'generate_content'), 'invoke_agent' and the root are ERROR (status message "
        "'InternalServerError: litellm.InternalServerError: InternalServerError: OpenAIException - scripted "
        "upstream failure', error.type='InternalServerError') with an 'exception' event "
        "(exception.type='litellm.exceptions.InternalServerError'); the failed call has no usage (v1: its "
        "'call_llm' span carries only error.type). "
        "runner.run_async yields an error event (error_code 'InternalServerError') and then raises "
        "litellm.exceptions.InternalServerError (max_retries=0, num_retries=0)."
    ),
}
NOTES.update({
    "adk-v2": {"*": _ADK_COMMON + _ADK_V2, **_ADK_SCENARIO_NOTES},
    "adk-v1": {"*": _ADK_COMMON + _ADK_V1, **_ADK_SCENARIO_NOTES},
})
NATIVE_APPROVAL_NOTES["google-adk"] = {
    "*": (
        "APPROVALS (Google ADK): tools are FunctionTool(func, require_confirmation=True). The first "
        "runner.run_async runs the model call, then the held call gets an 'execute_tool <tool>' span that is "
        "UNSET with the model's gen_ai.tool.call.id and the arguments, whose result (v2 gen_ai.tool.call.result, "
        "v1 gcp.vertex.agent.tool_response) is {\"error\": \"This tool call requires confirmation, please approve "
        "or reject.\"}: the tool did NOT run. The request itself is an ADK event with the client-side function "
        "call 'adk_request_confirmation' (own id 'adk-<uuid>', args {originalFunctionCall: {id, name, args}, "
        "toolConfirmation: {hint, confirmed: false}}, a long-running call) which reaches NO span, attribute or "
        "log record; run_async then ends normally and the trace ends with every span UNSET (two calls: two held "
        "tool spans + the '(merged)' span, one pause). The script resumes with a SECOND runner.run_async on the "
        "same session whose message is FunctionResponse(id=<confirmation id>, name='adk_request_confirmation', "
        "response={'confirmed': true|false}): a NEW trace (new root, same gen_ai.conversation.id) in which ADK "
        "continues the SAME invocation (gcp.vertex.agent.invocation_id on its model spans/logs equals the first "
        "part's) and starts with the tool span, no model call before it. Approved: 'execute_tool <tool>' UNSET "
        "with the real result, same gen_ai.tool.call.id, then the model call. Denied: 'execute_tool <tool>' "
        "ERROR 'TOOL_ERROR' (error.type='TOOL_ERROR') with result {\"error\": \"This tool call is rejected.\"}, "
        "the tool never ran; the resumed model call's input (v2 gen_ai.input.messages, v1 call_llm's "
        "gcp.vertex.agent.llm_request and the gen_ai.user.message logs) holds that response for the call id (the "
        "held 'requires confirmation' result and the adk_request_confirmation call are not replayed). "
        "Expired: one trace, one model call, the held span only. runs[].approvals = every confirmation request "
        "(tool and tool_call_id from originalFunctionCall, confirmation_call_id = the adk_request_confirmation "
        "id); runs[].tool_calls = tools that ran; runs[].parts = per run_async call the confirmation requests, "
        "ADK invocation ids, event count, span count and trace ids. Outcome 'success' as the framework reports "
        "it (run_async ended without raising)."
    ),
}


def notes_for(setup: str, scenario: str) -> str:
    n = NOTES.get(setup, {})
    parts = [n.get("*", ""), n.get(scenario, "")]
    if scenario in APPROVAL_CHAT_SCENARIOS:
        base = scenario.removesuffix("_chat")
        parts += [n.get("chat_completions", ""), APPROVAL_NOTE, APPROVAL_CHAT_NOTE, APPROVAL_SCENARIO_NOTES[base],
                  APPROVAL_LIB_NOTES.get(setup, ""), APPROVAL_CHAT_LIB_NOTES.get(setup, "")]
    elif scenario in APPROVAL_SCENARIOS and SETUPS[setup]["framework"] == "openai-agents":
        parts += [APPROVAL_NOTE, APPROVAL_SCENARIO_NOTES[scenario], APPROVAL_LIB_NOTES.get(setup, "")]
    elif scenario in APPROVAL_SCENARIOS or scenario == "approval_raised":
        fw_notes = NATIVE_APPROVAL_NOTES.get(SETUPS[setup]["framework"], {})
        parts += [fw_notes.get("*", ""), fw_notes.get(scenario, "")]
    return " ".join(p for p in parts if p).strip()


def system_id(setup: str, scenario: str) -> str:
    return f"conf-{setup}-{scenario}"
