"""``make bench``: Engram beside a raw SQLite floor and the Agents SDK, 1K to 1M messages.

Usage::

    python -m benchmarks.run                      # sizes 1K,10K,100K,1M, sqlite
    python -m benchmarks.run --quick              # sizes 1K,10K, fewer rounds
    python -m benchmarks.run --sizes 1000,100000 --rounds 7 --backends sqlite,postgres

Datasets are built once into ``benchmarks/work/`` and reused while their
parameters (and Engram's storage code) are unchanged. Results go to
``benchmarks/results/core.json`` and ``core.md``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import engram
from benchmarks import report
from benchmarks.before import BEFORE, Remote, copy_database
from benchmarks.dataset import (
    APPEND_SESSION,
    MAIN_SCOPE,
    MAIN_SESSION,
    POOL_WORDS,
    QUERIES,
    Spec,
    TextSource,
    layout,
)
from benchmarks.engram_bench import (
    EngramTarget,
    build_engram,
    file_size,
    postgres_available,
    postgres_url,
    remove_sqlite,
    sqlite_url,
    stop_postgres,
)
from benchmarks.exports import chatgpt_export, import_file
from benchmarks.floor import Floor, build
from benchmarks.peers import AgentsPeer, LikeScan, available, build_agents
from benchmarks.timing import Budget, Samples, ratio, run_slot, warm_up

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
BUDGETS = {"context_3k": 3_000, "context_50k": 50_000}
IMPORT_BATCH = 1_000
#: The import slice as a ChatGPT export, through `engram import`'s parse, check and write.
CHATGPT = "engram_sqlite_chatgpt"
AGENTS_MAIN = f"{MAIN_SCOPE}/{MAIN_SESSION}"

# Files whose content decides whether a cached Engram database is still valid.
_ENGRAM_SQLITE_FILES = (
    "src/engram/store/sqlite/backend.py",
    "src/engram/store/sqlite/connection.py",
    "src/engram/store/sqlite/migrations.py",
    "src/engram/store/sqlite/rows.py",
    "src/engram/store/sqlite/scope.py",
    "src/engram/store/sqlite/search.py",
    "src/engram/search/index.py",
)
_ENGRAM_PG_FILES = (
    "src/engram/store/postgres/backend.py",
    "src/engram/store/postgres/connection.py",
    "src/engram/store/postgres/migrations.py",
    "src/engram/store/postgres/rows.py",
    "src/engram/store/postgres/scope.py",
    "src/engram/store/postgres/search.py",
    "src/engram/search/index.py",
)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _fingerprint(files: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in files:
        path = REPO / name
        digest.update(name.encode())
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["engram_version"] = engram.__version__  # the tree measured, installed or not
    for dist in ("tiktoken", "openai-agents", "psycopg"):
        try:
            from importlib.metadata import version

            info[f"{dist}_version"] = version(dist)
        except Exception:
            pass
    return info


# -- datasets -------------------------------------------------------------------------


class Progress:
    def __init__(self, what: str, total: int) -> None:
        self.what, self.total, self.done, self.next = what, total, 0, total // 10
        self.started = time.perf_counter()

    def __call__(self, n: int) -> None:
        self.done += n
        if self.total >= 50_000 and self.done >= self.next:
            rate = self.done / max(time.perf_counter() - self.started, 1e-9)
            log(f"  {self.what}: {self.done:,}/{self.total:,} ({rate:,.0f} msg/s)")
            self.next += self.total // 10


class Datasets:
    """The cached databases of one dataset spec, built on demand."""

    def __init__(self, spec: Spec, workdir: Path, source: TextSource) -> None:
        self.spec = spec
        self.dir = workdir / spec.key()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.source = source
        self.manifest_path = self.dir / "manifest.json"
        self.manifest: dict[str, Any] = {}
        if self.manifest_path.exists():
            self.manifest = json.loads(self.manifest_path.read_text())
        self.built_now: dict[str, float] = {}

    def path(self, name: str) -> str:
        return str(self.dir / f"{name}.db")

    def _save(self) -> None:
        self.manifest_path.write_text(json.dumps(self.manifest, indent=1))

    def _ensure(
        self, name: str, fingerprint: str, exists: bool, builder: Callable[[], float]
    ) -> None:
        entry = self.manifest.get(name)
        if entry and entry.get("fingerprint") == fingerprint and exists:
            return
        self.manifest.pop(name, None)
        self._save()
        log(f"building {name} for {self.spec.total:,} messages")
        seconds = builder()
        self.built_now[name] = seconds
        self.manifest[name] = {
            "fingerprint": fingerprint,
            "seconds": round(seconds, 2),
            "msgs_per_s": round(self.spec.total / seconds, 1),
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        self._save()
        log(f"built {name} in {seconds:.1f}s ({self.spec.total / seconds:,.0f} msg/s)")

    def ensure_floor(self) -> str:
        path = self.path("floor")
        self._ensure(
            "floor",
            "floor-1",
            os.path.exists(path),
            lambda: build(path, layout(self.spec), self.source, Progress("floor", self.spec.total)),
        )
        return path

    def ensure_agents(self) -> str:
        path = self.path("agents")
        self._ensure(
            "agents",
            "agents-1",
            os.path.exists(path),
            lambda: build_agents(
                path, layout(self.spec), self.source, Progress("agents", self.spec.total)
            ),
        )
        return path

    def ensure_engram_sqlite(self) -> str:
        path = self.path("engram")

        def builder() -> float:
            remove_sqlite(path)
            seconds = build_engram(
                sqlite_url(path),
                layout(self.spec),
                self.source,
                Progress("engram", self.spec.total),
            )
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            return seconds

        self._ensure(
            "engram_sqlite", _fingerprint(_ENGRAM_SQLITE_FILES), os.path.exists(path), builder
        )
        return sqlite_url(path)

    def ensure_engram_postgres(self) -> str:
        schema = "bench_" + self.spec.key().replace("-", "_")
        fingerprint = _fingerprint(_ENGRAM_PG_FILES)
        entry = self.manifest.get("engram_postgres")
        exists = bool(
            entry
            and entry.get("fingerprint") == fingerprint
            and _pg_schema_ok(self.dir.parent, schema)
        )

        def builder() -> float:
            url = postgres_url(self.dir.parent, schema, create=True)
            return build_engram(
                url, layout(self.spec), self.source, Progress("engram-pg", self.spec.total)
            )

        self._ensure("engram_postgres", fingerprint, exists, builder)
        return postgres_url(self.dir.parent, schema, create=False)


def _pg_schema_ok(workdir: Path, schema: str) -> bool:
    import psycopg

    from benchmarks.engram_bench import postgres_admin_url

    try:
        with psycopg.connect(postgres_admin_url(workdir), autocommit=True) as conn:
            row = conn.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s LIMIT 1", (schema,)
            ).fetchone()
        return row is not None
    except Exception:
        return False


# -- one dataset size ------------------------------------------------------------------


class Texts:
    """Fresh ~200-token messages for appends, cycling."""

    def __init__(self, source: TextSource, n: int = 4096) -> None:
        self.items = list(source.fresh(n))
        self.i = 0

    def next(self) -> dict[str, Any]:
        self.i = (self.i + 1) % len(self.items)
        return self.items[self.i]


def bench_size(
    spec: Spec,
    data: Datasets,
    backends: list[str],
    budget: Budget,
    rounds: int,
    notes: list[str],
    texts: Texts,
    before: Path | None = None,
) -> dict[str, Any]:
    floor_path = data.ensure_floor()
    agents_path = data.ensure_agents() if available() is None else None
    engram_urls: dict[str, str] = {}
    if "sqlite" in backends:
        engram_urls["engram_sqlite"] = data.ensure_engram_sqlite()
    if "postgres" in backends:
        engram_urls["engram_postgres"] = data.ensure_engram_postgres()

    floor = Floor(floor_path)
    fsid = floor.session_id(MAIN_SCOPE, MAIN_SESSION)
    fappend = floor.session_id(MAIN_SCOPE, APPEND_SESSION)
    like = LikeScan(floor.conn)
    peer = AgentsPeer(agents_path) if agents_path else None
    engrams = {name: EngramTarget(url) for name, url in engram_urls.items()}
    appenders = {name: e.session(APPEND_SESSION) for name, e in engrams.items()}
    remote: Remote | None = None
    if before is not None and "engram_sqlite" in engram_urls:
        copy = copy_database(data.path("engram"), data.path("engram-before"))
        remote = Remote(before, sqlite_url(copy), data.spec.seed, data.spec.pool_words)

    # scenario -> target -> callable
    scenarios: dict[str, dict[str, Callable[[], object]]] = {}

    def engram_add(session: Any) -> Callable[[], object]:
        def call() -> object:
            m = texts.next()
            return session.add(m["role"], m["content"])

        return call

    def floor_add() -> object:
        m = texts.next()
        return floor.append(fappend, m["role"], m["content"])

    scenarios["append"] = {name: engram_add(s) for name, s in appenders.items()}
    scenarios["append"]["floor"] = floor_add
    for scenario, tokens in BUDGETS.items():
        targets: dict[str, Callable[[], object]] = {}
        for name, e in engrams.items():
            targets[name] = (lambda s, b: lambda: s.context(budget=b))(e.main, tokens)
        targets["floor"] = (lambda b: lambda: floor.context(fsid, b))(tokens)
        if peer is not None:
            targets["agents_sdk"] = (lambda b: lambda: peer.context(AGENTS_MAIN, b))(tokens)
        scenarios[scenario] = targets
    for kind, query in QUERIES.items():
        targets = {}
        for name, e in engrams.items():
            targets[name] = (lambda s, q: lambda: s.search(q))(e.main, query)
        targets["floor_fts"] = (lambda q: lambda: floor.search(fsid, q))(query)
        targets["like_scan"] = (lambda q: lambda: like.search(fsid, q))(query)
        scenarios[f"search_{kind}"] = targets

    checks = _same_result_checks(engrams, floor, fsid, peer, like)
    if remote is not None:
        for scenario, tokens in BUDGETS.items():
            checks[scenario][BEFORE] = remote.ask({"op": "context", "budget": tokens})
        for targets in scenarios.values():
            targets[BEFORE] = _remote_marker

    samples: dict[str, dict[str, Samples]] = {
        s: {t: Samples() for t in targets} for s, targets in scenarios.items()
    }
    # The harness's own objects (texts, peers, SDKs) are frozen out of the garbage
    # collector's walks, so a timed call pays for its own garbage only, as it would
    # in a lean process (the --before process does the same).
    gc.collect()
    gc.freeze()
    try:
        for scenario, targets in scenarios.items():
            for name, fn in targets.items():
                if name == BEFORE and remote is not None:
                    remote.ask({"op": "warm", "scenario": scenario, "budget": vars(budget)})
                else:
                    warm_up(fn, budget)
        for r in range(rounds):
            log(f"  {spec.total:,} messages: round {r + 1}/{rounds}")
            for scenario, targets in scenarios.items():
                names = list(targets)
                shift = r % len(names)
                for name in names[shift:] + names[:shift]:
                    if name == BEFORE and remote is not None:
                        samples[scenario][name].add(remote.slot(scenario, budget))
                    else:
                        samples[scenario][name].add(run_slot(targets[name], budget))
        # Leave the cached datasets as they were: drop what the append scenario wrote.
        for e in engrams.values():
            e.delete_session(APPEND_SESSION)
        floor.delete_session(fappend)
    finally:
        floor.close()
        if peer is not None:
            peer.close()
        for e in engrams.values():
            e.close()
        if remote is not None:
            remote.close()
            remove_sqlite(data.path("engram-before"))

    out_scenarios: dict[str, Any] = {}
    measured = [*engrams, *([BEFORE] if remote is not None else [])]
    for scenario, by_target in samples.items():
        entry: dict[str, Any] = {"targets": {t: s.summary() for t, s in by_target.items()}}
        ratios: dict[str, Any] = {}
        if BEFORE in by_target and "engram_sqlite" in by_target:
            ratios[f"{BEFORE}/engram_sqlite"] = ratio(by_target[BEFORE], by_target["engram_sqlite"])
        for name in measured:
            base = "floor_fts" if scenario.startswith("search") else "floor"
            ratios[f"{name}/{base}"] = ratio(by_target[name], by_target[base])
            if "agents_sdk" in by_target:
                ratios[f"agents_sdk/{name}"] = ratio(by_target["agents_sdk"], by_target[name])
            if "like_scan" in by_target:
                ratios[f"like_scan/{name}"] = ratio(by_target["like_scan"], by_target[name])
        if "engram_postgres" in by_target and "engram_sqlite" in by_target:
            ratios["engram_postgres/engram_sqlite"] = ratio(
                by_target["engram_postgres"], by_target["engram_sqlite"]
            )
        entry["ratios"] = ratios
        out_scenarios[scenario] = entry

    files = {"floor": file_size(floor_path)}
    if agents_path:
        files["agents_sdk"] = file_size(agents_path)
    if "engram_sqlite" in engram_urls:
        files["engram_sqlite"] = file_size(data.path("engram"))
    return {
        "dataset": {
            "total_messages": spec.total,
            "main_session_messages": spec.main_size,
            "key": spec.key(),
            "file_bytes": files,
            "builds": dict(data.manifest),
            "built_this_run": sorted(data.built_now),
        },
        "checks": checks,
        "scenarios": out_scenarios,
    }


def _rates(count: int, work: Callable[[], object]) -> tuple[float, float]:
    """``count`` over the seconds ``work`` took: by the wall clock, and of CPU."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return count / (time.perf_counter() - wall), count / (time.process_time() - cpu)


