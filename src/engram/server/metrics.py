"""Prometheus metrics of one app (``GET /metrics``), in a registry of its own.

Counted as requests go by: requests and latencies by route template (never
by raw path, so ids do not explode the label set), messages and tokens
stored through the API, tokens sent in prompts against the tokens stored in
those sessions (the savings). Read at scrape time from the ``Engram``: every
compaction it ran by outcome (in turns, in the background, from the queue or
the API) and their seconds, memory operations, the model's calls, tokens and
cost (from the usage the store records), and the depth of the shared job
queue (PostgreSQL).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.engine import Engram
from engram.errors import EngramError

logger = logging.getLogger("engram.server")

#: Latency buckets, in seconds: a cached read is sub-millisecond, a compaction seconds.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class _EngramCollector(Collector):
    """Values read from the ``Engram`` when Prometheus scrapes."""

    def __init__(self, engram: Engram) -> None:
        self._engram = engram

    def collect(self) -> Iterator[Metric]:
        yield from self._compactions()
        for name, value in self._engram.memory_metrics.snapshot().items():
            if name == "scopes_with_memories":
                yield GaugeMetricFamily(f"engram_memory_{name}", "Scopes holding memories.", value)
            else:
                yield CounterMetricFamily(f"engram_memory_{name}", f"Memory {name}.", value)
        try:
            usage = self._engram.usage_totals()
            jobs = self._engram.job_counts()
        except EngramError as exc:  # a scrape must not fail because the store is down
            logger.warning("metrics: the store did not answer: %s", exc)
            return
        yield CounterMetricFamily("engram_llm_calls", "Model calls Engram made.", usage["calls"])
        tokens = CounterMetricFamily("engram_llm_tokens", "Model tokens.", labels=["direction"])
        tokens.add_metric(["input"], usage["input_tokens"])
        tokens.add_metric(["output"], usage["output_tokens"])
        yield tokens
        yield CounterMetricFamily("engram_llm_cost_usd", "Model cost, USD.", usage["cost_usd"])
        if jobs is not None:
            depth = GaugeMetricFamily(
                "engram_jobs", "Shared job queue by status.", labels=["status"]
            )
            for status in ("pending", "running", "done", "failed"):
                depth.add_metric([status], jobs.get(status, 0))
            yield depth

    def _compactions(self) -> Iterator[Metric]:
        done = CounterMetricFamily(
            "engram_compactions",
            "Compactions by outcome (llm, offline, failed: the fallback wrote it, skipped).",
            labels=["outcome"],
        )
        seconds = CounterMetricFamily(
            "engram_compaction_seconds", "Seconds spent compacting, by outcome.", labels=["outcome"]
        )
        for outcome, (count, spent) in self._engram.compaction_metrics.snapshot().items():
            done.add_metric([outcome], count)
            seconds.add_metric([outcome], spent)
        yield done
        yield seconds
        yield CounterMetricFamily(
            "engram_compaction_flagged_kept_out",
            "Messages kept out of summaries because they read like instructions to a model.",
            self._engram.compaction_metrics.flagged_kept_out,
        )
        recalled = CounterMetricFamily(
            "engram_flagged_recalled",
            "Recalled texts handed to a model that read like instructions, by flag.",
            labels=["flag"],
        )
        for flag, count in self._engram.flag_metrics.snapshot()[0].items():
            recalled.add_metric([flag], count)
        yield recalled
        yield CounterMetricFamily(
            "engram_compaction_citations_dropped",
            "Ranges summarizers cited outside the messages they folded (dropped).",
            self._engram.compaction_metrics.citations_dropped,
        )


class ServerMetrics:
    """The counters of one app and the registry ``/metrics`` renders."""

    def __init__(self, engram: Engram) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.requests = Counter(
            "engram_http_requests", "HTTP requests.", ["method", "route", "status"], registry=reg
        )
        self.latency = Histogram(
            "engram_http_request_duration_seconds",
            "HTTP request latency.",
            ["method", "route"],
            buckets=BUCKETS,
            registry=reg,
        )
        self.messages_stored = Counter(
            "engram_messages_stored", "Messages appended through the API.", registry=reg
        )
        self.tokens_stored = Counter(
            "engram_tokens_stored", "Tokens of the messages appended through the API.", registry=reg
        )
        self.prompt_tokens_sent = Counter(
            "engram_prompt_tokens_sent", "Tokens of the prompts built.", registry=reg
        )
        self.prompt_tokens_history = Counter(
            "engram_prompt_tokens_history",
            "Tokens stored in the sessions those prompts were built for (sent/history = cost).",
            registry=reg,
        )
        reg.register(_EngramCollector(engram))

    def render(self) -> bytes:
        """The Prometheus text exposition of everything."""
        return generate_latest(self.registry)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """Wrap ``app``: time every request and count it by route template and status."""

        async def timed(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            status = 500

            async def seen(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await app(scope, receive, seen)
            finally:
                template = getattr(scope.get("route"), "path", "unmatched")
                method = scope["method"]
                self.latency.labels(method, template).observe(time.perf_counter() - started)
                self.requests.labels(method, template, str(status)).inc()

        return timed
