"""The prompt of a session's next turn, assembled in one pass over its stored state.

Order: system prompt, long-term memories, important data, summary, the
sections the policy adds (tool cache, agent state), then the recent messages
after the compaction watermark. The session's compaction state and the rows
after its watermark are read once; when compaction is due it runs on what
was read (synchronous policies, within the configured deadline) or is handed
to the scheduler, and the prompt is built from the outcome. The pure choice
of messages is :func:`engram.context.build_context`'s.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from engram import telemetry
from engram.compaction.cycle import (
    UNREADABLE,
    Loaded,
    load_compaction_state,
    plan_state,
    unfolded,
)
from engram.compaction.planner import plan_compaction, rows_from_messages
from engram.compaction.prompt_sections import section_tokens, sections_tokens, state_sections
from engram.compaction.state import STATE_KIND, CompactionState, fresh_state
from engram.context import (
    Context,
    HistoryReader,
    HistoryRows,
    HistoryTotals,
    Omission,
    Provenance,
    Section,
    build_context,
)
from engram.context.rows import rows_of
from engram.errors import StoreError
from engram.models import Message
from engram.policy import Policy
from engram.runtime import Runtime
from engram.sections import filters_for, providers_for, views_for
from engram.store import Store
from engram.store.base import reads_rows
from engram.tokens import count_messages, counter_for_model

log = logging.getLogger(__name__)

#: Rows after the watermark read to decide whether compaction is due; the same
#: rows then feed the prompt builder. A longer backlog means a compaction is
#: overdue: it is scheduled and the builder reads the store.
PREREAD_ROWS = 1000

PENDING_NOTE = (
    "compaction is due and runs in the background; this prompt uses the previous summary "
    "and the recent window"
)
LATE_NOTE = (
    "compaction did not finish within its deadline; this prompt uses the previous summary "
    "and the compaction goes on in the background"
)
STORE_FAILED = "compaction could not be saved (storage failed); the previous state is shown"
NOT_RUN_NOTE = "compaction is due but was not run (read-only view): the next turn runs it"
#: Omission reason of the messages folded into the summary.
IN_SUMMARY = "in summary"
NO_MODEL_NOTE = "no model is configured: summaries are written by the offline summarizer"


@dataclass(frozen=True, slots=True)
class PromptRequest:
    """What the caller asked for."""

    budget: int
    reserve: int
    system: str | None
    model: str | None
    compact: bool = True
    merge_system: bool = False


@dataclass(slots=True)
class _Reads:
    """The session's compaction state and the rows after its watermark, as read."""

    state: CompactionState
    version: int
    rows: list[Message]
    complete: bool
    notes: list[str] = field(default_factory=list)
    degraded: str | None = None
    pending: bool = False


def build_prompt(
    runtime: Runtime,
    scope: str,
    session: str,
    policy: Policy,
    request: PromptRequest,
    *,
    totals: HistoryTotals | None,
    overlay: Callable[[HistoryReader], HistoryReader] | None = None,
) -> Context:
    """The prompt for the next turn of one session (see the module docstring).

    ``totals`` are the session's stored totals (:func:`stored_totals`), read by
    the caller, which records them in the prompt log too; the prompt carries
    them (``Context.history``) and a policy's ``cache_window`` anchors on them.
    ``overlay`` wraps the history reader (a turn that stores nothing shows its
    own messages after the stored ones); use it with ``request.compact`` False.
    """
    traced = telemetry.context_span(scope, session, policy.name, request.budget, request.model)
    with traced:
        ctx = _build_prompt(
            runtime, scope, session, policy, request, totals=totals, overlay=overlay
        )
        telemetry.context_result(traced, ctx, lambda: _prefix_tokens(ctx, request.model))
    return ctx


def _prefix_tokens(ctx: Context, model: str | None) -> int:
    """Tokens of the prompt before the current turn (the prefix a provider can cache)."""
    if not ctx.turn_start:
        return 0
    return count_messages(counter_for_model(model), ctx.messages[: ctx.turn_start])


