"""Scope-level views and operations behind the facade: totals, pages of sessions, purge.

Everything here reads through the :class:`~engram.store.base.Store` protocol
only (sessions a page at a time, memories, usage), so it works on every
backend. A scope's totals are the sums of its sessions' running totals, which
the stores keep at append time: no message is scanned.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engram.models import JSON, SessionInfo
from engram.store.base import MAX_PAGE, Store

#: How a page of sessions is ordered: most recent activity first, or oldest first.
SessionOrder = Literal["recent", "oldest"]


@dataclass(frozen=True, slots=True)
class ScopeSummary:
    """A scope with its totals (sessions, messages, stored tokens, memories, last activity)."""

    name: str
    sessions: int
    messages: int
    tokens: int
    memories: int
    last_activity: datetime | None


def all_sessions(store: Store, scope: str) -> Iterator[SessionInfo]:
    """Every session of ``scope``, most recent first, read a page at a time."""
    offset = 0
    while True:
        page = store.list_sessions(scope, limit=MAX_PAGE, offset=offset)
        yield from page
        if len(page) < MAX_PAGE:
            return
        offset += len(page)


def summarize(store: Store, scope: str) -> ScopeSummary:
    """The totals of one scope."""
    sessions = messages = tokens = 0
    last: datetime | None = None
    for info in all_sessions(store, scope):
        sessions += 1
        messages += info.message_count
        tokens += info.token_count
        seen = info.last_message_at or info.updated_at
        if last is None or seen > last:
            last = seen
    memories = store.list_memories(scope)
    for memory in memories:
        if last is None or memory.updated_at > last:
            last = memory.updated_at
    return ScopeSummary(scope, sessions, messages, tokens, len(memories), last)


def session_page(
    store: Store, scope: str, *, limit: int, offset: int, order: SessionOrder
) -> tuple[list[SessionInfo], int]:
    """One page of a scope's sessions in ``order``, and how many sessions it has in all."""
    total = sum(1 for _ in all_sessions(store, scope))
    if order == "recent":
        return store.list_sessions(scope, limit=limit, offset=offset), total
    # Oldest first: the same page counted from the other end, reversed.
    start = max(0, total - offset - limit)
    count = max(0, min(limit, total - offset))
    return list(reversed(store.list_sessions(scope, limit=count, offset=start))), total


def delete_sessions(store: Store, scope: str) -> tuple[int, int]:
    """Delete every session of ``scope`` (admin). Returns how many sessions and messages went."""
    sessions = messages = 0
    for info in list(all_sessions(store, scope)):
        if store.delete_session(scope, info.id):
            sessions += 1
            messages += info.message_count
    return sessions, messages


def usage(store: Store, scopes: list[str]) -> JSON:
    """LLM calls, tokens and cost summed over ``scopes``."""
    totals: JSON = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    for scope in scopes:
        found = store.usage_totals(scope)
        for key in totals:
            totals[key] += found.get(key) or 0
    return totals
