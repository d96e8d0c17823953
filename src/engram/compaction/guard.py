"""What a summarizer hands back is untrusted: clean it, bound it, or replace it.

A model (or a user-supplied summarizer) may answer with NUL characters, lone
surrogates, megabytes of text or pathological JSON. :func:`summarize_safely`
and :func:`extract_safely` return output the store can hold and the prompt can
show: text cleaned (:func:`engram.intake.checks.clean_text`), a summary of at most
:data:`MAX_SUMMARY_CHARS`, important data of at most
:data:`MAX_IMPORTANT_BYTES` as JSON. Output that is unusable (empty, far too
long, or a summarizer that raised) is replaced by the offline summarizer's,
with the reason in ``fallback_reason`` so the turn's context says so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engram.compaction.important import DICT_KEYS, LIST_KEYS, validate_important_data
from engram.compaction.summarizer import (
    ImportantOutput,
    OfflineSummarizer,
    Summarizer,
    SummaryOutput,
)
from engram.compaction.transcript import MessageLike
from engram.errors import EngramError
from engram.intake.checks import clean_json, clean_text, is_clean
from engram.models import JSON

log = logging.getLogger(__name__)

#: Longest summary kept, in characters (the largest preset asks for 750 words).
MAX_SUMMARY_CHARS = 16_000
#: Largest important-data document kept, as JSON in UTF-8 bytes (oldest items go first).
MAX_IMPORTANT_BYTES = 32_768

_OFFLINE = OfflineSummarizer()


def summarize_safely(
    summarizer: Summarizer,
    messages: Sequence[MessageLike],
    *,
    previous_summary: str | None,
    version: int,
) -> SummaryOutput:
    """The summarizer's summary if usable, else the offline one with the reason."""
    try:
        output = summarizer.summarize(messages, previous_summary=previous_summary, version=version)
        problem = _summary_problem(output.text)
    except (EngramError, RecursionError, ValueError, TypeError) as exc:
        output, problem = (
            SummaryOutput(text="", summarizer=summarizer.name),
            f"it raised {exc!r:.200}",
        )
    if problem is None:
        if is_clean(output.text):
            return output
        return replace(output, text=clean_text(output.text))
    log.warning(
        "summary by %s is unusable (%s); using the offline summarizer", summarizer.name, problem
    )
    offline = _OFFLINE.summarize(messages, previous_summary=previous_summary, version=version)
    return SummaryOutput(
        text=clean_text(offline.text)[:MAX_SUMMARY_CHARS],
        summarizer=offline.summarizer,
        usage=output.usage,
        fallback_reason=f"the summary was unusable: {problem}",
    )


def _summary_problem(text: object) -> str | None:
    if not isinstance(text, str):
        return f"not text ({type(text).__name__})"
    if not text.strip():
        return "empty"
    if len(text) > MAX_SUMMARY_CHARS:
        return f"{len(text)} characters, the limit is {MAX_SUMMARY_CHARS}"
    return None


def extract_safely(summarizer: Summarizer, messages: Sequence[MessageLike]) -> ImportantOutput:
    """The summarizer's important data, cleaned and bounded; offline rules if it raised."""
    try:
        output = summarizer.extract_important(messages)
        data = validate_important_data(clean_json(output.data))
    except (EngramError, RecursionError, ValueError, TypeError) as exc:
        log.warning(
            "important data by %s is unusable (%r); using offline rules", summarizer.name, exc
        )
        offline = _OFFLINE.extract_important(messages)
        return ImportantOutput(
            data=bound_important(offline.data),
            summarizer=offline.summarizer,
            fallback_reason=f"the important data was unusable: {exc!r:.200}",
        )
    return replace(output, data=bound_important(data))


def bound_important(data: JSON) -> JSON:
    """``data`` with the oldest list items and object keys dropped until it fits the limit."""
    if _size(data) <= MAX_IMPORTANT_BYTES:
        return data
    out: JSON = {key: _copy(value) for key, value in data.items()}
    while _size(out) > MAX_IMPORTANT_BYTES:
        largest = max(
            (key for key in (*LIST_KEYS, *DICT_KEYS) if out.get(key)),
            key=lambda key: _size(out[key]),
            default=None,
        )
        if largest is None:
            break
        value = out[largest]
        if isinstance(value, list):
            del value[: max(1, len(value) // 4)]
        elif isinstance(value, dict):
            for key in list(value)[: max(1, len(value) // 4)]:
                del value[key]
        else:
            out[largest] = [] if largest in LIST_KEYS else {}
    return out


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value)) if isinstance(value, dict | list) else value


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))
