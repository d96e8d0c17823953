"""Writing an import: checked once, written in parts that move the progress bar, all or nothing."""

from __future__ import annotations

from typing import Any

import pytest

from engram import ingest as ingest_module
from engram.engine import Engram
from engram.ingest import ingest
from engram.transfer.importers import IMPORT_KEY, ImportBatch


class Boom(Exception):
    """Raised by the test's progress callback in the middle of the import."""


def _batch(session: str, n: int, *, tag: str = "") -> ImportBatch:
    messages: list[dict[str, Any]] = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"{tag}message {i} of {session} about the launch plan",
            "metadata": {IMPORT_KEY: f"{session}:{i}"},
        }
        for i in range(n)
    ]
    return ImportBatch(session, messages)


def test_a_long_session_moves_the_progress_bar_in_parts(
    mem: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_module, "WRITE_CHUNK", 3)
    steps: list[int] = []
    report = ingest(mem, "p", [_batch("long", 10), _batch("short", 2)], advance=steps.append)
    assert [s for s in steps if s] == [3, 3, 3, 1, 2]
    assert (report.new, report.skipped, report.sessions) == (12, 0, 2)
    stored = mem.session("long", scope="p").messages(limit=100)
    assert [m.content for m in stored] == [m["content"] for m in _batch("long", 10).messages]
    info = mem.session("long", scope="p").info()
    assert info is not None and info.message_count == 10
    assert (
        info.token_count
        == sum(m.tokens for m in stored)
        == report.tokens - sum(m.tokens for m in mem.session("short", scope="p").messages(limit=10))
    )


def test_a_failure_after_some_parts_leaves_nothing(
    mem: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_module, "WRITE_CHUNK", 3)
    mem.session("long", scope="p").add("user", "there before the import")
    written: list[int] = []

    def advance(n: int) -> None:
        written.append(n)
        if sum(written) >= 6:  # two parts of the long session are written
            raise Boom

    with pytest.raises(Boom):
        ingest(mem, "p", [_batch("new", 2), _batch("long", 10)], advance=advance)
    assert [m.content for m in mem.session("long", scope="p").messages()] == [
        "there before the import"
    ]
    assert mem.session("new", scope="p").messages() == []
    # The same import again writes everything.
    report = ingest(mem, "p", [_batch("new", 2), _batch("long", 10)])
    assert report.new == 12 and report.skipped == 0


def test_reimport_adds_only_what_is_new(mem: Engram) -> None:
    ingest(mem, "p", [_batch("s", 4)])
    report = ingest(mem, "p", [_batch("s", 6)])
    assert (report.new, report.skipped) == (2, 4)
    assert len(mem.session("s", scope="p").messages()) == 6
