"""Ending a conversation: record the end, then remember it (long-term memories).

:func:`begin_end` records the end at once (session state of kind
:data:`LIFECYCLE_KIND`: ``{"ended_at", "reason", "last_message_id", "ends"}``,
saved by compare-and-set); a scheduler of :mod:`engram.background` then runs
:func:`remember` off the caller's path. On any failure :func:`remember` logs,
audits and skips: the session has ended all the same. A session ended again
without new messages is not remembered twice. Work a scheduler cannot take
is deferred (:func:`defer`: persisted as pending, done by
``Memories.run_deferred``), never dropped.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from engram.errors import Contention, InvalidQuery, StoreError
from engram.intake.checks import MAX_CONTENT_BYTES, text_field
from engram.memories.records import Outcome
from engram.memories.service import Memories
from engram.models import JSON
from engram.statedoc import compare_and_set

logger = logging.getLogger("engram.memories")

#: Session state kind recording that (and why) a conversation ended.
LIFECYCLE_KIND = "lifecycle"
#: Longest end reason kept, in characters.
MAX_REASON_CHARS = 200
#: Compare-and-set attempts when recording the end.
CAS_ATTEMPTS = 5


def begin_end(memories: Memories, session: str, reason: str) -> Outcome | None:
    """Check and record the end of ``session``: None when its memory should now be written.

    Returns a "skipped" outcome when the session has no messages in this scope
    (it was never written: nothing is recorded) or nothing new happened since
    the last end.

    Raises:
        InvalidQuery: the reason is not text.

    """
    if not isinstance(reason, str):
        raise InvalidQuery(f"end reason must be text, got {type(reason).__name__}")
    text_field("end reason", reason, max_bytes=MAX_CONTENT_BYTES, error=InvalidQuery)
    store, scope = memories.store, memories.scope
    try:
        if store.get_session(scope, session) is None:
            return Outcome("skipped", scope, session, detail="the session has no messages")
        if not mark_ended(memories, session, reason):
            return Outcome("skipped", scope, session, detail="no new messages since the last end")
    except StoreError as exc:
        # A full disk or a lost database must not raise in the caller's thread.
        logger.error("could not record the end of %s/%s: %s", scope, session, exc)
        return Outcome("failed", scope, session, detail=f"the end could not be recorded: {exc}")
    return None


def mark_ended(memories: Memories, session: str, reason: str) -> bool:
    """Record the end in the lifecycle state; True when there is something new to remember."""
    store, scope = memories.store, memories.scope
    newest = store.tail(scope, session, limit=1)
    last_id = newest[-1].id if newest else None
    fresh = False

    def load() -> tuple[JSON, int]:
        current = store.load_state(scope, session, LIFECYCLE_KIND)
        return (dict(current.data), current.version) if current is not None else ({}, 0)

    def ended(data: JSON) -> JSON:
        nonlocal fresh
        fresh = last_id is not None and data.get("last_message_id") != last_id
        return {
            **data,
            "ended_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "reason": reason[:MAX_REASON_CHARS],
            "last_message_id": last_id,
            "ends": int(data.get("ends", 0)) + 1,
        }

    def save(data: JSON, version: int) -> bool:
        return (
            store.save_state(scope, session, LIFECYCLE_KIND, data, expected_version=version)
            is not None
        )

    try:
        compare_and_set(load, ended, save, what=f"end of {scope}/{session}", attempts=CAS_ATTEMPTS)
    except Contention:
        return False  # other writers keep ending it at the same time: one of them remembers it
    return fresh


def remember(memories: Memories, session: str, reason: str) -> Outcome:
    """Create the memory of an ended session; any failure is logged and skipped."""
    try:
        return memories.create_from_session(session, reason=reason)
    except Exception as exc:
        # A memory is a quality-of-life feature: never crash the caller.
        logger.exception("memory creation failed for session %s of %s", session, memories.scope)
        memories.metrics.incr("memory_creation_failures")
        try:
            memories.store.add_audit(
                memories.scope,
                {"event": "create_failed", "session": session, "error": str(exc)[:500]},
            )
        except StoreError:
            logger.exception("could not audit the failed memory creation of %s", session)
        return Outcome("failed", memories.scope, session, detail=str(exc))


def defer(memories: Memories, session: str, why: str) -> Outcome:
    """Persist the end as pending memory work (``Memories.run_deferred`` does it later)."""
    try:
        memories.budget.defer(memories.store, memories.scope, session, why)
    except StoreError as exc:
        logger.error("could not defer the memory of session %s: %s", session, exc)
        return Outcome("failed", memories.scope, session, detail=str(exc))
    memories.metrics.incr("deferred")
    return Outcome("deferred", memories.scope, session, detail=why)
