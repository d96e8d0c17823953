"""Per-message costs in the target counter's units, as cheaply as possible.

Stored messages carry their exact size in the storage encoding
(``o200k_base``). For that encoding the stored counts are used as they are
(the hot path encodes nothing); for :class:`~engram.tokens.ApproximateCounter`
they are converted part by part; other counters (``cl100k_base``, custom)
recount, with a bounded cache. A message with images is recounted when the
target model's image rule is not the one stored counts use (gpt-4o's).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from engram.context.rows import Stored
from engram.tokens import (
    DEFAULT_IMAGE_RULE,
    STORAGE_ENCODING,
    TOKENS_PER_MESSAGE,
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    count_message,
    storage_counter,
)

#: Entries of the recount cache (per message) and of the text-count cache (system, sections).
RECOUNT_CACHE_SIZE = 4096
TEXT_CACHE_SIZE = 256


class LRU:
    """A small thread-safe LRU map (the builder may run in server worker threads)."""

    def __init__(self, size: int):
        self._size = size
        self._data: OrderedDict[Any, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> int | None:
        """Return the value kept for ``key`` (now the most recent), or None."""
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: Any, value: int) -> None:
        """Keep ``value`` for ``key``, forgetting the least recent entry when full."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            if len(self._data) > self._size:
                self._data.popitem(last=False)


_RECOUNTS = LRU(RECOUNT_CACHE_SIZE)
_TEXT_COUNTS = LRU(TEXT_CACHE_SIZE)


def _counter_key(counter: TokenCounter) -> tuple[Any, ...]:
    # Counters are identified by type, name and margin: two counters with the
    # same key must count alike (documented for custom counters).
    kind = type(counter)
    margin = getattr(counter, "margin", None)
    return (
        kind.__module__,
        kind.__qualname__,
        counter.name,
        margin,
        getattr(counter, "images", None),
    )


_STORED, _SCALED, _RECOUNT = "stored", "scaled", "recount"


class Costing:
    """Per-message costs in the target counter's units, as cheaply as possible."""

    def __init__(self, counter: TokenCounter | None, views: Mapping[int, str] | None):
        if counter is None:
            counter = storage_counter()
        self.counter = counter
        self.key = _counter_key(counter)
        self.views = views or {}
        if isinstance(counter, TiktokenCounter) and counter.name == STORAGE_ENCODING:
            self.mode = _STORED
        elif isinstance(counter, ApproximateCounter) and counter.base.name == STORAGE_ENCODING:
            self.mode = _SCALED
            self._base = counter.base
            self._scale = counter.scale
        else:
            self.mode = _RECOUNT
        self._role_cache: dict[str, int] = {}
        #: Stored counts of messages with images hold for this counter's image rule too.
        self._stored_images = getattr(counter, "images", DEFAULT_IMAGE_RULE) == DEFAULT_IMAGE_RULE
        #: Stored counts are the answer as they are (no views, storage encoding), except for
        #: messages with images when the image rule differs: those go through :meth:`cost`.
        self.plain = self.mode == _STORED and not self.views

    def content(self, m: Stored) -> str:
        """Return the text shown for ``m``: a caller view, or the stored content."""
        if self.views:
            view = self.views.get(m.id)
            if view is not None:
                return view
        return m.content

    def cost(self, m: Stored) -> int:
        """Exact size of ``m`` (as shown) with this counter, overhead included."""
        if self.views and m.id in self.views:
            return self._recount(m, self.views[m.id])
        if self.mode == _STORED and (m.parts is None or self._stored_images):
            return m.tokens
        if self.mode == _SCALED and not (m.name or m.tool_calls or m.tool_call_id or m.parts):
            # stored = 3 + base(role) + base(content); count_message with the
            # approximate counter scales each part separately, so do the same.
            role = self._base_role(m.role)
            content = m.tokens - TOKENS_PER_MESSAGE - role
            if content >= 0:
                return TOKENS_PER_MESSAGE + self._scale(role) + self._scale(content)
        return self._recount(m, m.content, m.parts)

    def _base_role(self, role: str) -> int:
        value = self._role_cache.get(role)
        if value is None:
            value = self._role_cache[role] = self._base.count_text(role)
        return value

    def _recount(self, m: Stored, content: str, parts: list[Any] | None = None) -> int:
        key = (self.key, m.id, m.tokens, hash(content), parts is not None)
        value = _RECOUNTS.get(key)
        if value is None:
            value = self.message(m, content, parts)
            _RECOUNTS.put(key, value)
        return value

    def message(self, m: Stored, content: str, parts: list[Any] | None = None) -> int:
        """Size of ``m`` shown with ``content`` and ``parts`` (uncached).

        A view (a cut or a summary of the text) is shown without the images.
        """
        return count_message(
            self.counter,
            m.role,
            content,
            name=m.name,
            tool_calls=m.tool_calls,
            tool_call_id=m.tool_call_id,
            parts=parts,
        )

    def fixed(self, m: Stored) -> int:
        """Size of ``m`` with empty content: what no truncation can remove."""
        return self.message(m, "")

    def system(self, text: str) -> int:
        """Size of a system message, cached by text (system prompts repeat every turn)."""
        key = (self.key, text)
        value = _TEXT_COUNTS.get(key)
        if value is None:
            value = count_message(self.counter, "system", text)
            _TEXT_COUNTS.put(key, value)
        return value

    def text(self, text: str) -> int:
        """Tokens of bare text."""
        return self.counter.count_text(text)