def _remote_marker() -> object:
    raise RuntimeError("the older sources run in the --before process")


def _same_result_checks(
    engrams: dict[str, EngramTarget],
    floor: Floor,
    fsid: int,
    peer: AgentsPeer | None,
    like: LikeScan,
) -> dict[str, Any]:
    """What each side returns, so a reader can see they did the same work."""
    out: dict[str, Any] = {}
    for scenario, tokens in BUDGETS.items():
        fmsgs, ftotal = floor.context(fsid, tokens)
        row: dict[str, Any] = {"floor": {"messages": len(fmsgs), "tokens": ftotal}}
        if peer is not None:
            items, ptotal = peer.context(AGENTS_MAIN, tokens)
            row["agents_sdk"] = {"messages": len(items), "tokens": ptotal}
        for name, e in engrams.items():
            ctx = e.main.context(budget=tokens)
            row[name] = {
                "messages": len(ctx.messages),
                "tokens": ctx.tokens,
                "same_newest": bool(ctx.messages)
                and bool(fmsgs)
                and ctx.messages[-1]["content"] == fmsgs[-1][1],
                "same_messages": [(m["role"], m["content"]) for m in ctx.messages] == fmsgs,
            }
        out[scenario] = row
    for kind, query in QUERIES.items():
        row = {
            "floor_fts": len(floor.search(fsid, query)),
            "like_scan": len(like.search(fsid, query)),
        }
        for name, e in engrams.items():
            row[name] = len(e.main.search(query))
        out[f"search_{kind}"] = {"query": query, "hits": row}
    return out


