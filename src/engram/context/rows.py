"""The history as the builder reads it: raw rows, and whole messages only where needed.

Most stored messages are *plain*: a role other than ``tool``, text content, no
name, tool calls or images. Their prompt form is ``{"role", "content"}`` and
their cost is their stored count, so the builder needs nothing of them but
``(id, role, content, tokens)``: a :data:`Row`, as the store's cursor gives it.
The others (tool calls and results, names, images) come whole, as
:class:`Stored` values, in :attr:`HistoryRows.special`; the rare paths (tool
groups, views, recounting counters, the current turn) read them through
:meth:`HistoryRows.stored`, which wraps a plain row in a :class:`PlainRow`.
No ``Message`` is built for a plain row, no timestamp parsed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engram.models import JSON

#: ``(id, role, content, tokens)`` of one stored message.
Row = tuple[int, str, str, int]


class Stored(Protocol):
    """What the builder reads of a stored message (:class:`~engram.models.Message` is one)."""

    @property
    def id(self) -> int:
        """The message id."""
        ...

    @property
    def role(self) -> str:
        """The chat role."""
        ...

    @property
    def content(self) -> str:
        """The text."""
        ...

    @property
    def tokens(self) -> int:
        """The stored count (storage encoding, overhead included)."""
        ...

    @property
    def name(self) -> str | None:
        """The participant name, if any."""
        ...

    @property
    def tool_calls(self) -> list[JSON] | None:
        """The assistant's tool calls, if any."""
        ...

    @property
    def tool_call_id(self) -> str | None:
        """The call a tool result answers, if any."""
        ...

    @property
    def parts(self) -> list[JSON] | None:
        """The list content of a message with images, if any."""
        ...

    def to_openai(self) -> JSON:
        """The message in OpenAI chat-completions form."""
        ...


class PlainRow:
    """A plain row seen as a :class:`Stored` message, for the builder's general paths."""

    __slots__ = ("content", "id", "role", "tokens")

    def __init__(self, row: Row) -> None:
        self.id, self.role, self.content, self.tokens = row

    @property
    def name(self) -> None:
        """Plain rows have no name."""
        return None

    @property
    def tool_calls(self) -> None:
        """Plain rows have no tool calls."""
        return None

    @property
    def tool_call_id(self) -> None:
        """Plain rows answer no call."""
        return None

    @property
    def parts(self) -> None:
        """Plain rows hold text only."""
        return None

    def to_openai(self) -> JSON:
        """``{"role", "content"}``."""
        return {"role": self.role, "content": self.content}


@dataclass(slots=True)
class HistoryRows:
    """Rows of one session as read, newest first, and the non-plain ones whole.

    Attributes:
        rows: ``(id, role, content, tokens)``, newest first (ids decreasing).
        special: The rows that are not plain (see the module docstring), by id.
    """

    rows: list[Row]
    special: Mapping[int, Stored] = field(default_factory=dict)

    def stored(self, row: Row) -> Stored:
        """The row as a message: the whole one when it is special."""
        found = self.special.get(row[0])
        return found if found is not None else PlainRow(row)


#: Reads one session: the newest ``limit`` messages with ``id < before_id`` (all
#: when None), as ``Message`` values oldest first (``Store.tail`` bound to a
#: session is one) or as :class:`HistoryRows`.
HistoryReader = Callable[[int, "int | None"], "Sequence[Stored] | HistoryRows"]


def is_plain(m: Stored) -> bool:
    """True when ``m`` is shown as ``{"role", "content"}`` and costs its stored count."""
    return (
        m.role != "tool"
        and m.name is None
        and m.tool_calls is None
        and m.tool_call_id is None
        and m.parts is None
    )


def rows_of(messages: Sequence[Stored]) -> HistoryRows:
    """The rows of ``messages`` (oldest first, as a ``Message`` reader returns them)."""
    rows: list[Row] = []
    special: dict[int, Stored] = {}
    for m in reversed(messages):
        rows.append((m.id, m.role, m.content, m.tokens))
        if not is_plain(m):
            special[m.id] = m
    return HistoryRows(rows, special)
