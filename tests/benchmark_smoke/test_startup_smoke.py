"""Smoke test of ``benchmarks.startup``: one round of every measure, its JSON and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks import startup

pytestmark = pytest.mark.slow

SERIES = ("import", "open", "first_count", "first_count_no_cache", "open_and_first_count")


def test_one_round_writes_every_measure(tmp_path: Path) -> None:
    startup.main(["--runs", "1", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "startup.json").read_text())
    medians = result["median_ms"]
    for key in (*SERIES, "stats", "mcp_initialize"):
        assert medians[key] > 0 and medians[f"{key}_pyc"] > 0, key
    assert set(result["met"]) == set(startup.TARGETS)
    assert len(result["load_average"]) == 3
    report = (tmp_path / "startup.md").read_text()
    for label, key in startup._ROWS:
        assert f"| {label} | {medians[key + '_pyc']} / {medians[key]} | - |" in report
    assert not (tmp_path / "startup-before.json").exists()