# -- import throughput -----------------------------------------------------------------


def bench_import(
    workdir: Path,
    backends: list[str],
    source: TextSource,
    rounds: int,
    slice_size: int,
    before: Path | None = None,
) -> dict[str, Any]:
    """Messages per second importing ``slice_size`` fresh messages into an empty database.

    Each runner gives its rate by the wall clock and by CPU time (messages per
    second of the process's CPU, threads included): the second does not count
    the waits for a core of a shared machine.
    """
    batches = []
    items = list(source.fresh(slice_size, base=20_000_000))
    for i in range(0, slice_size, IMPORT_BATCH):
        batches.append(items[i : i + IMPORT_BATCH])
    tmp = workdir / "import"
    tmp.mkdir(parents=True, exist_ok=True)

    def run_floor(r: int) -> tuple[float, float]:
        path = str(tmp / f"floor-{r}.db")
        remove_sqlite(path)
        f = Floor(path, create=True)
        sid = f.session_id(MAIN_SCOPE, "import")
        rates = _rates(slice_size, lambda: [f.import_many(sid, batch) for batch in batches])
        f.close()
        remove_sqlite(path)
        return rates

    def run_engram(url: str) -> tuple[float, float]:
        import engram

        mem = engram.open(url)
        session = mem.session("import", scope=MAIN_SCOPE)
        rates = _rates(slice_size, lambda: [session.add_many(batch) for batch in batches])
        mem.close()
        return rates

    runners: dict[str, Callable[[int], tuple[float, float]]] = {"floor": run_floor}
    if "sqlite" in backends:

        def run_sqlite(r: int) -> tuple[float, float]:
            path = str(tmp / f"engram-{r}.db")
            remove_sqlite(path)
            try:
                return run_engram(sqlite_url(path))
            finally:
                remove_sqlite(path)

        runners["engram_sqlite"] = run_sqlite
        export = str(tmp / "conversations.json")
        Path(export).write_bytes(chatgpt_export(items))

        def run_chatgpt(r: int) -> tuple[float, float]:
            # `engram import` of the same messages as a ChatGPT export: parse, check, write.
            path = str(tmp / f"engram-chatgpt-{r}.db")
            remove_sqlite(path)
            try:
                return _rates(slice_size, lambda: import_file(export, sqlite_url(path)))
            finally:
                remove_sqlite(path)

        runners[CHATGPT] = run_chatgpt
    if "postgres" in backends:
        runners["engram_postgres"] = lambda r: run_engram(
            postgres_url(workdir, f"bench_import_{r}", create=True)
        )
    remote: Remote | None = None
    if before is not None and "sqlite" in backends:
        remote = Remote(before, "sqlite:///:memory:", source.seed, source.pool_words)

        def run_before(r: int) -> tuple[float, float]:
            assert remote is not None
            path = str(tmp / f"engram-before-{r}.db")
            request = {"op": "import", "size": slice_size, "batch": IMPORT_BATCH, "path": path}
            wall, cpu = remote.ask(request)
            return float(wall), float(cpu)

        runners[BEFORE] = run_before

        def run_before_chatgpt(r: int) -> tuple[float, float]:
            assert remote is not None
            path = str(tmp / f"engram-before-chatgpt-{r}.db")
            request = {"op": "import_file", "file": export, "count": slice_size, "path": path}
            wall, cpu = remote.ask(request)
            return float(wall), float(cpu)

        runners[f"{BEFORE}_chatgpt"] = run_before_chatgpt
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
    try:
        for r in range(rounds):
            names = list(runners)
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                rates[name].append(runners[name](r))
    finally:
        if remote is not None:
            remote.close()
    out: dict[str, Any] = {"slice_messages": slice_size, "batch": IMPORT_BATCH, "targets": {}}
    import statistics

    for name, values in rates.items():
        walls = [wall for wall, _cpu in values]
        out["targets"][name] = {
            "msgs_per_s_median": round(statistics.median(walls), 1),
            "msgs_per_s_min": round(min(walls), 1),
            "msgs_per_cpu_s_median": round(statistics.median(cpu for _w, cpu in values), 1),
            "rounds": [round(v, 1) for v in walls],
        }
    floor = rates["floor"]
    for name in ("engram_sqlite", BEFORE, CHATGPT, f"{BEFORE}_chatgpt"):
        if name in rates:
            pairs = list(zip(floor, rates[name], strict=True))
            out[f"ratio_floor/{name}"] = round(statistics.median(f[0] / e[0] for f, e in pairs), 3)
            out[f"ratio_floor/{name}_cpu"] = round(
                statistics.median(f[1] / e[1] for f, e in pairs), 3
            )
    return out


