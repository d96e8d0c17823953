"""Over HTTP, erasure erases: the audit route never returns the text of a memory that is gone.

Deleting a memory, purging a scope's memories and deleting the scope (admin) keep the
trail's actions, ids and times; ``DELETE /v1/scopes/{scope}?forget=true`` (admin) forgets
the scope, trail and usage included. On every backend.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from engram.engine import Engram

SECRET = "Alice's passport number is X1234567."


def audit(api: TestClient, scope: str = "app") -> str:
    answer = api.get(f"/v1/scopes/{scope}/memories/audit")
    assert answer.status_code == 200
    return answer.text


def test_deleting_a_memory_erases_its_text(
    mem: Engram, make_api: Callable[..., TestClient]
) -> None:
    api = make_api(mem)
    created = api.post("/v1/scopes/app/memories", json={"content": SECRET}).json()
    api.patch(f"/v1/scopes/app/memories/{created['id']}", json={"content": SECRET + " (2031)"})
    assert "X1234567" in audit(api)
    assert api.delete(f"/v1/scopes/app/memories/{created['id']}").status_code == 200
    assert "X1234567" not in audit(api)
    events = api.get("/v1/scopes/app/memories/audit").json()["events"]
    assert [e["event"] for e in events] == ["delete", "update", "create"]
    assert all(e["memory"] == created["id"] for e in events)


def test_purging_and_deleting_the_scope_erase_the_text(
    mem: Engram, make_api: Callable[..., TestClient]
) -> None:
    api = make_api(mem)
    for scope in ("app", "gone"):
        api.post(f"/v1/scopes/{scope}/memories", json={"content": SECRET})
    api.post("/v1/scopes/gone/sessions/s1/messages", json={"role": "user", "content": "hi"})
    purged = api.delete("/v1/scopes/app/memories").json()
    assert purged["success"] is True and purged["deletedCount"] == 1
    assert "X1234567" not in audit(api, "app")
    answer = api.delete("/v1/scopes/gone")
    assert answer.status_code == 200
    body = answer.json()
    assert body.pop("receipt")["action"] == "purge_scope"
    assert body == {
        "success": True,
        "sessions": 1,
        "messages": 1,
        "memories": 1,
        "forgotten": False,
    }
    assert "X1234567" not in audit(api, "gone")
    assert "purge" in audit(api, "gone")  # the trail of what was done stays


def test_forget_is_reachable_for_an_admin_only(
    mem: Engram, make_api: Callable[..., TestClient]
) -> None:
    keys = mem.api_keys()
    admin = make_api(mem, keys.create(admin=True).secret)
    scoped = make_api(mem, keys.create(scopes=["app"]).secret)
    admin.post("/v1/scopes/app/memories", json={"content": SECRET})
    admin.post("/v1/scopes/app/sessions/s1/messages", json={"role": "user", "content": "hi"})
    refused = scoped.delete("/v1/scopes/app", params={"forget": "true"})
    assert refused.status_code == 403 and "admin" in refused.json()["error"]["message"]
    answer = admin.delete("/v1/scopes/app", params={"forget": "true"}).json()
    receipt = answer.pop("receipt")
    assert answer == {
        "success": True,
        "sessions": 1,
        "messages": 1,
        "memories": 1,
        "forgotten": True,
    }
    assert receipt["action"] == "forget_scope" and receipt["counts"]["messages"] == 1
    (event,) = admin.get("/v1/scopes/app/memories/audit").json()["events"]
    assert event["event"] == "scope_forgotten"
    assert admin.get("/v1/scopes/app").json()["sessions"] == 0
