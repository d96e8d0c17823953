"""The exchange window: finished exchanges are shown as question and answer only.

An exchange is one user question with every step up to its final answer
(see :mod:`engram.exchanges`). In the prompt, the steps of exchanges that
already have their answer are left out; the stored messages stay whole.
"""

from __future__ import annotations

from engram.models import Message
from engram.policy import Policy
from engram.sections.tool_cache import ANSWER, EXCHANGE_KEY, STEP


def visible_rows(rows: list[Message]) -> list[Message]:
    """Leave out the steps of finished exchanges (those before the newest answer)."""
    last_answer = 0
    for m in rows:
        if m.metadata.get(EXCHANGE_KEY) == ANSWER:
            last_answer = m.id
    if not last_answer:
        return rows
    return [m for m in rows if not (m.id < last_answer and m.metadata.get(EXCHANGE_KEY) == STEP)]


class ExchangeSteps:
    """Leaves the steps of finished exchanges out of the recent window."""

    name = "exchange_steps"

    def applies(self, policy: Policy) -> bool:
        """Exchange-window policies only."""
        return policy.max_exchanges is not None

    def rows(self, rows: list[Message], policy: Policy) -> list[Message]:
        """The rows the window may show."""
        return visible_rows(rows)
