"""The compaction state's prompt sections, read from the sections package.

The titles, the sections and their sizes are
:mod:`engram.compaction.prompt_sections`'s (the compaction cycle plans with
them, and compaction never imports ``sections``); this module names them here
for code that looks for every section under :mod:`engram.sections`.
"""

from __future__ import annotations

from engram.compaction.prompt_sections import (
    IMPORTANT_TITLE,
    SECTION_LABELS,
    SUMMARY_TITLE,
    section_label,
    section_tokens,
    sections_tokens,
    state_sections,
)

__all__ = [
    "IMPORTANT_TITLE",
    "SECTION_LABELS",
    "SUMMARY_TITLE",
    "section_label",
    "section_tokens",
    "sections_tokens",
    "state_sections",
]
