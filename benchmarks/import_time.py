"""How long ``import engram`` takes in a fresh process, and what the first turn adds.

``python -m benchmarks.import_time [--runs N] [--src PATH]`` starts ``N`` fresh
interpreters (default 15) running ``python -X importtime -c "import engram"``
and reports the median of the ``engram`` line (cumulative microseconds), with
the floor for comparison: an interpreter importing nothing but ``json``,
``sqlite3`` and ``dataclasses`` (what any storage library needs). It also
times, in fresh processes, ``import engram`` plus a first turn (open an
in-memory store, add a message, build a context): lazy imports move work, they
do not remove it, and the second number says where it went. ``from engram
import Engram`` is timed apart: since the package loads its names on first use
(PEP 562), that line is where the facade's modules are paid for.

This machine runs with ``PYTHONDONTWRITEBYTECODE=1``, so every process compiles
Engram's sources again; an installed package has compiled bytecode. The
``with bytecode`` rows time the same lines with a warm ``__pycache__`` (in a
temporary ``PYTHONPYCACHEPREFIX``), which is what a ``pip install`` user sees.

Results go to ``benchmarks/results/import-time.json`` and ``.md``. The machine
is shared, so medians of many runs are reported as they came out, and a
``load`` line says how busy it was.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 150.0
_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \|\s*(\S+)")
FIRST_TURN = (
    "import time; t = time.perf_counter(); import engram; "
    "mem = engram.open('memory://bench', llm=None); s = mem.session('s'); "
    "s.add('user', 'hello there, what did we decide?'); s.context(budget=2000); "
    "print((time.perf_counter() - t) * 1000); mem.close()"
)


def _env(src: str, pycache: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": src}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def statement_ms(src: str, statement: str, pycache: str | None = None) -> float:
    """Wall time of ``statement`` in one fresh interpreter, in ms."""
    code = (
        f"import time; t = time.perf_counter(); {statement}; "
        "print((time.perf_counter() - t) * 1000)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(src, pycache),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


def import_ms(src: str, module: str = "engram") -> float:
    """Cumulative import time of ``module`` in one fresh interpreter, in ms."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=_env(src),
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    for line in out.splitlines():
        match = _LINE.match(line)
        if match and match.group(2) == module:
            return int(match.group(1)) / 1000
    raise RuntimeError(f"no import line for {module}")


def cpu_ms(src: str) -> float:
    """CPU time (user + system) of ``import engram`` in one fresh process, in ms.

    On a shared machine the wall time of an import mostly measures the other
    processes; the CPU the import itself spends barely moves with the load.
    """
    code = (
        "import time; t = time.process_time(); import engram; "
        "print((time.process_time() - t) * 1000)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(src), capture_output=True, text=True, check=True
    )
    return float(out.stdout)


def floor_ms() -> float:
    """A fresh interpreter importing json, sqlite3 and dataclasses (wall time of the imports)."""
    code = (
        "import time; t = time.perf_counter(); import json, sqlite3, dataclasses; "
        "print((time.perf_counter() - t) * 1000)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def first_turn_ms(src: str, pycache: str | None = None) -> float:
    """``import engram`` plus a first turn on an in-memory store, in one fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", FIRST_TURN],
        env=_env(src, pycache),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


def measure(src: str, runs: int) -> dict[str, Any]:
    """Medians over ``runs`` fresh processes, interleaved so load hits every series alike."""
    keys = ("import", "import_cpu", "floor", "first_turn", "facade", "facade_pyc", "first_turn_pyc")
    series: dict[str, list[float]] = {key: [] for key in keys}
    with tempfile.TemporaryDirectory() as pycache:
        statement_ms(src, "import engram.tools, engram.aio; from engram import Engram", pycache)
        for _ in range(runs):
            series["import"].append(import_ms(src))
            series["import_cpu"].append(cpu_ms(src))
            series["floor"].append(floor_ms())
            series["first_turn"].append(first_turn_ms(src))
            series["facade"].append(statement_ms(src, "from engram import Engram"))
            series["facade_pyc"].append(statement_ms(src, "from engram import Engram", pycache))
            series["first_turn_pyc"].append(first_turn_ms(src, pycache))
    medians = {k: round(statistics.median(v), 1) for k, v in series.items()}
    return {
        "runs": runs,
        "median_ms": medians,
        "min_ms": {k: round(min(v), 1) for k, v in series.items()},
        "target_ms": TARGET_MS,
        "met": medians["import"] <= TARGET_MS,
        "load_average": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


_ROWS = (
    ("`import engram`", "import"),
    ("`import engram`, CPU time of the process", "import_cpu"),
    ("floor: `import json, sqlite3, dataclasses`", "floor"),
    ("`import engram` + open + add + context", "first_turn"),
    ("`from engram import Engram`", "facade"),
    ("`from engram import Engram`, with bytecode", "facade_pyc"),
    ("`import engram` + open + add + context, with bytecode", "first_turn_pyc"),
)


def _markdown(result: dict[str, Any], before: dict[str, Any] | None) -> str:
    med, low = result["median_ms"], result["min_ms"]
    lines = [
        "# Import time",
        "",
        f"`python -m benchmarks.import_time --runs {result['runs']}`: fresh interpreters,",
        '`python -X importtime -c "import engram"` (the `engram` line, cumulative).',
        f"Python {result['python']}, {result['cpus']} CPUs shared with other work;"
        f" load average at the end {result['load_average'][0]:.1f}. {result['measured_at']}.",
        "",
        "| measure | median ms | min ms |",
        "| --- | --- | --- |",
        *(f"| {label} | {med[key]} | {low[key]} |" for label, key in _ROWS),
        "",
        f"Target: `import engram` at most {result['target_ms']:.0f} ms (median):"
        f" {'met' if result['met'] else 'NOT met'}.",
    ]
    if before is not None:
        old = before["median_ms"]
        lines += [
            "",
            f"Before (same command, `--label before`, on the sources before the package"
            f" loaded its names on first use): `import engram` {old['import']} ms median"
            f" ({old.get('import_cpu', '-')} ms CPU), `from engram import Engram`"
            f" {old.get('facade', '-')} ms, first turn {old['first_turn']} ms, floor"
            f" {old['floor']} ms, load average {before['load_average'][0]:.1f}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure and write the results."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.import_time")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--src", default=str(ROOT / "src"), help="the engram sources to time")
    parser.add_argument("--label", default="", help="suffix of the results files (e.g. before)")
    args = parser.parse_args(argv)
    result = measure(args.src, args.runs)
    stem = "import-time" + (f"-{args.label}" if args.label else "")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    before_path = RESULTS / "import-time-before.json"
    before = None
    if before_path.exists() and not args.label:
        before = json.loads(before_path.read_text())
    (RESULTS / f"{stem}.md").write_text(_markdown(result, before))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
