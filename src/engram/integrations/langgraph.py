"""LangGraph's long-term memory store over Engram's memories (extra: ``langgraph``).

::

    from engram.integrations.langgraph import EngramStore

    store = EngramStore(engram)                     # any Engram (or AsyncEngram)
    graph = builder.compile(store=store)            # nodes get it as ``store``
    store.put(("users", "42"), "theme", {"content": "Prefers a dark theme.", "mode": "dark"})
    store.search(("users",), query="theme", filter={"mode": "dark"})

:class:`EngramStore` is a ``langgraph.store.base.BaseStore``. A namespace is
an Engram scope (its labels joined with ``.``, which LangGraph forbids inside
a label, so ``("users", "42")`` is the scope ``users.42``); an item is one of
the scope's long-term memories, so what a graph remembers is in the prompts
Engram builds for that scope, in its search, on the dashboard and in the
audit trail. The item's value is kept verbatim in the memory's metadata; the
memory's text is the value's ``content`` (or ``text``) field, else the value
as JSON. Memories Engram wrote itself are items too, keyed by their id.

``search`` with a ``query`` is Engram's memory search (ranked terms, the
score in ``SearchItem.score``); ``filter`` matches the value like LangGraph's
own stores (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, nested
objects). TTLs are supported (minutes after the last write or refreshed
read); an expired item is never returned and is deleted when its namespace
is next read, or by :meth:`EngramStore.sweep_ttl`. Engram keeps at most
``memory_cap`` memories per scope: a new key past it is refused with an
error saying so, never stored by evicting another. ``abatch`` runs the batch
on a worker thread. The ``index`` argument of ``put`` is accepted and
ignored: search is by terms, with no embedding index.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from engram.aio import AsyncEngram, offload
from engram.engine import Engram
from engram.errors import MissingDependency
from engram.memories.keyed import KeyedMemories, key_of
from engram.memories.records import MAX_CONTENT_CHARS
from engram.memories.search import rank
from engram.models import MemoryRecord

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        validate_op_namespace,
    )
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise MissingDependency.extra("engram.integrations.langgraph", "langgraph", exc) from exc

__all__ = ["EngramStore"]

#: Metadata field of a memory holding the item's value, verbatim.
VALUE = "value"
#: Value fields whose text becomes the memory's text, first found wins.
TEXT_FIELDS = ("content", "text", "memory")
_SEP = "."


class EngramStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are Engram memories (see the module docs)."""

    supports_ttl = True

    def __init__(self, engram: Engram | AsyncEngram, *, ttl: TTLConfig | None = None) -> None:
        """Keep the graph's items in ``engram``.

        Args:
            engram: Where the memories live; it stays open (the caller owns it).
            ttl: LangGraph's TTL settings: ``default_ttl`` (minutes) for puts that
                name none, ``refresh_on_read`` (default True).

        """
        self.engram = engram.sync if isinstance(engram, AsyncEngram) else engram
        self.ttl_config = ttl

    # -- BaseStore ------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations: reads see the store as it was before the batch's writes."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op  # the last write of a key wins
                results.append(None)
            else:
                raise TypeError(f"unknown store operation: {type(op).__name__}")
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on a worker thread (Engram's store calls block)."""
        return await offload(self.batch, list(ops))

    def sweep_ttl(self) -> int:
        """Delete every expired item of every namespace now; returns how many."""
        return sum(self._keyed(scope).sweep() for scope in self.engram.scopes())

    # -- operations -----------------------------------------------------------------

    def _keyed(self, scope: str) -> KeyedMemories:
        return KeyedMemories(self.engram.memories(scope))

    def _get(self, op: GetOp) -> Item | None:
        scope = _scope(op.namespace)
        found = self._keyed(scope).get(op.key, refresh=op.refresh_ttl)
        return None if found is None else _item(found, tuple(op.namespace))

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        keyed = self._keyed(_scope(namespace))
        if op.value is None:
            keyed.delete(op.key)
            return
        value = dict(op.value)
        keyed.put(op.key, _text(value), {VALUE: value}, ttl=op.ttl)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        found: list[tuple[float | None, MemoryRecord, tuple[str, ...]]] = []
        for scope, namespace in self._namespaces(prefix=tuple(op.namespace_prefix)):
            for memory in self._keyed(scope).items():
                if not op.filter or _matches(_value(memory), op.filter):
                    found.append((None, memory, namespace))
        if op.query:
            places = {m.id: ns for _, m, ns in found}
            ranked = rank(op.query, [m for _, m, _ in found], limit=len(found))
            found = [(score, m, places[m.id]) for score, m in ranked]
        page = found[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            page = [(s, self._keyed(_scope(ns)).touch(m), ns) for s, m, ns in page]
        return [_search_item(memory, namespace, score) for score, memory, namespace in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [
            namespace
            for scope, namespace in self._namespaces(prefix=())
            if all(_does_match(c, namespace) for c in op.match_conditions or ())
            and self._keyed(scope).items()
        ]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    def _namespaces(self, *, prefix: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        """``(scope, namespace)`` of every scope that reads as a namespace under ``prefix``."""
        out = []
        for scope in self.engram.scopes():
            namespace = tuple(scope.split(_SEP))
            if all(namespace) and namespace[: len(prefix)] == prefix:
                out.append((scope, namespace))
        return out


def _scope(namespace: Iterable[str]) -> str:
    return _SEP.join(namespace)


def _text(value: Mapping[str, Any]) -> str:
    """The memory text of an item: its first text field, else its JSON (cut to fit)."""
    for name in TEXT_FIELDS:
        field = value.get(name)
        if isinstance(field, Mapping):  # langmem nests {"content": {"content": "..."}}
            field = field.get(name)
        if isinstance(field, str) and field.strip():
            text = field
            break
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= MAX_CONTENT_CHARS else text[: MAX_CONTENT_CHARS - 1] + "…"


def _value(memory: MemoryRecord) -> dict[str, Any]:
    """The item's value: as put, or for a memory Engram wrote itself, its text."""
    value = memory.metadata.get(VALUE)
    if isinstance(value, dict):
        return value
    return {"content": memory.content}


def _item(memory: MemoryRecord, namespace: tuple[str, ...]) -> Item:
    return Item(
        value=_value(memory),
        key=key_of(memory),
        namespace=namespace,
        created_at=_utc(memory.created_at),
        updated_at=_utc(memory.updated_at),
    )


def _search_item(
    memory: MemoryRecord, namespace: tuple[str, ...], score: float | None
) -> SearchItem:
    return SearchItem(
        namespace=namespace,
        key=key_of(memory),
        value=_value(memory),
        created_at=_utc(memory.created_at),
        updated_at=_utc(memory.updated_at),
        score=score,
    )


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's namespace condition: a prefix or suffix, ``*`` matching any label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    if not path:
        return True
    return all(p in ("*", label) for p, label in zip(path, labels, strict=True))


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's value filter: equality, nested objects, and ``$`` comparison operators."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_compare(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, Mapping) and all(
            _matches(value.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_matches(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


_ORDER = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _compare(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in _ORDER:
        try:
            return bool(_ORDER[operator](float(value), float(operand)))
        except (TypeError, ValueError):
            return False  # a missing or non-numeric field is not in range
    raise ValueError(
        f"unsupported filter operator {operator!r}: use $eq, $ne, $gt, $gte, $lt, $lte"
    )
