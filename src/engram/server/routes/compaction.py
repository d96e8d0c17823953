"""Compaction and state: compact now, the compaction state, the agent state, end a session."""

from __future__ import annotations

from fastapi import Request

from engram.compaction.cycle import CompactionResult
from engram.server.boundary import on_session
from engram.server.convert import compact_out
from engram.server.deps import EngramDep, ScopePath, SessionPath, v1_router
from engram.server.schemas import (
    CompactIn,
    CompactionStateOut,
    CompactOut,
    EndIn,
    EndOut,
    JSONObject,
)
from engram.session import Session

router = v1_router("compaction")


@router.post("/scopes/{scope}/sessions/{session}/compact", response_model=CompactOut)
async def compact(
    engram: EngramDep,
    scope: ScopePath,
    session: SessionPath,
    body: CompactIn,
) -> CompactOut:
    """Compact now; returns once the new state is committed (or nothing was due)."""

    def compact_now(handle: Session) -> CompactionResult:
        return handle.compact(system=body.system, policy=body.policy)

    return compact_out(await on_session(engram, scope, session, compact_now))


@router.get("/scopes/{scope}/sessions/{session}/compaction", response_model=CompactionStateOut)
async def compaction_state(
    engram: EngramDep, scope: ScopePath, session: SessionPath
) -> CompactionStateOut:
    """The summary, its version, the important data and the watermark."""
    state = await on_session(engram, scope, session, lambda handle: handle.compaction_state())
    data = state.to_dict()
    data.pop("format", None)
    return CompactionStateOut(**data)


@router.get("/scopes/{scope}/sessions/{session}/agent-state", response_model=JSONObject)
async def agent_state(engram: EngramDep, scope: ScopePath, session: SessionPath) -> JSONObject:
    """Facts, active tasks, tool stats, token usage, environment and preferences."""
    state = await on_session(engram, scope, session, lambda handle: handle.agent_state())
    return state.to_dict()


@router.post("/scopes/{scope}/sessions/{session}/end", response_model=EndOut, status_code=202)
async def end_session(
    request: Request, engram: EngramDep, scope: ScopePath, session: SessionPath, body: EndIn
) -> EndOut:
    """End the conversation; its long-term memory is written in the background."""
    await on_session(engram, scope, session, lambda handle: handle.end(body.reason))
    memories = request.url_for("list_memories", scope=scope)
    audit = request.url_for("memory_audit", scope=scope)
    return EndOut(ended=True, memories_url=memories.path, audit_url=audit.path)
