"""The chat loop: one user turn, with as many tool rounds as the model needs (seed 000).

Seed 000's flow, for any OpenAI-compatible model::

    user: "What did we decide about pricing last week?"
      -> store the message, build the lean prompt, call the model with the tools
      -> model calls search_history(query="pricing")
      -> run it for this session, store the call and its result, rebuild the prompt
      -> model answers from the result; the answer is stored

:func:`run_turn` does that for several rounds. Every prompt is rebuilt from
the store by :meth:`engram.Session.context`, so tool results count against
the budget exactly like any other message, and the prompt plus the tool
schemas' estimate plus the reserve always fit the budget (invariant 1). The
last round offers no tools, so the model has to answer (seed 000 follows up
with ``tools=[]``).

Safety: tools run through :func:`engram.tools.dispatch`, bound to the
session, so the model never chooses the session or the scope (invariant 7),
and bad tool names or arguments come back to the model as a structured error
instead of crashing the turn. Failures of the model (:class:`LLMError`,
after the client's one retry) propagate to the caller; by then the user
message is stored, every stored tool round is whole (the assistant call and
its results are written in one transaction) and nothing half-written exists.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple

from engram.context import MIN_BUDGET
from engram.errors import ConfigError, InvalidMessage, StoreError
from engram.models import JSON
from engram.tokens import TokenCounter, count_message, count_tools, counter_for_model
from engram.tools.dispatcher import dispatch
from engram.tools.registry import TOOLS, schemas, select
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

#: Appended to the caller's system prompt when tools are offered (seed 000's
#: SYSTEM_PROMPT, without the names of tools that may not be offered).
HISTORY_TOOLS_PROMPT = (
    "CONTEXT: You see only the most recent messages of this conversation. Older "
    "messages are stored, not shown.\n"
    "HISTORY TOOLS: To read older conversation, use the history tools you are given: "
    "search_history finds past messages by keywords, get_messages_by_date returns the "
    "messages of a day, get_extended_context loads more of the conversation, "
    "get_message_by_id reads one message in full.\n"
    "When the user asks about something that is not in your visible context, USE THE "
    "TOOLS. Don't guess or make up past conversations."
)

ToolChoice = Literal["all"] | Sequence[str] | None
_CUT_MARKER = " …[cut to fit the prompt]"


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


def run_turn(
    session: Session,
    client: LLMClient,
    user_message: str,
    *,
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
) -> TurnResult:
    """Store ``user_message``, let the model call tools for a few rounds, store its answer.

    Args:
        session: The conversation; every tool call is confined to it and its scope.
        client: The model to talk to.
        user_message: The user's text.
        budget: Tokens for prompt, tool schemas and answer together.
        system: The caller's system prompt.
        model: Model name for token counting (default: ``client.model``).
        reserve: Tokens kept free for the answer.
        tools: "all" registered tools, a list of tool names, or None for none.
        max_rounds: Most model calls (1 to :data:`MAX_ROUNDS`); the last one
            offers no tools, so 1 means a plain answer.
        store_steps: Store the assistant tool calls and tool results in the
            history (True), or keep them in this turn's prompts only.
        tool_prompt: Append :data:`HISTORY_TOOLS_PROMPT` to ``system`` when tools
            are offered.
        max_result_tokens: Cap of each tool result (default: a share of the
            prompt room, see :data:`RESULT_SHARE`).
        record_usage: Record each model call's usage for the session's scope.

    Returns:
        The answer and an account of the turn.

    Raises:
        ConfigError: a bad argument, an unknown tool name, or a budget too
            small for the tool schemas; nothing is stored then.
        InvalidMessage: ``user_message`` cannot be stored; nothing is stored.
        LLMError: the model failed (after the client's retry). The user
            message and any whole tool rounds stay stored.

    """
    names = _offered(tools, max_rounds)
    counter_model = model or client.model
    counter = counter_for_model(counter_model)
    offered = schemas("openai", names=names) if names else []
    tools_tokens = count_tools(counter, offered)
    room = _room(budget, reserve, tools_tokens)
    if max_result_tokens is not None and max_result_tokens < MIN_RESULT_TOKENS:
        raise ConfigError(
            f"max_result_tokens must be at least {MIN_RESULT_TOKENS}, got {max_result_tokens}"
        )
    prompt = _system_prompt(system, tool_prompt and bool(names))
    turn = _Turn()
    turn.message_ids.append(session.add("user", user_message).id)
    steps: list[list[JSON]] = []  # unstored tool rounds (store_steps=False), oldest first
    newest: list[int] = []  # ids of the newest stored tool round
    rounds = 0
    answer: LLMResult | None = None
    while rounds < max_rounds:
        rounds += 1
        messages, visible = _prompt(
            session, turn, steps, newest, counter, counter_model,
            budget=budget - tools_tokens, reserve=reserve, room=room, system=prompt,
        )  # fmt: skip
        last = rounds == max_rounds or not names
        if not visible:
            # More tool calls could not be shown either: spend no more rounds on them.
            turn.note("tool results did not fit the budget; the model had to answer without them")
            last = True
        answer = client.chat(messages, purpose=PURPOSE, tools=None if last else offered)
        turn.usage = turn.usage.plus(answer)
        if record_usage:
            _record(session, answer, turn)
        if not answer.tool_calls or last:
            break
        cap = max_result_tokens or _result_cap(room, len(answer.tool_calls))
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


def _system_prompt(system: str | None, with_tools: bool) -> str | None:
    if not with_tools:
        return system
    if system and system.strip():
        return f"{system.rstrip()}\n\n{HISTORY_TOOLS_PROMPT}"
    return HISTORY_TOOLS_PROMPT


def _result_cap(room: int, calls: int) -> int:
    share = room // (RESULT_SHARE * max(1, calls))
    return max(MIN_RESULT_TOKENS, min(DEFAULT_MAX_RESULT_TOKENS, share))


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
) -> tuple[list[JSON], bool]:
    """The messages of one round: the stored context, then any unstored tool rounds.

    Also tells whether the newest tool round (stored ``newest`` or the last
    of ``steps``) is in the prompt at all.
    """
    had_steps = bool(steps)
    # The stored context keeps at least half the room (and never less than a prompt needs).
    allowed = room - max(MIN_BUDGET, room - room // STEPS_SHARE)
    steps_tokens = _fit_steps(steps, counter, allowed, turn) if steps else 0
    ctx = session.context(
        budget - steps_tokens, reserve=reserve, system=system, model=counter_model
    )
    if ctx.degraded:
        turn.note(ctx.degraded)
    messages = list(ctx.messages)
    for step in steps:
        messages.extend(step)
    turn.context_tokens.append(ctx.tokens + steps_tokens)
    shown = set(ctx.message_ids)
    visible = all(i in shown for i in newest) and (bool(steps) or not had_steps)
    return messages, visible


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
        turn.records.append(ToolCallRecord(name, arguments, _ok(text)))
        results.append({"role": "tool", "content": text, "tool_call_id": call_id})
    if len(answer.tool_calls) > MAX_CALLS_PER_ROUND:
        turn.note(
            f"the model made {len(answer.tool_calls)} tool calls in round {round_no}; only the "
            f"first {MAX_CALLS_PER_ROUND} were run and kept"
        )
    assistant: JSON = {"role": "assistant", "content": answer.text or None, "tool_calls": calls}
    return [assistant, *results]


def _ok(text: str) -> bool:
    try:
        decoded = json.loads(text)
    except ValueError:
        return False
    return not (isinstance(decoded, dict) and isinstance(decoded.get("error"), dict))


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


# -- unstored tool rounds (store_steps=False) ---------------------------------------


def _fit_steps(steps: list[list[JSON]], counter: TokenCounter, allowed: int, turn: _Turn) -> int:
    """Shrink the unstored rounds to ``allowed`` tokens (in place); return their size.

    Whole rounds go first, oldest first, so a call is never split from its
    results; then the newest round's results are cut; if even its call does
    not fit, it goes too.
    """
    total = sum(_size(counter, step) for step in steps)
    while total > allowed and len(steps) > 1:
        total -= _size(counter, steps.pop(0))
        turn.note("older tool rounds of this turn were dropped from the prompt to fit the budget")
    if total <= allowed:
        return total
    step = steps[0]
    call_cost = _message_size(counter, step[0])
    results = step[1:]
    overhead = sum(_message_size(counter, {**m, "content": ""}) for m in results)
    spare = allowed - call_cost - overhead - len(results) * counter.count_text(_CUT_MARKER)
    if spare < len(results):
        steps.clear()
        turn.note("a tool round was too large for the budget and was left out of the prompt")
        return 0
    share = spare // len(results)
    for message in results:
        message["content"] = _cut(counter, str(message["content"]), share)
    turn.note("tool results were cut to fit the budget")
    total = _size(counter, step)
    if total > allowed:  # rounding of an approximate counter: never overflow
        steps.clear()
        turn.note("a tool round was too large for the budget and was left out of the prompt")
        return 0
    return total


def _size(counter: TokenCounter, step: Sequence[JSON]) -> int:
    return sum(_message_size(counter, m) for m in step)


def _message_size(counter: TokenCounter, message: JSON) -> int:
    return count_message(
        counter,
        str(message["role"]),
        str(message.get("content") or ""),
        tool_calls=message.get("tool_calls"),
        tool_call_id=message.get("tool_call_id"),
    )


def _cut(counter: TokenCounter, text: str, tokens: int) -> str:
    """``text`` if it has at most ``tokens`` tokens, else its longest prefix that does, marked.

    The marker comes on top of ``tokens`` (the caller set its cost aside).
    """
    if counter.count_text(text) <= tokens:
        return text
    limit = tokens + counter.count_text(_CUT_MARKER)
    # Counted with the marker: tokens can merge across the join.
    low, high = 0, min(len(text), tokens * 16)
    while low < high:
        middle = (low + high + 1) // 2
        if counter.count_text(text[:middle] + _CUT_MARKER) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low] + _CUT_MARKER
