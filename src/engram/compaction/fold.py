"""One compaction cycle, minus storage: summarize, extract, merge, compress, new state.

The engine does the I/O around it::

    record = store.load_state(scope, session, STATE_KIND)
    state = parse_state(record.data if record else None)
    plan = plan_compaction(policy, rows_after_watermark, PlanState(...))
    if plan:
        result = fold(state, plan, folded_messages, summarizer, now=now, policy=policy)
        store.save_state(scope, session, STATE_KIND, result.state.to_dict(),
                         expected_version=record.version if record else 0)  # CAS
        for call in result.usage: store.record_usage(scope, session, call.usage_record())

Nothing here raises for a model failure: the summarizer falls back to the
offline one, and ``degraded`` / ``notes`` say so: a failing model never fails the turn.

Citations: the summarizer reads the previous summary as cited text and writes
cited text; what it cites must be a folded message or something the previous
state already cited. Other ranges are dropped and counted
(``FoldResult.citations_dropped``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engram.compaction import data_cites
from engram.compaction.citations import Cites, check_ranges, parse_cited, union
from engram.compaction.exchange_sizes import compress_summary
from engram.compaction.guard import bound_important, extract_safely, summarize_safely
from engram.compaction.important import merge_important_data
from engram.compaction.planner import CompactionPlan
from engram.compaction.state import CompactionState
from engram.compaction.summarizer import OFFLINE_NAME, LLMSummarizer, Summarizer
from engram.compaction.transcript import MessageLike, as_openai, message_id, text_of
from engram.errors import ConfigError
from engram.flags import flags
from engram.llm.client import LLMResult
from engram.models import Message


@dataclass(frozen=True, slots=True)
class FoldResult:
    """The state to commit, the model calls to record, and what went wrong (if anything).

    ``citations_dropped`` counts the ranges the summarizer cited outside what
    the fold may cite (left out of the state); ``flagged_out`` the messages kept
    from the summarizer because they read like instructions to a model.
    """

    state: CompactionState
    usage: tuple[LLMResult, ...]
    degraded: bool
    notes: tuple[str, ...]
    citations_dropped: int = 0
    flagged_out: int = 0


def fold(
    state: CompactionState,
    plan: CompactionPlan,
    messages: Sequence[MessageLike],
    summarizer: Summarizer,
    *,
    now: datetime,
    summary_max_bytes: int | None = None,
    summary_target_bytes: int | None = None,
    keep_flagged_out: bool = False,
) -> FoldResult:
    """Fold ``messages`` (exactly the plan's ``fold_ids``) into ``state``.

    Args:
        state: The current state (the one the plan was made from).
        plan: From :func:`~engram.compaction.planner.plan_compaction`.
        messages: The messages to fold, oldest first.
        summarizer: Offline or LLM summarizer.
        now: Commit time (UTC).
        summary_max_bytes: Compress the summary when over this.
        summary_target_bytes: ... down to this.
        keep_flagged_out: Leave out of the summarizer's input the messages that read
            like instructions to a model (:func:`engram.flags.flags`); they stay
            stored and searchable, and the watermark passes them.

    Raises:
        ConfigError: ``messages`` do not match the plan (a caller bug).

    """
    ids = tuple(message_id(m) for m in messages)
    if None not in ids and ids != plan.fold_ids:
        raise ConfigError(
            f"fold got messages {ids[:5]}... but the plan folds {plan.fold_ids[:5]}..."
        )
    kept = (
        [m for m in messages if not flags(text_of(as_openai(m)))] if keep_flagged_out else messages
    )
    flagged_out = len(messages) - len(kept)
    if not kept and messages:
        return _passed(state, plan, now, flagged_out, messages)
    messages = kept
    notes: list[str] = []
    summary = summarize_safely(
        summarizer,
        messages,
        previous_summary=state.cited_summary() or None,
        version=plan.next_version,
    )
    important = extract_safely(summarizer, messages)
    usage = [*summary.usage, *important.usage]
    for output in (summary.fallback_reason, important.fallback_reason):
        if output:
            notes.append(f"model failed, offline fallback used: {output}")
    text = summary.text
    compressions = state.compressions
    rewritten = False  # by a model compressing the summary
    if summary_max_bytes is not None and summary_target_bytes is not None:
        client = summarizer.client if isinstance(summarizer, LLMSummarizer) else None
        compressed = compress_summary(
            text, max_bytes=summary_max_bytes, target_bytes=summary_target_bytes, client=client
        )
        usage.extend(compressed.usage)
        if compressed.method != "none":
            text = compressed.text
            compressions += 1
            rewritten = compressed.method.startswith("llm")
        if compressed.fallback_reason:
            notes.append(
                f"summary compression fell back to truncation: {compressed.fallback_reason}"
            )
    allowed = {i for i in ids if i is not None}
    earlier = union(*state.summary_cites, data_cites.every_cite(state.important_cites))
    paragraphs, dropped = _checked_paragraphs(text, allowed, earlier)
    new_cites, lost = data_cites.check(important.cites, allowed, earlier)
    merged = bound_important(merge_important_data(state.important_data, important.data))
    degraded = bool(notes)
    new_state = state.replace(
        summary="\n\n".join(p for p, _ in paragraphs) if paragraphs else text.strip(),
        summary_cites=tuple(c for _, c in paragraphs),
        important_data=merged,
        important_cites=data_cites.merge(state.important_cites, new_cites, merged),
        covers_from=_first(state, messages),
        covers_until=_last(state, messages),
        exact_cites=(state.exact_cites or state.summary_version == 0)
        and summary.summarizer == OFFLINE_NAME
        and important.summarizer == OFFLINE_NAME
        and not rewritten,
        summary_version=plan.next_version,
        watermark=plan.new_watermark,
        messages_summarized_count=state.messages_summarized_count + len(plan.fold_ids),
        summarizer=summary.summarizer,
        last_summarized_at=now,
        compactions=state.compactions + 1,
        llm_failures=state.llm_failures + (1 if degraded else 0),
        compressions=compressions,
        last_error=notes[-1] if notes else None,
        reset_reason=None,
    )
    return FoldResult(new_state, tuple(usage), degraded, tuple(notes), dropped + lost, flagged_out)


def _times(messages: Sequence[MessageLike]) -> list[datetime]:
    return [m.created_at for m in messages if isinstance(m, Message)]


def _first(state: CompactionState, messages: Sequence[MessageLike]) -> datetime | None:
    """When the summary's first message was written (kept from earlier versions)."""
    if state.covers_from is not None and state.summary_version > 0:
        return state.covers_from
    return min(_times(messages), default=None)


def _last(state: CompactionState, messages: Sequence[MessageLike]) -> datetime | None:
    """When the newest folded message was written."""
    return max(_times(messages), default=state.covers_until)


def _passed(
    state: CompactionState,
    plan: CompactionPlan,
    now: datetime,
    flagged: int,
    messages: Sequence[MessageLike],
) -> FoldResult:
    """Every folded message was kept out: the state only moves its watermark past them."""
    moved = state.replace(
        covers_from=_first(state, messages),
        covers_until=_last(state, messages),
        watermark=plan.new_watermark,
        messages_summarized_count=state.messages_summarized_count + len(plan.fold_ids),
        summary_version=max(state.summary_version, 1) if state.summary else state.summary_version,
        last_summarized_at=now,
        compactions=state.compactions + 1,
        reset_reason=None,
    )
    return FoldResult(moved, (), False, (), 0, flagged)


def _checked_paragraphs(
    text: str, allowed: set[int], earlier: Cites
) -> tuple[list[tuple[str, Cites]], int]:
    """The summary's paragraphs with only the ranges they may cite, and how many were dropped."""
    out: list[tuple[str, Cites]] = []
    dropped = 0
    for paragraph, cites in parse_cited(text):
        kept, lost = check_ranges(cites, allowed, earlier)
        dropped += lost
        out.append((paragraph, kept))
    return out, dropped
