"""Errors on pages are pages: the dashboard's routes answer people with HTML, not JSON.

The REST API turns errors into JSON once (:mod:`engram.server.errors`); the
dashboard's router uses :class:`PageRoute`, which turns the same errors into
the same statuses with a page: the login form when a key is missing, else a
short page saying what went wrong. Nothing else is caught here.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from engram.dashboard.rendering import render
from engram.errors import EngramError
from engram.server.errors import NotAuthenticated, error_headers, status_of

__all__ = ["PageRoute"]

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

_TITLES = {
    401: "Sign in needed",
    403: "Not allowed",
    404: "Not found",
    422: "Cannot do that",
    429: "Too many attempts",
}


class PageRoute(APIRoute):
    """A dashboard route: Engram and validation errors become HTML pages."""

    def get_route_handler(self) -> Handler:
        """Wrap FastAPI's handler so errors render as pages."""
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except NotAuthenticated:
                if request.method in ("GET", "HEAD") and not request.headers.get("authorization"):
                    query = f"?{request.url.query}" if request.url.query else ""
                    target = quote(request.url.path + query)
                    return RedirectResponse(f"/login?next={target}", status_code=303)
                return _page(request, 401, "a valid API key is needed")
            except EngramError as exc:
                status, _ = status_of(exc)
                message = str(exc) if status < 500 else "the server could not do that; see its log"
                page = _page(request, status, message)
                page.headers.update(error_headers(exc))
                return page
            except RequestValidationError as exc:
                errors = exc.errors()
                first = errors[0] if errors else {}
                where = ".".join(str(p) for p in first.get("loc", ())[1:])
                return _page(request, 422, f"{where}: {first.get('msg', 'invalid request')}")

        return page_handler


def _page(request: Request, status: int, message: str) -> Response:
    title = _TITLES.get(status, "Something went wrong")
    return render(request, "error.html", status_code=status, title=title, message=message)
