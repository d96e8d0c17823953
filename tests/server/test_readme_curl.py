"""The README's curl examples run, as written, against a real `engram serve --sample`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.server.live import LiveServer

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)
README_BASE = "http://127.0.0.1:8000"


def curl_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands: list[str] = []
    for block in BLOCK.findall(text):
        joined = block.replace("\\\n", " ")
        commands += [
            line.strip() for line in joined.splitlines() if line.strip().startswith("curl")
        ]
    return commands


def test_the_readme_has_curl_examples() -> None:
    assert len(curl_commands()) >= 8


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_every_curl_example_answers_json(tmp_path: Path) -> None:
    with LiveServer(f"sqlite:///{tmp_path / 'readme.db'}", "--sample") as server:
        for command in curl_commands():
            line = command.replace(README_BASE, server.base_url).replace(
                "curl ", "curl --fail-with-body --max-time 30 ", 1
            )
            done = subprocess.run(
                ["bash", "-c", line], capture_output=True, text=True, timeout=60, check=False
            )
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            answer = json.loads(done.stdout)
            assert "error" not in answer, (command, answer)
    # The line `engram serve` printed at start-up is one of the commands just run.
    printed = [line for line in server.output.splitlines() if line.strip().startswith("try")]
    assert printed[0].split("try", 1)[1].strip() == f"curl -s {server.base_url}/v1/scopes"
