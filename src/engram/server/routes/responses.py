"""``POST /v1/responses``: the OpenAI Responses API with Engram's memory.

The request is read as the chat request of a turn (:mod:`engram.proxy.responses`),
which runs on the chat route's path (:func:`~engram.server.routes.proxy.begin_turn`,
:func:`~engram.server.routes.proxy.answer_turn`): same session resolution,
keys, budget, alignment, retries, tool rounds and headers. The answer goes
back as a ``response`` object or as Responses events. ``store: false`` runs
the turn on a scratch: nothing of the call is stored. The upstream is spoken
to in chat completions, or in the Responses API when it speaks it
(``engram serve --upstream-responses``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator

from fastapi import Header, Request
from fastapi.responses import Response

from engram.aio import offload
from engram.idempotency import MAX_KEY_BYTES
from engram.models import JSON
from engram.proxy.budget import BUDGET_HEADER
from engram.proxy.checks import check_target
from engram.proxy.responses import (
    RESPONSE_ID,
    from_completion,
    new_response_id,
    parse_responses,
    response_events,
)
from engram.proxy.responses.thread import continued_answer, responses_target
from engram.proxy.responses.upstream import ResponsesEndpoint
from engram.proxy.responses.wire import upstream_request
from engram.proxy.stream import End
from engram.proxy.upstream import ModelEndpoint
from engram.server import documented
from engram.server.deps import CallerDep, EngramDep, v1_router
from engram.server.routes.proxy import (
    SINGLE_SYSTEM_HEADER,
    Asked,
    answer_turn,
    begin_turn,
    chat_upstream,
    own_scope,
    read_json,
)

router = v1_router("proxy")


@router.post(
    "/responses",
    summary="An OpenAI Responses call with Engram's memory",
    response_model=None,
    openapi_extra=documented.RESPONSES_REQUEST,
    responses={
        200: {
            "description": "A response object, or Responses events when streaming.",
            "content": {"application/json": {}, "text/event-stream": {}},
        }
    },
)
async def responses(
    request: Request,
    engram: EngramDep,
    caller: CallerDep,
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=MAX_KEY_BYTES),
    budget_header: str | None = Header(None, alias=BUDGET_HEADER, max_length=32),
    single_system: str | None = Header(None, alias=SINGLE_SYSTEM_HEADER, max_length=8),
) -> Response:
    """Read the items as the session's new messages, answer with its context, store the answer."""
    upstream = chat_upstream(request)
    body = await read_json(request)
    call = parse_responses(body)
    chat = call.chat
    endpoint: ModelEndpoint = upstream
    if upstream.settings.responses_api:  # the upstream takes Responses bodies itself
        chat, endpoint = upstream_request(body, chat), ResponsesEndpoint(upstream)
    target = responses_target(request.headers, body, call.previous_response_id)
    scope = target.scope or own_scope(caller)
    check_target(target, scope, request.headers)  # before the id that carries them is made
    response_id = new_response_id(scope, target.session)
    asked = Asked(idempotency_key, budget_header, single_system)
    turn, held = await begin_turn(
        request,
        engram,
        caller,
        target,
        chat,
        endpoint,
        asked,
        marks={RESPONSE_ID: response_id},
        store=call.store,
    )

    async def prepare() -> None:
        previous = call.previous_response_id
        if previous is None:
            return
        anchor = await offload(continued_answer, turn.session, previous)
        if anchor is not None:
            turn.request = dataclasses.replace(turn.request, new=[anchor, *turn.request.new])

    def shown_id() -> str:
        """The id of the answer shown: a retry gets the one its answer was given."""
        replay = turn.replay
        kept = replay.metadata.get(RESPONSE_ID) if replay is not None else None
        return kept if isinstance(kept, str) else response_id

    def as_json(completion: JSON) -> JSON:
        return from_completion(call, shown_id(), completion)

    def as_events(chunks: AsyncGenerator[JSON | End, None]) -> AsyncGenerator[bytes, None]:
        return response_events(call, shown_id(), chunks)

    return await answer_turn(turn, held, as_json=as_json, as_events=as_events, prepare=prepare)
