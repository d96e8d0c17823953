"""Several writes as one: all of them happen, or none (``engram import`` of many sessions).

A store with transactions (SQLite, PostgreSQL) offers ``atomic()``: the
writes of the block share one transaction, and a failure anywhere rolls all of
them back. A store without (jsondir, the in-memory store) is rolled back by
hand instead: the group notes each session before its first write, and on a
failure deletes what the group added (a session it created, the messages it
appended to one that existed), so no part of the group stays visible.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, runtime_checkable

from engram.errors import EngramError
from engram.store.base import MessageEditor, Store

log = logging.getLogger(__name__)

#: Messages read per page when undoing an append.
_PAGE = 1000


@runtime_checkable
class Atomic(Protocol):
    """Optional ability: group a thread's writes into one transaction."""

    def atomic(self) -> AbstractContextManager[None]:
        """A block whose writes all commit at its end, or none of them (on any error)."""
        ...


class WriteGroup:
    """What a group wrote, so that a store without transactions can take it back."""

    def __init__(self, store: Store, *, by_hand: bool) -> None:
        """Track the writes of one group on ``store`` (only when rolled back ``by_hand``)."""
        self._store = store
        self._by_hand = by_hand
        # (scope, session) -> the newest message id before the group (0: none), or None
        # when the group created the session.
        self._before: dict[tuple[str, str], int | None] = {}

    def touch(self, scope: str, session: str) -> None:
        """Note a session before the group's first write to it."""
        if not self._by_hand or (scope, session) in self._before:
            return
        if self._store.get_session(scope, session) is None:
            self._before[(scope, session)] = None
            return
        newest = self._store.tail(scope, session, limit=1)
        self._before[(scope, session)] = newest[-1].id if newest else 0

    def undo(self) -> None:
        """Delete what the group added, newest session first (best effort, logged)."""
        for (scope, session), before in reversed(self._before.items()):
            try:
                if before is None:
                    self._store.delete_session(scope, session)
                else:
                    self._drop_after(scope, session, before)
            except EngramError as exc:
                log.error("could not take back the writes to %s/%s: %s", scope, session, exc)

    def _drop_after(self, scope: str, session: str, before: int) -> None:
        if not isinstance(self._store, MessageEditor):
            raise EngramError(f"{self._store.url} cannot delete messages")
        while True:
            page = self._store.page(scope, session, after_id=before, limit=_PAGE)
            if not page:
                return
            self._store.delete_messages(scope, session, [m.id for m in page])


@contextmanager
def all_or_nothing(store: Store) -> Iterator[WriteGroup]:
    """Run a block of writes to ``store`` as one: on any error none of them stays.

    Call :meth:`WriteGroup.touch` before the first write to each session.
    """
    if isinstance(store, Atomic):
        with store.atomic():
            yield WriteGroup(store, by_hand=False)
        return
    group = WriteGroup(store, by_hand=True)
    try:
        yield group
    except BaseException:
        group.undo()
        raise


__all__ = ["Atomic", "WriteGroup", "all_or_nothing"]
