"""The record of prompts sent: tokens per turn against the full history's size.

Every :meth:`Session.context` call that may write (``compact=True``, the
default: a real turn) records one turn: when, the prompt's exact tokens, and
the stored history's size (messages and tokens) at that moment. Read-only
views (``compact=False``, the dashboard, ``engram context``) record nothing.

Turns go to the session's ``"prompt_log"`` state document, which keeps
running totals over every turn and the newest :data:`MAX_TURNS_KEPT` turns
(for the chart), so it stays small however long the session. Writing it on
every turn would cost the fastest prompts (a lean policy reads no state at
all) twenty times their time, so :class:`PromptRecorder` keeps turns in
memory and writes them in batches: at most every :data:`FLUSH_SECONDS`, when
:data:`MAX_BUFFERED` are waiting, before this process reads a log, and when
the ``Engram`` closes. Another process sees a turn once its batch is written.
A batch that cannot be written (store failure, lost races) is logged and
dropped: it is a record, and never fails a turn.

A turn may carry its recipe (:class:`~engram.provenance.recipe.PendingTurn`):
it is written to the prompt archive with the same batch
(:mod:`engram.provenance.writer`), and the returned
:class:`~engram.provenance.writer.PromptTicket` takes what the provider then
reports about the answer.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engram.errors import Contention, StoreError
from engram.models import JSON
from engram.provenance.digest import PieceCache
from engram.provenance.recipe import PendingTurn
from engram.provenance.writer import PromptTicket, UsageNotes, write_turns
from engram.statedoc import compare_and_set
from engram.store.base import Store

__all__ = [
    "FLUSH_SECONDS",
    "MAX_BUFFERED",
    "MAX_TURNS_KEPT",
    "PROMPT_LOG_KIND",
    "PromptLog",
    "PromptRecorder",
    "Turn",
    "load_prompt_log",
]

logger = logging.getLogger("engram")

PROMPT_LOG_KIND = "prompt_log"
#: Newest turns kept one by one; older ones live on only in the totals.
MAX_TURNS_KEPT = 240
#: Compare-and-set attempts of one batch (a lost batch costs chart points, not a turn).
RECORD_ATTEMPTS = 5
#: Longest time a recorded turn waits in memory before the next turn writes it.
FLUSH_SECONDS = 1.0
#: Turns waiting in memory that make the next turn write them all.
MAX_BUFFERED = 256


@dataclass(frozen=True, slots=True)
class Turn:
    """One prompt sent: its exact tokens, and the whole stored history's size then."""

    at: datetime
    sent_tokens: int
    history_tokens: int
    history_messages: int
    budget: int

    def to_list(self) -> list[Any]:
        """The compact stored form."""
        return [
            self.at.isoformat(),
            self.sent_tokens,
            self.history_tokens,
            self.history_messages,
            self.budget,
        ]

    @classmethod
    def from_list(cls, row: list[Any]) -> Turn:
        """Read the stored form back."""
        at, sent, history, messages, budget = row
        return cls(datetime.fromisoformat(at), int(sent), int(history), int(messages), int(budget))


@dataclass(frozen=True, slots=True)
class PromptLog:
    """Totals over every recorded turn, and the newest turns one by one (oldest first).

    Attributes:
        turns: Prompts recorded.
        sent_tokens: Tokens sent to the model over all of them.
        history_tokens: Tokens the whole history would have cost at each of
            those turns, added up (what sending everything would have sent).
        recent: The newest turns, at most :data:`MAX_TURNS_KEPT`.

    """

    turns: int = 0
    sent_tokens: int = 0
    history_tokens: int = 0
    recent: tuple[Turn, ...] = ()

    @property
    def saved_tokens(self) -> int:
        """Tokens not sent thanks to the lean prompt (never negative)."""
        return max(0, self.history_tokens - self.sent_tokens)

    @property
    def savings(self) -> float | None:
        """Share of the full history's tokens not sent, 0..1; None before any turn."""
        if self.history_tokens <= 0:
            return None
        return self.saved_tokens / self.history_tokens

    @property
    def last_budget(self) -> int | None:
        """The budget of the newest recorded turn, or None before any."""
        return self.recent[-1].budget if self.recent else None

    def to_dict(self) -> JSON:
        """The stored document."""
        return {
            "turns": self.turns,
            "sent_tokens": self.sent_tokens,
            "history_tokens": self.history_tokens,
            "recent": [turn.to_list() for turn in self.recent],
        }

    @classmethod
    def from_dict(cls, data: JSON) -> PromptLog:
        """Read a stored document; a malformed one reads as empty (it is only a record)."""
        try:
            return cls(
                turns=int(data.get("turns", 0)),
                sent_tokens=int(data.get("sent_tokens", 0)),
                history_tokens=int(data.get("history_tokens", 0)),
                recent=tuple(Turn.from_list(row) for row in data.get("recent", ())),
            )
        except (TypeError, ValueError):
            logger.warning("prompt log unreadable; shown as empty")
            return cls()

    def add(self, *turns: Turn) -> PromptLog:
        """This log with more turns (kept in time order)."""
        recent = sorted((*self.recent, *turns), key=lambda turn: turn.at)
        return PromptLog(
            turns=self.turns + len(turns),
            sent_tokens=self.sent_tokens + sum(turn.sent_tokens for turn in turns),
            history_tokens=self.history_tokens + sum(turn.history_tokens for turn in turns),
            recent=tuple(recent[-MAX_TURNS_KEPT:]),
        )

    def merge(self, other: PromptLog) -> PromptLog:
        """Totals of two logs (for a whole scope); ``recent`` is left empty."""
        return PromptLog(
            turns=self.turns + other.turns,
            sent_tokens=self.sent_tokens + other.sent_tokens,
            history_tokens=self.history_tokens + other.history_tokens,
        )