def _build_prompt(
    runtime: Runtime,
    scope: str,
    session: str,
    policy: Policy,
    request: PromptRequest,
    *,
    totals: HistoryTotals | None,
    overlay: Callable[[HistoryReader], HistoryReader] | None,
) -> Context:
    wrap = overlay or _same
    history = totals
    if not policy.cache_window:
        totals = None  # the builder sizes its reads by them only for a cache window
    sections: list[Section] = []
    memories = runtime.memories_section(scope)
    if memories is not None:
        sections.append(memories)
    extras = providers_for(policy), filters_for(policy), views_for(policy)
    if not policy.compacts and not any(extras):
        # The hot path of lean policies: no state is read, the builder pages the store.
        ctx = _build(
            request,
            policy,
            sections,
            wrap(tail_reader(runtime.store, scope, session)),
            totals=totals,
            provenance=_provenance(policy, request, sections),
        )
        return ctx if ctx.history == history else dataclasses.replace(ctx, history=history)
    fixed = fixed_tokens(request.system, sections)
    reads = _read(runtime.store, scope, session, policy)
    if policy.compacts:
        _settle_compaction(runtime, scope, session, policy, reads, fixed, request.compact)
        _report_summarizer(runtime, reads)
    sections += [
        s.from_state(STATE_KIND, reads.version)
        for s in state_sections(reads.state, citations=policy.citations)
    ]
    providers, filters, views = extras
    for provider in providers:
        sections.extend(provider.sections(runtime.store, scope, session))
    rows = reads.rows
    shown: dict[int, str] = {}
    for row_views in views:
        shown = {**row_views.views(rows, policy), **shown}
    for row_filter in filters:
        rows = row_filter.rows(rows, policy)
    reader = rows_reader(rows) if reads.complete else tail_reader(runtime.store, scope, session)
    reader = wrap(reader)
    ctx = _build(
        request,
        policy,
        sections,
        reader,
        floor_id=reads.state.watermark or None,
        views=shown,
        totals=totals,
        provenance=_provenance(policy, request, sections),
    )
    return dataclasses.replace(
        ctx,
        omitted=[*_summarized(reads.state), *ctx.omitted],
        notes=[*ctx.notes, *reads.notes],
        pending_compaction=reads.pending,
        degraded=ctx.degraded or reads.degraded,
        history=history,
    )


def _provenance(policy: Policy, request: PromptRequest, sections: list[Section]) -> Provenance:
    return Provenance(
        policy,
        tuple(sections),
        system=request.system,
        model=request.model,
        merge_system=request.merge_system,
    )


def _summarized(state: CompactionState) -> list[Omission]:
    """The messages folded into the summary: left out verbatim, and said so."""
    if not state.watermark:
        return []
    detail = (
        f"{state.messages_summarized_count} messages with ids up to {state.watermark} are in "
        f"the summary (version {state.summary_version})"
    )
    return [Omission(IN_SUMMARY, before_id=state.watermark + 1, detail=detail)]


def fixed_tokens(system: str | None, sections: list[Section]) -> int:
    """Tokens of the prompt's fixed head (system prompt, memories) the token trigger counts."""
    return (section_tokens(system) if system else 0) + sections_tokens(sections)


def _build(
    request: PromptRequest,
    policy: Policy,
    sections: list[Section],
    reader: HistoryReader,
    *,
    floor_id: int | None = None,
    views: dict[int, str] | None = None,
    totals: HistoryTotals | None = None,
    provenance: Provenance | None = None,
) -> Context:
    return build_context(
        reader,
        budget=request.budget,
        reserve=request.reserve,
        system=request.system,
        counter=counter_for_model(request.model),
        policy=policy,
        sections=sections,
        floor_id=floor_id,
        views=views or None,
        totals=totals,
        merge_system=request.merge_system,
        provenance=provenance,
    )


def stored_totals(store: Store, scope: str, session: str) -> HistoryTotals | None:
    """The session's stored totals now (None for a session never written)."""
    if reads_rows(store):
        found = store.history_totals(scope, session)
        return HistoryTotals(*found) if found is not None else None
    info = store.get_session(scope, session)
    return HistoryTotals(info.message_count, info.token_count) if info is not None else None


