"""Which conversation a proxied chat completion belongs to.

The client sends only its new messages; Engram must know the session they
extend. In order of precedence: the ``X-Engram-Session`` header (with
``X-Engram-Scope``), else ``metadata.session_id`` (with ``metadata.scope``) in
the body, else ``prompt_cache_key``, else ``user``. With none of them the
request is refused: there is no shared default session. The scope, when the
request names none, is the caller's own (a key bound to one scope), else
``default``; whether the caller may use it is the route's check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engram.errors import InvalidQuery
from engram.intake.validation import check_id

SESSION_HEADER = "x-engram-session"
SCOPE_HEADER = "x-engram-scope"


class MissingSession(InvalidQuery):
    """A proxied request that does not say which conversation it continues."""

    field = "X-Engram-Session"


@dataclass(frozen=True, slots=True)
class Target:
    """The conversation of one request: scope (None: the caller's) and session, and the source."""

    scope: str | None
    session: str
    source: str


def find_target(
    headers: Mapping[str, str], body: Mapping[str, Any], *, user_field: str = "user"
) -> Target:
    """The conversation a request continues (headers are matched case-insensitively).

    ``body["user"]`` is the last resort, named ``user_field`` (where the client's API
    carries it: ``metadata.user_id`` for Anthropic's Messages).

    Raises:
        MissingSession: no session is named anywhere.
        InvalidMessage: a named scope or session is not a usable id.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    scope = lowered.get(SCOPE_HEADER) or _text(metadata.get("scope"))
    candidates = (
        ("header", lowered.get(SESSION_HEADER)),
        ("metadata", _text(metadata.get("session_id"))),
        ("prompt_cache_key", _text(body.get("prompt_cache_key"))),
        (user_field, _text(body.get("user"))),
    )
    for source, value in candidates:
        if value:
            return Target(
                scope=check_id("scope", scope) if scope else None,
                session=check_id("session", value),
                source=source,
            )
    raise MissingSession(
        "say which conversation this continues: an X-Engram-Session header, "
        f"metadata.session_id, prompt_cache_key or {user_field}"
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
