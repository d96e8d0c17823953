"""What the prompt archive keeps: recent recipes, the versions and texts they name, and no
summary of a deleted message; a replay whose parts went says so."""

from __future__ import annotations

from engram.engine import Engram
from engram.provenance import retention
from engram.store.base import archives_prompts

QUICK = {"name": "quick", "summarize_over_tokens": 120, "keep_tokens": 40,
         "max_window_tokens": 300, "sync_compaction": True}  # fmt: skip


def _turns(mem: Engram, count: int) -> list[int]:
    chat = mem.session("s", "p", policy=QUICK)
    for i in range(count):
        chat.add("user", f"Question {i}: what about item {i} of the launch checklist? " * 3)
        chat.context(1000, system=f"System prompt {i % 2}.")
        chat.add("assistant", f"Answer {i}: item {i} is done and signed off. " * 3)
    mem.runtime.prompts.flush()
    return [t.turn for t in chat.prompts(limit=1000)]


def test_pruning_keeps_recent_recipes_and_what_they_name(mem: Engram) -> None:
    assert _turns(mem, 14) == list(range(1, 15))
    store = mem.runtime.store
    assert archives_prompts(store)
    chat = mem.session("s", "p")
    named = {p["version"] for m in chat.prompt(12).recipe["head"] for p in m if "version" in p}
    current = store.load_state("p", "s", "compaction")
    assert current is not None and current.version > retention.KEEP_VERSIONS + 2
    retention.prune(store, "p", "s", keep_turns=3)
    assert [t.turn for t in chat.prompts()] == [12, 13, 14]
    for turn in (12, 13, 14):
        assert chat.prompt(turn).verified
    for version in named:
        assert store.load_state_version("p", "s", "compaction", version) is not None
    assert store.load_state_version("p", "s", "compaction", 1) is None  # named by nobody now
    newest = range(current.version - retention.KEEP_VERSIONS, current.version)
    assert all(store.load_state_version("p", "s", "compaction", v) for v in newest)


def test_a_deleted_message_takes_the_summaries_that_covered_it(mem: Engram) -> None:
    _turns(mem, 10)
    chat = mem.session("s", "p")
    turn = next(t.turn for t in chat.prompts() if "version" in str(chat.prompt(t.turn).recipe))
    assert chat.prompt(turn).verified
    first = chat.messages(limit=1)[0]
    chat.delete_message(first.id)
    replayed = chat.prompt(turn)
    assert replayed.messages is None and not replayed.verified
    assert any("of the compaction state was pruned" in m for m in replayed.missing)
    event = mem.memories("p").audit(5)[0]
    assert event["summary_versions_dropped"] >= 1
