"""Signing in and out: a form that takes an API key and keeps it in an HTTP-only cookie."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from engram.dashboard.access import COOKIE
from engram.dashboard.errors import PageRoute
from engram.dashboard.rendering import render
from engram.server.deps import resolve_caller
from engram.server.errors import NotAuthenticated

__all__ = ["COOKIE_SECONDS", "router"]

router = APIRouter(include_in_schema=False, route_class=PageRoute)

#: How long a browser stays signed in (the key itself may be revoked sooner).
COOKIE_SECONDS = 7 * 24 * 3600


def _local(target: str) -> str:
    """``target`` if it is a path of this site, else ``/`` (no open redirect)."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/") -> Response:
    """The sign-in form."""
    return render(request, "login.html", next=_local(next), error=None)


@router.post("/login")
async def login(
    request: Request, key: Annotated[str, Form()] = "", next: Annotated[str, Form()] = "/"
) -> Response:
    """Check the key with the server's key check, then keep it in the cookie."""
    try:
        caller = await resolve_caller(request, key.strip() or None)
    except NotAuthenticated:
        return render(
            request,
            "login.html",
            status_code=401,
            next=_local(next),
            error="This key is unknown or revoked.",
        )
    response = RedirectResponse(_local(next), status_code=303)
    if caller.key is not None:
        response.set_cookie(
            COOKIE,
            key.strip(),
            max_age=COOKIE_SECONDS,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
    return response


@router.post("/logout")
def logout() -> Response:
    """Forget the key of this browser."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
