"""Storing a batch once per idempotency key: a retried request stores nothing again.

:func:`store_once` is the one way in (``Session.add_many(..., idempotency_key=...)``,
which the REST append and the proxy call). Each message of a batch stored with a
key carries a record of the request in its metadata, under the reserved key
:data:`RECORD`: ``{"key": K, "fingerprint": F}``, where ``F`` is the SHA-256 of
the canonical JSON of the batch (every stored field but the timestamp: a client
may stamp its retry again). The record is written with the messages, in the same
append, so a batch is never stored without it on any backend. Intake refuses
:data:`RECORD` in a caller's metadata, so user metadata (an ``idempotency_key``
of its own included) never poses as a key; an edit and the exports leave the
record out (:func:`without_record`).

Before a keyed batch is written, the session's newest :data:`LOOKBACK` messages
are searched for the key, under a lock named after the session (in this process,
and across processes on a store that can lock its database, PostgreSQL), so two
copies of one request arriving at the same moment store it once:

* the same key with the same messages (a retry) gets back what the first
  attempt stored, and nothing is written;
* the same key with other messages raises :class:`~engram.errors.IdempotencyConflict`,
  and nothing is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engram.errors import IdempotencyConflict, InvalidMessage
from engram.intake.checks import text_field
from engram.models import IDEMPOTENCY_RECORD, JSON, Message, NewMessage
from engram.named_lock import named_lock
from engram.store.base import Store

__all__ = [
    "LOOKBACK",
    "MAX_KEY_BYTES",
    "RECORD",
    "check_key",
    "fingerprint",
    "key_of",
    "store_once",
    "without_record",
]

#: Reserved metadata key of the record a keyed batch's messages carry (intake refuses it).
RECORD = IDEMPOTENCY_RECORD
#: Newest messages of the session searched for the key (a retry follows its request closely).
LOOKBACK = 200
#: Longest key, in UTF-8 bytes.
MAX_KEY_BYTES = 256

#: The fields of a message its fingerprint covers (all it stores but ``created_at``).
_FINGERPRINTED = ("role", "content", "name", "tool_calls", "tool_call_id", "metadata", "parts")


def check_key(value: object) -> str:
    """``value`` as a key, or :class:`InvalidMessage` naming ``idempotency_key``."""
    key = text_field("idempotency_key", value, max_bytes=MAX_KEY_BYTES)
    if not key.strip():
        raise InvalidMessage("idempotency_key must not be blank", field="idempotency_key")
    return key


def fingerprint(batch: Sequence[NewMessage]) -> str:
    """SHA-256 (hex) of the canonical JSON of a checked batch, timestamps left out."""
    fields = [{name: getattr(message, name) for name in _FINGERPRINTED} for message in batch]
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def key_of(message: Message) -> str | None:
    """The idempotency key ``message`` was stored with, or None."""
    record = message.metadata.get(RECORD)
    key = record.get("key") if isinstance(record, Mapping) else None
    return key if isinstance(key, str) else None


def without_record(metadata: Mapping[str, Any]) -> JSON:
    """A copy of stored metadata without the idempotency record: the caller's own part."""
    return {name: value for name, value in metadata.items() if name != RECORD}


def store_once(
    store: Store,
    scope: str,
    session: str,
    key: object,
    batch: list[NewMessage],
    write: Callable[[list[NewMessage]], list[Message]],
) -> list[Message]:
    """Store a checked ``batch`` with ``write`` unless ``key`` already stored it.

    Returns the messages stored now, or those the first request with ``key``
    stored (a retry: nothing is written).

    Raises:
        InvalidMessage: ``key`` is not a usable key (a string, not blank, at most
            :data:`MAX_KEY_BYTES`).
        IdempotencyConflict: ``key`` already stored other messages in this session.

    """
    key = check_key(key)
    record = {"key": key, "fingerprint": fingerprint(batch)}
    with named_lock(store, store.url, f"idempotency:{scope}\x1f{session}"):
        recent = store.tail(scope, session, limit=LOOKBACK)
        earlier = [m for m in recent if key_of(m) == key]
        if not earlier:
            marked = [
                dataclasses.replace(m, metadata={**m.metadata, RECORD: record}) for m in batch
            ]
            return write(marked)
        if earlier[0].metadata[RECORD].get("fingerprint") != record["fingerprint"]:
            raise IdempotencyConflict(
                f"idempotency key {key!r} already stored other messages in session "
                f"{session!r}: a retry must send the same messages, new messages need a new key",
                key=key,
            )
        return earlier
