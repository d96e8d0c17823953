"""The ``engram`` command line, end to end on a real SQLite database."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.transfer.test_importers import chatgpt_export

import engram
from engram.cli import main
from engram.cli.demo import DEMO_BUDGET, store_sample
from engram.tokens import count_messages, counter_for_model
from images import image_part, png_url

from .harness import Cli

PHOENIX = [
    {
        "session": "launch",
        "role": "user",
        "content": "Pricing meeting today. Options are $12 or $14.",
        "created_at": "2025-03-06T10:00:00Z",
        "name": "maya",
    },
    {
        "session": "launch",
        "role": "assistant",
        "content": "I recommend $14 (option C).",
        "created_at": "2025-03-06T10:01:00Z",
    },
    {
        "session": "launch",
        "role": "assistant",
        "content": None,
        "created_at": 1741255320,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_signup_metrics", "arguments": '{"days": 3}'},
            }
        ],
    },
    {
        "session": "launch",
        "role": "tool",
        "content": '{"signups": 1287}',
        "tool_call_id": "call_1",
        "created_at": 1741255330,
    },
    {
        "session": "launch",
        "role": "user",
        "content": "Decided: Pro is $14 per user, billed annually.",
        "created_at": "2025-03-06T12:31:00Z",
        "metadata": {"source": "slack"},
    },
    {
        "session": "waitlist",
        "role": "user",
        "content": "Waitlist page goes live Friday (100% ready).",
        "created_at": "2025-03-06T17:45:00Z",
    },
]


def _count(url: str, scope: str = "phoenix") -> int:
    with engram.open(url) as mem:
        return sum(info.message_count for info in mem.sessions(scope))


class TestImport:
    def test_jsonl_with_sessions_and_timestamps(self, cli: Cli) -> None:
        path = cli.write_jsonl("phoenix.jsonl", PHOENIX)
        result = cli("import", str(path), "--scope", "phoenix")
        assert result.exit_code == 0, result.output
        assert "Imported 6 new messages in 2 session(s)" in result.output
        assert "tokens" in result.output and "messages/s" in result.output
        with engram.open(cli.url) as mem:
            launch = mem.session("launch", scope="phoenix").messages()
            assert [m.role for m in launch] == ["user", "assistant", "assistant", "tool", "user"]
            assert launch[0].created_at.isoformat() == "2025-03-06T10:00:00+00:00"
            assert launch[0].name == "maya"
            assert launch[3].tool_call_id == "call_1"
            assert launch[4].metadata["source"] == "slack"
            assert mem.session("waitlist", scope="phoenix").stats()["total_messages"] == 1

    def test_default_session_flag(self, cli: Cli) -> None:
        path = cli.write_jsonl("plain.jsonl", [{"role": "user", "content": "hello"}])
        result = cli("import", str(path), "--scope", "phoenix")
        assert result.exit_code == 1
        assert "plain.jsonl:1:" in result.stderr and "--session" in result.stderr
        assert cli("import", str(path), "--scope", "phoenix", "--session", "s1").exit_code == 0
        assert _count(cli.url) == 1

    def test_chatgpt_export(self, cli: Cli) -> None:
        path = cli.tmp / "conversations.json"
        path.write_text(json.dumps(chatgpt_export()), encoding="utf-8")
        result = cli("import", str(path), "--scope", "me")
        assert result.exit_code == 0, result.output
        assert "Imported 7 new messages in 2 session(s)" in result.output
        with engram.open(cli.url) as mem:
            pricing = mem.session("conv-pricing", scope="me").messages()
            assert pricing[-1].content.startswith("Competitors average")
            assert pricing[0].metadata["title"] == "Phoenix pricing"

    @pytest.mark.parametrize(
        ("bad", "words"),
        [
            ('{"session": "launch", "role": "user", "content": "a"', "invalid JSON"),
            ('{"session": "launch", "role": "robot", "content": "a"}', "unknown role"),
            ('{"session": "launch", "role": "user", "content": "nul\\u0000here"}', "NUL"),
            (
                '{"session": "w2", "role": "tool", "content": "1", "tool_call_id": "call_1"}',
                "no earlier",
            ),
            ('{"session": "launch", "role": "user", "content": "a", "created_at": "soon"}', "ISO"),
        ],
    )
    def test_malformed_line_writes_nothing(self, cli: Cli, bad: str, words: str) -> None:
        # The bad line comes last, so every earlier (valid) session would have been written
        # by a careless importer.
        path = cli.write_jsonl("broken.jsonl", [*PHOENIX, bad])
        result = cli("import", str(path), "--scope", "phoenix")
        assert result.exit_code == 1
        line = result.stderr.strip()
        assert line.startswith("Error: ") and f"broken.jsonl:{len(PHOENIX) + 1}:" in line
        assert words.lower() in line.lower()
        assert "Traceback" not in result.output
        assert len(result.stderr.strip().splitlines()) == 1
        assert _count(cli.url) == 0

    def test_missing_file_is_one_line_and_exit_1(self, cli: Cli) -> None:
        result = cli("import", str(cli.tmp / "nope.jsonl"))
        assert result.exit_code == 1
        assert result.stderr.count("\n") == 1
        assert "nope.jsonl" in result.stderr and "No such file" in result.stderr

    def test_progress_bar_on_request(self, cli: Cli) -> None:
        path = cli.write_jsonl("phoenix.jsonl", PHOENIX)
        result = cli("import", str(path), "--scope", "phoenix", "--progress")
        assert result.exit_code == 0
        assert "Importing" in result.stderr


class TestExport:
    def test_jsonl_round_trip(self, cli: Cli) -> None:
        cli("import", str(cli.write_jsonl("phoenix.jsonl", PHOENIX)), "--scope", "phoenix")
        out = cli.tmp / "out.jsonl"
        result = cli("export", "--scope", "phoenix", "--format", "jsonl", "-o", str(out))
        assert result.exit_code == 0, result.output
        fresh = f"sqlite:///{cli.tmp / 'fresh.db'}"
        again = cli("import", str(out), "--scope", "copy", url=fresh)
        assert again.exit_code == 0, again.output

        def snapshot(url: str, scope: str) -> list[tuple[object, ...]]:
            with engram.open(url) as mem:
                return [
                    (
                        m.session,
                        m.role,
                        m.content,
                        m.name,
                        m.tool_calls,
                        m.tool_call_id,
                        m.created_at,
                        m.metadata,
                        m.tokens,
                    )
                    for info in sorted(mem.sessions(scope), key=lambda i: i.id)
                    for m in mem.session(info.id, scope=scope).messages()
                ]

        assert snapshot(cli.url, "phoenix") == snapshot(fresh, "copy")
        assert len(snapshot(fresh, "copy")) == len(PHOENIX)

    def test_jsonl_to_stdout_one_session(self, cli: Cli) -> None:
        cli("import", str(cli.write_jsonl("phoenix.jsonl", PHOENIX)), "--scope", "phoenix")
        result = cli("export", "--scope", "phoenix", "--session", "waitlist", "--format", "jsonl")
        assert result.exit_code == 0
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        key = rows[0]["metadata"].pop("import_key")  # kept, so a re-import adds nothing
        assert key.startswith("hash:")
        assert rows == [
            {
                "session": "waitlist",
                "role": "user",
                "content": "Waitlist page goes live Friday (100% ready).",
                "created_at": "2025-03-06T17:45:00+00:00",
                "metadata": {},
            }
        ]

    def test_json_documents(self, cli: Cli) -> None:
        cli("import", str(cli.write_jsonl("phoenix.jsonl", PHOENIX)), "--scope", "phoenix")
        one = cli("export", "--scope", "phoenix", "--session", "launch")
        assert one.exit_code == 0, one.output
        doc = json.loads(one.stdout)
        assert doc["session_id"] == "launch" and len(doc["recent_history"]) == 5
        out = cli.tmp / "all.json"
        assert cli("export", "--scope", "phoenix", "-o", str(out)).exit_code == 0
        docs = json.loads(out.read_text(encoding="utf-8"))
        assert [d["session_id"] for d in docs] == ["launch", "waitlist"]
        assert not list(cli.tmp.glob(".all.json.*"))  # the temp file was renamed, not left

    def test_unknown_session(self, cli: Cli) -> None:
        result = cli("export", "--scope", "phoenix", "--session", "nope", "--format", "jsonl")
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: ") and "nope" in result.stderr


class TestQueries:
    @pytest.fixture(autouse=True)
    def _data(self, cli: Cli) -> None:
        assert (
            cli("import", str(cli.write_jsonl("p.jsonl", PHOENIX)), "--scope", "phoenix").exit_code
            == 0
        )

    def test_search_ranks_and_snippets(self, cli: Cli) -> None:
        result = cli("search", "pricing", "--scope", "phoenix")
        assert result.exit_code == 0, result.output
        assert " 1. [launch #" in result.output and "[Pricing]" in result.output

    @pytest.mark.parametrize(
        "query", ['"$14"', "100%", "pro*", "a_b OR (c", "NEAR(x y)", "'; DROP"]
    )
    def test_search_metacharacters_are_plain_text(self, cli: Cli, query: str) -> None:
        result = cli("search", query, "--scope", "phoenix", "--json")
        assert result.exit_code == 0, result.output
        hits = json.loads(result.stdout)
        assert isinstance(hits, list)

    def test_search_percent_matches_literally(self, cli: Cli) -> None:
        hits = json.loads(cli("search", "100%", "--scope", "phoenix", "--json").stdout)
        assert [h["session"] for h in hits] == ["waitlist"]

    def test_search_role_and_session_filters(self, cli: Cli) -> None:
        result = cli(
            "search", "14", "--scope", "phoenix", "--session", "launch", "--role", "user", "--json"
        )
        hits = json.loads(result.stdout)
        assert hits and all(h["role"] == "user" and h["session"] == "launch" for h in hits)

    def test_search_other_scope_sees_nothing(self, cli: Cli) -> None:
        result = cli("search", "pricing", "--scope", "elsewhere")
        assert result.exit_code == 0 and "No messages match" in result.output

    @pytest.mark.parametrize("budget", [60, 120, 8000])
    def test_context_within_budget(self, cli: Cli, budget: int) -> None:
        result = cli(
            "context",
            "--session",
            "launch",
            "--scope",
            "phoenix",
            "--budget",
            str(budget),
            "--reserve",
            "10",
            "--policy",
            "default",
            "--system",
            "Be brief.",
            "--json",
        )
        assert result.exit_code == 0, result.output
        view = json.loads(result.stdout)
        assert view["tokens"] <= budget - 10
        assert view["tokens"] == count_messages(counter_for_model("gpt-4o-mini"), view["messages"])
        assert view["messages"][0] == {"role": "system", "content": "Be brief."}
        assert view["messages"][-1]["content"].startswith("Decided")

    def test_context_text_lists_sent_and_left_out(self, cli: Cli) -> None:
        result = cli("context", "--session", "launch", "--scope", "phoenix", "--budget", "60")
        assert result.exit_code == 0, result.output
        assert "--- user ---" in result.output
        assert "Stored messages sent:" in result.output and "Left out" in result.output

    def test_context_text_describes_images_never_prints_their_data(self, cli: Cli) -> None:
        url = png_url(640, 480)
        with engram.open(cli.url) as mem:
            mem.session("pics", "phoenix").add_many(
                [{"role": "user", "content": [{"type": "text", "text": "Our logo?"},
                                              image_part(url, "low")]}]
            )  # fmt: skip
        shown = cli("context", "--session", "pics", "--scope", "phoenix")
        assert shown.exit_code == 0, shown.output
        assert "Our logo?\n[image: image/png, 640x480, " in shown.output
        assert "detail low]" in shown.output and url[30:90] not in shown.output
        exact = json.loads(
            cli("context", "--session", "pics", "--scope", "phoenix", "--json").output
        )
        assert exact["messages"][-1]["content"][1]["image_url"]["url"] == url  # sent as given

    def test_context_unknown_session(self, cli: Cli) -> None:
        result = cli("context", "--session", "nope", "--scope", "phoenix")
        assert result.exit_code == 1 and "nope" in result.stderr

    def test_stats_scope_and_session(self, cli: Cli) -> None:
        result = cli("stats", "--scope", "phoenix")
        assert result.exit_code == 0
        assert "launch" in result.output and "waitlist" in result.output
        assert "2 session(s), 6 messages" in result.output
        data = json.loads(
            cli("stats", "--scope", "phoenix", "--session", "launch", "--json").stdout
        )
        assert data["totals"]["total_messages"] == 5
        assert data["sessions"][0]["first_message_at"].startswith("2025-03-06T10:00")

    def test_stats_empty_scope_names_others(self, cli: Cli) -> None:
        result = cli("stats")
        assert result.exit_code == 0 and "phoenix" in result.output


class TestSurface:
    def test_every_command_has_help(self) -> None:
        runner = CliRunner()
        assert len(main.commands) >= 6
        for name, command in main.commands.items():
            assert command.help and command.help.strip(), name
            result = runner.invoke(main, [name, "--help"])
            assert result.exit_code == 0, name
            first = " ".join(command.help.strip().splitlines()[0].split())
            assert first in " ".join(result.output.split()), name
        top = runner.invoke(main, ["--help"])
        assert all(name in top.output for name in main.commands)

    def test_bad_store_url_is_one_line(self, cli: Cli) -> None:
        result = cli("stats", url="nosuch://x")
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1

    def test_bad_scope_is_one_line(self, cli: Cli) -> None:
        path = cli.write_jsonl("p.jsonl", PHOENIX)
        result = cli("import", str(path), "--scope", " ")
        assert result.exit_code == 1 and result.stderr.startswith("Error: ")


class TestDemo:
    def test_demo_in_process(self) -> None:
        result = CliRunner().invoke(main, ["demo"], catch_exceptions=False)
        assert result.exit_code == 0
        assert "[pricing]" in result.output.lower()
        assert "search_history" in result.output and "get_messages_by_date" in result.output
        assert "Summary version 1 (offline)" in result.output  # compaction, with no model
        assert "CONVERSATION SUMMARY" in result.output
        # The important data comes from this conversation: a person is told so.
        assert "IMPORTANT DATA FROM EARLIER IN THIS CONVERSATION" in result.output
        assert "PREVIOUS CONVERSATIONS" not in result.output
        assert "User said:" not in result.output
        assert "starts with sections LONG-TERM MEMORIES" in result.output  # seed 003

    def test_demo_reuses_a_given_store(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path / 'demo.db'}"
        for _ in range(2):
            assert CliRunner().invoke(main, ["demo", "--db", url]).exit_code == 0
        with engram.open(url) as mem:
            count = mem.session("phoenix-launch", scope="phoenix").stats()["total_messages"]
        assert 150 <= count <= 300  # imported once, not twice

    def test_the_served_sample_is_replayed_turn_by_turn(self, tmp_path: Path) -> None:
        # `engram serve --sample` (make run) stores the sample as lived: one real prompt
        # per answer, so the dashboard's tokens chart and savings have turns to show.
        replayed = f"sqlite:///{tmp_path / 'replayed.db'}"
        imported = f"sqlite:///{tmp_path / 'imported.db'}"
        with engram.open(replayed) as mem:
            chat = store_sample(mem, replay_turns=True)
            log = chat.prompt_log()
            messages = [m.to_openai() for m in chat.messages(limit=1000)]
            answers = sum(
                1
                for before, message in itertools.pairwise(messages)
                if message["role"] == "assistant" and before["role"] == "user"
            )
            assert log.turns == answers > 50
            assert all(turn.sent_tokens <= turn.budget == DEMO_BUDGET for turn in log.recent)
            assert 0 < log.sent_tokens < log.history_tokens
            assert chat.policy.name == "summary_buffer"
        with engram.open(imported) as mem:
            plain = mem.session("phoenix-launch", scope="phoenix")
            store_sample(mem)
            assert [m.to_openai() for m in plain.messages(limit=1000)] == messages
            assert plain.prompt_log().turns == 0

    def test_demo_subprocess(self, tmp_path: Path) -> None:
        exe = Path(sys.executable).parent / "engram"
        env = {**os.environ, "ENGRAM_URL": f"sqlite:///{tmp_path / 'untouched.db'}"}
        done = subprocess.run(
            [str(exe), "demo"], capture_output=True, text=True, timeout=60, env=env, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "[pricing]" in done.stdout.lower()
        assert "tokens" in done.stdout
        assert not (tmp_path / "untouched.db").exists()  # the demo never writes to $ENGRAM_URL
