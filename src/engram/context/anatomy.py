"""A built prompt taken apart: each section and message with its exact tokens.

:func:`describe` reads a :class:`~engram.context.Context` (pure: no I/O) and
says what each of its messages is (the system prompt, a section such as
long-term memories, important data or the summary, or a stored message of
the recent window) and what it costs. The system prompt and the sections
cost what the builder counted (``Context.system_tokens``,
``Context.section_tokens``, as the REST API reports them); the recent
messages are counted with the target model's counter. The parts plus the
reply priming add up to ``Context.tokens`` exactly, so a view built on them
(the dashboard's prompt page) shows the prompt the model receives, token for
token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engram.context import Context
from engram.models import JSON
from engram.tokens import REPLY_PRIMING, TokenCounter, count_chat_message, counter_for_model

__all__ = ["PromptAnatomy", "PromptPart", "describe"]

SYSTEM = "system prompt"
RECENT = "recent messages"


@dataclass(frozen=True, slots=True)
class PromptPart:
    """One message of the prompt.

    Attributes:
        group: "system prompt", a section title, or "recent messages".
        role: The chat role it is sent with.
        content: The text sent (a truncated view when the prompt cut it).
        tokens: Its exact size with the target model's counter, overhead included.
        message_id: The stored message it shows, for recent messages.
        message: The message as sent (OpenAI format).

    """

    group: str
    role: str
    content: str
    tokens: int
    message_id: int | None = None
    message: JSON = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PromptGroup:
    """Consecutive parts of one kind: the system prompt, a section, the recent window."""

    title: str
    parts: tuple[PromptPart, ...]

    @property
    def tokens(self) -> int:
        """Tokens of the whole group."""
        return sum(part.tokens for part in self.parts)


@dataclass(frozen=True, slots=True)
class PromptAnatomy:
    """The prompt, group by group, and how much of the budget it uses."""

    groups: tuple[PromptGroup, ...]
    reply_priming: int
    tokens: int
    budget: int
    reserve: int

    @property
    def available(self) -> int:
        """Tokens the prompt may take: the budget less the reserve for the answer."""
        return self.budget - self.reserve

    @property
    def used_share(self) -> float:
        """Share of the available tokens the prompt takes, 0..1."""
        return self.tokens / self.available if self.available > 0 else 1.0


def _head(ctx: Context, counter: TokenCounter) -> list[tuple[str, int]]:
    """The group and tokens of each message before the stored ones, as the builder counted."""
    head = ctx.messages[: len(ctx.messages) - len(ctx.message_ids)]
    labels = ([SYSTEM] if ctx.system_tokens else []) + ctx.sections
    sizes = ([ctx.system_tokens] if ctx.system_tokens else []) + ctx.section_tokens
    if len(sizes) != len(head):  # merged into one system message (``merge_system``)
        return [(SYSTEM, count_chat_message(counter, message)) for message in head]
    return list(zip(labels, sizes, strict=True))


def describe(ctx: Context, *, model: str | None = None, system: str | None = None) -> PromptAnatomy:
    """Take ``ctx`` apart: what each message is and what it costs.

    Args:
        ctx: A prompt built by :meth:`Session.context`.
        model: The model it was built for (its counter counts the recent messages).
        system: Not needed (the context records its system prompt); accepted so
            callers that pass it keep working.

    """
    counter = counter_for_model(model)
    sized = _head(ctx, counter)
    sized += [
        (RECENT, count_chat_message(counter, message)) for message in ctx.messages[len(sized) :]
    ]
    recent_ids = iter(ctx.message_ids)
    groups: list[PromptGroup] = []
    current: list[PromptPart] = []
    for (label, tokens), message in zip(sized, ctx.messages, strict=True):
        part = PromptPart(
            group=label,
            role=message["role"],
            content=str(message.get("content") or ""),
            tokens=tokens,
            message_id=next(recent_ids, None) if label == RECENT else None,
            message=message,
        )
        if current and (current[0].group != label or label != RECENT):
            groups.append(PromptGroup(current[0].group, tuple(current)))
            current = []
        current.append(part)
    if current:
        groups.append(PromptGroup(current[0].group, tuple(current)))
    return PromptAnatomy(
        groups=tuple(groups),
        reply_priming=REPLY_PRIMING,
        tokens=ctx.tokens,
        budget=ctx.budget,
        reserve=ctx.reserve,
    )
