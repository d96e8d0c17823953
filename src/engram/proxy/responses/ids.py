"""Response ids that say which conversation they belong to.

Engram's response ids carry their scope and session: ``resp_`` then 24 hex
characters of randomness, then the JSON ``[scope, session]`` in URL-safe
base64. A ``previous_response_id`` is read back into its conversation without
any lookup table, on any server sharing the store; whether the caller may use
that scope is still checked (the id grants nothing). The stored answer keeps
its response id (metadata ``response_id``), so a later request can continue
from it, or fork from it, exactly.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass

from engram.errors import InvalidQuery

#: Prefix of a response id.
PREFIX = "resp_"
#: Hex characters of randomness after the prefix.
NONCE = 24
#: Metadata key of the response id a stored answer was given.
RESPONSE_ID = "response_id"


class UnknownResponse(InvalidQuery):
    """A ``previous_response_id`` this server did not make."""

    field = "previous_response_id"


@dataclass(frozen=True, slots=True)
class ResponseRef:
    """What a response id names: its conversation."""

    scope: str
    session: str


def new_response_id(scope: str, session: str) -> str:
    """A fresh response id of the conversation ``scope``/``session``."""
    payload = json.dumps([scope, session], ensure_ascii=False, separators=(",", ":"))
    encoded = base64.urlsafe_b64encode(payload.encode("utf-8")).decode("ascii").rstrip("=")
    return f"{PREFIX}{secrets.token_hex(NONCE // 2)}{encoded}"


def read_response_id(value: object) -> ResponseRef:
    """The conversation a response id names.

    Raises:
        UnknownResponse: not a response id of an Engram server.
    """
    text = value if isinstance(value, str) else ""
    encoded = text[len(PREFIX) + NONCE :]
    try:
        if not text.startswith(PREFIX) or not encoded:
            raise ValueError
        padded = encoded + "=" * (-len(encoded) % 4)
        scope, session = json.loads(base64.urlsafe_b64decode(padded).decode("utf-8"))
        if not isinstance(scope, str) or not isinstance(session, str):
            raise ValueError
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise UnknownResponse(
            f"previous_response_id {text[:60]!r} is not a response of this Engram server: "
            "send the id of one of its answers, or name the conversation with X-Engram-Session"
        ) from None
    return ResponseRef(scope, session)


def item_base(response_id: str) -> str:
    """The stem of the ids of a response's output items (``msg_<stem>``, ``fc_<stem>_0``)."""
    return response_id[len(PREFIX) : len(PREFIX) + NONCE]
