"""The proxy's turn: store the new messages, run Engram's tool rounds, answer the client.

One request, up to ``max_rounds`` upstream calls:

1. the client's new messages are stored (once, even when retried with the
   same idempotency key);
2. each round builds the session's budgeted context, offers the client's
   tools and Engram's (the last round: the client's only) and calls the
   upstream with the client's own parameters and model;
3. tool calls to Engram's tools are run here, bound to the session (the
   model never picks the scope), and stored with their results; then the
   next round;
4. an answer, or tool calls for the client's tools, goes back to the client
   unchanged and is stored; usage is the sum of every round (what was sent).

Streaming: every round is streamed from the upstream; while a round carries
no text it is held back, so Engram's tool rounds never reach the client;
once text flows, the round is relayed chunk by chunk. A client that goes
away mid-stream leaves the partial answer stored and marked ``cut``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio

from engram import tools
from engram.aio import offload
from engram.errors import LLMError
from engram.models import JSON
from engram.proxy.history import Round, build_round, run_engram_calls, store_answer, store_new
from engram.proxy.request import ChatRequest
from engram.proxy.settings import ProxySettings
from engram.proxy.stream import DONE, Gathered, error_event, event, tool_call_chunks
from engram.proxy.upstream import Upstream
from engram.session import Session

_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(slots=True)
class Report:
    """What Engram did for one request, sent back as ``X-Engram-*`` headers."""

    scope: str
    session: str
    rounds: int = 0
    prompt_tokens: int = 0
    stored_tokens: int = 0
    pending_compaction: bool = False
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_USAGE_KEYS, 0))

    def saw(self, built: Round) -> None:
        """Record the prompt of a round."""
        self.rounds += 1
        self.prompt_tokens = built.prompt_tokens
        self.stored_tokens = built.stored_tokens
        self.pending_compaction = built.pending_compaction

    def add_usage(self, usage: object) -> None:
        """Add one upstream call's usage to the totals."""
        if isinstance(usage, dict):
            for key in _USAGE_KEYS:
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    self.usage[key] += value

    def headers(self) -> dict[str, str]:
        """The response headers that tell the client what Engram did."""
        return {
            "X-Engram-Scope": self.scope,
            "X-Engram-Session": self.session,
            "X-Engram-Rounds": str(self.rounds),
            "X-Engram-Prompt-Tokens": str(self.prompt_tokens),
            "X-Engram-Tokens-Left-Out": str(max(0, self.stored_tokens - self.prompt_tokens)),
            "X-Engram-Compaction-Pending": "true" if self.pending_compaction else "false",
        }


