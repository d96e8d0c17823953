"""``make bench``: the time the proxy adds to a chat completion, on a 100K-message session.

Usage::

    python -m benchmarks.proxy                       # 100K messages, 300 measured pairs
    python -m benchmarks.proxy --messages 2000 --pairs 30 --name proxy-quick

Three processes, as in production: this one is the app (the official ``openai``
SDK), the scripted upstream runs in its own process, and ``engram serve
--upstream URL`` in a third. Each pair of calls sends the app's own messages
(its system prompt and its new question, what a new-only app sends):

* **direct**: the SDK sends them to the upstream;
* **proxy**: the SDK sends them to Engram, which aligns them with the
  100K-message session, stores the question, builds the session's prompt,
  calls the same upstream and stores the answer.

Calls alternate (direct, proxy, direct, ...), so both see the same machine
load. The overhead is the proxy's latency minus the direct latency at the same
percentile (p50, p95, p99), and the median of per-pair differences; streamed
calls are timed to their first text. Measured with a budget of 8,000 tokens
(``X-Engram-Budget``: a prompt the size of a chat app's) and with the default
budget (gpt-4o-mini's 128,000-token window: the session's prompt is then that
large, and sending it is part of the time). Target: at most 5 ms at p50 with
the 8,000-token budget. Results go to ``benchmarks/results/<name>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai

from benchmarks.dataset import MAIN_SCOPE, MAIN_SESSION, Spec, TextSource, layout
from benchmarks.engram_bench import build_engram, sqlite_url
from benchmarks.proxy_parts import engram_work, serve_passthrough
from benchmarks.timing import percentile

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
TARGET_P50_MS = 5.0
MODEL = "gpt-4o-mini"
SYSTEM = "You are the project's assistant. Answer briefly."
QUESTION = "What did we decide about the pricing last week?"
#: The upstream's usage is scripted, so it does not count tokens: its time stays small
#: and steady, and the difference measured is Engram's and the prompt's.
USAGE = {"prompt_tokens": 8000, "completion_tokens": 12, "total_tokens": 8012}
ANSWER = "We settled on 14 dollars per seat."
#: (label, X-Engram-Budget header or None for the default).
BUDGETS: tuple[tuple[str, str | None], ...] = (
    ("8,000-token budget", "8000"),
    ("default budget (the model's window)", None),
)


def serve_upstream() -> int:
    """The scripted upstream in this process, until stdin closes (run by :class:`_Upstream`)."""
    from engram.testing import FakeLLMServer, FakeResponse

    def answer(request: Any) -> FakeResponse:
        return FakeResponse(content=ANSWER, usage=USAGE)

    with FakeLLMServer(default=answer) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--name", default="proxy")
    parser.add_argument("--no-stream", action="store_true", help="time completions only")
    parser.add_argument("--out", type=Path, default=ROOT / "results", help="results folder")
    parser.add_argument("--work", type=Path, default=ROOT / "work", help="datasets folder")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-passthrough", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream:
        return serve_upstream()
    if args.serve_passthrough:
        return serve_passthrough(args.serve_passthrough[0], int(args.serve_passthrough[1]))

    db = _fresh_copy(_dataset(args.messages, args.work))
    load_before = os.getloadavg()
    runs = []
    with _Upstream() as upstream:
        with _Serve(db, upstream) as base:
            for label, budget in BUDGETS:
                runs.append(_measure(label, budget, upstream, base, args))
        with _Serve(None, upstream) as floor_base:
            floor = _floor(upstream, floor_base, args)
    body = {"model": MODEL, "messages": _messages()}
    work = engram_work(db, MAIN_SCOPE, MAIN_SESSION, body, BUDGETS[0][1] or "8000")
    result = _summary(args, runs, load_before)
    result["passthrough"] = floor
    result["engram_work"] = work
    _write(args.out, args.name, result)
    print(_markdown(result))
    return 0


def _measure(label: str, budget: str | None, upstream: str, base: str, args: Any) -> dict[str, Any]:
    """Interleaved direct and proxied calls, plain and streamed, with one budget."""
    headers = {"X-Engram-Session": MAIN_SESSION, "X-Engram-Scope": MAIN_SCOPE}
    if budget is not None:
        headers["X-Engram-Budget"] = budget
    direct = openai.OpenAI(base_url=upstream, api_key="bench", max_retries=0)
    proxy = openai.OpenAI(
        base_url=f"{base}/v1", api_key="bench", max_retries=0, default_headers=headers
    )
    messages = _messages()
    prompt_tokens: list[int] = []

    def plain(client: openai.OpenAI) -> Callable[[], float]:
        def call() -> float:
            started = time.perf_counter()
            raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages)
            elapsed = time.perf_counter() - started
            if client is proxy:
                assert raw.headers["x-engram-replayed"] == "false"  # a real turn each time
                prompt_tokens.append(int(raw.headers["x-engram-prompt-tokens"]))
            return elapsed

        return call

    def first_text(client: openai.OpenAI) -> Callable[[], float]:
        def call() -> float:
            started = time.perf_counter()
            seen = None
            for chunk in client.chat.completions.create(
                model=MODEL, messages=messages, stream=True
            ):
                if seen is None and chunk.choices and chunk.choices[0].delta.content:
                    seen = time.perf_counter() - started
            return seen if seen is not None else time.perf_counter() - started

        return call

    out: dict[str, Any] = {"label": label, "budget_header": budget}
    kinds = [("plain", plain, args.pairs)]
    if not args.no_stream:
        kinds.append(("stream", first_text, args.pairs // 3))
    for kind, make, pairs in kinds:
        for _ in range(args.warmup):
            make(direct)()
            make(proxy)()
        direct_s, proxy_s = [], []
        for _ in range(pairs):
            direct_s.append(make(direct)())
            proxy_s.append(make(proxy)())
        out[kind] = _stats(direct_s, proxy_s)
    out["prompt_tokens"] = int(sorted(prompt_tokens)[len(prompt_tokens) // 2])
    direct.close()
    proxy.close()
    return out


def _messages() -> Any:
    """What the app sends each time: its system prompt and its new question."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]


