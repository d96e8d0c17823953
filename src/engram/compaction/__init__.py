"""Compaction: when to fold old messages, and how to summarize what was folded.

Pure planning (:mod:`.planner`), summarizers (:mod:`.summarizer`: offline
extractive and LLM), important data (:mod:`.important`), the stored state
(:mod:`.state`), one cycle without storage (:mod:`.fold`), the size
limits of the exchanges preset (:mod:`.exchange_sizes`).
"""

from engram.compaction.exchange_sizes import answer_view, compress_summary
from engram.compaction.fold import FoldResult, fold
from engram.compaction.important import (
    EXTRACTION_PROMPT,
    extract_offline,
    merge_important_data,
    normalize_url,
    validate_important_data,
)
from engram.compaction.planner import (
    CompactionPlan,
    PlanState,
    Row,
    plan_compaction,
    rows_from_messages,
    should_compact,
)
from engram.compaction.state import STATE_KIND, CompactionState, parse_state
from engram.compaction.summarizer import (
    SUMMARY_PROMPT,
    ImportantOutput,
    LLMSummarizer,
    OfflineSummarizer,
    Summarizer,
    SummaryOutput,
)
from engram.compaction.words import target_words

__all__ = [
    "EXTRACTION_PROMPT",
    "STATE_KIND",
    "SUMMARY_PROMPT",
    "CompactionPlan",
    "CompactionState",
    "FoldResult",
    "ImportantOutput",
    "LLMSummarizer",
    "OfflineSummarizer",
    "PlanState",
    "Row",
    "Summarizer",
    "SummaryOutput",
    "answer_view",
    "compress_summary",
    "extract_offline",
    "fold",
    "merge_important_data",
    "normalize_url",
    "parse_state",
    "plan_compaction",
    "rows_from_messages",
    "should_compact",
    "target_words",
    "validate_important_data",
]
