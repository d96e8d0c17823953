"""Sections rendered again from a stored version of the state they came from.

A prompt recipe names each section rendered from a session state document by
its kind and version; :func:`render_state` turns that version's data back
into the sections the prompt showed, with the very functions the prompt
builder used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engram.agent_state import AGENT_STATE_KIND, parse_agent_state
from engram.compaction.prompt_sections import state_sections
from engram.compaction.state import STATE_KIND, parse_state
from engram.context import Section
from engram.sections.agent_state import agent_state_section
from engram.sections.tool_cache import TOOL_CACHE_KIND, cache_section, parse_exchange_state


def _agent_state(data: Any) -> list[Section]:
    section = agent_state_section(parse_agent_state(data))
    return [section] if section is not None else []


def _tool_cache(data: Any) -> list[Section]:
    section = cache_section(parse_exchange_state(data))
    return [section] if section is not None else []


#: State kind -> the sections its document renders.
RENDERERS: dict[str, Callable[[Any], list[Section]]] = {
    STATE_KIND: lambda data: state_sections(parse_state(data)),
    AGENT_STATE_KIND: _agent_state,
    TOOL_CACHE_KIND: _tool_cache,
}


def render_state(kind: str, data: Any) -> list[Section]:
    """The sections a ``kind`` state document renders (none for a kind without sections)."""
    render = RENDERERS.get(kind)
    return render(data) if render is not None else []


__all__ = ["RENDERERS", "render_state"]
