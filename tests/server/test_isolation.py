"""Isolation, route by route from the API document: a key bound to one scope reaches no other.

Every operation of ``/openapi.json`` is called with a foreign scope's real
ids (its session, message and memory) by a read-write key of another scope:
each is refused with 403 and the foreign scope is unchanged. A read-only key
of that scope is refused on every operation whose declared rights are write
or admin, and allowed on the reads; a read-write key is refused the admin ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from engram.engine import Engram
from engram.server import create_app
from engram.server.deps import RIGHTS_KEY

VICTIM = "victim"

#: A request body each operation accepts, by path suffix (the rights check comes first anyway).
BODIES: dict[str, Any] = {
    "/messages": {"role": "user", "content": "intruder"},
    "/context": {"budget": 1000},
    "/compact": {},
    "/end": {},
    "/memories": {"content": "planted"},
    "/memories/{memory_id}": {"content": "changed"},
    "/sessions/{session}": {"policy": "lean"},
    "/tools/{name}": {"arguments": {"query": "secret"}},
    "/replay": {"policy": "lean"},
}


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            yield path, method.upper(), operation


def _fill(path: str, ids: dict[str, Any]) -> str:
    for name, value in ids.items():
        path = path.replace("{" + name + "}", str(value))
    return path


def _body(path: str, method: str) -> Any:
    if method in {"GET", "DELETE"}:
        return None
    for suffix, body in BODIES.items():
        if path.endswith(suffix):
            return body
    raise AssertionError(f"no sample body for {method} {path}: add one to BODIES")


def _snapshot(mem: Engram) -> tuple[Any, ...]:
    chat = mem.session("secret-chat", VICTIM)
    return (
        [m.id for m in chat.messages()],
        [(m.id, m.content) for m in mem.memories(VICTIM).list()],
        chat.info(),
        chat.compaction_state(),
    )


@pytest.fixture
def world(sqlite_engram: Engram) -> dict[str, Any]:
    chat = sqlite_engram.session("secret-chat", VICTIM, policy="summary_buffer")
    stored = chat.add_many(
        [
            {"role": "user", "content": "The launch password is swordfish."},
            {"role": "assistant", "content": "Noted, swordfish it is."},
        ]
    )
    memory = sqlite_engram.memories(VICTIM).create("The victim's secret memory.")
    sqlite_engram.session("mine-chat", "mine").add("user", "my own words")
    keys = sqlite_engram.api_keys()
    keys.create(admin=True)
    return {
        "ids": {
            "scope": VICTIM,
            "session": "secret-chat",
            "message_id": stored[0].id,
            "memory_id": memory.id,
            "name": "search_history",
            "turn": 1,
        },
        "other_rw": keys.create(scopes=["mine"]).secret,
        "victim_ro": keys.create(scopes=[VICTIM], read_only=True).secret,
        "victim_rw": keys.create(scopes=[VICTIM]).secret,
    }


def _call(api: TestClient, method: str, path: str, world: dict[str, Any]) -> Any:
    url = _fill(path, world["ids"])
    params = {"q": "swordfish", "when": "today", "against": 1}
    return api.request(method, url, json=_body(path, method), params=params)


def _client(mem: Engram, key: str) -> TestClient:
    from tests.server.conftest import NO_CACHE

    return TestClient(create_app(mem, NO_CACHE), headers={"Authorization": f"Bearer {key}"})


def test_every_v1_operation_declares_its_rights(api: TestClient) -> None:
    doc = api.get("/openapi.json").json()
    for path, method, operation in operations(doc):
        if path.startswith("/v1/"):
            assert operation.get(RIGHTS_KEY) in {"read", "write", "admin"}, (method, path)
        else:
            assert path in {"/healthz", "/readyz", "/metrics"}, path


def test_a_key_of_another_scope_is_refused_everywhere(
    sqlite_engram: Engram, world: dict[str, Any]
) -> None:
    before = _snapshot(sqlite_engram)
    with _client(sqlite_engram, world["other_rw"]) as intruder:
        doc = intruder.get("/openapi.json").json()
        checked = 0
        for path, method, _ in operations(doc):
            if "{scope}" not in path:
                continue
            answer = _call(intruder, method, path, world)
            assert answer.status_code == 403, (method, path, answer.text)
            assert "swordfish" not in answer.text and "secret memory" not in answer.text
            checked += 1
        listed = intruder.get("/v1/scopes").json()["scopes"]
    assert checked >= 20
    assert [s["scope"] for s in listed] == ["mine"]
    assert _snapshot(sqlite_engram) == before


def test_rights_are_enforced_as_declared(sqlite_engram: Engram, world: dict[str, Any]) -> None:
    with (
        _client(sqlite_engram, world["victim_ro"]) as reader,
        _client(sqlite_engram, world["victim_rw"]) as writer,
    ):
        doc = reader.get("/openapi.json").json()
        before = _snapshot(sqlite_engram)
        for path, method, operation in operations(doc):
            if "{scope}" not in path:
                continue
            rights = operation[RIGHTS_KEY]
            if rights in {"write", "admin"}:
                refused = _call(reader, method, path, world)
                assert refused.status_code == 403, (method, path, refused.text)
            else:
                allowed = _call(reader, method, path, world)
                assert allowed.status_code not in {401, 403}, (method, path, allowed.text)
            if rights == "admin":
                assert _call(writer, method, path, world).status_code == 403, (method, path)
        # A read-only key changed nothing (reads may not write; context asked to compact
        # may fold history, which changes no stored message).
        after = _snapshot(sqlite_engram)
        assert after[0] == before[0] and after[1] == before[1]
