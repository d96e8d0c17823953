"""Parsing import files: every malformed input names its file and line; good input round-trips."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engram.errors import ImportFormatError
from engram.transfer.importers import detect_format, parse_chatgpt, parse_jsonl, read_import


def _jsonl(*rows: Any) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows).encode() + b"\n"


def _error(data: bytes, **kwargs: Any) -> ImportFormatError:
    with pytest.raises(ImportFormatError) as info:
        parse_jsonl(data, file="chat.jsonl", **kwargs)
    return info.value


class TestJsonl:
    def test_sessions_are_grouped_in_first_seen_order(self) -> None:
        data = _jsonl(
            {"session": "b", "role": "user", "content": "hi b"},
            {"session_id": "a", "role": "user", "content": "hi a"},
            {"session": "b", "role": "assistant", "content": "hello b"},
        )
        batches = parse_jsonl(data)
        assert [b.session for b in batches] == ["b", "a"]
        assert [m["content"] for m in batches[0].messages] == ["hi b", "hello b"]

    def test_timestamps_iso_unix_and_naive_are_utc(self) -> None:
        data = _jsonl(
            {"role": "user", "content": "1", "created_at": "2025-03-03T09:00:00Z"},
            {"role": "user", "content": "2", "created_at": "2025-03-03T10:00:00+01:00"},
            {"role": "user", "content": "3", "created_at": 1741000000},
            {"role": "user", "content": "4", "created_at": "2025-03-03 09:00:00"},
        )
        stamps = [m["created_at"] for m in parse_jsonl(data, default_session="s")[0].messages]
        assert stamps[0] == datetime(2025, 3, 3, 9, tzinfo=UTC)
        assert stamps[1] == datetime(2025, 3, 3, 9, tzinfo=UTC)
        assert stamps[2] == datetime.fromtimestamp(1741000000, tz=UTC)
        assert stamps[3] == datetime(2025, 3, 3, 9, tzinfo=UTC)

    def test_line_without_session_needs_default(self) -> None:
        data = _jsonl(
            {"session": "s", "role": "user", "content": "ok"}, {"role": "user", "content": "x"}
        )
        err = _error(data)
        assert (err.file, err.line) == ("chat.jsonl", 2)
        assert "--session" in str(err)
        assert parse_jsonl(data, default_session="d")[1].session == "d"

    def test_blank_lines_are_skipped_but_counted(self) -> None:
        data = b'{"role":"user","content":"a"}\n\n   \n{"role":"robot","content":"b"}\n'
        assert _error(data, default_session="s").line == 4

    @pytest.mark.parametrize(
        ("row", "words"),
        [
            ('{"role": "user", "content": "a"', "invalid JSON"),
            ('["user", "a"]', "JSON object"),
            ('{"role": "robot", "content": "a"}', "unknown role"),
            ('{"role": "user"}', "no content"),
            ('{"role": "user", "content": null}', "content"),
            ('{"role": "user", "content": 5}', "string"),
            ('{"role": "user", "content": "a\\u0000b"}', "NUL"),
            ('{"role": "user", "content": "a\\ud800b"}', "unicode"),
            ('{"role": "user", "content": "a", "created_at": "last tuesday"}', "ISO"),
            ('{"role": "user", "content": "a", "created_at": 1e30}', "Unix"),
            ('{"role": "user", "content": "a", "created_at": true}', "timestamp"),
            ('{"role": "user", "content": "a", "metadata": [1]}', "metadata"),
            ('{"role": "user", "content": "a", "name": "has space"}', "name"),
            ('{"role": "user", "content": "a", "tool_calls": [{"id": "c"}]}', "tool_calls"),
            ('{"role": "tool", "content": "42", "tool_call_id": "call_1"}', "no earlier"),
            ('{"role": "tool", "content": "42"}', "tool_call_id"),
        ],
    )
    def test_malformed_line_names_file_and_line(self, row: str, words: str) -> None:
        data = _jsonl({"role": "user", "content": "fine"}, row)
        err = _error(data, default_session="s")
        assert (err.file, err.line) == ("chat.jsonl", 2)
        assert str(err).startswith("chat.jsonl:2: ")
        assert words.lower() in str(err).lower()

    def test_invalid_utf8_names_line(self) -> None:
        data = b'{"role":"user","content":"ok"}\n{"role":"user","content":"\xff\xfe"}\n'
        err = _error(data, default_session="s")
        assert err.line == 2 and "UTF-8" in str(err)

    def test_raw_nul_byte_is_refused(self) -> None:
        data = b'{"role":"user","content":"a\x00b"}\n'
        assert _error(data, default_session="s").line == 1

    def test_tool_result_must_follow_its_call_in_the_same_session(self) -> None:
        call = {
            "session": "a",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
        ok = _jsonl(
            call, {"session": "a", "role": "tool", "content": "42", "tool_call_id": "call_1"}
        )
        messages = parse_jsonl(ok)[0].messages
        assert messages[0]["content"] == "" and messages[1]["tool_call_id"] == "call_1"
        other = _jsonl(
            call, {"session": "b", "role": "tool", "content": "42", "tool_call_id": "call_1"}
        )
        assert _error(other).line == 2

    def test_text_parts_are_joined_and_extra_keys_ignored(self) -> None:
        row = {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            "id": 7,
            "tokens": 12,
            "metadata": {"k": "v"},
        }
        message = parse_jsonl(_jsonl(row), default_session="s")[0].messages[0]
        assert message == {
            "role": "user",
            "content": "one\ntwo",
            "metadata": {"k": "v", "import_key": "id:7"},  # the line's own id keys it
        }

    def test_bom_is_tolerated(self) -> None:
        data = b"\xef\xbb\xbf" + _jsonl({"role": "user", "content": "a"})
        assert parse_jsonl(data, default_session="s")[0].messages[0]["content"] == "a"


def _node(nid: str, parent: str | None, children: list[str], message: Any) -> dict[str, Any]:
    return {"id": nid, "parent": parent, "children": children, "message": message}


def _msg(role: str, text: str, t: float | None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"m-{text[:8]}",
        "author": {"role": role, "name": extra.pop("name", None), "metadata": {}},
        "create_time": t,
        "content": extra.pop("content", {"content_type": "text", "parts": [text]}),
        "status": "finished_successfully",
        "recipient": extra.pop("recipient", "all"),
        "metadata": extra.pop("metadata", {}),
    }
    return out


def chatgpt_export() -> list[dict[str, Any]]:
    """A small but realistic conversations.json: a root, a hidden system node, an edited branch,
    a code-interpreter call and its output, and a second conversation."""
    t = 1741000000.0
    mapping = {
        "root": _node("root", None, ["sys"], None),
        "sys": _node(
            "sys",
            "root",
            ["u1"],
            _msg("system", "", t, metadata={"is_visually_hidden_from_conversation": True}),
        ),
        "u1": _node(
            "u1", "sys", ["a1-old", "a1"], _msg("user", "What should Phoenix Pro cost?", t + 1)
        ),
        "a1-old": _node("a1-old", "u1", [], _msg("assistant", "Discarded draft answer", t + 2)),
        "a1": _node("a1", "u1", ["call"], _msg("assistant", "Let me compare competitors.", t + 3)),
        "call": _node(
            "call",
            "a1",
            ["out"],
            _msg(
                "assistant",
                "print(sum([16, 15]) / 2)",
                t + 4,
                recipient="python",
                content={
                    "content_type": "code",
                    "language": "python",
                    "text": "print(sum([16, 15]) / 2)",
                },
            ),
        ),
        "out": _node(
            "out",
            "call",
            ["a2"],
            _msg(
                "tool",
                "15.5",
                t + 5,
                name="python",
                content={"content_type": "execution_output", "text": "15.5"},
            ),
        ),
        "a2": _node(
            "a2",
            "out",
            [],
            _msg("assistant", "Competitors average $15.50; $14 undercuts them.", t + 6),
        ),
    }
    second = {
        "root2": _node("root2", None, ["q"], None),
        "q": _node("q", "root2", ["r"], _msg("user", "Draft a launch tweet", t + 100)),
        "r": _node(
            "r",
            "q",
            [],
            _msg("assistant", "Phoenix is here: plan projects at the speed of thought.", None),
        ),
    }
    return [
        {
            "title": "Phoenix pricing",
            "create_time": t,
            "update_time": t + 6,
            "mapping": mapping,
            "current_node": "a2",
            "conversation_id": "conv-pricing",
            "id": "conv-pricing",
        },
        {
            "title": "Launch tweet",
            "create_time": t + 100,
            "mapping": second,
            "current_node": "r",
            "id": "conv-tweet",
        },
    ]


class TestChatGPT:
    def test_main_branch_with_tool_pair(self) -> None:
        batches = parse_chatgpt(json.dumps(chatgpt_export()).encode(), file="conversations.json")
        assert [b.session for b in batches] == ["conv-pricing", "conv-tweet"]
        first = batches[0]
        assert first.title == "Phoenix pricing"
        roles = [m["role"] for m in first.messages]
        assert roles == ["user", "assistant", "assistant", "tool", "assistant"]
        contents = [m["content"] for m in first.messages]
        assert "Discarded draft answer" not in contents
        call, result = first.messages[2], first.messages[3]
        assert call["tool_calls"][0]["function"]["name"] == "python"
        assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {
            "input": "print(sum([16, 15]) / 2)"
        }
        assert result["tool_call_id"] == call["tool_calls"][0]["id"]
        assert result["content"] == "15.5"
        assert all(m["metadata"]["title"] == "Phoenix pricing" for m in first.messages)
        assert first.messages[0]["created_at"] == datetime.fromtimestamp(1741000001, tz=UTC)

    def test_missing_time_falls_back_to_previous(self) -> None:
        batches = parse_chatgpt(json.dumps(chatgpt_export()).encode())
        tweet = batches[1].messages
        assert tweet[1]["created_at"] == tweet[0]["created_at"]

    def test_not_an_export(self) -> None:
        with pytest.raises(ImportFormatError, match=r"conversations\.json: .*mapping"):
            parse_chatgpt(b'[{"title": "x"}]', file="conversations.json")

    def test_bad_json_names_line(self) -> None:
        with pytest.raises(ImportFormatError) as info:
            parse_chatgpt(b'[\n{"title": "x",\n]', file="c.json")
        assert info.value.line == 3

    def test_detect_format(self, tmp_path: Path) -> None:
        assert detect_format(b"  \n[{}]") == "chatgpt"
        assert detect_format(b'{"role": "user"}') == "jsonl"
        path = tmp_path / "conversations.json"
        path.write_text(json.dumps(chatgpt_export()))
        assert len(read_import(path)) == 2
