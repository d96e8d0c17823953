"""Dashboard sign-ins kept in the store (``SignInStore``), on every backend that keeps them.

SQLite and PostgreSQL keep them beside the API keys, so every process on the
database shares them: two store objects here stand for two server processes.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.store import Store, open_store
from engram.store.api_keys import has_api_keys
from engram.store.sign_ins import SignInStore, has_sign_ins

NOW = 1_800_000_000.0
_EXAMPLES = itertools.count()  # names unique across Hypothesis examples on one store


def _hash(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


@pytest.fixture
def sign_ins(store: Store) -> SignInStore:
    if not has_sign_ins(store):
        pytest.skip("this backend keeps sign-ins in the server process")
    assert has_api_keys(store)
    return store


@pytest.fixture
def other(store_url: str, sign_ins: SignInStore) -> Iterator[SignInStore]:
    """A second store on the same database: another server process."""
    opened = open_store(store_url)
    try:
        assert has_sign_ins(opened)
        yield opened
    finally:
        opened.close()


def _key(store: SignInStore, name: str = "k") -> int:
    assert has_api_keys(store)
    return store.add_api_key(
        _hash(f"key {name}"), prefix="egk_x", label=name, admin=False, scopes=["app"], writable=True
    ).id


def test_a_sign_in_is_shared_until_deleted(sign_ins: SignInStore, other: SignInStore) -> None:
    key_id = _key(sign_ins)
    sign_ins.add_sign_in(_hash("a"), key_id, NOW + 60, now=NOW, limit=100)
    for store in (sign_ins, other):
        found = store.find_sign_in(_hash("a"), NOW + 1)
        assert found is not None and found.id == key_id and found.scopes == ("app",)
        assert store.find_sign_in(_hash("b"), NOW + 1) is None
    other.delete_sign_in(_hash("a"))
    other.delete_sign_in(_hash("never opened"))  # nothing happens
    assert sign_ins.find_sign_in(_hash("a"), NOW + 1) is None
    assert other.find_sign_in(_hash("a"), NOW + 1) is None


def test_a_sign_in_ends_and_ended_ones_are_removed(sign_ins: SignInStore) -> None:
    key_id = _key(sign_ins)
    sign_ins.add_sign_in(_hash("a"), key_id, NOW + 10, now=NOW, limit=100)
    assert sign_ins.find_sign_in(_hash("a"), NOW + 9.9) is not None
    assert sign_ins.find_sign_in(_hash("a"), NOW + 10) is None
    sign_ins.add_sign_in(_hash("b"), key_id, NOW + 70, now=NOW + 60, limit=100)
    assert sign_ins.find_sign_in(_hash("a"), NOW) is None  # the ended row is gone, not hidden
    assert sign_ins.find_sign_in(_hash("b"), NOW + 61) is not None


def test_a_revoked_key_ends_its_sign_ins(sign_ins: SignInStore, other: SignInStore) -> None:
    kept, revoked = _key(sign_ins, "kept"), _key(sign_ins, "revoked")
    sign_ins.add_sign_in(_hash("a"), kept, NOW + 60, now=NOW, limit=100)
    sign_ins.add_sign_in(_hash("b"), revoked, NOW + 60, now=NOW, limit=100)
    assert has_api_keys(other) and other.revoke_api_key(revoked)
    assert sign_ins.find_sign_in(_hash("a"), NOW) is not None
    assert sign_ins.find_sign_in(_hash("b"), NOW) is None


def test_the_number_of_sign_ins_is_bounded(sign_ins: SignInStore) -> None:
    key_id = _key(sign_ins)
    for i in range(5):
        sign_ins.add_sign_in(_hash(f"s{i}"), key_id, NOW + 100 + i, now=NOW, limit=3)
    found = [sign_ins.find_sign_in(_hash(f"s{i}"), NOW) is not None for i in range(5)]
    assert found == [False, False, True, True, True]  # the ones ending soonest went


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.tuples(st.floats(0, 50), st.floats(1, 100)), min_size=1, max_size=12))
def test_the_newest_sign_in_is_kept_and_never_more_than_the_limit(
    sign_ins: SignInStore, steps: list[tuple[float, float]]
) -> None:
    key_id = _key(sign_ins, f"p{next(_EXAMPLES)}")
    now, added = NOW, []
    for wait, lasts in steps:
        now += wait
        name = f"h{next(_EXAMPLES)}"
        sign_ins.add_sign_in(_hash(name), key_id, now + lasts, now=now, limit=4)
        added.append(name)
        assert sign_ins.find_sign_in(_hash(name), now) is not None
        assert sum(sign_ins.find_sign_in(_hash(n), now) is not None for n in added) <= 4
