"""The one async boundary: the synchronous core runs in a worker thread, never on the loop.

Every route calls the :class:`~engram.Engram` facade or a session through
:func:`offload`, so a slow database or a compaction never blocks the event
loop, and the store stays synchronous (one code path for the library, the CLI
and the server). A route under an existing session goes through
:func:`on_session`, which answers 404 for a session nothing created yet.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from anyio import to_thread

if TYPE_CHECKING:
    from engram.engine import Engram
    from engram.session import Session

_P = ParamSpec("_P")
_R = TypeVar("_R")


async def offload(func: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Run ``func(*args, **kwargs)`` in the worker thread pool and return its result."""
    return await to_thread.run_sync(functools.partial(func, *args, **kwargs))


async def on_session(engram: Engram, scope: str, session: str, work: Callable[[Session], _R]) -> _R:
    """Run ``work`` on an existing session in a worker thread (one hop for both).

    Raises:
        SessionNotFound: nothing created the session yet (no append, no ``PUT``).

    """

    def run() -> _R:
        return work(engram.require_session(session, scope))

    return await to_thread.run_sync(run)
