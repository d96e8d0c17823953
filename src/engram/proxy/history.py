"""What the proxy reads from and writes to a session during its rounds (run in a worker thread).

* :func:`build_round` builds the budgeted context of one upstream call.
* :func:`run_engram_calls` runs Engram's own tool calls of an answer and stores
  the call and its results in one transaction.
* :func:`store_answer` stores the answer, marked as the upstream's (its
  completion id and model, so a retry gets the same answer back), and ``cut``
  when the client went away mid-stream.

What a request's own messages do to the session is :mod:`engram.proxy.plan`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engram import tools
from engram.chat.loop import result_cap
from engram.models import JSON
from engram.provenance.recipe import VIA_PROXY
from engram.proxy.align import UPSTREAM_KEY
from engram.proxy.plan import CUT_KEY
from engram.proxy.request import ChatRequest
from engram.session import Session
from engram.tokens import TokenCounter, count_tools, counter_for_model

__all__ = [
    "CUT_KEY",
    "Round",
    "build_round",
    "offered_tools",
    "run_engram_calls",
    "store_answer",
    "tools_tokens",
]

#: Engram's tool schemas as offered upstream (the same every round: built once).
ENGRAM_TOOLS: tuple[JSON, ...] = tuple(tools.schemas("openai"))


@dataclass(frozen=True, slots=True)
class Round:
    """One upstream call's prompt: messages, tools offered, and what the context reported."""

    messages: list[JSON]
    offered: list[JSON]
    room: int
    prompt_tokens: int
    stored_tokens: int
    pending_compaction: bool


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
    session: Session,
    request: ChatRequest,
    *,
    engram_tools: bool,
    budget: int,
    single_system: bool = False,
) -> Round:
    """The prompt of one round: the session's context within ``budget`` tokens.

    The client's and (when offered) Engram's tool schemas are counted against
    the budget, and the client's reserve is kept free for the answer.
    """
    offered = offered_tools(request, engram_tools)
    tools_size = tools_tokens(counter_for_model(request.model), request, engram_tools)
    ctx = session.context(
        budget - tools_size,
        reserve=request.reserve,
        system=request.system_prompt(engram_tools),
        model=request.model,
        merge_system=single_system,
        tools=offered,  # recorded with the turn: the upstream gets ctx.messages and these
        via=VIA_PROXY,
    )
    info = session.info()
    return Round(
        messages=list(ctx.messages),
        offered=offered,
        room=max(0, budget - tools_size - request.reserve),
        prompt_tokens=ctx.tokens,
        stored_tokens=info.token_count if info else 0,
        pending_compaction=ctx.pending_compaction,
    )


def run_engram_calls(
    session: Session,
    message: Mapping[str, Any],
    ours: Sequence[JSON],
    room: int,
    *,
    upstream: Mapping[str, Any],
    key: str | None = None,
) -> None:
    """Run Engram's tool calls of an answer; store the answer's call message and their results.

    Each result is capped like the chat loop's, at a share of the prompt ``room``.
    ``upstream`` (the completion's id and model) marks the call message as the
    upstream's; ``key`` is the idempotency key they are stored with (when the
    message also calls the client's tools, it is the client's answer).
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
    assistant: JSON = {
        "role": "assistant",
        "content": message.get("content") or None,
        "tool_calls": list(message.get("tool_calls") or []),
        "metadata": {UPSTREAM_KEY: dict(upstream)},
    }
    # One transaction: a call never lacks its results.
    session.add_many([assistant, *results], idempotency_key=key)


def store_answer(
    session: Session,
    message: Mapping[str, Any],
    *,
    upstream: Mapping[str, Any],
    key: str | None = None,
    cut: bool = False,
) -> None:
    """Store the final answer (text and the client's tool calls); nothing when it is empty.

    ``upstream`` (the completion's id and model) marks it as the upstream's answer;
    ``key`` is the idempotency key it is stored with (a retry finds it by that key).
    """
    content = message.get("content") or None
    calls = list(message.get("tool_calls") or [])
    if content is None and not calls:
        return
    metadata: JSON = {UPSTREAM_KEY: dict(upstream)}
    if cut:
        metadata[CUT_KEY] = True
    stored: JSON = {"role": "assistant", "content": content, "metadata": metadata}
    if calls:
        stored["tool_calls"] = calls
    session.add_many([stored], idempotency_key=key)
