"""What if this session had run under another policy? Its history played again, writing nothing.

:func:`what_if` reads the session's stored messages and copies them, in
order, into a private in-memory SQLite store. At each user message (a *turn*)
it builds the prompt the chosen policy would have sent, exactly as a real
turn does, and measures it:

* the prompt's tokens, and whether the question could not be shown whole
  (a *budget violation*: cut, or the turn degraded);
* its *cacheable* tokens: the leading messages identical to the previous
  turn's prompt; and what a provider's cache would serve of them: nothing
  under :data:`CACHE_MIN_TOKENS`, else whole :data:`CACHE_STEP`-token blocks
  (OpenAI's rule; Anthropic's cache-write premium is left out);
* the input cost at the model's prices (:mod:`engram.llm.prices`), without and
  with that cache;
* the compactions the policy runs: summaries are written by the offline
  summarizer (no model is called), a policy that compacts in the background
  shows the new summary from the next turn on;
* the evidence of each question kept in view (:mod:`.evidence`).

Long-term memories are left out (they are the same under every policy). The
source store is only read: nothing is stored, recorded or compacted there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engram.config import Config
from engram.context import TURN_OVER_BUDGET, Context
from engram.llm.prices import input_cost_usd
from engram.models import JSON, Message, NewMessage
from engram.policy import DEFAULT_BUDGET, Policy
from engram.prompt import NOT_RUN_NOTE
from engram.provenance.evidence import Evidence, in_view, rare_words
from engram.runtime import Runtime
from engram.session import Session
from engram.store import open_store
from engram.store.base import MAX_PAGE, Store, archives_prompts
from engram.tokens import count_chat_message, counter_for_model

#: A provider caches nothing shorter than this prefix (tokens).
CACHE_MIN_TOKENS = 1024
#: Past the minimum, a cached prefix grows in blocks of this many tokens.
CACHE_STEP = 128
#: The model whose prices and tokenizer are used when none is given or recorded.
DEFAULT_MODEL = "gpt-4o-mini"
OFFLINE_NOTE = "summaries are written by the offline summarizer: no model is called"
MEMORIES_NOTE = "long-term memories are left out: they are the same under every policy"
#: The private copy: an in-memory SQLite store, one session.
COPY_URL = "sqlite:///:memory:"
COPY = "what-if"


@dataclass(frozen=True, slots=True)
class WhatIfTurn:
    """One question of the history, under the policy tried."""

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

    def to_dict(self) -> JSON:
        """Plain JSON-ready data."""
        return {
            "turn": self.turn,
            "message_id": self.message_id,
            "tokens": self.tokens,
            "window": self.window,
            "cacheable_tokens": self.cacheable_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
            "cost_cached_usd": self.cost_cached_usd,
            "over_budget": self.over_budget,
            "compactions": self.compactions,
            "evidence": self.evidence,
            "evidence_kept": self.evidence_kept,
        }


@dataclass(frozen=True, slots=True)
class WhatIf:
    """The whole history under one policy: per turn, and in total."""

    policy: str
    budget: int
    reserve: int
    model: str
    system: bool
    turns: list[WhatIfTurn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Prompt tokens over every turn."""
        return sum(t.tokens for t in self.turns)

    @property
    def cacheable_share(self) -> float | None:
        """Share of those tokens repeating the previous turn's prompt start."""
        return sum(t.cacheable_tokens for t in self.turns) / self.tokens if self.tokens else None

    @property
    def cost_usd(self) -> float | None:
        """Input cost over every turn without a prompt cache (None: unknown price)."""
        return _total(t.cost_usd for t in self.turns)

    @property
    def cost_cached_usd(self) -> float | None:
        """Input cost over every turn with the provider's prompt cache."""
        return _total(t.cost_cached_usd for t in self.turns)

    @property
    def evidence_kept(self) -> float | None:
        """Share of the questions' evidence kept in view (None: no question had any)."""
        wanted = sum(t.evidence for t in self.turns)
        return sum(t.evidence_kept for t in self.turns) / wanted if wanted else None

    def to_dict(self) -> JSON:
        """Plain JSON-ready data: the totals, then every turn."""
        share = self.cacheable_share
        kept = self.evidence_kept
        return {
            "policy": self.policy,
            "budget": self.budget,
            "reserve": self.reserve,
            "model": self.model,
            "system_prompt": self.system,
            "turns": len(self.turns),
            "tokens": self.tokens,
            "cacheable_share": None if share is None else round(share, 4),
            "cost_usd": _round(self.cost_usd),
            "cost_cached_usd": _round(self.cost_cached_usd),
            "budget_violations": sum(t.over_budget for t in self.turns),
            "compactions": sum(t.compactions for t in self.turns),
            "evidence": sum(t.evidence for t in self.turns),
            "evidence_kept": sum(t.evidence_kept for t in self.turns),
            "evidence_kept_share": None if kept is None else round(kept, 4),
            "notes": list(self.notes),
            "per_turn": [t.to_dict() for t in self.turns],
        }


def _total(values: Any) -> float | None:
    out = 0.0
    for value in values:
        if value is None:
            return None
        out += value
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def cached_tokens(cacheable: int) -> int:
    """What a provider's prompt cache serves of a ``cacheable``-token shared prefix."""
    if cacheable < CACHE_MIN_TOKENS:
        return 0
    return cacheable - cacheable % CACHE_STEP


