"""Every deletion over HTTP answers its receipt, kept in the audit trail too: a whole
session, a whole scope without ``forget``, and a scope's memories. On every backend."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from engram.engine import Engram

SECRET = "We decided the passport number X7Q4481ZB stays in the blue folder."


def _lines(receipt: dict[str, Any], kind: str) -> list[tuple[str, str]]:
    return [(line["ref"], line["outcome"]) for line in receipt["derived"] if line["kind"] == kind]


def _trail(api: TestClient, scope: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = api.get(f"/v1/scopes/{scope}/memories/audit").json()["events"]
    return events


def _conversation(api: TestClient, scope: str, session: str) -> list[int]:
    path = f"/v1/scopes/{scope}/sessions/{session}/messages"
    batch = {
        "messages": [
            {"role": "user", "content": SECRET},
            {"role": "assistant", "content": "Noted."},
        ]
    }
    answer = api.post(path, json=batch)
    assert answer.status_code in (200, 201), answer.text
    return [m["id"] for m in answer.json()["messages"]]


def test_deleting_a_session_answers_its_receipt(
    mem: Engram, make_api: Callable[..., TestClient]
) -> None:
    api = make_api(mem)
    ids = _conversation(api, "app", "s1")
    made = api.post("/v1/scopes/app/memories", json={"content": SECRET}).json()

    answer = api.delete("/v1/scopes/app/sessions/s1")

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["success"] is True and "X7Q4481ZB" not in answer.text
    receipt = body["receipt"]
    assert receipt["action"] == "delete_session" and receipt["session"] == "s1"
    assert receipt["messages"] == [[ids[0], ids[-1]]] and receipt["message_count"] == 2
    assert receipt["counts"] == {"sessions": 1, "messages": 2}
    assert _lines(receipt, "session") == [("s1", "removed")]
    assert _lines(receipt, "memory") == [(f"memory {made['id']}", "unchanged")]
    assert _lines(receipt, "search_index") == [("2 rows", "removed")]
    (event,) = [e for e in _trail(api, "app") if e.get("action") == "delete_session"]
    assert {"success": True, **event["receipt"]} == receipt
    assert api.get("/v1/scopes/app/sessions/s1").status_code == 404
    again = api.delete("/v1/scopes/app/sessions/s1")
    assert again.status_code == 404 and again.json()["error"]["type"] == "session_not_found"


def test_deleting_a_scope_answers_its_receipt(
    mem: Engram, make_api: Callable[..., TestClient]
) -> None:
    api = make_api(mem)
    _conversation(api, "gone", "s1")
    _conversation(api, "gone", "s2")
    made = api.post("/v1/scopes/gone/memories", json={"content": SECRET}).json()

    answer = api.delete("/v1/scopes/gone")

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["success"], body["sessions"], body["messages"], body["memories"]) == (
        True,
        2,
        4,
        1,
    )
    receipt = body["receipt"]
    assert receipt["action"] == "purge_scope" and receipt["session"] is None
    assert receipt["counts"] == {"sessions": 2, "messages": 4, "memories": 1}
    assert _lines(receipt, "session") == [("every session (2)", "removed")]
    assert _lines(receipt, "memory") == [(f"memory {made['id']}", "removed")]
    trail = _trail(api, "gone")
    (event,) = [e for e in trail if e["event"] == "scope_purged"]
    assert {"success": True, **event["receipt"]} == receipt and "X7Q4481ZB" not in json.dumps(trail)


def test_purging_memories_answers_its_receipt(
    mem: Engram, make_api: Callable[..., TestClient]
) -> None:
    api = make_api(mem)
    made = [
        api.post("/v1/scopes/app/memories", json={"content": text}).json()["id"]
        for text in (SECRET, "The team prefers trams to taxis.")
    ]

    answer = api.delete("/v1/scopes/app/memories")

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["success"] is True and body["deletedCount"] == 2
    receipt = body["receipt"]
    assert receipt["action"] == "memory_purge" and receipt["counts"] == {"memories": 2}
    assert _lines(receipt, "memory") == [(f"memory {i}", "removed") for i in made]
    (event,) = [e for e in _trail(api, "app") if e["event"] == "purge"]
    assert {"success": True, **event["receipt"]} == receipt and event["deleted"] == 2
    assert "X7Q4481ZB" not in answer.text
