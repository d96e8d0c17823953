"""A session that does not exist is 404 on every route under it, with the CLI's words.

Appending (``POST .../messages``) and ``PUT .../sessions/{session}`` create a
session; every other route under a session answers 404 until one of them has.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.cli.harness import Cli

from engram.engine import Engram

SESSION = "/v1/scopes/p/sessions/ghost"

#: (method, path under the session, query, body): every route under a session but the writers.
ROUTES: list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]] = [
    ("GET", "", None, None),
    ("GET", "/messages", None, None),
    ("GET", "/search", {"q": "pricing"}, None),
    ("GET", "/by-date", {"when": "today"}, None),
    ("GET", "/by-date", {"when": "today", "all_sessions": "true"}, None),
    ("GET", "/extended", None, None),
    ("GET", "/stats", None, None),
    ("GET", "/compaction", None, None),
    ("GET", "/agent-state", None, None),
    ("POST", "/context", None, {"budget": 1000}),
    ("POST", "/context", None, {"budget": 1000, "compact": False}),
    ("POST", "/tools/search_history", None, {"arguments": {"query": "pricing"}}),
    ("POST", "/tools/get_memory_stats", None, {}),
    ("POST", "/compact", None, {}),
    ("DELETE", "/messages", None, None),
    ("GET", "/prompts", None, None),
    ("POST", "/replay", None, {"policy": "lean"}),
    ("GET", "/prompts/1", None, None),
    ("GET", "/prompts/1/diff", {"against": 1}, None),
    ("POST", "/end", None, {}),
    ("DELETE", "", None, None),
]
#: A session made with PUT has no recorded turn: these answer 404 (turn not found) then.
NO_TURN = 4


def _call(api: TestClient, route: tuple[str, str, Any, Any]) -> Any:
    method, suffix, params, body = route
    return api.request(method, SESSION + suffix, params=params, json=body)


def test_the_cli_says_it_this_way(tmp_path: Path) -> None:
    refused = Cli(tmp_path)("stats", "--scope", "p", "--session", "ghost")
    assert refused.exit_code == 1
    assert "Error: no session 'ghost' in scope 'p'" in refused.output


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1] or '/'} {r[2] or r[3]}")
def test_every_route_under_an_unknown_session_is_404(
    api: TestClient, sqlite_engram: Engram, route: tuple[str, str, Any, Any]
) -> None:
    api.post("/v1/scopes/p/sessions/real/messages", json={"role": "user", "content": "pricing"})
    answer = _call(api, route)
    assert answer.status_code == 404, answer.text
    assert answer.json() == {
        "error": {
            "type": "session_not_found",
            "message": "no session 'ghost' in scope 'p'",
            "field": "session",
        }
    }
    assert sqlite_engram.session_info("ghost", "p") is None  # the refused read created nothing


@pytest.mark.parametrize("route", ROUTES[1:-NO_TURN], ids=lambda r: f"{r[0]} {r[1]} {r[2] or r[3]}")
def test_a_session_made_with_put_is_readable_before_its_first_message(
    api: TestClient, route: tuple[str, str, Any, Any]
) -> None:
    assert api.put(SESSION, json={"policy": "lean"}).status_code == 200
    answer = _call(api, route)
    assert answer.status_code == 200, answer.text


def test_appending_creates_the_session(api: TestClient) -> None:
    stored = api.post(f"{SESSION}/messages", json={"role": "user", "content": "hello"})
    assert stored.status_code == 201
    assert [m["content"] for m in api.get(f"{SESSION}/messages").json()["messages"]] == ["hello"]
    context = api.post(f"{SESSION}/context", json={"budget": 1000}).json()
    assert context["messages"][-1]["content"] == "hello"


def test_the_list_covers_every_route_under_a_session(api: TestClient) -> None:
    under = "/v1/scopes/{scope}/sessions/{session}"
    doc = api.get("/openapi.json").json()
    documented = {
        (method.upper(), path[len(under) :])
        for path, item in doc["paths"].items()
        if path.startswith(under)
        for method in item
    }
    creators = {("POST", "/messages"), ("PUT", "")}
    named = (("/tools/.*", "/tools/{name}"), ("/prompts/1", "/prompts/{turn}"))
    tested = set()
    for method, path, *_ in ROUTES:
        for pattern, name in named:
            path = re.sub(pattern, name, path)
        tested.add((method, path))
    assert documented - creators == tested
