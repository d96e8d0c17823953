"""``EngramMemoryService``: Google ADK's long-term memory is Engram's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from engram.aio import AsyncEngram, offload
from engram.engine import Engram
from engram.errors import MemoryNotFound
from engram.integrations.adk.events import event_id, event_message, message_event, scope_of
from engram.integrations.paging import every
from engram.models import JSON, MemoryRecord, SearchHit

#: Session that keeps events given to ``add_events_to_memory`` without a session id.
LOOSE_EVENTS = "adk:memory-events"
#: Prefixes of the ids of the two kinds of memory entries.
MEMORY_ID = "memory:"
MESSAGE_ID = "message:"


class EngramMemoryService(BaseMemoryService):
    """ADK memory over Engram: a user's scope, its memories and its searchable history.

    ``add_session_to_memory`` stores the session's events Engram lacks (none
    when the sessions are Engram's too) and writes the conversation's
    long-term memory, as Engram does when a conversation ends (the model when
    Engram has one, an extractive memory otherwise; a repeat is not stored
    twice). ``search_memory`` is Engram's: the scope's memories matching the
    query, then the best messages of every session of the scope (BM25, or
    the mode given), each entry with its author, time and id. ``add_memory``
    writes memories directly; ``delete_memory`` deletes one by the id a
    search gave (``memory:<id>``).
    """

    def __init__(
        self, engram: Engram | AsyncEngram, *, limit: int = 10, mode: str = "keyword"
    ) -> None:
        """Search and write memories in ``engram`` (the caller owns it and closes it).

        Args:
            engram: Where the memories and conversations live.
            limit: Most messages a search returns (memories come first, apart).
            mode: Message search: ``keyword`` (BM25), ``semantic`` or ``hybrid``.

        """
        self.engram = engram.sync if isinstance(engram, AsyncEngram) else engram
        self.limit = limit
        self.mode = mode

    async def add_session_to_memory(self, session: Session) -> None:
        """Store the events Engram lacks, then write the conversation's memory."""
        await offload(self._add_session, session)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Store the events (searchable from then on); ones already stored are skipped."""
        scope = scope_of(app_name, user_id)
        await offload(self._store_events, scope, session_id or LOOSE_EVENTS, list(events))

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Write each entry's text as a memory of the user (a repeat is not stored twice)."""
        scope = scope_of(app_name, user_id)
        await offload(self._add_memories, scope, list(memories), dict(custom_metadata or {}))

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """The user's memories matching ``query``, then the best matching messages."""
        scope = scope_of(app_name, user_id)
        return await offload(self._search, scope, query)

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Delete one memory by the id a search returned (``memory:<id>``).

        Raises:
            ValueError: an id that names no memory (a message is not deleted here).

        """
        scope = scope_of(app_name, user_id)
        number = (memory_id or "").removeprefix(MEMORY_ID)
        if not (memory_id or "").startswith(MEMORY_ID) or not number.isdigit():
            raise ValueError(
                f"memory id {memory_id!r}: expected '{MEMORY_ID}<number>' from search_memory;"
                " a conversation message is deleted from its session, not from memory"
            )
        try:
            await offload(self.engram.memories(scope).delete, int(number))
        except MemoryNotFound as exc:
            raise ValueError(str(exc)) from exc

    # -- the work, on a worker thread ----------------------------------------------------

    def _add_session(self, session: Session) -> None:
        scope = scope_of(session.app_name, session.user_id)
        self._store_events(scope, session.id, list(session.events))
        if self.engram.session_info(session.id, scope) is not None:
            self.engram.memories(scope).create_from_session(session.id, reason="added to memory")

    def _store_events(self, scope: str, session_id: str, events: list[Event]) -> None:
        chat = self.engram.session(session_id, scope)
        known = {event_id(m) for m in every(chat)} if chat.info() is not None else set()
        fresh = [e for e in events if not e.partial and (not e.id or e.id not in known)]
        if fresh:
            chat.add_many([event_message(e) for e in fresh])

    def _add_memories(self, scope: str, entries: list[MemoryEntry], extra: JSON) -> None:
        memories = self.engram.memories(scope)
        for entry in entries:
            text = " ".join(p.text for p in (entry.content.parts or []) if p.text)
            if text.strip():
                meta = {**extra, **entry.custom_metadata}
                if entry.author:
                    meta["author"] = entry.author
                memories.create(text, metadata=meta)

    def _search(self, scope: str, query: str) -> SearchMemoryResponse:
        if not query.strip():
            return SearchMemoryResponse()
        found = [_memory_entry(m) for m in self.engram.memories(scope).search(query)]
        hits = self.engram.search(query, scope, limit=self.limit, mode=self.mode)
        found += [_message_entry(hit) for hit in hits]
        return SearchMemoryResponse(memories=found)


def _memory_entry(memory: MemoryRecord) -> MemoryEntry:
    return MemoryEntry(
        id=f"{MEMORY_ID}{memory.id}",
        author="memory",
        timestamp=memory.updated_at.isoformat(),
        content=types.Content(role="user", parts=[types.Part(text=memory.content)]),
        custom_metadata={"kind": "memory", **_plain(memory.metadata)},
    )


def _message_entry(hit: SearchHit) -> MemoryEntry:
    event = message_event(hit.message)
    content = event.content or types.Content(
        role="user", parts=[types.Part(text=hit.message.content)]
    )
    return MemoryEntry(
        id=f"{MESSAGE_ID}{hit.message.id}",
        author=event.author,
        timestamp=hit.message.created_at.isoformat(),
        content=content,
        custom_metadata={"kind": "message", "session": hit.message.session, "score": hit.score},
    )


def _plain(metadata: Mapping[str, Any]) -> JSON:
    return {k: v for k, v in metadata.items() if k != "related_sessions"}
