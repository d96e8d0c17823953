"""Engram as a service: the REST API (FastAPI), its API keys, metrics and limits.

Needs the ``server`` extra (``pip install 'engram-conversation-memory[server]'``). Build the app
with :func:`create_app` and serve it with any ASGI server, or run
``engram serve``. The layout (see ``docs/architecture.md``): ``app.py`` composes
the routers, ``deps.py`` declares what routes receive (the ``Engram``, the
caller and its rights), ``errors.py`` turns every error into HTTP once,
``schemas.py`` holds the HTTP shapes, ``routes/`` one module per resource.
"""

from __future__ import annotations

from engram.errors import MissingDependency

try:
    import fastapi  # noqa: F401
    import prometheus_client  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency.extra("the Engram server", "server", exc) from exc

from engram.server.app import create_app
from engram.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app"]
