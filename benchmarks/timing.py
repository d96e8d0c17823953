"""Interleaved timing: every target of a scenario runs in each round, in rotating order.

Each (round, target) slot runs the call until both ``min_iters`` calls and
``min_time`` seconds are done (at most ``max_iters``), timing every call on
its own (wall clock), and the CPU time of the whole slot (``process_time``:
what the calls cost when the machine is shared, without the waits for a
core). Statistics: the median and p95 of all calls, each round's median and
CPU per call, and ratios between targets taken round by round (the median of
per-round ratios), so drifts in machine speed hit both sides of a ratio alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Budget:
    """How long each (round, target) slot runs."""

    min_iters: int = 5
    max_iters: int = 2000
    min_time: float = 0.25
    warmup_iters: int = 3


@dataclass
class Samples:
    """Seconds per call of one target in one scenario, round by round."""

    rounds: list[list[float]] = field(default_factory=list)
    #: CPU seconds per call, one value per round (the slot's CPU time over its calls).
    cpu: list[float] = field(default_factory=list)

    def add(self, slot: tuple[list[float], float]) -> None:
        """Record one slot: its per-call wall times and its CPU time per call."""
        times, cpu = slot
        self.rounds.append(times)
        self.cpu.append(cpu)

    def all(self) -> list[float]:
        return [s for r in self.rounds for s in r]

    def round_medians(self) -> list[float]:
        return [statistics.median(r) for r in self.rounds if r]

    def summary(self) -> dict[str, Any]:
        values = sorted(self.all())
        if not values:
            return {"iterations": 0}
        return {
            "median_us": round(statistics.median(values) * 1e6, 2),
            "p95_us": round(percentile(values, 0.95) * 1e6, 2),
            "min_us": round(values[0] * 1e6, 2),
            "iterations": len(values),
            "round_medians_us": [round(m * 1e6, 2) for m in self.round_medians()],
            **({"cpu_us": round(statistics.median(self.cpu) * 1e6, 2)} if self.cpu else {}),
        }


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def run_slot(fn: Callable[[], object], budget: Budget) -> tuple[list[float], float]:
    """Time ``fn`` call by call for one slot; also its CPU seconds per call."""
    out: list[float] = []
    clock = time.perf_counter
    cpu_started = time.process_time()
    started = clock()
    while len(out) < budget.max_iters:
        t0 = clock()
        fn()
        out.append(clock() - t0)
        if len(out) >= budget.min_iters and clock() - started >= budget.min_time:
            break
    return out, (time.process_time() - cpu_started) / len(out)


def warm_up(fn: Callable[[], object], budget: Budget) -> None:
    for _ in range(budget.warmup_iters):
        fn()


def ratio(numerator: Samples, denominator: Samples) -> dict[str, Any]:
    """Median of per-round ratios of round medians (numerator / denominator).

    ``cpu`` is the same for CPU time per call, when both sides have it.
    """
    out = _ratios(numerator.round_medians(), denominator.round_medians())
    if numerator.cpu and denominator.cpu:
        out["cpu"] = _ratios(numerator.cpu, denominator.cpu)["median"]
    return out


def _ratios(numerator: list[float], denominator: list[float]) -> dict[str, Any]:
    per_round = [a / b for a, b in zip(numerator, denominator, strict=False) if b > 0]
    if not per_round:
        return {"median": None, "rounds": []}
    return {
        "median": round(statistics.median(per_round), 3),
        "rounds": [round(x, 3) for x in per_round],
    }
