"""Messages: append one or a batch (OpenAI format), the history a page at a time, one by id."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Path, Query

from engram.aio import offload
from engram.errors import InvalidMessage
from engram.idempotency import MAX_KEY_BYTES
from engram.intake.checks import MAX_MESSAGE_ID
from engram.server import documented
from engram.server.boundary import on_session
from engram.server.convert import message_out, messages_out, one_message_error, receipt_out
from engram.server.deps import EngramDep, MetricsDep, ScopePath, SessionPath, v1_router
from engram.server.schemas import (
    AppendIn,
    AppendOut,
    MessageBatchIn,
    MessageOut,
    MessagePage,
    ReceiptOut,
)
from engram.server.settings import MAX_PAGE_SIZE

router = v1_router("messages")

MessageId = Annotated[int, Path(ge=1, le=MAX_MESSAGE_ID, description="A message id.")]
Rebuild = Annotated[
    bool,
    Query(
        description="Rebuild the summary, important data and memories that used the messages "
        "before answering (else the summary is rebuilt at the next turn)."
    ),
]


@router.post(
    "/scopes/{scope}/sessions/{session}/messages", response_model=AppendOut, status_code=201
)
async def append_messages(
    engram: EngramDep,
    metrics: MetricsDep,
    scope: ScopePath,
    session: SessionPath,
    body: AppendIn,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=MAX_KEY_BYTES,
            description="A retry with the same key stores nothing again and answers the "
            "messages the first attempt stored; the same key with other messages is 422.",
            json_schema_extra=documented.HEADER_KEY,
        ),
    ] = None,
) -> AppendOut:
    """Append one message object, or ``{"messages": [...]}`` in one transaction (all or none)."""
    if isinstance(body, MessageBatchIn):
        batch, policy = [m.to_library() for m in body.messages], body.policy
    else:
        batch, policy = [body.to_library()], None

    def append() -> AppendOut:
        handle = engram.session(session, scope, policy=policy)
        try:
            stored = handle.add_many(batch, idempotency_key=idempotency_key)
        except InvalidMessage as exc:
            if isinstance(body, MessageBatchIn):
                raise
            raise one_message_error(exc) from None
        return AppendOut(
            messages=messages_out(stored), count=len(stored), tokens=sum(m.tokens for m in stored)
        )

    out = await offload(append)
    metrics.messages_stored.inc(out.count)
    metrics.tokens_stored.inc(out.tokens)
    return out


@router.get("/scopes/{scope}/sessions/{session}/messages", response_model=MessagePage)
async def list_messages(
    engram: EngramDep,
    scope: ScopePath,
    session: SessionPath,
    after: Annotated[
        int | None, Query(ge=1, le=MAX_MESSAGE_ID, description="Last id seen.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 100,
) -> MessagePage:
    """The whole history, oldest first, a page at a time (``next_after`` continues it)."""
    page = await on_session(
        engram, scope, session, lambda handle: handle.messages(after_id=after, limit=limit)
    )
    return MessagePage(
        messages=messages_out(page), next_after=page[-1].id if len(page) == limit else None
    )


@router.get("/scopes/{scope}/messages/{message_id}", response_model=MessageOut)
async def get_message(engram: EngramDep, scope: ScopePath, message_id: MessageId) -> MessageOut:
    """One message by id, only if it belongs to this scope (else 404)."""
    return message_out(await offload(engram.message, message_id, scope))


@router.delete("/scopes/{scope}/messages/{message_id}", response_model=ReceiptOut)
async def delete_message(
    engram: EngramDep, scope: ScopePath, message_id: MessageId, rebuild: Rebuild = False
) -> ReceiptOut:
    """Forget one message (a tool call goes with its results) and what was made from it.

    The receipt lists the removed ids and each derived thing (summary, important
    data, agent state, tool cache, memories, vectors, index rows) with what
    happened to it; it is also written to the scope's audit trail.
    """
    receipt = await offload(engram.delete_message, message_id, scope, rebuild=rebuild)
    return receipt_out(receipt)


@router.delete("/scopes/{scope}/sessions/{session}/messages", response_model=ReceiptOut)
async def clear_session(
    engram: EngramDep, scope: ScopePath, session: SessionPath, rebuild: Rebuild = False
) -> ReceiptOut:
    """Forget every message and state of a session (it stays, empty, with its policy)."""
    receipt = await on_session(engram, scope, session, lambda s: s.clear(rebuild=rebuild))
    return receipt_out(receipt)
