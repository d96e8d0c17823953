"""A framework's own documents kept with a session (what the ADK services store state in)."""

from __future__ import annotations

import threading

import pytest

from engram.engine import Engram
from engram.errors import InvalidQuery
from engram.models import JSON


def test_documents_are_per_session_and_apart_from_engrams_own(mem: Engram) -> None:
    assert mem.app_document("p", "s", "adk") == {}
    saved = mem.update_app_document("p", "s", "adk", lambda doc: {**doc, "a": 1})
    assert saved == {"a": 1} == mem.app_document("p", "s", "adk")
    assert mem.app_document("p", "other", "adk") == {}
    assert mem.app_document("q", "s", "adk") == {}
    mem.update_app_document("p", "s", "agent_state", lambda doc: {"facts": "not engram's"})
    assert mem.session("s", scope="p").agent_state().facts == ()  # no collision
    assert mem.update_app_document("p", "s", "adk", lambda doc: None) == {"a": 1}
    with pytest.raises(InvalidQuery, match="1-64"):
        mem.app_document("p", "s", "")


def test_concurrent_updates_lose_nothing(mem: Engram) -> None:
    def bump(doc: JSON) -> JSON:
        return {"n": doc.get("n", 0) + 1}

    def work() -> None:
        for _ in range(15):
            mem.update_app_document("p", "s", "counter", bump)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mem.app_document("p", "s", "counter") == {"n": 45}
