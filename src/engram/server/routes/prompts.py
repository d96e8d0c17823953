"""Recorded prompts of a session: the turns, one rebuilt exactly as sent, a diff, a what-if."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from engram.aio import offload
from engram.server.boundary import on_session
from engram.server.deps import READ, EngramDep, ScopePath, SessionPath, v1_router
from engram.server.provenance_schemas import (
    DiffOut,
    PromptOut,
    ReplayIn,
    TurnOut,
    TurnPage,
    WhatIfOut,
)
from engram.server.settings import MAX_PAGE_SIZE
from engram.session import Session

router = v1_router("prompts")

TurnPath = Annotated[int, Path(ge=1, le=2**31 - 1, description="A recorded turn (from 1).")]


@router.get("/scopes/{scope}/sessions/{session}/prompts", response_model=TurnPage)
async def list_prompts(
    engram: EngramDep,
    scope: ScopePath,
    session: SessionPath,
    after: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 50,
) -> TurnPage:
    """Recorded turns, oldest first: time, tokens, cacheable share, provider's cached tokens."""

    def page(handle: Session) -> TurnPage:
        turns = [TurnOut(**t.to_dict()) for t in handle.prompts(after=after, limit=limit)]
        return TurnPage(turns=turns, next_after=turns[-1].turn if len(turns) == limit else None)

    return await on_session(engram, scope, session, page)


@router.get("/scopes/{scope}/sessions/{session}/prompts/{turn}", response_model=PromptOut)
async def get_prompt(
    engram: EngramDep, scope: ScopePath, session: SessionPath, turn: TurnPath
) -> PromptOut:
    """A recorded turn rebuilt exactly as sent, checked against its SHA-256.

    With its sections and what was left out; ``messages`` is null and
    ``missing`` says why when a part it needs was pruned or deleted.
    """
    found = await on_session(engram, scope, session, lambda handle: handle.prompt(turn))
    return PromptOut(**found.to_dict())


@router.get("/scopes/{scope}/sessions/{session}/prompts/{turn}/diff", response_model=DiffOut)
async def diff_prompts(
    engram: EngramDep,
    scope: ScopePath,
    session: SessionPath,
    turn: TurnPath,
    against: Annotated[int, Query(ge=1, le=2**31 - 1, description="The earlier turn.")],
) -> DiffOut:
    """What changed from turn ``against`` to ``turn``: window, sections, shared prefix."""
    found = await on_session(engram, scope, session, lambda h: h.prompt_diff(against, turn))
    return DiffOut(**found.to_dict())


@router.post(
    "/scopes/{scope}/sessions/{session}/replay", response_model=WhatIfOut, openapi_extra=READ
)
async def replay_session(
    engram: EngramDep, scope: ScopePath, session: SessionPath, body: ReplayIn
) -> WhatIfOut:
    """Play the session's stored history again under another policy, writing nothing.

    Per turn and in total: tokens, cacheable share, input cost with and
    without the provider's cache, budget violations, compactions (offline
    summarizer) and the evidence of later questions kept in view.
    """
    found = await offload(
        engram.what_if,
        session,
        scope,
        policy=body.policy,
        budget=body.budget,
        reserve=body.reserve,
        model=body.model,
        system=body.system,
    )
    return WhatIfOut(**found.to_dict())
