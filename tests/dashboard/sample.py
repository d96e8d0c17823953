"""Data for the dashboard's tests and screenshots, written through the library only.

Project ``phoenix``: the bundled sample conversation replayed turn by turn
under ``summary_buffer`` (each user turn asks for its prompt, so the prompt
log and the offline summaries fill up), a short conversation with a tool
call and its result, and long-term memories past a cap of 3 (so FIFO
compaction decisions land in the audit trail). Project ``atlas``: one small
conversation and one memory, for the isolation checks.
"""

from __future__ import annotations

from engram.cli.demo import SAMPLE_FILE, sample_bytes
from engram.engine import Engram
from engram.transfer.importers import parse_jsonl

SCOPE = "phoenix"
OTHER_SCOPE = "atlas"
LAUNCH = "phoenix-launch"
TOOLS = "vendor-check"
BUDGET = 2000
SYSTEM = "You are Phoenix's launch assistant."

MEMORIES = (
    "Phoenix launches on Tuesday April 8; Maya owns the launch.",
    "Launch pricing: Team plan at $12 per seat per month, annual discount 20%.",
    "Daniel Okafor leads engineering; the beta freeze is March 24.",
    "Priya Raman runs marketing; the press embargo lifts at 9:00 ET on launch day.",
)


def fill(mem: Engram) -> None:
    """Write both projects (see the module docstring)."""
    _replay_sample(mem)
    _tool_conversation(mem)
    memories = mem.memories(SCOPE)
    for text in MEMORIES:
        memories.create(text, source_session=LAUNCH)
    other = mem.session("roadmap", scope=OTHER_SCOPE)
    other.add("user", "Atlas roadmap: the mobile release is planned for June.")
    other.add("assistant", "Noted: Atlas mobile release in June.")
    other.context(BUDGET, system=SYSTEM)
    mem.memories(OTHER_SCOPE).create("Atlas mobile release is planned for June.")


def _replay_sample(mem: Engram) -> None:
    chat = mem.session(LAUNCH, scope=SCOPE, policy="summary_buffer")
    for batch in parse_jsonl(sample_bytes(), file=SAMPLE_FILE):
        for message in batch.messages:
            chat.add_many([message])
            if message["role"] == "user":
                chat.context(BUDGET, system=SYSTEM)


def _tool_conversation(mem: Engram) -> None:
    chat = mem.session(TOOLS, scope=SCOPE)
    chat.add("user", "Did the payment vendor confirm the launch-day capacity?")
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "search_history", "arguments": '{"query": "vendor capacity"}'},
    }
    chat.add("assistant", None, tool_calls=[call])
    chat.add(
        "tool",
        '{"results": [{"id": 12, "snippet": "vendor confirmed 3x capacity for launch day"}]}',
        tool_call_id="call_1",
    )
    chat.add("assistant", "Yes: the vendor confirmed three times the usual capacity on launch day.")
    chat.context(BUDGET, system=SYSTEM)
