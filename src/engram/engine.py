"""The ``Engram`` facade: one object from which sessions, messages and memories are reached.

The engine validates input, counts tokens once (at insert, in the storage
encoding), and delegates storage to a :class:`~engram.store.Store` and prompt
planning to :mod:`engram.context`. It holds no conversation data itself, so
many ``Engram`` objects (threads, processes, servers) can share one database.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engram import dates
from engram.context import Context, build_context
from engram.errors import ConfigError, InvalidQuery, MessageNotFound
from engram.models import Message, NewMessage, SearchHit, SessionInfo
from engram.policy import Policy, get_policy
from engram.store import Store, open_store
from engram.store.base import MAX_PAGE
from engram.tokens import count_message, counter_for_model, storage_counter
from engram.validation import build_message, build_messages, check_id, check_tool_answers

logger = logging.getLogger("engram")

#: Most messages ``Session.extended`` returns (seed 000's MAX_EXTENDED_CONTEXT).
MAX_EXTENDED_CONTEXT = 50
#: Default prompt budget when neither the call nor the policy gives one.
DEFAULT_BUDGET = 8000
#: How far back ``add`` looks for the assistant call a tool result answers.
TOOL_CALL_LOOKBACK = 64


class Engram:
    """Conversation memory over one store. Thread-safe; cheap to create."""

    def __init__(self, store: Store, *, tz: str = "UTC") -> None:
        self.store = store
        try:
            self.tz = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown time zone {tz!r}") from None
        self._counter = storage_counter()

    # -- sessions and messages ----------------------------------------------------

    def session(
        self, session_id: str, scope: str = "default", *, policy: Policy | str | Mapping[str, Any] | None = None
    ) -> Session:
        """A handle on one conversation. The session is created on first write.

        A ``policy`` (preset name, :class:`Policy` or dict) is stored with the
        session so background work and later handles use it too.
        """
        check_id("scope", scope)
        check_id("session", session_id)
        resolved = get_policy(policy) if policy is not None else None
        if resolved is not None:
            self.store.ensure_session(scope, session_id, policy=resolved.to_dict())
        return Session(self, scope, session_id, resolved)

    def message(self, message_id: int, scope: str = "default") -> Message:
        """One stored message by id, only if it belongs to ``scope``."""
        if isinstance(message_id, bool) or not isinstance(message_id, int):
            raise InvalidQuery(f"message id must be an integer, got {message_id!r}")
        found = self.store.get_message(scope, message_id)
        if found is None:
            raise MessageNotFound(f"no message {message_id} in scope {scope!r}")
        return found

    def sessions(self, scope: str | None = None, *, limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        """Sessions of one scope (or all), most recently updated first."""
        return self.store.list_sessions(scope, limit=limit, offset=offset)

    def scopes(self) -> list[str]:
        """Every scope with a session or a memory."""
        return self.store.list_scopes()

    def count(self, message: NewMessage) -> int:
        """Exact size of a message in the storage encoding, chat overhead included."""
        return count_message(
            self._counter,
            message.role,
            message.content,
            name=message.name,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
        )

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Close the store. Safe to call twice."""
        self.store.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Engram({self.store.url!r})"


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
        """The prompt for the next turn: fits ``budget - reserve`` tokens, exactly counted."""
        active = get_policy(policy) if policy is not None else self.policy
        budget = budget if budget is not None else (active.default_budget or DEFAULT_BUDGET)
        reserve = reserve if reserve is not None else active.default_reserve
        counter = counter_for_model(model)
        scope, session_id, tail = self.scope, self.id, self._store.tail

        def read(limit: int, before_id: int | None) -> list[Message]:
            return tail(scope, session_id, limit=limit, before_id=before_id)

        return build_context(
            read, budget=budget, reserve=reserve, system=system, counter=counter, policy=active
        )

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


def _page_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidQuery(f"limit must be a positive integer, got {limit!r}")
    return min(limit, MAX_PAGE)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def open(url: str | None = None, *, tz: str | None = None, **store_options: Any) -> Engram:  # noqa: A001
    """Open Engram on a store URL (default: ``ENGRAM_URL``, else ``sqlite:///./engram.db``).

    ``tz`` (default ``ENGRAM_TZ`` or UTC) is the time zone date phrases are read in.
    """
    store = open_store(url or os.environ.get("ENGRAM_URL"), **store_options)
    return Engram(store, tz=tz or os.environ.get("ENGRAM_TZ", "UTC"))
