"""What a new user hits in the first hour with the CLI: each case failed before its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.transfer.test_importers import chatgpt_export

import engram

from .harness import Cli
from .test_cli import PHOENIX


def _messages(url: str, scope: str) -> list[str]:
    with engram.open(url, llm=None) as mem:
        out = []
        for info in sorted(mem.sessions(scope), key=lambda i: i.id):
            out.extend(m.content for m in mem.session(info.id, scope).messages(limit=1000))
        return out


class TestIdempotentImport:
    def test_jsonl_twice_stores_each_message_once(self, cli: Cli) -> None:
        path = cli.write_jsonl("phoenix.jsonl", PHOENIX)
        assert cli("import", str(path), "--scope", "p").exit_code == 0
        before = _messages(cli.url, "p")
        again = cli("import", str(path), "--scope", "p")
        assert again.exit_code == 0, again.output
        assert "Imported 0 new messages" in again.output and "6 already there" in again.output
        assert _messages(cli.url, "p") == before

    def test_a_grown_jsonl_adds_only_the_new_lines(self, cli: Cli) -> None:
        cli("import", str(cli.write_jsonl("a.jsonl", PHOENIX[:3])), "--scope", "p")
        grown = cli("import", str(cli.write_jsonl("b.jsonl", PHOENIX)), "--scope", "p")
        assert "Imported 3 new messages" in grown.output and "3 already there" in grown.output
        assert len(_messages(cli.url, "p")) == 6

    def test_lines_with_ids_are_keyed_by_them(self, cli: Cli) -> None:
        rows = [{"id": "m1", "session": "s", "role": "user", "content": "same words"}]
        cli("import", str(cli.write_jsonl("a.jsonl", rows)), "--scope", "p")
        rows.append({"id": "m2", "session": "s", "role": "user", "content": "same words"})
        second = cli("import", str(cli.write_jsonl("b.jsonl", rows)), "--scope", "p")
        assert "Imported 1 new messages" in second.output
        assert _messages(cli.url, "p") == ["same words", "same words"]

    def test_a_cumulative_chatgpt_export_adds_only_new_nodes(self, cli: Cli) -> None:
        path = cli.tmp / "conversations.json"
        path.write_text(json.dumps(chatgpt_export()), encoding="utf-8")
        first = cli("import", str(path), "--scope", "me")
        assert first.exit_code == 0, first.output
        count = len(_messages(cli.url, "me"))
        again = cli("import", str(path), "--scope", "me")
        assert "Imported 0 new messages" in again.output
        assert len(_messages(cli.url, "me")) == count


class TestAllOrNothing:
    def test_a_bad_second_session_writes_nothing(self, cli: Cli) -> None:
        rows = [
            {"session": "a", "role": "user", "content": "fine"},
            {"session": "b", "role": "user", "content": "fine too"},
            # Passes the file's own checks, refused at write: the call it answers is absent.
            {"session": "b", "role": "tool", "content": "42", "tool_call_id": "call_9"},
        ]
        result = cli("import", str(cli.write_jsonl("x.jsonl", rows)), "--scope", "p")
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: ") and "call_9" in result.stderr
        assert _messages(cli.url, "p") == []

    @pytest.mark.parametrize(
        "line",
        [
            "[" * 100_000 + "]" * 100_000,
            '{"role": "user", "content": "x", "n": 1' + "0" * 5000 + "}",
        ],
        ids=["deep", "huge-int"],
    )
    def test_hostile_json_is_one_line_not_a_traceback(self, cli: Cli, line: str) -> None:
        path = cli.tmp / "bad.jsonl"
        path.write_text(line + "\n", encoding="utf-8")
        result = cli("import", str(path), "--session", "s")
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr


class TestNearMissFormats:
    def test_fine_tuning_jsonl_is_imported(self, cli: Cli) -> None:
        rows = [
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "yo"},
                ]
            },
            {"messages": [{"role": "user", "content": "second"}]},
        ]
        result = cli("import", str(cli.write_jsonl("ft.jsonl", rows)), "--scope", "ft")
        assert result.exit_code == 0, result.output
        assert "Imported 3 new messages in 2 session(s)" in result.output
        with engram.open(cli.url, llm=None) as mem:
            assert sorted(i.id for i in mem.sessions("ft")) == ["ft-1", "ft-2"]

    def test_one_json_object_says_what_was_recognised(self, cli: Cli) -> None:
        path = cli.tmp / "obj.json"
        path.write_text(json.dumps({"conversations": []}, indent=2), encoding="utf-8")
        result = cli("import", str(path))
        assert result.exit_code == 1
        assert "single JSON object" in result.stderr and "expected JSONL" in result.stderr

    def test_a_fine_tuning_line_given_as_jsonl_names_the_right_format(self, cli: Cli) -> None:
        rows = [{"messages": [{"role": "user", "content": "hi"}]}]
        path = cli.write_jsonl("ft.jsonl", rows)
        result = cli("import", str(path), "--format", "jsonl", "--session", "s")
        assert result.exit_code == 1 and "--format finetune" in result.stderr


class TestQueries:
    def test_search_in_a_missing_session_says_so(self, cli: Cli) -> None:
        cli("import", str(cli.write_jsonl("p.jsonl", PHOENIX)), "--scope", "p")
        result = cli("search", "pricing", "--scope", "p", "--session", "nope")
        assert result.exit_code == 1
        assert "no session 'nope' in scope 'p'" in result.stderr

    def test_search_scores_are_readable(self, cli: Cli) -> None:
        cli("import", str(cli.write_jsonl("p.jsonl", PHOENIX)), "--scope", "p")
        result = cli("search", "pricing", "--scope", "p")
        assert "relevance 100%" in result.output
        assert "score 0.00" not in result.output

    def test_stats_show_whole_ids_and_titles(self, cli: Cli) -> None:
        long_id = "6790a0c4-7b44-800b-9c71-3a5d1f2e0b11-conversation"
        rows = [{"session": long_id, "role": "user", "content": "Plan the Phoenix launch party"}]
        cli("import", str(cli.write_jsonl("s.jsonl", rows)), "--scope", "p")
        result = cli("stats", "--scope", "p")
        assert long_id in result.output
        assert "Plan the Phoenix launch party" in result.output


class TestContextIsReadOnly:
    def _summarized(self, cli: Cli) -> None:
        with engram.open(cli.url, llm=None) as mem:
            chat = mem.session("s", scope="p", policy="summary_buffer")
            for i in range(60):
                chat.add("user" if i % 2 == 0 else "assistant", f"message {i} " + "word " * 60)

    def test_uses_the_stored_policy_and_writes_nothing(self, cli: Cli) -> None:
        self._summarized(cli)  # summary_buffer compacts synchronously on context(), not on add
        result = cli("context", "--scope", "p", "--session", "s", "--budget", "4000")
        assert result.exit_code == 0, result.output
        assert "policy summary_buffer" in result.output
        assert "compaction is due but was not run" in result.output
        with engram.open(cli.url, llm=None) as mem:
            assert mem.session("s", "p").compaction_state().summary_version == 0

    def test_compact_flag_runs_it_and_says_what_the_summary_covers(self, cli: Cli) -> None:
        self._summarized(cli)
        result = cli("context", "--scope", "p", "--session", "s", "--compact")
        assert result.exit_code == 0, result.output
        assert "Left out (in summary)" in result.output
        assert "are in the summary (version 1)" in result.output
        assert "Left out: nothing" not in result.output


def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    with engram.open(url, llm=None) as mem:
        chat = mem.session("s", scope="p")
        chat.add_many({"role": "user", "content": f"line {i} " * 20} for i in range(3000))
    env = {**os.environ, "ENGRAM_URL": url}
    script = (
        f"{sys.executable} -m engram.cli export --scope p --format jsonl | head -n 1 >/dev/null; "
        'echo "${PIPESTATUS[0]}"'
    )
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.strip() == "0"
    assert "Broken pipe" not in done.stderr and "Error" not in done.stderr
