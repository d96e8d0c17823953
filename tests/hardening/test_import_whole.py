"""``engram import`` is all-or-nothing on every backend: a bad value anywhere writes nothing.

Before one validation served every backend, values that passed the file check
could fail at write time (NUL in metadata on PostgreSQL and jsondir, a lone
surrogate in a tool-call id on jsondir) after earlier sessions were committed;
others raised a raw exception (a traceback from the CLI).
"""

from __future__ import annotations

import json
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
