"""The prompt archive of the jsondir backend: one JSON file per session beside its document.

``<session>.prompts`` (not ``.json``: it is no session document) holds the
session's recorded turns, the texts they name by SHA-256 and the superseded
versions of its versioned state kinds::

    {"format": "engram.prompts", "format_version": 1, "last_turn": 2,
     "turns": [{"turn": 1, "at": "...", "data": {...}, "usage": null}, ...],
     "texts": {"<sha256>": "..."},
     "versions": [{"kind": "compaction", "version": 3, "saved_at": "...", "data": {...}}]}

Every change rewrites the file atomically under the store's write lock, as
session documents are; it goes with its session (purge, clear, forget the scope).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from engram.errors import CorruptedData, StoreError
from engram.models import JSON, PromptRecord, StateRecord
from engram.store.batch_check import json_value
from engram.store.common import clamp as _clamp
from engram.store.common import utc as _utc
from engram.store.jsondir.docs import JsonDirSessionFiles

ARCHIVE_FORMAT = "engram.prompts"
ARCHIVE_SUFFIX = ".prompts"


def archive_path(session_path: Path) -> Path:
    """The archive file of the session whose document is ``session_path``."""
    return session_path.with_suffix(ARCHIVE_SUFFIX)


def _empty() -> JSON:
    return {
        "format": ARCHIVE_FORMAT,
        "format_version": 1,
        "last_turn": 0,
        "turns": [],
        "texts": {},
        "versions": [],
    }


class JsonDirArchive(JsonDirSessionFiles):
    """The :class:`~engram.store.base.PromptArchive` methods of the jsondir store."""

    def _read_archive(self, scope: str, session: str) -> JSON | None:
        """The session's archive (a copy), an empty one, or None when there is no session."""
        document = self._session_path(scope, session)
        if not document.exists():
            return None
        path = archive_path(document)
        found = self._read_json(path)
        if found is None:
            return _empty()
        if not isinstance(found, dict) or found.get("format") != ARCHIVE_FORMAT:
            raise self._corrupt(path, CorruptedData(f"{path} is not a prompt archive"))
        return copy.deepcopy(found)

    def _write_archive(self, scope: str, session: str, archive: JSON) -> None:
        self._write_json(archive_path(self._session_path(scope, session)), archive)

    def keep_version(self, scope: str, session: str, record: StateRecord) -> None:
        """Keep a state document about to be replaced (the caller holds the write lock)."""
        archive = self._read_archive(scope, session)
        if archive is None:
            return
        versions = archive["versions"]
        if any(v["kind"] == record.kind and v["version"] == record.version for v in versions):
            return
        versions.append(
            {
                "kind": record.kind,
                "version": record.version,
                "saved_at": record.updated_at.isoformat(),
                "data": record.data,
            }
        )
        self._write_archive(scope, session, archive)

    def add_prompts(
        self,
        scope: str,
        session: str,
        prompts: Sequence[tuple[datetime, JSON]],
        texts: Mapping[str, str],
    ) -> list[int]:
        """Append recipes as the session's next turns, with the texts they name, atomically."""
        rows = [(_utc(at), json_value(data, "prompt recipe")) for at, data in prompts]
        with self._locked():
            archive = self._read_archive(scope, session)
            if archive is None or not rows:
                return []
            first = int(archive["last_turn"]) + 1
            turns = list(range(first, first + len(rows)))
            archive["turns"] += [
                {"turn": turn, "at": at.isoformat(), "data": data, "usage": None}
                for turn, (at, data) in zip(turns, rows, strict=True)
            ]
            archive["last_turn"] = turns[-1]
            for key, text in texts.items():
                archive["texts"].setdefault(key, text)
            self._write_archive(scope, session, archive)
            return turns

    def set_prompt_usage(self, scope: str, session: str, usage: Mapping[int, JSON]) -> None:
        """Attach what the provider reported about each turn's answer; unknown turns skipped."""
        if not usage:
            return
        with self._locked():
            archive = self._read_archive(scope, session)
            if archive is None:
                return
            wanted = {int(turn): json_value(data, "prompt usage") for turn, data in usage.items()}
            for entry in archive["turns"]:
                if entry["turn"] in wanted:
                    entry["usage"] = wanted[entry["turn"]]
            self._write_archive(scope, session, archive)

    def list_prompts(
        self, scope: str, session: str, *, after: int = 0, limit: int = 100, newest: bool = False
    ) -> list[PromptRecord]:
        """Recorded turns, oldest first (the newest ``limit`` with ``newest``)."""
        archive = self._read_archive(scope, session)
        if archive is None:
            return []
        chosen = [entry for entry in archive["turns"] if entry["turn"] > after]
        chosen = chosen[-_clamp(limit) :] if newest else chosen[: _clamp(limit)]
        return [_record(entry) for entry in chosen]

    def prompt_texts(self, scope: str, session: str, hashes: Collection[str]) -> dict[str, str]:
        """The stored texts among ``hashes``."""
        archive = self._read_archive(scope, session)
        texts: dict[str, str] = archive["texts"] if archive is not None else {}
        return {key: texts[key] for key in hashes if key in texts}

    def load_state_version(
        self, scope: str, session: str, kind: str, version: int
    ) -> StateRecord | None:
        """That version of the state document: the current one or a kept superseded one."""
        parsed = self._parsed(scope, session)
        if parsed is None:
            return None
        current = next((s for s in parsed[2] if s.kind == kind), None)
        if current is not None and current.version == version:
            return current
        archive = self._read_archive(scope, session) or _empty()
        for entry in archive["versions"]:
            if entry["kind"] == kind and entry["version"] == version:
                when = datetime.fromisoformat(entry["saved_at"])
                return StateRecord(kind, int(version), dict(entry["data"]), when)
        return None

    def prune_prompts(
        self,
        scope: str,
        session: str,
        *,
        before_turn: int,
        keep_versions: Mapping[str, Collection[int]],
        keep_texts: Collection[str],
    ) -> None:
        """Drop old recipes, the superseded versions and the texts not kept."""
        keep = set(keep_texts)
        with self._locked():
            archive = self._read_archive(scope, session)
            if archive is None:
                return
            archive["turns"] = [e for e in archive["turns"] if e["turn"] >= before_turn]
            archive["versions"] = [
                v for v in archive["versions"] if v["version"] in keep_versions.get(v["kind"], ())
            ]
            archive["texts"] = {k: t for k, t in archive["texts"].items() if k in keep}
            self._write_archive(scope, session, archive)

    def _remove_archive(self, session_path: Path) -> None:
        """Delete a session's archive with its document (the caller holds the write lock)."""
        try:
            archive_path(session_path).unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot delete {archive_path(session_path)}: {exc}") from exc
        self._cache.pop(archive_path(session_path), None)


def _record(entry: Mapping[str, Any]) -> PromptRecord:
    usage = entry.get("usage")
    return PromptRecord(
        turn=int(entry["turn"]),
        at=datetime.fromisoformat(entry["at"]),
        data=dict(entry["data"]),
        usage=dict(usage) if isinstance(usage, dict) else None,
    )


__all__ = ["ARCHIVE_SUFFIX", "JsonDirArchive", "archive_path"]
