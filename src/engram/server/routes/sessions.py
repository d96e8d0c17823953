"""Sessions of a scope: a page at a time, create with a policy, show, delete (admin)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from engram.aio import offload
from engram.errors import SessionNotFound
from engram.limits import MAX_OFFSET
from engram.server.convert import receipt_out, session_out
from engram.server.deps import ADMIN, EngramDep, ScopePath, SessionPath, v1_router
from engram.server.schemas import SessionDeletedOut, SessionIn, SessionOut, SessionPage
from engram.server.settings import MAX_PAGE_SIZE

router = v1_router("sessions")


@router.get("/scopes/{scope}/sessions", response_model=SessionPage)
async def list_sessions(
    engram: EngramDep,
    scope: ScopePath,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    order: Annotated[Literal["recent", "oldest"], Query()] = "recent",
) -> SessionPage:
    """The scope's sessions by last activity (``recent`` first, or ``oldest``), paginated."""
    page, total = await offload(engram.session_page, scope, limit=limit, offset=offset, order=order)
    return SessionPage(
        sessions=[session_out(s) for s in page], total=total, limit=limit, offset=offset
    )


@router.put("/scopes/{scope}/sessions/{session}", response_model=SessionOut)
async def create_session(
    engram: EngramDep, scope: ScopePath, session: SessionPath, body: SessionIn
) -> SessionOut:
    """Create the session (or change its stored policy); appending also creates it."""

    def create() -> SessionOut:
        handle = engram.session(session, scope, policy=body.policy or "default")
        info = handle.info()
        assert info is not None  # a policy given: the session row now exists
        return session_out(info)

    return await offload(create)


@router.get("/scopes/{scope}/sessions/{session}", response_model=SessionOut)
async def get_session(engram: EngramDep, scope: ScopePath, session: SessionPath) -> SessionOut:
    """The session and its running totals."""
    info = await offload(engram.session_info, session, scope)
    if info is None:
        raise SessionNotFound(f"no session {session!r} in scope {scope!r}")
    return session_out(info)


@router.delete(
    "/scopes/{scope}/sessions/{session}", response_model=SessionDeletedOut, openapi_extra=ADMIN
)
async def delete_session(
    engram: EngramDep, scope: ScopePath, session: SessionPath
) -> SessionDeletedOut:
    """Delete a session with its messages and state (admin; the scope's memories stay).

    Answers ``{"success": true, "receipt": {...}}``: the messages removed and what became
    of each thing made from them.
    """
    receipt = await offload(engram.session(session, scope).delete)
    if not receipt.counts["sessions"]:
        raise SessionNotFound(f"no session {session!r} in scope {scope!r}")
    return SessionDeletedOut(success=True, receipt=receipt_out(receipt))
