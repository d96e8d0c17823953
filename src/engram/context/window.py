"""The recent window: reading a session newest first, in units that fit.

A unit is one message, or an assistant message with ``tool_calls`` together
with the tool results answering it, so a tool call and its results are never
split. The window is a contiguous suffix: the first unit that does not fit
ends it. Tool messages whose assistant call is not in the window are orphans.

Every prompt is one a strict provider accepts: a call that no stored result
answers (the app never ran it, or moved on) is left out of the assistant
message that made it, which is shown with its text and its answered calls
only, or not at all when nothing else is left; a second result for the same
call is an orphan. The stored messages stay whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engram.context.costing import Costing
from engram.context.results import OLDER_THAN_WINDOW, OVER_BUDGET, HistoryReader
from engram.errors import StoreError
from engram.models import Message
from engram.policy import Policy
from engram.tokens import count_message, storage_counter

#: Rows asked of the reader first (about a 3K-token window of ordinary messages);
#: later reads are sized from the average message seen so far, or double.
#: Small on purpose: a row read and not used costs about as much as a sixth of a
#: read call, so reading a few rows too few is cheaper than many too many.
FIRST_CHUNK = 16
MAX_CHUNK = 512
MIN_CHUNK = 2
#: Messages scanned back looking for the newest user message before giving up.
MAX_TURN_SCAN = 2000

_UNLIMITED = 1 << 62  # a policy limit that is not set

# The limit that ended a window (``Window.bound``).
BUDGET = "budget"
TOKENS = "max_window_tokens"
MESSAGES = "max_messages"
EXCHANGES = "max_exchanges"


class Cursor:
    """Walks a session newest first, reading in chunks.

    Chunks double (from ``first``) unless ``estimate`` says how many more rows
    the window can still take, so reads follow the window, not the history.
    """

    __slots__ = ("_before", "_done", "_floor", "_read", "_size", "buf", "estimate", "rows_read")

    def __init__(self, read: HistoryReader, floor_id: int | None, first: int):
        self._read = read
        self._floor = floor_id
        self._before: int | None = None
        self.buf: list[Message] = []
        self._done = False
        self._size = max(1, first)
        self.rows_read = 0
        self.estimate: Callable[[], int | None] | None = None

    def next(self) -> Message | None:
        """Return the next older message, reading a chunk when the buffer is empty."""
        if not self.buf:
            if self._done:
                return None
            self._fill()
            if not self.buf:
                return None
        return self.buf.pop()

    def _fill(self) -> None:
        size = self._size
        if self.estimate is not None and (wanted := self.estimate()) is not None:
            size = max(MIN_CHUNK, min(wanted, MAX_CHUNK))
        rows = self._read(size, self._before)
        self.rows_read += len(rows)
        if len(rows) < size:
            self._done = True
        if rows:
            if self._before is not None and rows[-1].id >= self._before:
                # A reader that ignores before_id would make this loop forever.
                raise StoreError(
                    f"history reader returned id {rows[-1].id}, not older than {self._before}"
                )
            self._before = rows[0].id
            if self._floor is not None and rows[0].id <= self._floor:
                rows = [m for m in rows if m.id > self._floor]
                self._done = True
        self.buf = rows
        self._size = min(size * 2, MAX_CHUNK)


class Unit:
    """One atomic piece of the window: a message, or a tool call with its results."""

    __slots__ = ("cost", "is_user", "messages", "orphans", "unanswered")

    def __init__(
        self,
        messages: list[Message],
        orphans: list[Message],
        cost: int,
        is_user: bool,
        unanswered: int | None = None,
    ):
        self.messages = messages  # oldest first
        self.orphans = orphans  # tool results just after it with no parent, oldest first
        self.cost = cost
        self.is_user = is_user
        self.unanswered = unanswered  # id of an assistant message shown without some calls


_NO_ORPHANS: list[Message] = []  # shared and never mutated: the common case allocates nothing


def next_unit(cursor: Cursor, costing: Costing) -> Unit | None:
    """Read the next older unit; None at the start of the candidate history."""
    buf = cursor.buf
    if buf and buf[-1].role != "tool" and not buf[-1].tool_calls:
        # Hot path: a plain message straight from the buffer.
        top = buf.pop()
        cost = top.tokens if costing.plain and top.parts is None else costing.cost(top)
        return Unit([top], _NO_ORPHANS, cost, top.role == "user")
    pending: list[Message] = []  # tool messages, newest first
    while True:
        m = cursor.next()
        if m is None:
            if pending:  # their call is before the floor or missing: orphans
                return Unit([], pending[::-1], 0, False)
            return None
        if m.role == "tool":
            pending.append(m)
            continue
        if m.tool_calls:
            return _call_unit(m, pending[::-1], costing)
        if not pending:
            return Unit([m], _NO_ORPHANS, costing.cost(m), m.role == "user")
        return Unit([m], pending[::-1], costing.cost(m), m.role == "user")


def _call_unit(call: Message, results: list[Message], costing: Costing) -> Unit:
    """An assistant call with the results that answer it (oldest first); the rest are orphans.

    Each call id takes its first result. Calls no result answers are left out
    of the message shown (a view with the same id); with nothing left to show
    (no text, no answered call) the message itself is left out.
    """
    wanted = {c.get("id") for c in call.tool_calls or () if isinstance(c, Mapping)}
    members: list[Message] = []
    orphans: list[Message] = []
    answered: set[str] = set()
    for tool in results:
        call_id = tool.tool_call_id
        if call_id is not None and call_id in wanted and call_id not in answered:
            answered.add(call_id)
            members.append(tool)
        else:
            orphans.append(tool)
    if len(answered) == len(wanted):
        members.insert(0, call)
        return Unit(members, orphans, sum(costing.cost(x) for x in members), False)
    shown = answered_only(call, answered)
    if shown is not None:
        members.insert(0, shown)
    return Unit(members, orphans, sum(costing.cost(x) for x in members), False, call.id)


def answered_only(call: Message, answered: set[str]) -> Message | None:
    """``call`` shown with only its ``answered`` calls, or None when nothing would be left."""
    calls = [c for c in call.tool_calls or () if isinstance(c, Mapping) and c.get("id") in answered]
    if not calls and not call.content.strip() and call.parts is None:
        return None
    tokens = count_message(
        storage_counter(), call.role, call.content, name=call.name, tool_calls=calls or None
    )
    return dataclasses.replace(call, tool_calls=calls or None, tokens=tokens)


def current_turn(cursor: Cursor, costing: Costing) -> tuple[Unit | None, list[Unit], list[Unit]]:
    """Read back to the newest user message.

    Returns:
        The user unit (None when none is within reach), the units after it
        (oldest first), and the units scanned that are ordinary history
        because no user message was found (newest first).

    """
    after_user: list[Unit] = []  # newest first
    user: Unit | None = None
    scanned = 0
    while (unit := next_unit(cursor, costing)) is not None:
        if unit.is_user:
            user = unit
            break
        after_user.append(unit)
        scanned += len(unit.messages) + len(unit.orphans)
        if scanned > MAX_TURN_SCAN:
            break
    if user is None:
        # No user message within reach: everything scanned is ordinary history.
        return None, [], after_user
    return user, after_user[::-1], []


@dataclass(slots=True)
class Window:
    """The window as it grows, newest first, and why it ended."""

    remaining: int  # budget still free
    count: int  # messages in the window (current turn included)
    tokens: int  # their cost (current turn included)
    exchanges: int  # user messages in the window
    orphan_ids: list[int]
    unanswered_ids: list[int] = field(default_factory=list)  # calls shown without some calls
    older: list[Message] = field(default_factory=list)  # before the current turn, newest first
    has_tools: bool = False
    reason: str | None = None  # OLDER_THAN_WINDOW or OVER_BUDGET when something was left out
    bound: str | None = None  # the limit that ended it: BUDGET, TOKENS, MESSAGES or EXCHANGES
    pending: Unit | None = None  # the unit that did not fit, read but not taken


@dataclass(frozen=True, slots=True)
class _Limits:
    max_messages: int
    max_tokens: int
    max_exchanges: int


def fill_window(
    cursor: Cursor, costing: Costing, spill: list[Unit], window: Window, pol: Policy
) -> None:
    """Add older units, newest first, while they fit the budget and the policy window.

    ``spill`` (newest first) is read before the cursor. This loop runs once per
    message of the window: plain messages take a fast path with no calls; tool
    groups and views go through :func:`next_unit`.
    """
    limits = _Limits(
        pol.max_messages or _UNLIMITED,
        pol.max_window_tokens or _UNLIMITED,
        pol.max_exchanges or _UNLIMITED,
    )

    def estimate() -> int | None:
        # Rows the window may still take, from the average size seen so far, plus a
        # few: one more small read when it falls short costs less than reading a
        # wide margin of rows that are then thrown away.
        if not window.count:
            return None
        room = min(window.remaining, limits.max_tokens - window.tokens)
        rows = int(room * window.count / max(window.tokens, 1) * 1.03) + 4
        return min(rows, limits.max_messages - window.count + 1)

    cursor.estimate = estimate
    spill.reverse()  # pop() now gives the newest first
    plain = costing.plain
    while True:
        if plain and not spill and cursor.buf:
            _take_plain(cursor.buf, window, limits)
            if window.reason is not None:
                return
            # Here the buffer is used up or starts with a tool group or images: next_unit.
        unit = spill.pop() if spill else next_unit(cursor, costing)
        if unit is None or not _take_unit(unit, window, limits):
            return


def _take_plain(buf: list[Message], window: Window, limits: _Limits) -> None:
    """Take plain messages straight from the buffer, newest first, with no calls.

    The taken ones are cut off the buffer once, at the end of the run.
    """
    remaining, count, tokens, exchanges = (
        window.remaining,
        window.count,
        window.tokens,
        window.exchanges,
    )
    max_messages, max_tokens, max_exchanges = (
        limits.max_messages,
        limits.max_tokens,
        limits.max_exchanges,
    )
    older = window.older
    end = len(buf)
    i = end
    while i:
        m = buf[i - 1]
        if m.role == "tool" or m.tool_calls or m.parts is not None:  # next_unit takes these
            break
        cost = m.tokens
        if count >= max_messages or tokens + cost > max_tokens or exchanges >= max_exchanges:
            window.reason = OLDER_THAN_WINDOW
            window.bound = _cap(count + 1, tokens + cost, exchanges, limits)
            break
        if cost > remaining:
            window.reason = OVER_BUDGET
            window.bound = BUDGET
            break
        i -= 1
        older.append(m)
        remaining -= cost
        tokens += cost
        count += 1
        if m.role == "user":
            exchanges += 1
    if i != end:
        del buf[i:]
    window.remaining, window.count, window.tokens, window.exchanges = (
        remaining,
        count,
        tokens,
        exchanges,
    )


def _cap(count: int, tokens: int, exchanges: int, limits: _Limits) -> str | None:
    """The policy limit a window of this size would break, or None."""
    if count > limits.max_messages:
        return MESSAGES
    if tokens > limits.max_tokens:
        return TOKENS
    if exchanges >= limits.max_exchanges:
        return EXCHANGES
    return None


def _take_unit(unit: Unit, window: Window, limits: _Limits) -> bool:
    """Add ``unit`` to the window; False (and ``window.reason`` set) when it does not fit."""
    members, cost = unit.messages, unit.cost
    if not members:  # orphans at the very start of the candidates, or a call with nothing left
        window.orphan_ids.extend(m.id for m in unit.orphans)
        if unit.unanswered is not None:
            window.unanswered_ids.append(unit.unanswered)
        return True
    bound = _cap(window.count + len(members), window.tokens + cost, window.exchanges, limits)
    if bound is None and cost > window.remaining:
        bound = BUDGET
    if bound is not None:
        window.reason = OVER_BUDGET if bound == BUDGET else OLDER_THAN_WINDOW
        window.bound = bound
        window.pending = unit
        return False
    window.older.extend(reversed(members))
    if unit.unanswered is not None:
        window.unanswered_ids.append(unit.unanswered)
    if unit.orphans:
        window.orphan_ids.extend(m.id for m in unit.orphans)
    window.remaining -= cost
    window.tokens += cost
    window.count += len(members)
    if unit.is_user:
        window.exchanges += 1
    window.has_tools = window.has_tools or any(m.tool_calls or m.tool_call_id for m in members)
    return True
