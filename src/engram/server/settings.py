"""The server's own settings: limits and the authentication cache.

The store, model and compaction settings stay in :class:`engram.config.Config`
(the ``Engram`` object the app is given carries them); these are only what
the HTTP layer decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engram.proxy.settings import ProxySettings
from engram.server.throttle import KEY_FAILURE_WINDOW, KEY_FAILURES
from engram.store.base import MAX_PAGE

#: Largest request body accepted, in bytes (a batch of large messages fits).
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Most messages appended by one request (the request schema says so).
MAX_BATCH = 1000
#: Most rows one page of a listing returns (the store's own cap; the schemas say so).
MAX_PAGE_SIZE = MAX_PAGE
#: How long a dashboard sign-in lasts, in seconds (12 hours).
SESSION_SECONDS = 12 * 3600.0
#: How long a checked key (or "no key exists") is trusted before the store is asked again.
KEY_CACHE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What the HTTP layer enforces.

    Attributes:
        max_body_bytes: Largest request body; a larger one gets 413.
        key_cache_seconds: How long an API key check is reused: a revoked key
            stops working, and a first key created while the server runs starts
            being required, within this time.
        title: The API's title in the OpenAPI document.
        extra_links: Names and paths printed by ``engram serve`` at start-up
            (other interfaces mounted on the app add theirs).
        proxy: The upstream model endpoint of ``/v1/chat/completions`` and
            ``/v1/responses`` (None: the proxy answers that no upstream is configured).
        anthropic: The Anthropic-format upstream of ``/v1/messages`` (None: that
            route answers that none is configured).
        mcp: Serve MCP over streamable HTTP at ``/mcp`` (when the ``mcp`` extra
            is installed).
        mcp_token_verifier: Checks bearer tokens of ``/mcp`` that are not API
            keys (an OAuth authorization server's): the MCP SDK's
            ``TokenVerifier`` (``async verify_token(token) -> AccessToken | None``);
            see :mod:`engram.server.mcp_auth` for the scopes it grants.
        mcp_authorization_servers: The authorization servers ``/mcp``'s Protected
            Resource Metadata names (those whose tokens the verifier accepts).
        public_url: The server's URL as clients reach it (behind a reverse
            proxy); None: each request's own.
        key_failures: Failed key checks a client address may make within
            ``key_failure_window`` seconds; past them its requests with a key get
            429 and ``Retry-After`` until the oldest failure is that old (0: no
            throttle; see :mod:`engram.server.throttle`).
        key_failure_window: That window, in seconds.
        session_seconds: How long a dashboard sign-in lasts (the server-side
            session the browser's cookie names).
        allowed_hosts: Names besides this machine's (``localhost``, loopback
            addresses, the address a request arrived on) that a request's ``Host``
            may carry while the store holds no API key; others get 421
            (see :mod:`engram.server.hosts`).

    """

    max_body_bytes: int = MAX_BODY_BYTES
    key_cache_seconds: float = KEY_CACHE_SECONDS
    title: str = "Engram"
    extra_links: dict[str, str] = field(default_factory=dict)
    proxy: ProxySettings | None = None
    anthropic: ProxySettings | None = None
    mcp: bool = True
    mcp_token_verifier: Any = None
    mcp_authorization_servers: tuple[str, ...] = ()
    public_url: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    key_failures: int = KEY_FAILURES
    key_failure_window: float = KEY_FAILURE_WINDOW
    session_seconds: float = SESSION_SECONDS
