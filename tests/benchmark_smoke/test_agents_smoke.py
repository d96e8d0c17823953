"""The Agents SDK session benchmark runs end to end on a tiny session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("agents", reason="the 'agents' extra is not installed")

from benchmarks import agents_session


@pytest.mark.slow
def test_a_tiny_run_reports_both_sides(tmp_path: Path) -> None:
    code = agents_session.main(
        ["--items", "300", "--budget", "2000", "--rounds", "1", "--min-time", "0",
         "--name", "tiny", "--out", str(tmp_path), "--work", str(tmp_path)]
    )  # fmt: skip
    assert code == 0
    result = json.loads((tmp_path / "tiny.json").read_text())
    assert result["sdk_items_returned"] == 300
    assert 0 < result["engram_items_returned"] < 300
    assert result["engram_fits_budget"] is True
    assert result["sdk_tokens_returned"] > result["engram_tokens_returned"]
    assert "get_items() median" in (tmp_path / "tiny.md").read_text()
