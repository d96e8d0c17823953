"""Writes to several sessions as one group, on every backend: all of them stay, or none.

SQLite and PostgreSQL run the group in one transaction (``atomic()``; a nested
group joins the outer one); jsondir and the in-memory store delete what the
group wrote. Either way, after an error inside the group nothing it wrote is
visible, and what was stored before it is untouched.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram.models import NewMessage
from engram.store.base import Store
from engram.store.grouping import Atomic, all_or_nothing

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class Boom(Exception):
    """The failure the test raises inside the group."""


def _write(store: Store, session: str, text: str) -> None:
    store.append("g", session, [NewMessage("user", text, T0)], [3])


def _contents(store: Store) -> dict[str, list[str]]:
    return {
        info.id: [m.content for m in store.page("g", info.id, limit=100)]
        for info in store.list_sessions("g", limit=100)
    }


def test_an_error_inside_the_group_leaves_only_what_was_there(store: Store) -> None:
    _write(store, "old", "before the group")
    with pytest.raises(Boom), all_or_nothing(store) as group:
        for name in ("old", "new-1", "new-2"):
            group.touch("g", name)
            _write(store, name, f"{name} in the group")
        group.touch("g", "new-2")
        store.save_state("g", "new-2", "summary", {"text": "x"}, expected_version=0)
        raise Boom
    assert _contents(store) == {"old": ["before the group"]}
    assert store.load_state("g", "new-2", "summary") is None


def test_a_group_that_ends_well_keeps_everything(store: Store) -> None:
    with all_or_nothing(store) as group:
        for name in ("a", "b"):
            group.touch("g", name)
            _write(store, name, f"{name} 1")
            _write(store, name, f"{name} 2")
    assert _contents(store) == {"a": ["a 1", "a 2"], "b": ["b 1", "b 2"]}


def test_a_nested_group_joins_the_outer_transaction(store: Store) -> None:
    if not isinstance(store, Atomic):
        pytest.skip("this backend has no transactions: its groups are undone by hand")
    with pytest.raises(Boom), store.atomic():
        _write(store, "outer", "outer")
        with store.atomic():
            _write(store, "inner", "inner")
        assert set(_contents(store)) == {"outer", "inner"}  # reads see the group's writes
        raise Boom
    assert _contents(store) == {}
