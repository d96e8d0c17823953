"""One module per resource; each exposes ``router`` (paths under ``/v1``).

:func:`engram.server.app.create_app` includes every router of :data:`RESOURCES`
with the rights dependency; a module never adds its own authorization.
"""

from __future__ import annotations

from fastapi import APIRouter

from engram.server.routes import (
    anthropic,
    compaction,
    context,
    memories,
    messages,
    prompts,
    proxy,
    responses,
    retrieval,
    scopes,
    sessions,
)

#: The ``/v1`` routers, in the order the API document lists them.
RESOURCES: tuple[APIRouter, ...] = (
    scopes.router,
    sessions.router,
    messages.router,
    context.router,
    prompts.router,
    retrieval.router,
    compaction.router,
    memories.router,
    proxy.router,
    responses.router,
    anthropic.router,
)

__all__ = ["RESOURCES"]
