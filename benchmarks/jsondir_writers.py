"""Concurrent writers on one store: messages per second, jsondir beside SQLite.

``python -m benchmarks.jsondir_writers [--adds N] [--runs R] [--src PATH] [--label L]
[--compare OLD_SRC]``

Each measurement runs in a fresh process (so nothing is cached between runs):
it opens ``Engram(url, llm=None)`` on an empty directory, adds one message to
load the token counter, then starts THREADS threads that each call
``Session.add`` N times and waits for all of them. Odd threads share one
session, even threads have their own (the mix of
``tests/hardening/test_jsondir_housekeeping.py``). The figure is messages per
second over the whole load (wall clock, from releasing the threads to the last
join). Every stored message is counted afterwards, so a run that lost or
duplicated one fails instead of reporting a number.

Scenarios, each on jsondir and on SQLite (the reference, same load, same process
layout): 8 threads and 1 thread on fresh sessions, and 8 threads on one session
that already holds ``--prefill`` messages (what a long conversation costs per
add). The process also counts its ``fsync``/``fdatasync`` calls, reported per
message. Runs are interleaved (every scenario once per round) so the machine's
load hits each alike; medians of ``--runs`` rounds are reported, with every run.

``--compare`` also runs jsondir on older sources in the same rounds and reports the
speed-up as the median of per-round ratios. ``--src`` times other sources instead
(e.g. ``--src OLD_SRC --label before``); results go to ``benchmarks/results/jsondir-writers``
(``-<label>``) ``.json`` and ``.md``. The floor checked: jsondir with 8 threads at
least 60 messages/s (ten times the 6 messages/s the hardening probe measured).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
FLOOR_MSG_S = 60.0
SCENARIOS = (("fresh", 8, 0), ("fresh", 1, 0), ("long", 8, None))
BACKENDS = ("jsondir", "sqlite")

WORKER = r"""
import json, os, sys, tempfile, threading, time

counts = {"sync": 0}
for _name in ("fsync", "fdatasync"):
    _real = getattr(os, _name, None)
    if _real is not None:
        def _counted(fd, _real=_real):
            counts["sync"] += 1
            return _real(fd)
        setattr(os, _name, _counted)

import engram

