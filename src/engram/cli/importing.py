"""``engram import``: load a JSONL, fine-tuning JSONL, ChatGPT or Engram document file.

The whole file is parsed (:mod:`engram.transfer.importers`) and every message checked as
the store would (:func:`engram.ingest.ingest`) before anything is written, so a
bad line stops the import with nothing written. Importing the same file again
adds only what is new: each message keeps an import key (a session document's
messages are compared with those its session holds, see
:func:`engram.transfer.documents.unseen`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from engram.cli._common import db_option, open_engram, scope_option, stderr_is_tty
from engram.errors import ImportFormatError
from engram.ingest import ingest
from engram.models import JSON
from engram.transfer.importers import FORMATS, read_documents, read_import


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--session", "session", metavar="ID", help="Session for lines that name none.")
@scope_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help='jsonl: one OpenAI message per line; finetune: one {"messages": [...]} '
    "conversation per line; chatgpt: ChatGPT's conversations.json; "
    "document: Engram's session documents (engram export --format json).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar (default: only when stderr is a terminal).",
)
@db_option
@click.pass_context
def import_command(
    ctx: click.Context,
    file: Path,
    session: str | None,
    scope: str,
    fmt: str,
    progress: bool | None,
    db: str | None,
) -> None:
    """Import a JSONL, ChatGPT or Engram document file; nothing is written if any line is bad."""
    started = time.perf_counter()
    documents = read_documents(file) if fmt in ("auto", "document") else None
    if fmt == "document" and documents is None:
        raise ImportFormatError(
            "not an Engram session document (or a list of them)", file=str(file)
        )
    if documents is not None:
        _import_documents(ctx, db, documents, scope if scope_given(ctx) else None)
        return
    batches = read_import(file, fmt=fmt, default_session=session)
    mem = open_engram(ctx, db)
    total = sum(len(batch.messages) for batch in batches)
    show = stderr_is_tty() if progress is None else progress
    with _progress(total, show) as advance:
        report = ingest(mem, scope, batches, advance=advance)
    elapsed = time.perf_counter() - started
    rate = total / elapsed if elapsed > 0 else 0.0
    click.echo(
        f"Imported {report.new} new messages in {report.sessions} session(s) into scope "
        f"{scope!r} ({report.skipped} already there, skipped): {report.tokens} tokens, "
        f"{elapsed:.2f} s, {rate:,.0f} messages/s."
    )


def scope_given(ctx: click.Context) -> bool:
    """True when ``--scope`` was typed: it then overrides the documents' own scopes."""
    return ctx.get_parameter_source("scope") is click.core.ParameterSource.COMMANDLINE


def _import_documents(
    ctx: click.Context, db: str | None, documents: list[JSON], scope: str | None
) -> None:
    """Check every document first, then write what its session does not hold yet."""
    started = time.perf_counter()
    mem = open_engram(ctx, db)
    prepared = mem.import_documents(documents, scope=scope)
    messages = sum(len(item.messages) for item in prepared)
    skipped = sum(item.skipped for item in prepared)
    elapsed = time.perf_counter() - started
    click.echo(
        f"Imported {messages} messages in {len(prepared)} session document(s) "
        f"({skipped} already there, skipped): "
        f"{sum(sum(item.tokens) for item in prepared)} tokens, {elapsed:.2f} s."
    )


@contextmanager
def _progress(total: int, show: bool) -> Iterator[Callable[[int], None]]:
    """Yield a function that advances the bar by n messages (a no-op when hidden)."""
    if not show:
        yield lambda _n: None
        return
    with click.progressbar(length=total, label="Importing", file=sys.stderr, show_pos=True) as bar:
        yield bar.update
