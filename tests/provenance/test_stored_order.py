"""A turn that runs a compaction shows the state as stored, so it replays byte for byte.

PostgreSQL's jsonb keeps object keys in an order of its own: a prompt built
from the state before it was stored would show them in another order than
every later turn and the replay, which read it back.
"""

from __future__ import annotations

from engram.engine import Engram
from engram.provenance.digest import canonical

QUICK = {
    "name": "quick",
    "summarize_over_tokens": 200,
    "keep_tokens": 50,
    "max_window_tokens": 400,
    "sync_compaction": True,
}
#: Preferences whose keys (language, theme, stated, format) jsonb would sort otherwise.
SAID = [
    "I prefer answers in French.",
    "I prefer dark mode.",
    "Please always use metric units.",
    "I like concise bullet points.",
]


def test_the_turns_that_run_a_compaction_replay(mem: Engram) -> None:
    chat = mem.session("prefs", "p", policy=QUICK)
    sent = []
    for text in SAID:
        chat.add("user", text + " Some more words about the plan." * 6)
        sent.append(chat.context(2000, system="Be brief.").messages)
        chat.add("assistant", "Noted. " + "Understood, that works. " * 8)
    state = chat.compaction_state()
    assert len(state.important_data["user_preferences"]) >= 3  # the case this is about
    for number, messages in enumerate(sent, start=1):
        replayed = chat.prompt(number)
        assert replayed.verified, (number, replayed.mismatch)
        assert canonical(replayed.messages) == canonical(messages)
    shown = [n for n, m in enumerate(sent, 1) if "IMPORTANT DATA" in str(m[1].get("content"))]
    assert shown  # a turn ran the compaction and showed its important data
