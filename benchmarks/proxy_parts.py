"""Where the proxy's time goes: Engram's own work in process, and the floor of any HTTP hop.

* :func:`engram_work` times, in this process and on the benchmark's session, the
  steps Engram adds to a completion: aligning and storing the question
  (``plan_turn``), building the prompt (``build_round``) and storing the answer
  (``store_answer``), wall clock and CPU time (CPU time does not grow with the
  machine's load the way wall time does).
* :func:`serve_passthrough` is the least a Python proxy can be: a FastAPI route on
  uvicorn that hands the body to the upstream with the same httpx client as
  Engram's and returns the answer. Its overhead over a direct call is the price of
  the extra hop, before any memory work.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

import engram
from engram.proxy import ProxySettings, Retry, Upstream, parse_request, resolve
from engram.proxy.history import build_round, store_answer
from engram.proxy.plan import plan_turn
from engram.proxy.rounds import ProxyTurn, is_ours
from engram.tokens import counter_for_model


def engram_work(
    url: str, scope: str, session: str, body: dict[str, Any], budget: str, iterations: int = 200
) -> dict[str, dict[str, float]]:
    """Median wall and CPU milliseconds of each step of a proxied turn, in this process."""
    out: dict[str, dict[str, float]] = {}
    with engram.open(url, llm=None) as mem:
        handle = mem.session(session, scope)
        chat = parse_request(body)
        turn = ProxyTurn(
            handle,
            chat,
            None,  # type: ignore[arg-type]  # no upstream call is made here
            ProxySettings("http://127.0.0.1:9/v1"),
            Retry(None, window=60, first_attempt=True),
            resolve(budget, None, chat.model),
        )
        sizes, counter = turn.sizes(), counter_for_model(chat.model)
        steps: dict[str, Callable[[], object]] = {
            "align and store the question": lambda: plan_turn(
                handle, chat.new, turn.retry, sizes, counter, is_ours
            ),
            "build the prompt": lambda: build_round(
                handle, chat, engram_tools=True, budget=turn.budget.total
            ),
            "store the answer": lambda: store_answer(
                handle, {"content": "We settled on 14 dollars."}, upstream={"id": "bench"}
            ),
        }
        for label, step in steps.items():
            walls, cpus = [], []
            for _ in range(iterations):
                wall, cpu = time.perf_counter(), time.thread_time()
                step()
                cpus.append(time.thread_time() - cpu)
                walls.append(time.perf_counter() - wall)
            out[label] = {
                "wall_ms": statistics.median(walls) * 1000,
                "cpu_ms": statistics.median(cpus) * 1000,
            }
    return out


def serve_passthrough(upstream: str, port: int) -> int:
    """A pass-through proxy to ``upstream`` on ``port`` (run in its own process)."""
    app = FastAPI()
    client = Upstream(ProxySettings(upstream))

    @app.post("/v1/chat/completions")
    async def forward(request: Request) -> JSONResponse:
        reply = await client.complete(await request.json())
        return JSONResponse(reply.body)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    return 0
