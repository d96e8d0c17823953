"""The proxy's turn: align the request, run Engram's tool rounds, answer the client.

One request, holding its session's turn (:mod:`engram.proxy.serial`), up to
``max_rounds`` upstream calls:

1. the request's messages are aligned with the stored history and only what
   is new is stored (:mod:`engram.proxy.plan`); a retry of an answered turn
   gets the stored answer back at once, with no upstream call;
2. each round builds the session's budgeted context, offers the client's
   tools and Engram's (the last round: the client's only) and calls the
   upstream with the client's own parameters and model;
3. tool calls to Engram's tools are run here, bound to the session (the
   model never picks the scope), and stored with their results; then the
   next round;
4. an answer, or tool calls for the client's tools, goes back to the client
   and is stored; usage is the sum of every round (what was sent). When the
   rounds run out on a call to Engram's tools, that call is dropped and the
   answer ends with ``finish_reason: "stop"``.

Streaming: every round is streamed from the upstream; while a round carries
no text it is held back, so Engram's tool rounds never reach the client;
once text flows, the round is relayed chunk by chunk (calls to Engram's tools
in it are then dropped). A client that goes away mid-stream leaves the
partial answer stored and marked ``cut``; asking the same turn again then
replaces it. A client that goes away from a request that is not streamed
leaves the whole answer stored, and a retry gets it back.

Other fronts (the Responses and Messages routes) run the same turn on a
chat-format request: :meth:`ProxyTurn.chunks` gives them the chunks to
re-encode, ``marks`` go to the stored answer's metadata, and a turn with a
:class:`~engram.proxy.scratch.Scratch` stores nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio

from engram import tools
from engram.aio import offload
from engram.errors import LLMError
from engram.models import JSON, Message
from engram.proxy.align import UPSTREAM_KEY
from engram.proxy.budget import Budget, Sizes
from engram.proxy.history import (
    USAGE_KEY,
    Book,
    Round,
    build_round,
    run_engram_calls,
    store_answer,
    tools_tokens,
)
from engram.proxy.plan import Plan, Retry, plan_turn
from engram.proxy.request import ChatRequest
from engram.proxy.scratch import Scratch
from engram.proxy.settings import ProxySettings
from engram.proxy.stream import (
    End,
    Gathered,
    Relay,
    completion_chunks,
    encode,
)
from engram.proxy.upstream import ModelEndpoint
from engram.proxy.verbatim import VERBATIM_KEY
from engram.session import Session
from engram.tokens import count_message, counter_for_model

_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
#: Usage keys of the prompt cache: what the upstream read from it (OpenAI's, Anthropic's).
CACHE_READ_KEYS = ("cached_tokens", "cache_read_input_tokens")


def is_ours(name: str) -> bool:
    """Whether ``name`` is one of Engram's own tools."""
    return name in tools.TOOLS


@dataclass(slots=True)
class Report:
    """What Engram did for one request, sent back as ``X-Engram-*`` headers."""

    scope: str
    session: str
    budget: int = 0
    rounds: int = 0
    prompt_tokens: int = 0
    stored_tokens: int = 0
    pending_compaction: bool = False
    replayed: bool = False
    replaced: int = 0
    usage: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(_USAGE_KEYS, 0))
    upstream: dict[str, str] = field(default_factory=dict)

    def saw(self, built: Round) -> None:
        """Record the prompt of a round."""
        self.rounds += 1
        self.prompt_tokens = built.prompt_tokens
        self.stored_tokens = built.stored_tokens
        self.pending_compaction = built.pending_compaction

    def add_usage(self, usage: object) -> None:
        """Add one upstream call's usage to the totals (every count it reports, one level deep)."""
        if isinstance(usage, dict):
            _add_counts(self.usage, usage)

    @property
    def cache_read(self) -> int:
        """Prompt tokens the upstream read from its cache over the turn."""
        details = self.usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
        return int(self.usage.get("cache_read_input_tokens", 0)) + int(cached)

    def headers(self) -> dict[str, str]:
        """The response headers: what Engram did, and the upstream's rate-limit headers."""
        return {
            **self.upstream,
            "X-Engram-Scope": self.scope,
            "X-Engram-Session": self.session,
            "X-Engram-Budget": str(self.budget),
            "X-Engram-Rounds": str(self.rounds),
            "X-Engram-Prompt-Tokens": str(self.prompt_tokens),
            "X-Engram-Tokens-Left-Out": str(max(0, self.stored_tokens - self.prompt_tokens)),
            "X-Engram-Compaction-Pending": "true" if self.pending_compaction else "false",
            "X-Engram-Replayed": "true" if self.replayed else "false",
            "X-Engram-Replaced": str(self.replaced),
            "X-Engram-Cache-Read-Tokens": str(self.cache_read),
        }


