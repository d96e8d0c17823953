"""The dashboard's pages: every project, a conversation beside its prompt, search, memories.

Each route checks the viewer's rights on the scope, calls the
:class:`~engram.Engram` facade or a :class:`~engram.Session`, and renders a
template. Routes are plain functions, so FastAPI runs them in its worker
threads (the store is synchronous). Fragments for htmx (the next page of a
history, the prompt panel) are the same templates' blocks.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from engram.context.anatomy import describe
from engram.dashboard.access import EngramDep, ViewerDep
from engram.dashboard.charts import CHART_TURNS, compare_chart, recorded_chart, tokens_chart
from engram.dashboard.errors import PageRoute
from engram.dashboard.rendering import render
from engram.dashboard.views import PROJECT_SORTS, ProjectRow, sort_projects
from engram.engine import Engram
from engram.errors import InvalidQuery, TurnNotFound
from engram.intake.checks import MAX_MESSAGE_ID
from engram.limits import MAX_BUDGET, MAX_ID, MAX_OFFSET
from engram.policy import PRESETS
from engram.session import Session

__all__ = ["router"]

router = APIRouter(include_in_schema=False, route_class=PageRoute)

#: Messages in one page of a history (infinite scroll loads the next).
HISTORY_PAGE = 50
#: Sessions in one page of a project.
SESSIONS_PAGE = 50
#: Search hits shown.
SEARCH_HITS = 50
#: Audit events shown.
AUDIT_EVENTS = 100

# Integers of the query and the forms are bounded as the REST API bounds them: a value no
# backend can hold is a 422 naming the field, never a store error.
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
AfterId = Annotated[int | None, Query(ge=1, le=MAX_MESSAGE_ID)]
MessageId = Annotated[int | None, Query(ge=1, le=MAX_MESSAGE_ID)]
Budget = Annotated[int | None, Query(ge=1, le=MAX_BUDGET)]
MemoryId = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.get("/", response_class=HTMLResponse)
def projects(
    request: Request,
    engram: EngramDep,
    viewer: ViewerDep,
    sort: str = "activity",
    order: str = "desc",
) -> Response:
    """Every project the key may see, with its totals and its savings."""
    rows = [
        ProjectRow(
            name=s.name,
            sessions=s.sessions,
            messages=s.messages,
            tokens=s.tokens,
            memories=s.memories,
            last_activity=s.last_activity,
            activity=engram.activity(s.name),
        )
        for s in engram.scope_summaries(only=viewer.scopes)
    ]
    sort = sort if sort in PROJECT_SORTS else "activity"
    rows = sort_projects(rows, sort, order != "asc")
    return render(request, "projects.html", viewer=viewer, rows=rows, sort=sort, order=order)


@router.get("/p/{scope}", response_class=HTMLResponse)
def project(
    request: Request,
    scope: str,
    engram: EngramDep,
    viewer: ViewerDep,
    offset: Offset = 0,
) -> Response:
    """One project: its sessions, a page at a time, with their activity."""
    viewer.require_read(scope)
    summary = engram.scope_summary(scope)
    sessions, total = engram.session_page(scope, limit=SESSIONS_PAGE, offset=offset)
    rows = [(info, engram.activity(scope, info.id)) for info in sessions]
    return render(
        request,
        "project.html",
        viewer=viewer,
        scope=scope,
        summary=summary,
        activity=engram.activity(scope),
        rows=rows,
        total=total,
        offset=offset,
        page=SESSIONS_PAGE,
    )


def _open(engram: Engram, scope: str, session: str) -> Session:
    return engram.require_session(session, scope)


def _prompt(chat: Session, budget: int | None, model: str | None, system: str | None) -> Any:
    """The read-only prompt of the next turn, taken apart, with the state it came from.

    With no budget given, the budget of the newest recorded turn (else the policy's).
    """
    budget = budget or chat.prompt_log().last_budget
    ctx = chat.context(budget, model=model or None, system=system or None, compact=False)
    return {
        "ctx": ctx,
        "anatomy": describe(ctx, model=model or None),
        "state": chat.compaction_state(),
        "budget": budget,
        "model": model or "",
        "system": system or "",
    }


def _history(chat: Session, after: int | None, at: int | None) -> tuple[list[Any], bool]:
    """A page of the history from ``after`` (or starting at message ``at``), and if it is full."""
    start = (at - 1 or None) if at is not None else after  # at=1: from the very first
    page = chat.messages(after_id=start, limit=HISTORY_PAGE)
    return page, len(page) == HISTORY_PAGE


@router.get("/p/{scope}/s/{session}", response_class=HTMLResponse)
def conversation(
    request: Request,
    scope: str,
    session: str,
    engram: EngramDep,
    viewer: ViewerDep,
    after: AfterId = None,
    at: MessageId = None,
    budget: Budget = None,
    model: str | None = None,
    system: str | None = None,
) -> Response:
    """A conversation's full history beside exactly what the model receives next."""
    viewer.require_read(scope)
    chat = _open(engram, scope, session)
    if at is not None and engram.message(at, scope).session != session:
        raise InvalidQuery(f"message {at} is not in session {session!r}")
    messages, more = _history(chat, after, at)
    prompt = _prompt(chat, budget, model, system)
    activity = engram.activity(scope, session)
    return render(
        request,
        "conversation.html",
        viewer=viewer,
        scope=scope,
        session=session,
        title=chat.title(),
        policy=chat.policy.name,
        messages=messages,
        more=more,
        earlier=bool(messages) and (after is not None or at is not None),
        at=at,
        prompt_ids=set(prompt["ctx"].message_ids),
        activity=activity,
        chart=_chart(chat, activity.prompts.recent, activity.prompts.turns),
        **prompt,
    )


def _chart(chat: Session, recent: Any, total: int) -> Any:
    """The tokens chart from the recorded turns' recipes, else from the prompt log."""
    try:
        recorded = chat.prompts(limit=CHART_TURNS, newest=True)
    except TurnNotFound:  # a store that keeps no recipes
        recorded = []
    return recorded_chart(recorded) if recorded else tokens_chart(recent, total)


@router.get("/p/{scope}/s/{session}/what-if", response_class=HTMLResponse)
def what_if(
    request: Request,
    scope: str,
    session: str,
    engram: EngramDep,
    viewer: ViewerDep,
    policy: str = "lean",
    budget: Annotated[int | None, Query(ge=1, le=10_000_000)] = None,
    model: str | None = None,
) -> Response:
    """The history under its own policy and a chosen one, side by side (nothing is written)."""
    viewer.require_read(scope)
    chat = _open(engram, scope, session)
    if policy not in PRESETS:
        raise InvalidQuery(f"policy: choose one of {', '.join(PRESETS)}")
    tried = [
        engram.what_if(session, scope, policy=name, budget=budget, model=model or None)
        for name in ("current", policy)
    ]
    labels = [f"current ({tried[0].policy})", tried[1].policy]
    return render(
        request,
        "whatif.html",
        viewer=viewer,
        scope=scope,
        session=session,
        title=chat.title(),
        presets=list(PRESETS),
        chosen=policy,
        budget=budget,
        model=model or "",
        comparison=compare_chart(tried, labels),
        rows=[(label, found.to_dict()) for label, found in zip(labels, tried, strict=True)],
    )


@router.get("/p/{scope}/s/{session}/history", response_class=HTMLResponse)
def history(
    request: Request,
    scope: str,
    session: str,
    engram: EngramDep,
    viewer: ViewerDep,
    after: AfterId = None,
    before: MessageId = None,
) -> Response:
    """A page of messages (htmx): the next after ``after``, or the ones before ``before``."""
    viewer.require_read(scope)
    chat = _open(engram, scope, session)
    if before is not None:
        messages = chat.extended(HISTORY_PAGE, before_id=before)
        more, earlier = False, len(messages) == HISTORY_PAGE
    else:
        messages, more = _history(chat, after, None)
        earlier = False
    ctx = chat.context(compact=False)
    return render(
        request,
        "history.html",
        viewer=viewer,
        scope=scope,
        session=session,
        messages=messages,
        more=more,
        earlier=earlier,
        prompt_ids=set(ctx.message_ids),
        state=chat.compaction_state(),
    )


@router.get("/p/{scope}/s/{session}/prompt", response_class=HTMLResponse)
def prompt(
    request: Request,
    scope: str,
    session: str,
    engram: EngramDep,
    viewer: ViewerDep,
    budget: Budget = None,
    model: str | None = None,
    system: str | None = None,
) -> Response:
    """Exactly the prompt of the next turn, section by section (a page, or the panel for htmx)."""
    viewer.require_read(scope)
    chat = _open(engram, scope, session)
    template = "prompt_panel.html" if request.headers.get("HX-Request") else "prompt.html"
    return render(
        request,
        template,
        viewer=viewer,
        scope=scope,
        session=session,
        **_prompt(chat, budget, model, system),
    )


@router.get("/p/{scope}/search", response_class=HTMLResponse)
def search(
    request: Request,
    scope: str,
    engram: EngramDep,
    viewer: ViewerDep,
    q: str = "",
    session: str = "",
) -> Response:
    """Ranked hits of a project (or one of its conversations), matches highlighted."""
    viewer.require_read(scope)
    hits: list[Any] = []
    if q.strip():
        if session:
            hits = _open(engram, scope, session).search(q, limit=SEARCH_HITS)
        else:
            hits = engram.search(q, scope, limit=SEARCH_HITS)
    return render(
        request, "search.html", viewer=viewer, scope=scope, session=session, q=q, hits=hits
    )


@router.get("/p/{scope}/memories", response_class=HTMLResponse)
def memories(request: Request, scope: str, engram: EngramDep, viewer: ViewerDep) -> Response:
    """The project's long-term memories and their audit trail."""
    viewer.require_read(scope)
    store = engram.memories(scope)
    return render(
        request,
        "memories.html",
        viewer=viewer,
        scope=scope,
        memories=store.list(),
        audit=store.audit(AUDIT_EVENTS),
        cap=engram.memory_cap,
    )


@router.post("/p/{scope}/memories/{memory_id}/delete")
def delete_memory(
    scope: str, memory_id: MemoryId, engram: EngramDep, viewer: ViewerDep
) -> Response:
    """Delete one memory (the audit trail records it)."""
    viewer.require_write(scope)
    engram.memories(scope).delete(memory_id)
    return RedirectResponse(f"{_scope_url(scope)}/memories", status_code=303)


@router.post("/p/{scope}/memories/purge")
def purge_memories(
    scope: str,
    engram: EngramDep,
    viewer: ViewerDep,
    confirm: Annotated[str, Form()] = "",
) -> Response:
    """Delete every memory of the project, once its name is typed to confirm."""
    viewer.require_write(scope)
    if confirm != scope:
        raise InvalidQuery("confirm: type the project's name to purge its memories")
    engram.memories(scope).purge()
    return RedirectResponse(f"{_scope_url(scope)}/memories", status_code=303)


def _scope_url(scope: str) -> str:
    return f"/p/{quote(scope, safe='')}"
