"""HTTP shapes of the REST API, distinct from the library's types (``...In`` / ``...Out``).

Inputs are checked here for shape only (types, lengths, page and batch
limits); what a message may hold is the library's decision
(:mod:`engram.intake.validation`), so the same refusal reads the same everywhere.
Messages come in OpenAI chat format, including what the OpenAI and Anthropic
SDKs produce: ``content`` may be a list of content parts (text, images,
Anthropic blocks), handed to the library as it came; ``null`` SDK fields
(``refusal``, ``audio``...) are accepted and dropped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from engram.context.builder import MIN_BUDGET
from engram.intake.checks import MAX_CONTENT_BYTES, MAX_ID_CHARS
from engram.limits import MAX_BUDGET
from engram.server import documented
from engram.server.settings import MAX_BATCH, MAX_PAGE_SIZE

JSONObject = dict[str, Any]


class ErrorDetail(BaseModel):
    """What went wrong."""

    type: str = Field(description="A stable error code, e.g. invalid_message, forbidden.")
    message: str
    field: str | None = Field(None, description="The request field at fault, when known.")


class ErrorOut(BaseModel):
    """Every error response: ``{"error": {"type", "message", "field"}}``."""

    error: ErrorDetail


# -- messages -----------------------------------------------------------------------


class MessageIn(BaseModel):
    """One message in OpenAI chat format, plus optional ``created_at`` and ``metadata``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=documented.MESSAGE_ROLES)

    role: str = Field(json_schema_extra=documented.ROLE)
    content: str | list[JSONObject] | None = Field(
        None,
        description="Text, or a list of content parts: text, image_url (an http(s) URL or a"
        " base64 data URL; detail low, high or auto) and Anthropic blocks (image, tool_use,"
        " tool_result).",
        json_schema_extra=documented.TEXT,
    )
    name: str | None = Field(None, json_schema_extra=documented.NAME)
    tool_calls: list[JSONObject] | None = None
    tool_call_id: str | None = Field(
        None, json_schema_extra={"maxLength": MAX_ID_CHARS, **documented.ID}
    )
    created_at: datetime | float | None = Field(
        None,
        description="ISO-8601 date-time or unix seconds; default: now.",
        json_schema_extra=documented.UNIX_SECONDS_RANGE,
    )
    metadata: JSONObject | None = Field(None, json_schema_extra=documented.METADATA)
    # Null fields the OpenAI SDK includes when it dumps an assistant message.
    refusal: None = None
    audio: None = None
    function_call: None = None
    annotations: list[Any] | None = None

    def to_library(self) -> JSONObject:
        """The message as the library takes it (SDK nulls dropped; the library checks content)."""
        out: JSONObject = {"role": self.role, "content": self.content}
        for key in ("name", "tool_calls", "tool_call_id", "created_at", "metadata"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class MessageBatchIn(BaseModel):
    """Several messages appended in one transaction (all or none)."""

    model_config = ConfigDict(extra="forbid")

    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_BATCH)
    policy: str | JSONObject | None = Field(
        None,
        description="Store this policy with the session (preset name or numbers).",
        json_schema_extra=documented.POLICY,
    )


def _append_kind(body: Any) -> str:
    return "batch" if isinstance(body, dict) and "messages" in body else "message"


#: Tags of the append body's two forms; they lead the location of a validation error.
APPEND_FORMS = ("message", "batch")

#: The append body: one message object, or ``{"messages": [...]}``.
AppendIn = Annotated[
    Annotated[MessageIn, Tag("message")] | Annotated[MessageBatchIn, Tag("batch")],
    Discriminator(_append_kind),
]


class MessageOut(BaseModel):
    """A stored message."""

    id: int
    scope: str
    session: str
    role: str
    content: str = Field(description="The text (of the text parts, for a message with images).")
    parts: list[JSONObject] | None = Field(
        None, description="A message with images: its content parts, whole, as given."
    )
    name: str | None = None
    tool_calls: list[JSONObject] | None = None
    tool_call_id: str | None = None
    created_at: datetime
    tokens: int = Field(
        description="Exact size in the storage encoding, chat overhead and images included."
    )
    metadata: JSONObject


class AppendOut(BaseModel):
    """What an append stored."""

    messages: list[MessageOut]
    count: int
    tokens: int


class MessagePage(BaseModel):
    """One page of a session's whole history, oldest first."""

    messages: list[MessageOut]
    next_after: int | None = Field(
        None, description="Pass as ?after= for the next page; null on the last page."
    )


# -- scopes and sessions -----------------------------------------------------------------


