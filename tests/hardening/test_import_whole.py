"""``engram import`` is all-or-nothing on every backend: a bad value anywhere writes nothing.

Before one validation served every backend, values that passed the file check
could fail at write time (NUL in metadata on PostgreSQL and jsondir, a lone
surrogate in a tool-call id on jsondir) after earlier sessions were committed;
others raised a raw exception (a traceback from the CLI).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import engram
from engram.cli import main

GOOD = {"session": "first", "role": "user", "content": "hello"}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

BAD_LINES: dict[str, dict[str, Any]] = {
    "NUL in metadata": {"role": "user", "content": "x", "metadata": {"k": "a\u0000b"}},
    "NUL in a call id": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**CALL, "id": "c\u0000"}],
    },
    "surrogate in a call id": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**CALL, "id": "c\ud800"}],
    },
    "surrogate in arguments": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "\udfff"}}],
    },
    "metadata 5,000 deep": {"role": "user", "content": "x", "metadata": {}},
    "created_at past 9999 in UTC": {
        "role": "user",
        "content": "x",
        "created_at": "9999-12-31T23:00:00-05:00",
    },
    "arguments over the limit": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "x" * 1_100_000}}],
    },
    "name with a newline": {"role": "user", "content": "x", "name": "bob\n"},
}


def _line(label: str) -> str:
    row = {"session": "second", **BAD_LINES[label]}
    if label == "metadata 5,000 deep":
        return (
            json.dumps(row)[:-1].replace(
                '"metadata": {}', '"metadata": ' + '{"a": ' * 5000 + "1" + "}" * 5000
            )
            + "}"
        )
    return json.dumps(row)


@pytest.mark.parametrize("label", BAD_LINES)
def test_import_writes_nothing_and_says_why_in_one_line(
    store_url: str, tmp_path: Path, label: str
) -> None:
    if store_url.startswith("memory://"):
        pytest.skip("the CLI opens its own process-local store")
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + _line(label) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["--db", store_url, "import", str(path)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    with engram.open(store_url, llm=None) as mem:
        assert mem.sessions("default") == []


# -- a storage failure midway: nothing of the import stays, and a re-run imports it all -----

SESSIONS = ("alpha", "beta", "gamma")


def _three_sessions() -> str:
    rows = []
    for name in SESSIONS:
        rows.append({"session": name, "role": "user", "content": f"{name}: which database?"})
        rows.append({"session": name, "role": "assistant", "content": f"{name}: Postgres."})
    return "".join(json.dumps(row) + "\n" for row in rows)


def _store_class(store_url: str) -> type:
    from engram.store import open_store

    store = open_store(store_url)
    store.close()
    return type(store)


def _fail_second_append(monkeypatch: pytest.MonkeyPatch, store_url: str) -> None:
    """The store's second append of the run raises, as a full disk or a lost server would."""
    from engram.errors import StoreError

    cls = _store_class(store_url)
    original = cls.append
    calls = []

    def failing(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(args[:2])
        if len(calls) == 2:
            raise StoreError("cannot write: No space left on device (injected)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "append", failing)


def _contents(store_url: str, scope: str) -> dict[str, list[str]]:
    with engram.open(store_url, llm=None) as mem:
        return {
            info.id: [m.content for m in mem.session(info.id, scope).messages()]
            for info in mem.sessions(scope)
        }


def test_a_storage_failure_midway_leaves_nothing_and_a_rerun_imports_all(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "three.jsonl"
    path.write_text(_three_sessions(), encoding="utf-8")
    command = ["--db", store_url, "import", str(path), "--scope", "imp", "--no-progress"]
    # One session holds part of the file already (an earlier, cumulative export).
    first = tmp_path / "first.jsonl"
    first.write_text(_three_sessions().splitlines()[0] + "\n", encoding="utf-8")
    assert CliRunner().invoke(main, [*command[:3], str(first), *command[4:]]).exit_code == 0
    before = _contents(store_url, "imp")
    assert before == {"alpha": ["alpha: which database?"]}

    with monkeypatch.context() as patch:
        _fail_second_append(patch, store_url)
        result = CliRunner().invoke(main, command)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.strip().count("\n") == 0, result.output
    assert "No space left on device" in result.output
    assert _contents(store_url, "imp") == before

    again = CliRunner().invoke(main, command)
    assert again.exit_code == 0, again.output
    assert _contents(store_url, "imp") == {
        name: [f"{name}: which database?", f"{name}: Postgres."] for name in SESSIONS
    }


def test_documents_import_all_or_nothing_on_a_storage_failure(
    store_url: str, open_engram: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.errors import StoreError

    # A named in-memory store lives as long as the process: a fresh name per test (an id()
    # can be reused by a later test object, which then found the earlier test's messages).
    with engram.open(f"memory://import-source-{uuid.uuid4().hex}", llm=None) as source:
        for name in SESSIONS:
            chat = source.session(name, "docs")
            chat.add("user", f"{name}: which database?")
            chat.add("assistant", f"{name}: Postgres.")
        assert [len(source.session(name, "docs").messages()) for name in SESSIONS] == [2] * 3
        documents = [source.export_session(name, "docs") for name in SESSIONS]
    mem = open_engram()
    with monkeypatch.context() as patch:
        _fail_second_append(patch, store_url)
        with pytest.raises(StoreError, match="No space left"):
            mem.import_documents(documents)
    assert mem.sessions("docs") == []
    mem.import_documents(documents)
    assert {info.id for info in mem.sessions("docs")} == set(SESSIONS)
    for name in SESSIONS:
        assert [m.content for m in mem.session(name, "docs").messages()] == [
            f"{name}: which database?",
            f"{name}: Postgres.",
        ]
