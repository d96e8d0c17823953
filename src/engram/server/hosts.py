"""Local mode answers only requests addressed to this machine: no DNS rebinding.

With no API key in the store the server gives every right to a peer on this
machine. A web page on another site can still reach it through the browser: it
resolves its own name (``evil.example``) to 127.0.0.1 and sends requests whose
``Host`` header is that name (DNS rebinding). A pure ASGI middleware refuses
them: in local mode the ``Host`` must name this machine (``localhost``, a
loopback address such as ``127.0.0.1`` or ``[::1]``), be the address the
connection arrived on (the server's own address: a browser that sends it typed
that address, no name was rebound), or be one of
:attr:`~engram.server.settings.ServerSettings.allowed_hosts` (``engram serve
--allowed-host``). Anything else gets 421 before a route runs. A request with
no ``Host`` (no browser sends one without) passes. Once a key exists, keys
protect every route and any ``Host`` is served.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from engram.aio import offload
from engram.server.asgi import header, send_error
from engram.server.auth import KeyCheck

#: The names of this machine that no DNS answer can change.
LOOPBACK_NAMES = frozenset({"localhost"})


def host_name(header: str) -> str:
    """The name of a ``Host`` header, without its port, brackets or trailing dot, lowercased."""
    text = header.strip().lower()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


def is_loopback_name(name: str) -> bool:
    """Whether ``name`` (from :func:`host_name`) can only mean this machine."""
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class LocalHosts:
    """Refuse, in local mode, requests whose ``Host`` does not name this machine (421)."""

    def __init__(self, app: ASGIApp, keys: KeyCheck, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.keys = keys
        self.allowed = frozenset(host_name(name) for name in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 421 for a foreign ``Host`` in local mode."""
        if scope["type"] != "http" or self._addressed_here(scope):
            await self.app(scope, receive, send)
            return
        local = self.keys.cached_local()
        if local is None:
            local = await offload(self.keys.local)
        if not local:
            await self.app(scope, receive, send)
            return
        name = header(scope, b"host")
        await send_error(
            send,
            421,
            "misdirected_request",
            f"this server has no API key, so it answers only requests addressed to this "
            f"machine (localhost, 127.0.0.1, [::1]); Host {name!r} is not one of them. "
            "Open it by one of those names, allow the name with `engram serve "
            "--allowed-host NAME`, or create an API key (`engram keys create`)",
            field="Host",
        )

    def _addressed_here(self, scope: Scope) -> bool:
        given = header(scope, b"host")
        if given is None:
            return True
        name = host_name(given)
        if is_loopback_name(name) or name in self.allowed:
            return True
        server = scope.get("server")
        return server is not None and name == host_name(str(server[0]))
