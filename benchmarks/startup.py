"""What a fresh process pays before it is useful: open a store, ``engram stats``, ``engram mcp``.

``python -m benchmarks.startup [--runs N] [--src PATH] [--before PATH]`` runs
every measure ``N`` times (default 11), each in a fresh interpreter, in
rotating order so load hits every series alike, and reports medians:

* **open**: ``engram.open()`` of a small SQLite store, after the imports; the
  imports themselves; the first token count after it, with the decoded
  vocabulary already cached and with an empty cache (a first run);
* **stats**: ``python -m engram.cli stats`` on a store of 14 messages, wall
  time of the whole process as its caller sees it;
* **mcp**: ``python -m engram.cli mcp`` spawned by the official ``mcp`` SDK's
  client over stdio, from the spawn to the answer of ``initialize`` (the
  client's ``legacy`` mode: the handshake every MCP client does).

This machine runs with ``PYTHONDONTWRITEBYTECODE=1``, so every process
compiles Engram's sources again; an installed package has compiled bytecode.
Each measure is taken both ways (``with bytecode``: a warm
``PYTHONPYCACHEPREFIX``); the targets are judged on what an installed
package does. ``--before PATH`` times a second source tree (e.g. ``git
archive main src``) in the same rounds and also writes its numbers to
``startup-before.json``; a later run without it shows them as they were.

Results go to ``benchmarks/results/startup.json`` and ``.md`` with the load
average (the machine is shared: medians as they came out).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
#: The targets, in ms (medians, with bytecode).
TARGETS = {"open": 100.0, "stats": 400.0, "mcp_initialize": 1500.0}
MESSAGES = 14

_SEED = """
import sys, engram
with engram.open(sys.argv[1], llm=None) as mem:
    chat = mem.session("chat", "proj")
    for i in range(int(sys.argv[2])):
        role = "user" if i % 2 == 0 else "assistant"
        chat.add(role, f"Message {i}: we decided the launch price is {10 + i} dollars per seat.")
"""

_OPEN = """
import json, sys, time
t0 = time.perf_counter()
import engram
from engram.engine import Engram
t1 = time.perf_counter()
mem = engram.open(sys.argv[1], llm=None)
t2 = time.perf_counter()
from engram.tokens import storage_counter
storage_counter().count_text("hello there, what did we decide?")
t3 = time.perf_counter()
mem.close()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "first_count": t3 - t2}))
"""


class Tree:
    """One source tree to time, with its own small store and bytecode folder."""

    def __init__(self, src: Path, work: Path, label: str) -> None:
        self.src, self.label = src, label
        self.db = f"sqlite:///{work / label}.db"
        self.pycache = str(work / f"pycache-{label}")
        self.vocab = str(work / f"vocab-{label}")

    def env(self, *, bytecode: bool, vocab: str | None = None) -> dict[str, str]:
        """The environment of a child process running this tree."""
        env = {**os.environ, "PYTHONPATH": str(self.src), "ENGRAM_CACHE_DIR": vocab or self.vocab}
        env.pop("ENGRAM_URL", None)
        if bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = self.pycache
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def run(self, args: list[str], *, bytecode: bool, vocab: str | None = None) -> str:
        """Run ``python ARGS`` with this tree; its stdout."""
        out = subprocess.run(
            [sys.executable, *args],
            env=self.env(bytecode=bytecode, vocab=vocab),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if out.returncode != 0:
            raise RuntimeError(f"{self.label}: {' '.join(args)} failed:\n{out.stderr}")
        return out.stdout


def children_cpu_ms() -> float:
    """CPU time (user + system) of every child process that has ended, in ms.

    On a shared machine a process's wall time mostly measures the others; the
    CPU it spends itself barely moves with the load.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def open_times(tree: Tree, *, bytecode: bool, cold_vocab: bool = False) -> dict[str, float]:
    """Import, ``engram.open()`` and first count, in ms, and the process's CPU time."""
    cpu = children_cpu_ms()
    with tempfile.TemporaryDirectory() as empty:
        out = tree.run(
            ["-c", _OPEN, tree.db], bytecode=bytecode, vocab=empty if cold_vocab else None
        )
    times = {key: value * 1000 for key, value in json.loads(out).items()}
    return {**times, "cpu": children_cpu_ms() - cpu}


