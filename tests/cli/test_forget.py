"""``engram forget``: each deletion prints its receipt (or JSON), never the forgotten text."""

from __future__ import annotations

import json

import engram

from .harness import Cli

SECRET = "my locker code is 4471"


def _seed(cli: Cli) -> list[int]:
    with engram.open(cli.url) as mem:
        chat = mem.session("s", scope="p")
        stored = chat.add_many(
            [
                {"role": "user", "content": f"Note: {SECRET}."},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "Thanks."},
            ]
        )
        mem.memories("p").create("The user works nights.")
    return [m.id for m in stored]


def test_forget_a_message_prints_the_receipt(cli: Cli) -> None:
    ids = _seed(cli)
    result = cli("forget", "message", str(ids[0]), "--scope", "p")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("delete in p/s: 1 message(s)")
    assert f"messages: #{ids[0]}" in result.output and "search_index" in result.output
    assert "4471" not in result.output
    again = cli("forget", "message", str(ids[0]), "--scope", "p")
    assert again.exit_code == 1 and f"no message {ids[0]} in scope 'p'" in again.output


def test_forget_a_session_a_memory_and_a_scope_as_json(cli: Cli) -> None:
    _seed(cli)
    cleared = json.loads(cli("forget", "session", "s", "--scope", "p", "--json").output)
    assert cleared["action"] == "clear" and cleared["message_count"] == 3
    with engram.open(cli.url) as mem:
        (memory,) = mem.memories("p").list()
    gone = json.loads(cli("forget", "memory", str(memory.id), "--scope", "p", "--json").output)
    assert gone["derived"][0] == {
        "kind": "memory",
        "ref": f"memory {memory.id}",
        "outcome": "removed",
        "detail": "the scope's next prompts are built without it",
    }
    refused = cli("forget", "scope", "p")
    assert refused.exit_code == 2 and "--yes" in refused.output
    forgotten = json.loads(cli("forget", "scope", "p", "--yes", "--json").output)
    assert forgotten["counts"] == {"sessions": 1, "messages": 0, "memories": 0}
    missing = cli("forget", "session", "s", "--scope", "p")
    assert missing.exit_code == 1 and "no session 's' in scope 'p'" in missing.output


def test_delete_a_session_purge_memories_and_a_scope_keeping_its_audit(cli: Cli) -> None:
    ids = _seed(cli)
    both = cli("forget", "session", "s", "--scope", "p", "--delete", "--rebuild")
    assert both.exit_code == 2 and "--rebuild" in both.output
    deleted = cli("forget", "session", "s", "--scope", "p", "--delete")
    assert deleted.exit_code == 0, deleted.output
    assert deleted.output.startswith("delete_session in p/s: 1 sessions, 3 messages")
    assert f"messages: #{ids[0]}-#{ids[-1]}" in deleted.output and "4471" not in deleted.output
    assert "memory" in deleted.output and "unchanged" in deleted.output  # memories stay
    missing = cli("forget", "session", "s", "--scope", "p", "--delete")
    assert missing.exit_code == 1 and "no session 's' in scope 'p'" in missing.output
    refused = cli("forget", "memories", "--scope", "p")
    assert refused.exit_code == 2 and "--yes" in refused.output
    purged = json.loads(cli("forget", "memories", "--scope", "p", "--yes", "--json").output)
    assert purged["action"] == "memory_purge" and purged["counts"] == {"memories": 1}
    _seed(cli)
    kept = json.loads(cli("forget", "scope", "p", "--yes", "--keep-audit", "--json").output)
    assert kept["action"] == "purge_scope"
    assert kept["counts"] == {"sessions": 1, "messages": 3, "memories": 1}
    with engram.open(cli.url) as mem:
        events = [e["event"] for e in mem.memories("p").audit(limit=1000)]
    assert "scope_purged" in events and "purge" in events  # the trail stays
