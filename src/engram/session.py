"""The ``Session``: a handle on one conversation of a scope, from :meth:`Engram.session`.

A session writes messages (validated, counted once), reads them back (pages,
search, dates, the extended window), and asks for the prompt of the next turn
(:mod:`engram.prompt`). It holds no data and no logic of its own beyond
checking arguments: everything lives in the runtime's store, and background
work goes to the runtime's scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from engram import idempotency, searching
from engram.agent_state import AgentState
from engram.compaction.cycle import CompactionResult, load_compaction_state
from engram.compaction.state import CompactionState
from engram.errors import InvalidMessage, InvalidQuery
from engram.intake.checks import (
    MAX_CONTENT_BYTES,
    optional_message_id,
    optional_timestamp,
    roles_filter,
    text_field,
)
from engram.intake.validation import build_message, build_messages, check_tool_answers
from engram.limits import MAX_EXTENDED_CONTEXT
from engram.llm.client import LLMResult
from engram.memories.records import Outcome as MemoryOutcome
from engram.memories.service import Memories
from engram.models import ROLES, Message, NewMessage, SearchHit, SessionInfo
from engram.policy import DEFAULT_BUDGET, Policy, get_policy
from engram.prompt import fixed_tokens
from engram.runtime import Runtime
from engram.search.when import moment
from engram.sections.agent_state import load_agent_state, update_agent_state
from engram.session_edits import TOOL_CALL_LOOKBACK, EditVerbs
from engram.session_prompts import SessionPrompts
from engram.store.base import MAX_PAGE

if TYPE_CHECKING:
    from engram.exchanges import Exchanges

__all__ = ["DEFAULT_BUDGET", "TOOL_CALL_LOOKBACK", "Session"]

#: First messages read to find a session's title, and words a made-up title keeps.
TITLE_SCAN = 20
TITLE_WORDS = 8


class Session(EditVerbs, SessionPrompts):
    """One conversation of a scope. Obtain it with :meth:`Engram.session`."""

    def __init__(
        self, runtime: Runtime, scope: str, session_id: str, policy: Policy | None
    ) -> None:
        self.runtime = runtime
        self.scope = scope
        self.id = session_id
        self._policy = policy
        self._store = runtime.store

    @property
    def tz(self) -> Any:
        """The time zone date phrases are read in."""
        return self.runtime.tz

    # -- writing -------------------------------------------------------------------

    def add(
        self,
        role: str,
        content: str | Sequence[Any] | None,
        *,
        name: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        tool_call_id: str | None = None,
        created_at: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """Validate, count and store one message. Nothing is written if it is refused.

        ``content`` is text, or a list of content parts (text, and images in a
        user message: OpenAI ``image_url`` parts or Anthropic image blocks),
        kept whole in ``Message.parts`` when it holds an image.
        """
        message = build_message(
            role,
            content,
            name=name,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            created_at=created_at,
            metadata=metadata,
        )
        return self._append([message])[0]

    def add_many(
        self, messages: Iterable[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[Message]:
        """Store many OpenAI-format messages in one transaction (all or none).

        With ``idempotency_key`` (a retried request's own key), a batch already
        stored under that key among the newest messages is not stored again:
        the messages stored the first time are returned. The same key with
        other messages raises :class:`~engram.errors.IdempotencyConflict`
        (see :mod:`engram.idempotency`).
        """
        batch = self.check_many(messages)
        if not batch:
            return []
        if idempotency_key is None:
            return self.add_checked(batch)
        return idempotency.store_once(
            self._store, self.scope, self.id, idempotency_key, batch, self.add_checked
        )

    def check_many(self, messages: Iterable[Mapping[str, Any]]) -> list[NewMessage]:
        """Validate messages exactly as :meth:`add_many` would, writing nothing.

        Raises:
            InvalidMessage: the first refused message, by position and field.

        """
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise InvalidMessage(
                f"messages must be a list of message objects, got {type(messages).__name__}"
            )
        batch = build_messages(messages)
        if any(m.role == "tool" for m in batch):
            check_tool_answers(batch, self._recent_call_ids(batch))
        return batch

    def _append(self, batch: list[NewMessage]) -> list[Message]:
        if any(m.role == "tool" for m in batch):
            check_tool_answers(batch, self._recent_call_ids(batch))
        return self.add_checked(batch)

    def add_checked(self, batch: list[NewMessage]) -> list[Message]:
        """Count once and store, in one transaction, what :meth:`check_many` returned."""
        tokens = self.runtime.count_many(batch)
        stored = self._store.append(self.scope, self.id, batch, tokens)
        self.runtime.embed_later(self.scope, self.id)  # vectors are computed off the write path
        return stored

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
            self._policy = self.runtime.stored_policy(self.scope, self.id)
        return self._policy

    def messages(self, *, after_id: int | None = None, limit: int = 100) -> list[Message]:
        """The whole history, oldest first, a page at a time (for display)."""
        after = optional_message_id("after_id", after_id)
        return self._store.page(self.scope, self.id, after_id=after, limit=_page_limit(limit))

    # -- compaction ------------------------------------------------------------------

    def compact(
        self,
        *,
        system: str | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> CompactionResult:
        """Compact now; returns once the new state is committed (or nothing was due).

        ``system`` is the system prompt the next turns use: the token trigger
        counts it. When another thread or process commits first, its state
        stands and ``committed`` is False with reason "superseded".
        """
        active = get_policy(policy) if policy is not None else self.policy
        return self.runtime.compact(self.scope, self.id, active, extra_tokens=self._fixed(system))

    def compact_later(
        self,
        *,
        system: str | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> bool:
        """Schedule a compaction in the background (once per session); True if scheduled.

        A policy with ``sync_compaction`` compacts now instead. On a store with
        a shared job queue (PostgreSQL) the compaction is a job that any
        server's worker may run (at most one pending or running per session);
        True means such a job is pending or running.
        """
        active = get_policy(policy) if policy is not None else self.policy
        if not active.compacts:
            return False
        fixed = self._fixed(system)
        if active.sync_compaction:
            self.runtime.compact(self.scope, self.id, active, extra_tokens=fixed)
            return False
        return self.runtime.scheduler.compact_later(self.scope, self.id, active, extra_tokens=fixed)

    def _fixed(self, system: str | None) -> int:
        memories = self.runtime.memories_section(self.scope)
        return fixed_tokens(system, [memories] if memories is not None else [])

    def end(self, reason: str = "ended", *, wait: bool = False) -> Future[MemoryOutcome]:
        """End the conversation and write a memory of it for the scope, off the caller's path.

        Returns at once (unless ``wait``); the memory is written in the
        background with a 30-second limit. A failure is logged and skipped:
        the session still ends. A session never written ends with a "skipped"
        outcome (nothing to remember, nothing recorded). The future says what
        happened. On a store with a shared job queue the memory is a job any
        server's worker may run; the future resolves when it completes, and is
        cancelled if this Engram closes first (the job stays queued for the
        other workers).
        """
        return self.runtime.scheduler.end_session(self.scope, self.id, reason, wait=wait)

    def compaction_state(self) -> CompactionState:
        """The session's compaction state (summary, important data, watermark...)."""
        return load_compaction_state(self._store, self.scope, self.id)[0]

    # -- exchanges and agent state ----------------------------------------------------

    @property
    def exchanges(self) -> Exchanges:
        """The exchange API: begin / add_agent_message / finalize, tool cache, debug view."""
        from engram.exchanges import Exchanges  # only sessions of the exchanges preset use it

        return Exchanges(self)

    def agent_state(self) -> AgentState:
        """The agent state of this session (empty before the first update)."""
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
        context: int = 0,
        partner: bool = False,
        exclude: Collection[int] = (),
        exclude_visible: bool = False,
        exclude_question: bool = False,
        include_tool_results: bool = False,
        mode: str = "auto",
        as_of: datetime | None = None,
    ) -> list[SearchHit]:
        """Ranked search of this session (or the whole scope), best first.

        Content words of ``query`` (no stop words; "quoted phrases") are matched in
        each message, the turn it follows and its date as words, ranked by BM25 (see
        :mod:`engram.searching`); named participants and date phrases lift messages.

        Args:
            query: Plain text, never query syntax.
            limit: Most hits returned.
            roles: Only messages of these roles.
            start: Only messages at or after this instant.
            end: Only messages before this instant.
            all_sessions: Search every session of the scope.
            context: Neighbouring turns returned with each hit, on each side (0-3).
            partner: Return each hit's exchange partner (the answer to a question,
                the question of an answer) in ``hit.partner``.
            exclude: Message ids never returned.
            exclude_visible: Also leave out the messages of the last prompt this
                engine built for the session (what the model already sees), as
                hits, partners or neighbours; the ``search_history`` tool does.
            exclude_question: Also leave out the question being asked (the newest
                user message); the ``search_history`` tool does.
            include_tool_results: Also return results of Engram's own retrieval tools.
            mode: ``"auto"`` (hybrid on an engine with ``embeddings=True`` when the
                conversations name no participant, else BM25), ``"keyword"``,
                ``"semantic"`` or ``"hybrid"`` (the last two need embeddings).
            as_of: When the question is asked (default now): "yesterday", "three
                weeks ago" in ``query`` are read against it.
        """
        query = text_field("query", query, max_bytes=MAX_CONTENT_BYTES, error=InvalidQuery)
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise InvalidQuery(f"context must be an integer >= 0, got {context!r}")
        visible = self.runtime.visible(self.scope, self.id) if exclude_visible else ()
        asked = searching.question_ids(self._store, self.scope, self.id) if exclude_question else ()
        exclude = {*exclude, *visible, *asked}
        request = searching.Request(
            scope=self.scope,
            session=None if all_sessions else self.id,
            text=query,
            now=moment(as_of),
            tz=self.runtime.tz,
            exclude=frozenset(exclude),
            include_own_results=include_tool_results,
            roles=roles_filter(roles, ROLES),
            start=optional_timestamp("start", start),
            end=optional_timestamp("end", end),
            limit=_page_limit(limit),
        )
        hits = searching.run(self.runtime, request, mode)
        hits = searching.add_neighbours(self._store, hits, context)
        if partner:
            hits = searching.add_partners(self._store, hits, query)
        return searching.without(hits, visible)

    def by_date(
        self,
        when: str | date | datetime,
        *,
        limit: int = 20,
        roles: Sequence[str] | None = None,
        all_sessions: bool = False,
        tz: Any = None,
        as_of: datetime | None = None,
    ) -> list[Message]:
        """Messages of a day or range: ISO dates or phrases (yesterday, Monday, last week...).

        ``tz`` (a zone name or tzinfo) overrides the engine's time zone for this call;
        phrases are read against ``as_of`` (default now).
        """
        start, end = self.date_range(when, tz=tz, as_of=as_of)
        return self._store.between(
            self.scope,
            None if all_sessions else self.id,
            start,
            end,
            limit=_page_limit(limit),
            roles=roles_filter(roles, ROLES),
        )

    def date_range(
        self, when: str | date | datetime, *, tz: Any = None, as_of: datetime | None = None
    ) -> tuple[datetime, datetime]:
        """The UTC half-open range a date phrase means at ``as_of`` (default now), in ``tz``.

        ``tz`` defaults to the engine's time zone.
        """
        if isinstance(when, datetime | date):
            when = when.isoformat()
        from engram.search import dates  # date phrases: only the date-based reads need them

        zone = self.runtime.tz if tz is None else tz
        return dates.parse_when(when, now=moment(as_of), tz=zone)

    def extended(self, count: int = 30, *, before_id: int | None = None) -> list[Message]:
        """More than the default window: up to 50 messages before ``before_id``, oldest first."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidQuery(f"count must be a positive integer, got {count!r}")
        count = min(count, MAX_EXTENDED_CONTEXT)
        before = optional_message_id("before_id", before_id)
        return self._store.tail(self.scope, self.id, limit=count, before_id=before)

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
            "title": self.title() if info else None,
        }

    def title(self) -> str | None:
        """A title for people: an imported one (ChatGPT), else the first user message's words."""
        first = self._store.page(self.scope, self.id, limit=TITLE_SCAN)
        for message in first:
            title = message.metadata.get("title")
            if isinstance(title, str) and title.strip():
                return title.strip()
        for message in first:
            if message.role == "user" and message.content and message.content.strip():
                words = message.content.split()
                more = " …" if len(words) > TITLE_WORDS else ""
                return " ".join(words[:TITLE_WORDS]) + more
        return None

    def message(self, message_id: int) -> Message:
        """One stored message of this session's scope by id."""
        return self.runtime.message(self.scope, message_id)

    def memories(self) -> Memories:
        """The long-term memories of this session's scope."""
        return self.runtime.memories(self.scope)

    def record_flags(self, found: Iterable[str]) -> None:
        """Count the flags of recalled text a tool handed to the model (``/metrics``)."""
        self.runtime.flag_metrics.recalled(found)

    def record_usage(self, result: LLMResult) -> None:
        """Record a model call made for this session (tokens and cost)."""
        self._store.record_usage(self.scope, self.id, result.usage_record())

    def __repr__(self) -> str:
        return f"Session(scope={self.scope!r}, id={self.id!r})"


def _page_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidQuery(f"limit must be a positive integer, got {limit!r}")
    return min(limit, MAX_PAGE)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
