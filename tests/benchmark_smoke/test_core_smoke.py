"""A tiny benchmark run: every scenario executes and the report has the keys readers rely on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

# benchmarks/ is a top-level package of the repository, not part of the installed library.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import report, run
from benchmarks.dataset import MAIN_SCOPE, MAIN_SESSION, Spec, TextSource, layout
from benchmarks.floor import Floor
from benchmarks.timing import Samples, percentile, ratio


def test_layout_puts_the_main_session_first_in_size_and_covers_everything() -> None:
    spec = Spec(5_500)
    chunks = layout(spec)
    assert sum(c.count for c in chunks) == 5_500
    main = [c for c in chunks if (c.scope, c.session) == (MAIN_SCOPE, MAIN_SESSION)]
    assert sum(c.count for c in main) == spec.main_size == 5_500
    offsets = [c.offset for c in chunks]
    assert offsets == sorted(offsets) and offsets[0] == 0


def test_text_is_deterministic_and_about_200_tokens() -> None:
    from engram.tokens import storage_counter

    a, b = TextSource(7, 50_000), TextSource(7, 50_000)
    assert a.text(123) == b.text(123)
    assert a.text(123) != a.text(124)
    counts = [storage_counter().count_text(a.text(i)) for i in range(50)]
    assert 170 <= sum(counts) / len(counts) <= 230


def test_ratio_is_the_median_of_per_round_ratios() -> None:
    fast, slow = Samples([[1.0, 1.0], [2.0, 2.0], [1.0, 3.0]]), Samples([[2.0], [3.0], [10.0]])
    assert ratio(slow, fast)["rounds"] == [2.0, 1.5, 5.0]
    assert ratio(slow, fast)["median"] == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.95) == 4.0


def test_floor_context_fits_the_budget(tmp_path: Path) -> None:
    floor = Floor(str(tmp_path / "f.db"), create=True)
    try:
        sid = floor.session_id("s", "x")
        floor.import_many(sid, list(TextSource(1, 50_000).fresh(30)))
        messages, total = floor.context(sid, 1_000)
        assert 0 < len(messages) < 30 and total <= 1_000
        assert all(isinstance(m, tuple) and len(m) == 2 for m in messages)  # (role, content)
        assert floor.search(sid, messages[-1][1].split()[1].strip(".,?"))
    finally:
        floor.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.slow
def test_tiny_run_writes_json_and_markdown(tmp_path: Path) -> None:
    out = tmp_path / "results"
    code = run.main(
        [
            "--sizes", "200",
            "--rounds", "1",
            "--slot-time", "0.001",
            "--import-slice", "200",
            "--no-rss",
            "--pool-words", "50000",
            "--workdir", str(tmp_path / "work"),
            "--out", str(out),
            "--name", "smoke",
        ]
    )  # fmt: skip
    assert code == 0
    data = json.loads((out / "smoke.json").read_text())
    assert {"meta", "notes", "sizes", "import", "targets"} <= set(data)
    assert {"cpu_count", "python", "sqlite"} <= set(data["meta"]["machine"])
    size = data["sizes"]["200"]
    expected = {
        "append",
        "context_3k",
        "context_50k",
        "search_rare",
        "search_common",
        "search_two_words",
    }
    assert expected <= set(size["scenarios"])
    context = size["scenarios"]["context_3k"]
    assert {"engram_sqlite", "floor"} <= set(context["targets"])
    assert context["targets"]["engram_sqlite"]["median_us"] > 0
    assert context["ratios"]["engram_sqlite/floor"]["median"] > 0
    assert size["checks"]["context_3k"]["engram_sqlite"]["same_newest"] is True
    assert data["import"]["targets"]["engram_sqlite"]["msgs_per_s_median"] > 0
    statuses = {row["status"] for row in data["targets"]}
    assert statuses <= {"PASS", "MISS", "N/A", "INFO"} and data["targets"]
    md = (out / "smoke.md").read_text()
    assert "## Targets" in md and "context_50k" in md
    assert report.markdown(data) == md


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.slow
def test_before_sources_run_in_the_same_rounds(tmp_path: Path) -> None:
    """``--before`` times another source tree (here this one) in a child, slot by slot."""
    out = tmp_path / "results"
    code = run.main(
        [
            "--sizes", "200",
            "--rounds", "2",
            "--slot-time", "0.001",
            "--import-slice", "200",
            "--no-rss",
            "--pool-words", "50000",
            "--workdir", str(tmp_path / "work"),
            "--out", str(out),
            "--before", str(Path(run.REPO)),
        ]
    )  # fmt: skip
    assert code == 0
    data = json.loads((out / "core.json").read_text())
    context = data["sizes"]["200"]["scenarios"]["context_3k"]
    assert len(context["targets"]["engram_before"]["round_medians_us"]) == 2
    assert context["targets"]["engram_before"]["cpu_us"] > 0
    assert context["ratios"]["engram_before/engram_sqlite"]["median"] > 0
    assert data["import"]["targets"]["engram_before"]["msgs_per_s_median"] > 0
    row = next(r for r in data["targets"] if r["target"].startswith("context 3K <="))
    assert row["before"] is not None and row["cpu"] is not None
    assert data["meta"]["params"]["before"].startswith(str(run.REPO))
    assert len(data["meta"]["load_average"]["end"]) == 3
    assert not list((tmp_path / "work" / "import").glob("engram-before-*"))


def test_offline_summary_quality_benchmark_holds() -> None:
    """The offline summary benchmark's headline numbers (deterministic) do not slip back."""
    from benchmarks.summary_quality import ALL, measure, totals

    result = totals({c.name: measure(c) for c in ALL})
    assert result["repeated_entities"] == 0
    assert result["mid_sentence_fragments"] == 0
    assert result["decisions_cut_in_summaries"] == 0
    assert result["filler_in_summaries"] == 0 and result["filler_in_memories"] == 0
    assert result["fact_recall_one_cycle"] >= 0.9 and result["fact_recall_two_cycles"] >= 0.95
    # What a person would not write: questions, quoted turns, preferences that say nothing.
    assert result["questions_in_summaries"] == 0
    assert result["first_person_quotes_in_summaries"] == 0
    assert result["preferences_that_say_nothing"] == 0
    found, labelled = map(int, result["labelled_decisions_found"].split("/"))
    assert found >= 0.9 * labelled and result["decisions_not_labelled"] <= 3
    assert result["entity_precision"] >= 0.95
    assert result["memories_over_two_sentences"] == 0 and result["quoted_turns_in_memories"] == 0


@pytest.mark.slow
def test_retrieval_benchmark_quick_run_beats_its_baseline(tmp_path: Path) -> None:
    from benchmarks.retrieval import run as retrieval

    assert retrieval.main(["--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "retrieval-quick.json").read_text())
    chats = list(report["corpora"]["chats"]["runs"].values())
    assert chats[-1]["all"]["recall@10"] >= chats[0]["all"]["recall@10"] + 0.2
    assert {"next_turn", "date", "name", "multi", "paraphrase", "fact"} <= set(chats[0])
    second = list(report["corpora"]["assistant"]["runs"].values())
    kinds = {"user_fact", "assistant_fact", "preference", "aggregation", "temporal", "update"}
    assert kinds <= set(second[0])
    text = (tmp_path / "retrieval-quick.md").read_text()
    assert "Second corpus: a person and an assistant" in text and "against the floor" in text
