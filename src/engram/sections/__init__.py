"""What a policy adds to the prompt besides the recent messages, one module each.

* :mod:`.summary`: important data and the conversation summary (every policy
  that compacts);
* :mod:`.tool_cache`: cached tool results (exchange-window policies);
* :mod:`.agent_state`: the agent state (policies with the agent-state rules);
* :mod:`.exchanges`: finished exchanges shown as question and answer only;
* :mod:`.answer_views`: long answers shown as short views.

The registries below are the one place a policy's extras are chosen:
:func:`providers_for`, :func:`filters_for` and :func:`views_for` return those
that apply to a policy, in prompt order.
"""

from __future__ import annotations

from engram.policy import Policy
from engram.sections.agent_state import AgentStateSection
from engram.sections.answer_views import AnswerViews
from engram.sections.base import RowFilter, RowViews, SectionProvider
from engram.sections.exchanges import ExchangeSteps
from engram.sections.tool_cache import ToolCacheSection

__all__ = [
    "FILTERS",
    "PROVIDERS",
    "VIEWS",
    "RowFilter",
    "RowViews",
    "SectionProvider",
    "filters_for",
    "providers_for",
    "views_for",
]

#: Section providers, in the order their sections follow the summary.
PROVIDERS: tuple[SectionProvider, ...] = (ToolCacheSection(), AgentStateSection())
#: Row filters, applied in order.
FILTERS: tuple[RowFilter, ...] = (ExchangeSteps(),)
#: Row views (a message shown by the first view that has one for it).
VIEWS: tuple[RowViews, ...] = (AnswerViews(),)


def providers_for(policy: Policy) -> list[SectionProvider]:
    """The section providers ``policy`` uses, in prompt order."""
    return [p for p in PROVIDERS if p.applies(policy)]


def filters_for(policy: Policy) -> list[RowFilter]:
    """The row filters ``policy`` uses."""
    return [f for f in FILTERS if f.applies(policy)]


def views_for(policy: Policy) -> list[RowViews]:
    """The row views ``policy`` uses."""
    return [v for v in VIEWS if v.applies(policy)]
