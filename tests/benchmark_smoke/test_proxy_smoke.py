"""The proxy benchmark runs end to end on a tiny session: three processes, every table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks import proxy


@pytest.mark.slow
def test_a_tiny_run_reports_the_overhead_and_where_it_goes(tmp_path: Path) -> None:
    code = proxy.main(
        ["--messages", "300", "--pairs", "6", "--warmup", "1", "--name", "tiny",
         "--out", str(tmp_path), "--work", str(tmp_path)]
    )  # fmt: skip
    assert code == 0
    result = json.loads((tmp_path / "tiny.json").read_text())
    assert [run["budget_header"] for run in result["runs"]] == ["8000", None]
    for run in result["runs"]:
        assert run["plain"]["pairs"] == 6 and run["stream"]["pairs"] == 2
        assert run["prompt_tokens"] > 0
    assert result["passthrough"]["pairs"] == 3
    assert set(result["engram_work"]) == {
        "align and store the question",
        "build the prompt",
        "store the answer",
    }
    assert result["status"] in {"PASS", "MISS"} and len(result["load_average_before"]) == 3
    text = (tmp_path / "tiny.md").read_text()
    assert "Where the time goes" in text and "first streamed text" in text
