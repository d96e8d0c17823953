"""The server's API keys in the PostgreSQL backend (table ``api_keys``, migration 4).

One row per key: its SHA-256 hash (unique), a short prefix for people, a label,
whether it is an admin key, the scopes it is bound to (``jsonb`` array) and
whether it may write there. Revoking sets ``revoked_at``; rows are never deleted.
Every server sharing the database sees the same keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram.models import ApiKeyRecord
from engram.store.common import utc as _utc
from engram.store.common import utc_or_none as _utc_or_none
from engram.store.postgres.connection import Conn, Jsonb, PostgresConnections

COLUMNS = "id, prefix, label, admin, scopes, writable, created_at, revoked_at"


def key_record(row: Sequence[Any]) -> ApiKeyRecord:
    """The key of a row of :data:`COLUMNS`."""
    return ApiKeyRecord(
        id=int(row[0]),
        prefix=str(row[1]),
        label=str(row[2]),
        admin=bool(row[3]),
        scopes=tuple(row[4]),
        writable=bool(row[5]),
        created_at=_utc(row[6]),
        revoked_at=_utc_or_none(row[7]),
    )


class PostgresApiKeys(PostgresConnections):
    """The API key methods of :class:`~engram.store.postgres.backend.PostgresStore`."""

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

        def work(conn: Conn) -> ApiKeyRecord:
            row = conn.execute(
                "INSERT INTO api_keys (key_hash, prefix, label, admin, scopes, writable)"
                f" VALUES (%s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}",
                (key_hash, prefix, label, admin, Jsonb(list(scopes)), writable),
            ).fetchone()
            assert row is not None
            return key_record(row)

        return self._write(work)

    def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not, or None."""

        def work(conn: Conn) -> ApiKeyRecord | None:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM api_keys WHERE key_hash = %s", (key_hash,)
            ).fetchone()
            return key_record(row) if row is not None else None

        return self._read(work)

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first, revoked ones included."""
        return self._read(
            lambda conn: [
                key_record(row)
                for row in conn.execute(f"SELECT {COLUMNS} FROM api_keys ORDER BY id").fetchall()
            ]
        )

    def revoke_api_key(self, key_id: int) -> bool:
        """Revoke a key; True if it existed and was active until now."""

        def work(conn: Conn) -> bool:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL",
                (key_id,),
            )
            return cur.rowcount > 0

        return self._write(work)
