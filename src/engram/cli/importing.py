"""``engram import``: load a JSONL or ChatGPT export file into a scope.

The whole file is parsed and validated first (:mod:`engram.importers`), so a
malformed line stops the import before anything is written. Each session is
then written with one ``Session.add_many`` call, which is one transaction. A
*storage* failure (disk full, lost connection) midway through a multi-session
file leaves the sessions written before it in place; re-running the import
would then duplicate them, so the summary names each session as it lands.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from engram.cli._common import db_option, open_engram, scope_option, stderr_is_tty
from engram.engine import Engram
from engram.errors import ImportFormatError, InvalidMessage
from engram.importers import FORMATS, ImportBatch, read_documents, read_import
from engram.models import JSON
from engram.transfer import check_target, prepare_document, write_document


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--session", "session", metavar="ID", help="Session for lines that name none.")
@scope_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="jsonl: one OpenAI message per line; chatgpt: ChatGPT's conversations.json; "
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
        _import_documents(ctx, db, file, documents, scope if scope_given(ctx) else None)
        return
    batches = read_import(file, fmt=fmt, default_session=session)
    mem = open_engram(ctx, db)
    show = stderr_is_tty() if progress is None else progress
    messages, tokens = _write(mem, scope, batches, show=show)
    elapsed = time.perf_counter() - started
    rate = messages / elapsed if elapsed > 0 else 0.0
    click.echo(
        f"Imported {messages} messages in {len(batches)} session(s) into scope {scope!r}: "
        f"{tokens} tokens, {elapsed:.2f} s, {rate:,.0f} messages/s."
    )


def scope_given(ctx: click.Context) -> bool:
    """True when ``--scope`` was typed: it then overrides the documents' own scopes."""
    return ctx.get_parameter_source("scope") is click.core.ParameterSource.COMMANDLINE


def _import_documents(
    ctx: click.Context, db: str | None, file: Path, documents: list[JSON], scope: str | None
) -> None:
    """Check every document (and that its session is empty) first, then write them."""
    started = time.perf_counter()
    prepared = []
    for index, document in enumerate(documents):
        try:
            prepared.append(prepare_document(document, scope=scope))
        except (ImportFormatError, InvalidMessage) as exc:
            raise ImportFormatError(f"document #{index}: {exc}", file=str(file)) from None
    mem = open_engram(ctx, db)
    for item in prepared:
        check_target(mem.store, item)
    for item in prepared:
        write_document(mem.store, item)
    messages = sum(len(item.messages) for item in prepared)
    elapsed = time.perf_counter() - started
    click.echo(
        f"Imported {messages} messages in {len(prepared)} session document(s): "
        f"{sum(sum(item.tokens) for item in prepared)} tokens, {elapsed:.2f} s."
    )


def _write(mem: Engram, scope: str, batches: list[ImportBatch], *, show: bool) -> tuple[int, int]:
    """Write every batch, one transaction per session; returns (messages, tokens)."""
    # Open every session handle first: an unusable scope or id fails before any write.
    sessions = [(mem.session(batch.session, scope=scope), batch) for batch in batches]
    total = sum(len(batch.messages) for batch in batches)
    messages = tokens = 0
    with _progress(total, show) as advance:
        for handle, batch in sessions:
            stored = handle.add_many(batch.messages)
            messages += len(stored)
            tokens += sum(message.tokens for message in stored)
            advance(len(stored))
    return messages, tokens


@contextmanager
def _progress(total: int, show: bool) -> Iterator[Callable[[int], None]]:
    """Yield a function that advances the bar by n messages (a no-op when hidden)."""
    if not show:
        yield lambda _n: None
        return
    with click.progressbar(length=total, label="Importing", file=sys.stderr, show_pos=True) as bar:
        yield bar.update
