"""``make bench``: the time the proxy adds to a chat completion, on a 100K-message session.

Usage::

    python -m benchmarks.proxy                       # 100K messages, 300 measured pairs
    python -m benchmarks.proxy --messages 2000 --pairs 30 --name proxy-quick

Two ways to get one completion from the same scripted upstream (the test
suite's OpenAI-compatible server, in this process):

* **direct**: the ``openai`` SDK calls the upstream with the prompt Engram
  would build for the session;
* **proxy**: the SDK calls ``engram serve --upstream URL`` (a separate process
  on 127.0.0.1), which stores the message, builds that prompt from the
  100K-message session, calls the same upstream and stores the answer.

Calls alternate (direct, proxy, direct, ...), so both see the same machine
load. The overhead is the proxy's latency minus the direct latency at the
same percentile (p50, p99), and the median of per-pair differences. Target:
at most 5 ms at p50. Results go to ``benchmarks/results/<name>.json`` and ``.md``.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai

import engram
from benchmarks.dataset import MAIN_SCOPE, MAIN_SESSION, Spec, TextSource, layout
from benchmarks.engram_bench import build_engram, sqlite_url
from benchmarks.timing import percentile
from engram.testing import FakeLLMServer, FakeResponse, RecordedRequest

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
TARGET_P50_MS = 5.0
QUESTION = "What did we decide about the pricing last week?"
#: The upstream's usage is scripted, so it does not count tokens: its time stays small
#: and steady, and the difference measured is Engram's.
USAGE = {"prompt_tokens": 8000, "completion_tokens": 12, "total_tokens": 8012}


def _answer(request: RecordedRequest) -> FakeResponse:
    return FakeResponse(content="We settled on 14 dollars per seat.", usage=USAGE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--name", default="proxy")
    args = parser.parse_args(argv)

    db = _dataset(args.messages)
    with FakeLLMServer(default=_answer) as upstream, _serve(db, upstream.base_url) as base:
        session = {"X-Engram-Session": MAIN_SESSION, "X-Engram-Scope": MAIN_SCOPE}
        prompt = _prompt(db)
        direct = openai.OpenAI(base_url=upstream.base_url, api_key="bench", max_retries=0)
        proxy = openai.OpenAI(
            base_url=f"{base}/v1", api_key="bench", max_retries=0, default_headers=session
        )
        user = [{"role": "user", "content": QUESTION}]

        def call_direct() -> float:
            started = time.perf_counter()
            direct.chat.completions.create(model="gpt-4o-mini", messages=prompt)
            return time.perf_counter() - started

        def call_proxy() -> float:
            started = time.perf_counter()
            proxy.chat.completions.create(model="gpt-4o-mini", messages=user)
            return time.perf_counter() - started

        for _ in range(args.warmup):
            call_direct()
            call_proxy()
        direct_s, proxy_s = [], []
        for _ in range(args.pairs):
            direct_s.append(call_direct())
            proxy_s.append(call_proxy())
        direct.close()
        proxy.close()
    result = _summary(args, direct_s, proxy_s, len(prompt))
    _write(args.name, result)
    print(_markdown(result))
    return 0


def _dataset(messages: int) -> str:
    """A SQLite database whose measured session holds ``messages`` messages (built once)."""
    work = ROOT / "work"
    work.mkdir(exist_ok=True)
    spec = Spec(messages)
    path = work / f"proxy-{spec.key()}.db"
    if not path.exists():
        chunks = [c for c in layout(spec) if (c.scope, c.session) == (MAIN_SCOPE, MAIN_SESSION)]
        print(f"building {path.name} ({messages:,} messages)...", file=sys.stderr)
        build_engram(sqlite_url(str(path)), chunks, TextSource(spec.seed))
    return sqlite_url(str(path))


def _prompt(url: str) -> list[dict[str, Any]]:
    """The prompt the proxy builds for the question: what the direct call sends."""
    with engram.open(url, llm=None) as mem:
        ctx = mem.session(MAIN_SESSION, MAIN_SCOPE).context(compact=False)
        return [*ctx.messages, {"role": "user", "content": QUESTION}]


class _serve:
    """``engram serve --upstream URL`` in a subprocess on a free port of 127.0.0.1."""

    def __init__(self, url: str, upstream: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
        command = [sys.executable, "-m", "engram.cli", "--db", url, "serve"]
        command += ["--port", str(self.port), "--upstream", upstream]
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)

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
    args: Any, direct: list[float], proxy: list[float], prompt_messages: int
) -> dict[str, Any]:
    ms = 1000.0
    pairs = sorted((p - d) * ms for p, d in zip(proxy, direct, strict=True))
    direct_sorted, proxy_sorted = sorted(x * ms for x in direct), sorted(x * ms for x in proxy)
    out: dict[str, Any] = {
        "run": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.platform()}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "session_messages": args.messages,
        "pairs": args.pairs,
        "prompt_messages": prompt_messages,
        "direct_ms": {
            "p50": percentile(direct_sorted, 0.5),
            "p99": percentile(direct_sorted, 0.99),
        },
        "proxy_ms": {"p50": percentile(proxy_sorted, 0.5), "p99": percentile(proxy_sorted, 0.99)},
        "pairwise_overhead_ms": {"p50": percentile(pairs, 0.5), "p99": percentile(pairs, 0.99)},
    }
    out["overhead_ms"] = {q: out["proxy_ms"][q] - out["direct_ms"][q] for q in ("p50", "p99")}
    out["target_p50_ms"] = TARGET_P50_MS
    out["status"] = "PASS" if out["overhead_ms"]["p50"] <= TARGET_P50_MS else "MISS"
    return out


def _write(name: str, result: dict[str, Any]) -> None:
    results = ROOT / "results"
    (results / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (results / f"{name}.md").write_text(_markdown(result), encoding="utf-8")


def _markdown(r: dict[str, Any]) -> str:
    def row(label: str, key: str) -> str:
        return f"| {label} | {r[key]['p50']:.2f} ms | {r[key]['p99']:.2f} ms |"

    return "\n".join(
        [
            "# Proxy overhead",
            "",
            f"Run {r['run']} on {r['machine']}; load average {r['load_average']} "
            "(the machine is shared: other processes ran during the measurement).",
            f"Session of {r['session_messages']:,} messages; {r['pairs']} interleaved pairs "
            "of calls (direct to the scripted upstream, then through `engram serve "
            f"--upstream`); the direct call sends the {r['prompt_messages']} messages the "
            "proxy builds.",
            "",
            "| | p50 | p99 |",
            "| --- | --- | --- |",
            row("direct", "direct_ms"),
            row("through the proxy", "proxy_ms"),
            row("overhead (proxy - direct, same percentile)", "overhead_ms"),
            row("overhead (per-pair difference)", "pairwise_overhead_ms"),
            "",
            f"Target: overhead at most {r['target_p50_ms']:g} ms at p50: **{r['status']}**.",
            "",
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
