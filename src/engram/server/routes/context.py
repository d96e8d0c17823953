"""The prompt of the next turn: what the model receives, exactly counted, and what was left out."""

from __future__ import annotations

from engram.context import Context
from engram.provenance.recipe import VIA_REST
from engram.server.boundary import on_session
from engram.server.convert import context_out
from engram.server.deps import READ, EngramDep, MetricsDep, ScopePath, SessionPath, v1_router
from engram.server.schemas import ContextIn, ContextOut
from engram.session import Session

router = v1_router("context")


@router.post(
    "/scopes/{scope}/sessions/{session}/context", response_model=ContextOut, openapi_extra=READ
)
async def build_context(
    engram: EngramDep,
    metrics: MetricsDep,
    scope: ScopePath,
    session: SessionPath,
    body: ContextIn,
) -> ContextOut:
    """The prompt within ``budget - reserve`` tokens: messages, ids, omissions, section tokens.

    A compaction that is due runs as the session's policy says (a read-only
    key may ask: compaction only folds what is stored). ``compact: false``
    never writes. A session nothing created yet (no append, no ``PUT``) is 404.
    """

    def build(handle: Session) -> Context:
        return handle.context(
            body.budget,
            reserve=body.reserve,
            system=body.system,
            model=body.model,
            policy=body.policy,
            compact=body.compact,
            tools=body.tools,
            via=VIA_REST,
        )

    context = await on_session(engram, scope, session, build)
    metrics.prompt_tokens_sent.inc(context.tokens)
    metrics.prompt_tokens_history.inc(context.history.tokens if context.history else 0)
    return context_out(context)
