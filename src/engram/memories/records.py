"""Limits, metadata and text comparison of long-term memories. Pure code.

A memory is a :class:`~engram.models.MemoryRecord`: id, scope, content,
created and updated times, source session and metadata. The metadata
is ``{importance: 0-10, tags: [str], relatedConversations: [str]}``; Engram
spells the keys ``importance``, ``tags`` and ``related_sessions`` and keeps any
other JSON key the caller adds.

Two memories *repeat* each other when their normalized texts are equal or
their word sets (stop words left out) overlap by at least
:data:`DUPLICATE_JACCARD` (Jaccard index);
a repeated memory is not stored twice.

A memory made from a conversation records its sources (``metadata["sources"]``:
session -> id ranges of the messages it was written from), so forgetting a
message finds the memories that used it (:mod:`engram.forgetting`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engram.compaction.citations import from_ids, read_cites, to_json, union
from engram.errors import ConfigError, InvalidQuery
from engram.flags import flags
from engram.intake.checks import MAX_CONTENT_BYTES, json_value, text_field
from engram.models import JSON, MemoryRecord
from engram.receipts import MEMORY, REMOVED, Derived, Receipt

#: Memories a scope keeps by default.
DEFAULT_CAP = 10
#: Largest cap accepted: memories are injected into every prompt of the scope.
MAX_CAP = 100
#: Length a memory aims at, in characters.
TARGET_CHARS = 200
#: Longest memory content accepted (created, edited or merged), in characters.
#: A merge of two ~200-character memories fits; anything longer is refused.
MAX_CONTENT_CHARS = 600
#: Word-set overlap at or above which a new memory repeats an existing one.
DUPLICATE_JACCARD = 0.8
#: Importance scale.
IMPORTANCE_RANGE = (0, 10)
#: Largest metadata document accepted, as JSON text.
MAX_METADATA_CHARS = 4000

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: Words too common to tell two memories apart (left out of word sets).
STOPWORDS = frozenset(
    "a an and are as at be by did do for from had has have i in is it me my of on or our"
    " the their there this to was we were what when where which who why with you your".split()
)


def check_content(content: object) -> str:
    """The content, stripped, if it is usable as a memory.

    Raises:
        InvalidQuery: not text, empty, or longer than :data:`MAX_CONTENT_CHARS`.

    """
    if not isinstance(content, str):
        raise InvalidQuery(
            f"memory content must be text, got {type(content).__name__}", field="content"
        )
    text = " ".join(content.split())
    if not text:
        raise InvalidQuery("memory content is empty", field="content")
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidQuery(
            f"memory content is {len(text)} characters; the limit is {MAX_CONTENT_CHARS}",
            field="content",
        )
    # The same text rule as messages (no NUL, no lone surrogate) on every backend.
    return text_field("memory content", text, max_bytes=4 * MAX_CONTENT_CHARS, error=InvalidQuery)


def check_metadata(metadata: Mapping[str, Any] | None) -> JSON:
    """A validated copy of memory metadata (empty when None).

    Raises:
        InvalidQuery: not an object, not JSON, too large, importance outside
            0-10, or tags / related sessions that are not lists of text.

    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidQuery(
            f"memory metadata must be an object, got {type(metadata).__name__}", field="metadata"
        )
    out: JSON = json_value(
        "memory metadata", metadata, max_bytes=MAX_CONTENT_BYTES, error=InvalidQuery
    )
    text = json.dumps(out)
    if len(text) > MAX_METADATA_CHARS:
        raise InvalidQuery(
            f"memory metadata is {len(text)} characters of JSON; the limit is {MAX_METADATA_CHARS}",
            field="metadata",
        )
    if "importance" in out:
        value = out["importance"]
        low, high = IMPORTANCE_RANGE
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not low <= value <= high
        ):
            raise InvalidQuery(
                f"memory importance must be a number from {low} to {high}, got {value!r}",
                field="metadata.importance",
            )
    for key in ("tags", "related_sessions"):
        if key in out and (
            not isinstance(out[key], list) or not all(isinstance(v, str) for v in out[key])
        ):
            raise InvalidQuery(
                f"memory metadata {key!r} must be a list of text", field=f"metadata.{key}"
            )
    return out


#: Metadata key of where a memory came from: session -> id ranges of its messages
#: (``{"chat-42": [[112, 140]]}``), written when it is made from a conversation.
SOURCES_KEY = "sources"


def source_ranges(session: str, ids: Iterable[int], order: Sequence[int]) -> JSON:
    """The ``sources`` metadata of a memory made from messages ``ids`` of ``session``."""
    return {session: to_json(from_ids(ids, order))}


def merged_metadata(target: Mapping[str, Any], merged_in: Mapping[str, Any]) -> JSON:
    """``target``'s metadata once ``merged_in``'s memory was merged into it: sources joined."""
    out = dict(target)
    mine, theirs = target.get(SOURCES_KEY), merged_in.get(SOURCES_KEY)
    if isinstance(theirs, Mapping):
        joined = dict(mine) if isinstance(mine, Mapping) else {}
        for session, ranges in theirs.items():
            joined[session] = to_json(
                union(read_cites(joined.get(session)) or (), read_cites(ranges) or ())
            )
        out[SOURCES_KEY] = joined
    related = [*out.get("related_sessions", []), *merged_in.get("related_sessions", [])]
    if related:
        out["related_sessions"] = list(dict.fromkeys(r for r in related if isinstance(r, str)))
    return out


