"""Presentation helpers: highlighting is safe, sorting is total, the chart stays in its box."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from engram.activity import Activity
from engram.dashboard.charts import tokens_chart
from engram.dashboard.views import ProjectRow, highlight, sort_projects
from engram.prompt_log import PromptLog, Turn

AT = datetime(2025, 3, 3, tzinfo=UTC)


def row(name: str, sent: int = 0, history: int = 0, when: datetime | None = None) -> ProjectRow:
    prompts = PromptLog(turns=1 if history else 0, sent_tokens=sent, history_tokens=history)
    return ProjectRow(name, 1, 1, 1, 0, when, Activity(prompts=prompts))


class TestHighlight:
    def test_marks_matches_and_escapes_everything_else(self) -> None:
        out = highlight("<b>[pricing]</b> & [plan] [two words]")
        assert str(out) == (
            "&lt;b&gt;<mark>pricing</mark>&lt;/b&gt; &amp; <mark>plan</mark> <mark>two words</mark>"
        )

    @given(st.text())
    def test_no_tag_but_mark_ever_comes_out(self, text: str) -> None:
        out = str(highlight(text)).replace("<mark>", "").replace("</mark>", "")
        assert "<" not in out and ">" not in out


class TestSort:
    def test_projects_without_turns_sort_below_any_savings(self) -> None:
        rows = [row("a"), row("b", sent=50, history=100), row("c", sent=90, history=100)]
        assert [r.name for r in sort_projects(rows, "savings", True)] == ["b", "c", "a"]
        assert [r.name for r in sort_projects(rows, "savings", False)] == ["a", "c", "b"]

    def test_never_active_sorts_last_and_unknown_keys_sort_by_name(self) -> None:
        rows = [row("b"), row("a", when=AT)]
        assert [r.name for r in sort_projects(rows, "activity", True)] == ["a", "b"]
        assert [r.name for r in sort_projects(rows, "bogus", False)] == ["a", "b"]


@given(st.lists(st.tuples(st.integers(0, 10**7), st.integers(0, 10**7)), min_size=1, max_size=240))
def test_chart_points_stay_inside_the_box(values: list[tuple[int, int]]) -> None:
    turns = [Turn(AT, sent, history, 1, 100) for sent, history in values]
    chart = tokens_chart(turns, total_turns=len(turns) + 7)
    for points in (chart.sent_points, chart.history_points):
        pairs = [tuple(map(float, p.split(","))) for p in points.split()]
        assert len(pairs) == len(turns)
        assert all(0 <= x <= chart.width and 0 <= y <= chart.height for x, y in pairs)
    assert chart.first_turn == 8
