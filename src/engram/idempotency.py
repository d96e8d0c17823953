"""Storing a batch once per idempotency key: a retried request stores nothing again.

The key goes into the metadata of each message of the batch (``idempotency_key``). Before a
batch with a key is written, the session's newest :data:`LOOKBACK` messages are
searched for it, under a lock named after the session (in this process, and
across processes on a store that can lock its database, PostgreSQL), so two
copies of one request arriving at the same moment store it once. A retry gets
back the messages the first attempt stored.
"""

from __future__ import annotations

import dataclasses

from engram.errors import InvalidMessage
from engram.intake.checks import text_field
from engram.models import Message, NewMessage
from engram.named_lock import NamedLock, named_lock
from engram.store.base import Store

__all__ = ["IDEMPOTENCY_KEY", "LOOKBACK", "MAX_KEY_BYTES", "check_key", "lock", "marked", "stored"]

#: Metadata key of the messages of a batch stored with an idempotency key.
IDEMPOTENCY_KEY = "idempotency_key"
#: Newest messages of the session searched for the key (a retry follows its request closely).
LOOKBACK = 200
#: Longest key, in UTF-8 bytes.
MAX_KEY_BYTES = 256


def check_key(value: object) -> str:
    """``value`` as a key, or :class:`InvalidMessage` naming ``idempotency_key``."""
    key = text_field(IDEMPOTENCY_KEY, value, max_bytes=MAX_KEY_BYTES)
    if not key.strip():
        raise InvalidMessage(f"{IDEMPOTENCY_KEY} must not be blank")
    return key


def lock(store: Store, scope: str, session: str) -> NamedLock:
    """The lock held while a keyed batch of this session is looked up and written."""
    return named_lock(store, store.url, f"idempotency:{scope}\x1f{session}")


def marked(batch: list[NewMessage], key: str) -> list[NewMessage]:
    """The batch with ``key`` in the metadata of every message of it."""
    return [
        dataclasses.replace(message, metadata={**message.metadata, IDEMPOTENCY_KEY: key})
        for message in batch
    ]


def stored(store: Store, scope: str, session: str, key: str) -> list[Message]:
    """What an earlier batch with ``key`` stored, among the newest messages (empty: none)."""
    recent = store.tail(scope, session, limit=LOOKBACK)
    return [m for m in recent if m.metadata.get(IDEMPOTENCY_KEY) == key]
