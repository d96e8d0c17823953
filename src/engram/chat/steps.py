"""Unstored tool rounds (``run_turn(..., store_steps=False)``) fitted into a prompt.

Such rounds live only in the turn's prompts, so the chat loop must make them
fit the room left next to the stored context: whole rounds go first, oldest
first (a call is never split from its results), then the newest round's
results are cut with a marker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engram.models import JSON
from engram.tokens import TokenCounter, count_chat_message, longest_prefix

__all__ = ["CUT_MARKER", "fit_steps"]

CUT_MARKER = " …[cut to fit the prompt]"


def fit_steps(
    steps: list[list[JSON]], counter: TokenCounter, allowed: int, note: Callable[[str], None]
) -> int:
    """Shrink the unstored rounds to ``allowed`` tokens (in place); return their size.

    Whole rounds go first, oldest first, so a call is never split from its
    results; then the newest round's results are cut; if even its call does
    not fit, it goes too.
    """
    total = sum(_size(counter, step) for step in steps)
    while total > allowed and len(steps) > 1:
        total -= _size(counter, steps.pop(0))
        note("older tool rounds of this turn were dropped from the prompt to fit the budget")
    if total <= allowed:
        return total
    step = steps[0]
    call_cost = count_chat_message(counter, step[0])
    results = step[1:]
    overhead = sum(count_chat_message(counter, {**m, "content": ""}) for m in results)
    spare = allowed - call_cost - overhead - len(results) * counter.count_text(CUT_MARKER)
    if spare < len(results):
        steps.clear()
        note("a tool round was too large for the budget and was left out of the prompt")
        return 0
    share = spare // len(results)
    for message in results:
        message["content"] = _cut(counter, str(message["content"]), share)
    note("tool results were cut to fit the budget")
    total = _size(counter, step)
    if total > allowed:  # rounding of an approximate counter: never overflow
        steps.clear()
        note("a tool round was too large for the budget and was left out of the prompt")
        return 0
    return total


def _size(counter: TokenCounter, step: Sequence[JSON]) -> int:
    return sum(count_chat_message(counter, m) for m in step)


def _cut(counter: TokenCounter, text: str, tokens: int) -> str:
    """``text`` if it has at most ``tokens`` tokens, else its longest prefix that does, marked.

    The marker comes on top of ``tokens`` (the caller set its cost aside).
    """
    if counter.count_text(text) <= tokens:
        return text
    limit = tokens + counter.count_text(CUT_MARKER)
    # Counted with the marker: tokens can merge across the join.
    kept = longest_prefix(
        text, lambda prefix: counter.count_text(prefix + CUT_MARKER) <= limit, tokens
    )
    return text[:kept] + CUT_MARKER