# -- peak RSS, one subprocess per (target, size) ------------------------------------------


def probe_rss(kind: str, location: str) -> dict[str, Any]:
    """Run in a fresh process: open the target, warm it, then the read scenarios; report RSS."""

    def maxrss_kb() -> int:
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

    if kind == "floor":
        floor = Floor(location)
        sid = floor.session_id(MAIN_SCOPE, MAIN_SESSION)
        context: Callable[[int], object] = lambda b: floor.context(sid, b)  # noqa: E731
        search: Callable[[str], object] | None = lambda q: floor.search(sid, q)  # noqa: E731
        close: Callable[[], None] = floor.close
    elif kind == "agents_sdk":
        peer = AgentsPeer(location)
        context = lambda b: peer.context(AGENTS_MAIN, b)  # noqa: E731
        search = None
        close = peer.close
    else:
        target = EngramTarget(location)
        context = lambda b: target.main.context(budget=b)  # noqa: E731
        search = lambda q: target.main.search(q)  # noqa: E731
        close = target.close
    context(100)  # loads the encoder and opens connections
    baseline = maxrss_kb()
    start_rss = current_rss_kb()
    work_peak = start_rss
    for _ in range(3):
        for call in (lambda: context(3_000), lambda: context(50_000)):
            call()
            work_peak = max(work_peak, current_rss_kb())
        if search is not None:
            for query in QUERIES.values():
                search(query)
                work_peak = max(work_peak, current_rss_kb())
    peak = maxrss_kb()
    close()
    return {
        "baseline_kb": baseline,
        "peak_kb": peak,
        "delta_kb": peak - baseline,
        "rss_before_kb": start_rss,
        "rss_work_peak_kb": work_peak,
        "work_growth_kb": work_peak - start_rss,
    }


