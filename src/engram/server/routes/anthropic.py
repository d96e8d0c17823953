"""``POST /v1/messages``: Anthropic's Messages API with Engram's memory.

The request is read as the chat request of a turn (:mod:`engram.proxy.anthropic`),
which runs on the chat route's path (:func:`~engram.server.routes.proxy.begin_turn`,
:func:`~engram.server.routes.proxy.answer_turn`): same session resolution,
keys, budget, alignment, retries, tool rounds and headers, the upstream
spoken to in Anthropic's format with the client's own credential and
``anthropic-version`` (never the Engram key it authenticated with). The
session comes from ``X-Engram-Session`` (with ``X-Engram-Scope``), else
``metadata.session_id``, else ``metadata.user_id``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

from fastapi import Header, Request
from fastapi.responses import Response

from engram.idempotency import MAX_KEY_BYTES
from engram.models import JSON
from engram.proxy.anthropic import (
    AnthropicUpstream,
    anthropic_message,
    message_events,
    parse_messages,
)
from engram.proxy.budget import BUDGET_HEADER
from engram.proxy.stream import End
from engram.proxy.target import find_target
from engram.server import documented
from engram.server.deps import CallerDep, EngramDep, v1_router
from engram.server.routes.proxy import (
    SINGLE_SYSTEM_HEADER,
    Asked,
    NoUpstream,
    answer_turn,
    begin_turn,
    read_json,
)

router = v1_router("proxy")


@router.post(
    "/messages",
    summary="An Anthropic Messages call with Engram's memory",
    response_model=None,
    openapi_extra=documented.MESSAGES_REQUEST,
    responses={
        200: {
            "description": "A message, or Anthropic's events when streaming.",
            "content": {"application/json": {}, "text/event-stream": {}},
        }
    },
)
async def messages(
    request: Request,
    engram: EngramDep,
    caller: CallerDep,
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=MAX_KEY_BYTES),
    budget_header: str | None = Header(None, alias=BUDGET_HEADER, max_length=32),
    single_system: str | None = Header(None, alias=SINGLE_SYSTEM_HEADER, max_length=8),
) -> Response:
    """Read the messages as the session's new ones, answer with its context, store the answer."""
    upstream = _anthropic(request)
    body = await read_json(request)
    chat = parse_messages(body)
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    carried = {"metadata": metadata, "user": metadata.get("user_id")}
    target = find_target(request.headers, carried, user_field="metadata.user_id")
    asked = Asked(idempotency_key, budget_header, single_system)
    call = upstream.call(request.headers, bearer_is_engrams=caller.key is not None)
    turn, held = await begin_turn(request, engram, caller, target, chat, call, asked)

    def as_events(chunks: AsyncGenerator[JSON | End, None]) -> AsyncGenerator[bytes, None]:
        return message_events(chat.model, chunks)

    return await answer_turn(turn, held, as_json=anthropic_message, as_events=as_events)


def _anthropic(request: Request) -> AnthropicUpstream:
    upstream = getattr(request.app.state, "anthropic", None)
    if not isinstance(upstream, AnthropicUpstream):
        raise NoUpstream(
            "this server has no Anthropic-format upstream: start it with "
            "`engram serve --anthropic-upstream URL` or set ENGRAM_ANTHROPIC_BASE_URL"
        )
    return upstream
