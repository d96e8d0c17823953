"""OpenTelemetry spans for Engram's central operations (extra: ``otel``).

Spans follow the OpenTelemetry GenAI semantic conventions:

* ``chat {model}`` (kind CLIENT) for every model call Engram makes:
  ``gen_ai.operation.name`` = ``chat``, ``gen_ai.provider.name``,
  ``gen_ai.request.model``, ``gen_ai.conversation.id`` (the session),
  ``gen_ai.response.model``, ``gen_ai.response.finish_reasons``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` /
  ``cache_read.input_tokens``, ``server.address`` / ``server.port``;
* memory operations named after ``gen_ai.operation.name``: ``search_memory``
  (a search of a scope's history), ``upsert_memory`` (a memory written, which
  Engram may merge or find repeated), ``update_memory``, ``delete_memory``,
  ``create_memory_store`` (a store opened), with ``gen_ai.memory.store.id``
  (the scope, or the store's URL), ``gen_ai.memory.record.id`` and
  ``gen_ai.memory.record.count``;
* Engram's own, under ``engram.*``: ``engram.context`` (``engram.budget``,
  ``engram.prompt_tokens``, ``engram.cacheable_share``: the share of the
  prompt before the current turn, the prefix a provider's cache can reuse)
  and ``engram.compaction`` (``engram.compaction.committed``, ``.reason``,
  ``.folded``, ``.degraded``).

Content (messages, queries, memory texts) is recorded only when the user opts
in: :func:`capture_content` or the conventional environment variable
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

Cost: Engram never imports OpenTelemetry itself. Spans start once the
application has imported ``opentelemetry.trace`` (any tracing setup does) or
called :func:`use`; until then each instrumented call pays one dictionary
look-up and gets a shared no-op span. A tracer without an SDK records
nothing, and then no attribute is even computed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "CAPTURE_ENV",
    "SpanRecorder",
    "capture_content",
    "content_captured",
    "conversation",
    "span",
    "use",
]

#: The GenAI conventions' opt-in for recording message content.
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_TRACE_MODULE = "opentelemetry.trace"
_SCOPE_NAME = "engram"

_tracer: Any = None
_capture: bool | None = None
#: The session of the work under way, for the model calls it makes: ``(scope, session)``.
_conversation: ContextVar[tuple[str, str] | None] = ContextVar("engram_conversation", default=None)


def use(tracer_provider: Any = None) -> None:
    """Trace with ``tracer_provider`` (default: OpenTelemetry's global provider).

    Not needed when the application configures OpenTelemetry globally before
    Engram's first operation; useful to trace Engram apart (tests, a private
    exporter).

    Raises:
        ImportError: the ``otel`` extra is not installed.

    """
    global _tracer
    from opentelemetry import trace

    from engram import __version__

    provider = tracer_provider or trace.get_tracer_provider()
    _tracer = provider.get_tracer(_SCOPE_NAME, __version__)


def capture_content(enabled: bool = True) -> None:
    """Record message content, queries and memory texts on spans (off by default)."""
    global _capture
    _capture = enabled


def content_captured() -> bool:
    """Whether content is recorded: :func:`capture_content`, else the environment's opt-in."""
    if _capture is not None:
        return _capture
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def conversation(scope: str, session: str) -> AbstractContextManager[None]:
    """Name the session the model calls inside belong to (``gen_ai.conversation.id``)."""
    if _active_tracer() is None:
        return _UNTRACED
    return _named(scope, session)


@contextmanager
def _named(scope: str, session: str) -> Iterator[None]:
    token = _conversation.set((scope, session))
    try:
        yield
    finally:
        _conversation.reset(token)


_UNTRACED = nullcontext()


def current_conversation() -> tuple[str, str] | None:
    """The ``(scope, session)`` set by the innermost :func:`conversation`, if any."""
    return _conversation.get()


def _active_tracer() -> Any:
    """The tracer, once OpenTelemetry is in the process; else None (the fast path)."""
    global _tracer
    if _tracer is None:
        trace = sys.modules.get(_TRACE_MODULE)
        if trace is None:
            return None
        from engram import __version__

        _tracer = trace.get_tracer(_SCOPE_NAME, __version__)
    return _tracer