def stats_ms(tree: Tree, *, bytecode: bool) -> tuple[float, float]:
    """Wall time of ``engram stats`` on the small store and its CPU time, in ms."""
    cpu, start = children_cpu_ms(), time.perf_counter()
    out = tree.run(
        ["-m", "engram.cli", "--db", tree.db, "stats", "--scope", "proj"], bytecode=bytecode
    )
    elapsed = (time.perf_counter() - start) * 1000
    if f"{MESSAGES} messages" not in out:
        raise RuntimeError(f"{tree.label}: unexpected stats output: {out!r}")
    return elapsed, children_cpu_ms() - cpu


def mcp_initialize_ms(tree: Tree, *, bytecode: bool) -> tuple[float, float]:
    """From spawning ``engram mcp`` to the answer of ``initialize``, in ms (the SDK's client).

    The second number is the server process's CPU time, from its start to its
    exit when the client closes the connection right after the handshake.
    """
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram.cli", "mcp", "--db", tree.db, "--scope", "proj", "--session", "chat"],
        env=tree.env(bytecode=bytecode),
        cwd=str(ROOT),
    )

    async def handshake() -> float:
        with anyio.fail_after(120):
            start = time.perf_counter()
            async with Client(params, mode="legacy") as client:
                elapsed = time.perf_counter() - start
                if client.server_capabilities is None or client.server_capabilities.tools is None:
                    raise RuntimeError(f"{tree.label}: engram mcp offered no tools")
        return elapsed * 1000

    cpu = children_cpu_ms()
    elapsed = float(anyio.run(handshake))
    return elapsed, children_cpu_ms() - cpu


def _measures(tree: Tree) -> dict[str, Callable[[], dict[str, float]]]:
    """Every series of one tree: name -> a callable returning {series: ms}."""

    def opening(bytecode: bool, suffix: str) -> Callable[[], dict[str, float]]:
        def run() -> dict[str, float]:
            t = open_times(tree, bytecode=bytecode)
            cold = open_times(tree, bytecode=bytecode, cold_vocab=True)
            return {
                f"import{suffix}": t["import"],
                f"open{suffix}": t["open"],
                f"first_count{suffix}": t["first_count"],
                f"open_and_first_count{suffix}": t["open"] + t["first_count"],
                f"first_count_no_cache{suffix}": cold["first_count"],
                f"open_process_cpu{suffix}": t["cpu"],
            }

        return run

    def command(
        measure: Callable[..., tuple[float, float]], key: str, bytecode: bool, suffix: str
    ) -> Callable[[], dict[str, float]]:
        def run() -> dict[str, float]:
            wall, cpu = measure(tree, bytecode=bytecode)
            return {f"{key}{suffix}": wall, f"{key}_cpu{suffix}": cpu}

        return run

    return {
        "open": opening(False, ""),
        "open_pyc": opening(True, "_pyc"),
        "stats": command(stats_ms, "stats", False, ""),
        "stats_pyc": command(stats_ms, "stats", True, "_pyc"),
        "mcp": command(mcp_initialize_ms, "mcp_initialize", False, ""),
        "mcp_pyc": command(mcp_initialize_ms, "mcp_initialize", True, "_pyc"),
    }


def measure(trees: list[Tree], runs: int) -> dict[str, dict[str, list[float]]]:
    """Every series of every tree, ``runs`` times, in rotating order."""
    series: dict[str, dict[str, list[float]]] = {tree.label: {} for tree in trees}
    jobs = [(tree, name, job) for tree in trees for name, job in _measures(tree).items()]
    for tree in trees:  # a store each, and warm bytecode and vocabulary caches
        tree.run(["-c", _SEED, tree.db, str(MESSAGES)], bytecode=True)
        for _, job in _measures(tree).items():
            job()
    for round_ in range(runs):
        shift = round_ % len(jobs)
        for tree, _name, job in jobs[shift:] + jobs[:shift]:
            for key, value in job().items():
                series[tree.label].setdefault(key, []).append(value)
    return series


