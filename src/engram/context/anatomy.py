"""A built prompt taken apart: each section and message with its exact tokens.

:func:`describe` reads a :class:`~engram.context.Context` (pure: no I/O) and
says what each of its messages is (the system prompt, a section such as
long-term memories, important data or the summary, or a stored message of
the recent window) and what it costs with the target model's counter. The
parts plus the reply priming add up to ``Context.tokens`` exactly, so a view
built on them (the dashboard's prompt page) shows the prompt the model
receives, token for token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engram.context import Context
from engram.models import JSON
from engram.tokens import REPLY_PRIMING, count_chat_message, counter_for_model

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


def _message_tokens(counter: Any, message: JSON) -> int:
    return count_chat_message(counter, message)


def _groups_of(ctx: Context, system_given: bool) -> list[str]:
    """The group of each message of ``ctx``, in order."""
    labels: list[str] = []
    messages = ctx.messages
    index = 0
    first = messages[0] if messages else None
    first_is_section = bool(ctx.sections) and str((first or {}).get("content") or "").startswith(
        f"[{ctx.sections[0]}]\n"
    )
    if system_given and first is not None and first["role"] == "system" and not first_is_section:
        labels.append(SYSTEM)
        index = 1
    labels.extend(ctx.sections)
    labels.extend([RECENT] * (len(messages) - index - len(ctx.sections)))
    return labels


def describe(ctx: Context, *, model: str | None = None, system: str | None = None) -> PromptAnatomy:
    """Take ``ctx`` apart: what each message is and what it costs.

    Args:
        ctx: A prompt built by :meth:`Session.context`.
        model: The model it was built for (its counter counts the parts).
        system: The system prompt it was built with, if any.

    """
    counter = counter_for_model(model)
    labels = _groups_of(ctx, bool(system))
    recent_ids = iter(ctx.message_ids)
    groups: list[PromptGroup] = []
    current: list[PromptPart] = []
    for label, message in zip(labels, ctx.messages, strict=True):
        part = PromptPart(
            group=label,
            role=message["role"],
            content=str(message.get("content") or ""),
            tokens=_message_tokens(counter, message),
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
