"""The dashboard bounds its integers as the REST API does: 2^63 is a 4xx, never a 500.

``?offset=``, ``?after=``, ``?at=``, ``?before=``, ``?budget=`` and the memory id of the
delete form; on every backend (SQLite and PostgreSQL hold 64-bit integers at most).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from engram.engine import Engram
from engram.intake.checks import MAX_MESSAGE_ID
from engram.limits import MAX_BUDGET, MAX_OFFSET
from engram.server import ServerSettings, create_app

HUGE = 2**63
SESSION = "/p/app/s/chat"


@pytest.fixture
def dash(mem: Engram) -> Iterator[TestClient]:
    mem.session("chat", "app").add("user", "hello")
    mem.memories("app").create("Pro costs $14.")
    with TestClient(create_app(mem, ServerSettings(key_cache_seconds=0))) as client:
        yield client


@pytest.mark.parametrize(
    "url",
    [
        f"/p/app?offset={HUGE}",
        f"/p/app?offset={MAX_OFFSET + 1}",
        f"{SESSION}?after={HUGE}",
        f"{SESSION}?after=0",
        f"{SESSION}?at={HUGE}",
        f"{SESSION}?budget={MAX_BUDGET + 1}",
        f"{SESSION}/history?after={HUGE}",
        f"{SESSION}/history?before={HUGE}",
        f"{SESSION}/prompt?budget={HUGE}",
    ],
)
def test_an_integer_past_the_bound_is_422_naming_it(dash: TestClient, url: str) -> None:
    answer = dash.get(url)
    assert answer.status_code == 422, answer.text
    name = url.rsplit("?", 1)[1].split("=")[0]
    assert name in answer.text


@pytest.mark.parametrize(
    ("url", "status"),
    [
        (f"/p/app?offset={MAX_OFFSET}", 200),
        (f"{SESSION}?after={MAX_MESSAGE_ID}", 200),
        (f"{SESSION}?at={MAX_MESSAGE_ID}", 404),
        (f"{SESSION}?at=1", 200),  # the first message: the history opens at it
        (f"{SESSION}/history?before={MAX_MESSAGE_ID}", 200),
    ],
)
def test_the_bound_itself_is_served(dash: TestClient, url: str, status: int) -> None:
    assert dash.get(url).status_code == status


def test_a_memory_id_past_the_bound_is_refused_and_deletes_nothing(
    dash: TestClient, mem: Engram
) -> None:
    for memory_id, status in [(HUGE, 422), (MAX_MESSAGE_ID, 404), (0, 422)]:
        answer = dash.post(f"/p/app/memories/{memory_id}/delete", follow_redirects=False)
        assert answer.status_code == status, (memory_id, answer.text)
    assert len(mem.memories("app").list()) == 1
