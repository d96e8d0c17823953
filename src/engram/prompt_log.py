"""The record of prompts sent: tokens per turn against the full history's size.

Every :meth:`Session.context` call that may write (``compact=True``, the
default: a real turn) appends one entry to the session's ``"prompt_log"``
state document: when, the prompt's exact tokens, and the stored history's
size (messages and tokens) at that moment. Read-only views
(``compact=False``, the dashboard, ``engram context``) record nothing.

The document keeps running totals over every turn and the newest
:data:`MAX_TURNS_KEPT` entries (for the chart), so it stays small however long
the session. It is saved by compare-and-set like every state document; a
record that loses every race is skipped with a warning, never failing the turn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engram.errors import Contention
from engram.models import JSON
from engram.statedoc import compare_and_set
from engram.store.base import Store

__all__ = ["MAX_TURNS_KEPT", "PROMPT_LOG_KIND", "PromptLog", "Turn", "load_prompt_log", "record"]

logger = logging.getLogger("engram")

PROMPT_LOG_KIND = "prompt_log"
#: Newest turns kept one by one; older ones live on only in the totals.
MAX_TURNS_KEPT = 240
#: Compare-and-set attempts of one record (a lost record costs a chart point, not a turn).
RECORD_ATTEMPTS = 5


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

    def add(self, turn: Turn) -> PromptLog:
        """This log with one more turn."""
        return PromptLog(
            turns=self.turns + 1,
            sent_tokens=self.sent_tokens + turn.sent_tokens,
            history_tokens=self.history_tokens + turn.history_tokens,
            recent=(*self.recent, turn)[-MAX_TURNS_KEPT:],
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


def record(store: Store, scope: str, session: str, *, sent_tokens: int, budget: int) -> None:
    """Add one turn to the session's log, with the stored history's size now.

    Does nothing for a session that was never written (a prompt of nothing).
    """
    info = store.get_session(scope, session)
    if info is None:
        return
    turn = Turn(
        at=datetime.now(UTC),
        sent_tokens=sent_tokens,
        history_tokens=info.token_count,
        history_messages=info.message_count,
        budget=budget,
    )

    def save(log: PromptLog, version: int) -> bool:
        saved = store.save_state(
            scope, session, PROMPT_LOG_KIND, log.to_dict(), expected_version=version
        )
        return saved is not None

    try:
        compare_and_set(
            lambda: _load(store, scope, session),
            lambda log: log.add(turn),
            save,
            what=f"prompt log of {scope}/{session}",
            attempts=RECORD_ATTEMPTS,
        )
    except Contention as exc:
        logger.warning("prompt not recorded: %s", exc)
