"""What a proxied request must be before anything is stored or sent upstream.

The proxy stores the client's messages and then calls the upstream; whatever
would fail after that (a body the upstream call cannot encode, an id the
response headers cannot carry) must be refused first, so a refused request
leaves nothing stored and costs no model call:

* :func:`read_body`: the body is a JSON object nested at most
  :data:`MAX_BODY_DEPTH` levels (a 10,000-deep body is a 422, never a
  ``RecursionError``), with finite numbers only and no lone surrogate in any
  string or key (the upstream body is UTF-8 JSON); the refusal names the path;
* :func:`header_safe`: a scope or session echoed in the ``X-Engram-*`` response
  headers holds only characters a header carries (Latin-1, no control
  character such as a newline); the refusal names the field it came from.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from engram.models import JSON
from engram.proxy.request import InvalidRequest
from engram.proxy.target import SCOPE_HEADER, Target

#: Where a session came from (``Target.source``) -> the request field that named it.
_SESSION_FIELDS = {
    "header": "X-Engram-Session",
    "metadata": "metadata.session_id",
    "prompt_cache_key": "prompt_cache_key",
    "user": "user",
    "metadata.user_id": "metadata.user_id",
    "previous_response_id": "previous_response_id",
}
#: Deepest nesting of a proxied body (tool schemas nest; nothing legitimate nests further).
MAX_BODY_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
#: What a header value may not hold: control characters and anything past Latin-1.
_NOT_IN_HEADER = re.compile("[\x00-\x1f\x7f]|[^\x00-\xff]")


def read_body(raw: bytes) -> JSON:
    """The request body as a JSON object, checked all through (see the module docs).

    Raises:
        InvalidRequest: naming ``body`` or the path of the value at fault.
    """
    try:
        body = json.loads(raw)
    except RecursionError:
        raise InvalidRequest(
            f"the request body is nested deeper than {MAX_BODY_DEPTH} levels", "body"
        ) from None
    except ValueError:
        raise InvalidRequest("the request body is not JSON", "body") from None
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", "body")
    _walk(body)
    return body


def _walk(body: JSON) -> None:
    """Check every value of ``body`` without recursion (depth, numbers, text)."""
    pending: list[tuple[Any, str, int]] = [(body, "", 1)]
    while pending:
        value, path, depth = pending.pop()
        if isinstance(value, Mapping | list) and depth > MAX_BODY_DEPTH:
            raise InvalidRequest(
                f"the request body is nested deeper than {MAX_BODY_DEPTH} levels (at {path})",
                path,
            )
        if isinstance(value, Mapping):
            for key, item in value.items():
                where = f"{path}.{key}" if path else str(key)
                _text(str(key), where)
                pending.append((item, where, depth + 1))
        elif isinstance(value, list):
            pending.extend((item, f"{path}.{i}", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            _text(value, path)
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidRequest(f"{path} is {value}, which JSON cannot carry", path)


def _text(value: str, path: str) -> None:
    if not value.isascii() and _SURROGATE.search(value):
        raise InvalidRequest(
            f"{path} holds a lone surrogate (half of a UTF-16 pair), which UTF-8 cannot encode",
            path,
        )


def header_safe(value: str, field: str) -> str:
    """``value`` if the response headers can carry it as it is.

    Raises:
        InvalidRequest: naming ``field``: a control character (a newline) or a
            character past Latin-1 (an emoji) would break the response headers.
    """
    found = _NOT_IN_HEADER.search(value)
    if found is not None:
        raise InvalidRequest(
            f"{field} {value[:40]!r} holds {found.group()!r}, which the X-Engram-* response "
            "headers cannot carry: use letters, digits and punctuation (Latin-1, no control "
            "characters)",
            field,
        )
    return value


def check_target(target: Target, scope: str, headers: Mapping[str, str]) -> None:
    """Refuse a session or ``scope`` the response headers cannot carry, naming its field.

    ``scope`` is the request's (``target.scope``) or, when it names none, the key's own;
    a key's scope that cannot travel is refused as the ``X-Engram-Scope`` to send instead.

    Raises:
        InvalidRequest: see :func:`header_safe`.
    """
    header_safe(target.session, _SESSION_FIELDS.get(target.source, "session"))
    from_body = target.scope is not None and all(key.lower() != SCOPE_HEADER for key in headers)
    if target.source == "previous_response_id":  # the id carries its conversation's scope
        header_safe(scope, "previous_response_id")
    else:
        header_safe(scope, "metadata.scope" if from_body else "X-Engram-Scope")
