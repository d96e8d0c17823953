"""How much of each prompt a provider's prompt cache could reuse, and what that saves.

Providers bill a prompt prefix they saw recently at a fraction of the input
price. What counts is a *byte-identical prefix*: the cacheable part of a turn's
prompt is the longest prefix it shares with the previous turn's prompt, in
tokens. :class:`PrefixMeter` measures it turn by turn:

* identical leading messages count whole (their exact o200k size, chat
  overhead included);
* in the first message that differs, the shared prefix of its content's
  tokens counts too when role and name are the same (the message header
  before the content is then identical as well);
* OpenAI bills the cached part in 128-token steps from 1,024 identical leading
  tokens (``openai_cached``); the raw share is reported as well.

Cost uses gpt-4o-mini's published prices: input $0.15 per million tokens,
cached input $0.075 (half price).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.tokens import count_messages, get_encoding, storage_counter

#: OpenAI caches from this many identical leading tokens, in steps of ``OPENAI_STEP``.
OPENAI_MIN_PREFIX = 1024
OPENAI_STEP = 128
#: gpt-4o-mini, USD per million input tokens: normal and cached.
INPUT_PER_M = 0.15
CACHED_INPUT_PER_M = 0.075
#: Tokens of a message header before its content (start marker, role).
HEADER_TOKENS = 2


def openai_cached(prefix_tokens: int) -> int:
    """Tokens OpenAI bills as cached for an identical prefix of ``prefix_tokens``."""
    if prefix_tokens < OPENAI_MIN_PREFIX:
        return 0
    return prefix_tokens // OPENAI_STEP * OPENAI_STEP


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else str(content or "")


def _header(message: Mapping[str, Any]) -> tuple[Any, ...]:
    return (message.get("role"), message.get("name"))


def shared_prefix_tokens(
    previous: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]
) -> int:
    """Tokens at the start of ``current`` that are identical to the start of ``previous``."""
    counter = storage_counter()
    same = 0
    while same < min(len(previous), len(current)) and previous[same] == current[same]:
        same += 1
    tokens = count_messages(counter, current[:same]) - count_messages(counter, [])
    if same < min(len(previous), len(current)) and _header(previous[same]) == _header(
        current[same]
    ):
        encoding = get_encoding("o200k_base")
        old = encoding.encode_ordinary(_content(previous[same]))
        new = encoding.encode_ordinary(_content(current[same]))
        common = 0
        for a, b in zip(old, new, strict=False):
            if a != b:
                break
            common += 1
        tokens += HEADER_TOKENS + common
    return tokens


@dataclass
class PrefixMeter:
    """Feed each turn's prompt; it keeps the cacheable tokens of every turn."""

    sent: list[int] = field(default_factory=list)
    cacheable: list[int] = field(default_factory=list)
    _previous: list[dict[str, Any]] | None = None

    def add(self, messages: Sequence[Mapping[str, Any]], tokens: int) -> int:
        """Record one prompt of ``tokens`` tokens; return its cacheable prefix in tokens."""
        current = [dict(m) for m in messages]
        shared = (
            0
            if self._previous is None
            else min(tokens, shared_prefix_tokens(self._previous, current))
        )
        self._previous = current
        self.sent.append(tokens)
        self.cacheable.append(shared)
        return shared

    def summary(self, quiet: Sequence[int] | None = None) -> dict[str, Any]:
        """Totals over every turn, and over the turns listed in ``quiet`` (between compactions)."""
        turns = range(len(self.sent)) if quiet is None else quiet
        sent = sum(self.sent[i] for i in turns)
        cacheable = sum(self.cacheable[i] for i in turns)
        billed_cached = sum(openai_cached(self.cacheable[i]) for i in turns)
        cost_plain = sent * INPUT_PER_M / 1e6
        cost_cached = (
            (sent - billed_cached) * INPUT_PER_M + billed_cached * CACHED_INPUT_PER_M
        ) / 1e6
        per_1000 = 1000 / len(turns) if len(turns) else 0.0
        return {
            "turns": len(turns),
            "tokens_sent": sent,
            "cacheable_tokens": cacheable,
            "cacheable_pct": round(100 * cacheable / sent, 2) if sent else 0.0,
            "openai_cached_tokens": billed_cached,
            "openai_cached_pct": round(100 * billed_cached / sent, 2) if sent else 0.0,
            "usd_per_1000_turns_no_cache": round(cost_plain * per_1000, 4),
            "usd_per_1000_turns_with_cache": round(cost_cached * per_1000, 4),
        }


def plot(presets: Mapping[str, Mapping[str, Any]], path: Any) -> None:
    """Two panels: the cacheable share per preset, and the cost per 1,000 turns."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name, r in presets.items() if "prompt_cache" in r]
    every = [presets[n]["prompt_cache"]["all_turns"] for n in names]
    between = [presets[n]["prompt_cache"]["between_compactions"] for n in names]
    fig, (share, cost) = plt.subplots(1, 2, figsize=(14, 5.5), constrained_layout=True)
    x = range(len(names))
    width = 0.38
    share.bar(
        [i - width / 2 for i in x], [e["cacheable_pct"] for e in every], width, label="all turns"
    )
    share.bar(
        [i + width / 2 for i in x],
        [b["cacheable_pct"] for b in between],
        width,
        label="between compactions",
    )
    share.axhline(80, color="black", linestyle="--", linewidth=1, label="80% target")
    share.set_xticks(list(x), names, rotation=20)
    share.set_ylabel("% of prompt tokens identical to the previous prompt's start")
    share.set_ylim(0, 100)
    share.set_title("Cacheable share of each prompt")
    share.legend(fontsize=9)
    cost.bar(
        [i - width / 2 for i in x],
        [e["usd_per_1000_turns_no_cache"] for e in every],
        width,
        label="no prompt cache",
    )
    cost.bar(
        [i + width / 2 for i in x],
        [e["usd_per_1000_turns_with_cache"] for e in every],
        width,
        label="OpenAI prompt cache",
    )
    cost.set_xticks(list(x), names, rotation=20)
    cost.set_ylabel("USD of input per 1,000 turns (gpt-4o-mini)")
    cost.set_yscale("log")
    cost.set_title("Input cost per 1,000 turns")
    cost.legend(fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
