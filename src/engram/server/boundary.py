"""Routes under a session: the work runs on an existing session, in a worker thread.

A route under ``/sessions/{session}`` goes through :func:`on_session`, which
answers 404 for a session nothing created yet; other routes call the facade
through :func:`engram.aio.offload` (the one async boundary) directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from engram.aio import offload

if TYPE_CHECKING:
    from engram.engine import Engram
    from engram.session import Session

_R = TypeVar("_R")


async def on_session(engram: Engram, scope: str, session: str, work: Callable[[Session], _R]) -> _R:
    """Run ``work`` on an existing session in a worker thread (one hop for both).

    Raises:
        SessionNotFound: nothing created the session yet (no append, no ``PUT``).

    """

    def run() -> _R:
        return work(engram.require_session(session, scope))

    return await offload(run)
