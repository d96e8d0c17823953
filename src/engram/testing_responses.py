"""A scripted OpenAI Responses server on 127.0.0.1, strict like the real API.

:class:`FakeResponsesServer` (also importable from :mod:`engram.testing`)
serves ``POST /v1/responses`` in a background thread. Tests script its
answers (text, function calls, each optionally after a ``reasoning`` item);
when the queue is empty it echoes the last user text::

    with FakeResponsesServer() as openai_responses:
        openai_responses.reply_calls([{"name": "get_weather", "arguments": {"city": "Oslo"}}],
                                     reasoning="The user wants the weather.")

It refuses, with OpenAI's 400 body, what the Responses API refuses: no
``model`` or ``input``, a ``function_call`` with no ``function_call_output``
after it, an output with no call before it, ``tool_choice`` without tools,
a ``function_call`` it answered after a reasoning item sent back without that
item, and a reasoning item whose ``encrypted_content`` is missing (asked for
with ``include: ["reasoning.encrypted_content"]``; the server stores nothing)
or changed. Refused requests are kept in :attr:`FakeResponsesServer.refused`.
``"stream": true`` gets the Responses events.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from engram.models import JSON
from engram.testing_requests import LocalServer, RecordedRequest
from engram.tokens import storage_counter

__all__ = ["FakeResponsesServer", "ScriptedOutput"]

#: Characters per streamed text delta.
STREAM_PIECE = 8
ENCRYPTED = "reasoning.encrypted_content"


@dataclass(slots=True)
class ScriptedOutput:
    """One scripted answer: its text, its calls, the reasoning before them."""

    text: str | None = None
    calls: list[JSON] = field(default_factory=list)
    reasoning: str | None = None


def _sealed(text: str) -> str:
    return "enc-" + hashlib.sha256(text.encode()).hexdigest()[:24]


class FakeResponsesServer:
    """A scriptable Responses API server on 127.0.0.1."""

    def __init__(self, *, model: str = "fake-model") -> None:
        """Prepare the server; :meth:`start` (or ``with``) binds a free port."""
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.refused: list[tuple[RecordedRequest, str]] = []
        self._queue: deque[ScriptedOutput] = deque()
        self._needs: dict[str, JSON] = {}  # call id -> the reasoning item it came after
        self._lock = threading.Lock()
        self._serving: LocalServer | None = None
        self._ids = 0

    def start(self) -> FakeResponsesServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        if self._serving is None:
            self._serving = LocalServer(_handler(self))
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._serving is not None:
            self._serving.close()
            self._serving = None

    def __enter__(self) -> FakeResponsesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client: ``http://127.0.0.1:<port>/v1``."""
        if self._serving is None:
            raise RuntimeError("FakeResponsesServer is not started")
        return f"http://127.0.0.1:{self._serving.port}/v1"

    def reply(self, text: str, *, reasoning: str | None = None) -> FakeResponsesServer:
        """Queue a text answer (after a reasoning item when ``reasoning`` is given)."""
        with self._lock:
            self._queue.append(ScriptedOutput(text=text, reasoning=reasoning))
        return self

    def reply_calls(
        self, calls: Sequence[Mapping[str, Any]], *, reasoning: str | None = None
    ) -> FakeResponsesServer:
        """Queue function calls: each ``{"name", "arguments", "id"?}``."""
        with self._lock:
            self._queue.append(ScriptedOutput(calls=[dict(c) for c in calls], reasoning=reasoning))
        return self

    # -- serving ------------------------------------------------------------------

    def _answer(self, request: RecordedRequest) -> tuple[int, JSON]:
        body = request.body or {}
        with self._lock:
            self.requests.append(request)
            problem = self._refusal(body)
            if problem is not None:
                self.refused.append((request, problem))
                error = {"message": problem, "type": "invalid_request_error", "param": None}
                return 400, {"error": error}
            scripted = self._queue.popleft() if self._queue else None
            self._ids += 1
            number = self._ids
        if scripted is None:
            scripted = ScriptedOutput(text=f"ok: {_last_user_text(body)}"[:500])
        output: list[JSON] = []
        reasoning: JSON | None = None
        if scripted.reasoning is not None:
            reasoning = {"type": "reasoning", "id": f"rs_{number}", "summary": []}
            if ENCRYPTED in (body.get("include") or ()):
                reasoning["encrypted_content"] = _sealed(scripted.reasoning)
            output.append(reasoning)
        if scripted.text is not None:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{number}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": scripted.text, "annotations": []}],
                }
            )
        for index, call in enumerate(scripted.calls):
            arguments = call.get("arguments", {})
            call_id = str(call.get("id", f"call_{number}_{index}"))
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{number}_{index}",
                    "status": "completed",
                    "call_id": call_id,
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                }
            )
            if reasoning is not None:
                with self._lock:
                    self._needs[call_id] = reasoning
        counter = storage_counter()
        used_in = counter.count_text(json.dumps(body.get("input")))
        used_out = counter.count_text(json.dumps(output))
        return 200, {
            "id": f"resp_fake_{number}",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": body.get("model") or self.model,
            "output": output,
            "usage": {
                "input_tokens": used_in,
                "output_tokens": used_out,
                "total_tokens": used_in + used_out,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }

    def _refusal(self, body: Mapping[str, Any]) -> str | None:
        if not isinstance(body.get("model"), str):
            return "Missing required parameter: 'model'."
        items = body.get("input")
        if isinstance(items, str):
            return None
        if not isinstance(items, list) or not items:
            return "Missing required parameter: 'input'."
        if body.get("tool_choice") is not None and not body.get("tools"):
            return "Tool choices other than 'auto' are only supported with tools."
        calls = [
            i.get("call_id")
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call"
        ]
        outputs = [
            i.get("call_id")
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        for call_id in calls:
            if call_id not in outputs:
                return f"No tool output found for function call {call_id}."
        for call_id in outputs:
            if call_id not in calls:
                return f"No tool call found for function call output with call_id {call_id}."
        sent = {
            i.get("id"): i for i in items if isinstance(i, dict) and i.get("type") == "reasoning"
        }
        for item in sent.values():
            if not item.get("encrypted_content"):
                return (
                    f"Item with id '{item.get('id')}' not found. Items are not persisted "
                    "when `store` is set to false."
                )
        for call_id in calls:
            needed = self._needs.get(str(call_id))
            if needed is None:
                continue
            if needed["id"] not in sent:
                return (
                    f"Item of type 'function_call' ({call_id}) was provided without its "
                    f"required 'reasoning' item: '{needed['id']}'."
                )
            if sent[needed["id"]].get("encrypted_content") != needed.get("encrypted_content"):
                return f"The encrypted content for item {needed['id']} could not be verified."
        return None


def _last_user_text(body: Mapping[str, Any]) -> str:
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items or []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            texts = [p.get("text", "") for p in content or [] if isinstance(p, dict)]
            return str(texts[-1]) if texts else ""
    return ""


def stream_events(response: JSON) -> list[JSON]:
    """A response as the events the Responses API streams."""
    shell = {**response, "status": "in_progress", "output": []}
    events: list[JSON] = [
        {"type": "response.created", "response": shell},
        {"type": "response.in_progress", "response": shell},
    ]
    for index, item in enumerate(response["output"]):
        kind = item["type"]
        if kind == "message":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "content": [], "status": "in_progress"},
                }
            )
            text = item["content"][0]["text"]
            for at in range(0, len(text), STREAM_PIECE):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text[at : at + STREAM_PIECE],
                    }
                )
        elif kind == "function_call":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "arguments": "", "status": "in_progress"},
                }
            )
            raw = item["arguments"]
            for at in range(0, len(raw), STREAM_PIECE):
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "delta": raw[at : at + STREAM_PIECE],
                    }
                )
        else:
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": item}
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _handler(fake: FakeResponsesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            """Stay quiet: tests read ``fake.requests``."""

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = RecordedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body if isinstance(body, dict) else None,
                raw=raw,
            )
            if self.path.split("?")[0].rstrip("/") != "/v1/responses":
                self._send(404, b'{"error": {"message": "not found"}}', "application/json")
                return
            status, answer = fake._answer(request)
            if status == 200 and request.body and request.body.get("stream") is True:
                events = stream_events(answer)
                data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
                self._send(200, data.encode(), "text/event-stream")
                return
            self._send(status, json.dumps(answer).encode(), "application/json")

        def _send(self, status: int, body: bytes, kind: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