backend, threads, adds, prefill, base = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
folder = tempfile.mkdtemp(prefix="engram-writers-", dir=base or None)
url = f"jsondir://{folder}/ctx" if backend == "jsondir" else f"sqlite:///{folder}/engram.db"
text = "thread {} message {} about the pricing page, the launch date and the budget"
with engram.open(url, llm=None) as mem:
    mem.session("warm-up", scope="bench").add("user", "load the token counter")
    if prefill:
        mem.session("shared", scope="bench").add_many(
            [{"role": "user", "content": text.format("old", k)} for k in range(prefill)]
        )
    start = threading.Barrier(threads + 1)
    errors = []

    def write(index):
        name = "shared" if index % 2 or prefill else f"own-{index}"
        chat = mem.session(name, scope="bench")
        start.wait()
        try:
            for k in range(adds):
                chat.add("user", text.format(index, k))
        except Exception as exc:
            errors.append(repr(exc))

    workers = [threading.Thread(target=write, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    synced = counts["sync"]
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    synced = counts["sync"] - synced
    stored = sum(
        info.message_count for info in mem.sessions("bench", limit=1000) if info.id != "warm-up"
    )
assert not errors, errors
assert stored == threads * adds + prefill, (stored, threads * adds + prefill)
print(json.dumps({"seconds": elapsed, "messages": threads * adds, "syncs": synced}))
"""


def run_once(src: str, backend: str, threads: int, adds: int, prefill: int, base: str) -> Any:
    """One measurement in a fresh process: seconds, messages and fsync calls."""
    env = {**os.environ, "PYTHONPATH": src}
    args = [backend, str(threads), str(adds), str(prefill), base]
    done = subprocess.run(
        [sys.executable, "-c", WORKER, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{backend} x{threads} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(
    src: str, adds: int, runs: int, prefill: int, base: str, compare: str = ""
) -> dict[str, Any]:
    """Every scenario on every backend, ``runs`` interleaved rounds; medians.

    With ``compare`` (other sources), jsondir also runs on them in the same rounds,
    as ``jsondir-before``, and the speed-up is the median of per-round ratios.
    """
    raw: dict[str, list[Any]] = {}
    targets = [(b, src) for b in BACKENDS] + ([("jsondir", compare)] if compare else [])
    for _ in range(runs):
        for name, threads, fill in SCENARIOS:
            for backend, code in targets:
                label = backend if code == src else f"{backend}-before"
                key = f"{label} {name} x{threads}"
                one = run_once(code, backend, threads, adds, prefill if fill is None else 0, base)
                raw.setdefault(key, []).append(one)
    table = {}
    for key, samples in raw.items():
        rates = [s["messages"] / s["seconds"] for s in samples]
        table[key] = {
            "median_msg_s": round(statistics.median(rates), 1),
            "runs_msg_s": [round(r, 1) for r in rates],
            "syncs_per_message": round(
                statistics.median(s["syncs"] / s["messages"] for s in samples), 2
            ),
        }
    for name, threads, _ in SCENARIOS if compare else ():
        now, old = raw[f"jsondir {name} x{threads}"], raw[f"jsondir-before {name} x{threads}"]
        table[f"jsondir {name} x{threads}"]["speedup_over_before"] = round(
            statistics.median(
                (a["messages"] / a["seconds"]) / (b["messages"] / b["seconds"])
                for a, b in zip(now, old, strict=True)
            ),
            1,
        )
    headline = table["jsondir fresh x8"]["median_msg_s"]
    return {
        "adds_per_thread": adds,
        "runs": runs,
        "prefill": prefill,
        "scenarios": table,
        "floor_msg_s": FLOOR_MSG_S,
        "met": headline >= FLOOR_MSG_S,
        "jsondir_over_sqlite_x8": round(headline / table["sqlite fresh x8"]["median_msg_s"], 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "src": src,
        "compare": compare,
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def _markdown(result: dict[str, Any], command: str, before: dict[str, Any] | None) -> str:
    rows = result["scenarios"]
    lines = [
        "# Concurrent writers: jsondir beside SQLite",
        "",
        f"`{command}`, {result['measured_at']}: {result['cpus']} CPUs shared with other work,"
        f" Python {result['python']}, load average at the end {result['load_average']}."
        f" Each run is a fresh process; threads x {result['adds_per_thread']} `Session.add`"
        " on one `Engram`, odd threads on one shared session, even threads on their own;"
        f" `long` = 8 threads on one session that already holds {result['prefill']} messages."
        f" Median of {result['runs']} interleaved runs (all runs listed).",
        "",
        "| backend, scenario, threads | messages/s (median) | runs | fsyncs per message"
        " | speed-up over before (median of per-round ratios) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, row in rows.items():
        speedup = row.get("speedup_over_before")
        lines.append(
            f"| {key} | {row['median_msg_s']} | {row['runs_msg_s']} | {row['syncs_per_message']}"
            f" | {f'{speedup}x' if speedup else ''} |"
        )
    if result.get("compare"):
        lines += [
            "",
            f"`jsondir-before` is the same load on the sources at `{result['compare']}`,"
            " run in the same rounds (interleaved), so the machine's load hits both alike.",
        ]
    lines += [
        "",
        f"jsondir / SQLite with 8 threads: {result['jsondir_over_sqlite_x8']}."
        f" Floor: jsondir with 8 threads at least {result['floor_msg_s']:.0f} messages/s:"
        f" {'met' if result['met'] else 'NOT met'}.",
        "SQLite runs with `synchronous=NORMAL` in WAL mode: it does not fsync on each commit,"
        " while jsondir fsyncs before `add` returns (durable across a power loss).",
    ]
    if before is not None:
        old = before["scenarios"]
        lines += [
            "",
            f"Before: the same load on the sources at `{before['src']}` (`--label before`),"
            f" {before['measured_at']}, load average {before['load_average']}:",
            "",
        ]
        lines += ["| backend, scenario, threads | before msg/s | now msg/s | speed-up |"]
        lines += ["| --- | --- | --- | --- |"]
        for key, row in rows.items():
            if key in old and old[key]["median_msg_s"]:
                was = old[key]["median_msg_s"]
                lines.append(
                    f"| {key} | {was} | {row['median_msg_s']} | {row['median_msg_s'] / was:.1f}x |"
                )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure and write the results."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.jsondir_writers")
    parser.add_argument("--adds", type=int, default=100, help="adds per thread")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--prefill", type=int, default=2000, help="messages of the long session")
    parser.add_argument("--src", default=str(ROOT / "src"), help="the engram sources to time")
    parser.add_argument("--label", default="", help="suffix of the results files (e.g. before)")
    parser.add_argument("--dir", default="", help="where the stores go (default: the temp dir)")
    parser.add_argument(
        "--compare", default="", help="older sources to run jsondir on in the same rounds"
    )
    args = parser.parse_args(argv)
    result = measure(args.src, args.adds, args.runs, args.prefill, args.dir, args.compare)
    stem = "jsondir-writers" + (f"-{args.label}" if args.label else "")
    command = "python -m benchmarks.jsondir_writers " + " ".join(argv or sys.argv[1:])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    before_path = RESULTS / "jsondir-writers-before.json"
    before = None
    if before_path.exists() and not args.label:
        before = json.loads(before_path.read_text())
    (RESULTS / f"{stem}.md").write_text(_markdown(result, command.strip(), before))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
