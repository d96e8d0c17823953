"""A scripted Anthropic Messages server on 127.0.0.1, strict like the real API.

:class:`FakeAnthropicServer` (also importable from :mod:`engram.testing`)
serves ``POST /v1/messages`` the way Anthropic does, in a background thread.
Tests script its answers (text, ``tool_use`` blocks, ``thinking`` blocks,
errors); when the queue is empty it echoes the last user text::

    with FakeAnthropicServer() as claude:
        claude.reply("Hello!")
        claude.reply_tool_use([{"name": "get_weather", "input": {"city": "Oslo"}}],
                              thinking="The user wants the weather.")
        client = anthropic.Anthropic(base_url=claude.base_url, api_key="k")

It refuses, with Anthropic's 400 body (``{"type": "error", "error": {...}}``),
what Anthropic refuses: no credential (``x-api-key`` or a bearer: 401) or
``anthropic-version``, no ``max_tokens``, ``metadata`` other than
``user_id``, roles other than user and assistant, a first message that is
not the user's, empty text blocks, ``tool_use`` blocks not answered by
``tool_result`` blocks first in the next user message, a ``tool_result``
without its ``tool_use``, ``tool_choice`` without tools, more than four
``cache_control`` breakpoints, and, with ``thinking`` enabled, a tool loop
whose assistant turn does not start with its thinking block, or a thinking
block changed from what the server sent (its signature no longer matches).
Refused requests are kept in :attr:`FakeAnthropicServer.refused`.

It keeps a prompt cache: every ``cache_control`` breakpoint caches the prompt
up to it (tools, system, messages), and a later request whose prefix up to
one of its breakpoints was cached reports those tokens as
``cache_read_input_tokens`` (new breakpoints as ``cache_creation_input_tokens``).
``"stream": true`` gets Anthropic's events: ``message_start``,
``content_block_start`` / ``content_block_delta`` / ``content_block_stop``
per block, ``message_delta`` and ``message_stop``.
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

__all__ = ["AnthropicResponse", "FakeAnthropicServer", "messages_error"]

#: Most ``cache_control`` breakpoints Anthropic accepts in one request.
MAX_BREAKPOINTS = 4
#: Characters of text per streamed ``text_delta``.
STREAM_PIECE = 8
_SECRET = b"engram-fake-anthropic"


@dataclass(slots=True)
class AnthropicResponse:
    """One scripted answer: content blocks (or an error status and body)."""

    content: list[JSON] = field(default_factory=list)
    stop_reason: str = "end_turn"
    stop_sequence: str | None = None
    status: int = 200
    raw_body: bytes | None = None
    usage: JSON | None = None
    headers: dict[str, str] = field(default_factory=dict)


def signature(thinking: str) -> str:
    """The signature the fake gives a thinking block (it checks it comes back unchanged)."""
    return hashlib.sha256(_SECRET + thinking.encode("utf-8")).hexdigest()


class FakeAnthropicServer:
    """A scriptable Anthropic Messages server on 127.0.0.1."""

    def __init__(self, *, model: str = "claude-fake", strict: bool = True) -> None:
        """Prepare the server; :meth:`start` (or ``with``) binds a free port."""
        self.model = model
        self.strict = strict
        self.requests: list[RecordedRequest] = []
        self.refused: list[tuple[RecordedRequest, str]] = []
        self._queue: deque[AnthropicResponse] = deque()
        self._cache: set[str] = set()
        self._lock = threading.Lock()
        self._serving: LocalServer | None = None
        self._ids = 0

    def start(self) -> FakeAnthropicServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        if self._serving is None:
            self._serving = LocalServer(_handler(self))
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._serving is not None:
            self._serving.close()
            self._serving = None

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The URL to give an Anthropic client (it adds ``/v1/messages``)."""
        if self._serving is None:
            raise RuntimeError("FakeAnthropicServer is not started")
        return f"http://127.0.0.1:{self._serving.port}"

    # -- scripting ----------------------------------------------------------------

    def push(self, *responses: AnthropicResponse) -> FakeAnthropicServer:
        """Queue answers, served in order, one per request."""
        with self._lock:
            self._queue.extend(responses)
        return self

    def reply(self, text: str, *, thinking: str | None = None, **kw: Any) -> FakeAnthropicServer:
        """Queue a text answer (after a thinking block when ``thinking`` is given)."""
        blocks = [*_thinking(thinking), {"type": "text", "text": text}]
        return self.push(AnthropicResponse(content=blocks, **kw))

    def reply_tool_use(
        self,
        calls: Sequence[Mapping[str, Any]],
        *,
        text: str | None = None,
        thinking: str | None = None,
        **kw: Any,
    ) -> FakeAnthropicServer:
        """Queue an answer that calls tools: each call is ``{"name", "input", "id"?}``."""
        blocks = _thinking(thinking) + ([{"type": "text", "text": text}] if text else [])
        for index, call in enumerate(calls):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.get("id", f"toolu_{index + 1:02d}"),
                    "name": call["name"],
                    "input": dict(call.get("input") or {}),
                }
            )
        return self.push(AnthropicResponse(content=blocks, stop_reason="tool_use", **kw))

    def fail(
        self, status: int = 529, kind: str = "overloaded_error", message: str = "Overloaded"
    ) -> FakeAnthropicServer:
        """Queue an error answer in Anthropic's shape."""
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return self.push(AnthropicResponse(status=status, raw_body=json.dumps(body).encode()))

    # -- serving ------------------------------------------------------------------

    def _answer(self, request: RecordedRequest) -> tuple[int, JSON | bytes, dict[str, str]]:
        body = request.body or {}
        problem = self._refusal(request) if self.strict else None
        with self._lock:
            self.requests.append(request)
            if problem is not None:
                self.refused.append((request, problem[1]))
                return problem[0], messages_error(problem[1], problem[2]), {}
            scripted = self._queue.popleft() if self._queue else None
            self._ids += 1
            number = self._ids
        response = scripted or AnthropicResponse(
            content=[{"type": "text", "text": f"ok: {_last_user_text(body)}"[:500]}]
        )
        if response.raw_body is not None:
            return response.status, response.raw_body, response.headers
        content = [dict(block) for block in response.content]
        out = {
            "id": f"msg_fake_{number}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.model,
            "content": content,
            "stop_reason": response.stop_reason,
            "stop_sequence": response.stop_sequence,
            "usage": response.usage or self._usage(body, content),
        }
        return 200, out, response.headers

    def _usage(self, body: JSON, content: list[JSON]) -> JSON:
        """Token counts, with the prompt cache read and written at the breakpoints."""
        counter = storage_counter()
        total = counter.count_text(json.dumps(_prefix(body, None)))
        read = created = 0
        with self._lock:
            for mark in _breakpoints(body):
                prefix = json.dumps(_prefix(body, mark))
                size = counter.count_text(prefix)
                key = hashlib.sha256(prefix.encode()).hexdigest()
                if key in self._cache:
                    read = max(read, size)
                else:
                    self._cache.add(key)
                    created = max(created, size)
        created = max(0, created - read)
        return {
            "input_tokens": max(0, total - read - created),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": created,
            "output_tokens": counter.count_text(json.dumps(content)),
        }

    def _refusal(self, request: RecordedRequest) -> tuple[int, str, str] | None:
        """(status, message, error type) of what Anthropic refuses, or None."""
        if not request.headers.get("x-api-key") and not request.headers.get("authorization"):
            return 401, "x-api-key header is required", "authentication_error"
        if not request.headers.get("anthropic-version"):
            return 400, "anthropic-version: header is required", "invalid_request_error"
        message = messages_error_text(request.body or {})
        return (400, message, "invalid_request_error") if message else None


