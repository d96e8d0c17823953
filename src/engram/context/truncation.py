"""Head-and-tail views: how the current turn and the system prompt are cut to fit.

Stored messages are never changed; only what the prompt shows is cut, with a
marker saying how much was shown and where the whole message is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engram.context.costing import Costing
from engram.context.rows import Stored
from engram.errors import ConfigError
from engram.tokens import REPLY_PRIMING, count_message

#: Content tokens each message of the current turn keeps before sections are dropped.
MIN_VIEW_TOKENS = 32


@dataclass(slots=True)
class Shown:
    """A stored message as it will be shown."""

    message: Stored
    content: str
    cost: int
    truncated: bool = False


def _view(text: str, keep: int, marker: str) -> str:
    head, tail = (keep + 1) // 2, keep // 2
    return text[:head] + "\n" + marker + "\n" + (text[len(text) - tail :] if tail else "")


def truncate(
    costing: Costing, text: str, allowance: int, total: int, marker: Callable[[int], str]
) -> str:
    """Return the longest head-and-tail view of ``text`` whose count fits ``allowance``.

    ``marker(shown)`` says what was cut; if even the marker does not fit, a
    shorter one is used, and as a last resort the empty string.
    """
    markers = (marker, lambda shown: "[... truncated by Engram ...]", lambda shown: "[...]")
    for make in markers:
        if costing.text(make(total)) > allowance:
            continue
        # Exponential then binary search on characters kept: each probe counts
        # only the view (bounded by the allowance), never the whole text.
        n = len(text)

        def fits(keep: int, make: Callable[[int], str] = make) -> bool:
            return costing.text(_view(text, keep, make(total))) <= allowance

        lo, probe = 0, 8
        while probe < n and fits(probe):
            lo, probe = probe, probe * 2
        hi = min(probe, n - 1)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        keep = lo
        for _ in range(64):  # the real "shown" number can differ from the placeholder
            head, tail = (keep + 1) // 2, keep // 2
            shown = costing.text(text[:head]) + (costing.text(text[n - tail :]) if tail else 0)
            view = _view(text, keep, make(shown)) if keep else make(shown)
            if costing.text(view) <= allowance:
                return view
            if keep == 0:
                break
            keep = max(0, keep - max(1, keep // 16))
    return ""


def _message_marker(m: Stored, total: int) -> Callable[[int], str]:
    images = sum(1 for part in m.parts or () if part.get("type") == "image_url")
    left_out = f" ({images} image(s) left out)" if images else ""

    def marker(shown: int) -> str:
        return (
            f"[... truncated by Engram: {shown} of {total} tokens shown{left_out}; "
            f"full message id={m.id} is stored ...]"
        )

    return marker


def _system_marker(total: int) -> Callable[[int], str]:
    def marker(shown: int) -> str:
        return f"[... system prompt truncated by Engram: {shown} of {total} tokens shown ...]"

    return marker


def squeeze(costing: Costing, shown: list[Shown], allowance: int) -> None:
    """Cut the texts of ``shown`` (in place) so their total fits ``allowance``.

    Water-filling: every message keeps up to the same number of content
    tokens, the largest that fits; smaller messages stay whole. The caller
    guarantees that the fixed parts (messages with empty content) fit.
    """
    if sum(s.cost for s in shown) <= allowance:
        return
    fixed = [costing.fixed(s.message) for s in shown]
    content = [max(0, s.cost - f) for s, f in zip(shown, fixed, strict=True)]
    base = sum(fixed)
    lo, hi = 0, max(content, default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if base + sum(min(c, mid) for c in content) <= allowance:
            lo = mid
        else:
            hi = mid - 1
    cap = lo
    originals = [(s.content, s.cost) for s in shown]
    for _ in range(32):
        for s, (text, cost), c in zip(shown, originals, content, strict=True):
            if c <= cap:
                s.content, s.cost, s.truncated = text, cost, False
                continue
            view = truncate(costing, text, cap, c, _message_marker(s.message, c))
            s.content, s.cost, s.truncated = view, costing.message(s.message, view), True
        if sum(s.cost for s in shown) <= allowance or cap == 0:
            return
        cap = max(0, cap * 7 // 8 - 1)  # custom counters need not be additive


def min_cost(costing: Costing, shown: list[Shown]) -> int:
    """Return what ``shown`` costs with every text cut to at most MIN_VIEW_TOKENS."""
    total = 0
    for s in shown:
        fixed = costing.fixed(s.message)
        total += fixed + min(max(0, s.cost - fixed), MIN_VIEW_TOKENS)
    return total


def fit_degraded_turn(
    costing: Costing, turn: list[Shown], avail: int
) -> tuple[list[Shown], int, tuple[int, ...]]:
    """Keep the user message and the newest messages whose cut-down size fits.

    Only used when the whole current turn cannot fit even cut down; the
    messages between the user message and the kept ones are left out.
    """
    user, rest = turn[0], turn[1:]
    need = min_cost(costing, [user])
    if costing.fixed(user.message) > avail:
        raise ConfigError(
            f"budget - reserve ({avail + REPLY_PRIMING} tokens) cannot hold even the role "
            f"and name of the newest user message (id={user.message.id})"
        )
    need = min(need, avail)
    # Walk back by whole tool groups: a tool result is kept only with its call.
    kept: list[Shown] = []
    group: list[Shown] = []
    for s in reversed(rest):
        group.insert(0, s)
        if s.message.role == "tool":
            continue
        cost = min_cost(costing, group)
        if need + cost > avail:
            break
        need += cost
        kept[:0] = group
        group = []
    dropped = tuple(s.message.id for s in rest[: len(rest) - len(kept)])
    return [user, *kept], need, dropped


def truncate_system(costing: Costing, text: str, allowance: int) -> tuple[str | None, int]:
    """Cut the system prompt to fit ``allowance`` tokens as a message (None: nothing fits)."""
    fixed = costing.system("")
    if allowance - fixed <= 0:
        return None, 0
    total = costing.text(text)
    view = truncate(costing, text, allowance - fixed, total, _system_marker(total))
    if not view:
        return None, 0
    return view, count_message(costing.counter, "system", view)
