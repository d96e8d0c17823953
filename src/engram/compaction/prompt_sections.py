"""The compaction state in the prompt: important data, then the conversation summary.

Section titles and order follow the summary-buffer design: system prompt,
long-term memories, important data, summary, recent messages. Sizes are
counted here once (cached), so the compaction planner counts exactly what
the prompt will show. It lives in ``compaction/`` because the cycle plans with
these sizes; prompt assembly shows the sections.
"""

from __future__ import annotations

from functools import lru_cache

from engram.compaction.important import to_prompt_text
from engram.compaction.state import CompactionState
from engram.context import Section
from engram.tokens import count_message, storage_counter

#: Section titles, in prompt order (memories come before them).
IMPORTANT_TITLE = "IMPORTANT DATA FROM PREVIOUS CONVERSATIONS"
SUMMARY_TITLE = "CONVERSATION SUMMARY"
#: What a person is shown instead of a title the model reads: the important data
#: comes from earlier in this same conversation.
SECTION_LABELS = {IMPORTANT_TITLE: "IMPORTANT DATA FROM EARLIER IN THIS CONVERSATION"}


def section_label(title: str) -> str:
    """How the section titled ``title`` is named to a person (the prompt keeps ``title``)."""
    return SECTION_LABELS.get(title, title)


def state_sections(state: CompactionState) -> list[Section]:
    """The important-data and summary sections of a state, in prompt order (blank ones left out)."""
    out: list[Section] = []
    important = to_prompt_text(state.important_data)
    if important != "{}":
        out.append(Section(IMPORTANT_TITLE, important))
    if state.summary.strip():
        out.append(Section(SUMMARY_TITLE, state.summary))
    return out


@lru_cache(maxsize=512)
def section_tokens(text: str) -> int:
    """Exact size (storage encoding) of a system message carrying ``text``."""
    return count_message(storage_counter(), "system", text)


def sections_tokens(sections: list[Section]) -> int:
    """Exact size of sections as the prompt shows them."""
    return sum(section_tokens(s.render()) for s in sections if s.text.strip())
