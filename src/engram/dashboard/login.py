"""Signing in and out: a form that takes an API key and opens a sign-in kept in the store.

The browser's HTTP-only, same-site cookie holds the sign-in's random id, never the
key (:mod:`engram.dashboard.signins`, kept in the store); ``/logout`` deletes the sign-in
there, so it ends for every server process.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from engram.aio import offload
from engram.dashboard.access import COOKIE
from engram.dashboard.errors import PageRoute
from engram.dashboard.rendering import render
from engram.dashboard.signins import SignIns
from engram.server.deps import resolve_caller
from engram.server.errors import NotAuthenticated, TooManyFailures, error_headers

__all__ = ["router"]

router = APIRouter(include_in_schema=False, route_class=PageRoute)


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
    """Check the key with the server's key check, then open a sign-in for it."""
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
    except TooManyFailures as exc:
        page = render(request, "login.html", status_code=429, next=_local(next), error=str(exc))
        page.headers.update(error_headers(exc))
        return page
    response = RedirectResponse(_local(next), status_code=303)
    if caller.key is not None:
        sign_ins: SignIns = request.app.state.sign_ins
        response.set_cookie(
            COOKIE,
            await offload(sign_ins.open, caller.key),
            max_age=int(sign_ins.seconds),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
    return response


@router.post("/logout")
def logout(request: Request) -> Response:
    """Close this browser's sign-in, in the store (every process) and in the browser."""
    sign_ins: SignIns = request.app.state.sign_ins
    sign_ins.close(request.cookies.get(COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
