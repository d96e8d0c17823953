"""A turn that stores nothing: the stored history, with the turn's own messages held in memory.

A Responses request with ``store: false`` asks that nothing of the call be
kept. Its turn runs as any other (alignment, Engram's tool rounds, the
budget), but its writes go to a :class:`Scratch`: the request's new
messages, Engram's tool rounds and the answer live there and are dropped
with it. The prompt shows the stored history (up to where the request's list
diverged from it, if it did: nothing stored is deleted) and then the
scratch's messages. It is built read-only: no compaction runs and no
prompt-log entry is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engram.context import Context, HistoryReader
from engram.context.rows import HistoryRows, Stored, rows_of
from engram.intake.validation import build_messages, check_tool_answers
from engram.models import JSON, Message, SessionInfo, stored_message
from engram.prompt import PromptRequest, build_prompt, stored_totals
from engram.session import TOOL_CALL_LOOKBACK, Session

#: The id of a scratch's first message: above any stored id, so it sorts after them.
FIRST_ID = 1 << 62


class Scratch:
    """The messages of one turn that stores nothing, over a session's stored history."""

    def __init__(self, session: Session) -> None:
        """Hold nothing yet; read ``session`` as it is stored."""
        self.session = session
        #: The turn's messages (Engram's ids above any stored one), oldest first.
        self.rows: list[Message] = []
        #: Stored messages from this id on are not shown (the request's list replaced them).
        self.hidden_from: int | None = None

    def write(self, gone_ids: list[int], batch: list[JSON], key: str | None) -> tuple[int, int]:
        """A plan's write (:data:`~engram.proxy.plan.Writer`): hide the replaced, hold the new."""
        if gone_ids:
            self.hidden_from = min(gone_ids)
        return len(self.add_many(batch)), len(gone_ids)

    def add_many(
        self, messages: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[Message]:
        """Check and count ``messages`` as the session would, and hold them (the key is unused).

        Raises:
            InvalidMessage: as :meth:`Session.add_many`.
        """
        batch = build_messages(messages)
        if any(m.role == "tool" for m in batch):
            check_tool_answers(batch, self._call_ids())
        tokens = self.session.runtime.count_many(batch)
        added = [
            stored_message(
                new,
                FIRST_ID + len(self.rows) + index,
                self.session.scope,
                self.session.id,
                count,
                new.created_at,
            )
            for index, (new, count) in enumerate(zip(batch, tokens, strict=True))
        ]
        self.rows.extend(added)
        return added

    def context(
        self,
        budget: int,
        *,
        reserve: int,
        system: str | None,
        model: str,
        merge_system: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        via: str = "",
    ) -> Context:
        """The prompt of the next call: the stored history shown, then the turn's messages.

        Nothing is recorded (``tools`` and ``via`` are the recorded turn's): the turn is not kept.
        """
        session = self.session
        request = PromptRequest(
            budget=budget,
            reserve=reserve,
            system=system,
            model=model,
            compact=False,
            merge_system=merge_system,
        )
        totals = stored_totals(session.runtime.store, session.scope, session.id)
        return build_prompt(
            session.runtime,
            session.scope,
            session.id,
            session.policy,
            request,
            totals=totals,
            overlay=self._overlay,
        )

    def info(self) -> SessionInfo | None:
        """The stored session (what this turn holds is not part of it)."""
        return self.session.info()

    def _overlay(self, stored: HistoryReader) -> HistoryReader:
        """A reader of the stored history shown, followed by the turn's messages."""
        rows, hidden_from = self.rows, self.hidden_from

        def read(limit: int, before_id: int | None) -> Sequence[Stored] | HistoryRows:
            mine = [m for m in rows if before_id is None or m.id < before_id]
            taken = mine[-limit:] if limit > 0 else []
            if len(taken) >= limit:
                return taken
            below = before_id if before_id is not None and before_id < FIRST_ID else None
            if hidden_from is not None:
                below = hidden_from if below is None else min(below, hidden_from)
            older = stored(limit - len(taken), below)
            if isinstance(older, HistoryRows):  # rows newest first: the turn's come first
                newer = rows_of(taken)
                return HistoryRows(newer.rows + older.rows, {**older.special, **newer.special})
            return [*older, *taken]

        return read

    def _call_ids(self) -> set[str]:
        """Tool-call ids a result in this turn may answer: the turn's, and the newest stored."""
        session = self.session
        recent = session.runtime.store.tail(session.scope, session.id, limit=TOOL_CALL_LOOKBACK)
        return {
            str(call.get("id"))
            for message in [*recent, *self.rows]
            for call in message.tool_calls or ()
            if isinstance(call, Mapping)
        }
