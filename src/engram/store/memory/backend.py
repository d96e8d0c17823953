"""An in-memory store: the whole contract, nothing on disk (tests, notebooks, throw-away bots).

``memory://NAME`` opens the store of that name in this process: two opens of
the same name share it (as two engines share a database file), a new name is
a new empty store, and everything is lost when the process ends. Search
matches stems and ranks as the jsondir backend does
(:mod:`engram.search.stems`). One lock guards the whole store: every
multi-row write is atomic, and compare-and-set on state is exact.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from engram.errors import ConfigError
from engram.models import (
    JSON,
    MemoryRecord,
    Message,
    NewMessage,
    SearchHit,
    SessionInfo,
    StateRecord,
    UsageRecord,
    frozen_metadata,
)
from engram.search.bm25 import TextIndex, add_messages
from engram.search.bm25 import search as text_search
from engram.search.index import index_zone
from engram.search.query import SearchQuery, parse
from engram.store.base import VERSIONED_KINDS
from engram.store.batch_check import check_batch, json_value
from engram.store.common import clamp as _clamp
from engram.store.common import messages_between, redacted_audit_event, split_audit_event
from engram.store.common import now as _now
from engram.store.common import utc as _utc
from engram.store.memory.archive import Archive, MemoryArchive
from engram.store.memory.keys import MemoryApiKeys
from engram.store.usage_totals import usage_summary


@dataclass
class _Session:
    info: SessionInfo
    messages: list[Message] = field(default_factory=list)
    states: dict[str, StateRecord] = field(default_factory=dict)
    index: TextIndex = field(default_factory=TextIndex)
    speakers: set[str] = field(default_factory=set)
    archive: Archive = field(default_factory=Archive)


@dataclass
class _Data:
    """Everything one named store holds."""

    sessions: dict[tuple[str, str], _Session] = field(default_factory=dict)
    memories: dict[int, MemoryRecord] = field(default_factory=dict)
    audit: list[tuple[str, int, datetime, JSON]] = field(default_factory=list)
    usage: list[tuple[str, str | None, UsageRecord]] = field(default_factory=list)
    next_id: dict[str, int] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def ids(self, kind: str, count: int) -> list[int]:
        start = self.next_id.get(kind, 0) + 1
        self.next_id[kind] = start + count - 1
        return list(range(start, start + count))


_NAMED: dict[str, _Data] = {}
_NAMED_GUARD = threading.Lock()


def _copy(message: Message) -> Message:
    """A fresh object per read, so a caller changing one changes nothing stored."""
    return replace(message, metadata=dict(message.metadata))


class MemoryStore(MemoryApiKeys, MemoryArchive):
    """The :class:`~engram.store.base.Store` contract in this process's memory."""

    _data: _Data

    def __init__(self, name: str = "", *, tz: str | ZoneInfo | None = None) -> None:
        """Open the store called ``name`` (shared with other opens of the same name).

        ``tz`` is the time zone of the date words indexed for search (default UTC).
        """
        with _NAMED_GUARD:
            self._data = _NAMED.setdefault(name, _Data())
        self.url = f"memory://{name}"
        self.zone = index_zone(tz)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryStore:
        """``memory://NAME``; the one option is ``tz`` (time zone of the date words).

        Raises:
            ConfigError: not a memory URL, or an unknown option is given.
        """
        scheme, sep, name = url.partition("://")
        if not sep or scheme.lower() != "memory":
            raise ConfigError(f"not a memory URL: {url!r} (expected memory://NAME)")
        unknown = set(options) - {"tz"}
        if unknown:
            raise ConfigError(f"unknown memory store options {sorted(unknown)}")
        return cls(name, **options)

    def close(self) -> None:
        """Nothing to release: the data stays for the next open of the same name."""

    # -- sessions ---------------------------------------------------------------------

    def _session(self, scope: str, session: str) -> _Session | None:
        return self._data.sessions.get((scope, session))

    def _create(self, scope: str, session: str, policy: Mapping[str, Any] | None) -> _Session:
        now = _now()
        stored_policy = json_value(dict(policy), "policy") if policy is not None else None
        created = _Session(SessionInfo(scope, session, now, now, policy=stored_policy))
        self._data.sessions[(scope, session)] = created
        return created

    def ensure_session(
        self, scope: str, session: str, *, policy: Mapping[str, Any] | None = None
    ) -> SessionInfo:
        """Return the session, creating it (and its scope) if absent."""
        with self._data.lock:
            found = self._session(scope, session)
            if found is None:
                return self._create(scope, session, policy).info
            if policy is not None and found.info.policy != dict(policy):
                found.info = replace(found.info, policy=json_value(dict(policy), "policy"))
            return found.info

    def get_session(self, scope: str, session: str) -> SessionInfo | None:
        """The session with its running totals, or None."""
        found = self._session(scope, session)
        return found.info if found is not None else None

    def list_sessions(
        self, scope: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[SessionInfo]:
        """Sessions of one scope (or all), most recently updated first."""
        with self._data.lock:
            infos = [s.info for (sc, _), s in self._data.sessions.items() if scope in (None, sc)]
        infos.sort(key=lambda i: (i.scope, i.id))
        infos.sort(key=lambda i: i.updated_at, reverse=True)
        start = max(0, int(offset))
        return infos[start : start + _clamp(limit)]

    def list_scopes(self) -> list[str]:
        """Every scope that has a session or a memory, sorted by name."""
        with self._data.lock:
            scopes = {scope for scope, _ in self._data.sessions}
            scopes.update(m.scope for m in self._data.memories.values())
        return sorted(scopes)

    def delete_session(self, scope: str, session: str) -> bool:
        """Admin purge: remove the session, its messages and its state."""
        with self._data.lock:
            return self._data.sessions.pop((scope, session), None) is not None

    def delete_messages(self, scope: str, session: str, ids: Sequence[int]) -> list[Message]:
        """Delete these messages of the session, atomically; returns those deleted, oldest first."""
        wanted = {int(i) for i in ids}
        with self._data.lock:
            found = self._session(scope, session)
            if found is None or not wanted:
                return []
            gone = [m for m in found.messages if m.id in wanted]
            if gone:
                found.messages = [m for m in found.messages if m.id not in wanted]
                stamps = [m.created_at for m in found.messages]
                found.info = replace(
                    found.info,
                    updated_at=max(_now(), found.info.updated_at),
                    message_count=found.info.message_count - len(gone),
                    token_count=found.info.token_count - sum(m.tokens for m in gone),
                    first_message_at=min(stamps, default=None),
                    last_message_at=max(stamps, default=None),
                )
                # Rebuilt whole: the neighbour context of later turns held the deleted text.
                found.index, found.speakers = TextIndex(), set()
                add_messages(found.index, found.speakers, [], found.messages, self.zone)
            return [_copy(m) for m in gone]

    def delete_scope(self, scope: str) -> dict[str, int]:
        """Forget the scope: sessions, messages, states, memories, audit trail, usage."""
        data = self._data
        with data.lock:
            keys = [key for key in data.sessions if key[0] == scope]
            messages = sum(len(data.sessions.pop(key).messages) for key in keys)
            memories = [i for i, m in data.memories.items() if m.scope == scope]
            for memory_id in memories:
                del data.memories[memory_id]
            data.audit = [row for row in data.audit if row[0] != scope]
            data.usage = [row for row in data.usage if row[0] != scope]
        return {"sessions": len(keys), "messages": messages, "memories": len(memories)}

    # -- messages ---------------------------------------------------------------------

    def append(
        self, scope: str, session: str, messages: Sequence[NewMessage], tokens: Sequence[int]
    ) -> list[Message]:
        """Store messages atomically, in order, creating the session if absent."""
        check_batch(messages, tokens)
        with self._data.lock:
            target = self._session(scope, session) or self._create(scope, session, None)
            if not messages:
                return []
            stored = [
                Message(
                    id=new_id,
                    scope=scope,
                    session=session,
                    role=m.role,
                    content=m.content,
                    created_at=_utc(m.created_at),
                    tokens=int(count),
                    name=m.name,
                    tool_calls=json_value(m.tool_calls, "tool_calls") if m.tool_calls else None,
                    tool_call_id=m.tool_call_id,
                    metadata=json_value(frozen_metadata(m.metadata), "metadata"),
                    parts=json_value(m.parts, "parts") if m.parts is not None else None,
                )
                for new_id, m, count in zip(
                    self._data.ids("message", len(messages)), messages, tokens, strict=True
                )
            ]
            self._index(target, stored)
            target.messages.extend(stored)
            target.info = _with_totals(target.info, stored)
            return [_copy(m) for m in stored]

    def tail(
        self, scope: str, session: str, *, limit: int, before_id: int | None = None
    ) -> list[Message]:
        """The newest ``limit`` messages with ``id < before_id`` (or all), oldest first."""
        rows = self._rows(scope, session)
        if before_id is not None:
            rows = [m for m in rows if m.id < before_id]
        count = _clamp(limit)
        return [_copy(m) for m in rows[max(0, len(rows) - count) :]] if count else []

    def page(
        self, scope: str, session: str, *, after_id: int | None = None, limit: int = 100
    ) -> list[Message]:
        """The oldest ``limit`` messages with ``id > after_id`` (or all), oldest first."""
        rows = self._rows(scope, session)
        if after_id is not None:
            rows = [m for m in rows if m.id > after_id]
        return [_copy(m) for m in rows[: _clamp(limit)]]

    def _rows(self, scope: str, session: str) -> list[Message]:
        with self._data.lock:
            found = self._session(scope, session)
            return list(found.messages) if found is not None else []

    def _scope_rows(self, scope: str, session: str | None) -> Iterator[Message]:
        with self._data.lock:
            chosen = [
                s
                for (sc, sid), s in self._data.sessions.items()
                if sc == scope and session in (None, sid)
            ]
            rows = [m for s in chosen for m in s.messages]
        yield from rows

    def get_message(self, scope: str, message_id: int) -> Message | None:
        """One message by id, only if it belongs to a session of ``scope``."""
        found = next((m for m in self._scope_rows(scope, None) if m.id == message_id), None)
        return _copy(found) if found is not None else None

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
        """Messages with ``start <= created_at < end``, oldest first."""
        rows = self._scope_rows(scope, session)
        return [_copy(m) for m in messages_between(rows, start, end, limit=limit, roles=roles)]

    def _index(self, target: _Session, stored: list[Message]) -> None:
        add_messages(target.index, target.speakers, target.messages, stored, self.zone)

    def speakers(self, scope: str, session: str | None = None) -> list[str]:
        """Names of the participants of a session (or of every session of the scope)."""
        with self._data.lock:
            return sorted({n for s in self._chosen(scope, session) for n in s.speakers})

    def _chosen(self, scope: str, session: str | None) -> list[_Session]:
        return [
            s
            for (sc, sid), s in self._data.sessions.items()
            if sc == scope and session in (None, sid)
        ]

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
        """BM25 over the index kept at append (content, name, context, date words); best first."""
        plan = parse(query) if isinstance(query, str) else query
        limit = _clamp(limit)
        if plan.empty or limit == 0:
            return []
        with self._data.lock:
            chosen = [(s.index, s.messages) for s in self._chosen(scope, session)]
            hits = text_search(
                chosen,
                plan,
                roles=roles,
                start=_utc(start) if start is not None else None,
                end=_utc(end) if end is not None else None,
                limit=limit,
            )
        return [replace(hit, message=_copy(hit.message)) for hit in hits]

    # -- session state ----------------------------------------------------------------

    def load_state(self, scope: str, session: str, kind: str) -> StateRecord | None:
        """The state document of that kind, or None if never saved."""
        with self._data.lock:
            found = self._session(scope, session)
            record = found.states.get(kind) if found is not None else None
            return replace(record, data=json.loads(json.dumps(record.data))) if record else None

    def save_state(
        self, scope: str, session: str, kind: str, data: JSON, *, expected_version: int
    ) -> StateRecord | None:
        """Compare-and-set on ``version``; None when another writer got there first."""
        with self._data.lock:
            target = self._session(scope, session) or self._create(scope, session, None)
            current = target.states.get(kind)
            if (current.version if current is not None else 0) != expected_version:
                return None
            if kind in VERSIONED_KINDS:
                self.keep_version(target, kind)
            record = StateRecord(
                kind, expected_version + 1, json_value(data, f"state {kind!r}"), _now()
            )
            target.states[kind] = record
            return record

    def list_states(self, scope: str, session: str) -> list[StateRecord]:
        """Every state document of the session, by kind (for `engram.transfer.documents`)."""
        with self._data.lock:
            found = self._session(scope, session)
            return sorted(found.states.values(), key=lambda s: s.kind) if found else []

    # -- memories, audit, usage -------------------------------------------------------

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
        stamp = _utc(created_at) if created_at is not None else _now()
        meta = json_value(frozen_metadata(metadata), "memory metadata")
        with self._data.lock:
            (new_id,) = self._data.ids("memory", 1)
            record = MemoryRecord(new_id, scope, content, stamp, stamp, source_session, meta)
            self._data.memories[new_id] = record
            return record

    def list_memories(self, scope: str) -> list[MemoryRecord]:
        """The scope's memories, oldest first (ties by id)."""
        with self._data.lock:
            found = [m for m in self._data.memories.values() if m.scope == scope]
        return sorted(found, key=lambda r: (r.created_at, r.id))

    def get_memory(self, scope: str, memory_id: int) -> MemoryRecord | None:
        """One memory, only if it belongs to ``scope``."""
        found = self._data.memories.get(memory_id)
        return found if found is not None and found.scope == scope else None

    def update_memory(
        self,
        scope: str,
        memory_id: int,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord | None:
        """Change content and/or metadata; bumps ``updated_at``. None if not in scope."""
        with self._data.lock:
            old = self.get_memory(scope, memory_id)
            if old is None:
                return None
            new = replace(
                old,
                content=old.content if content is None else content,
                metadata=old.metadata
                if metadata is None
                else json_value(dict(metadata), "memory metadata"),
                updated_at=max(_now(), old.updated_at),
            )
            self._data.memories[memory_id] = new
            return new

    def delete_memory(self, scope: str, memory_id: int) -> bool:
        """Delete one memory of the scope. True if it existed."""
        with self._data.lock:
            if self.get_memory(scope, memory_id) is None:
                return False
            del self._data.memories[memory_id]
            return True

    def purge_memories(self, scope: str) -> int:
        """Delete every memory of the scope (the audit trail stays). Returns how many."""
        with self._data.lock:
            ids = [i for i, m in self._data.memories.items() if m.scope == scope]
            for memory_id in ids:
                del self._data.memories[memory_id]
            return len(ids)

    def add_audit(self, scope: str, event: Mapping[str, Any]) -> None:
        """Append an event to the scope's audit trail (an ISO ``at`` in the event is kept)."""
        body, stamp = split_audit_event(json.loads(json.dumps(dict(event), default=str)))
        with self._data.lock:
            (new_id,) = self._data.ids("audit", 1)
            self._data.audit.append((scope, new_id, stamp, body))

    def list_audit(self, scope: str, *, limit: int = 100) -> list[JSON]:
        """The scope's audit events, newest first; each has ``id`` and ``at`` added."""
        with self._data.lock:
            rows = [row for row in self._data.audit if row[0] == scope]
        rows.sort(key=lambda row: row[1], reverse=True)
        return [
            {**body, "id": new_id, "at": stamp.isoformat()}
            for _scope, new_id, stamp, body in rows[: _clamp(limit)]
        ]

    def redact_audit(self, scope: str, keep: Collection[int]) -> int:
        """Erase the memory text of audit events about memories not in ``keep``; how many."""
        changed = 0
        with self._data.lock:
            for index, (row_scope, aid, stamp, body) in enumerate(self._data.audit):
                redacted = redacted_audit_event(body, keep) if row_scope == scope else None
                if redacted is not None:
                    self._data.audit[index] = (row_scope, aid, stamp, redacted)
                    changed += 1
        return changed

    def record_usage(self, scope: str, session: str | None, usage: UsageRecord) -> None:
        """Record one LLM call made on behalf of the scope (and session, if any)."""
        with self._data.lock:
            self._data.usage.append((scope, session, usage))

    def usage_totals(self, scope: str, session: str | None = None) -> JSON:
        """Sums: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, by purpose too."""
        groups: dict[str, list[int | float]] = {}
        with self._data.lock:
            rows = list(self._data.usage)
        for row_scope, row_session, usage in rows:
            if row_scope != scope or (session is not None and row_session != session):
                continue
            group = groups.setdefault(usage.purpose, [0, 0, 0, 0.0])
            group[0] += 1
            group[1] += int(usage.input_tokens)
            group[2] += int(usage.output_tokens)
            group[3] += float(usage.cost_usd or 0.0)
        return usage_summary(
            (p, int(g[0]), int(g[1]), int(g[2]), float(g[3])) for p, g in sorted(groups.items())
        )

    def __repr__(self) -> str:
        return f"MemoryStore({self.url!r})"


def _with_totals(info: SessionInfo, stored: list[Message]) -> SessionInfo:
    """``info`` with ``stored`` counted in its totals and dates."""
    stamps = [m.created_at for m in stored]
    known = [d for d in (info.first_message_at, info.last_message_at) if d is not None]
    return replace(
        info,
        updated_at=max(_now(), info.updated_at),
        message_count=info.message_count + len(stored),
        token_count=info.token_count + sum(m.tokens for m in stored),
        first_message_at=min([*stamps, *known]),
        last_message_at=max([*stamps, *known]),
    )