def current_rss_kb() -> int:
    """Resident set size now (``ru_maxrss`` only ever grows: this shows what the work adds)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def measure_rss(kind: str, location: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--probe-rss", kind, location],
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# -- main ------------------------------------------------------------------------------


def _tree_label(tree: Path) -> str:
    """The path of a source tree and its commit, for the record."""
    commit = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    ).stdout.strip()
    return f"{tree} ({commit[:80]})" if commit else str(tree)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", help="comma-separated message counts (default 1K,10K,100K,1M)")
    p.add_argument("--rounds", type=int, help="rounds per scenario (default 5, quick 3)")
    p.add_argument("--quick", action="store_true", help="sizes 1K,10K, fewer rounds, shorter slots")
    p.add_argument("--backends", default="sqlite", help="comma-separated: sqlite, postgres")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--workdir", default=str(ROOT / "work"))
    p.add_argument("--out", default=str(ROOT / "results"), help="where core.json/core.md go")
    p.add_argument("--name", default="core", help="base name of the result files")
    p.add_argument("--slot-time", type=float, help="seconds per (round, target) slot")
    p.add_argument("--import-slice", type=int, help="messages per import round (default 5000)")
    p.add_argument("--pool-words", type=int, help=argparse.SUPPRESS)  # smaller text pool: tests
    p.add_argument("--no-rss", action="store_true", help="skip the peak-RSS subprocesses")
    p.add_argument(
        "--before",
        type=Path,
        help="older Engram sources (a checkout's root) measured in the same rounds (SQLite)",
    )
    p.add_argument("--probe-rss", nargs=2, metavar=("KIND", "LOCATION"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.probe_rss:
        print(json.dumps(probe_rss(*args.probe_rss)))
        return 0
    sizes = (
        [int(s.replace("_", "")) for s in args.sizes.split(",")]
        if args.sizes
        else list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    )
    rounds = args.rounds or (3 if args.quick else 5)
    budget = Budget(min_time=args.slot_time or (0.1 if args.quick else 0.25))
    slice_size = args.import_slice or (2_000 if args.quick else 5_000)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - {"sqlite", "postgres"}
    if unknown:
        print(f"unknown backend(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    notes: list[str] = []
    why = available()
    if why:
        notes.append(f"Agents SDK peer skipped: {why}")
    if "postgres" in backends:
        why_pg = postgres_available()
        if why_pg:
            notes.append(f"PostgreSQL skipped: {why_pg}")
            backends.remove("postgres")
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    log(f"sizes {sizes}, rounds {rounds}, backends {backends}")
    pool_words = args.pool_words or POOL_WORDS
    source = TextSource(args.seed, pool_words)
    texts = Texts(source)
    results: dict[str, Any] = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(),
            "params": {
                "sizes": sizes,
                "rounds": rounds,
                "quick": args.quick,
                "backends": backends,
                "seed": args.seed,
                "slot_seconds": budget.min_time,
                "queries": QUERIES,
                "budgets": BUDGETS,
                "before": _tree_label(args.before) if args.before else None,
            },
            "load_average": {"start": [round(x, 2) for x in os.getloadavg()]},
        },
        "notes": notes,
        "sizes": {},
    }
    try:
        for size in sizes:
            spec = Spec(size, seed=args.seed, pool_words=pool_words)
            data = Datasets(spec, workdir, source)
            log(f"size {size:,}")
            entry = bench_size(spec, data, backends, budget, rounds, notes, texts, args.before)
            if not args.no_rss:
                rss: dict[str, Any] = {"floor": measure_rss("floor", data.path("floor"))}
                if available() is None:
                    rss["agents_sdk"] = measure_rss("agents_sdk", data.path("agents"))
                if "sqlite" in backends:
                    rss["engram_sqlite"] = measure_rss("engram", sqlite_url(data.path("engram")))
                if "postgres" in backends:
                    rss["engram_postgres"] = measure_rss("engram", data.ensure_engram_postgres())
                entry["rss"] = rss
            results["sizes"][str(size)] = entry
        log("import throughput")
        results["import"] = bench_import(workdir, backends, source, rounds, slice_size, args.before)
    finally:
        stop_postgres()
    results["meta"]["seconds"] = round(time.perf_counter() - started, 1)
    results["meta"]["load_average"]["end"] = [round(x, 2) for x in os.getloadavg()]
    results["targets"] = report.evaluate(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / f"{args.name}.md").write_text(report.markdown(results))
    log(f"wrote {out / (args.name + '.json')} and .md in {results['meta']['seconds']}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
