"""One compaction cycle with its storage I/O: load, plan, fold, commit by compare-and-set.

The pure pieces (:mod:`.planner`, :mod:`.fold`) never touch the store; this
module does, in this order::

    load state -> parse (a corrupted document resets) -> page the rows after
    the watermark -> plan -> fold (summarizer, maybe a model) -> save_state
    with expected_version (CAS) -> record the model calls' usage

The CAS makes the cycle safe when several threads or processes compact the
same session: the first commit wins; a loser discards its fold and logs it
(compare-and-set on the state version). Stored messages are only read, never written.

The planner counts the state's prompt sections (:mod:`.prompt_sections`)
exactly as the prompt will show them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from engram import telemetry
from engram.compaction.fold import fold
from engram.compaction.planner import PlanState, plan_compaction, rows_from_messages
from engram.compaction.prompt_sections import SUMMARY_TITLE, section_tokens, state_sections
from engram.compaction.state import STATE_KIND, CompactionState, fresh_state, parse_state
from engram.compaction.summarizer import Summarizer
from engram.errors import CorruptedData, StoreError
from engram.llm.client import LLMResult
from engram.models import Message
from engram.policy import Policy
from engram.store.base import MAX_PAGE, Store

log = logging.getLogger(__name__)

#: Most rows after the watermark one cycle plans over. A longer backlog (an
#: imported history, say) is folded over several cycles, oldest first, so
#: one cycle's memory and model input stay bounded.
MAX_PLAN_ROWS = 10_000
#: Version returned when the stored state cannot even be read (no CAS possible).
UNREADABLE = -1

# Why a cycle did not commit.
NOTHING_DUE = "nothing due"
SUPERSEDED = "superseded"
STATE_UNREADABLE = "state unreadable"


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a caller already read of a session, so the cycle does not read it again.

    Attributes:
        state: The compaction state as read.
        version: Its record version.
        rows: Every message after ``state.watermark``, oldest first (all of
            them: a partial read must not be passed).

    """

    state: CompactionState
    version: int
    rows: list[Message]


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one cycle did.

    Attributes:
        committed: A new state was saved by this cycle.
        reason: The trigger(s) that fired ("tokens", "messages+fold_half"...),
            "reset" (a corrupted state was replaced), or why nothing was
            committed: "nothing due", "superseded" (another writer won) or
            "state unreadable".
        watermark: The watermark now (after the commit, or as read).
        version: Version of the stored state record now (0: none saved).
        summary_version: Summary version now.
        folded: Messages folded by this cycle.
        degraded: The model failed and the offline fallback wrote the summary
            or the important data.
        notes: Human-readable remarks (fallbacks, discards).
        state: The state now (committed, or as read).
        citations_dropped: Ranges the summarizer cited outside what the fold may
            cite (dropped from the state).
        flagged_out: Messages kept out of the summary because they read like
            instructions to a model.

    """

    committed: bool
    reason: str
    watermark: int
    version: int
    summary_version: int
    folded: int = 0
    degraded: bool = False
    notes: tuple[str, ...] = ()
    state: CompactionState | None = None
    citations_dropped: int = 0
    flagged_out: int = 0


def load_compaction_state(store: Store, scope: str, session: str) -> tuple[CompactionState, int]:
    """Return the session's state and its record version (0: never saved).

    A document that is not a valid state is reset (logged by ``parse_state``);
    one the store cannot even decode gives version :data:`UNREADABLE`.
    """
    try:
        record = store.load_state(scope, session, STATE_KIND)
    except CorruptedData as exc:
        log.warning(
            "compaction state of %s/%s cannot be read (%s); using a fresh state",
            scope,
            session,
            exc,
        )
        return fresh_state().replace(reset_reason=str(exc)), UNREADABLE
    if record is None:
        return fresh_state(), 0
    return parse_state(record.data), record.version


def plan_state(
    state: CompactionState, *, extra_tokens: int = 0, citations: bool = True
) -> PlanState:
    """The planner's view of ``state``: fixed costs are ``extra_tokens`` plus important data.

    ``citations`` is the policy's: the sections are counted as the prompt shows them.
    """
    important = 0
    summary = 0
    for section in state_sections(state, citations=citations):
        if section.title == SUMMARY_TITLE:
            summary = section_tokens(section.render())
        else:
            important = section_tokens(section.render())
    return PlanState(
        watermark=state.watermark,
        summary_version=state.summary_version,
        summary_tokens=summary,
        fixed_tokens=extra_tokens + important,
    )


def unfolded(
    store: Store, scope: str, session: str, watermark: int, *, max_rows: int = MAX_PLAN_ROWS
) -> tuple[list[Message], bool]:
    """Messages after ``watermark``, oldest first, at most ``max_rows``; and whether that is all."""
    out: list[Message] = []
    after = watermark
    while len(out) < max_rows:
        want = min(MAX_PAGE, max_rows - len(out))
        page = store.page(scope, session, after_id=after, limit=want)
        out.extend(page)
        if len(page) < want:
            return out, True
        after = page[-1].id
    return out, False


def compact_session(
    store: Store,
    scope: str,
    session: str,
    policy: Policy,
    summarizer: Summarizer,
    *,
    extra_tokens: int = 0,
    now: datetime | None = None,
    loaded: Loaded | None = None,
    keep_flagged_out: bool = False,
) -> CompactionResult:
    """Run one compaction cycle of one session and commit it by compare-and-set.

    Args:
        store: Where the session lives.
        scope: The session's scope.
        session: The session id.
        policy: Triggers, keep window and summary limits.
        summarizer: Offline, or LLM with the offline fallback (never raises for
            a model failure).
        extra_tokens: Tokens of the prompt's other fixed parts (system prompt,
            long-term memories), counted by the ``tokens`` trigger.
        now: Commit time (UTC); defaults to the current time.
        loaded: The state and rows the caller already read (saves a read;
            the compare-and-set still guards against anything newer).
        keep_flagged_out: Keep messages that read like instructions to a model
            out of the summary and important data (the scope's setting).

    Returns:
        What happened; ``committed`` is False when nothing was due or another
        writer committed first (that writer's state stands).

    """
    with (
        telemetry.conversation(scope, session),
        telemetry.span("engram.compaction", {"engram.policy": policy.name}) as traced,
    ):
        result = _cycle(
            store, scope, session, policy, summarizer, extra_tokens, now, loaded, keep_flagged_out
        )
        if traced.recording:
            traced.set(
                {
                    "engram.compaction.committed": result.committed,
                    "engram.compaction.reason": result.reason,
                    "engram.compaction.folded": result.folded,
                    "engram.compaction.degraded": result.degraded,
                    "engram.compaction.summary_version": result.summary_version,
                }
            )
    return result


def _cycle(
    store: Store,
    scope: str,
    session: str,
    policy: Policy,
    summarizer: Summarizer,
    extra_tokens: int,
    now: datetime | None,
    loaded: Loaded | None,
    keep_flagged_out: bool,
) -> CompactionResult:
    if loaded is None:
        state, version = load_compaction_state(store, scope, session)
        rows = [] if version == UNREADABLE else unfolded(store, scope, session, state.watermark)[0]
        loaded = Loaded(state, version, rows)
    state, version, messages = loaded.state, loaded.version, loaded.rows
    if version == UNREADABLE:
        notes = (state.reset_reason or "",)
        return CompactionResult(False, STATE_UNREADABLE, 0, version, 0, notes=notes, state=state)
    plan = plan_compaction(
        policy,
        rows_from_messages(messages),
        plan_state(state, extra_tokens=extra_tokens, citations=policy.citations),
    )
    when = now or datetime.now(UTC)
    if plan is None:
        if state.reset_reason is None:
            return CompactionResult(
                False, NOTHING_DUE, state.watermark, version, state.summary_version, state=state
            )
        # A corrupted document and nothing to fold yet: store the fresh state so
        # the warning is not repeated on every turn.
        return _commit(store, scope, session, state, version, "reset", 0, False, ())
    wanted = set(plan.fold_ids)
    folded = [m for m in messages if m.id in wanted]
    result = fold(
        state,
        plan,
        folded,
        summarizer,
        now=when,
        summary_max_bytes=policy.summary_max_bytes,
        summary_target_bytes=policy.summary_target_bytes,
        keep_flagged_out=keep_flagged_out,
    )
    _record_usage(store, scope, session, result.usage, when)
    if result.degraded:
        log.warning("compaction of %s/%s degraded: %s", scope, session, "; ".join(result.notes))
    committed = _commit(
        store,
        scope,
        session,
        result.state,
        version,
        plan.reason,
        len(plan.fold_ids),
        result.degraded,
        result.notes,
    )
    if result.citations_dropped:
        log.info(
            "compaction of %s/%s: %d cited range(s) outside the fold dropped",
            scope,
            session,
            result.citations_dropped,
        )
    return dataclasses.replace(
        committed, citations_dropped=result.citations_dropped, flagged_out=result.flagged_out
    )


def _record_usage(
    store: Store, scope: str, session: str, calls: Sequence[LLMResult], when: datetime
) -> None:
    """Record the model calls of a fold: made (and paid for) whether or not the cycle wins."""
    for call in calls:
        try:
            store.record_usage(scope, session, call.usage_record(when))
        except StoreError as exc:
            log.warning("could not record LLM usage of %s/%s: %s", scope, session, exc)


def _commit(
    store: Store,
    scope: str,
    session: str,
    state: CompactionState,
    version: int,
    reason: str,
    folded: int,
    degraded: bool,
    notes: tuple[str, ...],
) -> CompactionResult:
    saved = store.save_state(scope, session, STATE_KIND, state.to_dict(), expected_version=version)
    if saved is None:
        log.info(
            "compaction of %s/%s discarded: another writer committed version %d first",
            scope,
            session,
            version + 1,
        )
        current, now_version = load_compaction_state(store, scope, session)
        return CompactionResult(
            False,
            SUPERSEDED,
            current.watermark,
            now_version,
            current.summary_version,
            degraded=degraded,
            notes=(*notes, "another compaction committed first; this one was discarded"),
            state=current,
        )
    # The state as stored: a backend may keep object keys in another order (jsonb), and
    # the prompt built from it now must show what later turns (and a replay) read back.
    committed = parse_state(saved.data)
    log.info(
        "compacted %s/%s (%s): %d message(s) folded, watermark %d, summary v%d",
        scope,
        session,
        reason,
        folded,
        committed.watermark,
        committed.summary_version,
    )
    return CompactionResult(
        True,
        reason,
        committed.watermark,
        saved.version,
        committed.summary_version,
        folded=folded,
        degraded=degraded,
        notes=notes,
        state=committed,
    )
