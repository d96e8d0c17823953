"""The dashboard benchmark runs end to end on a tiny dataset and reports every page."""

from __future__ import annotations

from benchmarks import dashboard


def test_every_page_is_measured() -> None:
    url, timings = dashboard._prepare(300, pool_words=50_000)
    pages = dashboard._measure(url, requests=2)
    assert set(pages) == set(dashboard._pages(1))
    assert all(row["median_ms"] <= row["p95_ms"] <= row["max_ms"] for row in pages.values())
    report = dashboard._report(300, timings, pages)
    assert "| prompt |" in report and "300 messages" in report
