"""The compaction state document of a session, and reading it back safely.

Stored with ``Store.save_state(scope, session, STATE_KIND, state.to_dict(),
expected_version=...)``: the store's compare-and-set on the record version
makes two concurrent compactions commit at most one new state per watermark.

A document that cannot be read (not an object, wrong types, impossible
values) is never trusted: :func:`parse_state` logs a warning and returns a
fresh state with ``reset_reason`` set, so the next compaction rebuilds the
summary from the stored messages (they are never lost).

A document marked :data:`STALE_KEY` (written when a message the summary
covered was deleted or edited, see :mod:`engram.edits`) is read the same way:
a fresh state whose ``reset_reason`` says why, so the summary and important
data are rebuilt from the messages that remain and the deleted text never
reaches a prompt again.

Citations (:mod:`engram.compaction.citations`) are kept beside the summary and
the important data: ``summary_cites`` holds one citation per paragraph of the
summary (paragraphs are separated by blank lines), ``important_cites`` one per
important-data item (see :func:`engram.compaction.important.cite_key`). A
document written before citations existed reads with none; citations that
cannot be read are dropped with a log line, never the summary.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engram.compaction.citations import Cites, cited_text, covers, read_cites, to_json
from engram.compaction.important import empty_important_data, is_empty, validate_important_data
from engram.errors import LLMBadResponse
from engram.models import IMPORTED_ORIGIN, JSON

log = logging.getLogger(__name__)

#: ``kind`` of the state record in the store.
STATE_KIND = "compaction"
#: Format version written into the document.
FORMAT = 1
#: Key of a stored document whose summary covered a deleted or edited message.
STALE_KEY = "stale"

_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")


@dataclass(frozen=True, slots=True)
class CompactionState:
    """Summary, important data and watermark of one session.

    Attributes:
        summary: The running narrative summary ("" before the first cycle).
        summary_version: 0 before the first cycle, then 1, 2, ...
        important_data: The structure (always all seven keys).
        watermark: Id of the last message folded into the summary (0: none).
        messages_summarized_count: Messages folded so far, over all cycles.
        summarizer: Who wrote the summary: "offline" or "llm:<model>".
        last_summarized_at: When the last cycle committed (UTC).
        compactions: Committed cycles.
        llm_failures: Cycles where the model failed and the offline fallback wrote.
        compressions: Times the summary was compressed.
        last_error: The last fallback reason, for the dashboard and logs.
        reset_reason: Set (and never saved) when a corrupted document was replaced.
        summary_cites: The citation of each paragraph of ``summary``, in order
            (empty: the summary carries none, as before citations existed).
        important_cites: Important-data field -> item key -> citation, stored
            as ``[[low, high], ...]``.
        exact_cites: Every version since the last reset was written offline, so
            the citations name every message the text came from (a model's are
            its claims).
        covers_from: When the first message folded since the last reset was written.
        covers_until: When the last folded message was written.

    """

    summary: str = ""
    summary_version: int = 0
    important_data: JSON = field(default_factory=empty_important_data)
    watermark: int = 0
    messages_summarized_count: int = 0
    summarizer: str | None = None
    last_summarized_at: datetime | None = None
    compactions: int = 0
    llm_failures: int = 0
    compressions: int = 0
    last_error: str | None = None
    reset_reason: str | None = None
    summary_cites: tuple[Cites, ...] = ()
    important_cites: JSON = field(default_factory=dict)
    exact_cites: bool = True
    covers_from: datetime | None = None
    covers_until: datetime | None = None

    def uses(self, ids: Collection[int]) -> tuple[bool, bool]:
        """Whether the summary, and the important data, may hold text of messages ``ids``.

        Only messages it covers (up to the watermark) can have fed a state. Exact
        citations tell which did; otherwise (a model wrote a version, or a part
        cites nothing) every covered message counts as used.
        """
        covered = [i for i in ids if 0 < i <= self.watermark]
        if not covered or self.summary_version == 0:
            return False, False
        paragraphs = [cites for _, cites in self.paragraphs()]
        summary = bool(self.summary.strip()) and (
            not self.exact_cites
            or not all(paragraphs)
            or any(covers(cites, i) for cites in paragraphs for i in covered)
        )
        cited = [
            read_cites(v) or () for items in self.important_cites.values() for v in items.values()
        ]
        important = not is_empty(self.important_data) and (
            not self.exact_cites
            or not cited
            or any(covers(cites, i) for cites in cited for i in covered)
        )
        return summary, important

    def paragraphs(self) -> list[tuple[str, Cites]]:
        """The summary's paragraphs with their citations (none when they do not line up)."""
        texts = split_paragraphs(self.summary)
        if len(self.summary_cites) != len(texts):
            return [(text, ()) for text in texts]
        return list(zip(texts, self.summary_cites, strict=True))

    def cited_summary(self) -> str:
        """The summary with each paragraph's marker (``... [#112-#140]``), as read back."""
        return cited_text(self.paragraphs())

    def to_dict(self) -> JSON:
        """Return the document to store (JSON-ready; ``reset_reason`` is not stored)."""
        return {
            "format": FORMAT,
            "summary": self.summary,
            "summary_version": self.summary_version,
            "important_data": self.important_data,
            "watermark": self.watermark,
            "messages_summarized_count": self.messages_summarized_count,
            "summarizer": self.summarizer,
            "last_summarized_at": (
                self.last_summarized_at.isoformat() if self.last_summarized_at else None
            ),
            "compactions": self.compactions,
            "llm_failures": self.llm_failures,
            "compressions": self.compressions,
            "last_error": self.last_error,
            "citations": {
                "summary": [to_json(cites) for cites in self.summary_cites],
                "important_data": self.important_cites,
                "exact": self.exact_cites,
            },
            "covers": [
                self.covers_from.isoformat() if self.covers_from else None,
                self.covers_until.isoformat() if self.covers_until else None,
            ],
        }

    def replace(self, **changes: Any) -> CompactionState:
        """Return a copy with some fields changed."""
        return dataclasses.replace(self, **changes)


