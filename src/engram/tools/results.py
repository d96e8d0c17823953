"""Tool results as compact JSON, cut to a token cap the model can afford.

A tool result goes back into the prompt, so an unbounded one (fifty long
messages, one pasted log file) could blow the very budget Engram keeps. The
cap is counted exactly with :func:`engram.tokens.storage_counter` on the JSON
text the model will read:

1. whole items are dropped from the tool's result list (from the end for
   ranked or chronological lists, from the start for backward paging) and the
   result says ``"truncated": true, "omitted": N`` (a ``tokens`` field, a
   tool's report of its own size, is counted again);
2. if one item alone is still too large, its text is cut and a marker says how
   to read on (``get_message_by_id`` with ``message_id`` and ``offset``).
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

from engram.errors import ConfigError
from engram.models import JSON
from engram.tokens import TokenCounter, longest_prefix, storage_counter

#: Default cap, in tokens, of one tool result.
DEFAULT_MAX_RESULT_TOKENS = 4000
#: Smallest cap accepted: below it not even an error message and a marker fit.
MIN_RESULT_TOKENS = 200
#: Fields whose text may be cut when a single item is too large, in order of preference.
TEXT_FIELDS = ("content", "snippet")
# How many times a cut is re-measured when JSON escaping made it overshoot.
_CUT_ROUNDS = 6


def to_json(payload: Any) -> str:
    """Compact JSON (no ASCII escaping: it costs tokens and tells the model nothing)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


def cap_result(
    payload: JSON,
    *,
    max_tokens: int = DEFAULT_MAX_RESULT_TOKENS,
    items_key: str | None = None,
    drop_from: Literal["start", "end"] = "end",
    cursor_key: str | None = None,
    counter: TokenCounter | None = None,
) -> JSON:
    """``payload`` itself if its JSON fits ``max_tokens``, else a shortened copy.

    Args:
        payload: The tool's result.
        max_tokens: The cap.
        items_key: The list in ``payload`` whose items may be dropped.
        drop_from: Which end of that list loses items first.
        cursor_key: A paging field set to the first kept item's id when items
            are dropped from the start, so paging backwards loses nothing.
        counter: Token counter (default: the exact storage counter).

    Raises:
        ConfigError: ``max_tokens`` is below :data:`MIN_RESULT_TOKENS`.
    """
    if max_tokens < MIN_RESULT_TOKENS:
        raise ConfigError(
            f"max_result_tokens must be at least {MIN_RESULT_TOKENS}, got {max_tokens}"
        )
    count = (counter or storage_counter()).count_text

    def fits(candidate: JSON) -> bool:
        return count(to_json(candidate)) <= max_tokens

    if fits(payload):
        return payload
    items = payload.get(items_key) if items_key else None
    if items_key is None or not isinstance(items, list) or not items:
        return _cut_text(payload, payload, count, max_tokens)
    key: str = items_key
    total = len(items)

    earlier = payload.get("omitted")
    before = earlier if isinstance(earlier, int) else 0  # a tool may have left some out

    def keep(k: int) -> JSON:
        kept = items[:k] if drop_from == "end" else items[total - k :]
        shortened: JSON = {**payload, key: kept, "truncated": True, "omitted": before + total - k}
        if cursor_key and drop_from == "start" and kept and isinstance(kept[0], dict):
            shortened[cursor_key] = kept[0].get("id", shortened.get(cursor_key))
        return shortened

    # The largest k that fits (k = total does not); k = 1 at worst, cut below.
    low, high = 1, total - 1
    best = 1
    while low <= high:
        middle = (low + high) // 2
        if fits(keep(middle)):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    result = keep(best)
    if fits(result):
        return _recount(result, count)
    item = result[key][0]
    if isinstance(item, dict):
        result[key] = [_cut_text(result, item, count, max_tokens, inside=key)]
    return _recount(result, count)


def _recount(result: JSON, count: Any) -> JSON:
    """``result`` with its ``tokens`` field (a tool's report of its own size) made true."""
    if isinstance(result.get("tokens"), int):
        for _ in range(3):  # the field's own digits count too
            result["tokens"] = int(count(to_json(result)))
    return result


def _cut_text(
    outer: JSON, target: JSON, count: Any, max_tokens: int, *, inside: str | None = None
) -> JSON:
    """A copy of ``target`` with its first text field cut so that ``outer`` fits.

    With ``inside``, ``target`` is the single item of ``outer[inside]``;
    otherwise ``target`` is ``outer`` itself. Neither is modified.
    """
    field = next((f for f in TEXT_FIELDS if isinstance(target.get(f), str)), None)
    if field is None:
        return target
    text: str = target[field]
    offset = target.get("offset")
    base = offset if isinstance(offset, int) else 0
    message_id = target.get("id")

    def assemble(kept: int) -> JSON:
        piece = dict(target)
        piece[field] = text[:kept] + _marker(field, message_id, len(text) - kept, base + kept)
        piece[f"{field}_truncated"] = True
        if field == "content" and message_id is not None:
            piece["next_offset"] = base + kept
        return piece

    def measured(piece: JSON) -> int:
        whole = {**outer, inside: [piece]} if inside else piece
        return int(count(to_json(whole)))

    overhead = measured(assemble(0))
    allowed = max_tokens - overhead
    kept = 0
    for _ in range(_CUT_ROUNDS):
        if allowed <= 0:
            kept = 0
            break
        kept = longest_prefix(text, functools.partial(_fits, count, allowed), allowed)
        over = measured(assemble(kept)) - max_tokens
        if over <= 0:
            break
        allowed -= over  # JSON escapes cost more than the raw text: shrink and re-measure
    return assemble(kept)


def _fits(count: Any, tokens: int, text: str) -> bool:
    return bool(count(text) <= tokens)


def _marker(field: str, message_id: Any, remaining: int, next_offset: int) -> str:
    if message_id is None:
        return f" …[{remaining} more characters cut]"
    if field == "content":
        return (
            f" …[{remaining} more characters cut; call get_message_by_id with "
            f"message_id={message_id} and offset={next_offset} to read on]"
        )
    return f" …[cut; get_message_by_id with message_id={message_id} returns the full text]"