def recorded_settings(store: Store, scope: str, session: str) -> tuple[str | None, str | None]:
    """The newest recorded turn's model and system prompt (None when not recorded)."""
    archive: object = store
    if not archives_prompts(archive):
        return None, None
    newest = archive.list_prompts(scope, session, limit=1, newest=True)
    if not newest:
        return None, None
    recipe = newest[0].data
    keys = [p["system"] for m in recipe.get("head") or () for p in m if "system" in p]
    texts = archive.prompt_texts(scope, session, keys[:1])
    model = recipe.get("model")
    return (model if isinstance(model, str) else None), (texts.get(keys[0]) if keys else None)


def recorded_budget(store: Store, scope: str, session: str) -> int | None:
    """The newest recorded turn's budget (None when no turn is recorded)."""
    archive: object = store
    if not archives_prompts(archive):
        return None
    newest = archive.list_prompts(scope, session, limit=1, newest=True)
    budget = newest[0].data.get("budget") if newest else None
    return budget if isinstance(budget, int) else None


def history(store: Store, scope: str, session: str) -> list[Message]:
    """The session's whole stored history, oldest first."""
    out: list[Message] = []
    after: int | None = None
    while page := store.page(scope, session, after_id=after, limit=MAX_PAGE):
        out += page
        after = page[-1].id
        if len(page) < MAX_PAGE:
            break
    return out


def what_if(
    messages: list[Message],
    policy: Policy,
    *,
    budget: int | None = None,
    reserve: int | None = None,
    model: str | None = None,
    system: str | None = None,
    config: Config | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> WhatIf:
    """Play ``messages`` (a session's history, oldest first) again under ``policy``.

    ``budget`` defaults to the policy's own, ``model`` to :data:`DEFAULT_MODEL`;
    ``config`` is the source engine's (its time zone). ``progress(done, total)``
    is called after each turn. See the module docstring.
    """
    model = model or DEFAULT_MODEL
    budget = budget if budget is not None else (policy.default_budget or DEFAULT_BUDGET)
    reserve = reserve if reserve is not None else policy.default_reserve
    counter = counter_for_model(model)
    texts = [m.content for m in messages]
    evidence = Evidence(rare_words(texts))
    total = sum(m.role == "user" for m in messages)
    result = WhatIf(
        policy.name, budget, reserve, model, bool(system), [], [OFFLINE_NOTE, MEMORIES_NOTE]
    )
    settings = (config or Config()).replace(embeddings=False)
    store = open_store(COPY_URL)
    runtime = Runtime.create(store, settings, llm=None)
    try:
        session = Session(runtime, COPY, COPY, policy)
        waiting: list[NewMessage] = []
        before: list[JSON] = []
        for message in messages:
            waiting.append(_new(message))
            if message.role != "user":
                evidence.saw(message.content)
                continue
            store.append(COPY, COPY, waiting, runtime.count_many(waiting))
            waiting = []
            wanted = evidence.of(message.content)
            ctx, ran = _turn(session, policy, budget, reserve, model, system)
            shared = _shared(before, ctx.messages)
            cacheable = sum(count_chat_message(counter, m) for m in ctx.messages[:shared])
            served = cached_tokens(cacheable)
            result.turns.append(
                WhatIfTurn(
                    turn=len(result.turns) + 1,
                    message_id=message.id,
                    tokens=ctx.tokens,
                    window=len(ctx.message_ids),
                    cacheable_tokens=cacheable,
                    cached_tokens=served,
                    cost_usd=input_cost_usd(model, ctx.tokens),
                    cost_cached_usd=input_cost_usd(model, ctx.tokens, served),
                    over_budget=_over(ctx),
                    compactions=ran,
                    evidence=len(wanted),
                    evidence_kept=len(in_view(wanted, ctx.messages, message.content)),
                )
            )
            before = ctx.messages
            evidence.saw(message.content)
            if progress is not None:
                progress(len(result.turns), total)
    finally:
        runtime.close(0)
        store.close()
    return result


def _new(message: Message) -> NewMessage:
    return NewMessage(
        role=message.role,
        content=message.content,
        created_at=message.created_at,
        name=message.name,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        metadata=dict(message.metadata),
        parts=message.parts,
    )


def _turn(
    session: Session, policy: Policy, budget: int, reserve: int, model: str, system: str | None
) -> tuple[Context, int]:
    """The prompt of one turn and the compactions run for it.

    A compaction that is due runs between turns; a synchronous policy's
    prompt shows its outcome, a background one's only the next turn's.
    """
    ask: Mapping[str, Any] = {"reserve": reserve, "system": system, "model": model}
    ctx: Context = session.context(budget, compact=False, **ask)
    if NOT_RUN_NOTE not in ctx.notes:
        return ctx, 0
    outcome = session.compact(system=system)
    if policy.sync_compaction:
        ctx = session.context(budget, compact=False, **ask)
    return ctx, int(outcome.committed)


def _shared(before: list[JSON], now: list[JSON]) -> int:
    count = 0
    for a, b in zip(before, now, strict=False):
        if a != b:
            break
        count += 1
    return count


def _over(ctx: Context) -> bool:
    return (
        bool(ctx.truncated_ids)
        or ctx.degraded == TURN_OVER_BUDGET
        or (ctx.tokens > ctx.budget - ctx.reserve)
    )
