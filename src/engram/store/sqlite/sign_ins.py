"""Dashboard sign-ins in the SQLite backend (table ``sign_ins``, migration ``m010``).

One row per sign-in: the SHA-256 of its random id, the id of its API key and
when it ends (seconds since the epoch). Every process on the file shares them.
"""

from __future__ import annotations

from engram.models import ApiKeyRecord
from engram.store.sqlite.connection import SQLiteConnections
from engram.store.sqlite.connection import guarded as _guarded
from engram.store.sqlite.keys import COLUMNS, key_record

_KEY_COLUMNS = ", ".join(f"k.{column}" for column in COLUMNS.split(", "))


class SQLiteSignIns(SQLiteConnections):
    """The sign-in methods of :class:`~engram.store.sqlite.backend.SQLiteStore`."""

    @_guarded
    def add_sign_in(
        self, sign_in_hash: str, key_id: int, ends_at: float, *, now: float, limit: int
    ) -> None:
        """Keep a sign-in until ``ends_at``; ended ones and those past ``limit`` go first."""
        with self._write() as tx:
            tx.conn.execute("DELETE FROM sign_ins WHERE ends_at <= ?", (now,))
            (count,) = tx.conn.execute("SELECT count(*) FROM sign_ins").fetchone()
            if count >= limit:
                tx.conn.execute(
                    "DELETE FROM sign_ins WHERE sign_in_hash IN"
                    " (SELECT sign_in_hash FROM sign_ins ORDER BY ends_at LIMIT ?)",
                    (count - limit + 1,),
                )
            tx.conn.execute(
                "INSERT INTO sign_ins(sign_in_hash, key_id, ends_at) VALUES (?, ?, ?)",
                (sign_in_hash, key_id, ends_at),
            )

    @_guarded
    def find_sign_in(self, sign_in_hash: str, now: float) -> ApiKeyRecord | None:
        """The active key of a sign-in not ended by ``now``, or None."""
        row = (
            self._conn()
            .execute(
                f"SELECT {_KEY_COLUMNS} FROM sign_ins s JOIN api_keys k ON k.id = s.key_id"
                " WHERE s.sign_in_hash = ? AND s.ends_at > ? AND k.revoked_at IS NULL",
                (sign_in_hash, now),
            )
            .fetchone()
        )
        return key_record(row) if row is not None else None

    @_guarded
    def delete_sign_in(self, sign_in_hash: str) -> None:
        """Delete a sign-in; nothing happens for an unknown one."""
        with self._write() as tx:
            tx.conn.execute("DELETE FROM sign_ins WHERE sign_in_hash = ?", (sign_in_hash,))
