"""The request body limit, enforced before any route reads the body.

A pure ASGI middleware: a declared ``Content-Length`` over the limit is
answered 413 at once; a body sent without one (chunked) is read here up to the
limit, answered 413 past it, else handed on whole. No request can make the
server hold more than :attr:`~engram.server.settings.ServerSettings.max_body_bytes`.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.server.asgi import send_error


class BodyLimit:
    """Refuse request bodies larger than ``limit`` bytes with 413."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 413 for an oversized body, else pass the request on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.limit:
                await self._refuse(send)
            else:
                await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        await send_error(
            send, 413, "payload_too_large", f"the request body is over {self.limit} bytes"
        )
