"""Store a benchmark conversation, and find what each stored message is."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from benchmarks.retrieval.corpus import Conversation
from engram.models import NewMessage

#: The session holding the asked questions (first corpus only).
ASKING = "asking"


@dataclass
class Loaded:
    """A stored conversation: evidence key -> id, each question's id, each id's session and text."""

    conv: Conversation
    keys: dict[str, int] = field(default_factory=dict)
    question_ids: list[int | None] = field(default_factory=list)
    session_of: dict[int, str] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)

    def evidence(self, number: int) -> set[int]:
        """The ids of the evidence turns of question ``number``."""
        return {self.keys[k] for k in self.conv.questions[number].evidence}


def load(store: Any, conv: Conversation, *, ask: bool) -> Loaded:
    """Store ``conv``'s sessions, then (with ``ask``) its questions as a real turn stores them.

    With ``ask``, each question is stored in the session ``asking``, followed by
    an assistant tool call of ``search_history`` and its result quoting the
    question: the traps a real question meets (its own text, earlier
    questions, earlier tool results).
    """
    out = Loaded(conv)
    by_session: dict[str, list[Any]] = {}
    for turn in conv.turns:
        by_session.setdefault(turn.session, []).append(turn)
    first, _ = conv.people
    for session, turns in by_session.items():
        batch = [
            NewMessage(
                role="user" if t.speaker == first else "assistant",
                content=t.text,
                created_at=t.at,
                name=t.speaker if conv.named else None,
            )
            for t in turns
        ]
        stored = store.append(conv.scope, session, batch, [10] * len(batch))
        for turn, message in zip(turns, stored, strict=True):
            out.session_of[message.id] = session
            out.texts[message.id] = message.content
            if turn.key:
                out.keys[turn.key] = message.id
    for number, question in enumerate(conv.questions):
        if not ask:
            out.question_ids.append(None)
            continue
        call_id = f"call{number}"
        result = json.dumps({"query": question.text, "results": [{"snippet": question.text}]})
        call = {"id": call_id, "type": "function",
                "function": {"name": "search_history", "arguments": "{}"}}  # fmt: skip
        batch = [
            NewMessage("user", question.text, question.asked_at),
            NewMessage("assistant", "", question.asked_at, tool_calls=[call]),
            NewMessage("tool", result, question.asked_at, tool_call_id=call_id),
        ]
        stored = store.append(conv.scope, ASKING, batch, [10, 10, 10])
        out.session_of.update((m.id, ASKING) for m in stored)
        out.texts.update((m.id, m.content) for m in stored)
        out.question_ids.append(stored[0].id)
    return out


__all__ = ["ASKING", "Loaded", "load"]