def _floor(upstream: str, base: str, args: Any) -> dict[str, Any]:
    """Direct calls against a pass-through proxy (no memory work): the price of the hop."""
    direct = openai.OpenAI(base_url=upstream, api_key="bench", max_retries=0)
    hop = openai.OpenAI(base_url=f"{base}/v1", api_key="bench", max_retries=0)
    messages = _messages()

    def call(client: openai.OpenAI) -> float:
        started = time.perf_counter()
        client.chat.completions.create(model=MODEL, messages=messages)
        return time.perf_counter() - started

    for _ in range(args.warmup):
        call(direct)
        call(hop)
    direct_s, hop_s = [], []
    for _ in range(args.pairs // 2):
        direct_s.append(call(direct))
        hop_s.append(call(hop))
    direct.close()
    hop.close()
    return _stats(direct_s, hop_s)


def _stats(direct: list[float], proxy: list[float]) -> dict[str, Any]:
    ms = 1000.0
    pairs = sorted((p - d) * ms for p, d in zip(proxy, direct, strict=True))
    direct_sorted, proxy_sorted = sorted(x * ms for x in direct), sorted(x * ms for x in proxy)
    quantiles = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
    out: dict[str, Any] = {
        "pairs": len(pairs),
        "direct_ms": {q: percentile(direct_sorted, v) for q, v in quantiles.items()},
        "proxy_ms": {q: percentile(proxy_sorted, v) for q, v in quantiles.items()},
        "pairwise_overhead_ms": {q: percentile(pairs, v) for q, v in quantiles.items()},
    }
    out["overhead_ms"] = {q: out["proxy_ms"][q] - out["direct_ms"][q] for q in quantiles}
    return out


def _dataset(messages: int, work: Path) -> str:
    """A SQLite database whose measured session holds ``messages`` messages (built once)."""
    work.mkdir(parents=True, exist_ok=True)
    spec = Spec(messages)
    path = work / f"proxy-{spec.key()}.db"
    if not path.exists():
        chunks = [c for c in layout(spec) if (c.scope, c.session) == (MAIN_SCOPE, MAIN_SESSION)]
        print(f"building {path.name} ({messages:,} messages)...", file=sys.stderr)
        build_engram(sqlite_url(str(path)), chunks, TextSource(spec.seed))
    return sqlite_url(str(path))


def _fresh_copy(url: str) -> str:
    """A copy of the dataset for this run: the answers stored here do not grow the original."""
    import shutil

    source = Path(url.removeprefix("sqlite:///"))
    copy = source.with_name(source.stem + "-run.db")
    for suffix in ("", "-wal", "-shm"):
        target = Path(str(copy) + suffix)
        target.unlink(missing_ok=True)
        if Path(str(source) + suffix).exists():
            shutil.copyfile(str(source) + suffix, target)
    return sqlite_url(str(copy))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


class _Upstream:
    """The scripted upstream in its own process; yields its base URL."""

    def __enter__(self) -> str:
        command = [sys.executable, "-m", "benchmarks.proxy", "--serve-upstream"]
        self.process = subprocess.Popen(
            command, env=_env(), cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


class _Serve:
    """``engram serve --upstream URL`` in a subprocess on a free port of 127.0.0.1.

    Without a store URL: the pass-through proxy of :mod:`benchmarks.proxy_parts` instead.
    """

    def __init__(self, url: str | None, upstream: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        if url is None:
            command = [sys.executable, "-m", "benchmarks.proxy", "--serve-passthrough"]
            command += [upstream, str(self.port)]
        else:
            command = [sys.executable, "-m", "engram.cli", "--db", url, "serve"]
            command += ["--port", str(self.port), "--upstream", upstream]
        self.process = subprocess.Popen(command, env=_env(), cwd=REPO, stdout=subprocess.DEVNULL)

    def __enter__(self) -> str:
        base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"engram serve exited {self.process.returncode}")
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    return base
            except httpx.TransportError:
                time.sleep(0.2)
        raise RuntimeError("engram serve did not start")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _summary(
    args: Any, runs: list[dict[str, Any]], load_before: tuple[float, ...]
) -> dict[str, Any]:
    headline = runs[0]["plain"]["overhead_ms"]["p50"]
    return {
        "run": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "session_messages": args.messages,
        "runs": runs,
        "target_p50_ms": TARGET_P50_MS,
        "status": "PASS" if headline <= TARGET_P50_MS else "MISS",
    }


def _write(results: Path, name: str, result: dict[str, Any]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (results / f"{name}.md").write_text(_markdown(result), encoding="utf-8")


def _markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Proxy overhead",
        "",
        f"Run {r['run']} on {r['machine']}; load average {r['load_average_before']} before, "
        f"{r['load_average_after']} after (the machine is shared: other processes ran during "
        "the measurement).",
        f"A session of {r['session_messages']:,} messages. Three processes: the app (the official "
        "`openai` SDK), the scripted upstream, and `engram serve --upstream`. Each pair sends the "
        "app's own messages (a system prompt and a new question) straight to the upstream, then "
        "through Engram, which aligns them with the session, stores the question, builds the "
        "session's prompt, calls the same upstream and stores the answer. Streamed calls are "
        "timed to their first text.",
        "",
    ]
    for run in r["runs"]:
        lines += [
            f"## {run['label']} (prompt sent upstream: {run['prompt_tokens']:,} tokens)",
            "",
            "| | p50 | p95 | p99 |",
            "| --- | --- | --- | --- |",
        ]
        for kind, title in (("plain", "completion"), ("stream", "first streamed text")):
            if kind not in run:
                continue
            stats = run[kind]
            for key, label in (
                ("direct_ms", f"{title}: direct"),
                ("proxy_ms", f"{title}: through the proxy"),
                ("overhead_ms", f"{title}: overhead (same percentile)"),
                ("pairwise_overhead_ms", f"{title}: overhead (per-pair difference)"),
            ):
                row = stats[key]
                lines.append(
                    f"| {label} | {row['p50']:.2f} ms | {row['p95']:.2f} ms | {row['p99']:.2f} ms |"
                )
        lines.append("")
    lines += [
        f"Target: overhead at most {r['target_p50_ms']:g} ms at p50 (completion, "
        f"{r['runs'][0]['label']}): **{r['status']}**.",
        "",
    ]
    if "passthrough" in r:
        hop = r["passthrough"]
        lines += [
            "## Where the time goes",
            "",
            "The floor of any Python proxy: a FastAPI route on uvicorn that hands the same "
            "messages to the upstream with the same httpx client and returns the answer, with "
            "no memory work (its own process, interleaved with direct calls):",
            "",
            "| | p50 | p95 | p99 |",
            "| --- | --- | --- | --- |",
        ]
        for key, label in (
            ("overhead_ms", "pass-through overhead (same percentile)"),
            ("pairwise_overhead_ms", "pass-through overhead (per-pair difference)"),
        ):
            row = hop[key]
            lines.append(
                f"| {label} | {row['p50']:.2f} ms | {row['p95']:.2f} ms | {row['p99']:.2f} ms |"
            )
        lines += [
            "",
            "Engram's own work per request, in process on the same session (medians; CPU time "
            "does not grow with the load as wall time does):",
            "",
            "| step | wall | CPU |",
            "| --- | --- | --- |",
        ]
        for label, step in r["engram_work"].items():
            lines.append(f"| {label} | {step['wall_ms']:.2f} ms | {step['cpu_ms']:.2f} ms |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