@dataclass(slots=True)
class ProxyTurn:
    """One proxied chat completion on one session."""

    session: Session
    request: ChatRequest
    upstream: Upstream
    settings: ProxySettings
    idempotency_key: str | None = None
    budget: int | None = None
    report: Report = field(init=False)

    def __post_init__(self) -> None:
        self.report = Report(self.session.scope, self.session.id)

    async def complete(self) -> JSON:
        """Run the turn without streaming; return the client's chat completion."""
        for number in range(1, self.settings.max_rounds + 1):
            last = number == self.settings.max_rounds
            built = await self._round(last, first=number == 1)
            answer = await self.upstream.complete(
                self.request.upstream_body(built.messages, built.offered)
            )
            self.report.add_usage(answer.get("usage"))
            choices = answer.get("choices") or [{}]
            message = dict(choices[0].get("message") or {})
            theirs = await self._tool_calls(message, built, last)
            if theirs is None:
                continue
            return self._shaped(answer, message, theirs)
        raise AssertionError("the last round always answers")  # pragma: no cover

    async def stream(self) -> AsyncIterator[bytes]:
        """Run Engram's rounds, then return the events of the answer (to relay as they come).

        Everything up to the first text (or the end of a round) happens
        before this returns, so errors still become ordinary error responses.
        """
        for number in range(1, self.settings.max_rounds + 1):
            last = number == self.settings.max_rounds
            built = await self._round(last, first=number == 1)
            body = self.request.upstream_body(built.messages, built.offered)
            stack = AsyncExitStack()
            chunks = await stack.enter_async_context(self.upstream.stream(body))
            gathered, held = Gathered(), []
            try:
                async for chunk in chunks:
                    gathered.add(chunk)
                    held.append(chunk)
                    if gathered.text:
                        return self._relay(stack, chunks, gathered, held)
            except BaseException:
                await stack.aclose()
                raise
            await stack.aclose()
            self.report.add_usage(gathered.usage)
            message = gathered.message()
            theirs = await self._tool_calls(message, built, last)
            if theirs is None:
                continue
            if not theirs:  # an empty answer: relayed as it came
                return _replay([c for c in map(self._relayed_chunk, held) if c is not None])
            usage = self.report.usage if self.request.include_usage else None
            return _replay(tool_call_chunks(gathered, theirs, usage))
        raise AssertionError("the last round always answers")  # pragma: no cover

    # -- steps --------------------------------------------------------------------------

    async def _round(self, last: bool, *, first: bool) -> Round:
        """Build a round's prompt (the first round also stores the new messages).

        Both happen in one worker-thread call: one hop fewer on the request's path.
        """

        def work() -> Round:
            if first:
                store_new(self.session, self.request, self.idempotency_key)
            return build_round(
                self.session, self.request, engram_tools=not last, budget=self.budget
            )

        built = await offload(work)
        self.report.saw(built)
        return built

    async def _tool_calls(self, message: JSON, built: Round, last: bool) -> list[JSON] | None:
        """Handle an answer's tool calls; return those that go back to the client.

        None means Engram ran them all and another round follows; otherwise the
        answer is stored with the client's calls. On the last round Engram's
        tools were not offered: calls to them are dropped.
        """
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        ours = [c for c in calls if _name(c) in tools.TOOLS]
        theirs = [c for c in calls if _name(c) not in tools.TOOLS]
        if ours and not last:
            await offload(run_engram_calls, self.session, message, ours, built.room)
            if not theirs:
                return None
            return theirs  # the call message is stored with Engram's results
        await offload(store_answer, self.session, {**message, "tool_calls": theirs})
        return theirs

    def _shaped(self, answer: JSON, message: JSON, theirs: list[JSON]) -> JSON:
        out = dict(answer)
        shown = {key: value for key, value in message.items() if key != "tool_calls"}
        if theirs:
            shown["tool_calls"] = theirs
        choice = dict(answer["choices"][0])
        choice["message"] = shown
        out["choices"] = [choice]
        out["usage"] = dict(self.report.usage)
        return out

    async def _relay(
        self,
        stack: AsyncExitStack,
        chunks: AsyncIterator[JSON],
        gathered: Gathered,
        held: list[JSON],
    ) -> AsyncIterator[bytes]:
        finished = False
        broken: LLMError | None = None
        try:
            for chunk in held:
                out = self._relayed(chunk)
                if out is not None:
                    yield out
            async for chunk in chunks:
                gathered.add(chunk)
                out = self._relayed(chunk)
                if out is not None:
                    yield out
            finished = True
        except LLMError as exc:  # the upstream timed out or broke off mid-stream: say so
            broken = exc
        finally:
            with anyio.CancelScope(shield=True):
                await stack.aclose()
                await offload(store_answer, self.session, gathered.message(), cut=not finished)
        yield DONE if broken is None else error_event(broken)

    def _relayed(self, chunk: JSON) -> bytes | None:
        """A chunk for the client, counting its usage (see :meth:`_relayed_chunk`)."""
        if isinstance(chunk.get("usage"), dict):
            self.report.add_usage(chunk["usage"])
        shown = self._relayed_chunk(chunk)
        return event(shown) if shown is not None else None

    def _relayed_chunk(self, chunk: JSON) -> JSON | None:
        """Usage becomes the turn's totals, or goes when the client did not ask for it."""
        if not isinstance(chunk.get("usage"), dict):
            return chunk
        if not self.request.include_usage:
            return {**chunk, "usage": None} if chunk.get("choices") else None
        return {**chunk, "usage": dict(self.report.usage)}


async def _replay(chunks: list[JSON]) -> AsyncIterator[bytes]:
    """Events of chunks already gathered, then the end of the stream."""
    for chunk in chunks:
        yield event(chunk)
    yield DONE


def _name(call: JSON) -> Any:
    function = call.get("function")
    return function.get("name") if isinstance(function, dict) else None
