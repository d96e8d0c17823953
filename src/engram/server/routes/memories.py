"""Long-term memories of a scope: the admin API (list, purge, delete one), create, edit, audit."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from engram.aio import offload
from engram.limits import MAX_ID
from engram.server.convert import memory_out, receipt_out
from engram.server.deps import EngramDep, ScopePath, v1_router
from engram.server.schemas import (
    AuditOut,
    MemoriesPurgedOut,
    MemoryIn,
    MemoryList,
    MemoryOut,
    MemoryPatch,
    ReceiptOut,
)
from engram.server.settings import MAX_PAGE_SIZE

router = v1_router("memories")

MemoryId = Annotated[int, Path(ge=1, le=MAX_ID, description="A memory id.")]


@router.get("/scopes/{scope}/memories", response_model=MemoryList)
async def list_memories(engram: EngramDep, scope: ScopePath) -> MemoryList:
    """The scope's memories, oldest first: ``{"memories": [...]}``."""
    found = await offload(engram.memories(scope).list)
    return MemoryList(memories=[memory_out(m) for m in found])


@router.delete("/scopes/{scope}/memories", response_model=MemoriesPurgedOut)
async def purge_memories(engram: EngramDep, scope: ScopePath) -> MemoriesPurgedOut:
    """Delete every memory of the scope: ``{"success": true, "deletedCount": n, "receipt"}``."""
    receipt = await offload(engram.memories(scope).clear)
    removed = receipt.counts["memories"]
    return MemoriesPurgedOut(success=True, deletedCount=removed, receipt=receipt_out(receipt))


@router.post("/scopes/{scope}/memories", response_model=MemoryOut, status_code=201)
async def create_memory(engram: EngramDep, scope: ScopePath, body: MemoryIn) -> MemoryOut:
    """Store a memory; a repeat returns the existing one; past the cap the scope is compacted."""
    created = await offload(engram.memories(scope).create, body.content, metadata=body.metadata)
    return memory_out(created)


@router.get("/scopes/{scope}/memories/audit", response_model=AuditOut)
async def memory_audit(
    engram: EngramDep,
    scope: ScopePath,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 100,
) -> AuditOut:
    """The trail of memory decisions (create, merge, delete, purge...), newest first."""
    return AuditOut(events=await offload(engram.memories(scope).audit, limit))


@router.get("/scopes/{scope}/memories/{memory_id}", response_model=MemoryOut)
async def get_memory(engram: EngramDep, scope: ScopePath, memory_id: MemoryId) -> MemoryOut:
    """One memory of the scope."""
    return memory_out(await offload(engram.memories(scope).get, memory_id))


@router.patch("/scopes/{scope}/memories/{memory_id}", response_model=MemoryOut)
async def edit_memory(
    engram: EngramDep, scope: ScopePath, memory_id: MemoryId, body: MemoryPatch
) -> MemoryOut:
    """Change a memory's content and/or metadata (metadata is replaced)."""
    memories = engram.memories(scope)
    updated = await offload(memories.update, memory_id, body.content, body.metadata)
    return memory_out(updated)


@router.delete("/scopes/{scope}/memories/{memory_id}", response_model=ReceiptOut)
async def delete_memory(engram: EngramDep, scope: ScopePath, memory_id: MemoryId) -> ReceiptOut:
    """Delete one memory: ``{"success": true, ...}`` with the receipt of what followed."""
    return receipt_out(await offload(engram.memories(scope).delete, memory_id))
