"""Who is looking: the server's API keys, from a cookie (the login form) or a bearer header.

The dashboard uses the REST server's key check as it is
(:class:`engram.server.auth.KeyCheck`): the same keys, the same rights, the
same local mode (no key in the store: every right, this machine only). A
browser signs in once with a key, kept in an HTTP-only, same-site cookie;
scripts send ``Authorization: Bearer KEY`` as they do to ``/v1``. A key bound
to scopes sees only those scopes, on every page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from engram.aio import offload
from engram.server.auth import Caller, KeyCheck, is_remote
from engram.server.deps import EngramDep
from engram.server.errors import Forbidden, NotAuthenticated

__all__ = ["COOKIE", "EngramDep", "Viewer", "ViewerDep", "caller_for", "current_viewer"]

#: The cookie that keeps the key of a signed-in browser.
COOKIE = "engram_key"


@dataclass(frozen=True, slots=True)
class Viewer:
    """The rights of the person looking, and how they signed in."""

    caller: Caller
    signed_in: bool

    @property
    def scopes(self) -> list[str] | None:
        """The scopes this viewer may see, or None for every scope."""
        key = self.caller.key
        return None if key is None or key.admin else list(key.scopes)

    @property
    def label(self) -> str:
        """How the key is shown (its clear prefix and label; never the secret)."""
        key = self.caller.key
        if key is None:
            return "local"
        return f"{key.prefix}… {key.label}".strip()

    def can_write(self, scope: str) -> bool:
        """Whether this viewer may change ``scope`` (delete or purge memories)."""
        return self.caller.may(scope, write=True)

    def require_read(self, scope: str) -> None:
        """Raise :class:`Forbidden` unless this viewer may read ``scope``."""
        self.caller.require(scope, "read")

    def require_write(self, scope: str) -> None:
        """Raise :class:`Forbidden` unless this viewer may change ``scope``."""
        self.caller.require(scope, "write")


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


async def caller_for(request: Request, secret: str | None) -> Caller:
    """The caller a key makes, with the server's check (cached, else read in a worker thread).

    Raises:
        NotAuthenticated: a key is needed and this one is missing, unknown or revoked.

    """
    keys: KeyCheck = request.app.state.key_check
    caller = keys.cached(secret)
    if caller is None:
        caller = await offload(keys.check, secret)
    if caller.key is None and is_remote(request.client.host if request.client else None):
        raise NotAuthenticated("this server has no API key yet and serves only its own machine")
    return caller


async def current_viewer(request: Request) -> Viewer:
    """The viewer of a page: a bearer header first, else the signed-in cookie.

    Raises:
        NotAuthenticated: no usable key (pages answer with the login form).
        Forbidden: a state-changing request from another site.

    """
    if request.method not in ("GET", "HEAD"):
        _same_origin(request)
    bearer = _bearer(request)
    secret = bearer or request.cookies.get(COOKIE) or None
    caller = await caller_for(request, secret)
    return Viewer(caller, signed_in=bearer is None and caller.key is not None)


def _same_origin(request: Request) -> None:
    """Refuse a form posted from another site (the cookie is same-site too)."""
    origin = request.headers.get("origin")
    if origin is None:
        return  # not a browser form (scripts send a bearer key); the cookie is same-site
    host = request.headers.get("host", "")
    if origin.split("://", 1)[-1] != host:
        raise Forbidden("a dashboard form may only be sent from the dashboard itself")


ViewerDep = Annotated[Viewer, Depends(current_viewer)]
