"""``engram migrate --from URL --to URL``: copy a whole store into another backend.

Every scope, session, message, state, memory and audit event is copied with
:func:`engram.transfer.documents.copy_store_url` (for example from ``sqlite:///engram.db`` to
``postgresql://...`` when one machine is no longer enough, or to
``jsondir:///backup`` for a human-readable copy). The source is only read.
A session that already has messages in the target stops the copy with an
error, so data is never silently merged.
"""

from __future__ import annotations

import sys

import click

from engram.transfer.documents import copy_store_url


@click.command("migrate")
@click.option("--from", "source", required=True, metavar="URL", help="Store to copy from.")
@click.option("--to", "target", required=True, metavar="URL", help="Store to copy into.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show progress per session (default: only when stderr is a terminal).",
)
def migrate_command(source: str, target: str, progress: bool | None) -> None:
    """Copy every scope, session, message, state and memory from one store URL to another."""
    if source == target:
        raise click.UsageError("--from and --to name the same store")
    show = sys.stderr.isatty() if progress is None else progress

    def report(what: str, done: int, total: int) -> None:
        if show:
            click.echo(f"  [{done}/{total}] {what}", err=True)

    result = copy_store_url(source, target, progress=report)
    click.echo(
        f"Copied {result.scopes} scope(s), {result.sessions} session(s), "
        f"{result.messages} message(s), {result.states} state(s), {result.memories} memory(ies), "
        f"{result.audit_events} audit event(s) from {result.source} to {result.target}."
    )
    for note in result.skipped:
        click.echo(f"Note: {note}", err=True)


#: The name the CLI group registers (``main.add_command(migrate)``).
migrate = migrate_command

__all__ = ["migrate", "migrate_command"]
