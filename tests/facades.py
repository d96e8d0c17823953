"""Run one behaviour test against the sync API and the async one.

``facade(mem, "async", request)`` wraps an :class:`engram.Engram` in
:class:`engram.aio.AsyncEngram` and gives it back as :class:`Blocking`: every
coroutine method runs to its end on one event loop per test, and handles it
returns (sessions, memories) are wrapped the same way. A test written against
the sync API then exercises the async facade unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from engram.aio import AsyncEngram, AsyncMemories, AsyncSession
from engram.engine import Engram

FACADES = ["sync", "async"]


class Blocking:
    """An async handle driven from synchronous test code."""

    def __init__(self, target: Any, runner: asyncio.Runner) -> None:
        self._target = target
        self._runner = runner

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, AsyncSession | AsyncMemories | AsyncEngram):
            return Blocking(value, self._runner)
        return value

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if inspect.iscoroutinefunction(value):
            return lambda *a, **k: self._wrap(self._runner.run(value(*a, **k)))
        if inspect.ismethod(value):
            return lambda *a, **k: self._wrap(value(*a, **k))
        return value

    def __repr__(self) -> str:
        return f"Blocking({self._target!r})"


def facade(mem: Engram, kind: str, request: pytest.FixtureRequest) -> Any:
    """``mem`` itself ("sync"), or its async facade driven synchronously ("async")."""
    if kind == "sync":
        return mem
    runner = asyncio.Runner()
    request.addfinalizer(runner.close)
    return Blocking(AsyncEngram(mem), runner)
