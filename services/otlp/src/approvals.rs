//! What a trace shows of its approval flow — by rule over what it emits, never by a table of
//! known libraries (the table this module held until issue 57 decided by library name and
//! version, and sent every framework it did not list to the unsafe default).
//!
//! Confirmation gating counts the high-impact calls a human approved. The data cannot tell
//! "this framework cannot show approvals" from "this agent never asks", so the verdict rests on
//! positive evidence, learned per source (the system and the instrumentation scope of its tool
//! spans, `RunStarted::approval_source`) by the scorer (`octant_scorer::approvals`): a source is
//! unwatched — its high-impact calls not assessed, N/A, never 0 — until a run of it shows that
//! its approval flow is traced, and watched for good from then on.
//!
//! The ingest says what each trace shows (`RunStarted::approval_channel` and
//! `approval_evidence`, see `genai::Trace::approvals`), the first that applies:
//! 1. a decision: a `gen_ai.tool.call.decision` event (proposed in semantic-conventions-genai
//!    PR #535, not merged: a log event with `gen_ai.tool.call.decision.outcome` `allow`, `deny`
//!    or `require_approval` and `gen_ai.tool.call.id`; read as a log record or a span event), or
//!    a declared approval event (`[mapping] approval_events`);
//! 2. the declared confirmation attribute (`octant.confirmed`) on any span;
//! 3. a `gen_ai.agent.paused` event with `gen_ai.agent.pause.reason = human_input` (proposed in
//!    PR #445, not merged);
//! 4. a call resumed after its pause: executed in a trace whose input history names its call id
//!    (`tool_call` parts of `gen_ai.input.messages`, `gen_ai.assistant.message` events' `toolUse`
//!    blocks, `llm.input_messages.*.tool_call.id`) while no model call of the trace proposed it —
//!    frameworks resume a paused call only once it is allowed, so it is approved, and confirmed,
//!    with no state across traces (an unkeyed run's resumed part is a trace of its own);
//! 5. a pause for approval, in a keyed run (`[mapping] run_key`): the run whose resumed part
//!    joins its calls (a pause Octant cannot join to its resumption shows requests, not
//!    decisions). Pause shapes, any scope: calls proposed and left waiting (the trace's last
//!    steps are tool spans with arguments and no result, in a trace that captures message
//!    content: a model's input or output messages, or a tool's result), or
//!    a call held for confirmation (a tool span whose result asks for one, [`crate::genai`]'s
//!    `ASKS_CONFIRMATION`), deferred tool requests as the run's result (Pydantic AI's
//!    `final_result` with an `approvals` list), an interrupt finish reason on the run's root or
//!    top invocation (Strands Agents; the requests are then the calls its last model call
//!    proposed that no tool span ran);
//! 6. a scope declared with a channel (`[mapping] approval_channels = { scope = true }`).
//!
//! Otherwise a trace whose tool spans all come from scopes declared without a channel
//! (`approval_channels = { scope = false }`) says so (`Some(false)`: not assessed, whatever the
//! source's state), and any other trace shows nothing (`None`): the learned state decides.
//!
//! Calls that did not run are no steps, whatever shows the pause: held calls (requests for
//! confirmation, in a keyed run's paused part), proposed calls, and a framework's synthetic
//! spans over parallel calls (a parenthesised tool name, Google ADK's `(merged tools)`). A call
//! executed after a request for approval of it — later in the same trace, or in a keyed run's
//! resumed part (the scorer joins it by `tool_call_id`, else by tool) — was approved
//! (frameworks do not run a denied call): it is confirmed.