def messages_error(message: str, kind: str = "invalid_request_error") -> bytes:
    """Anthropic's error body."""
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def messages_error_text(body: Mapping[str, Any]) -> str | None:
    """What Anthropic's Messages API refuses in ``body``, in its words; None when it is valid."""
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    tokens = body.get("max_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    metadata = body.get("metadata")
    extra = sorted(set(metadata) - {"user_id"}) if isinstance(metadata, Mapping) else []
    if extra:
        return f"metadata.{extra[0]}: Extra inputs are not permitted"
    if body.get("tool_choice") is not None and not body.get("tools"):
        return "tool_choice: tool_choice may only be specified while providing tools"
    marks = len(_breakpoints(body))
    if marks > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {marks}."
        )
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if index == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        for at, block in enumerate(_blocks(message.get("content"))):
            if block.get("type") == "text" and not block.get("text"):
                return f"messages.{index}.content.{at}.text: text content blocks must be non-empty"
    return _tool_error(messages) or _thinking_error(body, messages)


def _tool_error(messages: list[Any]) -> str | None:
    waiting: list[str] = []
    for index, message in enumerate(messages):
        blocks = _blocks(message.get("content"))
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if waiting:
            missing = [i for i in waiting if i not in results]
            if message.get("role") != "user" or missing:
                return (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing or waiting)}. Each `tool_use` block "
                    "must have a corresponding `tool_result` block in the next message."
                )
            kinds = [b.get("type") for b in blocks]
            if kinds[: len(results)] != ["tool_result"] * len(results):
                return f"messages.{index}: tool_result blocks must come first in the content"
        for at, block in enumerate(blocks):
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in waiting:
                return (
                    f"messages.{index}.content.{at}: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` block "
                    "must have a corresponding `tool_use` block in the previous message."
                )
        calls = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        waiting = [str(c) for c in calls] if message.get("role") == "assistant" else []
    if waiting:
        return f"messages: `tool_use` ids were found without `tool_result` blocks: {waiting}"
    return None


