"""The bytes of a prompt as sent: canonical JSON, its SHA-256, and shared prefixes.

A prompt is the list of chat messages sent. Its bytes are the canonical JSON
of that list (keys sorted, no spaces, UTF-8), so two prompts are the same
prompt exactly when their bytes are equal, whatever the key order of the
dicts that held them. The recipe keeps the SHA-256 of those bytes, and each
message's byte size and short digest (its CRC-32): they give the share of a
prompt that repeats the previous prompt's start, and which message of a
replay differs, without keeping either prompt.
"""

from __future__ import annotations

import hashlib
import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes of ``value``: sorted keys, no spaces, UTF-8."""
    return _ENCODER.encode(value).encode()


#: A message's canonical bytes and its short digest (CRC-32, 8 hex digits).
Piece = tuple[bytes, str]


def piece(message: Mapping[str, Any]) -> Piece:
    """The canonical bytes of one message and their short digest."""
    raw = canonical(message)
    return raw, f"{zlib.crc32(raw):08x}"


class PieceCache:
    """Pieces of stored messages sent as stored, by message id (least recently used out).

    A stored message never changes and its id is never reused, so its bytes as
    sent are encoded once, not on every turn whose window still holds it.
    Bounded by :data:`MAX_BYTES`. Thread-safe.
    """

    MAX_BYTES = 32 * 1024 * 1024

    def __init__(self) -> None:
        """An empty cache."""
        self._lock = threading.Lock()
        self._pieces: OrderedDict[int, Piece] = OrderedDict()
        self._bytes = 0

    def pieces(self, stored: Sequence[tuple[int, Mapping[str, Any]]]) -> list[Piece]:
        """The pieces of ``stored`` messages, ``(id, message as sent)``, in order."""
        with self._lock:
            found = [self._pieces.get(message_id) for message_id, _ in stored]
            for (message_id, _), hit in zip(stored, found, strict=True):
                if hit is not None:
                    self._pieces.move_to_end(message_id)
        made = [hit or piece(message) for (_, message), hit in zip(stored, found, strict=True)]
        with self._lock:
            for (message_id, _), new, hit in zip(stored, made, found, strict=True):
                if hit is None and message_id not in self._pieces:
                    self._pieces[message_id] = new
                    self._bytes += len(new[0])
            while self._bytes > self.MAX_BYTES and self._pieces:
                self._bytes -= len(self._pieces.popitem(last=False)[1][0])
        return made


def text_key(text: str) -> str:
    """The SHA-256 (hex) a text is stored under."""
    return hashlib.sha256(text.encode()).hexdigest()


def prompt_digest(
    messages: Sequence[Mapping[str, Any]], pieces: Sequence[Piece] | None = None
) -> tuple[str, list[int], list[str]]:
    """SHA-256 (hex) of the prompt's canonical bytes, and each message's size and short digest.

    The bytes are ``[`` + the messages' canonical JSON joined by ``,`` + ``]``:
    exactly :func:`canonical` of the whole list. ``pieces`` are the messages'
    :func:`piece` when the caller has them already. A short digest is the
    CRC-32 of a message's bytes: enough to tell two neighbouring prompts apart.
    """
    if pieces is None:
        pieces = [piece(m) for m in messages]
    whole = hashlib.sha256(b"[")
    for index, (raw, _) in enumerate(pieces):
        if index:
            whole.update(b",")
        whole.update(raw)
    whole.update(b"]")
    return whole.hexdigest(), [len(raw) for raw, _ in pieces], [key for _, key in pieces]


def first_difference(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (bytes)."""
    if a == b:
        return len(a)
    low, high = 0, min(len(a), len(b))
    while low < high:  # bisect on equal prefixes: fast on long prompts
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def shared_share(keys: Sequence[object], sizes: Sequence[int], before: Sequence[object]) -> float:
    """Share of a prompt's bytes in its leading messages identical to ``before``'s.

    ``keys`` are the short digests of the prompt's messages, ``sizes`` their
    byte sizes, ``before`` the keys of the previous prompt.
    Providers cache whole leading messages at best, so the share counts
    messages, not a partial one.
    """
    total = sum(sizes) or 1
    shared = 0
    for key, size, previous in zip(keys, sizes, before, strict=False):
        if key != previous:
            break
        shared += size
    return shared / total
