"""Smoke test of ``benchmarks.savings``: a 60-turn run of every preset, its JSON and plot."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from benchmarks import savings

TURNS = 60


#: One savings run (about 5 s) serves every test here: the full suite's lane.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("savings")
    return savings.run(TURNS, savings.PRESET_ORDER, workdir=work, plan_repeats=1)


def test_conversation_is_deterministic_and_varied() -> None:
    a, b = savings.conversation(200), savings.conversation(200)
    assert a == b
    assert savings.conversation(200, seed=1) != a
    assert any(t.tool is not None for t in a)
    assert any(len(t.answer.encode()) > 750 for t in a)  # seed 004's long answers
    assert any("https://" in t.question or "https://" in t.answer for t in a)
    assert all(x.asked_at < y.asked_at for x, y in itertools.pairwise(a))


def test_json_shape(results: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "savings.json"
    savings.write_json(results, path)
    loaded = json.loads(path.read_text())
    assert loaded["method"]["turns"] == TURNS
    assert list(loaded["presets"]) == list(savings.PRESET_ORDER)
    for name, r in loaded["presets"].items():
        assert r["preset"] == name
        assert r["turns"] == TURNS
        for column in ("sent", "history", "compacted", "pending", "due", "context_ms"):
            assert len(r["curve"][column]) == TURNS, (name, column)
        assert r["totals"]["tokens_sent"] == sum(r["curve"]["sent"])
        assert r["totals"]["naive_tokens"] == sum(r["curve"]["history"])
        assert 0 <= r["totals"]["savings_pct"] < 100
        assert r["timing"]["context_ms_all"]["n"] == TURNS
        # The history only grows; the naive prompt is every message plus the system prompt.
        history = r["curve"]["history"]
        assert all(x < y for x, y in itertools.pairwise(history))
    assert loaded["presets"]["lean"]["timing"]["planner_us_all"]["n"] == 0  # never plans
    assert loaded["presets"]["summary_buffer"]["timing"]["planner_us_all"]["n"] == TURNS
    md = savings.markdown(loaded)
    assert "| summary_buffer |" in md and "## Time" in md


def test_invariant_1_every_turn(results: dict[str, Any]) -> None:
    for name, r in results["presets"].items():
        limit = r["budget"] - r["reserve"]
        over = [i for i, sent in enumerate(r["curve"]["sent"]) if sent > limit]
        assert over == [], f"{name}: prompt over budget at turns {over}"
        assert r["invariant_1_violations"] == 0


def test_compacting_preset_sends_less_than_the_history(results: dict[str, Any]) -> None:
    r = results["presets"]["summary_buffer"]
    sent, history = r["curve"]["sent"], r["curve"]["history"]
    assert r["compaction"]["compactions"] > 0
    assert r["compaction"]["summary_version"] > 0
    first = r["totals"]["first_turn_over_budget"]
    assert first is not None, "the 60-turn history should outgrow summary_buffer's budget"
    assert all(sent[i] < history[i] for i in range(first, TURNS))
    # Once compacting, the prompt stays near seed 001's 3,000-token mark, not the history.
    assert sent[-1] < history[-1] / 2
    # The exchanges preset folds past 10 exchanges even before the budget is reached.
    ex = results["presets"]["exchanges"]
    assert ex["compaction"]["compactions"] > 0
    assert ex["curve"]["sent"][-1] < ex["curve"]["history"][-1]


def test_plot_writes_a_png(results: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "savings.png"
    savings.plot(results, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_buffer_with_a_fake_model(tmp_path: Path) -> None:
    turns = savings.conversation(40)
    r = savings.run_with_fake_llm(turns, tmp_path, plan_repeats=1)
    assert r["label"] == savings.FAKE_LLM_LABEL
    assert r["summarizer"] == "llm:fake-model"
    assert r["compaction"]["compactions"] > 0
    assert r["compaction"]["llm_failures"] == 0 and r["compaction"]["turns_degraded"] == 0
    # Two calls per compaction: the summary and the important data.
    assert r["llm"]["by_purpose"] == {
        "summary": r["compaction"]["compactions"],
        "important_data": r["compaction"]["compactions"],
    }
    assert r["invariant_1_violations"] == 0


def test_a_turn_is_due_exactly_when_its_context_compacts(results: dict[str, Any]) -> None:
    """``due`` is context()'s own decision: a compaction ran (or was scheduled) in it."""
    for name, r in results["presets"].items():
        ran = [int(c > 0) for c in r["curve"]["compacted"]]
        assert r["curve"]["due"] == ran, name
    assert sum(results["presets"]["summary_buffer"]["curve"]["due"]) > 0
    assert sum(results["presets"]["lean"]["curve"]["due"]) == 0
