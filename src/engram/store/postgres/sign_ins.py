"""Dashboard sign-ins in the PostgreSQL backend (table ``sign_ins``, migration 10).

One row per sign-in: the SHA-256 of its random id, the id of its API key and
when it ends (seconds since the epoch). Every server on the database shares them.
"""

from __future__ import annotations

from engram.models import ApiKeyRecord
from engram.store.postgres.connection import Conn, PostgresConnections
from engram.store.postgres.keys import COLUMNS, key_record

_KEY_COLUMNS = ", ".join(f"k.{column}" for column in COLUMNS.split(", "))


class PostgresSignIns(PostgresConnections):
    """The sign-in methods of :class:`~engram.store.postgres.backend.PostgresStore`."""

    def add_sign_in(
        self, sign_in_hash: str, key_id: int, ends_at: float, *, now: float, limit: int
    ) -> None:
        """Keep a sign-in until ``ends_at``; ended ones and those past ``limit`` go first."""

        def work(conn: Conn) -> None:
            conn.execute("DELETE FROM sign_ins WHERE ends_at <= %s", (now,))
            row = conn.execute("SELECT count(*) FROM sign_ins").fetchone()
            count = int(row[0]) if row is not None else 0
            if count >= limit:
                conn.execute(
                    "DELETE FROM sign_ins WHERE sign_in_hash IN"
                    " (SELECT sign_in_hash FROM sign_ins ORDER BY ends_at LIMIT %s)",
                    (count - limit + 1,),
                )
            conn.execute(
                "INSERT INTO sign_ins (sign_in_hash, key_id, ends_at) VALUES (%s, %s, %s)",
                (sign_in_hash, key_id, ends_at),
            )

        self._write(work)

    def find_sign_in(self, sign_in_hash: str, now: float) -> ApiKeyRecord | None:
        """The active key of a sign-in not ended by ``now``, or None."""

        def work(conn: Conn) -> ApiKeyRecord | None:
            row = conn.execute(
                f"SELECT {_KEY_COLUMNS} FROM sign_ins s JOIN api_keys k ON k.id = s.key_id"
                " WHERE s.sign_in_hash = %s AND s.ends_at > %s AND k.revoked_at IS NULL",
                (sign_in_hash, now),
            ).fetchone()
            return key_record(row) if row is not None else None

        return self._read(work)

    def delete_sign_in(self, sign_in_hash: str) -> None:
        """Delete a sign-in; nothing happens for an unknown one."""
        self._write(
            lambda conn: conn.execute(
                "DELETE FROM sign_ins WHERE sign_in_hash = %s", (sign_in_hash,)
            )
        )
