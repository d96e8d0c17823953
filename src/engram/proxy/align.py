"""Aligning a client's message list with the stored history: what is new, what is a retry.

Format-neutral: it works on chat-format messages as the library stores them
(:class:`~engram.models.NewMessage` for the client's, :class:`~engram.models.Message`
for the stored ones), so every proxy front (chat completions, and any API whose
messages convert to that format) follows the same rules.

A client sends either only its newest messages or its whole list (or the tail
of it). Both are read against the *visible* history: what a client could hold,
that is the stored messages minus Engram's own tool rounds (calls to Engram's
tools and their results, which the client never saw). Two messages are the
same when their role, text (trimmed), tool calls (id, name, arguments compared
as JSON), tool-call id and images are; an answer Engram stored matches the
client's copy of it.

The cases, in :func:`align`:

* **append**: the list continues the history (the longest stored suffix that
  is also the list's start is skipped); what follows is new. Nothing new and a
  question left unanswered: **resume** (a retry after a failure).
* **repeat**: the list ends at the question of the newest answered turn and
  adds nothing. The caller decides between a retry (send the stored answer
  back) and a new request (see :mod:`engram.proxy.plan`).
* **diverge**: a list that holds an answer Engram gave agrees with the history
  up to a point and then differs (an earlier turn edited or regenerated), or
  stops short of the end: the stored messages after that point are replaced.

Without an answer Engram gave among the messages that agree, nothing is
replaced: messages that agree with the start of the history are skipped (a
fixed preamble of example turns), and the rest is new.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engram.models import Message, NewMessage

#: Metadata key of an answer Engram stored from the upstream (its completion's id and model).
UPSTREAM_KEY = "upstream"


@dataclass(frozen=True, slots=True)
class Print:
    """What makes two chat messages the same message (a fingerprint)."""

    role: str
    text: str
    calls: tuple[tuple[str, str, str], ...] = ()
    call_id: str | None = None
    images: tuple[str, ...] = ()


def fingerprint(message: Message | NewMessage, hide: frozenset[str] = frozenset()) -> Print:
    """The fingerprint of a message, leaving out its calls whose ids are in ``hide``."""
    calls = tuple(
        (str(call.get("id")), _function(call, "name"), _arguments(_function(call, "arguments")))
        for call in message.tool_calls or ()
        if isinstance(call, Mapping) and call.get("id") not in hide
    )
    images = tuple(
        str(part.get("image_url", {}).get("url"))
        for part in message.parts or ()
        if part.get("type") == "image_url"
    )
    return Print(message.role, message.content.strip(), calls, message.tool_call_id, images)


def _function(call: Mapping[str, Any], key: str) -> str:
    function = call.get("function")
    value = function.get(key) if isinstance(function, Mapping) else None
    return value if isinstance(value, str) else ""


def _arguments(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return text.strip()


@dataclass(frozen=True, slots=True)
class Visible:
    """A stored message as a client sees it."""

    message: Message
    print: Print

    @property
    def answer(self) -> bool:
        """Whether Engram stored it as an answer of the upstream."""
        return self.message.role == "assistant" and UPSTREAM_KEY in self.message.metadata


def visible(stored: Sequence[Message], ours: Callable[[str], bool]) -> list[Visible]:
    """The stored messages (oldest first) a client could hold.

    ``ours(name)`` tells Engram's own tools: an assistant message whose calls
    are all Engram's is left out with their results; a message that also
    calls the client's tools is shown with the client's calls only.
    """
    hidden: set[str] = set()
    out: list[Visible] = []
    for message in stored:
        if message.role == "tool" and message.tool_call_id in hidden:
            continue
        mine = {
            str(call.get("id"))
            for call in message.tool_calls or ()
            if isinstance(call, Mapping) and ours(_function(call, "name"))
        }
        if mine:
            hidden |= mine
            if len(mine) == len(message.tool_calls or ()):
                continue
        out.append(Visible(message, fingerprint(message, frozenset(mine))))
    return out


class Kind(StrEnum):
    """What a request's list is, against the stored history."""

    APPEND = "append"
    RESUME = "resume"
    REPEAT = "repeat"
    DIVERGE = "diverge"


