"""``engram prompts`` and ``engram replay``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.harness import Cli
from tests.provenance.test_interfaces import SAMPLE, chat

import engram


class TestCli:
    def test_prompts_and_replay(self, tmp_path: Path) -> None:
        cli = Cli(tmp_path)
        with engram.open(cli.url, llm=None) as mem:
            chat(mem, turns=3)
        listed = cli("prompts", "list", "--scope", "p", "--session", "s")
        assert listed.exit_code == 0 and "cacheable" in listed.output
        shown = cli("prompts", "show", "--scope", "p", "--session", "s", "2")
        assert "Rebuilt byte for byte" in shown.output
        as_json = json.loads(cli("prompts", "show", "--scope", "p", "--session", "s", "2",
                                 "--json").output)  # fmt: skip
        assert as_json["verified"] is True
        same = cli("prompts", "diff", "--scope", "p", "--session", "s", "2", "2")
        assert "identical" in same.output
        moved = cli("prompts", "diff", "--scope", "p", "--session", "s", "1", "3")
        assert "Entered the window" in moved.output
        gone = cli("prompts", "show", "--scope", "p", "--session", "s", "9")
        assert gone.exit_code == 1 and "Error: no recorded turn 9" in gone.output

    def test_replay_reports_every_preset_on_the_sample(self, tmp_path: Path) -> None:
        cli = Cli(tmp_path)
        assert cli("import", str(SAMPLE), "--scope", "phoenix").exit_code == 0
        found = cli("replay", "--scope", "phoenix", "--session", "phoenix-launch",
                    "--budget", "3000", "--json")  # fmt: skip
        assert found.exit_code == 0, found.output
        rows = json.loads(found.output)
        assert [r["label"] for r in rows] == [
            "current (default)", *engram.PRESETS,
        ]  # fmt: skip
        assert all(r["turns"] == 86 for r in rows)
        text = cli("replay", "--scope", "phoenix", "--session", "phoenix-launch",
                   "--policy", "lean", "--per-turn")  # fmt: skip
        assert "lean" in text.output and "msg id" in text.output
