"""Writing parsed import files into a scope: every session checked first, nothing written twice.

:func:`ingest` takes the batches :mod:`engram.transfer.importers` read and

1. reads each message's stable **import key** (given by the parser, kept in
   its metadata as ``import_key``: see :func:`engram.transfer.importers.import_key`);
2. leaves out the messages whose key the session already holds, so importing
   the same file again (ChatGPT exports are cumulative) adds only what is new;
3. validates every remaining message of every session exactly as
   ``Session.add_many`` will, before the first write: a refused message stops
   the import with nothing written;
4. writes every session as one group: one transaction on SQLite and
   PostgreSQL; on jsondir and the in-memory store, a failure deletes what the
   group wrote. A *storage* failure midway (disk full, lost connection) leaves
   no session of the import, and running it again imports everything.

The messages checked in step 3 are written as they are (not checked again),
:data:`WRITE_CHUNK` at a time: each part is one append (its tokens counted
at once, its index entries written in one statement) and moves the
progress bar, so a long session shows progress too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engram.engine import Engram
from engram.errors import InvalidMessage
from engram.models import NewMessage
from engram.session import Session
from engram.store.grouping import all_or_nothing
from engram.transfer.importers import IMPORT_KEY, ImportBatch

#: Messages written per append: large enough for batched counting and indexing,
#: small enough that a long session moves the progress bar.
WRITE_CHUNK = 2_000


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What an import did."""

    sessions: int
    new: int
    skipped: int
    tokens: int


def ingest(
    mem: Engram,
    scope: str,
    batches: list[ImportBatch],
    *,
    advance: Callable[[int], Any] = lambda _n: None,
) -> IngestReport:
    """Import ``batches`` into ``scope`` idempotently: all of it, or nothing.

    Every message is checked before the first write, and the writes of all
    sessions are one group (:func:`engram.store.grouping.all_or_nothing`): a
    storage failure midway leaves none of them, and a re-run imports everything.

    Raises:
        InvalidMessage: a message the store would refuse (named by session and position).
        StoreError: the store failed; nothing of the import was kept.

    """
    plans: list[tuple[Session, list[NewMessage], int]] = []
    for batch in batches:
        session = mem.session(batch.session, scope=scope)
        keyed = batch.messages
        known = _stored_keys(session)
        fresh = [m for m in keyed if (m.get("metadata") or {}).get(IMPORT_KEY) not in known]
        try:
            checked = session.check_many(fresh)
        except InvalidMessage as exc:
            raise InvalidMessage(f"session {batch.session!r}: {exc}") from None
        plans.append((session, checked, len(keyed) - len(fresh)))
    new = tokens = 0
    with all_or_nothing(mem.store) as group:  # a failure midway leaves no session written
        for session, checked, skipped in plans:
            if checked:
                group.touch(scope, session.id)
            advance(skipped)
            for start in range(0, len(checked), WRITE_CHUNK):
                stored = session.add_checked(checked[start : start + WRITE_CHUNK])
                new += len(stored)
                tokens += sum(m.tokens for m in stored)
                advance(len(stored))
    skipped = sum(skipped for _s, _c, skipped in plans)
    return IngestReport(sessions=len(plans), new=new, skipped=skipped, tokens=tokens)


def _stored_keys(session: Session) -> set[str]:
    """Import keys the session already holds (a session never imported holds none)."""
    keys: set[str] = set()
    after: int | None = None
    while True:
        page = session.messages(after_id=after, limit=1000)
        keys.update(m.metadata[IMPORT_KEY] for m in page if IMPORT_KEY in m.metadata)
        if len(page) < 1000:
            return keys
        after = page[-1].id


__all__ = ["WRITE_CHUNK", "IngestReport", "ingest"]
