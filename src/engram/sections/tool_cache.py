"""The tool-result cache of the exchange cycle: its state document and its prompt section.

The cache is keyed by the MD5 of ``"{tool_name}:{json.dumps(params,
sort_keys=True)}"``; lifetimes are counted in exchanges. The document is the
session's ``"tool_cache"`` state, which also holds the exchange counters and
the one-time injection flag (see :mod:`engram.exchanges` for the API that
writes it). Policies with an exchange window show the cache as a section.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engram.context import Section
from engram.errors import CorruptedData, StoreError
from engram.models import JSON
from engram.policy import Policy
from engram.store import Store

#: ``kind`` of the state document.
TOOL_CACHE_KIND = "tool_cache"
#: Metadata key that tags the messages of the exchange API.
EXCHANGE_KEY = "exchange"
QUESTION, STEP, ANSWER, INJECTION = "question", "step", "answer", "injection"
#: Title of the prompt section that lists cached tool results.
CACHE_TITLE = "CACHED TOOL RESULTS"


def cache_key(tool_name: str, parameters: Mapping[str, Any]) -> str:
    """The key: MD5 of ``tool_name:`` and the parameters as sorted JSON."""
    params_json = json.dumps(parameters, sort_keys=True)
    return hashlib.md5(f"{tool_name}:{params_json}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One cached tool result."""

    key: str
    tool_name: str
    parameters: JSON
    result: str
    remaining_duration: int
    original_duration: int
    call_id: str | None
    cached_at: float

    def to_dict(self) -> JSON:
        """JSON-ready form (without the key, which indexes it)."""
        return {
            "tool_name": self.tool_name,
            "parameters": self.parameters,
            "result": self.result,
            "remaining_duration": self.remaining_duration,
            "original_duration": self.original_duration,
            "call_id": self.call_id,
            "cached_at": self.cached_at,
        }


@dataclass(frozen=True, slots=True)
class ExchangeState:
    """The ``tool_cache`` document: cache entries, counters, the open exchange, the flag."""

    entries: tuple[CacheEntry, ...] = ()
    exchanges: int = 0
    current_question_id: int | None = None
    last_answer_id: int | None = None
    injection_done: bool = False

    def to_dict(self) -> JSON:
        """JSON-ready document."""
        return {
            "entries": {e.key: e.to_dict() for e in self.entries},
            "exchanges": self.exchanges,
            "current_question_id": self.current_question_id,
            "last_answer_id": self.last_answer_id,
            "screen_injection_done": self.injection_done,
        }

    def entry(self, key: str) -> CacheEntry | None:
        """The entry with that key, if cached."""
        for e in self.entries:
            if e.key == key:
                return e
        return None


def parse_exchange_state(data: Any) -> ExchangeState:
    """Read the document; unusable entries are dropped (a cache miss is always safe)."""
    if not isinstance(data, Mapping):
        return ExchangeState()
    entries: list[CacheEntry] = []
    raw = data.get("entries")
    for key, e in raw.items() if isinstance(raw, Mapping) else []:
        try:
            entries.append(
                CacheEntry(
                    key=str(key),
                    tool_name=str(e["tool_name"]),
                    parameters=dict(e.get("parameters") or {}),
                    result=str(e["result"]),
                    remaining_duration=int(e["remaining_duration"]),
                    original_duration=int(e["original_duration"]),
                    call_id=str(e["call_id"]) if e.get("call_id") is not None else None,
                    cached_at=float(e.get("cached_at", 0.0)),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    entries.sort(key=lambda e: (e.cached_at, e.key))  # stable prompt order on every backend
    return ExchangeState(
        entries=tuple(entries),
        exchanges=_int(data.get("exchanges")),
        current_question_id=_opt_int(data.get("current_question_id")),
        last_answer_id=_opt_int(data.get("last_answer_id")),
        injection_done=data.get("screen_injection_done") is True,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def load_exchange_state(store: Store, scope: str, session: str) -> tuple[ExchangeState, int]:
    """Return the document and its record version (0: never saved)."""
    try:
        record = store.load_state(scope, session, TOOL_CACHE_KIND)
    except CorruptedData:
        raise StoreError(f"tool cache of {scope}/{session} cannot be read") from None
    if record is None:
        return ExchangeState(), 0
    return parse_exchange_state(record.data), record.version


def cache_section(state: ExchangeState) -> Section | None:
    """The cached tool results as a prompt section (None when the cache is empty)."""
    if not state.entries:
        return None
    lines = [
        f"{e.tool_name}({json.dumps(e.parameters, sort_keys=True, ensure_ascii=False)}):"
        f"\n{e.result}"
        for e in state.entries
    ]
    return Section(CACHE_TITLE, "\n\n".join(lines))


class ToolCacheSection:
    """Shows the cached tool results (policies with an exchange window)."""

    name = "tool_cache"

    def applies(self, policy: Policy) -> bool:
        """Exchange-window policies keep a tool cache."""
        return policy.max_exchanges is not None

    def sections(self, store: Store, scope: str, session: str) -> list[Section]:
        """The cache section, when the cache holds anything."""
        state, version = load_exchange_state(store, scope, session)
        section = cache_section(state)
        return [section.from_state(TOOL_CACHE_KIND, version)] if section is not None else []
