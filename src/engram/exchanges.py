"""The cycle on a session: exchanges, the tool-result cache, session-start injection.

An **exchange** is one user question with everything the agent does up to
its final answer::

    ex = chat.exchanges
    ex.begin("Which champion counters droideka?")            # the user question
    hit = ex.lookup_tool("gcs_get_champion_details", {"champion_name": "droideka"})
    if hit is None:
        result = run_tool(...)
        ex.cache_tool("gcs_get_champion_details", {"champion_name": "droideka"}, result, 3)
    ex.add_agent_message("assistant", None, tool_calls=[...])  # steps of the cycle
    ex.add_agent_message("tool", result, tool_call_id="call_1")
    ex.finalize("Use a lightsaber-wielding champion.")        # closes the exchange

Every message is stored (searchable, never lost). In the prompt, the steps
of *finished* exchanges are left out: the model sees the question/answer
pairs, the cached tool results and the current cycle in full, as a support
agent's memory manager prepares it. With the ``exchanges`` policy the session keeps
10 exchanges in the prompt, older ones fold into the summary (compressed
past 4 KB), and long answers are shown as 500-byte views.

The **tool cache** is keyed by the MD5 of ``"{tool_name}:{json.dumps(params,
sort_keys=True)}"``. Its lifetime is counted in exchanges: a hit refreshes
it, each finalized exchange decrements it, and it is removed at zero. It is
the session's ``"tool_cache"`` state document, updated by compare-and-set,
which also holds the exchange counters and the one-time injection flag.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from engram.compaction.cycle import unfolded
from engram.compaction.state import CompactionState
from engram.context import Context
from engram.errors import ConfigError, InvalidQuery
from engram.models import JSON, Message
from engram.runtime import Runtime
from engram.sections.tool_cache import (
    ANSWER,
    CACHE_TITLE,
    EXCHANGE_KEY,
    INJECTION,
    QUESTION,
    STEP,
    TOOL_CACHE_KIND,
    CacheEntry,
    ExchangeState,
    cache_key,
    cache_section,
    load_exchange_state,
    parse_exchange_state,
)
from engram.statedoc import compare_and_set

__all__ = [
    "ANSWER",
    "CACHE_TITLE",
    "EXCHANGE_KEY",
    "INJECTION",
    "QUESTION",
    "STEP",
    "TOOL_CACHE_KIND",
    "CacheEntry",
    "ExchangeHost",
    "ExchangeState",
    "Exchanges",
    "cache_key",
    "cache_section",
    "load_exchange_state",
    "parse_exchange_state",
]

#: Most entries the cache holds; the oldest are evicted first.
MAX_CACHE_ENTRIES = 100
#: Largest cached result (UTF-8 bytes); longer results are not cached.
MAX_RESULT_BYTES = 64_000
#: Exchanges a proactive tool result stays cached when none is given.
PROACTIVE_CACHE_EXCHANGES = 3
#: The words before the screen context in the injected message.
INJECTION_PREFIX = "I can see you're on a specific screen."
#: Characters of one message shown per line of the debug view.
DEBUG_LINE_CHARS = 200
#: Compare-and-set attempts before an update gives up.
MAX_UPDATE_ATTEMPTS = 20


class ExchangeHost(Protocol):
    """What the exchange API needs of a session (``engram.Session`` is one)."""

    scope: str
    id: str
    runtime: Runtime

    @property
    def add(self) -> Callable[..., Message]:
        """``Session.add``: store one message."""
        ...

    @property
    def add_many(self) -> Callable[..., list[Message]]:
        """``Session.add_many``: store messages in one transaction."""
        ...

    def compact_later(self) -> bool:
        """Schedule a compaction when the policy says one is due."""
        ...

    def context(self, budget: int | None = None, *, system: str | None = None) -> Context:
        """The prompt of the next turn."""
        ...

    def compaction_state(self) -> CompactionState:
        """The session's compaction state."""
        ...


