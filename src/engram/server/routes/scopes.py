"""Scopes: list those the key may see with their totals, show one, delete one (admin)."""

from __future__ import annotations

from engram.aio import offload
from engram.server.convert import receipt_out, scope_out
from engram.server.deps import ADMIN, CallerDep, EngramDep, ScopePath, v1_router
from engram.server.schemas import ReceiptOut, ScopeList, ScopeOut, ScopePurgedOut

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
async def delete_scope(engram: EngramDep, scope: ScopePath) -> ScopePurgedOut:
    """Delete a whole scope: every session, message and memory (admin; the audit stays)."""
    gone = await offload(engram.purge_scope, scope)
    return ScopePurgedOut(success=True, sessions=gone["sessions"], memories=gone["memories"])


@router.post("/scopes/{scope}/forget", response_model=ReceiptOut, openapi_extra=ADMIN)
async def forget_scope(engram: EngramDep, scope: ScopePath) -> ReceiptOut:
    """Forget a scope ("forget this user"): everything it holds, its audit trail too (admin).

    One audit entry stays, with the counts and the receipt.
    """
    return receipt_out(await offload(engram.forget_scope, scope))