def summarize(series: dict[str, list[float]], runs: int) -> dict[str, Any]:
    """Medians and minima of one tree, and whether the targets are met."""
    medians = {k: round(statistics.median(v), 1) for k, v in series.items()}
    met = {
        "open": medians["open_pyc"] <= TARGETS["open"],
        "stats": medians["stats_pyc"] <= TARGETS["stats"],
        "mcp_initialize": medians["mcp_initialize_pyc"] <= TARGETS["mcp_initialize"],
    }
    return {
        "runs": runs,
        "median_ms": medians,
        "min_ms": {k: round(min(v), 1) for k, v in series.items()},
        "targets_ms": TARGETS,
        "met": met,
        "load_average": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


_ROWS = (
    ("`import engram` + `from engram.engine import Engram`", "import"),
    ("`engram.open()` of a small SQLite store (after the imports)", "open"),
    ("first token count after it (vocabulary cached)", "first_count"),
    ("first token count, empty vocabulary cache", "first_count_no_cache"),
    ("open + first count", "open_and_first_count"),
    (f"`engram stats` on {MESSAGES} messages (whole process)", "stats"),
    ("`engram mcp`: spawn to `initialize` answered (SDK client, stdio)", "mcp_initialize"),
    ("CPU time: the process that imports, opens and counts once", "open_process_cpu"),
    ("CPU time: the `engram stats` process", "stats_cpu"),
    (
        "CPU time: the `engram mcp` process (start to exit after the handshake)",
        "mcp_initialize_cpu",
    ),
)


def _cell(result: dict[str, Any] | None, key: str) -> str:
    if result is None:
        return "-"
    med = result["median_ms"]
    return f"{med.get(key + '_pyc', '-')} / {med.get(key, '-')}"


def markdown(result: dict[str, Any], before: dict[str, Any] | None) -> str:
    """The report: medians with and without bytecode, beside the stored ``before`` run."""
    lines = [
        "# Startup: open a store, `engram stats`, `engram mcp`",
        "",
        f"`python -m benchmarks.startup --runs {result['runs']}`: every measure in fresh",
        "processes, in rotating order; medians in ms, *with bytecode / without* (this machine",
        "sets `PYTHONDONTWRITEBYTECODE=1`, so without it every process compiles Engram's",
        "sources; an installed package has bytecode). Python"
        f" {result['python']}, {result['cpus']} CPUs shared with other work; load average at the"
        f" end {result['load_average'][0]:.1f}. {result['measured_at']}.",
        "",
        "| measure | now | before |",
        "| --- | --- | --- |",
        *(f"| {label} | {_cell(result, key)} | {_cell(before, key)} |" for label, key in _ROWS),
        "",
        "Targets (medians with bytecode): "
        + "; ".join(
            f"{name} at most {limit:.0f} ms: {'met' if result['met'][name] else 'NOT met'}"
            for name, limit in result["targets_ms"].items()
        )
        + ".",
    ]
    if before is not None:
        when = (
            "in the same rounds"
            if before["measured_at"] == result["measured_at"]
            else f"with `--before` on {before['measured_at']}"
        )
        lines += [
            "",
            "Before: the sources before the vocabulary was loaded at the first count and cached,"
            f" timed {when} (load average {before['load_average'][0]:.1f} at its end). They"
            " loaded it inside `engram.open()`, so their first count cost nothing more.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure and write the results."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--src", default=str(ROOT / "src"), help="the engram sources to time")
    parser.add_argument("--before", default=None, help="older sources to time in the same rounds")
    parser.add_argument("--out", default=str(RESULTS), help="folder of the results files")
    args = parser.parse_args(argv)
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as work:
        trees = [Tree(Path(args.src), Path(work), "now")]
        if args.before:
            trees.append(Tree(Path(args.before), Path(work), "before"))
        series = measure(trees, args.runs)
    result = summarize(series["now"], args.runs)
    out.mkdir(parents=True, exist_ok=True)
    before = None
    if args.before:
        before = {**summarize(series["before"], args.runs), "measured_at": result["measured_at"]}
        (out / "startup-before.json").write_text(json.dumps(before, indent=2) + "\n")
    elif (out / "startup-before.json").exists():
        before = json.loads((out / "startup-before.json").read_text())
    (out / "startup.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "startup.md").write_text(markdown(result, before))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
