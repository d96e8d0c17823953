"""Presentation helpers of the dashboard: rows, sorting, highlighting.

Nothing here reads data: the pages hand in what the facade returned, and get
back what the templates show (numbers for people, SVG points, safe HTML).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from markupsafe import Markup, escape

from engram.activity import Activity
from engram.compaction.citations import Cites, parse_ranges
from engram.compaction.data_cites import cites_of
from engram.compaction.state import CompactionState

__all__ = [
    "PROJECT_SORTS",
    "ProjectRow",
    "cite_links",
    "cited_groups",
    "highlight",
    "pretty_json",
    "sort_projects",
]

#: Column keys the projects table can be sorted by.
PROJECT_SORTS = (
    "name",
    "sessions",
    "messages",
    "tokens",
    "sent",
    "savings",
    "activity",
    "memories",
)

#: Search snippets mark each matched word as ``[word]``.
_MARK = re.compile(r"\[([^\[\]\s][^\[\]]{0,80}?)\]")


@dataclass(frozen=True, slots=True)
class ProjectRow:
    """One line of the projects table: a scope's totals and its activity."""

    name: str
    sessions: int
    messages: int
    tokens: int
    memories: int
    last_activity: datetime | None
    activity: Activity

    @property
    def sent(self) -> int:
        """Tokens sent to the model over every recorded turn."""
        return self.activity.prompts.sent_tokens

    @property
    def savings(self) -> float | None:
        """Share of the full history's tokens not sent (None before any recorded turn)."""
        return self.activity.prompts.savings


def sort_projects(rows: Sequence[ProjectRow], key: str, descending: bool) -> list[ProjectRow]:
    """The rows sorted by a column of :data:`PROJECT_SORTS` (unknown keys sort by name)."""
    values: dict[str, Callable[[ProjectRow], float]] = {
        "sessions": lambda r: r.sessions,
        "messages": lambda r: r.messages,
        "tokens": lambda r: r.tokens,
        "sent": lambda r: r.sent,
        "savings": lambda r: -1.0 if r.savings is None else r.savings,
        "activity": lambda r: r.last_activity.timestamp() if r.last_activity else 0.0,
        "memories": lambda r: r.memories,
    }
    if key not in values:
        return sorted(rows, key=lambda r: r.name, reverse=descending)
    pick = values[key]
    return sorted(rows, key=lambda r: (pick(r), r.name), reverse=descending)


def highlight(snippet: str) -> Markup:
    """A search snippet as safe HTML: the text escaped, each ``[match]`` in ``<mark>``."""
    escaped = str(escape(snippet))
    return Markup(_MARK.sub(r"<mark>\1</mark>", escaped))


_CITE = re.compile(r"\[#\d[^\[\]]*\]")


def cite_links(text: str, scope: str, session: str) -> Markup:
    """``text`` as safe HTML, each citation (``[#112-#140, #150]``) linked to its messages.

    Each range links to the conversation's history opened at its first message.
    """
    out: list[str] = []
    start = 0
    for match in _CITE.finditer(text):
        out.append(str(escape(text[start : match.start()])))
        links = [
            f'<a class="cite" href="/p/{_part(scope)}/s/{_part(session)}?at={low}#m-{low}">'
            f"#{low}{'' if low == high else f'–#{high}'}</a>"
            for low, high in parse_ranges(match.group(0))
        ]
        out.append("[" + ", ".join(links) + "]" if links else str(escape(match.group(0))))
        start = match.end()
    out.append(str(escape(text[start:])))
    return Markup("".join(out))


def _part(value: str) -> str:
    return quote(str(value), safe="")


def cited_groups(state: CompactionState) -> list[tuple[str, list[tuple[str, Cites]]]]:
    """The important data as (field, [(item, its citation), ...]), fields in order."""
    groups: dict[str, list[tuple[str, Cites]]] = {}
    for name, item, cites in cites_of(state.important_data, state.important_cites):
        groups.setdefault(name, []).append((item, cites))
    return list(groups.items())


def pretty_json(value: Any) -> str:
    """Indented JSON for people (tool calls, metadata)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