def _add_counts(totals: dict[str, Any], usage: dict[str, Any]) -> None:
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
            totals[key] = totals.get(key, 0) + value
        elif isinstance(value, dict):
            inner = totals.get(key)
            if not isinstance(inner, dict):
                inner = totals[key] = {}
            for name, count in value.items():
                if isinstance(count, int) and not isinstance(count, bool):
                    inner[name] = inner.get(name, 0) + count


@dataclass(slots=True)
class ProxyTurn:
    """One proxied chat completion on one session (its turn already held).

    ``marks`` go to the stored answer's metadata; with ``scratch`` the turn
    stores nothing (its messages live in the scratch until it ends).
    """

    session: Session
    request: ChatRequest
    upstream: ModelEndpoint
    settings: ProxySettings
    retry: Retry
    budget: Budget
    single_system: bool = False
    marks: JSON = field(default_factory=dict)
    scratch: Scratch | None = None
    report: Report = field(init=False)
    _plan: Plan = field(init=False, default_factory=Plan)
    _sizes: Sizes | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.report = Report(self.session.scope, self.session.id, budget=self.budget.total)

    def sizes(self) -> Sizes:
        """What the request sets aside from its budget (the first round's tools)."""
        if self._sizes is None:
            request = self.request
            counter = counter_for_model(request.model)
            first_offers_ours = self.settings.max_rounds > 1
            system = request.system_prompt(first_offers_ours)
            self._sizes = Sizes(
                budget=self.budget,
                reserve=request.reserve,
                reserve_field=request.reserve_field,
                tools=tools_tokens(counter, request, first_offers_ours),
                system=count_message(counter, "system", system) if system else 0,
            )
        return self._sizes

    @property
    def book(self) -> Book:
        """Where the turn's messages go: the session, or the scratch of a turn that stores none."""
        return self.scratch if self.scratch is not None else self.session

    @property
    def replay(self) -> Message | None:
        """The stored answer sent back to a retry (None: the turn called the upstream)."""
        return self._plan.replay

    async def complete(self) -> JSON:
        """Run the turn without streaming; return the client's chat completion."""
        built = await self._start()
        if self._plan.replay is not None:
            return self._replayed(self._plan.replay)
        for number in range(1, self.settings.max_rounds + 1):
            last = number == self.settings.max_rounds
            if number > 1:
                built = await self._round(last)
            assert built is not None
            reply = await self.upstream.complete(self._body(built))
            self.report.upstream = reply.headers
            answer = reply.body
            self.report.add_usage(answer.get("usage"))
            self.session.answered(answer.get("usage"))  # kept with the round's recorded turn
            choices = answer.get("choices") or [{}]
            message = dict(choices[0].get("message") or {})
            theirs = await self._tool_calls(message, built, last, answer)
            if theirs is None:
                continue
            return self._shaped(answer, message, theirs)
        raise AssertionError("the last round always answers")  # pragma: no cover

    async def stream(self) -> AsyncGenerator[bytes, None]:
        """Run Engram's rounds, then return the events of the answer (to relay as they come).

        Everything up to the first text (or the end of a round) happens
        before this returns, so errors still become ordinary error responses.
        """
        return encode(await self.chunks())

    async def chunks(self) -> AsyncGenerator[JSON | End, None]:
        """As :meth:`stream`, the answer as chat-completion chunks, then an :class:`End`."""
        built = await self._start()
        if self._plan.replay is not None:
            return _replay(self._replay_chunks(self._plan.replay))
        for number in range(1, self.settings.max_rounds + 1):
            last = number == self.settings.max_rounds
            if number > 1:
                built = await self._round(last)
            assert built is not None
            body = self._body(built)
            stack = AsyncExitStack()
            streamed = await stack.enter_async_context(self.upstream.stream(body))
            self.report.upstream = streamed.headers
            gathered, held = Gathered(), []
            try:
                async for chunk in streamed.chunks:
                    gathered.add(chunk)
                    held.append(chunk)
                    if gathered.text:
                        return self._relay(stack, streamed.chunks, gathered, held)
            except BaseException:
                await stack.aclose()
                raise
            await stack.aclose()
            self.report.add_usage(gathered.usage)
            self.session.answered(gathered.usage)
            message = gathered.message()
            theirs = await self._tool_calls(message, built, last, gathered.template or {})
            if theirs is None:
                continue
            usage = self.report.usage if self.request.include_usage else None
            chunks = completion_chunks(
                gathered.template, message, theirs, usage, gathered.finish_reason
            )
            return _replay(chunks)
        raise AssertionError("the last round always answers")  # pragma: no cover

    # -- steps --------------------------------------------------------------------------

    async def _start(self) -> Round | None:
        """Align the request and store what is new, then build the first round's prompt.

        Both happen in one worker-thread call: one hop fewer on the request's path.
        No prompt is built for a replay.
        """
        sizes = self.sizes()
        counter = counter_for_model(self.request.model)

        scratch = self.scratch

        def work() -> tuple[Plan, Round | None]:
            plan = plan_turn(
                self.session, self.request.new, self.retry, sizes, counter, is_ours,
                write=scratch.write if scratch is not None else None,
            )  # fmt: skip
            if plan.replay is not None:
                return plan, None
            return plan, self._build(self.settings.max_rounds == 1)

        self._plan, built = await offload(work)
        self.report.replaced = self._plan.replaced
        if built is not None:
            self.report.saw(built)
        return built

    def _build(self, last: bool) -> Round:
        return build_round(
            self.book,
            self.request,
            engram_tools=not last,
            budget=self.budget.total,
            single_system=self.single_system,
            kept_from=self.session,
        )

    def _body(self, built: Round) -> JSON:
        return self.request.upstream_body(
            built.messages, built.offered, turn_start=built.turn_start, kept=built.kept
        )

    def _marks(self) -> JSON:
        """The stored answer's marks: the front's, and the turn's usage so far."""
        return {**self.marks, USAGE_KEY: dict(self.report.usage)}

    async def _round(self, last: bool) -> Round:
        built = await offload(self._build, last)
        self.report.saw(built)
        return built

    async def _tool_calls(
        self, message: JSON, built: Round, last: bool, completion: JSON
    ) -> list[JSON] | None:
        """Handle an answer's tool calls; return those that go back to the client.

        None means Engram ran them all and another round follows; otherwise the
        answer is stored with the client's calls. On the last round Engram's
        tools were not offered: calls to them are dropped.
        """
        calls = _with_ids([c for c in message.get("tool_calls") or [] if isinstance(c, dict)])
        ours = [c for c in calls if is_ours(_name(c))]
        theirs = [c for c in calls if not is_ours(_name(c))]
        if ours and not last:
            await offload(
                run_engram_calls, self.session, {**message, "tool_calls": calls}, ours,
                built.room, upstream=_upstream_of(completion),
                key=self.retry.answer_key if theirs else None, into=self.book,
                marks=self._marks() if theirs else None,
            )  # fmt: skip
            if not theirs:
                return None
            return theirs  # the call message is stored with Engram's results
        await offload(
            store_answer, self.book, {**message, "tool_calls": theirs},
            upstream=_upstream_of(completion), key=self.retry.answer_key, marks=self._marks(),
        )  # fmt: skip
        return theirs

    def _shaped(self, answer: JSON, message: JSON, theirs: list[JSON]) -> JSON:
        out = dict(answer)
        shown = {key: value for key, value in message.items() if key != "tool_calls"}
        choice = dict(answer["choices"][0])
        if theirs:
            shown["tool_calls"] = theirs
        elif choice.get("finish_reason") == "tool_calls":  # Engram's calls were dropped
            choice["finish_reason"] = "stop"
        choice["message"] = shown
        out["choices"] = [choice]
        out["usage"] = dict(self.report.usage)
        return out

    def _replayed(self, stored: Message) -> JSON:
        """A stored answer as the chat completion it was (no upstream call: no usage)."""
        self.report.replayed = True
        message, upstream = _stored_view(stored, self.request.keeps)
        return {
            "id": upstream.get("id") or f"chatcmpl-engram-{stored.id}",
            "object": "chat.completion",
            "created": int(stored.created_at.timestamp()),
            "model": upstream.get("model") or self.request.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": dict(self.report.usage),
        }

    def _replay_chunks(self, stored: Message) -> list[JSON]:
        self.report.replayed = True
        message, upstream = _stored_view(stored, self.request.keeps)
        template = {
            "id": upstream.get("id") or f"chatcmpl-engram-{stored.id}",
            "created": int(stored.created_at.timestamp()),
            "model": upstream.get("model") or self.request.model,
        }
        usage = self.report.usage if self.request.include_usage else None
        return completion_chunks(template, message, message.get("tool_calls") or [], usage)

    async def _relay(
        self,
        stack: AsyncExitStack,
        chunks: AsyncIterator[JSON],
        gathered: Gathered,
        held: list[JSON],
    ) -> AsyncGenerator[JSON | End, None]:
        finished = False
        broken: LLMError | None = None
        relay = Relay(is_ours)
        try:
            for chunk in held:
                out = self._relayed(relay, chunk)
                if out is not None:
                    yield out
            async for chunk in chunks:
                gathered.add(chunk)
                out = self._relayed(relay, chunk)
                if out is not None:
                    yield out
            finished = True
        except LLMError as exc:  # the upstream timed out or broke off mid-stream: say so
            broken = exc
        finally:
            with anyio.CancelScope(shield=True):
                await stack.aclose()
                message = gathered.message()
                theirs = [c for c in message.get("tool_calls") or [] if not is_ours(_name(c))]
                await offload(
                    store_answer, self.book, {**message, "tool_calls": theirs},
                    upstream=_upstream_of(gathered.template or {}), key=self.retry.answer_key,
                    cut=not finished, marks=self._marks(),
                )  # fmt: skip
        yield End(broken)

    def _relayed(self, relay: Relay, chunk: JSON) -> JSON | None:
        """A chunk for the client: Engram's calls dropped, usage as the turn's totals."""
        if isinstance(chunk.get("usage"), dict):
            self.report.add_usage(chunk["usage"])
            self.session.answered(chunk["usage"])
        shown = relay.chunk(chunk)
        if shown is None:
            return None
        if isinstance(shown.get("usage"), dict):
            if not self.request.include_usage:
                if not shown.get("choices"):
                    return None
                shown = {**shown, "usage": None}
            else:
                shown = {**shown, "usage": dict(self.report.usage)}
        return shown


