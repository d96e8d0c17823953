"""The proxy's budget: how many tokens one request's prompt, tools and answer may take.

By default the budget is the model's context window
(:func:`engram.llm.windows.context_window`; :data:`~engram.llm.windows.DEFAULT_WINDOW`
for a model the table does not know). ``engram serve --budget`` or
``ENGRAM_PROXY_BUDGET`` set it for the server, and a request's
``X-Engram-Budget`` header for itself. Of the budget, the reply reserve (the
request's ``max_completion_tokens`` or ``max_tokens``) and the tools' schemas
are set aside; the prompt gets the rest, which the context builder fills with
history.

A request whose own new turn cannot fit is refused before anything is stored
(:class:`PromptTooLarge`, HTTP 413), naming the sizes and the knob: a proxied
message is never cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engram.context import MIN_BUDGET
from engram.errors import InvalidQuery
from engram.llm.windows import DEFAULT_WINDOW, context_window
from engram.models import Message, NewMessage
from engram.tokens import REPLY_PRIMING, TokenCounter, count_message

#: Request header that sets the budget of one request.
BUDGET_HEADER = "X-Engram-Budget"
#: Largest budget accepted (tokens).
MAX_BUDGET = 100_000_000
#: How the knobs are named in refusals.
KNOBS = f"the {BUDGET_HEADER} header, `engram serve --budget` or ENGRAM_PROXY_BUDGET"


class PromptTooLarge(InvalidQuery):
    """A request that cannot fit its budget; ``field`` names what the client can change."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class BadBudget(InvalidQuery):
    """An ``X-Engram-Budget`` header that is not a usable number of tokens."""

    field = BUDGET_HEADER


@dataclass(frozen=True, slots=True)
class Budget:
    """One request's budget and where it came from."""

    total: int
    source: str

    def describe(self) -> str:
        """The budget for people: ``128,000 tokens (gpt-4o-mini's context window)``."""
        return f"{self.total:,} tokens ({self.source})"


def resolve(header: str | None, setting: int | None, model: str) -> Budget:
    """The request's budget: its header, else the server's setting, else the model's window.

    Raises:
        BadBudget: the header is not a whole number of tokens from 1 to :data:`MAX_BUDGET`.
    """
    if header is not None:
        text = header.strip()
        if not text.isdigit() or not 1 <= int(text) <= MAX_BUDGET:
            raise BadBudget(
                f"{BUDGET_HEADER} must be a whole number of tokens from 1 to {MAX_BUDGET:,}, "
                f"got {header[:40]!r}"
            )
        return Budget(int(text), f"the {BUDGET_HEADER} header")
    if setting is not None:
        return Budget(setting, "the server's --budget")
    window = context_window(model)
    if window is not None:
        return Budget(window, f"{model}'s context window")
    return Budget(DEFAULT_WINDOW, f"the server default for models it does not know, like {model}")


@dataclass(frozen=True, slots=True)
class Sizes:
    """What one request sets aside from its budget, in tokens."""

    budget: Budget
    reserve: int
    reserve_field: str
    tools: int
    system: int

    @property
    def room(self) -> int:
        """Tokens left for the prompt's messages (the system prompt included)."""
        return self.budget.total - self.reserve - self.tools

    def check_room(self) -> None:
        """Refuse a request whose reply reserve and tools leave no room for a prompt.

        Raises:
            PromptTooLarge: naming the reserve's field, the tools and the budget.
        """
        if self.room >= MIN_BUDGET + self.system:
            return
        reserve = (
            f"{self.reserve_field} ({self.reserve:,})"
            if self.reserve_field != "reserve"
            else f"the default reply reserve ({self.reserve:,} tokens)"
        )
        raise PromptTooLarge(
            f"{reserve}, the tools' schemas ({self.tools:,} tokens) and the system prompt "
            f"({self.system:,} tokens) leave no room for the conversation in a budget of "
            f"{self.budget.describe()}: lower {self.reserve_field}, send fewer tools, or raise "
            f"the budget with {KNOBS}",
            self.reserve_field if self.reserve_field != "reserve" else BUDGET_HEADER,
        )

    def check_turn(self, turn: int) -> None:
        """Refuse a new turn of ``turn`` tokens that cannot fit whole.

        Raises:
            PromptTooLarge: naming the turn's size, what is set aside, and the knobs.
        """
        left = self.room - self.system - REPLY_PRIMING
        if turn <= left:
            return
        raise PromptTooLarge(
            f"the newest message takes {turn:,} tokens, but a budget of "
            f"{self.budget.describe()} leaves {max(left, 0):,} for it after the reply reserve "
            f"({self.reserve:,}), the tools' schemas ({self.tools:,}) and the system prompt "
            f"({self.system:,}); Engram does not cut it: send a shorter message, or raise the "
            f"budget with {KNOBS}",
            "messages",
        )


def turn_tokens(counter: TokenCounter, messages: Iterable[Message | NewMessage]) -> int:
    """Exact size of these messages in the prompt (each message's overhead included)."""
    return sum(
        count_message(
            counter,
            m.role,
            m.content,
            name=m.name,
            tool_calls=m.tool_calls,
            tool_call_id=m.tool_call_id,
            parts=m.parts,
        )
        for m in messages
    )
