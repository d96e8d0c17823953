"""The OpenAI-compatible proxy: ``POST /v1/chat/completions`` and ``GET /v1/models``.

An OpenAI SDK pointed at ``http://host:8000/v1`` with an Engram key as its API
key gets Engram's memory (see :mod:`engram.proxy`). This module translates
and authorizes: it finds the session, checks the key may write its scope,
and hands the request to :class:`~engram.proxy.ProxyTurn`. Upstream errors
go back with the upstream's status and body (:func:`install`).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from engram.idempotency import MAX_KEY_BYTES
from engram.proxy import (
    InvalidRequest,
    ProxySettings,
    ProxyTurn,
    Upstream,
    UpstreamFailed,
    find_target,
    parse_request,
)
from engram.server.auth import Caller
from engram.server.deps import READ, CallerDep, EngramDep, v1_router
from engram.server.errors import NotReady

router = v1_router("proxy")

#: The scope of a request that names none, for a key that reaches several (or all).
DEFAULT_SCOPE = "default"


class NoUpstream(NotReady):
    """The server was started without an upstream model endpoint (503)."""


def install(app: FastAPI, settings: ProxySettings) -> None:
    """Give ``app`` its upstream and its error handler (the router is included by create_app)."""
    upstream = Upstream(settings)
    app.state.proxy = upstream
    app.add_exception_handler(UpstreamFailed, _upstream_failed)
    app.router.add_event_handler("shutdown", upstream.aclose)


@router.post(
    "/chat/completions",
    summary="An OpenAI chat completion with Engram's memory",
    response_model=None,
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
) -> Response:
    """Store the new messages, answer with the session's context, store the answer."""
    upstream = _upstream(request)
    body = await _json(request)
    target = find_target(request.headers, body)
    scope = target.scope or own_scope(caller)
    caller.require(scope, "write")
    chat = parse_request(body)
    turn = ProxyTurn(
        engram.session(target.session, scope),
        chat,
        upstream,
        upstream.settings,
        idempotency_key=idempotency_key,
    )
    if chat.stream:
        events = await turn.stream()
        return StreamingResponse(
            events, media_type="text/event-stream", headers=turn.report.headers()
        )
    return JSONResponse(await turn.complete(), headers=turn.report.headers())


@router.get("/models", summary="The upstream's models", response_model=None, openapi_extra=READ)
async def models(request: Request) -> Response:
    """The upstream's model list, as it answers it."""
    status, body, content_type = await _upstream(request).models()
    return Response(body, status_code=status, media_type=content_type)


def _upstream(request: Request) -> Upstream:
    upstream = getattr(request.app.state, "proxy", None)
    if not isinstance(upstream, Upstream):
        raise NoUpstream(
            "this server has no upstream model: start it with `engram serve --upstream URL` "
            "or set ENGRAM_LLM_BASE_URL"
        )
    return upstream


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except ValueError:
        raise InvalidRequest("the request body is not JSON", "body") from None
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", "body")
    return body


def own_scope(caller: Caller) -> str:
    """The scope of a request that names none: a one-scope key's scope, else ``default``."""
    visible = caller.visible()
    return visible[0] if visible is not None and len(visible) == 1 else DEFAULT_SCOPE


async def _upstream_failed(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, UpstreamFailed)
    return Response(exc.body, status_code=exc.status, media_type=exc.content_type)
