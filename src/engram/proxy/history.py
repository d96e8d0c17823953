"""What the proxy reads from and writes to a session (synchronous: run in a worker thread).

* :func:`store_new` stores the client's new messages once: with an
  idempotency key, a retry stores nothing again (:mod:`engram.idempotency`).
* :func:`build_round` builds the budgeted context of one upstream call.
* :func:`run_engram_calls` runs Engram's own tool calls of an answer and stores
  the call and its results in one transaction.
* :func:`store_answer` stores the answer (marked ``cut`` when the client went
  away mid-stream).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engram import tools
from engram.chat.loop import result_cap
from engram.intake.parts import content_text
from engram.models import JSON
from engram.proxy.request import ChatRequest
from engram.session import Session
from engram.tokens import count_tools, counter_for_model

#: Metadata key set on an answer the client stopped reading before its end.
CUT_KEY = "cut"


@dataclass(frozen=True, slots=True)
class Round:
    """One upstream call's prompt: messages, tools offered, and what the context reported."""

    messages: list[JSON]
    offered: list[JSON]
    room: int
    prompt_tokens: int
    stored_tokens: int
    pending_compaction: bool


def store_new(session: Session, request: ChatRequest, idempotency_key: str | None) -> None:
    """Store the request's new messages, unless a retry with the same key already did."""
    if request.new:
        batch = [_clean(message) for message in request.new]
        session.add_many(batch, idempotency_key=idempotency_key or None)


def build_round(
    session: Session, request: ChatRequest, *, engram_tools: bool, budget: int | None
) -> Round:
    """The prompt of one round: the session's context within its policy's budget.

    The client's and (when offered) Engram's tool schemas are counted against
    the budget, and the client's reserve is kept free for the answer.
    """
    offered = list(request.client_tools)
    if engram_tools:
        offered += tools.schemas("openai")
    counter = counter_for_model(request.model)
    total = budget if budget is not None else session.policy.default_budget
    tools_tokens = count_tools(counter, offered)
    ctx = session.context(
        total - tools_tokens,
        reserve=request.reserve,
        system=request.system_prompt(engram_tools),
        model=request.model,
    )
    info = session.info()
    return Round(
        messages=list(ctx.messages),
        offered=offered,
        room=max(0, total - tools_tokens - request.reserve),
        prompt_tokens=ctx.tokens,
        stored_tokens=info.token_count if info else 0,
        pending_compaction=ctx.pending_compaction,
    )


def run_engram_calls(
    session: Session, message: Mapping[str, Any], ours: Sequence[JSON], room: int
) -> None:
    """Run Engram's tool calls of an answer; store the answer's call message and their results.

    Each result is capped like the chat loop's, at a share of the prompt ``room``.
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
    }
    session.add_many([assistant, *results])  # one transaction: a call never lacks its results


def store_answer(session: Session, message: Mapping[str, Any], *, cut: bool = False) -> None:
    """Store the final answer (text and the client's tool calls); nothing when it is empty."""
    content = message.get("content") or None
    calls = list(message.get("tool_calls") or [])
    if content is None and not calls:
        return
    stored: JSON = {"role": "assistant", "content": content}
    if calls:
        stored["tool_calls"] = calls
    if cut:
        stored["metadata"] = {CUT_KEY: True}
    session.add_many([stored])


def _clean(message: Mapping[str, Any]) -> JSON:
    """A message as Engram stores it: the chat fields, with a list of text parts joined."""
    out: JSON = {key: value for key, value in message.items() if value is not None}
    for key in ("refusal", "annotations", "audio"):
        if out.get(key) in (None, [], ""):
            out.pop(key, None)
    content = out.get("content")
    if isinstance(content, list) and all(
        isinstance(part, Mapping) and part.get("type") == "text" for part in content
    ):
        out["content"] = content_text(content)
    return out
