"""Engram's tools bound to one session, in the neutral shape every adapter translates.

A :class:`BoundTool` is a registered tool (:mod:`engram.tools`) plus the
session every call is confined to: the model chooses the arguments, never the
session or the scope (scope isolation). ``run`` returns the JSON text the
tool dispatcher gives (a result, or a structured error for bad arguments);
``arun`` does the same off the event loop.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engram.aio import offload
from engram.models import JSON
from engram.session import Session
from engram.tools.dispatcher import dispatch
from engram.tools.registry import select

__all__ = ["BoundTool", "bound_tools"]


@dataclass(frozen=True, slots=True)
class BoundTool:
    """One tool for one session: its name, description, JSON Schema, and how to call it."""

    name: str
    description: str
    parameters: JSON
    session: Session
    offered: tuple[str, ...]

    def run(self, arguments: str | Mapping[str, Any] | None) -> str:
        """Run the tool with the model's arguments; the result (or error) as JSON text."""
        return dispatch(self.session, self.name, arguments, names=self.offered)

    async def arun(self, arguments: str | Mapping[str, Any] | None) -> str:
        """:meth:`run` in a worker thread."""
        return await offload(self.run, arguments)


def bound_tools(session: Session, names: Iterable[str] | None = None) -> list[BoundTool]:
    """The registered tools (or ``names``, in that order) bound to ``session``.

    Raises:
        ConfigError: a name is not a registered tool.

    """
    chosen = select(list(names) if names is not None else None)
    offered = tuple(tool.name for tool in chosen)
    return [
        BoundTool(tool.name, tool.description, copy.deepcopy(tool.parameters), session, offered)
        for tool in chosen
    ]
