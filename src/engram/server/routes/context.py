"""The prompt of the next turn: what the model receives, exactly counted, and what was left out."""

from __future__ import annotations

from engram.context import Context
from engram.provenance.recipe import VIA_REST
from engram.server.boundary import on_session
from engram.server.convert import context_out
from engram.server.deps import (
    READ,
    CallerDep,
    EngramDep,
    MetricsDep,
    ScopePath,
    SessionPath,
    v1_router,
)
from engram.server.schemas import ContextIn, ContextOut
from engram.session import Session

router = v1_router("context")


@router.post(
    "/scopes/{scope}/sessions/{session}/context", response_model=ContextOut, openapi_extra=READ
)
async def build_context(
    engram: EngramDep,
    caller: CallerDep,
    metrics: MetricsDep,
    scope: ScopePath,
    session: SessionPath,
    body: ContextIn,
) -> ContextOut:
    """The prompt within ``budget - reserve`` tokens: messages, ids, omissions, section tokens.

    A compaction that is due runs as the session's policy says, and the turn is
    recorded in the prompt log. ``compact: false`` never writes, and a read-only
    key's context is always built so: it writes nothing (no summary, no record).
    A session nothing created yet (no append, no ``PUT``) is 404.
    """
    compact = body.compact and caller.may(scope, write=True)

    def build(handle: Session) -> Context:
        return handle.context(
            body.budget,
            reserve=body.reserve,
            system=body.system,
            model=body.model,
            policy=body.policy,
            compact=compact,
            tools=body.tools,
            via=VIA_REST,
        )

    context = await on_session(engram, scope, session, build)
    metrics.prompt_tokens_sent.inc(context.tokens)
    metrics.prompt_tokens_history.inc(context.history.tokens if context.history else 0)
    return context_out(context)
