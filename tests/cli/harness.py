"""A small harness for running ``engram`` commands in tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from engram.cli import main


class Cli:
    """Runs ``engram`` commands against one fresh SQLite database."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.url = f"sqlite:///{tmp_path / 'cli.db'}"
        self.runner = CliRunner()

    def __call__(self, *args: str, url: str | None = None) -> Result:
        return self.runner.invoke(main, ["--db", url or self.url, *args], catch_exceptions=False)

    def write_jsonl(self, name: str, rows: list[Any]) -> Path:
        path = self.tmp / name
        path.write_text(
            "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
            encoding="utf-8",
        )
        return path
