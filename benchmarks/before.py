"""Older Engram sources measured in the same rounds as the current ones: ``--before PATH``.

Two versions of ``engram`` cannot live in one process, so the older tree runs
in a child process (``PYTHONPATH`` = its ``src`` and this benchmark harness)
on its own copy of the dataset, and serves the scenarios slot by slot: the
parent asks for one (round, target) slot at a time, in the same rotating
order as every other target, and gets back the per-call times and the CPU
time per call measured in the child. Interleaved like this, "before" and
"now" share every drift of a loaded machine, so their ratios to the floor
can be compared round by round.

Protocol: one JSON object per line on the child's stdin, one answer per line
on its stdout.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.dataset import APPEND_SESSION, MAIN_SCOPE, MAIN_SESSION, QUERIES, TextSource
from benchmarks.timing import Budget, run_slot, warm_up

REPO = Path(__file__).resolve().parent.parent
#: Name of the older sources' target in the results.
BEFORE = "engram_before"


def copy_database(path: str, to: str) -> str:
    """A private copy of an SQLite dataset (with its WAL) for the child."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(to + suffix):
            os.remove(to + suffix)
    for suffix in ("", "-wal"):
        if os.path.exists(path + suffix):
            shutil.copyfile(path + suffix, to + suffix)
    return to


class Remote:
    """The older sources in a child process, answering one request at a time."""

    def __init__(self, tree: Path, url: str, seed: int, pool_words: int) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(REPO)])}
        command = [sys.executable, "-m", "benchmarks.before", url, str(seed), str(pool_words)]
        pipe = subprocess.PIPE
        self._proc = subprocess.Popen(
            command, cwd=str(REPO), env=env, stdin=pipe, stdout=pipe, text=True
        )
        self.info = self.ask({"op": "info"})

    def ask(self, request: dict[str, Any]) -> Any:
        """Send one request and return the child's answer (its error raised here)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the --before process died (exit {self._proc.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"--before process: {answer['error']}")
        return answer["result"]

    def slot(self, scenario: str, budget: Budget) -> tuple[list[float], float]:
        """One timed slot of ``scenario`` in the child."""
        times, cpu = self.ask({"op": "slot", "scenario": scenario, "budget": vars(budget)})
        return list(times), float(cpu)

    def close(self) -> None:
        """Drop what the append scenario wrote and stop the child."""
        try:
            self.ask({"op": "close"})
        finally:
            for pipe in (self._proc.stdin, self._proc.stdout):
                if pipe is not None:
                    pipe.close()
            self._proc.wait(timeout=60)


# -- the child ---------------------------------------------------------------------------


def _scenarios(mem: Any, texts: list[dict[str, Any]]) -> dict[str, Callable[[], object]]:
    main = mem.session(MAIN_SESSION, scope=MAIN_SCOPE)
    appender = mem.session(APPEND_SESSION, scope=MAIN_SCOPE)
    turn = [0]

    def append() -> object:
        turn[0] = (turn[0] + 1) % len(texts)
        m = texts[turn[0]]
        return appender.add(m["role"], m["content"])

    out: dict[str, Callable[[], object]] = {"append": append}
    out["context_3k"] = lambda: main.context(budget=3_000)
    out["context_50k"] = lambda: main.context(budget=50_000)
    for kind, query in QUERIES.items():
        out[f"search_{kind}"] = (lambda q: lambda: main.search(q))(query)
    return out


def _rates(count: int, work: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return count / (time.perf_counter() - wall), count / (time.process_time() - cpu)


def _import_rate(source: TextSource, size: int, batch: int, path: str) -> tuple[float, float]:
    import engram

    items = list(source.fresh(size, base=20_000_000))  # the parent's import slice
    batches = [items[i : i + batch] for i in range(0, size, batch)]

    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    mem = engram.open(f"sqlite:///{path}")
    session = mem.session("import", scope=MAIN_SCOPE)
    rates = _rates(size, lambda: [session.add_many(batch) for batch in batches])
    mem.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return rates


def _import_file_rate(export: str, count: int, path: str) -> tuple[float, float]:
    from benchmarks.exports import import_file

    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    rates = _rates(count, lambda: import_file(export, f"sqlite:///{path}"))
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return rates


def hide_newer_migrations(path: str) -> list[str]:
    """Take off the copy's ledger the migrations the older sources do not know; their names.

    The dataset is written by the current sources. Their later migrations only
    add (tables, columns with defaults, indexes), which older code reads past;
    without this it refuses a database "written by a newer version".
    """
    import sqlite3

    from engram.store.sqlite.migrations import MIGRATIONS

    known = {migration.__name__ for migration in MIGRATIONS}
    if path == ":memory:":  # a database the older sources create themselves
        return []
    with sqlite3.connect(path) as conn:
        newer = [n for (n,) in conn.execute("SELECT name FROM _migrations") if n not in known]
        conn.executemany("DELETE FROM _migrations WHERE name = ?", [(n,) for n in newer])
    return newer


def serve(url: str, seed: int, pool_words: int) -> None:
    """Answer the parent's requests until it says ``close``."""
    import engram

    hide_newer_migrations(url.removeprefix("sqlite:///"))
    source = TextSource(seed, pool_words)
    mem = engram.open(url, llm=None)
    from engram.tokens import storage_counter

    storage_counter().count_text("the vocabulary is loaded before any timing")
    scenarios = _scenarios(mem, list(source.fresh(4096)))
    gc.collect()
    gc.freeze()  # as the parent does: timed calls pay for their own garbage only
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        try:
            result: Any
            if op == "info":
                result = {"version": engram.__version__, "file": engram.__file__}
            elif op == "warm":
                warm_up(scenarios[request["scenario"]], Budget(**request["budget"]))
                result = None
            elif op == "slot":
                result = run_slot(scenarios[request["scenario"]], Budget(**request["budget"]))
            elif op == "context":
                ctx = mem.session(MAIN_SESSION, scope=MAIN_SCOPE).context(budget=request["budget"])
                result = {"messages": len(ctx.messages), "tokens": ctx.tokens}
            elif op == "import":
                result = _import_rate(source, request["size"], request["batch"], request["path"])
            elif op == "import_file":
                result = _import_file_rate(request["file"], request["count"], request["path"])
            elif op == "close":
                mem.store.delete_session(MAIN_SCOPE, APPEND_SESSION)
                mem.close()
                print(json.dumps({"result": None}), flush=True)
                return
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
            continue
        print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