class Exchanges:
    """The exchange API on one session. Get it from ``Session.exchanges``."""

    def __init__(self, session: ExchangeHost):
        """Bind to ``session``; nothing is read until a method is called."""
        self.session = session
        self._store = session.runtime.store

    # -- state --------------------------------------------------------------------

    def state(self) -> ExchangeState:
        """The stored document (cache, counters, flag)."""
        return load_exchange_state(self._store, self.session.scope, self.session.id)[0]

    def _update(self, change: Callable[[ExchangeState], ExchangeState | None]) -> ExchangeState:
        """Compare-and-set loop; ``change`` returning None means "nothing to write"."""
        scope, sid, store = self.session.scope, self.session.id, self._store

        def save(state: ExchangeState, version: int) -> bool:
            saved = store.save_state(
                scope, sid, TOOL_CACHE_KIND, state.to_dict(), expected_version=version
            )
            return saved is not None

        return compare_and_set(
            lambda: load_exchange_state(store, scope, sid),
            change,
            save,
            what=f"tool cache of {scope}/{sid}",
            attempts=MAX_UPDATE_ATTEMPTS,
        )

    # -- the cycle ----------------------------------------------------------------

    def begin(self, question: str, **kw: Any) -> Message:
        """Store the user question that opens an exchange.

        Raises:
            InvalidQuery: An exchange is already open (finalize it first).

        """
        current = self.state().current_question_id
        if current is not None:
            raise InvalidQuery(
                f"exchange opened by message {current} is not finalized; call finalize() first"
            )
        message = self.session.add("user", question, metadata={EXCHANGE_KEY: QUESTION}, **kw)

        def opened(state: ExchangeState) -> ExchangeState:
            return _replace(state, current_question_id=message.id)

        self._update(opened)
        return message

    def add_agent_message(
        self,
        role: str,
        content: str | None,
        *,
        name: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        tool_call_id: str | None = None,
    ) -> Message:
        """Store one step of the open exchange (an assistant call, a tool result...).

        Raises:
            InvalidQuery: No exchange is open, or the role is "user" (use begin()).

        """
        if role == "user":
            raise InvalidQuery("a user message opens an exchange: use begin()")
        if self.state().current_question_id is None:
            raise InvalidQuery("no exchange is open: call begin() first")
        return self.session.add(
            role,
            content,
            name=name,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            metadata={EXCHANGE_KEY: STEP},
        )

    def finalize(self, final_answer: str) -> Message:
        """Store the final answer, close the exchange, age the cache, compact if due.

        Each finalized exchange decrements every cache entry's remaining
        lifetime; entries reaching zero are removed.

        Raises:
            InvalidQuery: No exchange is open.

        """
        if self.state().current_question_id is None:
            raise InvalidQuery("no exchange is open: call begin() first")
        message = self.session.add("assistant", final_answer, metadata={EXCHANGE_KEY: ANSWER})

        def closed(state: ExchangeState) -> ExchangeState:
            aged = tuple(
                _entry(e, remaining_duration=e.remaining_duration - 1)
                for e in state.entries
                if e.remaining_duration - 1 > 0
            )
            return _replace(
                state,
                entries=aged,
                exchanges=state.exchanges + 1,
                current_question_id=None,
                last_answer_id=message.id,
            )

        self._update(closed)
        self.session.compact_later()
        return message

    # -- tool cache ---------------------------------------------------------------

    def lookup_tool(self, tool_name: str, parameters: Mapping[str, Any]) -> CacheEntry | None:
        """Return the cached result of this call, refreshing its lifetime; None on a miss."""
        key = cache_key(tool_name, parameters)
        found: list[CacheEntry] = []

        def refresh(state: ExchangeState) -> ExchangeState | None:
            found.clear()
            entry = state.entry(key)
            if entry is None:
                return None
            fresh = _entry(entry, remaining_duration=entry.original_duration)
            found.append(fresh)
            if fresh == entry:
                return None
            return _replace(
                state, entries=tuple(fresh if e.key == key else e for e in state.entries)
            )

        self._update(refresh)
        return found[0] if found else None

    def cache_tool(
        self,
        tool_name: str,
        parameters: Mapping[str, Any],
        result: str,
        duration: int,
        *,
        call_id: str | None = None,
    ) -> CacheEntry | None:
        """Cache a tool result for ``duration`` exchanges (0 or less: not cached).

        Raises:
            InvalidQuery: The parameters are not JSON, or the result is not text.

        """
        if not isinstance(result, str):
            raise InvalidQuery(f"a cached tool result must be text, got {type(result).__name__}")
        if isinstance(duration, bool) or not isinstance(duration, int):
            raise InvalidQuery(f"cache duration must be an integer, got {duration!r}")
        if duration <= 0 or len(result.encode("utf-8")) > MAX_RESULT_BYTES:
            return None
        try:
            key = cache_key(tool_name, parameters)
            params = json.loads(json.dumps(parameters, sort_keys=True))
        except (TypeError, ValueError) as exc:
            raise InvalidQuery(f"tool parameters must be JSON: {exc}") from None
        entry = CacheEntry(key, tool_name, params, result, duration, duration, call_id, time.time())

        def add(state: ExchangeState) -> ExchangeState:
            kept = [e for e in state.entries if e.key != key]
            kept.append(entry)
            return _replace(state, entries=tuple(kept[-MAX_CACHE_ENTRIES:]))

        self._update(add)
        return entry

    def cached(self) -> list[CacheEntry]:
        """Every cached entry, oldest first."""
        return list(self.state().entries)

    # -- session start --------------------------------------------------------------

    def inject_session_start(
        self,
        screen_context_text: str,
        proactive_tool_results: Sequence[Mapping[str, Any]] = (),
    ) -> list[Message]:
        """Store the one-time injection; later calls return [] and store nothing.

        Each proactive result is ``{"tool_name", "parameters", "result",
        "duration"?}``; they are stored as an assistant tool call with its
        tool results (valid chat history) and cached for ``duration``
        exchanges (default :data:`PROACTIVE_CACHE_EXCHANGES`).
        """
        results = [_proactive(i, r) for i, r in enumerate(proactive_tool_results, start=1)]
        claimed: list[bool] = []

        def claim(state: ExchangeState) -> ExchangeState | None:
            claimed.clear()
            if state.injection_done:
                return None
            claimed.append(True)
            now = time.time()
            entries = [e for e in state.entries if e.key not in {r[0] for r in results}]
            for key, call_id, name, params, text, duration in results:
                if duration > 0:
                    entries.append(
                        CacheEntry(key, name, params, text, duration, duration, call_id, now)
                    )
            return _replace(state, entries=tuple(entries[-MAX_CACHE_ENTRIES:]), injection_done=True)

        self._update(claim)
        if not claimed:
            return []
        opening: JSON = {
            "role": "assistant",
            "content": f"{INJECTION_PREFIX} {screen_context_text}".strip(),
            "metadata": {EXCHANGE_KEY: INJECTION},
        }
        batch = [opening]
        if results:
            opening["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(params, sort_keys=True)},
                }
                for _, call_id, name, params, _, _ in results
            ]
            batch.extend(
                {
                    "role": "tool",
                    "content": text,
                    "tool_call_id": call_id,
                    "metadata": {EXCHANGE_KEY: INJECTION},
                }
                for _, call_id, _, _, text, _ in results
            )
        return self.session.add_many(batch)

    # -- observability --------------------------------------------------------------

    def debug_view(self, *, budget: int | None = None, system: str | None = None) -> str:
        """The log: memory state, function cache state, what the agent receives."""
        session = self.session
        comp = session.compaction_state()
        rows, _ = unfolded(self._store, session.scope, session.id, comp.watermark)
        live = sum(1 for m in rows if m.metadata.get(EXCHANGE_KEY) == ANSWER)
        state = self.state()
        ctx = session.context(budget, system=system)
        lines = [
            "=== MEMORY STATE ===",
            f"Session: {session.id} | Exchanges: {live} | "
            f"Summary: {len(comp.summary.encode('utf-8'))} bytes | "
            f"LLM compressions: {comp.compressions}",
            "",
            "=== FUNCTION CACHE STATE ===",
            f"Cached functions: {len(state.entries)}",
        ]
        lines.extend(
            f"  • {e.tool_name}({e.parameters!r}): "
            f"{e.remaining_duration}/{e.original_duration} exchanges remaining"
            for e in state.entries
        )
        lines += ["", f"=== AGENT RECEIVES ({len(ctx.messages)} messages) ==="]
        for number, m in enumerate(ctx.messages, start=1):
            lines.append(f"[{number}] {str(m.get('role', '')).upper()}: {_one_line(m)}")
        return "\n".join(lines)


