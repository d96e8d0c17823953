"""Credentials never travel back to the client in an upstream's error body.

An upstream that refuses a call often quotes what it was sent ("Incorrect API
key provided: sk-proj-..."). The proxy passes the upstream's error status and
body through, so it first replaces whatever looks like a credential: the
configured upstream key itself, OpenAI-style keys (``sk-...``, Engram's
``egk_...``) and bearer tokens (``Bearer ...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: What a credential is replaced by.
REDACTED = "[redacted]"

_PATTERNS = (
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]+=*"),
    re.compile(r"\b(?:sk|egk)[-_][A-Za-z0-9\-_]{8,}"),
)


def redact(body: bytes, secrets: Iterable[str | None] = ()) -> bytes:
    """``body`` with every credential in it replaced by :data:`REDACTED`.

    Bytes that are not UTF-8 are kept as they are.
    """
    text = body.decode("utf-8", "surrogateescape")
    return redact_text(text, secrets).encode("utf-8", "surrogateescape")


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with ``secrets`` and whatever looks like a credential replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text
