"""Load test of `engram serve` on loopback: several client processes, fixed request counts.

One SQLite database holds a session of 100,000 messages (the benchmark
dataset's text, ~200 tokens each). Measured, in one run:

1. the library called directly, in process, one call at a time: append one
   message, the context of the session (budget 4,000), a search;
2. the same calls over HTTP from one client, one at a time: the server's
   overhead is the difference of the medians (target: at most 2 ms);
3. CLIENTS client processes at once, each ROUNDS rounds of append + context,
   then SEARCHES searches: p50/p99 per kind, throughput of append + context
   (target: at least 500 requests/s on SQLite), errors (target: none);
4. afterwards, through the library: every appended message is stored exactly
   once (no loss, no duplicate).

Results go to ``benchmarks/results/server.json`` and ``server.md``.
Run: ``python -m benchmarks.server_load`` (``make bench`` runs it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.dataset import MAIN_SCOPE, MAIN_SESSION, Spec, TextSource, layout
from benchmarks.engram_bench import build_engram
from benchmarks.timing import percentile

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
SESSION_SIZE = 100_000
BUDGET = 4000
QUERY = "pricing decision"
TARGET_RPS = 500.0
TARGET_OVERHEAD_MS = 2.0


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(percentile(ordered, 0.99) * 1000, 3),
        "count": len(ordered),
    }


def _message(tag: str) -> dict[str, str]:
    return {"role": "user", "content": f"{tag}: what did we decide about the pricing page?"}


# -- 1. the library, directly ---------------------------------------------------------------


def library_latencies(url: str, calls: int) -> dict[str, list[float]]:
    import engram

    out: dict[str, list[float]] = {"append": [], "context": [], "search": []}
    with engram.open(url, llm=None) as mem:
        chat = mem.session(MAIN_SESSION, MAIN_SCOPE)
        for i in range(calls):
            started = time.perf_counter()
            chat.add_many([_message(f"direct {i}")])
            out["append"].append(time.perf_counter() - started)
            started = time.perf_counter()
            chat.context(BUDGET)
            out["context"].append(time.perf_counter() - started)
            started = time.perf_counter()
            chat.search(QUERY, limit=10)
            out["search"].append(time.perf_counter() - started)
    return out


def cpu_per_request(url: str, calls: int) -> dict[str, dict[str, float]]:
    """CPU ms per call, library vs the app in process (ASGI, the client's share included).

    CPU time does not count waiting for a core, so this shows what the HTTP layer
    costs even when the machine is shared and wall-clock latency is mostly queueing.
    """
    import asyncio

    import engram
    from engram.server import create_app

    out: dict[str, dict[str, float]] = {"library": {}, "asgi": {}}
    with engram.open(url, llm=None) as mem:
        chat = mem.session(MAIN_SESSION, MAIN_SCOPE)
        started = time.process_time()
        for i in range(calls):
            chat.add_many([_message(f"direct cpu {i}")])
        out["library"]["append"] = (time.process_time() - started) / calls * 1000
        started = time.process_time()
        for _ in range(calls):
            chat.context(BUDGET)
        out["library"]["context"] = (time.process_time() - started) / calls * 1000
        app = create_app(mem)

        async def over_asgi() -> None:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
                path = f"/v1/scopes/{MAIN_SCOPE}/sessions/{MAIN_SESSION}"
                started = time.process_time()
                for i in range(calls):
                    await http.post(f"{path}/messages", json=_message(f"direct asgi {i}"))
                out["asgi"]["append"] = (time.process_time() - started) / calls * 1000
                started = time.process_time()
                for _ in range(calls):
                    await http.post(f"{path}/context", json={"budget": BUDGET})
                out["asgi"]["context"] = (time.process_time() - started) / calls * 1000

        asyncio.run(over_asgi())
    return {side: {k: round(v, 3) for k, v in values.items()} for side, values in out.items()}


# -- 2 and 3. over HTTP -------------------------------------------------------------------


def _base(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1/scopes/{MAIN_SCOPE}/sessions/{MAIN_SESSION}"


def http_client(
    port: int, tag: str, rounds: int, searches: int, between: Any = None
) -> dict[str, Any]:
    """One client: rounds of append + context, then searches; latencies and errors.

    ``between`` (a barrier) is waited for after the rounds, before the searches.
    """
    base = _base(port)
    out: dict[str, Any] = {"append": [], "context": [], "search": [], "errors": 0, "sent": []}
    with httpx.Client(timeout=60) as http:
        started_all = time.perf_counter()
        for i in range(rounds):
            text = f"{tag} {i}"
            started = time.perf_counter()
            answer = http.post(f"{base}/messages", json=_message(text))
            out["append"].append(time.perf_counter() - started)
            if answer.status_code == 201:
                out["sent"].append(_message(text)["content"])
            else:
                out["errors"] += 1
            started = time.perf_counter()
            answer = http.post(f"{base}/context", json={"budget": BUDGET})
            out["context"].append(time.perf_counter() - started)
            out["errors"] += answer.status_code != 200
        out["write_seconds"] = time.perf_counter() - started_all
        if between is not None:
            between.wait()
        for _ in range(searches):
            started = time.perf_counter()
            answer = http.get(f"{base}/search", params={"q": QUERY, "limit": 10})
            out["search"].append(time.perf_counter() - started)
            out["errors"] += answer.status_code != 200
    return out


def _client_job(args: tuple[int, str, int, int, Any, Any]) -> dict[str, Any]:
    port, tag, rounds, searches, start, between = args
    start.wait()
    return http_client(port, tag, rounds, searches, between)


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, every thread) a process has used so far (Linux)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    url: str, port: int, src: Path = ROOT / "src", workers: int = 1
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT)])}
    command = [sys.executable, "-m", "engram.cli", "serve", "--db", url, "--port", str(port)]
    if workers > 1:
        command += ["--workers", str(workers)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("engram serve did not start")


# -- 5. scale-out: worker processes ---------------------------------------------------------


def scale_out(
    url: str, counts: list[int], clients: int, rounds: int, src: Path
) -> dict[str, dict[str, Any]]:
    """Append + context throughput and latency with each number of uvicorn workers."""
    out: dict[str, dict[str, Any]] = {}
    for workers in counts:
        port = _free_port()
        server = start_server(url, port, src, workers)
        try:
            http_client(port, "warm-up", 20, 0)
            manager = multiprocessing.Manager()
            start, between = manager.Barrier(clients + 1), manager.Barrier(clients + 1)
            jobs = [
                (port, f"scale {workers} client {c}", rounds, 0, start, between)
                for c in range(clients)
            ]
            with multiprocessing.get_context("spawn").Pool(clients) as pool:
                pending = pool.map_async(_client_job, jobs)
                start.wait()
                between.wait()
                results = pending.get()
        finally:
            server.terminate()
            server.wait(timeout=60)
        wall = max(r["write_seconds"] for r in results)
        out[str(workers)] = {
            "append_context_rps": round(clients * rounds * 2 / wall, 1),
            "append": _ms([v for r in results for v in r["append"]]),
            "context": _ms([v for r in results for v in r["context"]]),
            "errors": sum(r["errors"] for r in results),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
    return out


def run_scale_out(
    backend: str,
    counts: list[int],
    clients: int,
    rounds: int,
    size: int,
    workdir: Path,
    src: Path,
) -> dict[str, Any]:
    """Build a ``size``-message session on ``backend``, then :func:`scale_out`."""
    from benchmarks.engram_bench import postgres_url, stop_postgres

    load_average = [round(x, 2) for x in os.getloadavg()]
    try:
        if backend == "postgres":
            url = postgres_url(ROOT / "benchmarks" / "work", "server_scale_out", create=True)
        else:
            url = f"sqlite:///{workdir / 'scale-out.db'}"
        spec = Spec(total=size)
        print(f"building a {size:,}-message session on {backend} ...", flush=True)
        build_seconds = build_engram(url, layout(spec), TextSource(spec.seed))
        by_workers = scale_out(url, counts, clients, rounds, src)
    finally:
        stop_postgres()
    return {
        "backend": backend,
        "session_messages": spec.main_size,
        "build_seconds": round(build_seconds, 1),
        "clients": clients,
        "rounds_per_client": rounds,
        "machine": {"cpus": os.cpu_count(), "load_average": load_average},
        "by_workers": by_workers,
    }


def scale_out_markdown(r: dict[str, Any]) -> str:
    """The scale-out table."""
    lines = [
        f"# engram serve with several workers ({r['backend']}, loopback)",
        "",
        f"A session of {r['session_messages']:,} messages; {r['clients']} client processes, each "
        f"{r['rounds_per_client']} rounds of append + context (budget {BUDGET}); "
        f"{r['machine']['cpus']} CPUs shared by the workers and the clients. Command: "
        f"`python -m benchmarks.server_load --scale-out {r['backend']}`. Load average at the"
        f" start {r['machine']['load_average']}, at the end of each row as shown.",
        "",
        "| workers | append + context requests/s | append p50 / p99 | context p50 / p99 |"
        " errors | load average |",
        "| ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for workers, v in r["by_workers"].items():
        lines.append(
            f"| {workers} | {v['append_context_rps']} | {v['append']['p50_ms']} /"
            f" {v['append']['p99_ms']} ms | {v['context']['p50_ms']} / {v['context']['p99_ms']} ms"
            f" | {v['errors']} | {v['load_average']} |"
        )
    return "\n".join(lines) + "\n"


# -- 4. the count ---------------------------------------------------------------------------


def stored_after(url: str, after_id: int) -> list[str]:
    import engram

    contents: list[str] = []
    with engram.open(url, llm=None) as mem:
        chat = mem.session(MAIN_SESSION, MAIN_SCOPE)
        while True:
            page = chat.messages(after_id=after_id, limit=1000)
            if not page:
                return contents
            contents += [m.content for m in page]
            after_id = page[-1].id


def last_id(url: str) -> int:
    import engram

    with engram.open(url, llm=None) as mem:
        return mem.session(MAIN_SESSION, MAIN_SCOPE).extended(1)[-1].id


# -- the run --------------------------------------------------------------------------------


def run(
    clients: int,
    rounds: int,
    searches: int,
    calls: int,
    workdir: Path,
    *,
    dataset: Path | None = None,
    src: Path = ROOT / "src",
) -> dict[str, Any]:
    url = f"sqlite:///{workdir / 'server-load.db'}"
    load_average = [round(x, 2) for x in os.getloadavg()]
    if dataset is not None:
        # A copy of a database holding the benchmark's session (e.g. the core benchmark's
        # 100K dataset in benchmarks/work/): the same data without rebuilding it.
        shutil.copyfile(dataset, workdir / "server-load.db")
        build_seconds = 0.0
    else:
        spec = Spec(total=SESSION_SIZE)
        print(f"building a {SESSION_SIZE:,}-message session ...", flush=True)
        build_seconds = build_engram(url, layout(spec), TextSource(spec.seed))
    direct = library_latencies(url, calls)
    cpu = cpu_per_request(url, calls)
    first_new = last_id(url)
    port = _free_port()
    server = start_server(url, port, src)
    try:
        http_client(port, "warm-up", 20, 2)  # first requests load the vocabulary, imports
        cpu_started = process_cpu_seconds(server.pid)
        single = http_client(port, "single", calls, 0)
        cpu_single = process_cpu_seconds(server.pid) - cpu_started
        single["search"] = http_client(port, "single", 0, calls)["search"]
        manager = multiprocessing.Manager()
        # The parent waits too: it reads the server's CPU when the rounds start and end.
        start, between = manager.Barrier(clients + 1), manager.Barrier(clients + 1)
        jobs = [
            (port, f"load client {c}", rounds, searches, start, between) for c in range(clients)
        ]
        with multiprocessing.get_context("spawn").Pool(clients) as pool:
            pending = pool.map_async(_client_job, jobs)
            start.wait()
            started = time.perf_counter()
            cpu_started = process_cpu_seconds(server.pid)
            between.wait()
            cpu_load = process_cpu_seconds(server.pid) - cpu_started
            results = pending.get()
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    sent = single["sent"] + [text for r in results for text in r["sent"]]
    stored = [c for c in stored_after(url, first_new) if "direct" not in c and "warm-up" not in c]
    write_wall = max(r["write_seconds"] for r in results)
    overhead = {
        kind: round((statistics.median(single[kind]) - statistics.median(direct[kind])) * 1000, 3)
        for kind in ("append", "context", "search")
    }
    load = {
        kind: _ms([v for r in results for v in r[kind]]) for kind in ("append", "context", "search")
    }
    append_context = clients * rounds * 2
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": load_average,
        },
        "session_messages": SESSION_SIZE,
        "build_seconds": round(build_seconds, 1),
        "clients": clients,
        "rounds_per_client": rounds,
        "searches_per_client": searches,
        "direct": {kind: _ms(v) for kind, v in direct.items()},
        "single_client_http": {kind: _ms(single[kind]) for kind in ("append", "context", "search")},
        "overhead_p50_ms": overhead,
        "cpu_ms_per_request": cpu,
        # The server process's own CPU per append or context request, one client and
        # under load: what one worker spends per request, whatever the machine's load.
        "server_cpu_ms_per_request": {
            "single_client": round(cpu_single / (2 * calls) * 1000, 3),
            "load": round(cpu_load / (clients * 2 * rounds) * 1000, 3),
        },
        "load": load,
        "append_context_requests": append_context,
        "append_context_rps": round(append_context / write_wall, 1),
        "total_wall_seconds": round(wall, 2),
        "errors": single["errors"] + sum(r["errors"] for r in results),
        "appended": len(sent),
        "stored": len(stored),
        "stored_unique": len(set(stored)),
        "lost": len(set(sent) - set(stored)),
        "duplicated": len(stored) - len(set(stored)),
        "targets": {
            "append_context_rps_at_least": TARGET_RPS,
            "overhead_p50_ms_at_most": TARGET_OVERHEAD_MS,
        },
    }


def markdown(r: dict[str, Any]) -> str:
    rps_ok = r["append_context_rps"] >= TARGET_RPS
    worst = max(r["overhead_p50_ms"][k] for k in ("append", "context"))
    lines = [
        "# engram serve under load (SQLite, loopback)",
        "",
        f"A session of {r['session_messages']:,} messages; {r['clients']} client processes, "
        f"each {r['rounds_per_client']} rounds of append + context (budget {BUDGET}), then "
        f"{r['searches_per_client']} searches; one uvicorn worker; {r['machine']['cpus']} CPUs "
        "shared by server and clients. Command: `python -m benchmarks.server_load`.",
        "",
        "| kind | library p50 | HTTP, one client p50 | overhead p50 | load p50 | load p99 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind in ("append", "context", "search"):
        lines.append(
            f"| {kind} | {r['direct'][kind]['p50_ms']} ms | "
            f"{r['single_client_http'][kind]['p50_ms']} ms | {r['overhead_p50_ms'][kind]} ms | "
            f"{r['load'][kind]['p50_ms']} ms | {r['load'][kind]['p99_ms']} ms |"
        )
    lines += [
        "",
        f"- append + context throughput: **{r['append_context_rps']} requests/s** "
        f"(target ≥ {TARGET_RPS:.0f}: {'met' if rps_ok else 'MISSED'})",
        f"- server overhead p50 (worst of append, context): **{worst} ms** "
        f"(target ≤ {TARGET_OVERHEAD_MS}: {'met' if worst <= TARGET_OVERHEAD_MS else 'MISSED'})",
        "- CPU per request, in process (no queueing for a core): library append "
        f"{r['cpu_ms_per_request']['library']['append']} ms, context "
        f"{r['cpu_ms_per_request']['library']['context']} ms; through the app (ASGI, client "
        f"included) append {r['cpu_ms_per_request']['asgi']['append']} ms, context "
        f"{r['cpu_ms_per_request']['asgi']['context']} ms",
        "- the server process's CPU per append or context request (its own, so the"
        " machine's load does not count): one client "
        f"{r['server_cpu_ms_per_request']['single_client']} ms, under load "
        f"{r['server_cpu_ms_per_request']['load']} ms",
        f"- load average at the start: {r['machine'].get('load_average')}",
        f"- errors: **{r['errors']}**",
        f"- appended through HTTP: {r['appended']}; stored afterwards: {r['stored']} "
        f"({r['stored_unique']} distinct): **{r['lost']} lost, {r['duplicated']} duplicated**",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=250)
    parser.add_argument("--searches", type=int, default=50)
    parser.add_argument("--calls", type=int, default=200, help="one-at-a-time calls per kind")
    parser.add_argument("--name", default="server")
    parser.add_argument(
        "--dataset", type=Path, help="an SQLite file holding the session (copied), not rebuilt"
    )
    parser.add_argument(
        "--src", type=Path, default=ROOT / "src", help="the engram sources the server runs"
    )
    parser.add_argument(
        "--scale-out",
        choices=["postgres", "sqlite"],
        help="instead: throughput with 1, 2 and 4 uvicorn workers on this backend",
    )
    parser.add_argument("--workers", default="1,2,4", help="worker counts for --scale-out")
    parser.add_argument(
        "--session-size", type=int, default=10_000, help="messages of the --scale-out session"
    )
    args = parser.parse_args(argv)
    if args.scale_out:
        counts = [int(n) for n in args.workers.split(",")]
        with tempfile.TemporaryDirectory(prefix="engram-server-bench-") as workdir:
            scaled = run_scale_out(
                args.scale_out, counts, args.clients, args.rounds, args.session_size,
                Path(workdir), args.src,
            )  # fmt: skip
        RESULTS.mkdir(exist_ok=True)
        name = f"{args.name}-scale-out"
        (RESULTS / f"{name}.json").write_text(json.dumps(scaled, indent=1) + "\n")
        (RESULTS / f"{name}.md").write_text(scale_out_markdown(scaled))
        print(scale_out_markdown(scaled))
        return 0 if all(v["errors"] == 0 for v in scaled["by_workers"].values()) else 1
    with tempfile.TemporaryDirectory(prefix="engram-server-bench-") as workdir:
        results = run(
            args.clients,
            args.rounds,
            args.searches,
            args.calls,
            Path(workdir),
            dataset=args.dataset,
            src=args.src,
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (RESULTS / f"{args.name}.md").write_text(markdown(results))
    print(markdown(results))
    return 0 if results["errors"] == 0 and results["lost"] == results["duplicated"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
