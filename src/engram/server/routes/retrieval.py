"""Retrieval: search (a session or the whole scope), by date, the extended window, stats, tools."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Literal

from fastapi import Path, Query

from engram import tools
from engram.aio import offload
from engram.intake.checks import MAX_MESSAGE_ID
from engram.limits import MAX_EXTENDED_CONTEXT
from engram.search.dates import MAX_PHRASE_LENGTH
from engram.server import documented
from engram.server.boundary import on_session
from engram.server.convert import hit_out, messages_out
from engram.server.deps import READ, CallerDep, EngramDep, ScopePath, SessionPath, v1_router
from engram.server.schemas import (
    DateRangeOut,
    MessageList,
    SearchOut,
    StatsOut,
    ToolCallIn,
    ToolResultOut,
)
from engram.server.settings import MAX_PAGE_SIZE
from engram.session import Session

router = v1_router("retrieval")

RoleName = Literal["system", "user", "assistant", "tool"]
SearchText = Annotated[
    str,
    Query(
        min_length=1, max_length=1000, description="Plain words.", json_schema_extra=documented.TEXT
    ),
]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]
Roles = Annotated[list[RoleName] | None, Query(description="Only these roles (repeatable).")]
Since = Annotated[datetime | None, Query(description="Only messages at or after (ISO).")]
Until = Annotated[datetime | None, Query(description="Only messages before (ISO).")]
AsOf = Annotated[
    datetime | None,
    Query(description="When the question is asked (ISO; default now): date phrases count from it."),
]
Partner = Annotated[
    bool, Query(description="Also return each hit's exchange partner (question or answer).")
]


@router.get("/scopes/{scope}/search", response_model=SearchOut)
async def search_scope(
    engram: EngramDep,
    scope: ScopePath,
    q: SearchText,
    limit: Limit = 10,
    role: Roles = None,
    start: Since = None,
    end: Until = None,
    as_of: AsOf = None,
    partner: Partner = False,
) -> SearchOut:
    """Ranked full-text search over every session of the scope, with highlighted snippets."""
    hits = await offload(
        engram.search, q, scope, limit=limit, roles=role, start=start, end=end,
        as_of=as_of, partner=partner,
    )  # fmt: skip
    return SearchOut(hits=[hit_out(h) for h in hits])


@router.get("/scopes/{scope}/sessions/{session}/search", response_model=SearchOut)
async def search_session(
    engram: EngramDep,
    scope: ScopePath,
    session: SessionPath,
    q: SearchText,
    limit: Limit = 10,
    role: Roles = None,
    start: Since = None,
    end: Until = None,
    as_of: AsOf = None,
    partner: Partner = False,
) -> SearchOut:
    """Ranked full-text search of one session."""
    hits = await on_session(
        engram,
        scope,
        session,
        lambda handle: handle.search(
            q, limit=limit, roles=role, start=start, end=end, as_of=as_of, partner=partner
        ),
    )
    return SearchOut(hits=[hit_out(h) for h in hits])


@router.get("/scopes/{scope}/sessions/{session}/by-date", response_model=DateRangeOut)
async def by_date(
    engram: EngramDep,
    scope: ScopePath,
    session: SessionPath,
    when: Annotated[
        str,
        Query(
            min_length=1,
            max_length=MAX_PHRASE_LENGTH,
            description="ISO date or range, or a phrase: yesterday, Monday, last week, 3 days ago.",
        ),
    ],
    tz: Annotated[
        str | None, Query(max_length=64, description="IANA zone, e.g. Europe/Paris.")
    ] = None,
    limit: Limit = 20,
    role: Roles = None,
    all_sessions: bool = False,
    as_of: AsOf = None,
) -> DateRangeOut:
    """Messages of a day or range, oldest first, read in ``tz`` (default: the server's)."""

    def read(handle: Session) -> DateRangeOut:
        start, end = handle.date_range(when, tz=tz, as_of=as_of)
        found = handle.by_date(
            when, limit=limit, roles=role, all_sessions=all_sessions, tz=tz, as_of=as_of
        )
        return DateRangeOut(start=start, end=end, messages=messages_out(found))

    return await on_session(engram, scope, session, read)


@router.get("/scopes/{scope}/sessions/{session}/extended", response_model=MessageList)
async def extended(
    engram: EngramDep,
    scope: ScopePath,
    session: SessionPath,
    count: Annotated[int, Query(ge=1, le=MAX_EXTENDED_CONTEXT)] = 30,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_MESSAGE_ID)] = None,
) -> MessageList:
    """More than the default window: up to 50 messages before ``before_id``, oldest first."""
    found = await on_session(
        engram, scope, session, lambda handle: handle.extended(count, before_id=before_id)
    )
    return MessageList(messages=messages_out(found))


@router.get("/scopes/{scope}/sessions/{session}/stats", response_model=StatsOut)
async def stats(engram: EngramDep, scope: ScopePath, session: SessionPath) -> StatsOut:
    """Counts, first and last dates, stored tokens, policy and title of the session."""
    return StatsOut(**await on_session(engram, scope, session, lambda handle: handle.stats()))


@router.post(
    "/scopes/{scope}/sessions/{session}/tools/{name}",
    response_model=ToolResultOut,
    openapi_extra=READ,
)
async def call_tool(
    engram: EngramDep,
    caller: CallerDep,
    scope: ScopePath,
    session: SessionPath,
    name: Annotated[str, Path(min_length=1, max_length=64, description="A tool's name.")],
    body: ToolCallIn,
) -> ToolResultOut:
    """Run one of Engram's tools for this session, as a model's tool call would.

    The result is the JSON text the model would get (``text``) and the same
    decoded (``result``); bad arguments or an unknown tool give
    ``{"error": {...}}`` in it, as a model would see them. A read-only key
    reaches only the tools that do not write.
    """
    # A read-only key is offered only the tools that read (an application's own may write).
    offered = None if caller.may(scope, write=True) else read_only_tools()
    text = await on_session(
        engram,
        scope,
        session,
        lambda handle: tools.dispatch(handle, name, body.arguments, names=offered),
    )
    return ToolResultOut(name=name, text=text, result=json.loads(text))


def read_only_tools() -> list[str]:
    """The registered tools that only read."""
    return [name for name, tool in tools.TOOLS.items() if not tool.writes]
