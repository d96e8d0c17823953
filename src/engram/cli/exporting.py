"""``engram export``: write a session (or a whole scope) out as JSON or JSONL.

* ``--format jsonl``: one OpenAI-format message per line, with ``session``,
  ``created_at`` and ``metadata``: exactly what ``engram import`` reads back.
* ``--format json``: one JSON document per session, the full-fidelity format of
  :func:`engram.transfer.documents.export_session` (messages under ``recent_history``,
  plus policy and session state); a scope-wide export is a JSON list of them.

With ``-o FILE`` the output is written to a temporary file beside it and renamed
into place at the end, so a failed export never leaves a half-written file.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import click

from engram.cli._common import db_option, open_engram, scope_option
from engram.engine import Engram
from engram.idempotency import without_record
from engram.models import JSON, Message

#: Messages read per round trip while exporting (memory stays flat on big sessions).
EXPORT_PAGE = 500

#: Sessions listed per round trip for a scope-wide export.
SESSION_PAGE = 100


@click.command("export")
@scope_option
@click.option("--session", "session", metavar="ID", help="Export one session (default: all).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "jsonl"]),
    default="json",
    show_default=True,
    help="json: one document per session; jsonl: OpenAI messages, one per line.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File to write (default: stdout).",
)
@db_option
@click.pass_context
def export_command(
    ctx: click.Context,
    scope: str,
    session: str | None,
    fmt: str,
    output: Path | None,
    db: str | None,
) -> None:
    """Export messages of a session or a whole scope as JSON documents or JSONL."""
    mem = open_engram(ctx, db)
    if session is not None:
        mem.require_session(session, scope)
    sessions = [session] if session is not None else list(_session_ids(mem, scope))
    with _destination(output) as out:
        if fmt == "jsonl":
            count = _write_jsonl(mem, scope, sessions, out)
        else:
            count = _write_documents(mem, scope, sessions, out, single=session is not None)
    if output is not None:
        click.echo(f"Exported {count} messages from {len(sessions)} session(s) to {output}.")


def _session_ids(mem: Engram, scope: str) -> Iterator[str]:
    offset = 0
    while True:
        page = mem.sessions(scope, limit=SESSION_PAGE, offset=offset)
        # Oldest-updated last in the listing; export in a stable, readable order instead.
        yield from sorted(info.id for info in page)
        if len(page) < SESSION_PAGE:
            return
        offset += SESSION_PAGE


def iter_messages(mem: Engram, scope: str, session: str) -> Iterator[Message]:
    """Yield every message of a session, oldest first, reading a page at a time."""
    handle = mem.session(session, scope=scope)
    after: int | None = None
    while True:
        page = handle.messages(after_id=after, limit=EXPORT_PAGE)
        yield from page
        if len(page) < EXPORT_PAGE:
            return
        after = page[-1].id


def message_line(message: Message) -> JSON:
    """Turn a message into an import-ready JSONL object (OpenAI fields, session, time)."""
    out: JSON = {"session": message.session}
    out.update(message.to_openai())
    out["created_at"] = message.created_at.isoformat()
    metadata = without_record(message.metadata)  # a key belongs to this store's requests
    if metadata:
        out["metadata"] = metadata
    return out


def _write_jsonl(mem: Engram, scope: str, sessions: list[str], out: IO[str]) -> int:
    count = 0
    for session in sessions:
        for message in iter_messages(mem, scope, session):
            out.write(json.dumps(message_line(message), ensure_ascii=False) + "\n")
            count += 1
    return count


def _write_documents(
    mem: Engram, scope: str, sessions: list[str], out: IO[str], *, single: bool
) -> int:
    documents = [mem.export_session(session, scope) for session in sessions]
    count = sum(len(doc.get("recent_history", [])) for doc in documents)
    value: Any = documents[0] if single else documents
    out.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")
    return count


@contextmanager
def _destination(output: Path | None) -> Iterator[IO[str]]:
    """Yield stdout, or a temp file renamed over ``output`` once everything is written."""
    if output is None:
        yield sys.stdout
        return
    directory = output.resolve().parent
    fd, temp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, output)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
