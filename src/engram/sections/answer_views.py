"""Long assistant answers shown as short views in the prompt; the stored answers stay whole."""

from __future__ import annotations

from engram.compaction.exchange_sizes import answer_view, needs_view
from engram.models import Message
from engram.policy import Policy


class AnswerViews:
    """Answers over ``answer_over_bytes`` are shown as ``answer_view_bytes`` views."""

    name = "answer_views"

    def applies(self, policy: Policy) -> bool:
        """Policies that set both sizes."""
        return policy.answer_over_bytes is not None and policy.answer_view_bytes is not None

    def views(self, rows: list[Message], policy: Policy) -> dict[int, str]:
        """A view for each long assistant answer among ``rows``."""
        over, view = policy.answer_over_bytes, policy.answer_view_bytes
        if over is None or view is None:
            return {}
        return {
            m.id: answer_view(m.content, m.id, over_bytes=over, view_bytes=view)
            for m in rows
            if m.role == "assistant" and m.content and needs_view(m.content, over)
        }
