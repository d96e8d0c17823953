"""The bytes of a prompt as sent: canonical JSON, its SHA-256, and shared prefixes.

A prompt is the list of chat messages sent. Its bytes are the canonical JSON
of that list (keys sorted, no spaces, UTF-8), so two prompts are the same
prompt exactly when their bytes are equal, whatever the key order of the
dicts that held them. The recipe keeps the SHA-256 of those bytes, and each
message's byte size and short digest (:data:`KEY_HEX` hex digits of its own
SHA-256): they give the share of a prompt that repeats the previous prompt's
start, and which message of a replay differs, without keeping either prompt.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes of ``value``: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def text_key(text: str) -> str:
    """The SHA-256 (hex) a text is stored under."""
    return hashlib.sha256(text.encode()).hexdigest()


#: Hex digits of a message's short digest.
KEY_HEX = 10


def prompt_digest(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[int], list[str]]:
    """SHA-256 (hex) of the prompt's canonical bytes, and each message's size and short digest.

    The bytes are ``[`` + the messages' canonical JSON joined by ``,`` + ``]``:
    exactly :func:`canonical` of the whole list.
    """
    pieces = [canonical(m) for m in messages]
    digest = hashlib.sha256(b"[" + b",".join(pieces) + b"]").hexdigest()
    keys = [hashlib.sha256(p).hexdigest()[:KEY_HEX] for p in pieces]
    return digest, [len(p) for p in pieces], keys


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
