"""What a deletion does to each thing derived from the deleted messages, one function each.

Each function looks at one kind of derived thing, removes what used the
forgotten messages and returns the receipt lines (:mod:`engram.receipts`):

* the compaction state (summary, important data) is judged by its citations
  (:meth:`~engram.compaction.state.CompactionState.uses`); :mod:`engram.edits`
  has already marked it stale when it used them;
* agent-state entries and tool-cache entries are written by the application,
  with no citations: an entry goes when it quotes a forgotten message
  (:func:`quotes`), a cached result also when its call or result was deleted;
* a memory goes when its recorded sources (``metadata["sources"]``: session ->
  id ranges, written when it was made from a conversation) hold a forgotten
  message, when it was made from that conversation before sources were
  recorded, or when it quotes a forgotten message;
* vectors and search-index rows go with the messages, in the store's
  transaction.

No line ever holds the forgotten text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from engram.agent_state import AgentState
from engram.compaction.citations import covers, read_cites
from engram.compaction.important import is_empty
from engram.compaction.state import CompactionState
from engram.errors import Contention, MemoryNotFound
from engram.memories.records import SOURCES_KEY
from engram.memories.service import Memories
from engram.models import MemoryRecord, Message
from engram.receipts import (
    AGENT_STATE,
    FAILED,
    IMPORTANT_DATA,
    MEMORY,
    PENDING,
    REBUILT,
    REMOVED,
    SEARCH_INDEX,
    SUMMARY,
    TOOL_CACHE,
    UNCHANGED,
    VECTORS,
    Derived,
)
from engram.sections.agent_state import load_agent_state, update_agent_state
from engram.sections.tool_cache import (
    TOOL_CACHE_KIND,
    ExchangeState,
    load_exchange_state,
)
from engram.statedoc import compare_and_set
from engram.store import Store

#: Words in a row two texts must share for one to quote the other.
QUOTE_WORDS = 6
#: A whole forgotten message this short or longer (in words) found inside a text is quoted.
MIN_QUOTED_WORDS = 3

_WORD = re.compile(r"\w+")
#: The detail of an entry other writers kept changing.
_BUSY = "other writers kept changing it, so it still quotes the message: remove it by hand"


def quotes(text: str, sources: Sequence[str]) -> bool:
    """Whether ``text`` repeats one of ``sources``: :data:`QUOTE_WORDS` words in a row.

    A source of fewer words counts when ``text`` holds all of it (at least
    :data:`MIN_QUOTED_WORDS` words); ``text`` of fewer words when a source holds
    all of it. Case, punctuation and spacing are ignored.
    """
    words = _words(text)
    if not words:
        return False
    mine = _runs(words)
    for source in sources:
        theirs = _words(source)
        if len(theirs) < QUOTE_WORDS:
            if len(theirs) >= MIN_QUOTED_WORDS and _inside(theirs, words):
                return True
            continue
        if len(words) < QUOTE_WORDS:
            if len(words) >= MIN_QUOTED_WORDS and _inside(words, theirs):
                return True
            continue
        if mine & _runs(theirs):
            return True
    return False


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + QUOTE_WORDS]) for i in range(len(words) - QUOTE_WORDS + 1)}


def _inside(needle: list[str], hay: list[str]) -> bool:
    return f" {' '.join(needle)} " in f" {' '.join(hay)} "


# -- summary and important data ------------------------------------------------------


def compaction_lines(before: CompactionState, ids: Sequence[int], stale: bool) -> list[Derived]:
    """Lines for the summary and the important data as they were before the deletion."""
    if before.summary_version == 0:
        return []
    version = f"version {before.summary_version}"
    used_summary, used_data = before.uses(ids)
    why_not = (
        f"it covers messages up to #{before.watermark}; these are newer"
        if all(i > before.watermark for i in ids)
        else "its citations name none of them"
    )
    out: list[Derived] = []
    parts = [(SUMMARY, bool(before.summary.strip()), used_summary)]
    parts.append((IMPORTANT_DATA, not is_empty(before.important_data), used_data))
    for kind, present, used in parts:
        if not present:
            continue
        if stale:
            detail = "it used them" if used else "rebuilt with the rest of the state"
            out.append(Derived(kind, version, PENDING, f"{detail}; rebuilt at the next turn"))
        else:
            out.append(Derived(kind, version, UNCHANGED, why_not))
    return out


# -- agent state ---------------------------------------------------------------------


def agent_state_lines(store: Store, scope: str, session: str, texts: list[str]) -> list[Derived]:
    """Remove agent-state entries that quote the forgotten messages; lines for what happened."""
    state, version = load_agent_state(store, scope, session)
    if version == 0:
        return []
    found = _quoting_entries(state, texts)
    if not found:
        return [Derived(AGENT_STATE, "entries", UNCHANGED, "no entry quotes the messages")]
    try:
        update_agent_state(store, scope, session, lambda current: _without(current, texts))
    except Contention:
        return [Derived(AGENT_STATE, ref, FAILED, _BUSY) for ref in found]
    return [Derived(AGENT_STATE, ref, REMOVED, "it quoted a forgotten message") for ref in found]


def _quoting_entries(state: AgentState, texts: list[str]) -> list[str]:
    refs = [f"fact {n}" for n, fact in enumerate(state.facts, 1) if quotes(fact, texts)]
    refs += [f"task {t.id}" for t in state.active_tasks if quotes(t.description, texts)]
    for name, values in (
        ("environment", state.last_known_environment),
        ("preference", state.preferences),
    ):
        refs += [f"{name} {key}" for key, value in values.items() if quotes(str(value), texts)]
    return refs


def _without(state: AgentState, texts: list[str]) -> AgentState:
    return dataclasses.replace(
        state,
        facts=tuple(f for f in state.facts if not quotes(f, texts)),
        active_tasks=tuple(t for t in state.active_tasks if not quotes(t.description, texts)),
        last_known_environment={
            k: v for k, v in state.last_known_environment.items() if not quotes(str(v), texts)
        },
        preferences={k: v for k, v in state.preferences.items() if not quotes(str(v), texts)},
    )


# -- tool cache ----------------------------------------------------------------------


def tool_cache_lines(store: Store, scope: str, session: str, gone: list[Message]) -> list[Derived]:
    """Remove cached results whose call or result was deleted, or that quote what was."""
    cache, version = load_exchange_state(store, scope, session)
    if version == 0 or not cache.entries:
        return []
    calls = {m.tool_call_id for m in gone if m.tool_call_id}
    calls |= {str(c.get("id")) for m in gone for c in m.tool_calls or ()}
    texts = [m.content for m in gone]

    def used(entry_call: str | None, result: str) -> bool:
        return (entry_call is not None and entry_call in calls) or quotes(result, texts)

    doomed = [e.key for e in cache.entries if used(e.call_id, e.result)]
    if not doomed:
        return [Derived(TOOL_CACHE, "entries", UNCHANGED, "no entry came from the messages")]

    def load() -> tuple[ExchangeState, int]:
        return load_exchange_state(store, scope, session)

    def change(state: ExchangeState) -> ExchangeState | None:
        kept = tuple(e for e in state.entries if not used(e.call_id, e.result))
        return None if kept == state.entries else dataclasses.replace(state, entries=kept)

    def save(state: ExchangeState, at: int) -> bool:
        saved = store.save_state(
            scope, session, TOOL_CACHE_KIND, state.to_dict(), expected_version=at
        )
        return saved is not None

    try:
        compare_and_set(load, change, save, what=f"tool cache of {scope}/{session}")
    except Contention:
        return [Derived(TOOL_CACHE, f"entry {key}", FAILED, _BUSY) for key in doomed]
    return [
        Derived(
            TOOL_CACHE, f"entry {key}", REMOVED, "its call or result was deleted, or it quoted one"
        )
        for key in doomed
    ]


# -- memories ------------------------------------------------------------------------


def memory_used(memory: MemoryRecord, session: str, ids: Sequence[int], texts: list[str]) -> bool:
    """Whether ``memory`` was made from (or quotes) forgotten messages of ``session``."""
    sources = memory.metadata.get(SOURCES_KEY)
    if isinstance(sources, dict):
        ranges = read_cites(sources.get(session)) or ()
        if any(covers(ranges, i) for i in ids):
            return True
    elif "origin" in memory.metadata and session in _related(memory):
        return True  # made from this conversation before sources were recorded
    return quotes(memory.content, texts)


def _related(memory: MemoryRecord) -> list[str]:
    related = memory.metadata.get("related_sessions")
    sessions = [s for s in related if isinstance(s, str)] if isinstance(related, list) else []
    return [*sessions, *([memory.source_session] if memory.source_session else [])]


def memory_lines(
    memories: Memories, session: str, used: list[MemoryRecord], *, rebuild: bool, total: int
) -> list[Derived]:
    """Remove (and with ``rebuild`` rewrite) the memories that used forgotten messages."""
    out: list[Derived] = []
    for memory in used:
        try:
            memories.delete(memory.id)
        except MemoryNotFound:
            pass  # deleted meanwhile: gone all the same
        out.append(_rebuilt(memories, session, memory) if rebuild else _removed(memory))
    if total > len(used):
        kept = total - len(used)
        out.append(
            Derived(MEMORY, f"{kept} other memories", UNCHANGED, "not made from the messages")
        )
    return out


def _removed(memory: MemoryRecord) -> Derived:
    return Derived(MEMORY, f"memory {memory.id}", REMOVED, "it was made from forgotten messages")


def _rebuilt(memories: Memories, session: str, memory: MemoryRecord) -> Derived:
    source = memory.source_session or session
    outcome = memories.create_from_session(source, reason="rebuilt after a deletion")
    if outcome.memory is None:
        return Derived(
            MEMORY, f"memory {memory.id}", REMOVED, f"nothing left to remember ({outcome.status})"
        )
    return Derived(
        MEMORY,
        f"memory {memory.id}",
        REBUILT,
        f"rewritten from what remains as memory {outcome.memory.id}",
    )


# -- vectors and the search index ----------------------------------------------------


def vector_lines(had: set[int] | None) -> list[Derived]:
    """Vectors removed with their messages (``had``: None when the store keeps none)."""
    if had is None:
        return [Derived(VECTORS, "none", UNCHANGED, "this store keeps no vectors")]
    if not had:
        return [Derived(VECTORS, "none", UNCHANGED, "the messages had no vectors yet")]
    return [Derived(VECTORS, f"{len(had)} vectors", REMOVED, "removed with the messages")]


def index_lines(count: int) -> list[Derived]:
    """Search-index rows removed with their messages, in the same transaction."""
    return [
        Derived(
            SEARCH_INDEX,
            f"{count} rows",
            REMOVED,
            "removed with the messages; the neighbour context of later messages was rebuilt",
        )
    ]


__all__ = [
    "QUOTE_WORDS",
    "agent_state_lines",
    "compaction_lines",
    "index_lines",
    "memory_lines",
    "memory_used",
    "quotes",
    "tool_cache_lines",
    "vector_lines",
]
