"""jsondir backend: one human-readable JSON document per session.

Layout under the root directory (every scope and session id goes through
:mod:`engram.store.jsondir.filenames`, so no id can name a path outside its folder)::

    <root>/.engram-jsondir.json          format marker (version 2: session logs)
    <root>/.counters.json                reserved message, memory and audit ids
    <root>/.counters.live.json           the last ids handed out (jsondir_ids)
    <root>/.lock                         fcntl lock file guarding every write
    <root>/<scope>/scope.json            {"scope": "<real scope id>"}
    <root>/<scope>/sessions/<session>.json   the session document (jsondoc)
    <root>/<scope>/sessions/<session>.jsonl  its append log (jsondir_log)
    <root>/<scope>/memories.json         the scope's long-term memories
    <root>/<scope>/audit.json            the memory audit trail
    <root>/<scope>/usage.json            LLM calls Engram made for the scope

An ``append`` writes one line to the session's log and fsyncs it (threads
appending at the same moment are committed together: one lock hold, one line
and one fsync per session log, see :mod:`engram.store.jsondir.group_commit`); every other
change rewrites a whole file atomically: a temporary file in the same
directory, fsync, rename over the old one, fsync of the directory, folding the
log into the document. Readers therefore see the old or the new document, never
half of one, and ignore a log line a killed writer left half written. All
writes, from any thread or process, hold an exclusive ``flock`` on ``.lock``;
that is what makes message ids unique and increasing across the store and lets
several processes append to one session.

A file that does not parse is never overwritten: it is renamed to
``<name>.corrupt-<UTC timestamp>`` and the call raises CorruptedData; the next
call starts that session afresh.

Searching scans the scope's documents, matching words on their Snowball
(English) stems. Fine for the small, human-sized stores this backend is for;
use SQLite or PostgreSQL for large histories.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from engram.errors import ConfigError, CorruptedData, StoreError
from engram.models import (
    JSON,
    Message,
    NewMessage,
    SearchHit,
    SessionInfo,
    StateRecord,
    stored_message,
)
from engram.search.index import index_zone
from engram.search.query import SearchQuery
from engram.store.base import VERSIONED_KINDS
from engram.store.batch_check import check_batch, json_value
from engram.store.common import clamp as _clamp
from engram.store.common import messages_between
from engram.store.common import now as _now
from engram.store.common import utc as _utc
from engram.store.jsondir import document as jsondoc
from engram.store.jsondir import search as jsondir_search
from engram.store.jsondir.archive import JsonDirArchive
from engram.store.jsondir.docs import grown
from engram.store.jsondir.files import SCOPE_FILE, SESSIONS_DIR, fsync_dir
from engram.store.jsondir.group_commit import GroupCommit, Request
from engram.store.jsondir.keys import JsonDirApiKeys
from engram.store.jsondir.log import log_path, remove_log
from engram.store.jsondir.scope import JsonDirScopeData
from engram.store.jsondir.search import JsonDirIndexes, SessionIndex


@dataclass(frozen=True)
class _Batch:
    """One ``append`` call waiting to be committed."""

    scope: str
    session: str
    messages: list[NewMessage]
    tokens: list[int]


@dataclass
class _Pending:
    """The batches of one group bound for one session log."""

    doc: JSON
    before: jsondir_search.Signature | None
    stored: list[Message] = field(default_factory=list)
    requests: list[tuple[Request[_Batch, list[Message]], list[Message]]] = field(
        default_factory=list
    )


class JsonDirStore(JsonDirScopeData, JsonDirApiKeys, JsonDirArchive):
    """The :class:`~engram.store.base.Store` over a directory of JSON documents."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        url: str | None = None,
        tz: str | ZoneInfo | None = None,
    ) -> None:
        """Use (and create if needed) the directory ``root``.

        ``tz`` is the time zone of the date words indexed for search (default UTC).
        """
        super().__init__(root, url=url)
        self._indexes = JsonDirIndexes(index_zone(tz))
        self._appends: GroupCommit[_Batch, list[Message]] = GroupCommit(self._commit_appends)

    @property
    def zone(self) -> ZoneInfo:
        """Time zone of the date words indexed for search (setting it drops the indexes)."""
        return self._indexes.zone

    @zone.setter
    def zone(self, value: ZoneInfo) -> None:
        if value != self._indexes.zone:
            self._indexes = JsonDirIndexes(value)

    def close(self) -> None:
        """Nothing stays open between calls; drops the read cache and the search indexes."""
        super().close()
        self._indexes.clear()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> JsonDirStore:
        """Open ``jsondir:///absolute/path`` (or ``jsondir:relative/path``); option ``tz``."""
        unknown = set(options) - {"tz"}
        if unknown:
            raise ConfigError(f"the jsondir backend takes only tz, got {sorted(unknown)}")
        scheme, _, rest = url.partition(":")
        if scheme.lower() != "jsondir":
            raise ConfigError(f"not a jsondir URL: {url!r}")
        if rest.startswith("//"):
            rest = rest[2:]
        if not rest:
            raise ConfigError(f"jsondir URL {url!r} names no directory")
        return cls(rest, url=url, **options)

    # -- session documents ----------------------------------------------------------

    def _new_info(self, scope: str, session: str, policy: Mapping[str, Any] | None) -> SessionInfo:
        now = _now()
        return SessionInfo(
            scope=scope,
            id=session,
            created_at=now,
            updated_at=now,
            policy=json_value(dict(policy), "policy") if policy is not None else None,
        )

    def load_document(self, scope: str, session: str) -> JSON:
        """The ``load``: the session's whole document, creating the session when absent."""
        self.ensure_session(scope, session)
        return self._merged_document(scope, session)

    def save_document(self, doc: Mapping[str, Any]) -> None:
        """Replace a session's document with ``doc`` (validated first; ids are kept as given).

        Raises:
            CorruptedData: ``doc`` is not a valid session document.

        """
        where = "document"
        info = jsondoc.document_info(doc, where=where)
        history = jsondoc.document_history(doc, where=where)
        messages = [
            jsondoc.entry_message(info.scope, info.id, e, where=f"{where} entry {i}")
            for i, e in enumerate(history)
        ]
        states = jsondoc.document_states(doc, where=where)
        with self._locked():
            self._save(info, messages, states)

    # -- sessions -------------------------------------------------------------------

    def ensure_session(
        self, scope: str, session: str, *, policy: Mapping[str, Any] | None = None
    ) -> SessionInfo:
        """Return the session, creating it (and its scope) if absent."""
        with self._locked():
            parsed = self._parsed(scope, session)
            if parsed is None:
                info = self._new_info(scope, session, policy)
                self._save(info, [], [])
                return info
            info, messages, states = parsed
            if policy is not None and info.policy != dict(policy):
                info = replace(info, policy=json_value(dict(policy), "policy"))
                self._save(info, messages, states)
            return info

    def get_session(self, scope: str, session: str) -> SessionInfo | None:
        """The session with its running totals, or None."""
        parsed = self._parsed(scope, session)
        return None if parsed is None else parsed[0]

    def _scope_folders(self) -> Iterator[tuple[str, Path]]:
        """``(scope id, folder)`` for every scope directory."""
        try:
            entries = sorted(os.scandir(self.root), key=lambda e: e.name)
        except OSError as exc:
            raise StoreError(f"cannot list {self.root}: {exc}") from exc
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            marker = self._read_json(Path(entry.path) / SCOPE_FILE)
            if isinstance(marker, dict) and isinstance(marker.get("scope"), str):
                yield marker["scope"], Path(entry.path)

    def _session_ids(self, scope: str) -> list[str]:
        folder = self._scope_dir(scope) / SESSIONS_DIR
        try:
            names = sorted(
                e.name
                for e in os.scandir(folder)
                if e.name.endswith(".json") and not e.name.startswith(".")
            )
        except FileNotFoundError:
            return []
        ids = []
        for name in names:
            doc = self._read_json(folder / name)
            if not isinstance(doc, dict) or not isinstance(doc.get("session_id"), str):
                raise self._corrupt(folder / name, CorruptedData(f"{folder / name}: no session_id"))
            ids.append(doc["session_id"])
        return ids

    def _infos(self, scope: str) -> list[SessionInfo]:
        out = []
        for session in self._session_ids(scope):
            parsed = self._parsed(scope, session)
            if parsed is not None:
                out.append(parsed[0])
        return out

    def list_sessions(
        self, scope: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[SessionInfo]:
        """Sessions of one scope (or all), most recently updated first."""
        scopes = [scope] if scope is not None else [s for s, _ in self._scope_folders()]
        infos = [info for s in scopes for info in self._infos(s)]
        infos.sort(key=lambda i: (i.scope, i.id))
        infos.sort(key=lambda i: i.updated_at, reverse=True)
        start = max(0, int(offset))
        return infos[start : start + _clamp(limit)]

    def list_scopes(self) -> list[str]:
        """Every scope that has a session or a memory, sorted by name."""
        out = []
        for scope, _folder in self._scope_folders():
            if self._session_ids(scope) or self._memories_raw(scope):
                out.append(scope)
        return sorted(out)

    def delete_session(self, scope: str, session: str) -> bool:
        """Admin purge: remove the session's document. True if it existed."""
        path = self._session_path(scope, session)
        with self._locked():
            if not path.exists():
                return False
            self._logs.pop(log_path(path), None)
            remove_log(log_path(path))  # first: a crash in between leaves the session listed
            self._remove_archive(path)
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise StoreError(f"cannot delete {path}: {exc}") from exc
            fsync_dir(path.parent)
            self._cache.pop(path, None)
            self._indexes.forget(path)
            return True

    def delete_messages(self, scope: str, session: str, ids: Sequence[int]) -> list[Message]:
        """Delete these messages of the session (one document rewrite); oldest first."""
        wanted = {int(i) for i in ids}
        with self._locked():
            parsed = self._parsed(scope, session)
            if parsed is None or not wanted:
                return []
            info, history, states = parsed
            gone = [m for m in history if m.id in wanted]
            if not gone:
                return []
            kept = [m for m in history if m.id not in wanted]
            stamps = [m.created_at for m in kept]
            info = replace(
                info,
                updated_at=max(_now(), info.updated_at),
                message_count=info.message_count - len(gone),
                token_count=info.token_count - sum(m.tokens for m in gone),
                first_message_at=min(stamps, default=None),
                last_message_at=max(stamps, default=None),
            )
            self._save(info, kept, states)
            return gone

    def delete_scope(self, scope: str) -> dict[str, int]:
        """Forget the scope: its folder goes (renamed away at once, then removed)."""
        folder = self._scope_dir(scope)
        with self._locked():
            if not folder.is_dir():
                return {"sessions": 0, "messages": 0, "memories": 0}
            sessions = self._session_ids(scope)
            counts = {
                "sessions": len(sessions),
                "messages": sum(len(self._messages(scope, s)) for s in sessions),
                "memories": len(self._memories_raw(scope)),
            }
            doomed = folder.with_name(f".deleted-{folder.name}-{os.getpid()}")
            try:
                folder.rename(doomed)  # atomic: readers see the whole scope or none of it
                fsync_dir(self.root)
                shutil.rmtree(doomed)
            except OSError as exc:
                raise StoreError(f"cannot delete scope folder {folder}: {exc}") from exc
            for path in [p for p in self._cache if folder in p.parents]:
                self._cache.pop(path, None)
            for path in [p for p in self._logs if folder in p.parents]:
                self._logs.pop(path, None)
            return counts

    # -- messages -------------------------------------------------------------------

    def append(
        self, scope: str, session: str, messages: Sequence[NewMessage], tokens: Sequence[int]
    ) -> list[Message]:
        """Store messages atomically, in order, creating the session if absent.

        Appends of several threads at once are committed together (one lock, one
        fsync per session log): see :mod:`engram.store.jsondir.group_commit`.
        """
        check_batch(messages, tokens)
        batch = _Batch(scope, session, list(messages), list(tokens))
        if getattr(self._held, "depth", 0):  # inside this store's lock: queuing would deadlock
            return self._appends.run_alone(batch)
        return self._appends.submit(batch)

    def _commit_appends(self, requests: list[Request[_Batch, list[Message]]]) -> None:
        """Store every request's batch under one lock hold; one fsync per session log.

        A request gets its result only once its messages are durable; an error
        leaves the others' untouched (an unexpected one fails every request
        still waiting, in :class:`~engram.store.jsondir.group_commit.GroupCommit`).
        """
        with self._locked():
            pending: dict[Path, _Pending] = {}
            for request in requests:
                try:
                    stored, group = self._stage(request.payload, pending)
                except StoreError as exc:
                    request.error = exc
                    continue
                if group is None:
                    request.result = stored  # written whole: durable already
                else:
                    group.requests.append((request, stored))
            for path, group in pending.items():
                try:
                    self._append_to_log(path, group.doc, group.stored)
                except StoreError as exc:
                    for request, _ in group.requests:  # nothing of theirs was stored
                        request.error = exc
                    continue
                for request, stored in group.requests:
                    request.result = stored
                self._indexes.appended(path, group.before, group.stored)
                self._fold_if_large(group.stored[0].scope, group.stored[0].session)

    def _stage(
        self, batch: _Batch, pending: dict[Path, _Pending]
    ) -> tuple[list[Message], _Pending | None]:
        """Give ``batch`` its ids; write it now (a new document) or queue it for its log.

        Returns the stored messages and, when they wait for their log, its group.
        """
        scope, session = batch.scope, batch.session
        doc, _ = self._load_doc(scope, session)
        if not batch.messages:
            if doc is None:
                self._save(self._new_info(scope, session, None), [], [])
            return [], None
        ids = self._next_ids("message", len(batch.messages))
        stored = [
            stored_message(m, new_id, scope, session, count, _utc(m.created_at))
            for new_id, m, count in zip(ids, batch.messages, batch.tokens, strict=True)
        ]
        path = self._session_path(scope, session)
        if doc is not None and isinstance(doc.get("log_generation"), str):
            group = pending.get(path)
            if group is None:
                group = pending[path] = _Pending(doc, jsondir_search.signature(path))
            group.stored += stored
            return stored, group
        # a new session, or a document written before session logs: write it whole, now
        before = jsondir_search.signature(path)
        parsed = self._parsed(scope, session)
        info, history, states = (
            parsed if parsed is not None else (self._new_info(scope, session, None), [], [])
        )
        self._save(grown(info, stored, _now()), history + stored, states)
        self._indexes.appended(path, before, stored)
        return stored, None

    def _messages(self, scope: str, session: str) -> list[Message]:
        parsed = self._parsed(scope, session)
        return [] if parsed is None else parsed[1]

    def tail(
        self, scope: str, session: str, *, limit: int, before_id: int | None = None
    ) -> list[Message]:
        """The newest ``limit`` messages with ``id < before_id`` (or all), oldest first."""
        rows = self._messages(scope, session)
        if before_id is not None:
            rows = [m for m in rows if m.id < before_id]
        count = _clamp(limit)
        return rows[max(0, len(rows) - count) :] if count else []

    def page(
        self, scope: str, session: str, *, after_id: int | None = None, limit: int = 100
    ) -> list[Message]:
        """The oldest ``limit`` messages with ``id > after_id`` (or all), oldest first."""
        rows = self._messages(scope, session)
        if after_id is not None:
            rows = [m for m in rows if m.id > after_id]
        return rows[: _clamp(limit)]

    def _scope_messages(self, scope: str, session: str | None) -> Iterator[Message]:
        sessions = [session] if session is not None else self._session_ids(scope)
        for sid in sessions:
            yield from self._messages(scope, sid)

    def get_message(self, scope: str, message_id: int) -> Message | None:
        """One message by id, only if it belongs to a session of ``scope`` (a scan)."""
        for message in self._scope_messages(scope, None):
            if message.id == message_id:
                return message
        return None

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
        rows = self._scope_messages(scope, session)
        return messages_between(rows, start, end, limit=limit, roles=roles)

    def _session_indexes(self, scope: str, session: str | None) -> list[SessionIndex]:
        sessions = [session] if session is not None else self._session_ids(scope)
        found = []
        for sid in sessions:
            path = self._session_path(scope, sid)
            index = self._indexes.current(path, partial(self._messages, scope, sid))
            if index is not None:
                found.append(index)
        return found

    def speakers(self, scope: str, session: str | None = None) -> list[str]:
        """Names of the participants of a session (or of every session of the scope)."""
        return jsondir_search.speakers(self._session_indexes(scope, session))

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
        """BM25 over each session's index (content, name, context, date words); best first."""
        return jsondir_search.search(
            self._session_indexes(scope, session),
            query,
            roles=roles,
            start=_utc(start) if start is not None else None,
            end=_utc(end) if end is not None else None,
            limit=_clamp(limit),
        )

    # -- session state --------------------------------------------------------------

    def load_state(self, scope: str, session: str, kind: str) -> StateRecord | None:
        """The state document of that kind, or None if never saved."""
        parsed = self._parsed(scope, session)
        if parsed is None:
            return None
        return next((s for s in parsed[2] if s.kind == kind), None)

    def list_states(self, scope: str, session: str) -> list[StateRecord]:
        """Every state document of the session, by kind (for `engram.transfer.documents`)."""
        parsed = self._parsed(scope, session)
        return [] if parsed is None else sorted(parsed[2], key=lambda s: s.kind)

    def save_state(
        self, scope: str, session: str, kind: str, data: JSON, *, expected_version: int
    ) -> StateRecord | None:
        """Compare-and-set on ``version``; None when another writer got there first."""
        with self._locked():
            parsed = self._parsed(scope, session)
            info, messages, states = (
                parsed if parsed is not None else (self._new_info(scope, session, None), [], [])
            )
            current = next((s for s in states if s.kind == kind), None)
            if (current.version if current is not None else 0) != expected_version:
                return None
            if current is not None and kind in VERSIONED_KINDS:
                self.keep_version(scope, session, current)
            record = StateRecord(
                kind=kind,
                version=expected_version + 1,
                data=json_value(data, f"state {kind!r}"),
                updated_at=_now(),
            )
            path = self._session_path(scope, session)
            before = jsondir_search.signature(path)
            self._save(info, messages, [s for s in states if s.kind != kind] + [record])
            self._indexes.moved(path, before)
            return record

    def __repr__(self) -> str:
        return f"JsonDirStore({str(self.root)!r})"
