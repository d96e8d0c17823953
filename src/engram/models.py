"""Pure value types shared by every layer. No I/O here.

Timestamps are timezone-aware UTC ``datetime`` objects everywhere in Python;
each backend decides how to persist them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

JSON = dict[str, Any]

#: Metadata key Engram keeps for the idempotency record of a message (:mod:`engram.idempotency`):
#: a caller's metadata may not hold it, so user data never poses as a key.
IDEMPOTENCY_RECORD = "_engram_idempotency"
#: ``kind`` of the session state document holding the agent state (tasks, facts, tools).
AGENT_STATE_KIND = "agent_state"
#: ``origin`` of a compaction state imported from an agent-runtime document (watermark 0).
IMPORTED_ORIGIN = "imported"


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message on its way into the store (already validated by ``validation``).

    ``created_at`` is filled by the engine when the caller gave none. ``parts``
    is the original list content, kept whole, when it holds a part that is not
    text (an image); ``content`` is then its text.
    """

    role: str
    content: str
    created_at: datetime
    name: str | None = None
    tool_calls: list[JSON] | None = None
    tool_call_id: str | None = None
    metadata: JSON = field(default_factory=dict)
    parts: list[JSON] | None = None

    def to_openai(self) -> JSON:
        """This message in OpenAI chat-completions format (see :meth:`Message.to_openai`)."""
        return openai_message(self)


@dataclass(slots=True)
class Message:
    """A stored message. ``tokens`` is its exact chat-format size in the storage encoding.

    ``id`` is an integer unique across the whole database and increasing in
    insertion order, so ordering by id is the conversation order.

    Read-only by contract: treat a ``Message`` as an immutable value (stores
    hand out fresh objects and never look at them again, so changing one
    changes nothing stored). It is not ``frozen`` because a frozen dataclass
    sets each field through ``object.__setattr__``, which made building one
    eight times slower, and stores build thousands per context. Equality is
    the dataclass one (same class, equal fields); like before, a message is
    not hashable (its ``metadata`` is a dict).

    ``parts`` is the message's original list content (OpenAI content parts),
    kept whole when it holds more than text (an image): ``content`` is then
    its text only (what search, summaries and the CLI read), ``tokens``
    includes the images, and :meth:`to_openai` shows the parts as they were.
    """

    id: int
    scope: str
    session: str
    role: str
    content: str
    created_at: datetime
    tokens: int
    name: str | None = None
    tool_calls: list[JSON] | None = None
    tool_call_id: str | None = None
    metadata: JSON = field(default_factory=dict)
    parts: list[JSON] | None = None

    def to_openai(self) -> JSON:
        """This message in OpenAI chat-completions format (no Engram fields).

        A message with ``parts`` (an image) shows them as its content, as given.
        """
        return openai_message(self)

    def to_dict(self) -> JSON:
        """Everything about this message as plain JSON-ready data: what clients are shown.

        ``content`` is the text; ``parts`` (when set) the list content, whole.
        ``metadata`` is the caller's own, without Engram's idempotency record.
        """
        out = self.to_openai()
        out["content"] = self.content
        if self.parts is not None:
            out["parts"] = self.parts
        out.update(
            id=self.id,
            scope=self.scope,
            session=self.session,
            created_at=self.created_at.isoformat(),
            tokens=self.tokens,
            metadata={k: v for k, v in self.metadata.items() if k != IDEMPOTENCY_RECORD},
        )
        return out


def openai_message(message: NewMessage | Message) -> JSON:
    """A message in OpenAI chat-completions format: the one writer of that shape.

    A message with ``parts`` (an image) shows them as its content, as given;
    empty optional fields are left out.
    """
    content: str | list[JSON] = message.content if message.parts is None else message.parts
    out: JSON = {"role": message.role, "content": content}
    if message.name:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session and its running totals (kept up to date at append, never by a scan)."""

    scope: str
    id: str
    created_at: datetime
    updated_at: datetime
    message_count: int = 0
    token_count: int = 0
    policy: JSON | None = None
    first_message_at: datetime | None = None
    last_message_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the message, its rank (higher is better) and a highlighted snippet.

    ``context`` holds the neighbouring turns of the same session (oldest first,
    the hit itself left out) when the search asked for them (``context=1``).
    ``partner`` is the other half of the hit's exchange when the search asked for
    it (``partner=True``): the answer to a user message, the question of an
    assistant message; ``partner_snippet`` shows it within the hit's budget.
    """

    message: Message
    score: float
    snippet: str
    context: tuple[Message, ...] = ()
    partner: Message | None = None
    partner_snippet: str = ""


@dataclass(frozen=True, slots=True)
class StateRecord:
    """A versioned JSON document attached to a session (compaction, agent state, cache...).

    ``version`` starts at 1 and grows by one at every committed save; saves are
    compare-and-set on it.
    """

    kind: str
    version: int
    data: JSON
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class PromptRecord:
    """One recorded turn of a session: the recipe of the prompt it sent.

    ``turn`` numbers a session's recorded turns from 1; ``data`` is the recipe
    (see :mod:`engram.provenance.recipe`); ``usage`` what the provider reported
    about the answer (cached tokens), when the caller passed it on.
    """

    turn: int
    at: datetime
    data: JSON
    usage: JSON | None = None


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A long-term memory of a scope."""

    id: int
    scope: str
    content: str
    created_at: datetime
    updated_at: datetime
    source_session: str | None = None
    metadata: JSON = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """Tokens and cost of one LLM call made by Engram itself (summaries, memories)."""

    model: str
    purpose: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    created_at: datetime


def frozen_metadata(value: Mapping[str, Any] | None) -> JSON:
    """A private copy of caller metadata, so later mutation cannot reach stored values."""
    return dict(value) if value else {}


def stored_message(
    new: NewMessage, message_id: int, scope: str, session: str, tokens: int, created_at: datetime
) -> Message:
    """The :class:`Message` a store hands back for ``new`` once it is written."""
    return Message(
        message_id,
        scope,
        session,
        new.role,
        new.content,
        created_at,
        int(tokens),
        new.name,
        new.tool_calls,
        new.tool_call_id,
        frozen_metadata(new.metadata),
        new.parts,
    )


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    """A stored API key of the server: never the key itself, only its hash.

    ``admin`` keys may do anything; other keys reach only ``scopes``, and only
    read there unless ``writable``. ``prefix`` is the key's first characters,
    shown in listings so people can tell keys apart.
    """

    id: int
    prefix: str
    label: str
    admin: bool
    scopes: tuple[str, ...]
    writable: bool
    created_at: datetime
    revoked_at: datetime | None = None