def refuse_flagged(text: str) -> None:
    """Refuse memory text that reads like instructions to a model, naming what it reads like.

    Raises:
        InvalidQuery: ``text`` is flagged (:func:`engram.flags.flags`).

    """
    found = flags(text)
    if found:
        raise InvalidQuery(
            f"content: the memory reads like instructions to a model ({', '.join(found)}); "
            "memories keep facts, not instructions"
        )


def memory_receipt(scope: str, memory_id: int) -> Receipt:
    """The receipt of deleting one memory: it is gone, and prompts are built without it."""
    line = Derived(
        MEMORY, f"memory {memory_id}", REMOVED, "the scope's next prompts are built without it"
    )
    return Receipt("memory_delete", scope, None, derived=(line,))


def purge_receipt(scope: str, memory_ids: list[int], removed: int) -> Receipt:
    """The receipt of purging a scope's memories (``memory_ids``: those seen before)."""
    why = "purged; the scope's next prompts are built without it"
    lines = tuple(Derived(MEMORY, f"memory {i}", REMOVED, why) for i in memory_ids)
    return Receipt("memory_purge", scope, None, derived=lines, counts={"memories": removed})


def check_cap(cap: object) -> int:
    """The cap, if it is a whole number from 1 to :data:`MAX_CAP`.

    Raises:
        ConfigError: anything else.

    """
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_CAP:
        raise ConfigError(f"memory cap must be an integer from 1 to {MAX_CAP}, got {cap!r}")
    return cap


def normalize(text: str) -> str:
    """Case-, accent- and punctuation-insensitive form of ``text`` for comparisons."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in folded if not unicodedata.combining(c))
    return " ".join(_WORD.findall(plain))


def word_set(text: str) -> frozenset[str]:
    """The distinct normalized words of ``text``, stop words left out (unless that is all)."""
    words = frozenset(normalize(text).split())
    return (words - STOPWORDS) or words


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard index of two word sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def find_duplicate(content: str, existing: Iterable[MemoryRecord]) -> MemoryRecord | None:
    """The first existing memory that ``content`` repeats, or None."""
    norm = normalize(content)
    words = word_set(content)
    for memory in existing:
        if normalize(memory.content) == norm:
            return memory
        if jaccard(words, word_set(memory.content)) >= DUPLICATE_JACCARD:
            return memory
    return None


def memory_json(memory: MemoryRecord) -> JSON:
    """A memory as plain JSON-ready data (admin API, audit, tools)."""
    return {
        "id": memory.id,
        "scope": memory.scope,
        "content": memory.content,
        "created_at": memory.created_at.isoformat(),
        "updated_at": memory.updated_at.isoformat(),
        "source_session": memory.source_session,
        "metadata": dict(memory.metadata),
    }


#: What became of one request to remember a conversation.
OUTCOMES = ("created", "duplicate", "deferred", "skipped", "failed")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one request to remember a conversation.

    ``status`` is one of :data:`OUTCOMES`: "created" (``memory`` is the new
    memory, or the one it was merged into), "duplicate" (``memory`` is the
    existing memory it repeats), "deferred" (over the energy budget; done
    later by ``Memories.run_deferred``), "skipped" (nothing to remember) or
    "failed" (logged and audited; the session still ended).
    """

    status: str
    scope: str
    session: str | None
    memory: MemoryRecord | None = None
    detail: str = ""

    def to_dict(self) -> JSON:
        """Plain JSON-ready data."""
        return {
            "status": self.status,
            "scope": self.scope,
            "session": self.session,
            "memory": memory_json(self.memory) if self.memory is not None else None,
            "detail": self.detail,
        }


#: What :meth:`Memories.create` did with the new text.
CREATE_STATUSES = ("created", "duplicate", "merged", "dropped")


@dataclass(frozen=True, slots=True, eq=False)
class CreatedMemory(MemoryRecord):
    """The memory :meth:`Memories.create` returns, with what the cap did to make room.

    It is the memory now holding the text (a :class:`MemoryRecord`). ``status``
    is one of :data:`CREATE_STATUSES`: "created" (stored as given),
    "duplicate" (an existing memory repeats it; that one is returned),
    "merged" (the model folded it into an existing memory, returned as
    merged) or "dropped" (compaction deleted the new memory itself; the
    deleted record is returned). ``evicted`` holds the memories compaction
    deleted to stay at the cap, as they were before deletion (the new one
    included when "dropped"); ``merged_from`` the merged memory as it was
    before the merge.
    """

    status: str = "created"
    evicted: tuple[MemoryRecord, ...] = ()
    merged_from: MemoryRecord | None = None

    @classmethod
    def of(
        cls,
        record: MemoryRecord,
        status: str,
        *,
        evicted: Iterable[MemoryRecord] = (),
        merged_from: MemoryRecord | None = None,
    ) -> CreatedMemory:
        """Wrap a stored record with what happened to it."""
        return cls(
            id=record.id,
            scope=record.scope,
            content=record.content,
            created_at=record.created_at,
            updated_at=record.updated_at,
            source_session=record.source_session,
            metadata=record.metadata,
            status=status,
            evicted=tuple(evicted),
            merged_from=merged_from,
        )

    def __eq__(self, other: object) -> bool:
        """Equal to a record with the same stored fields (what happened is not compared)."""
        if isinstance(other, CreatedMemory):
            other = other.record()
        return isinstance(other, MemoryRecord) and self.record() == other

    __hash__ = None  # type: ignore[assignment]  # like MemoryRecord: metadata is a dict

    def record(self) -> MemoryRecord:
        """The plain stored record."""
        return MemoryRecord(
            id=self.id,
            scope=self.scope,
            content=self.content,
            created_at=self.created_at,
            updated_at=self.updated_at,
            source_session=self.source_session,
            metadata=self.metadata,
        )
