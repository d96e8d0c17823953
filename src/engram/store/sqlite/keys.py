"""The server's API keys in the SQLite backend (table ``api_keys``, migration ``m003``).

One row per key: its SHA-256 hash (unique), a short prefix for people, a label,
whether it is an admin key, the scopes it is bound to (a JSON array) and
whether it may write there. Revoking sets ``revoked_at``; rows are never deleted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram.models import ApiKeyRecord
from engram.store.common import now as _now
from engram.store.sqlite.connection import SQLiteConnections
from engram.store.sqlite.connection import guarded as _guarded
from engram.store.sqlite.rows import parse_ts as _parse_ts
from engram.store.sqlite.rows import ts as _ts

COLUMNS = "id, prefix, label, admin, scopes, writable, created_at, revoked_at"


def key_record(row: Sequence[Any]) -> ApiKeyRecord:
    """The key of a row of :data:`COLUMNS`."""
    return ApiKeyRecord(
        id=int(row[0]),
        prefix=str(row[1]),
        label=str(row[2]),
        admin=bool(row[3]),
        scopes=tuple(json.loads(row[4])),
        writable=bool(row[5]),
        created_at=_parse_ts(row[6]),
        revoked_at=_parse_ts(row[7]) if row[7] is not None else None,
    )


class SQLiteApiKeys(SQLiteConnections):
    """The API key methods of :class:`~engram.store.sqlite.backend.SQLiteStore`."""

    @_guarded
    def add_api_key(
        self,
        key_hash: str,
        *,
        prefix: str,
        label: str,
        admin: bool,
        scopes: Sequence[str],
        writable: bool,
    ) -> ApiKeyRecord:
        """Store a new key (its hash); ``key_hash`` is unique."""
        with self._write() as tx:
            row = tx.conn.execute(
                "INSERT INTO api_keys(key_hash, prefix, label, admin, scopes, writable, created_at)"
                f" VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}",
                (key_hash, prefix, label, admin, json.dumps(list(scopes)), writable, _ts(_now())),
            ).fetchone()
        return key_record(row)

    @_guarded
    def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not, or None."""
        row = (
            self._conn()
            .execute(f"SELECT {COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,))
            .fetchone()
        )
        return key_record(row) if row is not None else None

    @_guarded
    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first, revoked ones included."""
        rows = self._conn().execute(f"SELECT {COLUMNS} FROM api_keys ORDER BY id")
        return [key_record(row) for row in rows]

    @_guarded
    def revoke_api_key(self, key_id: int) -> bool:
        """Revoke a key; True if it existed and was active until now."""
        with self._write() as tx:
            cur = tx.conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (_ts(_now()), key_id),
            )
            return cur.rowcount > 0
