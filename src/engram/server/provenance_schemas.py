"""HTTP shapes of recorded prompts: the turn list, a replayed turn, a diff, a what-if."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from engram.intake.checks import MAX_CONTENT_BYTES
from engram.server.schemas import JSONObject, OmissionOut


class TurnOut(BaseModel):
    """One recorded turn in a list of turns."""

    turn: int = Field(description="Numbered from 1 in the session.")
    at: str
    via: str | None = Field(description="The interface that sent it: library, chat, proxy, rest.")
    policy: str | None
    budget: int | None
    tokens: int
    messages: int = Field(description="Stored messages in the window.")
    cacheable_share: float | None = Field(
        description="Share of the prompt's bytes repeating the previous turn's prompt start."
    )
    cacheable_tokens: int | None
    cached_tokens: int | None = Field(description="Served from the provider's cache, as reported.")
    provider_prompt_tokens: int | None
    sha256: str | None


class TurnPage(BaseModel):
    """A page of recorded turns, oldest first."""

    turns: list[TurnOut]
    next_after: int | None = Field(description="Pass as ``after`` for the next page; null: done.")


class PromptOut(BaseModel):
    """A recorded turn rebuilt exactly as sent, checked against its SHA-256."""

    turn: int
    at: str
    via: str | None
    policy: str | None
    budget: int | None
    reserve: int | None
    counter: str | None
    model: str | None
    tokens: int | None
    sha256: str | None
    verified: bool = Field(description="The rebuilt prompt hashes to what was sent.")
    missing: list[str] = Field(description="Parts pruned or deleted; then messages is null.")
    mismatch: int | None = Field(description="First message differing from what was sent.")
    messages: list[JSONObject] | None
    message_ids: list[int]
    sections: list[JSONObject]
    omitted: list[OmissionOut]
    notes: list[str]
    degraded: str | None
    tools: list[JSONObject] | None
    usage: JSONObject | None = Field(description="What the provider reported about the answer.")


class SectionChangeOut(BaseModel):
    """A section whose source changed between two turns, and why."""

    title: str
    kind: str | None
    why: str
    from_version: int | None = None
    to_version: int | None = None


class SharedPrefixOut(BaseModel):
    """Where two prompts stop sharing a byte prefix."""

    messages: int
    bytes: int
    exact: bool = Field(description="False: measured per message (a prompt could not be rebuilt).")


class DiffOut(BaseModel):
    """Turn ``b`` against turn ``a``."""

    a: int
    b: int
    identical: bool
    entered: list[int] = Field(description="Message ids in b's window and not in a's.")
    left: list[int] = Field(description="Message ids in a's window and not in b's.")
    sections: list[SectionChangeOut]
    changed: list[str] = Field(description="Settings that differ: policy, budget, system prompt...")
    shared_prefix: SharedPrefixOut
    bytes: list[int]


class ReplayIn(BaseModel):
    """The policy to play the session's history again under (nothing is written)."""

    model_config = ConfigDict(extra="forbid")

    policy: str | JSONObject = Field("current", description='A preset, a policy, or "current".')
    budget: int | None = Field(None, ge=1, le=10_000_000)
    reserve: int | None = Field(None, ge=0, le=10_000_000)
    model: str | None = Field(None, max_length=200)
    system: str | None = Field(None, max_length=MAX_CONTENT_BYTES)


class WhatIfTurnOut(BaseModel):
    """One question of the history under the policy tried."""

    turn: int
    message_id: int
    tokens: int
    window: int
    cacheable_tokens: int
    cached_tokens: int
    cost_usd: float | None
    cost_cached_usd: float | None
    over_budget: bool
    compactions: int
    evidence: int
    evidence_kept: int


class WhatIfOut(BaseModel):
    """The whole history under one policy: totals, then every turn."""

    policy: str
    budget: int
    reserve: int
    model: str
    system_prompt: bool
    turns: int
    tokens: int
    cacheable_share: float | None
    cost_usd: float | None
    cost_cached_usd: float | None
    budget_violations: int
    compactions: int
    evidence: int
    evidence_kept: int
    evidence_kept_share: float | None
    notes: list[str]
    per_turn: list[WhatIfTurnOut]
