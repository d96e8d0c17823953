"""The prompt archive of the in-memory backend: recipes, their texts, state versions.

Each session keeps an :class:`Archive` beside its messages and states, so it
goes with the session (purge, clear, forget the scope). Every read hands out
copies: a caller changing one changes nothing stored.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from engram.models import JSON, PromptRecord, StateRecord
from engram.store.batch_check import json_value
from engram.store.common import clamp as _clamp
from engram.store.common import utc as _utc


@dataclass
class Archive:
    """One session's recorded turns, texts and superseded state versions."""

    turns: dict[int, PromptRecord] = field(default_factory=dict)
    last_turn: int = 0
    texts: dict[str, str] = field(default_factory=dict)
    versions: dict[tuple[str, int], StateRecord] = field(default_factory=dict)


class _Holder(Protocol):
    archive: Archive
    states: dict[str, StateRecord]


class _Locked(Protocol):
    lock: threading.RLock


class MemoryArchive:
    """The :class:`~engram.store.base.PromptArchive` methods of the in-memory store."""

    _data: _Locked

    def _session(self, scope: str, session: str) -> _Holder | None:
        raise NotImplementedError  # the store's own lookup

    def add_prompts(
        self,
        scope: str,
        session: str,
        prompts: Sequence[tuple[datetime, JSON]],
        texts: Mapping[str, str],
    ) -> list[int]:
        """Append recipes as the session's next turns, with the texts they name, atomically."""
        rows = [(_utc(at), json_value(data, "prompt recipe")) for at, data in prompts]
        with self._data.lock:
            found = self._session(scope, session)
            if found is None or not rows:
                return []
            archive = found.archive
            turns = []
            for at, data in rows:
                archive.last_turn += 1
                archive.turns[archive.last_turn] = PromptRecord(archive.last_turn, at, data)
                turns.append(archive.last_turn)
            for key, text in texts.items():
                archive.texts.setdefault(key, text)
            return turns

    def set_prompt_usage(self, scope: str, session: str, usage: Mapping[int, JSON]) -> None:
        """Attach what the provider reported about each turn's answer; unknown turns skipped."""
        with self._data.lock:
            found = self._session(scope, session)
            if found is None:
                return
            for turn, data in usage.items():
                record = found.archive.turns.get(int(turn))
                if record is not None:
                    value = json_value(data, "prompt usage")
                    found.archive.turns[record.turn] = replace(record, usage=value)

    def list_prompts(
        self, scope: str, session: str, *, after: int = 0, limit: int = 100, newest: bool = False
    ) -> list[PromptRecord]:
        """Recorded turns, oldest first (the newest ``limit`` with ``newest``)."""
        with self._data.lock:
            found = self._session(scope, session)
            if found is None:
                return []
            chosen = sorted(t for t in found.archive.turns if t > after)
            chosen = chosen[-_clamp(limit) :] if newest else chosen[: _clamp(limit)]
            return [copy.deepcopy(found.archive.turns[t]) for t in chosen]

    def prompt_texts(self, scope: str, session: str, hashes: Collection[str]) -> dict[str, str]:
        """The stored texts among ``hashes``."""
        with self._data.lock:
            found = self._session(scope, session)
            texts = found.archive.texts if found is not None else {}
            return {key: texts[key] for key in hashes if key in texts}

    def load_state_version(
        self, scope: str, session: str, kind: str, version: int
    ) -> StateRecord | None:
        """That version of the state document: the current one or a kept superseded one."""
        with self._data.lock:
            found = self._session(scope, session)
            if found is None:
                return None
            current = found.states.get(kind)
            record = (
                current
                if current is not None and current.version == version
                else found.archive.versions.get((kind, int(version)))
            )
            return copy.deepcopy(record)

    def keep_version(self, holder: _Holder, kind: str) -> None:
        """Keep the state document of ``kind`` about to be replaced (call under the lock)."""
        current = holder.states.get(kind)
        if current is not None:
            holder.archive.versions.setdefault((kind, current.version), current)

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
        with self._data.lock:
            found = self._session(scope, session)
            if found is None:
                return
            archive = found.archive
            archive.turns = {t: r for t, r in archive.turns.items() if t >= before_turn}
            archive.versions = {
                (k, v): r for (k, v), r in archive.versions.items() if v in keep_versions.get(k, ())
            }
            archive.texts = {key: text for key, text in archive.texts.items() if key in keep}


__all__ = ["Archive", "MemoryArchive"]
