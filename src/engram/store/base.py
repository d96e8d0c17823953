"""The storage contract every backend honours.

Data model, whatever the backend:

* a **scope** (project, app, user) is created on first use and isolates
  everything below it;
* a **session** is identified by ``(scope, session_id)``; the same session id
  in two scopes names two different sessions;
* **messages** are append-only, with integer ids unique across the whole
  store and increasing in insertion order; nothing rewrites one in place.
  Only explicit deletions remove one: ``delete_session`` (an admin purge),
  and the :class:`MessageEditor` verbs ``delete_messages`` (edit and
  regenerate: an edit is a deletion plus a new message that names the one it
  replaces, never an update) and ``delete_scope`` ("forget this user"). A
  deleted message is gone from every read and from search, and its id is
  never reused;
* **state** documents (``kind`` = "compaction", "agent_state", "tool_cache",
  "lifecycle", ...) hang off a session and are saved by compare-and-set on
  their version;
* **memories** are short long-term records of a scope, with an audit trail;
* **usage** rows record the LLM calls Engram itself made;
* **prompt recipes** (:class:`PromptArchive`) record what each turn sent, and
  every superseded version of the state kinds in :data:`VERSIONED_KINDS` is
  kept (immutable) until the archive prunes it, so a recorded prompt can be
  rebuilt.

Every method that takes a ``scope`` only ever reads or writes that scope.
Every multi-row write is atomic: all of it or none of it.
``tests/store/test_contract.py`` checks each guarantee on every backend.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeGuard, runtime_checkable
from zoneinfo import ZoneInfo

from engram.limits import MAX_PAGE as MAX_PAGE  # most rows a read returns
from engram.models import (
    JSON,
    MemoryRecord,
    Message,
    NewMessage,
    PromptRecord,
    SearchHit,
    SessionInfo,
    StateRecord,
    UsageRecord,
)
from engram.search.query import SearchQuery

#: State kinds whose prompt sections a recipe references by version: saving a new
#: version of one keeps the one it replaces (``PromptArchive.load_state_version``).
VERSIONED_KINDS = frozenset({"compaction", "agent_state", "tool_cache"})


class SessionStore(Protocol):
    """Role: scopes and sessions (the handle every other role hangs off)."""

    #: The URL this store was opened from, with any password masked.
    url: str

    def close(self) -> None:
        """Release connections. Safe to call twice."""
        ...

    def ensure_session(
        self, scope: str, session: str, *, policy: Mapping[str, Any] | None = None
    ) -> SessionInfo:
        """Return the session, creating it (and its scope) if absent.

        A non-None ``policy`` replaces the stored one; None leaves it as it is.
        """
        ...

    def get_session(self, scope: str, session: str) -> SessionInfo | None:
        """The session with its running totals, or None."""
        ...

    def list_sessions(
        self, scope: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[SessionInfo]:
        """Sessions of one scope (or all), most recently updated first."""
        ...

    def list_scopes(self) -> list[str]:
        """Every scope that has a session or a memory, sorted by name."""
        ...

    def delete_session(self, scope: str, session: str) -> bool:
        """Admin purge: remove the session, its messages and its state. True if it existed.

        The scope's memories are kept.
        """
        ...


class MessageLog(Protocol):
    """Role: the append-only messages of sessions, read by id, time and text."""

    def append(
        self, scope: str, session: str, messages: Sequence[NewMessage], tokens: Sequence[int]
    ) -> list[Message]:
        """Store messages atomically, in order, creating the session if absent.

        ``tokens[i]`` is the exact size of ``messages[i]``. Returns the stored
        messages with their new ids (increasing). Updates the session totals.
        """
        ...

    def tail(
        self, scope: str, session: str, *, limit: int, before_id: int | None = None
    ) -> list[Message]:
        """The newest ``limit`` messages with ``id < before_id`` (or all), oldest first.

        Cost grows with ``limit``, not with the history.
        """
        ...

    def page(
        self, scope: str, session: str, *, after_id: int | None = None, limit: int = 100
    ) -> list[Message]:
        """The oldest ``limit`` messages with ``id > after_id`` (or all), oldest first."""
        ...

    def get_message(self, scope: str, message_id: int) -> Message | None:
        """One message by id, only if it belongs to a session of ``scope``."""
        ...

    def between(
        self,
        scope: str,
        session: str | None,
        start: datetime,
        end: datetime,
        *,
        limit: int = 100,
        roles: Sequence[str] | None = None,
    ) -> list[Message]:
        """Messages with ``start <= created_at < end``, oldest first.

        ``session=None`` searches every session of the scope.
        """
        ...

    def search(
        self,
        scope: str,
        query: str,
        *,
        session: str | None = None,
        roles: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        """Full-text search, best first. ``query`` is plain user text, never query syntax.

        Words are matched on their stems (plural and tense variants match) in the
        content and in the speaker's name. Snippets mark matches with ``[`` and ``]``.
        A query with no searchable word returns no hit.
        """
        ...


class StateStore(Protocol):
    """Role: a session's state documents, saved by compare-and-set."""

    def load_state(self, scope: str, session: str, kind: str) -> StateRecord | None:
        """The state document of that kind, or None if never saved."""
        ...

    def save_state(
        self, scope: str, session: str, kind: str, data: JSON, *, expected_version: int
    ) -> StateRecord | None:
        """Compare-and-set: save if the current version is ``expected_version``.

        ``expected_version=0`` means "only if no state exists yet". Returns the
        new record (version + 1), or None when another writer got there first;
        nothing is changed then.
        """
        ...