class ScopeOut(BaseModel):
    """A scope with its totals."""

    scope: str
    sessions: int
    messages: int
    tokens: int = Field(description="Tokens stored in all its messages.")
    memories: int
    last_activity: datetime | None


class ScopeList(BaseModel):
    """The scopes the key may see."""

    scopes: list[ScopeOut]


class SessionOut(BaseModel):
    """A session with its running totals."""

    scope: str
    session: str
    created_at: datetime
    updated_at: datetime
    messages: int
    tokens: int
    first_message_at: datetime | None
    last_message_at: datetime | None
    policy: JSONObject | None


class SessionPage(BaseModel):
    """A page of a scope's sessions."""

    sessions: list[SessionOut]
    total: int
    limit: int
    offset: int


class SessionIn(BaseModel):
    """Create a session (or change its stored policy)."""

    model_config = ConfigDict(extra="forbid")

    policy: str | JSONObject | None = Field(
        None,
        description="A preset name (lean, summary_buffer, ...) or a policy object.",
        json_schema_extra=documented.POLICY,
    )


class DerivedOut(BaseModel):
    """One thing made from the deleted messages, and what the deletion did to it."""

    kind: str = Field(
        description="summary, important_data, agent_state, tool_cache, memory, vectors, "
        "search_index or session"
    )
    ref: str = Field(description="Which one, by id, version or count (never its text).")
    outcome: str = Field(description="rebuilt, rebuild pending, removed or unchanged")
    detail: str = ""


class ReceiptOut(BaseModel):
    """The receipt of a deletion: what it removed and what became of what was made from it."""

    success: bool = True
    action: str = Field(
        description="delete, clear, delete_session, purge_scope, forget_scope, memory_delete, "
        "memory_purge, or an edit verb (edit, pop_answer, proxy_edit...)"
    )
    scope: str
    session: str | None = None
    message_count: int = Field(description="How many messages were removed.")
    messages: list[list[int]] = Field(description="The removed messages' ids, as [low, high].")
    derived: list[DerivedOut]
    rebuilt: bool = Field(description="Rebuilds ran before the answer (rebuild=true).")
    counts: dict[str, int] | None = Field(
        default=None,
        description="A deleted session, a purged or forgotten scope, purged memories: how many "
        "sessions, messages and memories were removed.",
    )


class SessionDeletedOut(BaseModel):
    """What deleting a whole session removed."""

    success: bool
    receipt: ReceiptOut = Field(
        description="The receipt: the messages removed, and what became of what was made from "
        "them (memories made from the session stay)."
    )


class ScopePurgedOut(BaseModel):
    """What deleting a whole scope removed."""

    success: bool
    sessions: int
    messages: int
    memories: int
    forgotten: bool = Field(
        description="Whether the audit trail and usage went too (``forget=true``)."
    )
    receipt: ReceiptOut = Field(
        description="The receipt: what went (action purge_scope, or forget_scope with "
        "``forget=true``)."
    )


# -- the prompt ----------------------------------------------------------------------------


class ContextIn(BaseModel):
    """What the next prompt must fit and carry."""

    model_config = ConfigDict(extra="forbid")

    budget: int | None = Field(
        None, ge=MIN_BUDGET, le=MAX_BUDGET, description="Tokens in all (reserve included)."
    )
    reserve: int | None = Field(None, ge=0, le=MAX_BUDGET, description="Kept for the answer.")
    system: str | None = Field(
        None, max_length=MAX_CONTENT_BYTES, json_schema_extra=documented.TEXT
    )
    model: str | None = Field(None, max_length=200, json_schema_extra=documented.TEXT)
    policy: str | JSONObject | None = Field(None, json_schema_extra=documented.POLICY)
    compact: bool = Field(
        True,
        description="False: never write (no compaction, no prompt-log record); a read-only "
        "key's context is always built so.",
    )
    tools: list[JSONObject] | None = Field(
        None, max_length=128, description="Tool schemas sent with the prompt (recorded with it)."
    )


class OmissionOut(BaseModel):
    """Something left out of the prompt, and why."""

    reason: str
    message_ids: list[int]
    before_id: int | None
    detail: str


class SectionOut(BaseModel):
    """A block of the prompt and its exact tokens."""

    title: str
    tokens: int


class ContextOut(BaseModel):
    """The prompt, exactly counted, and how it was built."""

    messages: list[JSONObject]
    tokens: int
    budget: int
    reserve: int
    message_ids: list[int]
    omitted: list[OmissionOut]
    sections: list[SectionOut]
    truncated_ids: list[int]
    counter: str
    exact: bool
    policy: str
    notes: list[str]
    pending_compaction: bool
    degraded: str | None


