"""Scopes: list those the key may see with their totals, show one, delete one (admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from engram.aio import offload
from engram.server.convert import receipt_out, scope_out
from engram.server.deps import ADMIN, CallerDep, EngramDep, ScopePath, v1_router
from engram.server.schemas import ScopeList, ScopeOut, ScopePurgedOut

router = v1_router("scopes")


@router.get("/scopes", response_model=ScopeList)
async def list_scopes(engram: EngramDep, caller: CallerDep) -> ScopeList:
    """Every scope the key may read, with sessions, messages, stored tokens and last activity."""
    summaries = await offload(engram.scope_summaries, caller.visible())
    return ScopeList(scopes=[scope_out(s) for s in summaries])


@router.get("/scopes/{scope}", response_model=ScopeOut)
async def get_scope(engram: EngramDep, scope: ScopePath) -> ScopeOut:
    """One scope's totals (zeros when nothing is stored in it yet)."""
    return scope_out(await offload(engram.scope_summary, scope))


@router.delete("/scopes/{scope}", response_model=ScopePurgedOut, openapi_extra=ADMIN)
async def delete_scope(
    engram: EngramDep,
    scope: ScopePath,
    forget: Annotated[
        bool,
        Query(
            description="Also delete the scope's audit trail and model usage, keeping one audit "
            'entry with the counts ("forget this user").'
        ),
    ] = False,
) -> ScopePurgedOut:
    """Delete a whole scope: every session, message and memory (admin), with the receipt.

    The audit trail stays with the action, ids and times but without the memories' text
    (a SHA-256 of it instead); with ``forget=true`` it goes too.
    """
    receipt = await offload(engram.forget_scope if forget else engram.delete_scope, scope)
    gone = receipt.counts
    return ScopePurgedOut(
        success=True,
        sessions=gone["sessions"],
        messages=gone["messages"],
        memories=gone["memories"],
        forgotten=forget,
        receipt=receipt_out(receipt),
    )
