"""``engram export --format json`` and ``engram import`` speak the same document format."""

from __future__ import annotations

import json

import engram
from engram.idempotency import RECORD

from .harness import Cli


def _fill(cli: Cli) -> None:
    rows = [
        {"role": "user", "content": "We picked $14 for Pro.", "session": "s1"},
        {"role": "assistant", "content": "Noted: Pro is $14.", "session": "s1"},
        {"role": "user", "content": "Other chat.", "session": "s2"},
    ]
    assert cli("import", str(cli.write_jsonl("in.jsonl", rows)), "--scope", "p").exit_code == 0


class TestDocumentRoundTrip:
    def test_export_json_then_import_into_another_backend(self, cli: Cli) -> None:
        _fill(cli)
        out = cli.tmp / "docs.json"
        assert cli("export", "--scope", "p", "--format", "json", "-o", str(out)).exit_code == 0
        target = f"jsondir://{cli.tmp}/ctx"
        result = cli("import", str(out), url=target)
        assert result.exit_code == 0, result.output
        assert "3 messages in 2 session document(s)" in result.output
        with engram.open(cli.url, llm=None) as a, engram.open(target, llm=None) as b:
            for session in ("s1", "s2"):
                left = a.session(session, scope="p").messages()
                right = b.session(session, scope="p").messages()
                assert [(m.role, m.content, m.tokens, m.created_at) for m in left] == [
                    (m.role, m.content, m.tokens, m.created_at) for m in right
                ]

    def test_a_second_import_adds_nothing_like_jsonl(self, cli: Cli) -> None:
        _fill(cli)
        out = cli.tmp / "docs.json"
        cli("export", "--scope", "p", "--format", "json", "-o", str(out))
        with engram.open(cli.url, llm=None) as mem:
            before = {s: mem.session(s, scope="p").messages() for s in ("s1", "s2")}
        result = cli("import", str(out))  # same database: the sessions hold every message
        assert result.exit_code == 0, result.output
        assert "Imported 0 messages in 2 session document(s) (3 already there, skipped)" in (
            result.output
        )
        with engram.open(cli.url, llm=None) as mem:
            assert {s: mem.session(s, scope="p").messages() for s in ("s1", "s2")} == before

    def test_a_later_export_adds_only_its_new_messages(self, cli: Cli) -> None:
        _fill(cli)
        first = cli.tmp / "first.json"
        cli("export", "--scope", "p", "--session", "s1", "--format", "json", "-o", str(first))
        target = f"sqlite:///{cli.tmp}/other.db"
        assert cli("import", str(first), url=target).exit_code == 0
        with engram.open(cli.url, llm=None) as mem:
            mem.session("s1", scope="p").add("user", "And the launch date?")
        later = cli.tmp / "later.json"
        cli("export", "--scope", "p", "--session", "s1", "--format", "json", "-o", str(later))
        result = cli("import", str(later), url=target)
        assert "Imported 1 messages in 1 session document(s) (2 already there" in result.output
        with engram.open(target, llm=None) as mem:
            contents = [m.content for m in mem.session("s1", scope="p").messages()]
        assert contents == ["We picked $14 for Pro.", "Noted: Pro is $14.", "And the launch date?"]

    def test_jsonl_and_json_exports_of_keyed_messages_import_again(self, cli: Cli) -> None:
        with engram.open(cli.url, llm=None) as mem:
            mem.session("s", scope="p").add_many(
                [{"role": "user", "content": "hi", "metadata": {"lang": "en"}}],
                idempotency_key="turn-1",
            )
        for fmt in ("jsonl", "json"):
            out = cli.tmp / f"out.{fmt}"
            assert cli("export", "--scope", "p", "--format", fmt, "-o", str(out)).exit_code == 0
            assert RECORD not in out.read_text() and '"lang"' in out.read_text()
            target = f"sqlite:///{cli.tmp}/{fmt}.db"
            for _ in range(2):
                result = cli("import", str(out), "--scope", "p", url=target)
                assert result.exit_code == 0, result.output
            with engram.open(target, llm=None) as mem:
                [message] = mem.session("s", scope="p").messages()
                assert message.metadata["lang"] == "en" and RECORD not in message.metadata

    def test_a_bad_document_anywhere_writes_nothing(self, cli: Cli) -> None:
        _fill(cli)
        out = cli.tmp / "docs.json"
        cli("export", "--scope", "p", "--format", "json", "-o", str(out))
        docs = json.loads(out.read_text())
        docs[-1]["recent_history"][0]["role"] = "robot"
        out.write_text(json.dumps(docs))
        target = f"sqlite:///{cli.tmp}/other.db"
        result = cli("import", str(out), url=target)
        assert result.exit_code == 1 and "document #1" in result.output
        with engram.open(target, llm=None) as mem:
            assert mem.sessions() == []

    def test_scope_option_overrides_the_documents_scope(self, cli: Cli) -> None:
        _fill(cli)
        out = cli.tmp / "docs.json"
        cli("export", "--scope", "p", "--session", "s1", "--format", "json", "-o", str(out))
        target = f"sqlite:///{cli.tmp}/other.db"
        assert cli("import", str(out), "--scope", "q", url=target).exit_code == 0
        with engram.open(target, llm=None) as mem:
            assert mem.session("s1", scope="q").stats()["total_messages"] == 2
