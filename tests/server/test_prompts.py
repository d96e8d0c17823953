"""Recorded prompts over REST: the turn list, a turn rebuilt, a diff, a what-if."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.provenance.test_interfaces import snapshot

from engram.engine import Engram


class TestRest:
    URL = "/v1/scopes/p/sessions/s"

    def test_prompts_replay_and_diff(self, api: TestClient, sqlite_engram: Engram) -> None:
        sent = []
        for i in range(3):
            api.post(f"{self.URL}/messages", json={"role": "user", "content": f"hello {i}"})
            tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
            built = api.post(f"{self.URL}/context", json={"budget": 500, "tools": tools}).json()
            sent.append(built["messages"])
        page = api.get(f"{self.URL}/prompts", params={"limit": 2}).json()
        assert [t["turn"] for t in page["turns"]] == [1, 2] and page["next_after"] == 2
        assert page["turns"][0]["via"] == "rest"
        shown = api.get(f"{self.URL}/prompts/3").json()
        assert shown["verified"] is True and shown["messages"] == sent[2]
        assert shown["tools"] == tools
        same = api.get(f"{self.URL}/prompts/2/diff", params={"against": 2}).json()
        assert same["identical"] is True
        moved = api.get(f"{self.URL}/prompts/3/diff", params={"against": 1}).json()
        assert moved["entered"] and moved["shared_prefix"]["exact"] is True
        missing = api.get(f"{self.URL}/prompts/9")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "turn_not_found"
        before = snapshot(sqlite_engram, "p", "s")
        tried = api.post(f"{self.URL}/replay", json={"policy": "lean", "budget": 300}).json()
        assert tried["policy"] == "lean" and tried["turns"] == 3 and len(tried["per_turn"]) == 3
        assert snapshot(sqlite_engram, "p", "s") == before
        refused = api.post(f"{self.URL}/replay", json={"policy": "nope"})
        assert refused.status_code == 422 and "nope" in refused.json()["error"]["message"]
