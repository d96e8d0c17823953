"""Search of the jsondir backend: a BM25 index per session, kept in this process.

The documents stay the agent-runtime format (nothing search-specific is
written into them). Each session's :class:`~engram.search.bm25.TextIndex`
is built the first time the session is searched, from its document and log,
and remembered with their file signatures (inode, mtime, size). An append by
this store extends the index with the new messages and takes the new
signatures, and a rewrite that keeps the messages (a state saved, the log
folded) only takes them, so nothing is re-indexed; files changed by another
process have other signatures and the index is rebuilt once. A search then
costs two ``stat`` per session plus the postings of the query's stems, never a
re-stemming of the scope.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from engram.models import Message, SearchHit
from engram.search.bm25 import TextIndex, add_messages
from engram.search.bm25 import search as text_search
from engram.search.query import SearchQuery, parse
from engram.store.jsondir.files import Signature as FileSignature
from engram.store.jsondir.log import log_path

#: The signatures of a session's document and of its log (None: no log).
Signature = tuple[FileSignature, FileSignature | None]


@dataclass
class SessionIndex:
    """One session's index, valid while its files have ``signature``."""

    signature: Signature
    index: TextIndex = field(default_factory=TextIndex)
    speakers: set[str] = field(default_factory=set)
    messages: list[Message] = field(default_factory=list)


def file_signature(path: Path) -> FileSignature | None:
    """The file's (inode, mtime ns, size), or None when it does not exist."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def signature(path: Path) -> Signature | None:
    """The signatures of the session document ``path`` and its log; None without a document."""
    document = file_signature(path)
    return None if document is None else (document, file_signature(log_path(path)))


class JsonDirIndexes:
    """Per-session indexes of one jsondir store (thread-safe)."""

    def __init__(self, zone: ZoneInfo) -> None:
        self.zone = zone
        self._lock = threading.Lock()
        self._by_path: dict[Path, SessionIndex] = {}

    def current(self, path: Path, load: Callable[[], list[Message]]) -> SessionIndex | None:
        """The index of the session document ``path``, rebuilt from ``load()`` if it changed."""
        sig = signature(path)
        if sig is None:
            with self._lock:
                self._by_path.pop(path, None)
            return None
        with self._lock:
            found = self._by_path.get(path)
            if found is not None and found.signature == sig:
                return found
        built = SessionIndex(sig)
        messages = load()
        add_messages(built.index, built.speakers, [], messages, self.zone)
        built.messages = messages
        with self._lock:
            self._by_path[path] = built
        return built

    def appended(self, path: Path, before: Signature | None, stored: list[Message]) -> None:
        """Extend the index after this store appended ``stored`` (when it was current)."""
        with self._lock:
            found = self._advanced(path, before)
            if found is not None:
                add_messages(found.index, found.speakers, found.messages, stored, self.zone)
                found.messages = found.messages + stored

    def moved(self, path: Path, before: Signature | None) -> None:
        """Keep the index after this store rewrote the files with the same messages."""
        with self._lock:
            self._advanced(path, before)

    def _advanced(self, path: Path, before: Signature | None) -> SessionIndex | None:
        """The index of ``path``, moved to the new signature, if it was current at ``before``.

        Otherwise it is dropped (the next search rebuilds it) and None is returned.
        Called with the lock held.
        """
        found = self._by_path.get(path)
        after = signature(path)
        if found is None or after is None or found.signature != before:
            self._by_path.pop(path, None)
            return None
        found.signature = after
        return found

    def forget(self, path: Path) -> None:
        """Drop the index of a deleted document."""
        with self._lock:
            self._by_path.pop(path, None)

    def clear(self) -> None:
        """Drop every index."""
        with self._lock:
            self._by_path.clear()


def search(
    indexes: list[SessionIndex],
    query: str | SearchQuery,
    *,
    roles: Sequence[str] | None,
    start: datetime | None,
    end: datetime | None,
    limit: int,
) -> list[SearchHit]:
    """Best hits over the given session indexes."""
    plan = parse(query) if isinstance(query, str) else query
    if plan.empty or limit == 0:
        return []
    sessions = [(ix.index, ix.messages) for ix in indexes]
    return text_search(sessions, plan, roles=roles, start=start, end=end, limit=limit)


def speakers(indexes: list[SessionIndex]) -> list[str]:
    """Every participant of the given sessions, sorted."""
    return sorted({name for ix in indexes for name in ix.speakers})


__all__: list[Any] = [
    "JsonDirIndexes",
    "SessionIndex",
    "file_signature",
    "search",
    "signature",
    "speakers",
]