class SpanRecorder:
    """One span under way; the shared no-op one when nothing is traced."""

    __slots__ = ("_detached", "_manager", "_span", "recording")

    def __init__(self, manager: Any = None, *, detached: Any = None) -> None:
        self._manager = manager
        self._detached = detached  # a started span that is not the current one
        self._span: Any = None
        self.recording = False

    def __enter__(self) -> SpanRecorder:
        if self._manager is not None:
            self._span = self._manager.__enter__()
        elif self._detached is not None:
            self._span = self._detached
        if self._span is not None:
            self.recording = bool(self._span.is_recording())
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if self._span is None:
            return None
        if isinstance(error, GeneratorExit):  # a stream the caller stopped reading: no error
            kind = error = tb = None
        if error is not None and self.recording:
            self._span.set_attribute("error.type", type(error).__qualname__)
        if self._manager is None:  # detached: end it here, saying how it failed
            if error is not None:
                self._span.record_exception(error)
                status = sys.modules[_TRACE_MODULE].Status
                self._span.set_status(status(sys.modules[_TRACE_MODULE].StatusCode.ERROR))
            self._span.end()
            self._span = self._detached = None
            return None
        manager, self._manager, self._span = self._manager, None, None
        return bool(manager.__exit__(kind, error, tb))

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Set the attributes that have a value (None is skipped; JSON for structures)."""
        if not self.recording:
            return
        for key, value in attributes.items():
            if value is None:
                continue
            if isinstance(value, Mapping) or (
                isinstance(value, Sequence) and not isinstance(value, str) and _nested(value)
            ):
                value = json.dumps(value, ensure_ascii=False, default=str)
            self._span.set_attribute(key, value)

    def content(self, attributes: Mapping[str, Any]) -> None:
        """Set content attributes, only when the user opted in."""
        if self.recording and content_captured():
            self.set(attributes)


_NOOP = SpanRecorder()


def span(
    name: str, attributes: Mapping[str, Any], *, client: bool = False, detached: bool = False
) -> SpanRecorder:
    """A span to enter with ``with``: named ``name``, with ``attributes`` set at its start.

    ``client`` makes it a CLIENT span (a call to another process); else INTERNAL.
    ``detached`` does not make it the current span (an async generator's span: the
    context it would set cannot follow the generator across its yields). The session
    named by :func:`conversation` is added as ``gen_ai.conversation.id``.
    """
    tracer = _active_tracer()
    if tracer is None:
        return _NOOP
    trace = sys.modules[_TRACE_MODULE]
    kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
    start = {k: v for k, v in attributes.items() if v is not None}
    current = _conversation.get()
    if current is not None and "gen_ai.conversation.id" not in start:
        start["gen_ai.conversation.id"] = current[1]
        start.setdefault("engram.scope", current[0])
    if detached:
        return SpanRecorder(detached=tracer.start_span(name, kind=kind, attributes=start))
    return SpanRecorder(tracer.start_as_current_span(name, kind=kind, attributes=start))


def _nested(value: Sequence[Any]) -> bool:
    return any(not isinstance(v, str | int | float | bool) for v in value)


# -- the conventions' shapes ----------------------------------------------------------

_PROVIDERS = {
    "api.openai.com": "openai",
    "api.x.ai": "x_ai",
    "api.anthropic.com": "anthropic",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.perplexity.ai": "perplexity",
    "generativelanguage.googleapis.com": "gcp.gemini",
}


def server(base_url: str | None) -> dict[str, Any]:
    """``gen_ai.provider.name``, ``server.address`` and ``server.port`` of a base URL."""
    parts = urlsplit(base_url or "https://api.openai.com/v1")
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    # An OpenAI-compatible server of unknown make speaks OpenAI's API.
    return {
        "gen_ai.provider.name": _PROVIDERS.get(host, "openai"),
        "server.address": host,
        "server.port": port,
    }


def input_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages in the conventions' ``gen_ai.input.messages`` form (role and parts)."""
    out = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        content = message.get("content")
        if isinstance(content, str) and content:
            parts.append({"type": "text", "content": content})
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") == "text":
                    parts.append({"type": "text", "content": part.get("text", "")})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
        if message.get("role") == "tool":
            answer = {"type": "tool_call_response", "result": content}
            parts = [{**answer, "id": message.get("tool_call_id")}]
        out.append({"role": message.get("role"), "parts": parts})
    return out


