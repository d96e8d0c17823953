"""Stored messages for the context tests, each with its exact size in the storage encoding."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engram import tokens
from engram.models import Message

STORAGE = tokens.storage_counter()
WHEN = datetime(2024, 5, 1, tzinfo=UTC)


def stored(mid: int, role: str, content: str, **extra: Any) -> Message:
    """Message ``mid`` of session ``chat`` as a store returns it, ``tokens`` counted exactly."""
    return Message(
        id=mid,
        scope="s",
        session="chat",
        role=role,
        content=content,
        created_at=WHEN,
        tokens=tokens.count_message(STORAGE, role, content, **extra),
        **extra,
    )
