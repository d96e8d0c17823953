"""The API takes JSON only, so no cross-site "simple request" can write.

A web page of another site may make the browser send a ``POST`` without asking
the server first (no CORS preflight) when its body is ``text/plain``, a form
(``application/x-www-form-urlencoded``, ``multipart/form-data``) or absent.
Every body of the API (REST under ``/v1``, the proxy, MCP at ``/mcp``) is JSON,
and a browser asks first before sending ``application/json`` to another site,
which this server never allows. So a pure ASGI middleware answers 415 to any
``POST``, ``PUT`` or ``PATCH`` of those paths whose ``Content-Type`` is not JSON
(``application/json`` or ``application/<x>+json``), before a route reads a byte.
The dashboard's own forms are outside these paths; they keep their form
encoding behind their same-origin check.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from engram.server.asgi import header, send_error

#: Methods whose body the API reads.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` value is JSON (parameters such as ``charset`` allowed)."""
    if content_type is None:
        return False
    essence = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = essence.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


class JsonOnly:
    """Refuse non-JSON bodies (415) on the paths under ``prefixes``."""

    def __init__(self, app: ASGIApp, prefixes: Iterable[str]) -> None:
        self.app = app
        self.prefixes = tuple(prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 415 for a body that is not declared JSON."""
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS or not self._api(scope):
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-type")
        if is_json(declared):
            await self.app(scope, receive, send)
            return
        said = f"this request's Content-Type is {declared!r}" if declared else "it has none"
        await send_error(
            send,
            415,
            "unsupported_media_type",
            f"send the body as JSON with Content-Type: application/json ({said})",
            field="Content-Type",
        )

    def _api(self, scope: Scope) -> bool:
        path = str(scope.get("path", ""))
        return any(path == prefix or path.startswith(prefix + "/") for prefix in self.prefixes)