def chat_span(
    model: str,
    base_url: str | None,
    request: Mapping[str, Any],
    purpose: str,
    *,
    detached: bool = False,
) -> SpanRecorder:
    """The span of one model call (chat completions), retries included."""
    if _active_tracer() is None:
        return _NOOP
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        **server(base_url),
        "gen_ai.request.max_tokens": request.get("max_tokens"),
        "gen_ai.request.temperature": request.get("temperature"),
        "gen_ai.request.stream": bool(request.get("stream")),
        "gen_ai.output.type": "json" if request.get("response_format") else "text",
        "engram.purpose": purpose,
    }
    return span(f"chat {model}", attributes, client=True, detached=detached)


def chat_result(
    recorder: SpanRecorder,
    result: Any,
    messages: Sequence[Mapping[str, Any]],
    response: Any = None,
) -> None:
    """Record an answer (an ``LLMResult``) on its chat span; content only if opted in."""
    if not recorder.recording:
        return
    details = getattr(getattr(response, "usage", None), "prompt_tokens_details", None)
    recorder.set(
        {
            "gen_ai.response.model": result.model,
            "gen_ai.response.id": getattr(response, "id", None),
            "gen_ai.response.finish_reasons": [result.finish_reason or "stop"],
            "gen_ai.usage.input_tokens": result.input_tokens,
            "gen_ai.usage.output_tokens": result.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": getattr(details, "cached_tokens", None),
            "engram.usage.estimated": result.usage_estimated,
            "engram.cost_usd": result.cost_usd,
        }
    )
    answer: dict[str, Any] = {"role": "assistant", "content": result.text}
    if result.tool_calls:
        answer["tool_calls"] = result.tool_calls
    output = input_messages([answer])[0] | {"finish_reason": result.finish_reason or "stop"}
    recorder.content(
        {"gen_ai.input.messages": input_messages(messages), "gen_ai.output.messages": [output]}
    )


def context_span(scope: str, session: str, policy: str, budget: int, model: str | None) -> Any:
    """The span of one prompt build (``engram.context``)."""
    if _active_tracer() is None:
        return _NOOP
    attributes = {
        "gen_ai.conversation.id": session,
        "engram.scope": scope,
        "engram.policy": policy,
        "engram.budget": budget,
        "gen_ai.request.model": model,
    }
    return span("engram.context", attributes)


def context_result(recorder: SpanRecorder, ctx: Any, cacheable_tokens: Any) -> None:
    """Record a built prompt: its size and the share a provider's cache can reuse.

    ``cacheable_tokens`` is called (only when recording) for the tokens before the
    current turn.
    """
    if not recorder.recording:
        return
    share = cacheable_tokens() / ctx.tokens if ctx.tokens else 0.0
    recorder.set(
        {
            "engram.prompt_tokens": ctx.tokens,
            "engram.reserve": ctx.reserve,
            "engram.messages": len(ctx.message_ids),
            "engram.cacheable_share": round(share, 4),
            "engram.truncated": len(ctx.truncated_ids),
            "engram.pending_compaction": ctx.pending_compaction,
            "engram.degraded": ctx.degraded,
            "engram.sections": list(ctx.sections),
        }
    )


def memory_span(operation: str, store: str | None, **attributes: Any) -> SpanRecorder:
    """The span of a memory operation (``search_memory``, ``upsert_memory``, ...)."""
    if _active_tracer() is None:
        return _NOOP
    start = {
        "gen_ai.operation.name": operation,
        "gen_ai.memory.store.id": store,
        **{_MEMORY_KEYS.get(k, k): v for k, v in attributes.items()},
    }
    return span(operation, start)


_MEMORY_KEYS = {
    "record": "gen_ai.memory.record.id",
    "count": "gen_ai.memory.record.count",
    "session": "gen_ai.conversation.id",
}


def memory_written(recorder: SpanRecorder, memory: Any, status: str | None = None) -> None:
    """Record the memory a write left (id, Engram's outcome; its text only if opted in)."""
    if not recorder.recording:
        return
    recorder.set({"gen_ai.memory.record.id": str(memory.id), "engram.memory.status": status})
    recorder.content({"gen_ai.memory.records": [{"id": str(memory.id), "content": memory.content}]})
