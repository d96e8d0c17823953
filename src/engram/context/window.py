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

The window is made of rows (:mod:`engram.context.rows`): a run of plain rows
is taken at once (running sums and a bisection, no call per row); tool groups,
images, views and recounting counters go unit by unit.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate

from engram.context.costing import Costing
from engram.context.results import OLDER_THAN_WINDOW, OVER_BUDGET
from engram.context.rows import HistoryReader, HistoryRows, PlainRow, Row, Stored, rows_of
from engram.errors import StoreError
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
    ``buf[pos:]`` are the rows read and not taken yet (newest first);
    ``special`` holds every non-plain row read so far, whole, by id.
    """

    __slots__ = (
        "_before",
        "_done",
        "_floor",
        "_read",
        "_size",
        "buf",
        "estimate",
        "pos",
        "rows_read",
        "special",
        "stops",
    )

    def __init__(self, read: HistoryReader, floor_id: int | None, first: int):
        self._read = read
        self._floor = floor_id
        self._before: int | None = None
        self.buf: list[Row] = []
        self.pos = 0
        self.special: dict[int, Stored] = {}
        self.stops: list[int] = []  # positions in ``buf`` of its special rows, increasing
        self._done = False
        self._size = max(1, first)
        self.rows_read = 0
        self.estimate: Callable[[], int | None] | None = None

    def next(self) -> Row | None:
        """Return the next older row, reading a chunk when the buffer is used up."""
        if self.pos >= len(self.buf):
            if self._done:
                return None
            self._fill()
            if not self.buf:
                return None
        row = self.buf[self.pos]
        self.pos += 1
        return row

    def stored(self, row: Row) -> Stored:
        """The row as a message (whole when special)."""
        found = self.special.get(row[0])
        return found if found is not None else PlainRow(row)

    def plain_run_end(self) -> int:
        """End of the run of plain rows that starts at ``pos``."""
        stops = self.stops
        if stops:
            at = bisect_right(stops, self.pos - 1)
            if at < len(stops):
                return stops[at]
        return len(self.buf)

    def _fill(self) -> None:
        size = self._size
        if self.estimate is not None and (wanted := self.estimate()) is not None:
            size = max(MIN_CHUNK, min(wanted, MAX_CHUNK))
        got = self._read(size, self._before)
        batch = got if isinstance(got, HistoryRows) else rows_of(got)
        rows = batch.rows
        self.rows_read += len(rows)
        if len(rows) < size:
            self._done = True
        if rows:
            if self._before is not None and rows[0][0] >= self._before:
                # A reader that ignores before_id would make this loop forever.
                raise StoreError(
                    f"history reader returned id {rows[0][0]}, not older than {self._before}"
                )
            self._before = rows[-1][0]
            if self._floor is not None and rows[-1][0] <= self._floor:
                floor = self._floor
                rows = [r for r in rows if r[0] > floor]
                self._done = True
        special = batch.special
        if special:
            # What is already here wins: a call shown without its unanswered calls
            # (see _call_unit) stays shown so when a reader hands its messages again.
            self.special = {**special, **self.special}
            self.stops = [i for i, r in enumerate(rows) if r[0] in special]
        else:
            self.stops = []
        self.buf = rows
        self.pos = 0
        self._size = min(size * 2, MAX_CHUNK)


class Unit:
    """One atomic piece of the window: a message, or a tool call with its results."""

    __slots__ = ("cost", "is_user", "orphans", "rows", "unanswered")

    def __init__(
        self,
        rows: list[Row],
        orphans: list[Row],
        cost: int,
        is_user: bool,
        unanswered: int | None = None,
    ):
        self.rows = rows  # oldest first
        self.orphans = orphans  # tool results just after it with no parent, oldest first
        self.cost = cost
        self.is_user = is_user
        self.unanswered = unanswered  # id of an assistant message shown without some calls


_NO_ROWS: list[Row] = []  # shared and never mutated: the common case allocates nothing


def row_cost(cursor: Cursor, costing: Costing, row: Row) -> int:
    """What ``row`` costs with ``costing`` (its stored count on the plain path)."""
    if costing.plain and row[0] not in cursor.special:
        return row[3]
    return costing.cost(cursor.stored(row))


def next_unit(cursor: Cursor, costing: Costing) -> Unit | None:
    """Read the next older unit; None at the start of the candidate history."""
    pending: list[Row] = []  # tool rows, newest first
    while True:
        row = cursor.next()
        if row is None:
            if pending:  # their call is before the floor or missing: orphans
                return Unit([], pending[::-1], 0, False)
            return None
        if row[1] == "tool":
            pending.append(row)
            continue
        if row[0] in cursor.special and cursor.stored(row).tool_calls:
            return _call_unit(cursor, costing, row, pending[::-1])
        cost = row_cost(cursor, costing, row)
        return Unit([row], pending[::-1] if pending else _NO_ROWS, cost, row[1] == "user")


def _call_unit(cursor: Cursor, costing: Costing, call: Row, results: list[Row]) -> Unit:
    """An assistant call with the results that answer it (oldest first); the rest are orphans.

    Each call id takes its first result. Calls no result answers are left out
    of the message shown (a view with the same id, put in the cursor's
    ``special`` in place of the stored one); with nothing left to show (no
    text, no answered call) the message itself is left out.
    """
    message = cursor.stored(call)
    wanted = {c.get("id") for c in message.tool_calls or () if isinstance(c, Mapping)}
    members: list[Row] = []
    orphans: list[Row] = []
    answered: set[str] = set()
    for tool in results:
        call_id = cursor.stored(tool).tool_call_id
        if call_id is not None and call_id in wanted and call_id not in answered:
            answered.add(call_id)
            members.append(tool)
        else:
            orphans.append(tool)
    if len(answered) == len(wanted):
        members.insert(0, call)
        return Unit(members, orphans, sum(row_cost(cursor, costing, x) for x in members), False)
    shown = answered_only(message, answered)
    if shown is not None:
        cursor.special[call[0]] = shown
        members.insert(0, (call[0], call[1], call[2], shown.tokens))
    cost = sum(row_cost(cursor, costing, x) for x in members)
    return Unit(members, orphans, cost, False, call[0])


def answered_only(call: Stored, answered: set[str]) -> Stored | None:
    """``call`` shown with only its ``answered`` calls, or None when nothing would be left."""
    calls = [c for c in call.tool_calls or () if isinstance(c, Mapping) and c.get("id") in answered]
    if not calls and not call.content.strip() and call.parts is None:
        return None
    tokens = count_message(
        storage_counter(), call.role, call.content, name=call.name, tool_calls=calls or None
    )
    # Calls are only ever whole messages (a plain row has none): a dataclass.
    view: Stored = dataclasses.replace(call, tool_calls=calls or None, tokens=tokens)  # type: ignore[type-var]
    return view


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
        scanned += len(unit.rows) + len(unit.orphans)
        if scanned > MAX_TURN_SCAN:
            break
    if user is None:
        # No user message within reach: everything scanned is ordinary history.
        return None, [], after_user
    return user, after_user[::-1], []


@dataclass(slots=True)
class Window:
    """The window as it grows, newest first, and why it ended.

    ``exchanges`` is counted only when the policy limits exchanges (nothing
    else reads it).
    """

    remaining: int  # budget still free
    count: int  # messages in the window (current turn included)
    tokens: int  # their cost (current turn included)
    exchanges: int  # user messages in the window
    orphan_ids: list[int]
    older: list[Row] = field(default_factory=list)  # before the current turn, newest first
    unanswered_ids: list[int] = field(default_factory=list)  # calls shown without some calls
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

    ``spill`` (newest first) is read before the cursor. Runs of plain rows are
    taken at once (:func:`_take_plain`); tool groups, images and views go
    through :func:`next_unit`.
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
        if plain and not spill and cursor.pos < len(cursor.buf):
            _take_plain(cursor, window, limits)
            if window.reason is not None:
                return
            # Here the buffer is used up or goes on with a special row: next_unit.
        unit = spill.pop() if spill else next_unit(cursor, costing)
        if unit is None or not _take_unit(unit, window, limits, cursor.special):
            return


def _take_plain(cursor: Cursor, window: Window, limits: _Limits) -> None:
    """Take the plain rows at the cursor, newest first, while they fit.

    They cost their stored counts: running sums say how many fit the budget
    and the token limit, and the message limit caps them, so the run is taken
    in one slice. A policy that limits exchanges counts users row by row.
    """
    if limits.max_exchanges != _UNLIMITED:
        _take_plain_exchanges(cursor, window, limits)
        return
    buf, pos = cursor.buf, cursor.pos
    end = cursor.plain_run_end()
    if end <= pos:
        return
    run = buf[pos:end]
    costs = [r[3] for r in run]
    sums = list(accumulate(costs))
    count, tokens = window.count, window.tokens
    take = min(
        len(run),
        bisect_right(sums, window.remaining),
        bisect_right(sums, limits.max_tokens - tokens),
        max(0, limits.max_messages - count),
    )
    if take:
        window.older += run[:take] if take < len(run) else run
        spent = sums[take - 1]
        window.remaining -= spent
        window.tokens = tokens = tokens + spent
        window.count = count = count + take
        cursor.pos = pos + take
    if take == len(run):
        return
    cost = costs[take]  # the first row that does not fit: the same tests as one by one
    if count >= limits.max_messages or tokens + cost > limits.max_tokens:
        window.reason = OLDER_THAN_WINDOW
        window.bound = _cap(count + 1, tokens + cost, window.exchanges, limits)
    else:
        window.reason = OVER_BUDGET
        window.bound = BUDGET


def _take_plain_exchanges(cursor: Cursor, window: Window, limits: _Limits) -> None:
    """:func:`_take_plain` one row at a time, counting exchanges."""
    buf, pos = cursor.buf, cursor.pos
    end = cursor.plain_run_end()
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
    i = pos
    while i < end:
        row = buf[i]
        cost = row[3]
        if count >= max_messages or tokens + cost > max_tokens or exchanges >= max_exchanges:
            window.reason = OLDER_THAN_WINDOW
            window.bound = _cap(count + 1, tokens + cost, exchanges, limits)
            break
        if cost > remaining:
            window.reason = OVER_BUDGET
            window.bound = BUDGET
            break
        i += 1
        remaining -= cost
        tokens += cost
        count += 1
        if row[1] == "user":
            exchanges += 1
    window.older += buf[pos:i]
    cursor.pos = i
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


def has_tools(rows: list[Row], special: Mapping[int, Stored]) -> bool:
    """True when one of ``rows`` is a tool call or a tool result."""
    for row in rows:
        m = special.get(row[0])
        if m is not None and (m.tool_calls or m.tool_call_id):
            return True
    return False


def _take_unit(unit: Unit, window: Window, limits: _Limits, special: Mapping[int, Stored]) -> bool:
    """Add ``unit`` to the window; False (and ``window.reason`` set) when it does not fit."""
    members, cost = unit.rows, unit.cost
    if not members:  # orphans at the very start of the candidates, or a call with nothing left
        window.orphan_ids.extend(r[0] for r in unit.orphans)
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
        window.orphan_ids.extend(r[0] for r in unit.orphans)
    window.remaining -= cost
    window.tokens += cost
    window.count += len(members)
    if unit.is_user:
        window.exchanges += 1
    window.has_tools = window.has_tools or has_tools(members, special)
    return True