def _thinking_error(body: Mapping[str, Any], messages: list[Any]) -> str | None:
    for index, message in enumerate(messages):
        for at, block in enumerate(_blocks(message.get("content"))):
            if block.get("type") == "thinking" and block.get("signature") != signature(
                str(block.get("thinking"))
            ):
                return f"messages.{index}.content.{at}: Invalid `signature` in `thinking` block"
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return None
    last = messages[-1]
    results = [b for b in _blocks(last.get("content")) if b.get("type") == "tool_result"]
    if len(messages) < 2 or not results:
        return None
    previous = messages[-2]
    first = (_blocks(previous.get("content")) or [{}])[0]
    if first.get("type") not in ("thinking", "redacted_thinking"):
        return (
            f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
            f"`redacted_thinking`, but found `{first.get('type')}`. When `thinking` is enabled, "
            "a final `assistant` message must start with a thinking block"
        )
    return None


def _blocks(content: object) -> list[JSON]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _breakpoints(body: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """Where the cache breakpoints are: (part, index, block index)."""
    marks: list[tuple[str, int, int]] = []
    for index, tool in enumerate(body.get("tools") or ()):
        if isinstance(tool, dict) and tool.get("cache_control"):
            marks.append(("tools", index, 0))
    system = body.get("system")
    for index, block in enumerate(system if isinstance(system, list) else ()):
        if isinstance(block, dict) and block.get("cache_control"):
            marks.append(("system", index, 0))
    for index, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        for at, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and block.get("cache_control"):
                marks.append(("messages", index, at))
    return marks


def _prefix(body: Mapping[str, Any], mark: tuple[str, int, int] | None) -> Any:
    """The prompt up to a breakpoint (all of it for None), without the markers."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    tools, system = body.get("tools") or [], body.get("system")
    messages: list[Any] = body.get("messages") or []
    if mark is None:
        return clean([tools, system, messages])
    part, index, at = mark
    if part == "tools":
        return clean([tools[: index + 1]])
    if part == "system":
        return clean([tools, system[: index + 1] if isinstance(system, list) else system])
    head = [*messages[:index], {**messages[index], "content": messages[index]["content"][: at + 1]}]
    return clean([tools, system, head])


def _thinking(text: str | None) -> list[JSON]:
    if text is None:
        return []
    return [{"type": "thinking", "thinking": text, "signature": signature(text)}]


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            texts = [
                b.get("text", "")
                for b in _blocks(message.get("content"))
                if b.get("type") == "text"
            ]
            if texts:
                return str(texts[-1])
    return ""


def stream_events(message: JSON) -> list[tuple[str, JSON]]:
    """A message as the events Anthropic streams."""
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events: list[tuple[str, JSON]] = [("message_start", {"message": start}), ("ping", {})]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            events.append(
                (
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            text = block["text"]
            for at in range(0, len(text), STREAM_PIECE):
                delta = {"type": "text_delta", "text": text[at : at + STREAM_PIECE]}
                events.append(("content_block_delta", {"index": index, "delta": delta}))
        elif kind == "tool_use":
            shell = {**block, "input": {}}
            events.append(("content_block_start", {"index": index, "content_block": shell}))
            raw = json.dumps(block["input"])
            for at in range(0, len(raw), STREAM_PIECE):
                delta = {"type": "input_json_delta", "partial_json": raw[at : at + STREAM_PIECE]}
                events.append(("content_block_delta", {"index": index, "delta": delta}))
        elif kind == "thinking":
            shell = {"type": "thinking", "thinking": "", "signature": ""}
            events.append(("content_block_start", {"index": index, "content_block": shell}))
            for delta in (
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ):
                events.append(("content_block_delta", {"index": index, "delta": delta}))
        else:
            events.append(("content_block_start", {"index": index, "content_block": block}))
        events.append(("content_block_stop", {"index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]}
    events.append(("message_delta", {"delta": delta, "usage": dict(usage)}))
    events.append(("message_stop", {}))
    return [(kind, {"type": kind, **data}) for kind, data in events]


def _handler(fake: FakeAnthropicServer) -> type[BaseHTTPRequestHandler]:
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
            if self.path.split("?")[0].rstrip("/") != "/v1/messages":
                self._send(404, messages_error("not found", "not_found_error"), "application/json")
                return
            status, answer, headers = fake._answer(request)
            if isinstance(answer, bytes):
                self._send(status, answer, "application/json", headers)
            elif request.body and request.body.get("stream") is True:
                self._stream(answer, headers)
            else:
                self._send(status, json.dumps(answer).encode(), "application/json", headers)

        def _send(
            self, status: int, body: bytes, kind: str, headers: Mapping[str, str] | None = None
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _stream(self, message: JSON, headers: Mapping[str, str]) -> None:
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                for kind, data in stream_events(message):
                    self.wfile.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