@dataclass(frozen=True, slots=True)
class Alignment:
    """The reading of one request's list.

    Attributes:
        kind: See :class:`Kind`.
        new: Positions in the client's list of the messages to store, in order.
        after: ``diverge``: the last stored message the list agrees with; every
            stored message after it is replaced. None: the whole history.
        answer: ``repeat``: the newest turn's stored answer (its last visible message).
        history: Whether the list carries history (an assistant message), not
            only new messages.
        unmatched: Nothing in the list agrees with the history read (a list
            with history may then start further back: read more and align again).
    """

    kind: Kind
    new: tuple[int, ...] = ()
    after: Message | None = None
    answer: Message | None = None
    history: bool = False
    unmatched: bool = False


def align(client: Sequence[Print], stored: Sequence[Visible]) -> Alignment:
    """Read the client's list against the visible history (both oldest first).

    ``stored`` must reach far enough back to hold every stored message the
    list could repeat (at least ``len(client)`` visible messages, or all).
    """
    history = any(p.role == "assistant" for p in client)
    if not client:
        return Alignment(Kind.RESUME)
    if history:
        anchored = _anchored(client, stored)
        if anchored is not None:
            return anchored
    overlap = _overlap(client, stored)
    if overlap:
        return _continue(client, overlap, history)
    repeat = _repeat(client, stored)
    if repeat is not None:
        return Alignment(Kind.REPEAT, answer=repeat, history=history)
    return Alignment(Kind.APPEND, tuple(range(len(client))), history=history, unmatched=True)


def _continue(client: Sequence[Print], skipped: int, history: bool) -> Alignment:
    if skipped == len(client):
        return Alignment(Kind.RESUME, history=history)
    return Alignment(Kind.APPEND, tuple(range(skipped, len(client))), history=history)


def _anchored(client: Sequence[Print], stored: Sequence[Visible]) -> Alignment | None:
    """A list that starts inside the history: continue, repeat, or diverge from it."""
    start, length = _anchor(client, stored)
    if length == 0:
        return None
    n, k = len(client), len(stored)
    if start + length == k:  # it runs to the end of the history
        return _continue(client, length, True)
    agreed = stored[start : start + length]
    rest = stored[start + length :]
    if length == n and all(v.message.role == "assistant" for v in rest):
        return Alignment(Kind.REPEAT, answer=rest[-1].message, history=True)
    if not any(v.answer for v in agreed):
        # No answer of Engram's among what agrees: a preamble the client sends each time.
        return _continue(client, length, True)
    return Alignment(Kind.DIVERGE, tuple(range(length, n)), after=agreed[-1].message, history=True)


def _anchor(client: Sequence[Print], stored: Sequence[Visible]) -> tuple[int, int]:
    """(start, length): where in ``stored`` the longest run agreeing with the list's start is."""
    if not client:
        return 0, 0
    best = (0, 0)
    first = client[0]
    for start, item in enumerate(stored):
        if item.print != first:
            continue
        length = 1
        while (
            length < len(client)
            and start + length < len(stored)
            and stored[start + length].print == client[length]
        ):
            length += 1
        if length >= best[1]:  # the latest of equally long runs: the newest copy
            best = (start, length)
    return best


def _overlap(client: Sequence[Print], stored: Sequence[Visible]) -> int:
    """The longest stored suffix that is also the start of the list (0: none)."""
    for size in range(min(len(client), len(stored)), 0, -1):
        if all(stored[len(stored) - size + i].print == client[i] for i in range(size)):
            return size
    return 0


def _repeat(client: Sequence[Print], stored: Sequence[Visible]) -> Message | None:
    """The newest answer, when the list is exactly what came before it (a repeat)."""
    end = len(stored)
    while end and stored[end - 1].message.role == "assistant":
        end -= 1
    if end == len(stored) or end < len(client) or not client:
        return None
    asked = stored[end - len(client) : end]
    if all(v.print == p for v, p in zip(asked, client, strict=True)):
        return stored[-1].message
    return None
