"""The chat loop: one user turn, with as many tool rounds as the model needs.

The flow, for any OpenAI-compatible model::

    user: "What did we decide about pricing last week?"
      -> store the message, build the lean prompt, call the model with the tools
      -> model calls search_history(query="pricing")
      -> run it for this session, store the call and its result, rebuild the prompt
      -> model answers from the result; the answer is stored

:func:`run_turn` does that for several rounds. Every prompt is rebuilt from
the store by :meth:`engram.Session.context`, so tool results count against
the budget exactly like any other message, and the prompt plus the tool
schemas' estimate plus the reserve always fit the budget, every round. The
last round offers no tools, so the model has to answer (a follow-up call
with ``tools=[]``).

Safety: tools run through :func:`engram.tools.dispatch`, bound to the
session, so the model never chooses the session or the scope (scope isolation),
and bad tool names or arguments come back to the model as a structured error
instead of crashing the turn. Failures of the model (:class:`LLMError`,
after the client's one retry) propagate to the caller; by then the user
message is stored, every stored tool round is whole (the assistant call and
its results are written in one transaction) and nothing half-written exists;
``run_turn(..., retry=True)`` then goes on from the stored question.

The logic of a turn is one generator, :func:`turn_steps`: it does all the
store work and yields each model call it needs. :func:`run_turn` drives it
with :meth:`LLMClient.chat`; the async drivers in :mod:`engram.chat.async_loop`
drive the same generator, running its steps in a worker thread and awaiting
the model (streaming the answer when asked).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple, Required, TypedDict, Unpack

from engram import telemetry
from engram.chat.steps import fit_steps
from engram.context import MIN_BUDGET, Context
from engram.errors import ConfigError, InvalidMessage, StoreError
from engram.limits import MAX_EXTENDED_CONTEXT
from engram.models import JSON, Message
from engram.provenance.recipe import VIA_CHAT
from engram.tokens import TokenCounter, count_tools, counter_for_model
from engram.tools.dispatcher import dispatch, is_error
from engram.tools.registry import HISTORY_TOOLS_PROMPT, TOOLS, schemas, select
from engram.tools.results import DEFAULT_MAX_RESULT_TOKENS, MIN_RESULT_TOKENS

if TYPE_CHECKING:
    from engram.llm.client import LLMClient, LLMResult
    from engram.session import Session

logger = logging.getLogger("engram.tools")

#: Model calls per turn when the caller does not say (three tool rounds, then an answer).
DEFAULT_MAX_ROUNDS = 4
#: Most model calls one turn may make: a runaway model cannot loop (and bill) forever.
MAX_ROUNDS = 16
#: Tokens kept free for the answer when the caller does not say.
DEFAULT_RESERVE = 1024
#: Share of the prompt room all tool results of one round may take together,
#: as a divisor: each result is capped at ``room // (RESULT_SHARE * calls)``
#: (at least :data:`MIN_RESULT_TOKENS`, at most :data:`DEFAULT_MAX_RESULT_TOKENS`).
RESULT_SHARE = 2
#: With ``store_steps=False`` the unstored tool rounds may take at most this
#: share of the prompt room (a divisor); older rounds are dropped first.
STEPS_SHARE = 2
#: Most tool calls run from one model answer (the store's own limit is higher);
#: further calls are not run and not stored, and the turn says so.
MAX_CALLS_PER_ROUND = 32
#: ``purpose`` of the model calls, as recorded with the usage.
PURPOSE = "chat"
#: Pages of :data:`MAX_EXTENDED_CONTEXT` messages a retry reads back to find
#: the question of the failed turn (past its stored tool rounds).
RETRY_SCAN_PAGES = MAX_ROUNDS


ToolChoice = Literal["all"] | Sequence[str] | None


class ToolCallRecord(NamedTuple):
    """One tool call of a turn: the tool named, its arguments as sent, and whether it worked."""

    name: str
    arguments: str
    ok: bool


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """Tokens and cost of every model call of a turn, summed.

    ``cost_usd`` is None when no call had a known price; ``estimated`` is True
    when any call's tokens were counted locally (the server reported none).
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    estimated: bool = False

    def plus(self, result: LLMResult) -> TurnUsage:
        """These totals with one more call added."""
        cost = self.cost_usd
        if result.cost_usd is not None:
            cost = (cost or 0.0) + result.cost_usd
        return TurnUsage(
            calls=self.calls + 1,
            input_tokens=self.input_tokens + result.input_tokens,
            output_tokens=self.output_tokens + result.output_tokens,
            cost_usd=cost,
            estimated=self.estimated or result.usage_estimated,
        )


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What one turn did.

    Attributes:
        answer: The model's final text ("" when it gave none; see ``degraded``).
        rounds: Model calls made.
        tool_calls: Every tool call run, in order.
        context_tokens: Exact size of the messages sent, per round (reply
            priming included, tool schemas not: see ``tools_tokens``).
        tools_tokens: Estimate of the tool schemas, kept out of every round's budget.
        usage: Token and cost totals of the turn's model calls.
        message_ids: Ids of the messages this turn stored, in order (user
            message first, final answer last when one was stored).
        degraded: What did not go as normal (model ignored the last round,
            empty answer, dropped tool rounds, degraded prompt...).
        finish_reason: The last answer's finish reason.

    """

    answer: str
    rounds: int
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    context_tokens: list[int] = field(default_factory=list)
    tools_tokens: int = 0
    usage: TurnUsage = field(default_factory=TurnUsage)
    message_ids: list[int] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    finish_reason: str | None = None


@dataclass(slots=True)
class _Turn:
    """Accumulates a turn as it runs (turned into a frozen TurnResult at the end)."""

    records: list[ToolCallRecord] = field(default_factory=list)
    context_tokens: list[int] = field(default_factory=list)
    usage: TurnUsage = field(default_factory=TurnUsage)
    message_ids: list[int] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.degraded:
            self.degraded.append(text)
            logger.warning("chat turn degraded: %s", text)


class TurnOptions(TypedDict, total=False):
    """How one turn runs: the keyword arguments of :func:`run_turn` and its async twins.

    Attributes:
        budget: Tokens for prompt, tool schemas and answer together (required).
        system: The caller's system prompt.
        model: Model name for token counting (default: the client's model).
        reserve: Tokens kept free for the answer (default :data:`DEFAULT_RESERVE`).
        tools: "all" registered tools (default), a list of tool names, or None for none.
        max_rounds: Most model calls (1 to :data:`MAX_ROUNDS`, default
            :data:`DEFAULT_MAX_ROUNDS`); the last one offers no tools, so 1
            means a plain answer.
        store_steps: Store the assistant tool calls and tool results in the
            history (True, the default), or keep them in this turn's prompts only.
        tool_prompt: Append :data:`HISTORY_TOOLS_PROMPT` to ``system`` when tools
            are offered (default True).
        max_result_tokens: Cap of each tool result (default: a share of the
            prompt room, see :data:`RESULT_SHARE`).
        record_usage: Record each model call's usage for the session's scope
            (default True).
        retry: This turn retries one that failed: when the newest stored user
            message is ``user_message`` and no answer follows it (only whole
            tool rounds may), it is reused instead of stored again, so the
            history holds the question once. Otherwise the message is stored
            as usual. Default False.

    """

    budget: Required[int]
    system: str | None
    model: str | None
    reserve: int
    tools: ToolChoice
    max_rounds: int
    store_steps: bool
    tool_prompt: bool
    max_result_tokens: int | None
    record_usage: bool
    retry: bool


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call a turn needs: the messages to send and the tools offered (None: none)."""

    messages: list[JSON]
    tools: list[JSON] | None


#: A turn as a generator: it yields the model calls it needs, is sent each
#: answer, and returns the :class:`TurnResult`. Every store access happens
#: inside it; the drivers (:func:`run_turn`, :func:`engram.chat.arun_turn`,
#: :func:`engram.chat.stream_turn`) only call the model.
TurnSteps = Generator[ModelCall, "LLMResult", TurnResult]


def run_turn(
    session: Session, client: LLMClient, user_message: str, **options: Unpack[TurnOptions]
) -> TurnResult:
    """Store ``user_message``, let the model call tools for a few rounds, store its answer.

    Args:
        session: The conversation; every tool call is confined to it and its scope.
        client: The model to talk to.
        user_message: The user's text.
        **options: See :class:`TurnOptions`; ``budget`` is required.

    Returns:
        The answer and an account of the turn.

    Raises:
        ConfigError: a bad argument, an unknown tool name, or a budget too
            small for the tool schemas; nothing is stored then.
        InvalidMessage: ``user_message`` cannot be stored; nothing is stored.
        LLMError: the model failed (after the client's retry). The user
            message and any whole tool rounds stay stored; call again with
            ``retry=True`` to go on from them without storing the question twice.

    """
    steps = turn_steps(session, user_message, default_model=client.model, **options)
    step = advance(steps, None)
    while isinstance(step, ModelCall):
        with telemetry.conversation(session.scope, session.id):
            answer = client.chat(step.messages, purpose=PURPOSE, tools=step.tools)
        step = advance(steps, answer)
    return step


def advance(steps: TurnSteps, answer: LLMResult | None) -> ModelCall | TurnResult:
    """Run a turn to its next model call (send it ``answer``, None to start), or to its end."""
    try:
        return next(steps) if answer is None else steps.send(answer)
    except StopIteration as done:
        result: TurnResult = done.value
        return result


def turn_steps(
    session: Session,
    user_message: str,
    *,
    default_model: str,
    budget: int,
    system: str | None = None,
    model: str | None = None,
    reserve: int = DEFAULT_RESERVE,
    tools: ToolChoice = "all",
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    store_steps: bool = True,
    tool_prompt: bool = True,
    max_result_tokens: int | None = None,
    record_usage: bool = True,
    retry: bool = False,
) -> TurnSteps:
    """The logic of one turn, shared by every driver (see :data:`TurnSteps`).

    ``default_model`` counts tokens when ``model`` is not given (the client's
    model); the other arguments are :class:`TurnOptions`. Arguments are
    checked at the first ``next()``, before anything is stored.
    """
    names = _offered(tools, max_rounds)
    counter_model = model or default_model
    counter = counter_for_model(counter_model)
    offered = schemas("openai", names=names) if names else []
    tools_tokens = count_tools(counter, offered)
    room = _room(budget, reserve, tools_tokens)
    if max_result_tokens is not None and max_result_tokens < MIN_RESULT_TOKENS:
        raise ConfigError(
            f"max_result_tokens must be at least {MIN_RESULT_TOKENS}, got {max_result_tokens}"
        )
    prompt = system_prompt(system, tool_prompt and bool(names))
    turn = _Turn()
    asked = _unanswered(session, user_message) if retry else None
    turn.message_ids.append(asked.id if asked else session.add("user", user_message).id)
    steps: list[list[JSON]] = []  # unstored tool rounds (store_steps=False), oldest first
    newest: list[int] = []  # ids of the newest stored tool round
    rounds = 0
    answer: LLMResult | None = None
    while rounds < max_rounds:
        rounds += 1
        ctx, messages, visible = _prompt(
            session, turn, steps, newest, counter, counter_model,
            budget=budget - tools_tokens, reserve=reserve, room=room, system=prompt,
        )  # fmt: skip
        last = rounds == max_rounds or not names
        if not visible:
            # More tool calls could not be shown either: spend no more rounds on them.
            turn.note("tool results did not fit the budget; the model had to answer without them")
            last = True
        sent_tools = None if last else offered
        # Recorded as sent: the unstored tool rounds after the context, the tools offered.
        session.record_prompt(
            ctx, tools=sent_tools, extra=messages[len(ctx.messages) :], via=VIA_CHAT
        )
        answer = yield ModelCall(messages, sent_tools)
        session.answered(answer.usage())
        turn.usage = turn.usage.plus(answer)
        if record_usage:
            _record(session, answer, turn)
        if not answer.tool_calls or last:
            break
        cap = max_result_tokens or result_cap(room, len(answer.tool_calls))
        step = _run_calls(session, answer, rounds, names, cap, counter, turn)
        if store_steps:
            stored = session.add_many(step)  # one transaction: a call never lacks its results
            newest = [m.id for m in stored]
            turn.message_ids.extend(newest)
        else:
            steps.append(step)
    assert answer is not None  # max_rounds >= 1
    if answer.tool_calls:
        turn.note(
            f"the model asked for {len(answer.tool_calls)} tool call(s) in round {rounds}, "
            "which offered no tools; they were not run"
        )
    return _finish(session, answer, rounds, tools_tokens, turn)


# -- set-up -------------------------------------------------------------------------


def _offered(tools: ToolChoice, max_rounds: int) -> list[str]:
    """The names of the tools offered, checked; empty when none are."""
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int):
        raise ConfigError(f"max_rounds must be an integer, got {max_rounds!r}")
    if not 1 <= max_rounds <= MAX_ROUNDS:
        raise ConfigError(f"max_rounds must be between 1 and {MAX_ROUNDS}, got {max_rounds}")
    if tools is None:
        return []
    if tools == "all":
        names = list(TOOLS)
    elif isinstance(tools, str):
        raise ConfigError(f'tools must be "all", a list of tool names or None, got {tools!r}')
    else:
        names = list(dict.fromkeys(tools))  # keep the order, drop repeats
        select(names)  # raises ConfigError naming an unknown tool
    # A single round is the last round: it never offers tools.
    return names if max_rounds > 1 else []


