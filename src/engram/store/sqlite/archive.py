"""The prompt archive of the SQLite backend: recipes per turn, their texts, state versions.

``prompt_turns`` holds one recipe per recorded turn (numbered per session from
1 inside the write transaction that adds it), ``prompt_texts`` the texts recipes
name by SHA-256 (once per session), and ``state_versions`` the superseded
documents of the versioned state kinds, copied by ``save_state`` in the
transaction that replaces them (see :data:`engram.store.base.VERSIONED_KINDS`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from engram.models import JSON, PromptRecord, StateRecord
from engram.store.common import clamp as _clamp
from engram.store.sqlite.connection import SQLiteConnections, Tx
from engram.store.sqlite.connection import guarded as _guarded
from engram.store.sqlite.rows import dump as _dump
from engram.store.sqlite.rows import json_dict as _json_dict
from engram.store.sqlite.rows import parse_ts as _parse_ts
from engram.store.sqlite.rows import ts as _ts

#: Keys per ``IN (...)`` list: well under SQLite's limit on bound parameters.
_CHUNK = 500

_KEEP_VERSION = (
    "INSERT OR IGNORE INTO state_versions(session_id, kind, version, data, saved_at)"
    " SELECT session_id, kind, version, data, updated_at FROM session_state"
    " WHERE session_id = ? AND kind = ? AND version = ?"
)
#: Tables of the archive, emptied with their session.
ARCHIVE_TABLES = ("prompt_turns", "prompt_texts", "state_versions")


def keep_version(tx: Tx, session_pk: int, kind: str, version: int) -> None:
    """Copy the state document about to be replaced into ``state_versions``."""
    tx.conn.execute(_KEEP_VERSION, (session_pk, kind, version))


class SQLiteArchive(SQLiteConnections):
    """The :class:`~engram.store.base.PromptArchive` methods of the SQLite store."""

    @_guarded
    def add_prompts(
        self,
        scope: str,
        session: str,
        prompts: Sequence[tuple[datetime, JSON]],
        texts: Mapping[str, str],
    ) -> list[int]:
        """Append recipes as the session's next turns, with the texts they name, atomically."""
        rows = [(_ts(at), _dump(data, "prompt recipe")) for at, data in prompts]
        if not rows:
            return []
        with self._write() as tx:
            pk = self._lookup_session(tx.conn, scope, session)
            if pk is None:
                return []
            last = tx.conn.execute(
                "SELECT coalesce(max(turn), 0) FROM prompt_turns WHERE session_id = ?", (pk,)
            ).fetchone()[0]
            turns = list(range(last + 1, last + 1 + len(rows)))
            tx.conn.executemany(
                "INSERT INTO prompt_turns(session_id, turn, at, data) VALUES (?, ?, ?, ?)",
                [(pk, turn, at, data) for turn, (at, data) in zip(turns, rows, strict=True)],
            )
            tx.conn.executemany(
                "INSERT OR IGNORE INTO prompt_texts(session_id, hash, text) VALUES (?, ?, ?)",
                [(pk, key, text) for key, text in texts.items()],
            )
        return turns

    @_guarded
    def set_prompt_usage(self, scope: str, session: str, usage: Mapping[int, JSON]) -> None:
        """Attach what the provider reported about each turn's answer; unknown turns skipped."""
        if not usage:
            return
        with self._write() as tx:
            pk = self._lookup_session(tx.conn, scope, session)
            if pk is None:
                return
            tx.conn.executemany(
                "UPDATE prompt_turns SET usage = ? WHERE session_id = ? AND turn = ?",
                [(_dump(data, "prompt usage"), pk, int(turn)) for turn, data in usage.items()],
            )

    @_guarded
    def list_prompts(
        self, scope: str, session: str, *, after: int = 0, limit: int = 100, newest: bool = False
    ) -> list[PromptRecord]:
        """Recorded turns, oldest first (the newest ``limit`` with ``newest``)."""
        order = "DESC" if newest else ""
        rows = self._session_rows(
            self._conn(),
            scope,
            session,
            "SELECT turn, at, data, usage FROM prompt_turns WHERE session_id = ? AND turn > ?"
            f" ORDER BY turn {order} LIMIT ?",
            (int(after), _clamp(limit)),
        )
        out = [_record(row, f"recipe of {scope}/{session}") for row in rows]
        return sorted(out, key=lambda r: r.turn)

    @_guarded
    def prompt_texts(self, scope: str, session: str, hashes: Collection[str]) -> dict[str, str]:
        """The stored texts among ``hashes``."""
        wanted = sorted(set(hashes))
        conn = self._conn()
        pk = self._lookup_session(conn, scope, session)
        if pk is None or not wanted:
            return {}
        out: dict[str, str] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            out.update(
                conn.execute(
                    "SELECT hash, text FROM prompt_texts"
                    f" WHERE session_id = ? AND hash IN ({marks})",
                    (pk, *chunk),
                ).fetchall()
            )
        return out

    @_guarded
    def load_state_version(
        self, scope: str, session: str, kind: str, version: int
    ) -> StateRecord | None:
        """That version of the state document: the current one or a kept superseded one."""
        conn = self._conn()
        pk = self._lookup_session(conn, scope, session)
        if pk is None:
            return None
        row = conn.execute(
            "SELECT data, updated_at FROM session_state"
            " WHERE session_id = ? AND kind = ? AND version = ?"
            " UNION ALL SELECT data, saved_at FROM state_versions"
            " WHERE session_id = ? AND kind = ? AND version = ? LIMIT 1",
            (pk, kind, int(version), pk, kind, int(version)),
        ).fetchone()
        if row is None:
            return None
        data = _json_dict(row[0], f"{kind} state version {version} of {scope}/{session}")
        return StateRecord(kind=kind, version=int(version), data=data, updated_at=_parse_ts(row[1]))

    @_guarded
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
        with self._write() as tx:
            pk = self._lookup_session(tx.conn, scope, session)
            if pk is None:
                return
            conn = tx.conn
            conn.execute(
                "DELETE FROM prompt_turns WHERE session_id = ? AND turn < ?", (pk, int(before_turn))
            )
            versions = conn.execute(
                "SELECT kind, version FROM state_versions WHERE session_id = ?", (pk,)
            ).fetchall()
            conn.executemany(
                "DELETE FROM state_versions WHERE session_id = ? AND kind = ? AND version = ?",
                [(pk, k, v) for k, v in versions if v not in keep_versions.get(k, ())],
            )
            keep = set(keep_texts)
            stored = [row[0] for row in conn.execute(_TEXT_KEYS, (pk,))]
            conn.executemany(
                "DELETE FROM prompt_texts WHERE session_id = ? AND hash = ?",
                [(pk, key) for key in stored if key not in keep],
            )


_TEXT_KEYS = "SELECT hash FROM prompt_texts WHERE session_id = ?"


def _record(row: sqlite3.Row | tuple[object, ...], what: str) -> PromptRecord:
    turn, at, data, usage = row
    return PromptRecord(
        turn=int(str(turn)),
        at=_parse_ts(str(at)),
        data=_json_dict(str(data), what),
        usage=_json_dict(str(usage), what) if usage is not None else None,
    )


__all__ = ["ARCHIVE_TABLES", "SQLiteArchive", "keep_version"]
