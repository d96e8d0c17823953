"""The ``Session``: one conversation of a scope, reached through :meth:`Engram.session`.

A session writes messages (validated, counted once), reads them back (pages,
search, dates, the extended window), and builds the prompt for the next turn,
running or scheduling compaction when the policy says it is due. It holds no
data itself: everything lives in the engine's store.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from engram import dates
from engram.agent import agent_state_section, load_agent_state, update_agent_state
from engram.compaction.agentstate import AgentState
from engram.compaction.answers import answer_view, needs_view
from engram.compaction.planner import plan_compaction, rows_from_messages
from engram.compaction.runner import (
    UNREADABLE,
    CompactionResult,
    load_compaction_state,
    plan_state,
    section_tokens,
    sections_tokens,
    state_sections,
    unfolded,
)
from engram.compaction.state import CompactionState
from engram.context import Context, HistoryReader, Section, build_context
from engram.errors import InvalidQuery
from engram.exchanges import Exchanges, cache_section, load_exchange_state, visible_rows
from engram.limits import MAX_EXTENDED_CONTEXT
from engram.memories import Outcome as MemoryOutcome
from engram.memories import end_session as end_memory_session
from engram.models import Message, NewMessage, SearchHit, SessionInfo
from engram.policy import Policy, get_policy
from engram.store.base import MAX_PAGE
from engram.tokens import counter_for_model
from engram.validation import build_message, build_messages, check_tool_answers

if TYPE_CHECKING:
    # Only for annotations: engine.py imports this module at run time.
    from engram.engine import Engram

__all__ = [
    "DEFAULT_BUDGET",
    "PREREAD_ROWS",
    "TOOL_CALL_LOOKBACK",
    "Session",
    "has_triggers",
]

#: Default prompt budget when neither the call nor the policy gives one.
DEFAULT_BUDGET = 8000
#: How far back ``add`` looks for the assistant call a tool result answers.
TOOL_CALL_LOOKBACK = 64
#: Rows after the watermark ``context`` reads to decide whether compaction is
#: due; the same rows then feed the prompt builder. A longer backlog means a
#: compaction is overdue: it is scheduled and the builder reads the store.
PREREAD_ROWS = 1000


def has_triggers(policy: Policy) -> bool:
    """Tell whether ``policy`` ever compacts (a trigger is set)."""
    return (
        policy.summarize_over_tokens is not None
        or policy.max_history_messages is not None
        or policy.max_exchanges is not None
        or policy.fold_over_tokens is not None
    )


class Session:
    """One conversation of a scope. Obtain it with :meth:`Engram.session`."""

    def __init__(self, engram: Engram, scope: str, session_id: str, policy: Policy | None) -> None:
        self.engram = engram
        self.scope = scope
        self.id = session_id
        self._policy = policy
        self._store = engram.store

    # -- writing -------------------------------------------------------------------

    def add(
        self,
        role: str,
        content: str | None,
        *,
        name: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        tool_call_id: str | None = None,
        created_at: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """Validate, count and store one message. Nothing is written if it is refused."""
        message = build_message(
            role,
            content,
            name=name,
            tool_calls=list(tool_calls) if tool_calls is not None else None,
            tool_call_id=tool_call_id,
            created_at=created_at,
            metadata=metadata,
        )
        return self._append([message])[0]

    def add_many(self, messages: Iterable[Mapping[str, Any]]) -> list[Message]:
        """Store many OpenAI-format messages in one transaction (all or none)."""
        batch = build_messages(messages)
        if not batch:
            return []
        return self._append(batch)

    def _append(self, batch: list[NewMessage]) -> list[Message]:
        if any(m.role == "tool" for m in batch):
            check_tool_answers(batch, self._recent_call_ids(batch))
        tokens = [self.engram.count(m) for m in batch]
        return self._store.append(self.scope, self.id, batch, tokens)

    def _recent_call_ids(self, batch: list[NewMessage]) -> set[str]:
        wanted = {m.tool_call_id for m in batch if m.role == "tool"}
        offered = {c["id"] for m in batch if m.tool_calls for c in m.tool_calls}
        if wanted <= offered:
            return set()
        found: set[str] = set()
        for stored in self._store.tail(self.scope, self.id, limit=TOOL_CALL_LOOKBACK):
            if stored.tool_calls:
                found.update(call["id"] for call in stored.tool_calls)
        return found

    # -- reading -------------------------------------------------------------------

    def info(self) -> SessionInfo | None:
        """The stored session with its totals, or None before the first write."""
        return self._store.get_session(self.scope, self.id)

    @property
    def policy(self) -> Policy:
        """The session's policy: given at creation, else stored, else ``default``."""
        if self._policy is None:
            info = self.info()
            stored = info.policy if info is not None else None
            self._policy = get_policy(stored) if stored else get_policy("default")
        return self._policy

    def messages(self, *, after_id: int | None = None, limit: int = 100) -> list[Message]:
        """The whole history, oldest first, a page at a time (for display)."""
        return self._store.page(self.scope, self.id, after_id=after_id, limit=_page_limit(limit))

    def context(
        self,
        budget: int | None = None,
        *,
        reserve: int | None = None,
        system: str | None = None,
        model: str | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> Context:
        """The prompt for the next turn: fits ``budget - reserve`` tokens, exactly counted.

        Order (seed 001): system, long-term memories, important data, summary,
        then the recent messages after the compaction watermark. When the
        policy's compaction is due it runs first (``sync_compaction``) or in
        the background, and ``Context.pending_compaction`` says so; a
        compaction whose model failed is reported in ``Context.degraded``.
        """
        active = get_policy(policy) if policy is not None else self.policy
        budget = budget if budget is not None else (active.default_budget or DEFAULT_BUDGET)
        reserve = reserve if reserve is not None else active.default_reserve
        counter = counter_for_model(model)
        sections: list[Section] = []
        memories = self.engram.memories_section(self.scope)
        if memories is not None:
            sections.append(memories)
        if not has_triggers(active):
            # Lean policies never compact: no state is read on this hot path.
            return build_context(
                self._tail_reader(),
                budget=budget,
                reserve=reserve,
                system=system,
                counter=counter,
                policy=active,
                sections=sections,
            )
        extra = (section_tokens(system) if system else 0) + sections_tokens(sections)
        state, version = load_compaction_state(self._store, self.scope, self.id)
        rows, complete = unfolded(
            self._store, self.scope, self.id, state.watermark, max_rows=PREREAD_ROWS
        )
        notes: list[str] = []
        degraded: str | None = None
        pending = False
        due = not complete or (state.reset_reason is not None and version != UNREADABLE)
        if not due:
            plan = plan_compaction(
                active, rows_from_messages(rows), plan_state(state, extra_tokens=extra)
            )
            due = plan is not None
        if due and active.sync_compaction:
            result = self.engram.compact(self.scope, self.id, active, extra_tokens=extra)
            if result.degraded:
                degraded = "compaction fell back to the offline summarizer"
                notes.extend(result.notes)
            state, version = load_compaction_state(self._store, self.scope, self.id)
            rows, complete = unfolded(
                self._store, self.scope, self.id, state.watermark, max_rows=PREREAD_ROWS
            )
        elif due:
            pending = self.compact_later(system=system, policy=active)
            if pending:
                notes.append(
                    "compaction is due and runs in the background; this prompt uses the "
                    "previous summary and the recent window"
                )
        if degraded is None and state.last_error:
            degraded = "last compaction fell back to the offline summarizer"
            notes.append(f"last compaction degraded: {state.last_error}")
        sections.extend(state_sections(state))
        sections.extend(self._policy_sections(active))
        views: dict[int, str] | None = None
        if active.answer_over_bytes is not None and active.answer_view_bytes is not None:
            views = _answer_views(rows, active.answer_over_bytes, active.answer_view_bytes)
        if active.max_exchanges is not None:
            rows = visible_rows(rows)
        ctx = build_context(
            _rows_reader(rows) if complete else self._tail_reader(),
            budget=budget,
            reserve=reserve,
            system=system,
            counter=counter,
            policy=active,
            sections=sections,
            floor_id=state.watermark or None,
            views=views or None,
        )
        return dataclasses.replace(
            ctx,
            notes=[*ctx.notes, *notes],
            pending_compaction=pending,
            degraded=ctx.degraded or degraded,
        )

    def _tail_reader(self) -> HistoryReader:
        scope, session_id, tail = self.scope, self.id, self._store.tail

        def read(limit: int, before_id: int | None) -> list[Message]:
            return tail(scope, session_id, limit=limit, before_id=before_id)

        return read

    def _policy_sections(self, policy: Policy) -> list[Section]:
        """Sections some presets add after the summary: seed 004's cache, seed 002's state."""
        out: list[Section] = []
        if policy.max_exchanges is not None:
            cache = cache_section(load_exchange_state(self._store, self.scope, self.id)[0])
            if cache is not None:
                out.append(cache)
        if policy.max_history_messages is not None or policy.fold_over_tokens is not None:
            agent = agent_state_section(load_agent_state(self._store, self.scope, self.id)[0])
            if agent is not None:
                out.append(agent)
        return out

    # -- compaction ------------------------------------------------------------------

    def compact(
        self,
        *,
        system: str | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> CompactionResult:
        """Compact now; returns once the new state is committed (or nothing was due).

        ``system`` is the system prompt the next turns use: the token trigger
        counts it (seed 001). When another thread or process commits first,
        its state stands and ``committed`` is False with reason "superseded".
        """
        active = get_policy(policy) if policy is not None else self.policy
        return self.engram.compact(self.scope, self.id, active, extra_tokens=self._extra(system))

    def compact_later(
        self,
        *,
        system: str | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> bool:
        """Schedule a compaction in the background (once per session); True if scheduled.

        A policy with ``sync_compaction`` compacts now instead. On PostgreSQL
        the compaction is a job of the shared queue (at most one pending or
        running per session across servers), run by any server's worker;
        True means such a job is pending or running.
        """
        active = get_policy(policy) if policy is not None else self.policy
        if not has_triggers(active):
            return False
        extra = self._extra(system)
        if active.sync_compaction:
            self.engram.compact(self.scope, self.id, active, extra_tokens=extra)
            return False
        engram, scope, session_id = self.engram, self.scope, self.id
        if engram.jobs is not None:
            return engram.jobs.enqueue_compaction(scope, session_id, active, extra_tokens=extra)

        def run() -> CompactionResult:
            return engram.compact(scope, session_id, active, extra_tokens=extra)

        return engram.background.submit((scope, session_id), run)

    def _extra(self, system: str | None) -> int:
        memories = self.engram.memories_section(self.scope)
        return (section_tokens(system) if system else 0) + (
            sections_tokens([memories]) if memories is not None else 0
        )

    def end(self, reason: str = "ended", *, wait: bool = False) -> Future[MemoryOutcome]:
        """End the conversation and write a memory of it for the scope, off the caller's path.

        Returns at once (unless ``wait``); the memory is written by a background
        worker with a 30-second limit. A failure is logged and skipped: the
        session still ends. The future says what happened.

        On PostgreSQL the end is recorded at once and the memory is a job of the
        shared queue: the future resolves when the job completes in any
        server's worker (this process's or another), and is cancelled if this
        Engram closes first (the job stays queued for the other workers).
        """
        if self.engram.jobs is not None:
            return self.engram.jobs.end_session(
                self.engram.memories(self.scope), self.id, reason, wait=wait
            )
        return end_memory_session(
            self.engram.memories(self.scope),
            self.id,
            reason,
            worker=self.engram.memory_worker,
            wait=wait,
        )

    def compaction_state(self) -> CompactionState:
        """The session's compaction state (summary, important data, watermark...)."""
        return load_compaction_state(self._store, self.scope, self.id)[0]

    # -- seed 004 and seed 002 -----------------------------------------------------

    @property
    def exchanges(self) -> Exchanges:
        """Seed 004's exchange API: begin / add_agent_message / finalize, tool cache, debug view."""
        return Exchanges(self)

    def agent_state(self) -> AgentState:
        """Seed 002's agent state of this session (empty before the first update)."""
        return load_agent_state(self._store, self.scope, self.id)[0]

    def update_agent_state(self, change: Callable[[AgentState], AgentState]) -> AgentState:
        """Apply ``change`` (a pure function) by compare-and-set, retrying lost races."""
        return update_agent_state(self._store, self.scope, self.id, change)

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        roles: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        all_sessions: bool = False,
    ) -> list[SearchHit]:
        """BM25-ranked full-text search of this session (or the whole scope)."""
        if not isinstance(query, str):
            raise InvalidQuery(f"search query must be text, got {type(query).__name__}")
        return self._store.search(
            self.scope,
            query,
            session=None if all_sessions else self.id,
            roles=roles,
            start=start,
            end=end,
            limit=_page_limit(limit),
        )

    def by_date(
        self,
        when: str | date | datetime,
        *,
        limit: int = 20,
        roles: Sequence[str] | None = None,
        all_sessions: bool = False,
    ) -> list[Message]:
        """Messages of a day or range: ISO dates or phrases (yesterday, Monday, last week...)."""
        start, end = self.date_range(when)
        return self._store.between(
            self.scope,
            None if all_sessions else self.id,
            start,
            end,
            limit=_page_limit(limit),
            roles=roles,
        )

    def date_range(self, when: str | date | datetime) -> tuple[datetime, datetime]:
        """The UTC half-open range a date phrase means, in the engine's time zone."""
        if isinstance(when, datetime | date):
            when = when.isoformat()
        return dates.parse_when(when, now=datetime.now(UTC), tz=self.engram.tz)

    def extended(self, count: int = 30, *, before_id: int | None = None) -> list[Message]:
        """More than the default window: up to 50 messages before ``before_id``, oldest first."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidQuery(f"count must be a positive integer, got {count!r}")
        count = min(count, MAX_EXTENDED_CONTEXT)
        return self._store.tail(self.scope, self.id, limit=count, before_id=before_id)

    def stats(self) -> dict[str, Any]:
        """Counts, first and last dates and stored tokens of this session."""
        info = self.info()
        return {
            "scope": self.scope,
            "session": self.id,
            "total_messages": info.message_count if info else 0,
            "stored_tokens": info.token_count if info else 0,
            "first_message_at": _iso(info.first_message_at) if info else None,
            "last_message_at": _iso(info.last_message_at) if info else None,
            "policy": self.policy.name,
        }

    def __repr__(self) -> str:
        return f"Session(scope={self.scope!r}, id={self.id!r})"


def _rows_reader(rows: list[Message]) -> HistoryReader:
    """A history reader over rows already read (all the candidates, oldest first)."""
    ids = [m.id for m in rows]

    def read(limit: int, before_id: int | None) -> list[Message]:
        end = len(rows) if before_id is None else bisect.bisect_left(ids, before_id)
        return rows[max(0, end - limit) : end]

    return read


def _answer_views(rows: list[Message], over: int, view: int) -> dict[int, str]:
    """Short views of long assistant answers (seed 004); the stored messages stay whole."""
    return {
        m.id: answer_view(m.content, m.id, over_bytes=over, view_bytes=view)
        for m in rows
        if m.role == "assistant" and m.content and needs_view(m.content, over)
    }


def _page_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidQuery(f"limit must be a positive integer, got {limit!r}")
    return min(limit, MAX_PAGE)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