def split_paragraphs(summary: str) -> list[str]:
    """The paragraphs of a summary: its blocks between blank lines, stripped, none empty."""
    return [p.strip() for p in _BLANK_LINE.split(summary.strip()) if p.strip()]


def fresh_state() -> CompactionState:
    """Return the state of a session that was never compacted."""
    return CompactionState()


#: ``origin`` of a state imported from an agent-runtime document (its summary has watermark 0).
IMPORTED = IMPORTED_ORIGIN


def parse_state(data: Any) -> CompactionState:
    """Read a stored document; a corrupted one gives a fresh state and a warning.

    ``None`` (never saved) gives a fresh state with no warning. The returned
    state's ``reset_reason`` says what was wrong when a reset happened.
    """
    if data is None:
        return fresh_state()
    if isinstance(data, Mapping) and isinstance(data.get(STALE_KEY), str):
        log.info("compaction state is stale (%s); it will be rebuilt", data[STALE_KEY])
        return dataclasses.replace(fresh_state(), reset_reason=f"stale: {data[STALE_KEY]}")
    try:
        return _parse(data)
    except _Corrupt as exc:
        log.warning(
            "compaction state is corrupted (%s); resetting, it will be rebuilt from "
            "the stored messages",
            exc,
        )
        return dataclasses.replace(fresh_state(), reset_reason=str(exc))


class _Corrupt(Exception):
    pass


def _parse(data: Any) -> CompactionState:
    if not isinstance(data, Mapping):
        raise _Corrupt(f"document is {type(data).__name__}, not an object")
    summary = _typed(data, "summary", str, "")
    version = _count(data, "summary_version")
    watermark = _count(data, "watermark")
    if version == 0 and (summary or watermark):
        raise _Corrupt("summary or watermark present with summary_version 0")
    # A summary with watermark 0 covers history older than anything stored here:
    # only legal for an imported agent-runtime ``long_term_summary``.
    if version > 0 and watermark == 0 and data.get("origin") != IMPORTED:
        raise _Corrupt(f"summary_version {version} with no watermark")
    try:
        important = validate_important_data(data.get("important_data") or {})
    except LLMBadResponse as exc:
        raise _Corrupt(f"important_data: {exc}") from None
    when = data.get("last_summarized_at")
    last: datetime | None = None
    if when is not None:
        if not isinstance(when, str):
            raise _Corrupt(f"last_summarized_at is {type(when).__name__}")
        try:
            last = datetime.fromisoformat(when)
        except ValueError:
            raise _Corrupt(f"last_summarized_at is not a date: {when!r}") from None
    summarizer = data.get("summarizer")
    if summarizer is not None and not isinstance(summarizer, str):
        raise _Corrupt(f"summarizer is {type(summarizer).__name__}")
    last_error = data.get("last_error")
    summary_cites, important_cites = _citations(data.get("citations"), summary)
    citations = data.get("citations")
    exact = isinstance(citations, Mapping) and citations.get("exact") is True
    return CompactionState(
        summary=summary,
        summary_version=version,
        important_data=important,
        watermark=watermark,
        messages_summarized_count=_count(data, "messages_summarized_count"),
        summarizer=summarizer,
        last_summarized_at=last,
        compactions=_count(data, "compactions"),
        llm_failures=_count(data, "llm_failures"),
        compressions=_count(data, "compressions"),
        last_error=last_error if isinstance(last_error, str) else None,
        summary_cites=summary_cites,
        important_cites=important_cites,
        exact_cites=exact,
        covers_from=_when(data.get("covers"), 0),
        covers_until=_when(data.get("covers"), 1),
    )


def _when(covers: Any, index: int) -> datetime | None:
    """One end of the stored time span (an unreadable one is left out, never fatal)."""
    if not isinstance(covers, list) or len(covers) != 2 or not isinstance(covers[index], str):
        return None
    try:
        return datetime.fromisoformat(covers[index])
    except ValueError:
        return None


def _citations(data: Any, summary: str) -> tuple[tuple[Cites, ...], JSON]:
    """Stored citations; what cannot be read is dropped (the summary stays)."""
    if data is None:
        return (), {}
    if not isinstance(data, Mapping):
        log.warning("compaction state: citations are %s, dropped", type(data).__name__)
        return (), {}
    raw = data.get("summary") or []
    paragraphs: list[Cites] = []
    for item in raw if isinstance(raw, list) else [None]:
        cites = read_cites(item)
        if cites is None:
            log.warning("compaction state: summary citations unreadable, dropped")
            paragraphs = []
            break
        paragraphs.append(cites)
    if paragraphs and len(paragraphs) != len(split_paragraphs(summary)):
        log.warning("compaction state: summary citations do not match its paragraphs, dropped")
        paragraphs = []
    important: JSON = {}
    fields = data.get("important_data") or {}
    for name, items in fields.items() if isinstance(fields, Mapping) else []:
        if not isinstance(items, Mapping):
            continue
        kept = {str(k): read_cites(v) for k, v in items.items()}
        important[str(name)] = {k: to_json(v) for k, v in kept.items() if v}
    return tuple(paragraphs), important


def _typed(data: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise _Corrupt(f"{key} is {type(value).__name__}, expected {kind.__name__}")
    return value


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Corrupt(f"{key} must be a non-negative integer, got {value!r}")
    return value
