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


def http_client(port: int, tag: str, rounds: int, searches: int) -> dict[str, Any]:
    """One client: rounds of append + context, then searches; latencies and errors."""
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
        for _ in range(searches):
            started = time.perf_counter()
            answer = http.get(f"{base}/search", params={"q": QUERY, "limit": 10})
            out["search"].append(time.perf_counter() - started)
            out["errors"] += answer.status_code != 200
    return out


def _client_job(args: tuple[int, str, int, int, Any]) -> dict[str, Any]:
    port, tag, rounds, searches, barrier = args
    barrier.wait()
    return http_client(port, tag, rounds, searches)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(url: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    command = [sys.executable, "-m", "engram.cli", "serve", "--db", url, "--port", str(port)]
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


def run(clients: int, rounds: int, searches: int, calls: int, workdir: Path) -> dict[str, Any]:
    url = f"sqlite:///{workdir / 'server-load.db'}"
    load_average = [round(x, 2) for x in os.getloadavg()]
    spec = Spec(total=SESSION_SIZE)
    print(f"building a {SESSION_SIZE:,}-message session ...", flush=True)
    build_seconds = build_engram(url, layout(spec), TextSource(spec.seed))
    direct = library_latencies(url, calls)
    cpu = cpu_per_request(url, calls)
    first_new = last_id(url)
    port = _free_port()
    server = start_server(url, port)
    try:
        single = http_client(port, "single", calls, calls)
        barrier = multiprocessing.Manager().Barrier(clients)
        jobs = [(port, f"load client {c}", rounds, searches, barrier) for c in range(clients)]
        started = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(clients) as pool:
            results = pool.map(_client_job, jobs)
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    sent = single["sent"] + [text for r in results for text in r["sent"]]
    stored = [c for c in stored_after(url, first_new) if "direct" not in c]
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
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="engram-server-bench-") as workdir:
        results = run(args.clients, args.rounds, args.searches, args.calls, Path(workdir))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (RESULTS / f"{args.name}.md").write_text(markdown(results))
    print(markdown(results))
    return 0 if results["errors"] == 0 and results["lost"] == results["duplicated"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
