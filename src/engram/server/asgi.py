"""What the pure ASGI middlewares share: reading a request header, answering an error.

The middlewares (:mod:`~engram.server.hosts`, :mod:`~engram.server.json_only`,
:mod:`~engram.server.body_limit`) run before FastAPI sees a request, so they answer
in the same ``{"error": {type, message, field}}`` shape through :func:`send_error`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from starlette.types import Scope, Send

from engram.server.errors import error_body


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (``name`` in lower case), or None."""
    for key, value in scope.get("headers") or ():
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def send_error(
    send: Send,
    status: int,
    kind: str,
    message: str,
    field: str | None = None,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Answer an error from a pure ASGI middleware, in the same shape as every other."""
    body = json.dumps(error_body(kind, message, field)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
