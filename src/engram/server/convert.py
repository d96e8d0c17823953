"""Library values to HTTP shapes (:mod:`engram.server.schemas`): translation only."""

from __future__ import annotations

from engram.compaction.cycle import CompactionResult
from engram.context import Context
from engram.errors import InvalidMessage
from engram.models import MemoryRecord, Message, SearchHit, SessionInfo
from engram.receipts import Receipt
from engram.scopes import ScopeSummary
from engram.server.schemas import (
    CompactOut,
    ContextOut,
    MemoryOut,
    MessageOut,
    OmissionOut,
    ReceiptOut,
    ScopeOut,
    SearchHitOut,
    SectionOut,
    SessionOut,
)


def one_message_error(exc: InvalidMessage) -> InvalidMessage:
    """A refusal of the one-message append form, said of that message, not of a batch item.

    The library checks it as the batch ``[message]``: ``message #0: role: ...``
    with field ``messages[0].role`` becomes ``role: ...`` with field ``role``.
    """
    text = str(exc).removeprefix("message #0: ")
    field = exc.field or ""
    field = field.removeprefix("messages[0].") if field != "messages[0]" else ""
    return InvalidMessage(text, field=field or None)


def receipt_out(receipt: Receipt) -> ReceiptOut:
    """A deletion's receipt (no message text, ever)."""
    return ReceiptOut.model_validate(receipt.to_dict())


def message_out(message: Message) -> MessageOut:
    """A stored message: its JSON as :meth:`Message.to_dict` writes it."""
    return MessageOut.model_validate(message.to_dict())


def messages_out(messages: list[Message]) -> list[MessageOut]:
    """Stored messages, in the order given."""
    return [message_out(m) for m in messages]


def hit_out(hit: SearchHit) -> SearchHitOut:
    """A search hit."""
    partner = message_out(hit.partner) if hit.partner is not None else None
    return SearchHitOut(
        message=message_out(hit.message),
        score=hit.score,
        snippet=hit.snippet,
        partner=partner,
        partner_snippet=hit.partner_snippet if partner is not None else None,
    )


def session_out(info: SessionInfo) -> SessionOut:
    """A session and its totals."""
    return SessionOut(
        scope=info.scope,
        session=info.id,
        created_at=info.created_at,
        updated_at=info.updated_at,
        messages=info.message_count,
        tokens=info.token_count,
        first_message_at=info.first_message_at,
        last_message_at=info.last_message_at,
        policy=info.policy,
    )


def scope_out(summary: ScopeSummary) -> ScopeOut:
    """A scope and its totals."""
    return ScopeOut(
        scope=summary.name,
        sessions=summary.sessions,
        messages=summary.messages,
        tokens=summary.tokens,
        memories=summary.memories,
        last_activity=summary.last_activity,
    )


def memory_out(record: MemoryRecord) -> MemoryOut:
    """A memory, with the admin memory API's field names."""
    return MemoryOut(
        id=record.id,
        content=record.content,
        createdAt=record.created_at,
        updatedAt=record.updated_at,
        sourceSession=record.source_session,
        metadata=dict(record.metadata),
    )


def context_out(context: Context) -> ContextOut:
    """The prompt, with each section's exact tokens (as the builder counted them)."""
    sized = [
        SectionOut(title=title, tokens=tokens)
        for title, tokens in zip(context.sections, context.section_tokens, strict=True)
    ]
    data = context.to_dict()
    return ContextOut(
        messages=data["messages"],
        tokens=context.tokens,
        budget=context.budget,
        reserve=context.reserve,
        message_ids=list(context.message_ids),
        omitted=[OmissionOut(**o.to_dict()) for o in context.omitted],
        sections=sized,
        truncated_ids=list(context.truncated_ids),
        counter=context.counter,
        exact=context.exact,
        policy=context.policy,
        notes=list(context.notes),
        pending_compaction=context.pending_compaction,
        degraded=context.degraded,
    )


def compact_out(result: CompactionResult) -> CompactOut:
    """What one compaction cycle did."""
    return CompactOut(
        committed=result.committed,
        reason=result.reason,
        watermark=result.watermark,
        version=result.version,
        summary_version=result.summary_version,
        folded=result.folded,
        degraded=result.degraded,
        notes=list(result.notes),
    )
