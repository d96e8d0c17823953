"""The dashboard: every project, every conversation, and exactly what the model sees.

Server-rendered pages (Jinja2) with htmx vendored as a static file: no build
step, nothing loaded from the network. It is part of ``engram serve`` (the
``server`` extra): :func:`install` adds the pages at ``/`` and the static
files at ``/static`` to the app of :func:`engram.server.create_app`, behind
the same API keys as the REST API. Pages read through the
:class:`~engram.Engram` facade and its sessions only.

Modules: ``access.py`` (who is looking), ``login.py`` (signing in and out),
``signins.py`` (the sign-ins, kept in the store beside the keys),
``pages.py`` (the pages), ``views.py`` (presentation helpers),
``rendering.py`` (templates), ``errors.py`` (errors as pages).
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from engram.dashboard import login, pages
from engram.dashboard.rendering import STATIC_DIR
from engram.dashboard.signins import SignIns

__all__ = ["install"]


def install(app: FastAPI) -> None:
    """Serve the dashboard's pages at ``/`` and its static files at ``/static``."""
    app.state.sign_ins = SignIns(app.state.engram.store, app.state.settings.session_seconds)
    app.include_router(login.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
