"""Session files of the jsondir backend: the document, its append log, read and written.

A session is its document ``<session>.json`` (:mod:`engram.store.jsondir.document`)
plus, when the document names one, the append log ``<session>.jsonl``
(:mod:`engram.store.jsondir.log`) holding the messages added since the
document was last written. Appending writes one log line and fsyncs the log;
every other change rewrites the document with everything in it (the log
folded in) and a new log generation.

Readers take no lock: they read the document, then its log, then check that
the document was not replaced meanwhile (a rewrite replaces the document
before it drops the old log), and read again if it was. A writer holds the
store's write lock throughout, so it always sees a settled pair.
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from engram.errors import CorruptedData, StoreError
from engram.models import JSON, Message, SessionInfo, StateRecord
from engram.store.common import now as _now
from engram.store.jsondir import document as jsondoc
from engram.store.jsondir.files import JsonDirFiles, Signature
from engram.store.jsondir.log import (
    NO_LOG,
    LogView,
    append_log,
    header_line,
    log_path,
    new_generation,
    read_log,
    record_line,
    remove_log,
    should_fold,
)
from engram.store.jsondir.search import file_signature

log = logging.getLogger(__name__)

#: Lock-free reads of a session before one is made under the write lock.
READ_ATTEMPTS = 5

Parsed = tuple[SessionInfo, list[Message], list[StateRecord]]


def grown(info: SessionInfo, added: list[Message], at: datetime) -> SessionInfo:
    """``info`` with ``added`` counted in its totals and ``updated_at`` at least ``at``."""
    if not added:
        return info
    stamps = [m.created_at for m in added]
    first = min([*stamps, *([info.first_message_at] if info.first_message_at else [])])
    last = max([*stamps, *([info.last_message_at] if info.last_message_at else [])])
    return replace(
        info,
        updated_at=max(at, info.updated_at),
        message_count=info.message_count + len(added),
        token_count=info.token_count + sum(m.tokens for m in added),
        first_message_at=first,
        last_message_at=last,
    )


class JsonDirSessionFiles(JsonDirFiles):
    """Reading and writing session documents and logs; a base of ``JsonDirStore``."""

    def __init__(self, root: str | os.PathLike[str], *, url: str | None = None) -> None:
        """Use (and create if needed) the directory ``root``."""
        super().__init__(root, url=url)
        self._logs: dict[Path, LogView] = {}

    def close(self) -> None:
        """Drop the read caches (documents and logs). Safe to call twice."""
        super().close()
        self._logs.clear()

    def _load_doc(self, scope: str, session: str) -> tuple[JSON | None, Signature | None]:
        """The session's document (checked to be that session's) and its file signature."""
        path = self._session_path(scope, session)
        doc, signature = self._read_json_signed(path)
        if doc is None:
            return None, None
        where = str(path)
        if not isinstance(doc, dict):
            raise self._corrupt(path, CorruptedData(f"{where}: not a JSON object"))
        if doc.get("session_id") != session or doc.get("scope") != scope:
            raise self._corrupt(
                path,
                CorruptedData(f"{where}: holds session {doc.get('session_id')!r}, not {session!r}"),
            )
        return doc, signature

    def _log_of(self, document: Path, doc: JSON) -> LogView:
        """The log continuing ``doc``: :data:`NO_LOG` if it names none or the log is stale."""
        generation = doc.get("log_generation")
        if not isinstance(generation, str):
            return NO_LOG
        path = log_path(document)
        try:
            view = read_log(path, self._logs.get(path))
        except CorruptedData as exc:
            self._logs.pop(path, None)
            raise self._corrupt(path, exc) from None
        self._logs[path] = view
        return view if view.generation == generation else NO_LOG

    def _snapshot(self, scope: str, session: str) -> tuple[JSON, LogView] | None:
        """The document and its log as one consistent pair, or None without a document."""
        path = self._session_path(scope, session)
        for attempt in range(READ_ATTEMPTS + 1):
            guard: AbstractContextManager[Any] = (
                self._locked() if attempt == READ_ATTEMPTS else nullcontext()
            )
            with guard:
                doc, signature = self._load_doc(scope, session)
                if doc is None:
                    return None
                view = self._log_of(path, doc)
                if file_signature(path) == signature:
                    return doc, view
        raise StoreError(f"{path} kept changing while read under the write lock")

    def _parsed(self, scope: str, session: str) -> Parsed | None:
        snapshot = self._snapshot(scope, session)
        if snapshot is None:
            return None
        doc, view = snapshot
        path = self._session_path(scope, session)
        where = str(path)
        try:
            info = jsondoc.document_info(doc, where=where)
            history = jsondoc.document_history(doc, where=where)
            messages = [
                jsondoc.entry_message(scope, session, entry, where=f"{where} entry {i}")
                for i, entry in enumerate(history)
            ]
            states = jsondoc.document_states(doc, where=where)
        except CorruptedData as exc:
            raise self._corrupt(path, exc) from None
        if view.records:
            logged, at = self._logged(scope, session, view)
            info = grown(info, logged, at)
            messages += logged
        return info, messages, states

    def _logged(self, scope: str, session: str, view: LogView) -> tuple[list[Message], datetime]:
        """The messages of a log and the time of its last record."""
        path = log_path(self._session_path(scope, session))
        try:
            logged = [
                jsondoc.entry_message(scope, session, entry, where=f"{path} record {i}")
                for i, record in enumerate(view.records)
                for entry in record["messages"]
            ]
            at = max(
                jsondoc.parse_time(r.get("at"), f"{path} record {i} at")
                for i, r in enumerate(view.records)
            )
        except CorruptedData as exc:
            self._logs.pop(path, None)
            raise self._corrupt(path, exc) from None
        return logged, at

    def _save(self, info: SessionInfo, messages: list[Message], states: list[StateRecord]) -> None:
        """Rewrite the whole document (caller holds the lock); any log is folded in by the caller.

        The document names a fresh log generation, so the old log is stale the
        moment the document is in place; it is then removed (if that fails,
        it is ignored and replaced by the next append).
        """
        self._ensure_scope(info.scope)
        path = self._session_path(info.scope, info.id)
        doc = jsondoc.build_document(info, messages, states, log_generation=new_generation())
        self._write_json(path, doc)
        old = log_path(path)
        self._logs.pop(old, None)
        try:
            remove_log(old)
        except StoreError as exc:
            log.warning("left a stale session log behind: %s", exc)

    def _append_to_log(self, path: Path, doc: JSON, stored: list[Message]) -> None:
        """Append ``stored`` as one record of the document's log, durably (under the lock)."""
        generation = str(doc["log_generation"])
        first = stored[0]
        line = record_line(jsondoc.iso(_now()) or "", [jsondoc.message_entry(m) for m in stored])
        header = header_line(first.scope, first.session, generation)
        logfile = log_path(path)
        view = self._log_of(path, doc)
        self._logs[logfile] = append_log(
            logfile, view, [line], generation=generation, header=header
        )

    def _fold_if_large(self, scope: str, session: str) -> bool:
        """Fold the log into the document once it outgrows it (under the lock); True if done.

        The messages are already durable in the log, so a failure here is only
        logged: the next append tries again.
        """
        path = self._session_path(scope, session)
        view = self._logs.get(log_path(path))
        size = file_signature(path)
        if view is None or size is None or not should_fold(view, size[2]):
            return False
        try:
            parsed = self._parsed(scope, session)
            if parsed is None:
                return False
            self._save(*parsed)
        except StoreError as exc:
            log.warning("could not fold the log of session %r into its document: %s", session, exc)
            return False
        return True

    def _merged_document(self, scope: str, session: str) -> JSON:
        """A private copy of the document with its log folded in (as if just rewritten)."""
        with self._locked():
            snapshot = self._snapshot(scope, session)
            parsed = self._parsed(scope, session)
        if snapshot is None or parsed is None:
            raise StoreError(f"session {session!r} of scope {scope!r} vanished")
        doc, view = snapshot
        copy: JSON = json.loads(json.dumps(doc))  # callers may mutate it
        copy.pop("log_generation", None)
        if view.records:
            entries = [entry for record in view.records for entry in record["messages"]]
            copy["recent_history"] = [
                *copy.get("recent_history", []),
                *json.loads(json.dumps(entries)),
            ]
            copy["updated_at"] = jsondoc.iso(parsed[0].updated_at)
            copy["totals"] = jsondoc.totals(parsed[0])
        return copy
