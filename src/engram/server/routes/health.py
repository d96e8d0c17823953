"""Service routes: liveness, readiness, Prometheus metrics. No key needed."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from engram.aio import offload
from engram.server.deps import EngramDep, MetricsDep
from engram.server.errors import NotReady
from engram.server.schemas import HealthOut

router = APIRouter(tags=["service"])

#: The content type of the Prometheus text format.
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


@router.get("/healthz", response_model=HealthOut)
async def healthz() -> HealthOut:
    """Liveness: the process answers."""
    return HealthOut(status="ok")


@router.get("/readyz", response_model=HealthOut)
async def readyz(engram: EngramDep) -> HealthOut:
    """Readiness: the store answers a read (503 when it does not)."""
    if not await offload(engram.ping):
        raise NotReady("the store does not answer")
    return HealthOut(status="ready")


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {PROMETHEUS_TEXT: {"schema": {"type": "string"}}}}},
)
async def metrics(metrics: MetricsDep) -> Response:
    """Prometheus text: requests, latencies, tokens stored and sent, compactions, memory, model."""
    return Response(await offload(metrics.render), media_type=PROMETHEUS_TEXT)
