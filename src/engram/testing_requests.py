"""What the scripted servers of :mod:`engram.testing` share.

The requests they received, and the socket and thread they serve on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from engram.models import JSON

__all__ = ["LocalServer", "RecordedRequest"]


class LocalServer:
    """A scripted server bound to a free port of 127.0.0.1, serving in a background thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Bind and start serving with ``handler``."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # Non-daemon handler threads are joined by server_close(): no thread outlives close().
        server.daemon_threads = False
        server.block_on_close = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self._server.server_address[1])

    def close(self) -> None:
        """Stop serving, wait for the requests being answered, and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: JSON | None
    raw: bytes = field(repr=False, default=b"")

    @property
    def messages(self) -> list[JSON]:
        """The chat messages of the request (empty if none)."""
        if not self.body:
            return []
        messages = self.body.get("messages", [])
        return messages if isinstance(messages, list) else []