def _read(store: Store, scope: str, session: str, policy: Policy) -> _Reads:
    """The state (when the policy compacts) and the rows after its watermark."""
    if policy.compacts:
        state, version = load_compaction_state(store, scope, session)
    else:
        state, version = fresh_state(), 0
    rows, complete = unfolded(store, scope, session, state.watermark, max_rows=PREREAD_ROWS)
    return _Reads(state, version, rows, complete)


def _settle_compaction(
    runtime: Runtime,
    scope: str,
    session: str,
    policy: Policy,
    reads: _Reads,
    fixed: int,
    allowed: bool,
) -> None:
    """Run or schedule a compaction that is due, and update ``reads`` with its outcome."""
    if not _due(policy, reads, fixed):
        return
    if not allowed:
        reads.notes.append(NOT_RUN_NOTE)
        return
    try:
        if not policy.sync_compaction:
            reads.pending = runtime.scheduler.compact_later(
                scope, session, policy, extra_tokens=fixed
            )
            if reads.pending:
                reads.notes.append(PENDING_NOTE)
            return
        loaded = Loaded(reads.state, reads.version, reads.rows) if reads.complete else None
        result = runtime.compact_within(scope, session, policy, extra_tokens=fixed, loaded=loaded)
    except StoreError as exc:
        # A full disk or a lost database: the turn goes on with the state it read.
        log.warning("compaction of %s/%s could not be saved: %s", scope, session, exc)
        reads.degraded = STORE_FAILED
        reads.notes.append(f"{STORE_FAILED}: {exc}")
        return
    if result is None:
        reads.pending = True
        reads.notes.append(LATE_NOTE)
        return
    if result.degraded:
        reads.degraded = "compaction fell back to the offline summarizer"
        reads.notes.extend(result.notes)
    if result.state is None or not reads.complete:
        fresh = _read(runtime.store, scope, session, policy)
        reads.state, reads.version, reads.rows, reads.complete = (
            fresh.state,
            fresh.version,
            fresh.rows,
            fresh.complete,
        )
        return
    reads.state, reads.version = result.state, result.version
    reads.rows = [m for m in reads.rows if m.id > result.watermark]


def _due(policy: Policy, reads: _Reads, fixed: int) -> bool:
    if not reads.complete:
        return True  # a backlog longer than one read: overdue
    if reads.state.reset_reason is not None and reads.version != UNREADABLE:
        return True  # a corrupted state is replaced at once
    planned = plan_state(reads.state, extra_tokens=fixed, citations=policy.citations)
    plan = plan_compaction(policy, rows_from_messages(reads.rows), planned)
    return plan is not None


def _report_summarizer(runtime: Runtime, reads: _Reads) -> None:
    """Say when the summary in the prompt is not the model's."""
    state = reads.state
    if reads.degraded is None and state.last_error:
        reads.degraded = "last compaction fell back to the offline summarizer"
        reads.notes.append(f"last compaction degraded: {state.last_error}")
    elif runtime.llm is None and state.summary_version > 0:
        reads.notes.append(NO_MODEL_NOTE)  # a choice, not a failure: degraded stays None


def _same(reader: HistoryReader) -> HistoryReader:
    return reader


def tail_reader(store: Store, scope: str, session: str) -> HistoryReader:
    """A history reader that pages the store, newest first (as raw rows when it can)."""
    if reads_rows(store):
        rows = store.history_rows

        def read_rows(limit: int, before_id: int | None) -> HistoryRows:
            return HistoryRows(*rows(scope, session, limit=limit, before_id=before_id))

        return read_rows

    def read(limit: int, before_id: int | None) -> list[Message]:
        return store.tail(scope, session, limit=limit, before_id=before_id)

    return read


def rows_reader(messages: list[Message]) -> HistoryReader:
    """A history reader over messages already read (all the candidates, oldest first)."""
    whole = rows_of(messages)  # newest first
    ids = [-row[0] for row in whole.rows]  # increasing, for bisect

    def read(limit: int, before_id: int | None) -> HistoryRows:
        start = 0 if before_id is None else bisect.bisect_left(ids, 1 - before_id)
        return HistoryRows(whole.rows[start : start + limit], whole.special)

    return read