# -- retrieval -------------------------------------------------------------------------------


class SearchHitOut(BaseModel):
    """One ranked hit."""

    message: MessageOut
    score: float
    snippet: str = Field(description="Matches marked with [ and ].")
    partner: MessageOut | None = Field(
        default=None, description="The hit's exchange partner, when asked for (partner=true)."
    )
    partner_snippet: str | None = Field(default=None, description="The partner, shortened.")


class SearchOut(BaseModel):
    """Hits, best first."""

    hits: list[SearchHitOut]


class MessageList(BaseModel):
    """Messages, oldest first."""

    messages: list[MessageOut]


class DateRangeOut(BaseModel):
    """Messages of a day or range, and the UTC range the phrase meant."""

    start: datetime
    end: datetime
    messages: list[MessageOut]


class StatsOut(BaseModel):
    """Counts, dates and stored tokens of a session."""

    scope: str
    session: str
    total_messages: int
    stored_tokens: int
    first_message_at: str | None
    last_message_at: str | None
    policy: str
    title: str | None


class ToolCallIn(BaseModel):
    """The arguments of one tool call (an object, or the JSON text a model sent)."""

    model_config = ConfigDict(extra="forbid")

    arguments: JSONObject | str | None = None


class ToolResultOut(BaseModel):
    """A tool's JSON result, as the model would receive it (errors included)."""

    name: str
    text: str = Field(description="The JSON text a model would receive.")
    result: JSONObject = Field(description='The same, decoded; errors are {"error": ...}.')


# -- compaction, state, ending ------------------------------------------------------------


class CompactIn(BaseModel):
    """Compact now."""

    model_config = ConfigDict(extra="forbid")

    system: str | None = Field(
        None, max_length=MAX_CONTENT_BYTES, json_schema_extra=documented.TEXT
    )
    policy: str | JSONObject | None = Field(None, json_schema_extra=documented.POLICY)


class CompactOut(BaseModel):
    """What one compaction cycle did."""

    committed: bool
    reason: str
    watermark: int
    version: int
    summary_version: int
    folded: int
    degraded: bool
    notes: list[str]


class CompactionStateOut(BaseModel):
    """A session's summary, important data and watermark."""

    summary: str
    summary_version: int
    important_data: JSONObject
    watermark: int
    messages_summarized_count: int
    summarizer: str | None
    last_summarized_at: str | None
    compactions: int
    llm_failures: int
    compressions: int
    last_error: str | None
    citations: JSONObject = Field(
        default_factory=dict,
        description="summary: one list of [low, high] id ranges per paragraph (paragraphs are "
        "separated by blank lines); important_data: field -> item -> ranges; exact: every "
        "version was written offline",
    )


class EndIn(BaseModel):
    """End a conversation."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field("ended", max_length=500, json_schema_extra=documented.TEXT)


class EndOut(BaseModel):
    """The session ended; its memory is written in the background."""

    ended: bool
    memories_url: str = Field(description="Where the memory will appear.")
    audit_url: str = Field(description="Where the decision about it will be recorded.")


# -- memories (the admin memory API) --------------------------------------------------------


class MemoryOut(BaseModel):
    """A long-term memory (the admin memory API's field names)."""

    id: int
    content: str
    createdAt: datetime
    updatedAt: datetime
    sourceSession: str | None = None
    metadata: JSONObject = Field(default_factory=dict)


class MemoryList(BaseModel):
    """``GET .../memories``: ``{"memories": [...]}``."""

    memories: list[MemoryOut]


class MemoriesPurgedOut(BaseModel):
    """``DELETE .../memories``: ``{"success": true, "deletedCount": n, "receipt": {...}}``."""

    success: bool
    deletedCount: int
    receipt: ReceiptOut = Field(description="The receipt: one line per memory removed.")


class MemoryIn(BaseModel):
    """Create a memory."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(json_schema_extra=documented.MEMORY_TEXT)
    metadata: JSONObject | None = Field(None, json_schema_extra=documented.METADATA)


class MemoryPatch(BaseModel):
    """Edit a memory (content and/or metadata; metadata is replaced)."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = Field(None, json_schema_extra=documented.MEMORY_TEXT)
    metadata: JSONObject | None = Field(None, json_schema_extra=documented.METADATA)


class AuditOut(BaseModel):
    """The scope's memory decisions, newest first."""

    events: list[JSONObject]


# -- service -----------------------------------------------------------------------------------


class HealthOut(BaseModel):
    """Liveness or readiness."""

    status: str


#: Query limits shared by listings.
PageLimit = Field(50, ge=1, le=MAX_PAGE_SIZE)
