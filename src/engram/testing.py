"""Test helpers shipped with Engram, so applications can test their own LLM paths.

:class:`FakeLLMServer` is a real OpenAI-compatible HTTP server on 127.0.0.1,
running in a background thread. Any client (Engram's, the ``openai`` SDK,
``httpx``) talks to it exactly as it talks to OpenAI. Each test scripts it with
a queue of answers; when the queue is empty a default responder answers::

    with FakeLLMServer() as llm:
        llm.reply("Hello!")
        llm.fail(500)
        llm.reply_json({"user_preferences": {"theme": "dark"}})
        client = LLMClient("gpt-4o-mini", base_url=llm.base_url)
        ...
        assert len(llm.requests) == 3

It serves ``POST /v1/chat/completions`` and ``GET /v1/models``. A request with
``"stream": true`` gets the same scripted answer as server-sent events: the
text a few characters per chunk, the tool calls, then the usage when
``stream_options.include_usage`` asks for it.
A response's ``chunk_delay`` paces the chunks (to test a client that leaves mid-stream, or a
model that trickles); a non-streamed answer with a ``chunk_delay`` is sent in small pieces
that far apart. A response's ``headers`` are sent with it (``Retry-After``, rate limits).

``FakeLLMServer(strict=True)`` refuses what OpenAI refuses, with OpenAI's 400 error body: an
assistant message with ``tool_calls`` not followed by one tool message per call id, a tool
message that answers no call of the assistant message just before it, ``tool_choice``
without ``tools``, and (with ``max_system_messages``) more system messages than allowed.
Refused requests are kept in :attr:`FakeLLMServer.refused` and use no scripted answer.

:class:`FakeAnthropicServer` is its Anthropic twin: a strict, scripted Messages API
(:mod:`engram.testing_anthropic`), and :class:`FakeResponsesServer` a strict, scripted
OpenAI Responses API (:mod:`engram.testing_responses`); both imported on first use.

:class:`~engram.store.memory.backend.MemoryStore` (``memory://NAME``) is a store that
keeps everything in this process, for tests that need no file at all.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from engram.models import JSON
from engram.store.memory.backend import MemoryStore
from engram.testing_requests import LocalServer, RecordedRequest
from engram.tokens import STORAGE_ENCODING, count_messages, get_encoding, storage_counter

__all__ = [
    "FakeLLMServer",
    "FakeResponse",
    "MemoryStore",
    "RecordedRequest",
    "tool_sequence_error",
]


@dataclass(slots=True)
class FakeResponse:
    """One scripted answer.

    ``raw_body`` (when set) is sent as is, so a test can send garbage; else a
    chat completion is built from ``content`` / ``tool_calls``. ``delay`` is
    slept before answering (interrupted when the server stops); a streamed
    answer also sleeps ``chunk_delay`` before each content chunk, and a
    non-streamed one is sent ``TRICKLE_BYTES`` at a time, ``chunk_delay`` apart.
    """

    content: str | None = ""
    tool_calls: list[JSON] | None = None
    status: int = 200
    finish_reason: str = "stop"
    delay: float = 0.0
    raw_body: bytes | None = None
    content_type: str = "application/json"
    usage: JSON | None = None
    omit_usage: bool = False
    chunk_delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[RecordedRequest], "FakeResponse | str"]


def echo_responder(request: RecordedRequest) -> FakeResponse:
    """Default answer: "ok: " and the text of the last message."""
    messages = request.messages
    last = messages[-1].get("content", "") if messages else ""
    return FakeResponse(content=f"ok: {last}"[:500])


class FakeLLMServer:
    """A scriptable OpenAI-compatible chat-completions server on 127.0.0.1."""

    def __init__(
        self,
        *,
        default: Responder | None = None,
        model: str = "fake-model",
        strict: bool = False,
        max_system_messages: int | None = None,
    ):
        """Prepare the server; :meth:`start` (or ``with``) binds a free port.

        Args:
            default: Answers when the script queue is empty (echo by default).
            model: Model name reported in answers when the request names none.
            strict: Refuse invalid tool-call sequences with OpenAI's 400 body.
            max_system_messages: With ``strict``, most system messages a prompt may hold.

        """
        self.default: Responder = default or echo_responder
        self.model = model
        self.strict = strict
        self.max_system_messages = max_system_messages
        self.requests: list[RecordedRequest] = []
        #: Requests refused by the strict checks, with the error message sent.
        self.refused: list[tuple[RecordedRequest, str]] = []
        self._queue: deque[FakeResponse] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._serving: LocalServer | None = None
        self._ids = 0

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        if self._serving is not None:
            return self
        self._stopping.clear()
        get_encoding(STORAGE_ENCODING)  # load the vocabulary now, not inside a client's timeout
        self._serving = LocalServer(_make_handler(self))
        return self

    def stop(self) -> None:
        """Stop serving, wake any slow answer, and close the socket."""
        if self._serving is None:
            return
        self._stopping.set()
        self._serving.close()
        self._serving = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._serving is None:
            raise RuntimeError("FakeLLMServer is not started")
        return self._serving.port

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ----------------------------------------------------------------

    def push(self, *responses: FakeResponse) -> FakeLLMServer:
        """Queue answers, served in order, one per request."""
        with self._lock:
            self._queue.extend(responses)
        return self

    def reply(self, text: str, *, finish_reason: str = "stop", **kw: Any) -> FakeLLMServer:
        """Queue a plain text answer."""
        return self.push(FakeResponse(content=text, finish_reason=finish_reason, **kw))

    def reply_json(self, obj: Any, *, fenced: bool = False, **kw: Any) -> FakeLLMServer:
        """Queue an answer whose content is ``obj`` as JSON (optionally in a ```json fence)."""
        text = json.dumps(obj)
        if fenced:
            text = f"```json\n{text}\n```"
        return self.push(FakeResponse(content=text, **kw))

    def reply_tool_calls(self, calls: Sequence[Mapping[str, Any]], **kw: Any) -> FakeLLMServer:
        """Queue an answer that calls tools: each call is ``{"name", "arguments", "id"?}``."""
        tool_calls = []
        for i, call in enumerate(calls):
            args = call.get("arguments", {})
            tool_calls.append(
                {
                    "id": call.get("id", f"call_{i + 1}"),
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        return self.push(
            FakeResponse(content=None, tool_calls=tool_calls, finish_reason="tool_calls", **kw)
        )

    def fail(
        self,
        status: int = 500,
        message: str = "internal error",
        headers: Mapping[str, str] | None = None,
    ) -> FakeLLMServer:
        """Queue an HTTP error answer (OpenAI's error body), with optional response headers."""
        body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
        return self.push(FakeResponse(status=status, raw_body=body, headers=dict(headers or {})))

    def slow(self, seconds: float, text: str = "slow answer") -> FakeLLMServer:
        """Queue an answer that arrives after ``seconds``."""
        return self.push(FakeResponse(content=text, delay=seconds))

    def garbage(
        self, body: bytes = b"<html>502 Bad Gateway</html>", content_type: str = "text/html"
    ) -> FakeLLMServer:
        """Queue a 200 answer whose body is not a chat completion."""
        return self.push(FakeResponse(raw_body=body, content_type=content_type))

    def truncated_json(self, obj: Any, keep: float = 0.5) -> FakeLLMServer:
        """Queue a JSON answer cut after ``keep`` of its length, ``finish_reason="length"``."""
        text = json.dumps(obj)
        cut = text[: int(len(text) * keep)]
        return self.push(FakeResponse(content=cut, finish_reason="length"))

    def clear(self) -> FakeLLMServer:
        """Drop the scripted answers not served yet."""
        with self._lock:
            self._queue.clear()
        return self

    @property
    def pending(self) -> int:
        """Scripted answers not yet served."""
        with self._lock:
            return len(self._queue)

    # -- serving (called from handler threads) ------------------------------------

    def _next(self, request: RecordedRequest) -> FakeResponse:
        problem = self._refusal(request) if self.strict else None
        with self._lock:
            self.requests.append(request)
            if problem is not None:
                self.refused.append((request, problem[0]))
                error = {"message": problem[0], "type": "invalid_request_error"}
                body = {"error": {**error, "param": problem[1], "code": None}}
                return FakeResponse(status=400, raw_body=json.dumps(body).encode())
            if self._queue:
                return self._queue.popleft()
        answer = self.default(request)
        return FakeResponse(content=answer) if isinstance(answer, str) else answer

    def _refusal(self, request: RecordedRequest) -> tuple[str, str | None] | None:
        """What OpenAI would refuse in this request: (message, param), or None."""
        body = request.body or {}
        if body.get("tool_choice") is not None and not body.get("tools"):
            return "'tool_choice' is only allowed when 'tools' are specified.", "tool_choice"
        messages = request.messages
        if not messages:
            return "Invalid 'messages': empty array.", "messages"
        systems = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "system")
        if self.max_system_messages is not None and systems > self.max_system_messages:
            return (
                f"{systems} system messages; this model accepts {self.max_system_messages}",
                "messages",
            )
        return tool_sequence_error(messages)

    def _completion(self, request: RecordedRequest, response: FakeResponse) -> JSON:
        with self._lock:
            self._ids += 1
            number = self._ids
        body = request.body or {}
        message: JSON = {"role": "assistant", "content": response.content}
        if response.tool_calls:
            message["tool_calls"] = response.tool_calls
        out: JSON = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": response.finish_reason}],
        }
        if not response.omit_usage:
            out["usage"] = response.usage or _usage(request.messages, response)
        return out


#: Characters of text per streamed chunk.
STREAM_PIECE = 8
#: Bytes per piece of a non-streamed answer sent with a ``chunk_delay``.
TRICKLE_BYTES = 8


def stream_chunks(completion: JSON, *, include_usage: bool) -> list[JSON]:
    """A chat completion as the ``chat.completion.chunk`` objects a streaming server sends."""
    head = {k: completion[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    text = message.get("content") or ""
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [
        chunk({"content": text[i : i + STREAM_PIECE]}) for i in range(0, len(text), STREAM_PIECE)
    ]
    for index, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{**call, "index": index}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage and "usage" in completion:
        chunks.append({**head, "choices": [], "usage": completion["usage"]})
    return chunks


def tool_sequence_error(messages: Sequence[Any]) -> tuple[str, str] | None:
    """OpenAI's refusal of a tool-call sequence: (message, param), or None when it is valid.

    Every assistant message with ``tool_calls`` must be followed, before any
    other message, by one tool message per call id; a tool message must answer
    a call of that assistant message, once.
    """
    waiting: set[str] = set()  # call ids of the last assistant message not answered yet
    answered: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting or call_id in answered:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{index}].role",
                )
            answered.add(call_id)
            continue
        missing = sorted(waiting - answered)
        if missing:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(missing)}",
                f"messages.[{index}].role",
            )
        calls = message.get("tool_calls") if role == "assistant" else None
        waiting = {str(c.get("id")) for c in calls if isinstance(c, dict)} if calls else set()
        answered = set()
    missing = sorted(waiting - answered)
    if missing:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(missing)}",
            f"messages.[{len(messages)}].role",
        )
    return None


def _usage(messages: list[JSON], response: FakeResponse) -> JSON:
    counter = storage_counter()
    try:
        prompt = count_messages(counter, messages)
    except (KeyError, TypeError, AttributeError):
        prompt = 0
    completion = counter.count_text(response.content or "")
    if response.tool_calls:
        completion += counter.count_text(json.dumps(response.tool_calls))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _make_handler(fake: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so no keep-alive thread outlives stop().
        protocol_version = "HTTP/1.0"
        # Headers and body are separate writes: without TCP_NODELAY, Nagle's algorithm and
        # the client's delayed ACK hold every answer back by tens of milliseconds.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            """Stay quiet: tests read ``fake.requests`` instead."""

        def _record(self) -> RecordedRequest:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = None
            return RecordedRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body if isinstance(body, dict) else None,
                raw=raw,
            )

        def _send(
            self,
            status: int,
            body: bytes,
            content_type: str,
            headers: Mapping[str, str] | None = None,
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test); nothing to tell it

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                data = {"object": "list", "data": [{"id": fake.model, "object": "model"}]}
                self._send(200, json.dumps(data).encode(), "application/json")
            else:
                self._send(404, b'{"error": {"message": "not found"}}', "application/json")

        def do_POST(self) -> None:
            request = self._record()
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": {"message": "not found"}}', "application/json")
                return
            response = fake._next(request)
            if response.delay and fake._stopping.wait(response.delay):
                return  # server stopping: drop the answer
            if response.raw_body is not None:
                self._send(
                    response.status, response.raw_body, response.content_type, response.headers
                )
                return
            completion = fake._completion(request, response)
            if request.body and request.body.get("stream") is True and response.status == 200:
                self._stream(request.body, completion, response)
                return
            body = json.dumps(completion).encode()
            if response.chunk_delay:
                self._trickle(response.status, body, response.chunk_delay)
                return
            self._send(response.status, body, "application/json", response.headers)

        def _trickle(self, status: int, body: bytes, delay: float) -> None:
            """Send ``body`` a few bytes at a time, ``delay`` seconds apart (a slow model)."""
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                for start in range(0, len(body), TRICKLE_BYTES):
                    self.wfile.write(body[start : start + TRICKLE_BYTES])
                    self.wfile.flush()
                    if fake._stopping.wait(delay):
                        return
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up on the slow answer

        def _stream(self, body: JSON, completion: JSON, response: FakeResponse) -> None:
            options = body.get("stream_options")
            with_usage = isinstance(options, dict) and options.get("include_usage") is True
            chunks = stream_chunks(completion, include_usage=with_usage)
            chunk_delay = response.chunk_delay
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                for chunk in chunks:
                    if (
                        chunk_delay
                        and chunk["choices"]
                        and "content" in chunk["choices"][0].get("delta", {})
                    ):
                        if fake._stopping.wait(chunk_delay):
                            return
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away mid-stream

    return Handler


def __getattr__(name: str) -> Any:
    """The Anthropic and Responses fakes, imported when first asked for."""
    if name in ("FakeAnthropicServer", "AnthropicResponse"):
        from engram import testing_anthropic

        return getattr(testing_anthropic, name)
    if name in ("FakeResponsesServer", "ScriptedOutput"):
        from engram import testing_responses

        return getattr(testing_responses, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