def _one_line(message: Mapping[str, Any]) -> str:
    text = " ".join(str(message.get("content") or "").split())
    calls = message.get("tool_calls") or []
    if calls:
        names = ", ".join(str(c.get("function", {}).get("name", "?")) for c in calls)
        text = (text + " " if text else "") + f"[calls {names}]"
    if len(text) > DEBUG_LINE_CHARS:
        text = text[: DEBUG_LINE_CHARS - 1] + "…"
    return text


def _proactive(index: int, raw: Mapping[str, Any]) -> tuple[str, str, str, JSON, str, int]:
    if not isinstance(raw, Mapping) or "tool_name" not in raw or "result" not in raw:
        raise InvalidQuery(
            "a proactive tool result needs 'tool_name' and 'result' (and optionally "
            f"'parameters', 'duration'), got {raw!r}"
        )
    name = str(raw["tool_name"])
    params = raw.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise InvalidQuery(f"proactive tool parameters must be an object, got {params!r}")
    result = raw["result"]
    text = result if isinstance(result, str) else json.dumps(result, sort_keys=True)
    duration = raw.get("duration", PROACTIVE_CACHE_EXCHANGES)
    if isinstance(duration, bool) or not isinstance(duration, int):
        raise ConfigError(f"proactive cache duration must be an integer, got {duration!r}")
    return cache_key(name, params), f"proactive_{index}", name, dict(params), text, duration


def _replace(state: ExchangeState, **changes: Any) -> ExchangeState:
    return dataclasses.replace(state, **changes)


def _entry(entry: CacheEntry, **changes: Any) -> CacheEntry:
    return dataclasses.replace(entry, **changes)
