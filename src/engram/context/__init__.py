"""The context builder: decides exactly what the model sees.

Input: a :data:`HistoryReader` over one session's stored messages (``Message``
values, or raw rows: :mod:`~engram.context.rows`), a token
budget, an optional system prompt and fixed sections (long-term memories,
important data, the conversation summary...). Output: a :class:`Context`, an
OpenAI-format message list that always fits, plus a report of what was left
out and why. Pure code: the only I/O is through the reader callback.

The prompt is ``system``, then each section as a headed system message in the
given order, then the recent window. The window is chosen newest first:

1. The *current turn* (the newest user message and everything after it) is
   always in. If it does not fit whole, its texts are cut to head-and-tail
   views with a marker; stored messages are never changed. To make room,
   sections are dropped (last first), then the system prompt is truncated.
2. Older *units* are added while they fit the budget and the policy window
   (messages, tokens, exchanges). A unit is one message, or an assistant
   message with ``tool_calls`` together with the tool results answering it,
   so a tool call and its results are never split. The window is a
   contiguous suffix: the first unit that does not fit ends it. With the
   policy's ``cache_window`` its start then moves to a chunk boundary of the
   session's history, so consecutive prompts share their prefix
   (:mod:`~engram.context.cache_window`).
3. Tool messages whose assistant call is not in the window are dropped and
   reported: OpenAI rejects orphan tool results. A tool call no stored result
   answers is left out of the assistant message shown (the message goes too
   when nothing else is left), so every prompt is one a strict provider
   accepts; the stored messages stay whole.

Counting: stored messages carry their exact size in the storage encoding
(``o200k_base``). For that encoding the stored counts are used as they are
(the hot path encodes nothing); for :class:`~engram.tokens.ApproximateCounter`
they are converted part by part; other counters (``cl100k_base``, custom)
recount, with a bounded cache. ``Context.tokens`` always equals
``tokens.count_messages(counter, ctx.messages)``.

The same inputs give the same messages, byte for byte (so prompt caches hit): nothing
in the prompt depends on time, randomness or dict iteration order.

Modules: :mod:`~engram.context.results` (what is returned),
:mod:`~engram.context.rows` (the history as read: rows, and whole messages only
for tool calls, names and images),
:mod:`~engram.context.costing` (token costs), :mod:`~engram.context.window`
(reading and filling the window), :mod:`~engram.context.cache_window`
(chunked window starts for prompt caches), :mod:`~engram.context.truncation`
(head-and-tail views) and :mod:`~engram.context.builder` (the three phases).
"""

from engram.context.builder import MIN_BUDGET, build_context
from engram.context.costing import RECOUNT_CACHE_SIZE, TEXT_CACHE_SIZE
from engram.context.results import (
    OLDER_THAN_WINDOW,
    ORPHAN_TOOL_RESULT,
    OVER_BUDGET,
    SECTION_DROPPED,
    TURN_OVER_BUDGET,
    UNANSWERED_TOOL_CALL,
    Context,
    HistoryTotals,
    Omission,
    Provenance,
    Section,
    SectionSource,
)
from engram.context.rows import HistoryReader, HistoryRows, Row
from engram.context.truncation import MIN_VIEW_TOKENS
from engram.context.window import FIRST_CHUNK, MAX_CHUNK, MAX_TURN_SCAN, MIN_CHUNK

__all__ = [
    "FIRST_CHUNK",
    "MAX_CHUNK",
    "MAX_TURN_SCAN",
    "MIN_BUDGET",
    "MIN_CHUNK",
    "MIN_VIEW_TOKENS",
    "OLDER_THAN_WINDOW",
    "ORPHAN_TOOL_RESULT",
    "OVER_BUDGET",
    "RECOUNT_CACHE_SIZE",
    "SECTION_DROPPED",
    "TEXT_CACHE_SIZE",
    "TURN_OVER_BUDGET",
    "UNANSWERED_TOOL_CALL",
    "Context",
    "HistoryReader",
    "HistoryRows",
    "HistoryTotals",
    "Omission",
    "Provenance",
    "Row",
    "Section",
    "SectionSource",
    "build_context",
]