def _load(store: Store, scope: str, session: str) -> tuple[PromptLog, int]:
    record = store.load_state(scope, session, PROMPT_LOG_KIND)
    if record is None:
        return PromptLog(), 0
    return PromptLog.from_dict(record.data), record.version


def load_prompt_log(store: Store, scope: str, session: str) -> PromptLog:
    """The session's prompt log (empty before the first recorded turn)."""
    return _load(store, scope, session)[0]


def _write(store: Store, scope: str, session: str, turns: list[Turn]) -> None:
    """Add ``turns`` to the stored log by compare-and-set; a failure is logged, never raised."""

    def save(log: PromptLog, version: int) -> bool:
        saved = store.save_state(
            scope, session, PROMPT_LOG_KIND, log.to_dict(), expected_version=version
        )
        return saved is not None

    try:
        compare_and_set(
            lambda: _load(store, scope, session),
            lambda log: log.add(*turns),
            save,
            what=f"prompt log of {scope}/{session}",
            attempts=RECORD_ATTEMPTS,
        )
    except (Contention, StoreError) as exc:
        logger.warning("%d prompt(s) of %s/%s not recorded: %s", len(turns), scope, session, exc)


class PromptRecorder:
    """Turns recorded by one ``Engram``, written to the store in batches. Thread-safe."""

    def __init__(self, store: Store, *, flush_seconds: float = FLUSH_SECONDS) -> None:
        self._store = store
        self._flush_seconds = flush_seconds
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], list[Turn]] = {}
        self._recipes: dict[tuple[str, str], list[tuple[PendingTurn, PromptTicket]]] = {}
        self._usage = UsageNotes()
        self._pieces = PieceCache()
        self._waiting = 0
        self._last_flush = time.monotonic()

    def record(
        self,
        scope: str,
        session: str,
        *,
        sent_tokens: int,
        budget: int,
        history: tuple[int, int] | None = None,
        recipe: PendingTurn | None = None,
    ) -> PromptTicket | None:
        """Record one turn with the stored history's size now (none for a session never written).

        ``history`` is that size as ``(messages, tokens)`` when the caller has
        just read it (the prompt builder does), which saves a look-up per turn.
        With ``recipe`` the turn's recipe is archived too, and its ticket returned.
        """
        if history is None:
            info = self._store.get_session(scope, session)
            if info is None:
                return None
            history = (info.message_count, info.token_count)
        ticket = PromptTicket(scope, session, self._usage.add) if recipe is not None else None
        turn = Turn(
            at=datetime.now(UTC),
            sent_tokens=sent_tokens,
            history_tokens=history[1],
            history_messages=history[0],
            budget=budget,
        )
        if recipe is not None:
            recipe.at = turn.at
        with self._lock:
            self._pending.setdefault((scope, session), []).append(turn)
            if recipe is not None and ticket is not None:
                self._recipes.setdefault((scope, session), []).append((recipe, ticket))
            self._waiting += 1
            due = (
                self._waiting >= MAX_BUFFERED
                or time.monotonic() - self._last_flush >= self._flush_seconds
            )
        if due:
            self.flush()
        return ticket

    def flush(self, scope: str | None = None, session: str | None = None) -> None:
        """Write the waiting turns: all of them, or those of one session."""
        with self._lock:
            if scope is None or session is None:
                batch, self._pending = self._pending, {}
                recipes, self._recipes = self._recipes, {}
                self._waiting = 0
                self._last_flush = time.monotonic()
            else:
                turns = self._pending.pop((scope, session), [])
                batch = {(scope, session): turns} if turns else {}
                mine = self._recipes.pop((scope, session), [])
                recipes = {(scope, session): mine} if mine else {}
                self._waiting -= len(turns)
        for (batch_scope, batch_session), turns in batch.items():
            _write(self._store, batch_scope, batch_session, turns)
        for (batch_scope, batch_session), pending in recipes.items():
            write_turns(self._store, batch_scope, batch_session, pending, self._pieces)
        if len(self._usage):
            self._usage.write(self._store, scope, session)

    def drop(self, scope: str, session: str | None = None) -> None:
        """Forget the waiting turns of a session (or of a whole scope) that was deleted.

        Written later, they would bring the deleted session back as an empty one.
        """
        with self._lock:
            gone = [k for k in self._pending if k[0] == scope and session in (None, k[1])]
            for key in gone:
                self._waiting -= len(self._pending.pop(key))
                for _, ticket in self._recipes.pop(key, []):
                    ticket.failed = True

    def load(self, scope: str, session: str) -> PromptLog:
        """The session's log, with the turns this process still holds written first."""
        self.flush(scope, session)
        return load_prompt_log(self._store, scope, session)
