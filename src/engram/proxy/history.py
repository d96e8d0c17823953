"""What the proxy reads from and writes to a session during its rounds (run in a worker thread).

* :func:`build_round` builds the budgeted context of one upstream call.
* :func:`run_engram_calls` runs Engram's own tool calls of an answer and stores
  the call and its results in one transaction.
* :func:`store_answer` stores the answer, marked as the upstream's (its
  completion id and model, so a retry gets the same answer back), with the
  turn's usage (``cache_read_input_tokens`` too, when the upstream reports it),
  the items kept verbatim (:mod:`engram.proxy.verbatim`), and ``cut`` when the
  client went away mid-stream.

Writes go to the session, or to a :class:`~engram.proxy.scratch.Scratch` for a
request that stores nothing. What a request's own messages do to the session
is :mod:`engram.proxy.plan`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engram import tools
from engram.chat.loop import result_cap
from engram.context import Context
from engram.models import JSON, Message, SessionInfo
from engram.provenance.recipe import VIA_PROXY
from engram.proxy.align import UPSTREAM_KEY
from engram.proxy.plan import CUT_KEY
from engram.proxy.request import ChatRequest
from engram.proxy.verbatim import VERBATIM_KEY
from engram.session import Session
from engram.tokens import TokenCounter, count_tools, counter_for_model

__all__ = [
    "CUT_KEY",
    "USAGE_KEY",
    "Book",
    "Round",
    "build_round",
    "offered_tools",
    "run_engram_calls",
    "store_answer",
    "tools_tokens",
]

#: Engram's tool schemas as offered upstream (the same every round: built once).
ENGRAM_TOOLS: tuple[JSON, ...] = tuple(tools.schemas("openai"))
#: Metadata key of an answer's usage: the sum over the turn's upstream calls.
USAGE_KEY = "usage"
#: Most stored messages read back to find the kept items of a prompt's messages.
MAX_KEPT_READ = 20_000


class Book(Protocol):
    """Where a turn's messages go and its prompts come from: a session, or a scratch."""

    def add_many(
        self, messages: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[Message]:
        """Store these messages (all or none)."""
        ...

    def context(
        self,
        budget: int,
        *,
        reserve: int,
        system: str | None,
        model: str,
        merge_system: bool,
        tools: Sequence[Mapping[str, Any]] | None,
        via: str,
    ) -> Context:
        """The budgeted prompt of the next call (recorded, with ``tools``, when it is stored)."""
        ...

    def info(self) -> SessionInfo | None:
        """The stored session and its totals."""
        ...


@dataclass(frozen=True, slots=True)
class Round:
    """One upstream call's prompt: messages, tools offered, and what the context reported.

    ``turn_start`` is the index in ``messages`` where the current turn begins;
    ``kept`` maps an index in ``messages`` to the verbatim items its stored
    message keeps (only when the request's upstream takes them back).
    """

    messages: list[JSON]
    offered: list[JSON]
    room: int
    prompt_tokens: int
    stored_tokens: int
    pending_compaction: bool
    turn_start: int | None = None
    kept: dict[int, JSON] = field(default_factory=dict)


def offered_tools(request: ChatRequest, engram_tools: bool) -> list[JSON]:
    """The tools of one round: the client's, then Engram's when they are offered."""
    offered = list(request.client_tools)
    if engram_tools:
        offered += ENGRAM_TOOLS
    return offered


def tools_tokens(counter: TokenCounter, request: ChatRequest, engram_tools: bool) -> int:
    """What the tools of one round add to the prompt (Engram's alone are counted once)."""
    if engram_tools and not request.client_tools:
        key = (type(counter).__qualname__, counter.name, getattr(counter, "margin", None))
        size = _ENGRAM_TOOLS_TOKENS.get(key)
        if size is None:
            size = _ENGRAM_TOOLS_TOKENS[key] = count_tools(counter, ENGRAM_TOOLS)
        return size
    return count_tools(counter, offered_tools(request, engram_tools))


#: What Engram's tools add to a prompt, per kind of counter.
_ENGRAM_TOOLS_TOKENS: dict[tuple[str, str, object], int] = {}


def build_round(
    book: Book,
    request: ChatRequest,
    *,
    engram_tools: bool,
    budget: int,
    single_system: bool = False,
    kept_from: Session | None = None,
) -> Round:
    """The prompt of one round: the session's context within ``budget`` tokens.

    The client's and (when offered) Engram's tool schemas are counted against
    the budget, and the client's reserve is kept free for the answer. With
    ``kept_from`` (the session) and a request whose upstream takes verbatim
    items back (``request.keeps``), the round carries them.
    """
    offered = offered_tools(request, engram_tools)
    tools_size = tools_tokens(counter_for_model(request.model), request, engram_tools)
    ctx = book.context(
        budget - tools_size,
        reserve=request.reserve,
        system=request.system_prompt(engram_tools),
        model=request.model,
        merge_system=single_system,
        tools=offered,  # recorded with the turn: the upstream gets ctx.messages and these
        via=VIA_PROXY,
    )
    info = book.info()
    kept = _kept(kept_from, book, ctx) if kept_from is not None and request.keeps else {}
    return Round(
        messages=list(ctx.messages),
        offered=offered,
        room=max(0, budget - tools_size - request.reserve),
        prompt_tokens=ctx.tokens,
        stored_tokens=info.token_count if info else 0,
        pending_compaction=ctx.pending_compaction,
        turn_start=ctx.turn_start,
        kept=kept,
    )


def _kept(session: Session, book: Book, ctx: Context) -> dict[int, JSON]:
    """The verbatim records of the prompt's stored messages, by index in ``ctx.messages``."""
    ids = ctx.message_ids
    if not ids:
        return {}
    # A scratch's own messages are in memory; the others are read back, newest first.
    found: dict[int, Message] = {m.id: m for m in getattr(book, "rows", ())}
    wanted = {i for i in ids if i not in found}
    store, before, read = session.runtime.store, None, 0
    while wanted and read < MAX_KEPT_READ:
        limit = min(len(wanted) + 16, 1000)
        rows = store.tail(session.scope, session.id, limit=limit, before_id=before)
        if not rows:
            break
        read += len(rows)
        found.update((m.id, m) for m in rows)
        wanted -= {m.id for m in rows}
        before = rows[0].id
        if wanted and min(wanted) >= before:
            break  # not stored (any more): nothing older can hold it
    offset = len(ctx.messages) - len(ids)
    out: dict[int, JSON] = {}
    for index, message_id in enumerate(ids):
        message = found.get(message_id)
        record = message.metadata.get(VERBATIM_KEY) if message is not None else None
        if isinstance(record, dict):
            out[offset + index] = record
    return out


def run_engram_calls(
    session: Session,
    message: Mapping[str, Any],
    ours: Sequence[JSON],
    room: int,
    *,
    upstream: Mapping[str, Any],
    key: str | None = None,
    into: Book | None = None,
    marks: Mapping[str, Any] | None = None,
) -> None:
    """Run Engram's tool calls of an answer; store the answer's call message and their results.

    Each result is capped like the chat loop's, at a share of the prompt ``room``.
    ``upstream`` (the completion's id and model) marks the call message as the
    upstream's; ``key`` is the idempotency key they are stored with (when the
    message also calls the client's tools, it is the client's answer, and the
    caller gives its ``marks``). They go ``into`` the session, or a scratch.
    """
    names = list(tools.TOOLS)
    cap = result_cap(room, len(ours))
    results: list[JSON] = [
        {
            "role": "tool",
            "tool_call_id": call["id"],
            "content": tools.dispatch(
                session,
                call["function"]["name"],
                call["function"].get("arguments"),
                names=names,
                max_result_tokens=cap,
            ),
        }
        for call in ours
    ]
    metadata = _metadata(message, upstream, marks)
    assistant: JSON = {
        "role": "assistant",
        "content": message.get("content") or None,
        "tool_calls": list(message.get("tool_calls") or []),
        "metadata": metadata,
    }
    # One transaction: a call never lacks its results.
    (into or session).add_many([assistant, *results], idempotency_key=key)


def store_answer(
    session: Book,
    message: Mapping[str, Any],
    *,
    upstream: Mapping[str, Any],
    key: str | None = None,
    cut: bool = False,
    marks: Mapping[str, Any] | None = None,
) -> Message | None:
    """Store the final answer (text and the client's tool calls); nothing when it is empty.

    ``upstream`` (the completion's id and model) marks it as the upstream's answer;
    ``key`` is the idempotency key it is stored with (a retry finds it by that key);
    ``marks`` (the turn's usage, a front's own marks) go to its metadata.
    """
    content = message.get("content") or None
    calls = list(message.get("tool_calls") or [])
    if content is None and not calls:
        return None
    metadata = _metadata(message, upstream, marks)
    if cut:
        metadata[CUT_KEY] = True
    stored: JSON = {"role": "assistant", "content": content, "metadata": metadata}
    if calls:
        stored["tool_calls"] = calls
    added = session.add_many([stored], idempotency_key=key)
    return added[-1] if added else None


def _metadata(
    message: Mapping[str, Any], upstream: Mapping[str, Any], marks: Mapping[str, Any] | None
) -> JSON:
    """An answer's metadata: its origin, the front's marks, the items kept verbatim."""
    metadata: JSON = {UPSTREAM_KEY: dict(upstream), **(marks or {})}
    if isinstance(message.get(VERBATIM_KEY), Mapping):
        metadata[VERBATIM_KEY] = dict(message[VERBATIM_KEY])
    return metadata
