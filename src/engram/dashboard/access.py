"""Who is looking: the server's API keys, from a cookie (the login form) or a bearer header.

The dashboard resolves its caller as every door of the server does
(:func:`engram.server.deps.resolve_caller`): the same keys, the same rights, the
same local mode (no key in the store: every right, this machine only). A
browser signs in once with a key; its HTTP-only, same-site cookie names a
sign-in kept in the store beside the keys (:mod:`engram.dashboard.signins`),
never the key;
scripts send ``Authorization: Bearer KEY`` as they do to ``/v1``. A key bound
to scopes sees only those scopes, on every page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from engram.aio import offload
from engram.dashboard.signins import SignIns
from engram.server.auth import Caller
from engram.server.deps import EngramDep, bearer_secret, resolve_caller
from engram.server.errors import Forbidden

__all__ = ["COOKIE", "EngramDep", "Viewer", "ViewerDep", "current_viewer"]

#: The cookie that names the sign-in of a browser (a random id; the key stays on the server).
COOKIE = "engram_session"


@dataclass(frozen=True, slots=True)
class Viewer:
    """The rights of the person looking, and how they signed in."""

    caller: Caller
    signed_in: bool

    @property
    def scopes(self) -> list[str] | None:
        """The scopes this viewer may see, or None for every scope."""
        return self.caller.visible()

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


async def current_viewer(request: Request) -> Viewer:
    """The viewer of a page: a bearer header first, else the browser's sign-in.

    Raises:
        NotAuthenticated: no usable key (pages answer with the login form).
        Forbidden: a state-changing request from another site.

    """
    if request.method not in ("GET", "HEAD"):
        _same_origin(request)
    bearer = bearer_secret(request)
    cookie = request.cookies.get(COOKIE)
    if bearer is None and cookie:
        sign_ins: SignIns = request.app.state.sign_ins
        key = await offload(sign_ins.key, cookie)  # the store says if the key is still active
        if key is not None:
            return Viewer(Caller(key), signed_in=True)
    return Viewer(await resolve_caller(request, bearer), signed_in=False)


def _same_origin(request: Request) -> None:
    """Refuse a form posted from another site (the cookie is same-site too)."""
    origin = request.headers.get("origin")
    if origin is None:
        return  # not a browser form (scripts send a bearer key); the cookie is same-site
    host = request.headers.get("host", "")
    if origin.split("://", 1)[-1] != host:
        raise Forbidden("a dashboard form may only be sent from the dashboard itself")


ViewerDep = Annotated[Viewer, Depends(current_viewer)]
