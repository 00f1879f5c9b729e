"""Scripted OpenAI-compatible model server for the conformance suite.

Implements just enough of the OpenAI Responses API (``POST /v1/responses``,
non-streaming and SSE streaming) and the Chat Completions API
(``POST /v1/chat/completions``, non-streaming and SSE streaming) for agent
frameworks to run against it.

A scenario scripts the sequence of model outputs with :meth:`ScriptedServer.set_script`.
Each incoming model request pops the next step:

    {"kind": "tool", "tool": "get_order_status", "args": {...}, "usage": [in, out]}
    {"kind": "tools", "calls": [{"tool": ..., "args": {...}}, ...], "usage": [in, out]}   # parallel calls
    {"kind": "text", "text": "Your order shipped.", "usage": [in, out]}
    {"kind": "error", "status": 500, "message": "boom"}

Every request and what the server answered is appended to ``server.log`` -
this log (not the spans) is the ground truth for model calls and tokens.
The agent making a request is identified by an ``[agent:NAME]`` marker that
the scenarios put in every agent's instructions / system prompt.

Standard library only, so it runs in every venv.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

AGENT_MARKER = re.compile(r"\[agent:([^\]]+)\]")
MODEL_NAME = "gpt-4o-mini"


def _find_agent(body: dict[str, Any]) -> str | None:
    """Return the agent name from the instructions / system prompt of a request."""
    candidates: list[str] = []
    instr = body.get("instructions")
    if isinstance(instr, str):
        candidates.append(instr)
    for key in ("messages", "input"):
        msgs = body.get(key)
        if isinstance(msgs, list):
            for m in msgs:
                if isinstance(m, dict) and m.get("role") in ("system", "developer"):
                    c = m.get("content")
                    candidates.append(c if isinstance(c, str) else json.dumps(c))
    for text in candidates:
        m = AGENT_MARKER.search(text)
        if m:
            return m.group(1)
    # last resort: the last marker anywhere in the body (most recent system text)
    found = AGENT_MARKER.findall(json.dumps(body))
    return found[-1] if found else None


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if "name" in t:
            names.append(t["name"])
        elif isinstance(t.get("function"), dict):
            names.append(t["function"].get("name"))
    return names


class ScriptedServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._lock = threading.Lock()
        self._script: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        self.run_index = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # silence
                pass

            def do_GET(self):  # /v1/models etc.
                self._send_json(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/responses"):
                    server._handle(self, body, "responses")
                elif path.endswith("/chat/completions"):
                    server._handle(self, body, "chat_completions")
                else:
                    self._send_json(404, {"error": {"message": f"unknown path {path}", "type": "invalid_request_error"}})

            def _send_json(self, status: int, obj: Any):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-request-id", "req_" + uuid.uuid4().hex[:16])
                self.end_headers()
                self.wfile.write(data)

            def _send_sse(self, events: list[tuple[str | None, Any]]):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, payload in events:
                    chunk = ""
                    if name:
                        chunk += f"event: {name}\n"
                    chunk += "data: " + (payload if isinstance(payload, str) else json.dumps(payload)) + "\n\n"
                    self.wfile.write(chunk.encode())
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # -- lifecycle -----------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def set_script(self, steps: list[dict[str, Any]], run_index: int) -> None:
        with self._lock:
            self._script = [dict(s) for s in steps]
            self.run_index = run_index

    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def calls_for_run(self, run_index: int) -> list[dict[str, Any]]:
        return [e for e in self.log if e["run"] == run_index]

    # -- request handling ----------------------------------------------
    def _handle(self, h, body: dict[str, Any], api: str) -> None:
        with self._lock:
            step = self._script.pop(0) if self._script else {"kind": "error", "status": 500, "message": "conformance script exhausted"}
            seq = len(self.log)
            entry: dict[str, Any] = {
                "run": self.run_index,
                "seq": seq,
                "api": api,
                "agent": _find_agent(body),
                "model": body.get("model"),
                "stream": bool(body.get("stream")),
                "tools_offered": _tool_names(body),
                "step": step.get("kind"),
            }
            self.log.append(entry)
        model = body.get("model") or MODEL_NAME
        if step["kind"] == "error":
            status = int(step.get("status", 500))
            entry.update(status=status, input_tokens=0, output_tokens=0, response_id=None)
            h._send_json(status, {"error": {"message": step.get("message", "scripted failure"),
                                            "type": "server_error" if status >= 500 else "invalid_request_error",
                                            "param": None, "code": None}})
            return
        usage = step.get("usage")
        if usage is None:
            usage = [0, 0]
        in_tok, out_tok = int(usage[0]), int(usage[1])
        call_id = step.get("call_id") or f"call_{uuid.uuid4().hex[:20]}"
        entry.update(status=200, input_tokens=in_tok, output_tokens=out_tok,
                     usage_sent=not step.get("omit_usage", False))
        if step["kind"] == "tool":
            entry.update(tool=step["tool"], tool_call_id=call_id)
            if step["tool"] not in entry["tools_offered"]:
                entry["warning"] = f"scripted tool {step['tool']} not offered by request"
        elif step["kind"] == "tools":  # several function calls in one model response
            step = dict(step, calls=[dict(c, call_id=c.get("call_id") or f"call_{uuid.uuid4().hex[:20]}")
                                     for c in step["calls"]])
            entry["tool_calls"] = [{"tool": c["tool"], "tool_call_id": c["call_id"]} for c in step["calls"]]
            missing = [c["tool"] for c in step["calls"] if c["tool"] not in entry["tools_offered"]]
            if missing:
                entry["warning"] = f"scripted tools {missing} not offered by request"
        if api == "responses":
            resp = self._responses_body(step, model, in_tok, out_tok, call_id)
            entry["response_id"] = resp["id"]
            if body.get("stream"):
                h._send_sse(self._responses_events(resp))
            else:
                h._send_json(200, resp)
        else:
            resp = self._chat_body(step, model, in_tok, out_tok, call_id)
            entry["response_id"] = resp["id"]
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                entry["usage_sent"] = entry["usage_sent"] and include_usage
                h._send_sse(self._chat_chunks(resp, include_usage))
            else:
                h._send_json(200, resp)

    # -- Responses API ---------------------------------------------------
    @staticmethod
    def _responses_body(step, model, in_tok, out_tok, call_id) -> dict[str, Any]:
        if step["kind"] == "tool":
            output = [{
                "type": "function_call",
                "id": "fc_" + uuid.uuid4().hex[:24],
                "call_id": call_id,
                "name": step["tool"],
                "arguments": json.dumps(step.get("args", {})),
                "status": "completed",
            }]
        elif step["kind"] == "tools":
            output = [{
                "type": "function_call",
                "id": "fc_" + uuid.uuid4().hex[:24],
                "call_id": c["call_id"],
                "name": c["tool"],
                "arguments": json.dumps(c.get("args", {})),
                "status": "completed",
            } for c in step["calls"]]
        else:
            output = [{
                "type": "message",
                "id": "msg_" + uuid.uuid4().hex[:24],
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step["text"], "annotations": [], "logprobs": []}],
            }]
        body = {
            "id": "resp_" + uuid.uuid4().hex,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": True,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "user": None,
            "metadata": {},
        }
        if not step.get("omit_usage"):
            body["usage"] = {
                "input_tokens": in_tok,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": out_tok,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": in_tok + out_tok,
            }
        else:
            body["usage"] = None
        return body

    @staticmethod
    def _responses_events(resp: dict[str, Any]) -> list[tuple[str, Any]]:
        seq = 0
        events = []

        def ev(name, payload):
            nonlocal seq
            payload = dict(payload, type=name, sequence_number=seq)
            seq += 1
            events.append((name, payload))

        in_progress = dict(resp, status="in_progress", output=[], usage=None)
        ev("response.created", {"response": in_progress})
        ev("response.in_progress", {"response": in_progress})
        for i, item in enumerate(resp["output"]):
            if item["type"] == "message":
                empty = dict(item, status="in_progress", content=[])
                ev("response.output_item.added", {"output_index": i, "item": empty})
                part = item["content"][0]
                ev("response.content_part.added", {"output_index": i, "item_id": item["id"], "content_index": 0,
                                                   "part": dict(part, text="")})
                ev("response.output_text.delta", {"output_index": i, "item_id": item["id"], "content_index": 0,
                                                  "delta": part["text"], "logprobs": []})
                ev("response.output_text.done", {"output_index": i, "item_id": item["id"], "content_index": 0,
                                                 "text": part["text"], "logprobs": []})
                ev("response.content_part.done", {"output_index": i, "item_id": item["id"], "content_index": 0,
                                                  "part": part})
            else:
                ev("response.output_item.added", {"output_index": i, "item": dict(item, arguments="", status="in_progress")})
                ev("response.function_call_arguments.delta", {"output_index": i, "item_id": item["id"],
                                                              "delta": item["arguments"]})
                ev("response.function_call_arguments.done", {"output_index": i, "item_id": item["id"],
                                                             "arguments": item["arguments"]})
            ev("response.output_item.done", {"output_index": i, "item": item})
        ev("response.completed", {"response": resp})
        return events

    # -- Chat Completions API -------------------------------------------
    @staticmethod
    def _chat_body(step, model, in_tok, out_tok, call_id) -> dict[str, Any]:
        if step["kind"] == "tool":
            message = {"role": "assistant", "content": None, "refusal": None,
                       "tool_calls": [{"id": call_id, "type": "function",
                                       "function": {"name": step["tool"], "arguments": json.dumps(step.get("args", {}))}}]}
            finish = "tool_calls"
        elif step["kind"] == "tools":
            message = {"role": "assistant", "content": None, "refusal": None,
                       "tool_calls": [{"id": c["call_id"], "type": "function",
                                       "function": {"name": c["tool"], "arguments": json.dumps(c.get("args", {}))}}
                                      for c in step["calls"]]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": step["text"], "refusal": None}
            finish = "stop"
        body = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "fp_conformance",
            "service_tier": "default",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        }
        if not step.get("omit_usage"):
            body["usage"] = {"prompt_tokens": in_tok, "completion_tokens": out_tok, "total_tokens": in_tok + out_tok,
                             "prompt_tokens_details": {"cached_tokens": 0},
                             "completion_tokens_details": {"reasoning_tokens": 0}}
        return body

    @staticmethod
    def _chat_chunks(resp: dict[str, Any], include_usage: bool) -> list[tuple[None, Any]]:
        base = {k: resp[k] for k in ("id", "created", "model", "system_fingerprint")}
        base["object"] = "chat.completion.chunk"
        msg = resp["choices"][0]["message"]
        chunks = [dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
        if msg.get("tool_calls"):
            for i, tc in enumerate(msg["tool_calls"]):
                chunks.append(dict(base, choices=[{"index": 0, "delta": {"tool_calls": [
                    {"index": i, "id": tc["id"], "type": "function",
                     "function": {"name": tc["function"]["name"], "arguments": tc["function"]["arguments"]}}]},
                    "finish_reason": None}]))
        else:
            chunks.append(dict(base, choices=[{"index": 0, "delta": {"content": msg["content"]}, "finish_reason": None}]))
        chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": resp["choices"][0]["finish_reason"]}]))
        if include_usage and "usage" in resp:
            chunks.append(dict(base, choices=[], usage=resp["usage"]))
        out: list[tuple[None, Any]] = [(None, c) for c in chunks]
        out.append((None, "[DONE]"))
        return out
