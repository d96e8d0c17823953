"""The cache-aware window: the prompt's prefix stays identical from turn to turn.

Providers' prompt caches bill a prefix they saw recently, byte for byte, at a
fraction of the price. A window that drops its oldest message on every turn
changes the prompt right after the sections, so nothing after them is ever
reused. Here the window's oldest message moves in chunks, at fixed positions
of the session's history, so between two moves every prompt starts with the
previous one (system, sections, then the same window, grown at its end):

* A window bound by tokens (the budget, or ``max_window_tokens``) starts at the
  first unit at or after a chunk boundary. A message's position is the number
  of tokens stored before it in the session; boundaries are multiples of the
  chunk, ``cache_chunk`` of the room (the budget less the system prompt and
  sections, or ``max_window_tokens``: neither changes between compactions,
  whatever the current turn's size). The start stays put for about a
  chunk of new history, then jumps one chunk: the window holds between
  ``1 - cache_chunk`` and all of its room. That is the trade-off: a little
  less history in the worst turn, for a prefix the provider can cache.
* A window bound by ``max_messages`` grows past it, back to the previous
  multiple of the message chunk (``cache_chunk_messages``, by default
  ``max_messages``) in message positions: it holds from ``max_messages`` to
  ``max_messages + chunk - 1`` messages, budget permitting, so it never holds
  less than the policy promises. When the budget stops the growth first, the
  budget binds, as above.

Positions come from the session's stored totals (:class:`HistoryTotals`, kept
at append) minus what lies after each message, so nothing more is read for
them. Windows bound by exchanges, or by nothing, are left as they are; tool
results left out as orphans are not counted in positions (they only shift
boundaries, consistently from turn to turn). Units stay whole: a tool call and
its results are dropped or taken together.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from engram.context.costing import Costing
from engram.context.results import OLDER_THAN_WINDOW, OVER_BUDGET, HistoryTotals
from engram.context.rows import Row
from engram.context.window import (
    BUDGET,
    MESSAGES,
    TOKENS,
    Cursor,
    Unit,
    Window,
    has_tools,
    next_unit,
    row_cost,
)
from engram.policy import Policy

#: A token chunk is never smaller than this (tiny budgets would move every turn).
MIN_TOKEN_CHUNK = 16


def align_window(
    cursor: Cursor,
    costing: Costing,
    window: Window,
    turn: Sequence[Row],
    policy: Policy,
    totals: HistoryTotals | None,
    *,
    room: int,
) -> None:
    """Move the window's start to its chunk boundary (see the module docstring).

    Args:
        cursor: The cursor the window was filled from (read on when it grows).
        costing: The costing the window was filled with.
        window: The filled window; changed in place.
        turn: The current turn's rows, oldest first.
        policy: The session's policy (``cache_window``, ``cache_chunk``, limits).
        totals: The session's stored totals; None leaves the window as it is.
        room: Tokens for the window and the current turn (budget less the
            system prompt and sections).

    """
    if not policy.cache_window or totals is None or window.bound is None:
        return
    after = _After(tokens=sum(r[3] for r in turn), count=len(turn))
    if window.bound == MESSAGES and policy.max_messages:
        chunk = policy.cache_chunk_messages or policy.max_messages
        _grow(cursor, costing, window, policy, totals, after, chunk)
    if window.bound in (BUDGET, TOKENS):
        limit = policy.max_window_tokens if window.bound == TOKENS else None
        chunk = _token_chunk(policy.cache_chunk * (limit or room))
        _trim(cursor, costing, window, totals, after, chunk)


@dataclass(slots=True)
class _After:
    """Stored tokens and messages after the window's oldest message, the turn included."""

    tokens: int
    count: int


def _token_chunk(share: float) -> int:
    """Whole tokens of a chunk (at least :data:`MIN_TOKEN_CHUNK`)."""
    return max(MIN_TOKEN_CHUNK, int(share))


def _trim(
    cursor: Cursor,
    costing: Costing,
    window: Window,
    totals: HistoryTotals,
    after: _After,
    chunk: int,
) -> None:
    """Drop the oldest units until the window starts at or after a chunk boundary."""
    older = window.older
    if not older:
        return
    special = cursor.special
    plain = costing.plain and (not special or not any(r[0] in special for r in older))
    # Stored tokens of the window, oldest first, added up.
    sums = list(accumulate([r[3] for r in reversed(older)]))
    position = totals.tokens - (after.tokens + sums[-1])  # stored before the oldest message
    if position < 0:  # totals older than the rows (a concurrent write): leave it
        return
    boundary = -(-position // chunk) * chunk
    if position >= boundary:
        return
    if plain:
        # Plain rows are units of one and cost their stored counts: drop the fewest
        # oldest rows whose tokens reach the boundary, at once.
        drop = min(bisect_left(sums, boundary - position) + 1, len(sums))
        cost = sums[drop - 1]
        del older[len(older) - drop :]
        window.tokens -= cost
        window.remaining += cost
        window.count -= drop
        return
    while older and position < boundary:
        unit = [older.pop()]
        while older and older[-1][1] == "tool":
            unit.append(older.pop())
        position += sum(r[3] for r in unit)
        cost = sum(row_cost(cursor, costing, r) for r in unit)
        window.tokens -= cost
        window.remaining += cost
        window.count -= len(unit)
        window.exchanges -= sum(1 for r in unit if r[1] == "user")
    window.has_tools = has_tools(older, special)


def _grow(
    cursor: Cursor,
    costing: Costing,
    window: Window,
    policy: Policy,
    totals: HistoryTotals,
    after: _After,
    chunk: int,
) -> None:
    """Take older units back to the previous multiple of ``chunk`` in message positions."""
    count_after = after.count + len(window.older)
    boundary = (totals.messages - count_after) // chunk * chunk
    max_tokens = policy.max_window_tokens
    while True:
        unit: Unit | None = window.pending or next_unit(cursor, costing)
        window.pending = None
        if unit is None:
            window.reason = None  # the history's start: nothing older was left out
            return
        if not unit.rows:  # orphan tool results: not counted, never shown
            window.orphan_ids.extend(r[0] for r in unit.orphans)
            continue
        if totals.messages - (count_after + len(unit.rows)) < boundary:
            return
        if max_tokens is not None and window.tokens + unit.cost > max_tokens:
            window.reason, window.bound = OLDER_THAN_WINDOW, TOKENS
            return
        if unit.cost > window.remaining:
            window.reason, window.bound = OVER_BUDGET, BUDGET
            return
        window.older.extend(reversed(unit.rows))
        window.orphan_ids.extend(r[0] for r in unit.orphans)
        count_after += len(unit.rows)
        window.remaining -= unit.cost
        window.tokens += unit.cost
        window.count += len(unit.rows)
        window.exchanges += 1 if unit.is_user else 0
        window.has_tools = window.has_tools or has_tools(unit.rows, cursor.special)