def _room(budget: int, reserve: int, tools_tokens: int) -> int:
    """Tokens left for the prompt messages once the answer and the tool schemas are set aside."""
    for label, value in (("budget", budget), ("reserve", reserve)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{label} must be a non-negative integer, got {value!r}")
    room = budget - reserve - tools_tokens
    if room < MIN_BUDGET:
        raise ConfigError(
            f"budget {budget} leaves {room} tokens for the prompt after the reserve ({reserve}) "
            f"and the tool schemas (about {tools_tokens}); at least {MIN_BUDGET} are needed"
        )
    return room


def system_prompt(system: str | None, with_tools: bool) -> str | None:
    """The caller's system prompt, then :data:`HISTORY_TOOLS_PROMPT` when tools are offered."""
    if not with_tools:
        return system
    if system and system.strip():
        return f"{system.rstrip()}\n\n{HISTORY_TOOLS_PROMPT}"
    return HISTORY_TOOLS_PROMPT


def result_cap(room: int, calls: int) -> int:
    """Cap of each tool result of a round of ``calls`` calls, in a prompt room of ``room``."""
    share = room // (RESULT_SHARE * max(1, calls))
    return max(MIN_RESULT_TOKENS, min(DEFAULT_MAX_RESULT_TOKENS, share))


def _unanswered(session: Session, user_message: str) -> Message | None:
    """The question a failed turn left stored, to be reused by a retry, or None.

    That is the newest user message when it is ``user_message`` and nothing
    but whole tool rounds follows it (no answer was stored).
    """
    before: int | None = None
    for _ in range(RETRY_SCAN_PAGES):
        page = session.extended(MAX_EXTENDED_CONTEXT, before_id=before)
        for message in reversed(page):
            if message.role == "tool" or (message.role == "assistant" and message.tool_calls):
                continue  # a tool round of the failed attempt
            if message.role == "user" and message.content == user_message:
                return message
            return None
        if len(page) < MAX_EXTENDED_CONTEXT:
            return None
        before = page[0].id
    return None


# -- one round ----------------------------------------------------------------------


def _prompt(
    session: Session,
    turn: _Turn,
    steps: list[list[JSON]],
    newest: list[int],
    counter: TokenCounter,
    counter_model: str,
    *,
    budget: int,
    reserve: int,
    room: int,
    system: str | None,
) -> tuple[Context, list[JSON], bool]:
    """The messages of one round: the stored context, then any unstored tool rounds.

    Returns the context too (recorded once the round's tools are known), and
    whether the newest tool round (stored ``newest`` or the last of ``steps``)
    is in the prompt at all.
    """
    had_steps = bool(steps)
    # The stored context keeps at least half the room (and never less than a prompt needs).
    allowed = room - max(MIN_BUDGET, room - room // STEPS_SHARE)
    steps_tokens = fit_steps(steps, counter, allowed, turn.note) if steps else 0
    ctx = session.context(
        budget - steps_tokens, reserve=reserve, system=system, model=counter_model, record=False
    )
    if ctx.degraded:
        turn.note(ctx.degraded)
    messages = list(ctx.messages)
    for step in steps:
        messages.extend(step)
    turn.context_tokens.append(ctx.tokens + steps_tokens)
    shown = set(ctx.message_ids)
    visible = all(i in shown for i in newest) and (bool(steps) or not had_steps)
    return ctx, messages, visible


def _run_calls(
    session: Session,
    answer: LLMResult,
    round_no: int,
    names: list[str],
    cap: int,
    counter: TokenCounter,
    turn: _Turn,
) -> list[JSON]:
    """Run the answer's tool calls; return the assistant message and one result per call."""
    calls: list[JSON] = []
    results: list[JSON] = []
    seen: set[str] = set()
    for index, raw in enumerate(answer.tool_calls[:MAX_CALLS_PER_ROUND]):
        function = raw.get("function")
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        name = name if isinstance(name, str) else ""
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = "" if arguments is None else json.dumps(arguments, ensure_ascii=False)
        call_id = raw.get("id")
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            # Some local servers send no (or repeated) ids; results must name their call.
            call_id = f"call_{round_no}_{index + 1}"
        seen.add(call_id)
        calls.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        )
        text = dispatch(session, name, arguments, max_result_tokens=cap, names=names,
                        counter=counter)  # fmt: skip
        turn.records.append(ToolCallRecord(name, arguments, not is_error(text)))
        results.append({"role": "tool", "content": text, "tool_call_id": call_id})
    if len(answer.tool_calls) > MAX_CALLS_PER_ROUND:
        turn.note(
            f"the model made {len(answer.tool_calls)} tool calls in round {round_no}; only the "
            f"first {MAX_CALLS_PER_ROUND} were run and kept"
        )
    assistant: JSON = {"role": "assistant", "content": answer.text or None, "tool_calls": calls}
    return [assistant, *results]


def _record(session: Session, answer: LLMResult, turn: _Turn) -> None:
    try:
        session.record_usage(answer)
    except StoreError as exc:
        # Accounting must not cost the user the answer.
        turn.note(f"usage of a model call was not recorded: {exc}")


def _finish(
    session: Session, answer: LLMResult, rounds: int, tools_tokens: int, turn: _Turn
) -> TurnResult:
    text = answer.text
    if answer.finish_reason == "length":
        turn.note("the answer was cut at the model's token limit")
    if text.strip():
        try:
            # Stored without tool_calls: a call with no results would be rejected later.
            turn.message_ids.append(session.add("assistant", text).id)
        except InvalidMessage as exc:
            turn.note(f"the answer could not be stored: {exc}")
    else:
        turn.note("the model gave no answer text; no answer was stored")
    return TurnResult(
        answer=text,
        rounds=rounds,
        tool_calls=turn.records,
        context_tokens=turn.context_tokens,
        tools_tokens=tools_tokens,
        usage=turn.usage,
        message_ids=turn.message_ids,
        degraded=turn.degraded,
        finish_reason=answer.finish_reason,
    )
