"""Policies: the numbers that govern what a session's model sees, and named presets.

A :class:`Policy` is a frozen value. The context builder reads the window
fields (``max_messages``, ``max_window_tokens``, ``max_exchanges``) and the
defaults for budget and reserve; the compaction planner reads the trigger
and summary fields. Every field is optional (``None`` = no limit) except the
name, so a policy says only what it means.

Presets:

=================  ========  ==================================================
``default``        -         no window limit: the newest messages that fit
``lean``           chat bot  last 12 messages, at most 20K tokens of them
``full_recall``    chat bot  everything up to 55K tokens; summarize past 55K
``summary_buffer`` writing  summarize over 3,000 tokens, keep the newest 2,500
``agent_state``    agent     over 50 entries keep 30; over 100K tokens fold half
``exchanges``      support   10 exchanges; answers > 750 B shown as 500 B views;
                             summary > 4 KB compressed to 3 KB
=================  ========  ==================================================

Policies round-trip through JSON (:meth:`Policy.to_dict` / :meth:`Policy.from_dict`)
so a session can store its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engram.errors import ConfigError

# Fields that must be positive integers when set (None = no limit / not used).
_OPTIONAL_POSITIVE = (
    "max_messages",
    "max_window_tokens",
    "max_exchanges",
    "summarize_over_tokens",
    "keep_tokens",
    "max_history_messages",
    "keep_messages",
    "fold_over_tokens",
    "answer_view_bytes",
    "answer_over_bytes",
    "summary_max_bytes",
    "summary_target_bytes",
    "cache_chunk_messages",
)

#: Fields holding integers (a whole float such as 20.0 is read as 20).
_INTEGER_FIELDS = frozenset({*_OPTIONAL_POSITIVE, "default_budget", "default_reserve"})

# (smaller, larger): when both are set the first must be below the second.
_ORDERED_PAIRS = (
    ("keep_tokens", "summarize_over_tokens"),
    ("keep_messages", "max_history_messages"),
    ("answer_view_bytes", "answer_over_bytes"),
    ("summary_target_bytes", "summary_max_bytes"),
)

#: Budget used when neither the caller nor the policy gives one.
DEFAULT_BUDGET = 8000
#: Bounds of ``Policy.cache_chunk``.
MIN_CACHE_CHUNK = 0.05
MAX_CACHE_CHUNK = 0.5


@dataclass(frozen=True, slots=True)
class Policy:
    """The numbers that govern one session's context and compaction.

    Attributes:
        name: Preset name, or any label for a custom policy.
        max_messages: Window limit by count of stored messages.
        max_window_tokens: Window limit by tokens of stored messages (system
            prompt and sections not included).
        max_exchanges: Window limit by exchanges (a user message and
            everything after it up to the next user message).
        default_budget: Prompt budget in tokens when the caller gives none.
        default_reserve: Tokens kept free for the answer when the caller gives none.
        summarize_over_tokens: Compaction: summarize when unsummarized
            history exceeds this many tokens.
        keep_tokens: Compaction: newest tokens kept verbatim after summarizing.
        max_history_messages: Compaction: fold when unsummarized history has
            more messages than this.
        keep_messages: Compaction: newest messages kept after such a fold.
        fold_over_tokens: Compaction: fold the oldest half when unsummarized
            history exceeds this many tokens.
        answer_over_bytes: Answers longer than this (UTF-8 bytes) are shown as views.
        answer_view_bytes: Size of such a view.
        summary_max_bytes: Summary longer than this is compressed.
        summary_target_bytes: Size the summary is compressed to.
        sync_compaction: Compact before building the context (blocking), not
            in the background.
        cache_window: Keep the prompt's prefix identical from turn to turn so
            providers' prompt caches can reuse it: the window's oldest message
            moves in chunks instead of one message per turn. A window bound by
            tokens (the budget or ``max_window_tokens``) then holds between
            ``1 - cache_chunk`` and all of its room; a window bound by
            ``max_messages`` holds between that many and that many plus
            ``cache_chunk_messages`` (budget permitting). Off: the window always starts at the
            oldest message that fits.
        citations: Show in the prompt the ids of the messages each summary paragraph
            and important-data item came from (``[#112-#140]``); they are stored
            either way.
        cache_chunk: Share of a token-bound window's room by which its start
            moves at once (0.05 to 0.5).
        cache_chunk_messages: Messages by which the start of a window bound
            by ``max_messages`` moves at once (None: ``max_messages``); larger
            means a longer cached prefix and more tokens sent.

    """

    name: str = "default"
    max_messages: int | None = None
    max_window_tokens: int | None = None
    max_exchanges: int | None = None
    default_budget: int = DEFAULT_BUDGET
    default_reserve: int = 0
    summarize_over_tokens: int | None = None
    keep_tokens: int | None = None
    max_history_messages: int | None = None
    keep_messages: int | None = None
    fold_over_tokens: int | None = None
    answer_over_bytes: int | None = None
    answer_view_bytes: int | None = None
    summary_max_bytes: int | None = None
    summary_target_bytes: int | None = None
    sync_compaction: bool = False
    cache_window: bool = True
    cache_chunk: float = 0.3
    cache_chunk_messages: int | None = None
    citations: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"policy name must be a non-empty string, got {self.name!r}")
        for field_name in _OPTIONAL_POSITIVE:
            value = getattr(self, field_name)
            if value is not None and (not _is_int(value) or value <= 0):
                raise ConfigError(
                    f"policy {self.name!r}: {field_name} must be a positive integer or null, "
                    f"got {value!r}"
                )
        if not _is_int(self.default_budget) or self.default_budget <= 0:
            raise ConfigError(
                f"policy {self.name!r}: default_budget must be a positive integer, "
                f"got {self.default_budget!r}"
            )
        if not _is_int(self.default_reserve) or not 0 <= self.default_reserve:
            raise ConfigError(
                f"policy {self.name!r}: default_reserve must be a non-negative integer, "
                f"got {self.default_reserve!r}"
            )
        if self.default_reserve >= self.default_budget:
            raise ConfigError(
                f"policy {self.name!r}: default_reserve ({self.default_reserve}) must be "
                f"below default_budget ({self.default_budget})"
            )
        if not isinstance(self.sync_compaction, bool):
            raise ConfigError(
                f"policy {self.name!r}: sync_compaction must be true or false, "
                f"got {self.sync_compaction!r}"
            )
        for flag in ("cache_window", "citations"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(
                    f"policy {self.name!r}: {flag} must be true or false, "
                    f"got {getattr(self, flag)!r}"
                )
        chunk = self.cache_chunk
        if (
            isinstance(chunk, bool)
            or not isinstance(chunk, int | float)
            or not (MIN_CACHE_CHUNK <= chunk <= MAX_CACHE_CHUNK)
        ):
            raise ConfigError(
                f"policy {self.name!r}: cache_chunk must be a number from {MIN_CACHE_CHUNK} "
                f"to {MAX_CACHE_CHUNK}, got {chunk!r}"
            )
        for small, large in _ORDERED_PAIRS:
            low, high = getattr(self, small), getattr(self, large)
            if low is not None and high is not None and low >= high:
                raise ConfigError(
                    f"policy {self.name!r}: {small} ({low}) must be below {large} ({high})"
                )

    @property
    def compacts(self) -> bool:
        """Whether this policy ever compacts (a compaction trigger is set)."""
        return (
            self.summarize_over_tokens is not None
            or self.max_history_messages is not None
            or self.max_exchanges is not None
            or self.fold_over_tokens is not None
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON-ready data (``from_dict`` reads it back)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Read a policy from :meth:`to_dict` output; unknown keys are refused.

        Keys that are missing take the dataclass defaults, so ``{"name": "x",
        "max_messages": 20}`` is a complete policy.

        Raises:
            ConfigError: ``data`` is not a mapping, has unknown keys or bad values.

        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"a policy must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ConfigError(f"unknown policy field(s) {unknown}; known: {sorted(known)}")
        return cls(**{key: _integral(key, value) for key, value in data.items()})

    def replace(self, **changes: Any) -> Policy:
        """Return a copy with some fields changed (validated like any policy)."""
        unknown = sorted(key for key in changes if key not in self.to_dict())
        if unknown:
            raise ConfigError(f"unknown policy field(s) {unknown}")
        return dataclasses.replace(self, **changes)


def _integral(field: str, value: Any) -> Any:
    """A whole float of an integer field as the integer: JSON does not tell 20.0 from 20."""
    if field in _INTEGER_FIELDS and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_int(value: object) -> bool:
    # bool is an int subclass; True as a message limit is a bug, not 1.
    return isinstance(value, int) and not isinstance(value, bool)


#: Named presets, one per seed behaviour (see the module docstring).
#: A policy name that means "the session's own" where another policy may be tried.
CURRENT = "current"

PRESETS: dict[str, Policy] = {
    policy.name: policy
    for policy in (
        Policy(name="default"),
        # Chat bot: "last 12 messages (~20K tokens)"; system 2K + task 2K + 20K ~ 25K total.
        Policy(name="lean", max_messages=12, max_window_tokens=20_000, default_budget=25_000),
        # Chat bot, full recall: all messages up to 55K; past it the oldest are summarized.
        # keep_tokens leaves headroom so compaction does not run again on the next turn.
        Policy(
            name="full_recall",
            max_window_tokens=55_000,
            summarize_over_tokens=55_000,
            keep_tokens=40_000,
            default_budget=60_000,
        ),
        # Writing assistant: summarize over 3,000 tokens, keep the newest ~2,500, synchronously.
        # The window cap equals the trigger, so a pending compaction never overflows it.
        Policy(
            name="summary_buffer",
            max_window_tokens=3_000,
            summarize_over_tokens=3_000,
            keep_tokens=2_500,
            sync_compaction=True,
        ),
        # Agent runtime: > 50 entries keep 30; > 100K tokens fold the oldest half.
        Policy(
            name="agent_state",
            max_messages=50,
            max_window_tokens=100_000,
            max_history_messages=50,
            keep_messages=30,
            fold_over_tokens=100_000,
            default_budget=110_000,
        ),
        # Support agent: 10 exchanges; answers > 750 B as 500 B views; summary > 4 KB -> 3 KB.
        Policy(
            name="exchanges",
            max_exchanges=10,
            answer_over_bytes=750,
            answer_view_bytes=500,
            summary_max_bytes=4096,
            summary_target_bytes=3072,
            default_budget=16_000,
            # Its rows are filtered per exchange: positions in the history would not hold.
            cache_window=False,
        ),
    )
}


def get_policy(spec: str | Policy | Mapping[str, Any] | None = None) -> Policy:
    """Resolve a preset name, a policy, or a policy dict into a :class:`Policy`.

    ``None`` gives the ``default`` preset. A dict may name a preset to start
    from (``{"name": "lean", "max_messages": 20}`` is ``lean`` with 20
    messages); a dict with a name that is not a preset is a custom policy.

    Raises:
        ConfigError: unknown preset name, or invalid fields (its ``field`` is ``policy``).

    """
    try:
        return _resolve(spec)
    except ConfigError as exc:
        exc.field = exc.field or "policy"  # the argument (and request field) at fault
        raise


def _resolve(spec: str | Policy | Mapping[str, Any] | None) -> Policy:
    if spec is None:
        return PRESETS["default"]
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, str):
        try:
            return PRESETS[spec]
        except KeyError:
            raise ConfigError(
                f"unknown policy {spec!r}; presets: {', '.join(sorted(PRESETS))}"
            ) from None
    if isinstance(spec, Mapping):
        base = PRESETS.get(str(spec.get("name", "")))
        if base is None:
            return Policy.from_dict(spec)
        merged = base.to_dict()
        unknown = sorted(str(key) for key in spec if key not in merged)
        if unknown:
            raise ConfigError(f"unknown policy field(s) {unknown}; known: {sorted(merged)}")
        merged.update(spec)
        return Policy.from_dict(merged)
    raise ConfigError(f"a policy is a preset name, a Policy or a dict, got {type(spec).__name__}")


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema of a policy as the HTTP API takes it: a preset name or an object.

    Each field's type and range as :class:`Policy` checks them; what one field
    requires of another (``default_reserve`` below ``default_budget``, the
    ordered pairs such as ``keep_tokens`` below ``summarize_over_tokens``) is
    beyond what the schema says.
    """
    positive = {"type": ["integer", "null"], "minimum": 1}
    fields: dict[str, Any] = dict.fromkeys(_OPTIONAL_POSITIVE, positive)
    fields |= {
        "name": {"type": "string", "minLength": 1, "pattern": r"\S"},
        "default_budget": {"type": "integer", "minimum": 1},
        "default_reserve": {"type": "integer", "minimum": 0},
        "sync_compaction": {"type": "boolean"},
        "cache_window": {"type": "boolean"},
        "citations": {"type": "boolean"},
        "cache_chunk": {"type": "number", "minimum": MIN_CACHE_CHUNK, "maximum": MAX_CACHE_CHUNK},
    }
    preset = {"type": "string", "enum": sorted(PRESETS)}
    custom = {"type": "object", "properties": fields, "additionalProperties": False}
    return {"anyOf": [preset, custom]}
