"""What a policy may add to the prompt, as one protocol per kind of contribution.

A *section provider* adds headed system blocks after the summary (the tool
cache, the agent state). A *row view* changes how the recent window shows
stored messages (finished exchange steps left out, long answers shortened);
the stored messages never change. Each one says for itself which policies it
applies to, so a new preset that needs new prompt content adds one module to
:mod:`engram.sections` instead of a branch in the session.
"""

from __future__ import annotations

from typing import Protocol

from engram.context import Section
from engram.models import Message
from engram.policy import Policy
from engram.store import Store


class SectionProvider(Protocol):
    """Adds sections to the prompt of the sessions whose policy it applies to."""

    name: str

    def applies(self, policy: Policy) -> bool:
        """Whether ``policy`` uses this provider."""
        ...

    def sections(self, store: Store, scope: str, session: str) -> list[Section]:
        """The sections for one session, read from its state (none: an empty list)."""
        ...


class RowFilter(Protocol):
    """Leaves some stored messages out of the recent window."""

    name: str

    def applies(self, policy: Policy) -> bool:
        """Whether ``policy`` uses this filter."""
        ...

    def rows(self, rows: list[Message], policy: Policy) -> list[Message]:
        """The rows the window may show, in order."""
        ...


class RowViews(Protocol):
    """Shows some stored messages in another form (their text replaced by a view)."""

    name: str

    def applies(self, policy: Policy) -> bool:
        """Whether ``policy`` uses these views."""
        ...

    def views(self, rows: list[Message], policy: Policy) -> dict[int, str]:
        """Message id -> the text shown instead of its content."""
        ...