class MemoryRecords(Protocol):
    """Role: a scope's long-term memories and their audit trail."""

    def add_memory(
        self,
        scope: str,
        content: str,
        *,
        source_session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> MemoryRecord:
        """Store a new memory for the scope."""
        ...

    def list_memories(self, scope: str) -> list[MemoryRecord]:
        """The scope's memories, oldest first (ties by id)."""
        ...

    def get_memory(self, scope: str, memory_id: int) -> MemoryRecord | None:
        """One memory, only if it belongs to ``scope``."""
        ...

    def update_memory(
        self,
        scope: str,
        memory_id: int,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord | None:
        """Change content and/or metadata; bumps ``updated_at``. None if not in scope."""
        ...

    def delete_memory(self, scope: str, memory_id: int) -> bool:
        """Delete one memory of the scope. True if it existed."""
        ...

    def purge_memories(self, scope: str) -> int:
        """Delete every memory of the scope (the audit trail stays). Returns how many."""
        ...

    def add_audit(self, scope: str, event: Mapping[str, Any]) -> None:
        """Append an event to the scope's memory audit trail."""
        ...

    def list_audit(self, scope: str, *, limit: int = 100) -> list[JSON]:
        """The scope's audit events, newest first; each has ``id`` and ``at`` added."""
        ...

    def redact_audit(self, scope: str, keep: Collection[int]) -> int:
        """Erase the memory text of the scope's audit events about memories not in ``keep``.

        Each such event keeps its action, ids, time and counts; its text fields are
        replaced by their SHA-256 (:func:`engram.store.common.redacted_audit_event`).
        Returns how many events changed.
        """
        ...


class UsageLog(Protocol):
    """Role: the LLM calls Engram made, per scope and session."""

    def record_usage(self, scope: str, session: str | None, usage: UsageRecord) -> None:
        """Record one LLM call made on behalf of the scope (and session, if any)."""
        ...

    def usage_totals(self, scope: str, session: str | None = None) -> JSON:
        """Sums: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, by purpose too."""
        ...


@runtime_checkable
class Store(SessionStore, MessageLog, StateStore, MemoryRecords, UsageLog, Protocol):
    """Durable storage of scopes, sessions, messages, state, memories and usage.

    Every role together: what each backend implements. Code that needs one
    role only may ask for that protocol.
    """


@runtime_checkable
class MessageEditor(Protocol):
    """The ability to delete stored messages and whole scopes (edit, regenerate, forget).

    Every built-in backend has it; :func:`can_edit` tells whether a store does.
    """

    def delete_messages(self, scope: str, session: str, ids: Sequence[int]) -> list[Message]:
        """Delete these messages of the session, atomically; returns those deleted, oldest first.

        Ids not in this session of this scope are ignored (another scope's
        message is never touched). The session's totals (message and token
        counts, first and last message time) and the search index follow in
        the same transaction. The session itself stays, even when emptied.
        """
        ...

    def delete_scope(self, scope: str) -> dict[str, int]:
        """Forget the scope: its sessions, messages, states, memories, audit trail and usage.

        Returns how many ``sessions``, ``messages`` and ``memories`` were
        deleted. Other scopes are untouched.
        """
        ...


@runtime_checkable
class PromptArchive(Protocol):
    """The recipes of the prompts a session sent, and the superseded state versions they name.

    Every built-in backend has it; :func:`archives_prompts` tells whether a store
    does. A save of a state kind in :data:`VERSIONED_KINDS` keeps the version it
    replaces, in the same transaction, until :meth:`prune_prompts` drops it.
    Everything here goes with its session (purge, clear, forget the scope).
    """

    def add_prompts(
        self,
        scope: str,
        session: str,
        prompts: Sequence[tuple[datetime, JSON]],
        texts: Mapping[str, str],
    ) -> list[int]:
        """Append recipes as the session's next turns, with the texts they name, atomically.

        Turns are numbered from 1 in order and never reused. ``texts`` maps a
        SHA-256 (hex) to its text; a text already stored is kept once. Returns
        the turn numbers; nothing is stored (and ``[]`` returned) when the
        session does not exist.
        """
        ...

    def set_prompt_usage(self, scope: str, session: str, usage: Mapping[int, JSON]) -> None:
        """Attach what the provider reported about each turn's answer; unknown turns are skipped."""
        ...

    def list_prompts(
        self, scope: str, session: str, *, after: int = 0, limit: int = 100, newest: bool = False
    ) -> list[PromptRecord]:
        """Recorded turns, oldest first: the first ``limit`` after turn ``after``.

        With ``newest``, the newest ``limit`` turns instead (still oldest first).
        """
        ...

    def prompt_texts(self, scope: str, session: str, hashes: Collection[str]) -> dict[str, str]:
        """The stored texts among ``hashes`` (a pruned or unknown hash is left out)."""
        ...

    def load_state_version(
        self, scope: str, session: str, kind: str, version: int
    ) -> StateRecord | None:
        """That version of the state document: the current one or a kept superseded one."""
        ...

    def prune_prompts(
        self,
        scope: str,
        session: str,
        *,
        before_turn: int,
        keep_versions: Mapping[str, Collection[int]],
        keep_texts: Collection[str],
    ) -> None:
        """Drop old recipes, and the superseded versions and texts no longer kept.

        Recipes of turns before ``before_turn`` go, and so do the superseded state
        versions not in ``keep_versions`` (by kind; a kind not named loses them all)
        and the texts not in ``keep_texts``. Current state documents are never touched.
        """
        ...


def archives_prompts(store: object) -> TypeGuard[PromptArchive]:
    """True when ``store`` keeps prompt recipes (every built-in backend does)."""
    return callable(getattr(store, "add_prompts", None)) and callable(
        getattr(store, "load_state_version", None)
    )


def can_edit(store: object) -> TypeGuard[MessageEditor]:
    """True when ``store`` can delete messages and scopes (every built-in backend can)."""
    return callable(getattr(store, "delete_messages", None)) and callable(
        getattr(store, "delete_scope", None)
    )


@runtime_checkable
class PlannedSearch(Protocol):
    """A store whose search takes a :class:`~engram.search.query.SearchQuery` plan.

    Such a store indexes each message's neighbour context and date words at
    append (in :attr:`zone`), lists each session's participants, and honours
    every field of the plan (speakers, date boost, exclusions, weights).
    """

    #: Time zone of the date words indexed at append (the engine sets its own).
    zone: ZoneInfo

    def speakers(self, scope: str, session: str | None = None) -> list[str]:
        """Names of the participants of a session (or of every session of the scope)."""
        ...

    def search(
        self,
        scope: str,
        query: str | SearchQuery,
        *,
        session: str | None = None,
        roles: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        """Full-text search with a plan (or plain text), best first."""
        ...


def plans_search(store: object) -> TypeGuard[PlannedSearch]:
    """True when ``store`` takes search plans (see :class:`PlannedSearch`)."""
    return callable(getattr(store, "speakers", None)) and hasattr(store, "zone")


#: ``(id, role, content, tokens)`` of a stored message, as :class:`RowHistory` reads it.
MessageRow = tuple[int, str, str, int]


@runtime_checkable
class RowHistory(Protocol):
    """A store that reads a session's history as raw rows: the prompt builder's fast path.

    Most messages are plain (a role other than ``tool``, text, no name, tool
    calls or images): the builder needs only their id, role, text and stored
    count, and builds no :class:`~engram.models.Message` for them.
    :func:`reads_rows` tells whether a store can; the others are read through
    :meth:`MessageLog.tail` and :meth:`SessionStore.get_session`.
    """

    def history_rows(
        self, scope: str, session: str, *, limit: int, before_id: int | None = None
    ) -> tuple[list[MessageRow], dict[int, Message]]:
        """The newest ``limit`` messages with ``id < before_id`` (or all), **newest first**.

        Returns their rows, and the messages among them that are not plain,
        whole, by id. One consistent read: the whole messages are those of the rows.
        """
        ...

    def history_totals(self, scope: str, session: str) -> tuple[int, int] | None:
        """The session's stored message and token counts; None for a session never written."""
        ...


def reads_rows(store: object) -> TypeGuard[RowHistory]:
    """True when ``store`` reads history as rows (see :class:`RowHistory`)."""
    return callable(getattr(store, "history_rows", None)) and callable(
        getattr(store, "history_totals", None)
    )
