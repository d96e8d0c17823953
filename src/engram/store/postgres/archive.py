"""The prompt archive of the PostgreSQL backend: recipes per turn, their texts, state versions.

``prompt_turns`` holds one recipe per recorded turn, numbered per session from
1 while the session row is locked (two servers recording one session queue
there), ``prompt_texts`` the texts recipes name by SHA-256 (once per session),
and ``state_versions`` the superseded documents of the versioned state kinds,
copied by ``save_state`` in the transaction that replaces them. All three
rows go with their session (``ON DELETE CASCADE``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from engram.models import JSON, PromptRecord, StateRecord
from engram.store.batch_check import json_value
from engram.store.common import clamp as _clamp
from engram.store.common import utc as _utc
from engram.store.postgres.connection import Conn, Jsonb, PostgresConnections

_KEEP_VERSION = """
    INSERT INTO state_versions (scope, session, kind, version, data, saved_at)
    SELECT scope, session, kind, version, data, updated_at FROM states
    WHERE scope = %s AND session = %s AND kind = %s AND version = %s
    ON CONFLICT DO NOTHING
"""


def keep_version(conn: Conn, scope: str, session: str, kind: str, version: int) -> None:
    """Copy the state document about to be replaced into ``state_versions``."""
    conn.execute(_KEEP_VERSION, (scope, session, kind, int(version)))


class PostgresArchive(PostgresConnections):
    """The :class:`~engram.store.base.PromptArchive` methods of the PostgreSQL store."""

    def add_prompts(
        self,
        scope: str,
        session: str,
        prompts: Sequence[tuple[datetime, JSON]],
        texts: Mapping[str, str],
    ) -> list[int]:
        """Append recipes as the session's next turns, with the texts they name, atomically."""
        rows = [(_utc(at), json_value(data, "prompt recipe")) for at, data in prompts]
        if not rows:
            return []

        def work(conn: Conn) -> list[int]:
            locked = conn.execute(
                "SELECT 1 FROM sessions WHERE scope = %s AND id = %s FOR UPDATE", (scope, session)
            ).fetchone()
            if locked is None:
                return []
            row = conn.execute(
                "SELECT coalesce(max(turn), 0) FROM prompt_turns WHERE scope = %s AND session = %s",
                (scope, session),
            ).fetchone()
            last = int(row[0]) if row is not None else 0
            turns = list(range(last + 1, last + 1 + len(rows)))
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO prompt_turns (scope, session, turn, at, data)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    [
                        (scope, session, turn, at, Jsonb(data))
                        for turn, (at, data) in zip(turns, rows, strict=True)
                    ],
                )
                if texts:
                    cur.executemany(
                        "INSERT INTO prompt_texts (scope, session, hash, text)"
                        " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [(scope, session, key, text) for key, text in texts.items()],
                    )
            return turns

        return self._write(work)

    def set_prompt_usage(self, scope: str, session: str, usage: Mapping[int, JSON]) -> None:
        """Attach what the provider reported about each turn's answer; unknown turns skipped."""
        if not usage:
            return
        values = [
            (Jsonb(json_value(data, "prompt usage")), scope, session, int(turn))
            for turn, data in usage.items()
        ]

        def work(conn: Conn) -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE prompt_turns SET usage = %s"
                    " WHERE scope = %s AND session = %s AND turn = %s",
                    values,
                )

        self._write(work)

    def list_prompts(
        self, scope: str, session: str, *, after: int = 0, limit: int = 100, newest: bool = False
    ) -> list[PromptRecord]:
        """Recorded turns, oldest first (the newest ``limit`` with ``newest``)."""
        order = "DESC" if newest else "ASC"

        def work(conn: Conn) -> list[PromptRecord]:
            rows = conn.execute(
                "SELECT turn, at, data, usage FROM prompt_turns"
                " WHERE scope = %s AND session = %s AND turn > %s"
                f" ORDER BY turn {order} LIMIT %s",
                (scope, session, int(after), _clamp(limit)),
            ).fetchall()
            return sorted((_record(row) for row in rows), key=lambda r: r.turn)

        return self._read(work)

    def prompt_texts(self, scope: str, session: str, hashes: Collection[str]) -> dict[str, str]:
        """The stored texts among ``hashes``."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}

        def work(conn: Conn) -> dict[str, str]:
            rows = conn.execute(
                "SELECT hash, text FROM prompt_texts"
                " WHERE scope = %s AND session = %s AND hash = ANY(%s)",
                (scope, session, wanted),
            ).fetchall()
            return {str(row[0]): str(row[1]) for row in rows}

        return self._read(work)

    def load_state_version(
        self, scope: str, session: str, kind: str, version: int
    ) -> StateRecord | None:
        """That version of the state document: the current one or a kept superseded one."""
        key = (scope, session, kind, int(version))

        def work(conn: Conn) -> StateRecord | None:
            row = conn.execute(
                "SELECT data, updated_at FROM states"
                " WHERE scope = %s AND session = %s AND kind = %s AND version = %s"
                " UNION ALL SELECT data, saved_at FROM state_versions"
                " WHERE scope = %s AND session = %s AND kind = %s AND version = %s LIMIT 1",
                (*key, *key),
            ).fetchone()
            if row is None:
                return None
            return StateRecord(kind, int(version), dict(row[0]), _utc(row[1]))

        return self._read(work)

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
        kept = [(kind, int(v)) for kind, versions in keep_versions.items() for v in versions]
        kinds, numbers = [k for k, _ in kept], [v for _, v in kept]

        def work(conn: Conn) -> None:
            conn.execute(
                "DELETE FROM prompt_turns WHERE scope = %s AND session = %s AND turn < %s",
                (scope, session, int(before_turn)),
            )
            conn.execute(
                "DELETE FROM state_versions v WHERE v.scope = %s AND v.session = %s"
                " AND NOT EXISTS (SELECT 1 FROM unnest(%s::text[], %s::int[]) AS k(kind, version)"
                " WHERE k.kind = v.kind AND k.version = v.version)",
                (scope, session, kinds, numbers),
            )
            conn.execute(
                "DELETE FROM prompt_texts WHERE scope = %s AND session = %s"
                " AND NOT (hash = ANY(%s))",
                (scope, session, sorted(set(keep_texts))),
            )

        self._write(work)


def _record(row: tuple[Any, ...]) -> PromptRecord:
    turn, at, data, usage = row
    return PromptRecord(int(turn), _utc(at), dict(data), dict(usage) if usage is not None else None)


__all__ = ["PostgresArchive", "keep_version"]
