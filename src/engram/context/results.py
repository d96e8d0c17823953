"""What the context builder returns: the prompt, its sections and what was left out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from engram.context.shapes import anthropic_prompt
from engram.models import JSON
from engram.policy import Policy

# Omission reasons.
OLDER_THAN_WINDOW = "older than window"
OVER_BUDGET = "over budget"
ORPHAN_TOOL_RESULT = "orphan tool result"
UNANSWERED_TOOL_CALL = "unanswered tool call"
SECTION_DROPPED = "section dropped"
TURN_OVER_BUDGET = "turn over budget"


@dataclass(frozen=True, slots=True)
class SectionSource:
    """Where a section's text comes from, so a recorded prompt can name it (and rebuild it).

    Attributes:
        kind: The session state document it renders ("compaction", "agent_state",
            "tool_cache"), or "memories" for the scope's long-term memories.
        version: The state document's version shown; None for memories.
        items: The memories shown, as ``(id, updated_at ISO)`` pairs.

    """

    kind: str
    version: int | None = None
    items: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Section:
    """A fixed block shown as a system message after the system prompt.

    Rendered as the title in brackets, a newline, then the text; blank text is
    skipped. ``source`` says what the text was rendered from (it takes no part
    in equality).
    """

    title: str
    text: str
    source: SectionSource | None = field(default=None, compare=False)

    def render(self) -> str:
        """Return the content of the system message that carries this section."""
        return f"[{self.title}]\n{self.text}"

    def from_state(self, kind: str, version: int) -> Section:
        """This section marked as rendered from version ``version`` of the ``kind`` state.

        Version 0 (never saved) or less (unreadable) leaves it unmarked: no
        stored version could rebuild it.
        """
        if version <= 0:
            return self
        return Section(self.title, self.text, SectionSource(kind, version))


@dataclass(frozen=True, slots=True)
class Provenance:
    """What a prompt was built from, so its turn's recipe can name it.

    Attributes:
        policy: The policy it was built under.
        sections: The sections offered, with their sources (those dropped for
            room included).
        system: The system prompt asked for (the prompt may show it cut).
        model: The model named for counting.
        merge_system: One system message was asked for.

    """

    policy: Policy
    sections: tuple[Section, ...] = ()
    system: str | None = None
    model: str | None = None
    merge_system: bool = False


@dataclass(frozen=True, slots=True)
class HistoryTotals:
    """A session's stored totals: its messages and their stored tokens."""

    messages: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Omission:
    """Something left out of the prompt, and why.

    Attributes:
        reason: One of "older than window", "over budget", "orphan tool result",
            "unanswered tool call" (an assistant message shown without its calls that
            no result answers), "section dropped", "turn over budget".
        message_ids: Stored messages left out, when they are known one by one.
        before_id: For window ends: every candidate message with a smaller id
            (and above the floor) was left out; their number is not counted.
        detail: Human-readable detail (e.g. the section title).

    """

    reason: str
    message_ids: tuple[int, ...] = ()
    before_id: int | None = None
    detail: str = ""

    def to_dict(self) -> JSON:
        """Plain JSON-ready data."""
        return {
            "reason": self.reason,
            "message_ids": list(self.message_ids),
            "before_id": self.before_id,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class Context:
    """A prompt that fits, and the account of how it was built.

    Attributes:
        messages: OpenAI chat-completions messages, ready to send.
        tokens: Exact size of ``messages`` with ``counter``, reply priming included.
        budget: The budget asked for.
        reserve: Tokens kept free for the answer; ``tokens <= budget - reserve``.
        message_ids: Ids of the stored messages in the prompt, in order.
        omitted: What was left out, and why.
        truncated_ids: Stored messages shown as truncated views.
        counter: Name of the token counter.
        exact: True when ``tokens`` is exact for the target model (no
            approximate counter, no tool calls, whose counts are estimates).
        policy: Name of the policy used.
        notes: Human-readable remarks: degraded modes, pending compaction...
        sections: Titles of the sections in the prompt, in order.
        section_tokens: Tokens of each section of ``sections`` as its own system
            message, overhead included (counted as the prompt was).
        system_tokens: Tokens of the system prompt as its own message, as sent
            (cut when it had to be), or 0 without one. With ``merge_system``
            the system prompt and the sections are one message, which costs at
            most ``system_tokens + sum(section_tokens)``.
        history: The session's stored totals when the prompt was built (the
            full history the prompt stands for), or None when not known.
        viewed_ids: Stored messages shown through a caller-given view.
        pending_compaction: Compaction is due but has not run yet.
        degraded: Why the prompt is not the normal one, or None.
        turn_start: Index in ``messages`` where the current turn (the newest
            user message) begins: everything before it is the stable prefix a
            provider's prompt cache may have seen on the previous turn.
        provenance: What the prompt was built from (policy, sections with their
            sources, system prompt asked for); the turn's recipe names them.
            Not part of :meth:`to_dict`.

    """

    messages: list[JSON]
    tokens: int
    budget: int
    reserve: int
    message_ids: list[int]
    omitted: list[Omission]
    truncated_ids: list[int]
    counter: str
    exact: bool
    policy: str
    notes: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    section_tokens: list[int] = field(default_factory=list)
    system_tokens: int = 0
    history: HistoryTotals | None = None
    viewed_ids: list[int] = field(default_factory=list)
    pending_compaction: bool = False
    degraded: str | None = None
    turn_start: int | None = None
    provenance: Provenance | None = None

    def to_anthropic(self, *, cache: bool = True) -> JSON:
        """This prompt in Anthropic's Messages form: ``{"system": ..., "messages": [...]}``.

        Tool calls become ``tool_use`` blocks and tool results ``tool_result``
        blocks. With ``cache`` (default) ``cache_control`` breakpoints mark the
        end of the system part and the last message before the current turn,
        so Anthropic's prompt cache reuses what the previous turn sent.
        """
        return anthropic_prompt(self.messages, turn_start=self.turn_start, cache=cache)

    def to_dict(self) -> JSON:
        """Everything as plain JSON-ready data."""
        return {
            "messages": self.messages,
            "tokens": self.tokens,
            "budget": self.budget,
            "reserve": self.reserve,
            "message_ids": list(self.message_ids),
            "omitted": [o.to_dict() for o in self.omitted],
            "truncated_ids": list(self.truncated_ids),
            "counter": self.counter,
            "exact": self.exact,
            "policy": self.policy,
            "notes": list(self.notes),
            "sections": list(self.sections),
            "section_tokens": list(self.section_tokens),
            "system_tokens": self.system_tokens,
            "history": asdict(self.history) if self.history is not None else None,
            "viewed_ids": list(self.viewed_ids),
            "pending_compaction": self.pending_compaction,
            "degraded": self.degraded,
            "turn_start": self.turn_start,
        }
