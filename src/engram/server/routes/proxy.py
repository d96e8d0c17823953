"""The OpenAI-compatible proxy: ``POST /v1/chat/completions`` and ``GET /v1/models``.

An OpenAI SDK pointed at ``http://host:8000/v1`` with an Engram key as its API
key gets Engram's memory (see :mod:`engram.proxy`). This module translates
and authorizes: it finds the session, checks the key may write its scope,
reads the request's budget, waits for the session's turn, and hands the
request to :class:`~engram.proxy.ProxyTurn`. Upstream errors go back with the
upstream's status, body (credentials redacted) and rate-limit headers
(:func:`install`).

:func:`begin_turn` and :func:`answer_turn` are that path for every front: the
Responses and Messages routes call them with their own request and shapes.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from engram.engine import Engram
from engram.idempotency import MAX_KEY_BYTES
from engram.models import JSON
from engram.proxy import (
    ChatRequest,
    InvalidRequest,
    ProxySettings,
    ProxyTurn,
    Target,
    Upstream,
    UpstreamFailed,
    find_target,
    parse_request,
)
from engram.proxy.anthropic import AnthropicUpstream
from engram.proxy.budget import BUDGET_HEADER, resolve
from engram.proxy.checks import check_target, read_body
from engram.proxy.plan import Retry
from engram.proxy.redact import redact
from engram.proxy.scratch import Scratch
from engram.proxy.serial import Held, SessionTurns
from engram.proxy.stream import End, encode
from engram.proxy.upstream import ModelEndpoint
from engram.server import documented
from engram.server.auth import Caller
from engram.server.deps import READ, CallerDep, EngramDep, v1_router
from engram.server.errors import NotReady

router = v1_router("proxy")

#: The scope of a request that names none, for a key that reaches several (or all).
DEFAULT_SCOPE = "default"
#: Request header asking for one system message (``true``/``false``; default: the server's).
SINGLE_SYSTEM_HEADER = "X-Engram-Single-System"
#: Header the official SDKs send with each attempt: 0 on the first, 1 on the first retry...
RETRY_COUNT_HEADER = "x-stainless-retry-count"


class NoUpstream(NotReady):
    """The server was started without an upstream model endpoint (503)."""


def install(
    app: FastAPI, settings: ProxySettings | None, anthropic: ProxySettings | None = None
) -> None:
    """Give ``app`` its upstreams and the error handler (the routers are included by create_app).

    ``settings`` is the chat-completions upstream (``/v1/chat/completions``,
    ``/v1/responses``), ``anthropic`` the Anthropic-format one (``/v1/messages``).
    """
    if settings is not None:
        upstream = Upstream(settings)
        app.state.proxy = upstream
        app.router.add_event_handler("shutdown", upstream.aclose)
    if anthropic is not None:
        messages = AnthropicUpstream(anthropic)
        app.state.anthropic = messages
        app.router.add_event_handler("shutdown", messages.aclose)
    app.state.proxy_turns = SessionTurns()
    app.add_exception_handler(UpstreamFailed, _upstream_failed)


@router.post(
    "/chat/completions",
    summary="An OpenAI chat completion with Engram's memory",
    response_model=None,
    openapi_extra=documented.CHAT_REQUEST,
    responses={
        200: {
            "description": "A chat completion, or server-sent events when streaming.",
            "content": {"application/json": {}, "text/event-stream": {}},
        }
    },
)
async def chat_completions(
    request: Request,
    engram: EngramDep,
    caller: CallerDep,
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=MAX_KEY_BYTES),
    budget_header: str | None = Header(None, alias=BUDGET_HEADER, max_length=32),
    single_system: str | None = Header(None, alias=SINGLE_SYSTEM_HEADER, max_length=8),
) -> Response:
    """Align the messages with the session, answer with its context, store the answer."""
    upstream = chat_upstream(request)
    body = await read_json(request)  # all of it checked before the first write
    target = find_target(request.headers, body)
    chat = parse_request(body)
    asked = Asked(idempotency_key, budget_header, single_system)
    turn, held = await begin_turn(request, engram, caller, target, chat, upstream, asked)
    return await answer_turn(turn, held, as_json=lambda completion: completion, as_events=encode)


@dataclass(frozen=True, slots=True)
class Asked:
    """What a proxied request asks of Engram in its headers."""

    idempotency_key: str | None
    budget: str | None
    single_system: str | None


async def begin_turn(
    request: Request,
    engram: Engram,
    caller: Caller,
    target: Target,
    chat: ChatRequest,
    upstream: ModelEndpoint,
    asked: Asked,
    *,
    marks: JSON | None = None,
    store: bool = True,
) -> tuple[ProxyTurn, Held]:
    """Authorize a proxied request, set up its turn, and wait for its session (every front).

    ``marks`` go to the stored answer; with ``store`` False the turn stores nothing.
    """
    settings = upstream.settings
    scope = target.scope or own_scope(caller)
    check_target(target, scope, request.headers)
    caller.require(scope, "write")
    retry = Retry(
        key=asked.idempotency_key or None,
        window=settings.retry_window,
        first_attempt=request.headers.get(RETRY_COUNT_HEADER) == "0",
    )
    session = engram.session(target.session, scope)
    turn = ProxyTurn(
        session,
        chat,
        upstream,
        settings,
        retry,
        resolve(asked.budget, settings.budget, chat.model),
        single_system=_flag(asked.single_system, settings.single_system),
        marks=dict(marks or {}),
        scratch=None if store else Scratch(session),
    )
    turn.sizes().check_room()  # before waiting for the session: nothing to wait for
    turns: SessionTurns = request.app.state.proxy_turns
    wait = settings.timeout * settings.max_rounds + WAIT_MARGIN
    held = await turns.hold(engram.store, scope, target.session, wait=wait)
    return turn, held


async def answer_turn(
    turn: ProxyTurn,
    held: Held,
    *,
    as_json: Callable[[JSON], JSON],
    as_events: Callable[[AsyncGenerator[JSON | End, None]], AsyncGenerator[bytes, None]],
    prepare: Callable[[], Awaitable[None]] | None = None,
) -> Response:
    """Run a held turn and answer in the front's format; the session is released at the end.

    ``as_json`` shapes the chat completion, ``as_events`` the streamed chunks;
    ``prepare`` runs first, while the session is held.
    """
    streaming = False
    try:
        if prepare is not None:
            await prepare()
        if turn.request.stream:
            events = as_events(await turn.chunks())
            streaming = True  # from here the stream releases the session when it ends
            return TurnStream(events, held, headers=turn.report.headers())
        return JSONResponse(as_json(await turn.complete()), headers=turn.report.headers())
    finally:
        if not streaming:
            await held.release()


@router.get("/models", summary="The upstream's models", response_model=None, openapi_extra=READ)
async def models(request: Request) -> Response:
    """The upstream's model list, as it answers it (an error's credentials redacted)."""
    upstream = chat_upstream(request)
    status, body, content_type = await upstream.models()
    if status >= 400:
        body = redact(body, [upstream.settings.api_key])
    return Response(body, status_code=status, media_type=content_type)


#: Seconds a request waits for its session beyond the longest a turn may take.
WAIT_MARGIN = 30.0


class TurnStream(StreamingResponse):
    """A streamed answer that gives its session to the next request once it is stored.

    However the response ends (finished, client gone before or during the
    stream), the events are closed first (a cut answer is stored then), and
    the session's turn released after.
    """

    def __init__(
        self, events: AsyncGenerator[bytes, None], held: Held, headers: dict[str, str]
    ) -> None:
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self._events = events
        self._held = held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream the events, then close them and release the session, whatever happened."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self._events.aclose()
                finally:
                    await self._held.release()


def _flag(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise InvalidRequest(f"{SINGLE_SYSTEM_HEADER} must be true or false", SINGLE_SYSTEM_HEADER)


def chat_upstream(request: Request) -> Upstream:
    """The app's chat-completions upstream.

    Raises:
        NoUpstream: the server was started without one.
    """
    upstream = getattr(request.app.state, "proxy", None)
    if not isinstance(upstream, Upstream):
        raise NoUpstream(
            "this server has no upstream model: start it with `engram serve --upstream URL` "
            "or set ENGRAM_LLM_BASE_URL"
        )
    return upstream


async def read_json(request: Request) -> dict[str, Any]:
    """The request's body: a JSON object checked all through (:func:`.checks.read_body`).

    Raises:
        InvalidRequest: naming ``body`` or the path of the value at fault.
    """
    return read_body(await request.body())


def own_scope(caller: Caller) -> str:
    """The scope of a request that names none: a one-scope key's scope, else ``default``."""
    visible = caller.visible()
    return visible[0] if visible is not None and len(visible) == 1 else DEFAULT_SCOPE


async def _upstream_failed(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, UpstreamFailed)
    state = request.app.state
    keys = [
        upstream.settings.api_key
        for upstream in (getattr(state, "proxy", None), getattr(state, "anthropic", None))
        if upstream is not None
    ]
    return Response(
        redact(exc.body, keys),
        status_code=exc.status,
        media_type=exc.content_type,
        headers=exc.headers,
    )