async def _replay(chunks: list[JSON]) -> AsyncGenerator[JSON | End, None]:
    """Chunks already gathered, then the end of the stream."""
    for chunk in chunks:
        yield chunk
    yield End()


def _name(call: JSON) -> str:
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else ""


def _with_ids(calls: list[JSON]) -> list[JSON]:
    """The calls, each with an id of its own (some local servers send none, or repeats)."""
    seen: set[str] = set()
    out = []
    for call in calls:
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id.strip() or call_id in seen:
            call = {**call, "id": f"call_{uuid.uuid4().hex[:24]}"}
        seen.add(call["id"])
        out.append(call)
    return out


def _upstream_of(completion: JSON) -> dict[str, Any]:
    """What is kept of the upstream's completion with its answer: its id and model."""
    return {key: completion[key] for key in ("id", "model") if isinstance(completion.get(key), str)}


def _stored_view(stored: Message, keeps: str | None) -> tuple[JSON, dict[str, Any]]:
    """The client's view of a stored answer (its calls to the client's tools), and its origin."""
    message: JSON = {"role": "assistant", "content": stored.content or None}
    calls = [c for c in stored.tool_calls or () if not is_ours(_name(c))]
    if calls:
        message["tool_calls"] = calls
    record = stored.metadata.get(VERBATIM_KEY)
    if keeps is not None and isinstance(record, dict) and record.get("format") == keeps:
        message[VERBATIM_KEY] = record  # an upstream of that format gave it: its client gets it
    upstream = stored.metadata.get(UPSTREAM_KEY)
    return message, upstream if isinstance(upstream, dict) else {}
