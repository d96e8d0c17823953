"""Rows of the PostgreSQL backend to Engram's values: column lists, timestamps, records.

Kept apart from :mod:`engram.store.postgres.backend` and its helpers (connections,
queries) so the decoding rules live in one place. psycopg decodes JSON and
``jsonb`` columns itself; timestamps come back as aware datetimes and are
returned in UTC.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram.models import MemoryRecord, Message, SessionInfo
from engram.store.common import utc, utc_or_none

MESSAGE_COLUMNS = (
    "id, scope, session, role, content, created_at, tokens, name, tool_calls, tool_call_id, "
    "metadata, parts"
)
#: Columns of ``MESSAGE_COLUMNS``: what a query selects after them starts at this index.
MESSAGE_WIDTH = 12
SESSION_COLUMNS = (
    "scope, id, created_at, updated_at, message_count, token_count, policy, "
    "first_message_at, last_message_at"
)
MEMORY_COLUMNS = "id, scope, content, created_at, updated_at, source_session, metadata"


def message(row: Sequence[Any]) -> Message:
    """A message from a row of ``MESSAGE_COLUMNS``."""
    return Message(
        id=int(row[0]),
        scope=row[1],
        session=row[2],
        role=row[3],
        content=row[4],
        created_at=utc(row[5]),
        tokens=int(row[6]),
        name=row[7],
        tool_calls=row[8],
        tool_call_id=row[9],
        metadata=dict(row[10] or {}),
        parts=row[11],
    )


def session(row: Sequence[Any]) -> SessionInfo:
    """A session from a row of ``SESSION_COLUMNS``."""
    return SessionInfo(
        scope=row[0],
        id=row[1],
        created_at=utc(row[2]),
        updated_at=utc(row[3]),
        message_count=int(row[4]),
        token_count=int(row[5]),
        policy=row[6],
        first_message_at=utc_or_none(row[7]),
        last_message_at=utc_or_none(row[8]),
    )


def memory(row: Sequence[Any]) -> MemoryRecord:
    """A memory from a row of ``MEMORY_COLUMNS``."""
    return MemoryRecord(
        id=int(row[0]),
        scope=row[1],
        content=row[2],
        created_at=utc(row[3]),
        updated_at=utc(row[4]),
        source_session=row[5],
        metadata=dict(row[6] or {}),
    )
