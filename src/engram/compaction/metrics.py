"""Counts of the compactions one ``Engram`` ran, by outcome, and the seconds they took.

Every compaction goes through :meth:`Runtime.compact`: those a turn ran within
its deadline, those run in the background or claimed from the shared queue,
and those asked for through the API. The server's ``/metrics`` reads
:meth:`CompactionMetrics.snapshot` at scrape time.
"""

from __future__ import annotations

import threading

from engram.compaction.cycle import CompactionResult

__all__ = ["OUTCOMES", "CompactionMetrics", "outcome"]

#: Outcomes, in the order they are reported.
OUTCOMES = ("llm", "offline", "failed", "skipped")


def outcome(result: CompactionResult) -> str:
    """``llm`` (the model wrote it), ``offline``, ``failed`` (the fallback did), ``skipped``."""
    if not result.committed:
        return "skipped"
    if result.degraded:
        return "failed"
    if result.state is not None and (result.state.summarizer or "").startswith("llm"):
        return "llm"
    return "offline"


class CompactionMetrics:
    """Thread-safe counts and seconds of compactions, by outcome, and citations dropped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(OUTCOMES, 0)
        self._seconds = dict.fromkeys(OUTCOMES, 0.0)
        self._dropped = 0
        self._flagged_out = 0

    def record(self, result: CompactionResult, seconds: float) -> None:
        """Count one compaction that took ``seconds`` (and the citations it dropped)."""
        kind = outcome(result)
        with self._lock:
            self._counts[kind] += 1
            self._seconds[kind] += seconds
            self._dropped += result.citations_dropped
            self._flagged_out += result.flagged_out

    @property
    def flagged_kept_out(self) -> int:
        """Messages kept out of summaries because they read like instructions to a model."""
        with self._lock:
            return self._flagged_out

    @property
    def citations_dropped(self) -> int:
        """Cited ranges summarizers wrote outside what their fold may cite (dropped)."""
        with self._lock:
            return self._dropped

    def snapshot(self) -> dict[str, tuple[int, float]]:
        """Outcome -> (compactions, seconds), read at one instant."""
        with self._lock:
            return {kind: (self._counts[kind], self._seconds[kind]) for kind in OUTCOMES}
