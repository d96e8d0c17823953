"""The one async boundary: the synchronous core runs in a worker thread, never on the loop.

Every route calls the :class:`~engram.Engram` facade or a session through
:func:`offload`, so a slow database or a compaction never blocks the event
loop, and the store stays synchronous (one code path for the library, the CLI
and the server).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from anyio import to_thread

_P = ParamSpec("_P")
_R = TypeVar("_R")


async def offload(func: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Run ``func(*args, **kwargs)`` in the worker thread pool and return its result."""
    return await to_thread.run_sync(functools.partial(func, *args, **kwargs))
