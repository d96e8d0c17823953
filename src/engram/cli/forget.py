"""``engram forget``: delete a message, a session, memories or a scope, each with a receipt.

Each prints what was removed and what became of everything made from it
(summary, important data, agent state, tool cache, memories, vectors, search
index): rebuilt, rebuild pending (at the next turn), removed, or unchanged.
``--json`` prints the receipt as the REST API and the audit trail keep it.
"""

from __future__ import annotations

import click

from engram.cli._common import db_option, echo_json, open_engram, scope_option
from engram.receipts import Receipt

_REBUILD = click.option(
    "--rebuild",
    is_flag=True,
    help="Rebuild the summary, important data and memories that used the messages now "
    "(default: the summary at the next turn).",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")


@click.group("forget")
def forget_group() -> None:
    """Forget a message, a session, memories or a whole scope, with a receipt."""


@forget_group.command("message")
@click.argument("message_id", type=click.IntRange(min=1))
@scope_option
@_REBUILD
@_JSON
@db_option
@click.pass_context
def forget_message(
    ctx: click.Context, message_id: int, scope: str, rebuild: bool, as_json: bool, db: str | None
) -> None:
    """Forget one message (a tool call goes with its results) and what was made from it."""
    receipt = open_engram(ctx, db).delete_message(message_id, scope, rebuild=rebuild)
    show(receipt, as_json)


@forget_group.command("session")
@click.argument("session")
@scope_option
@_REBUILD
@click.option(
    "--delete",
    is_flag=True,
    help="Delete the session itself too (its policy and recorded prompts); memories made "
    "from it stay.",
)
@_JSON
@db_option
@click.pass_context
def forget_session(
    ctx: click.Context,
    session: str,
    scope: str,
    rebuild: bool,
    delete: bool,
    as_json: bool,
    db: str | None,
) -> None:
    """Forget every message and state of a session (it stays, empty, unless --delete)."""
    if delete and rebuild:
        raise click.UsageError("--rebuild has nothing to rebuild in a deleted session")
    handle = open_engram(ctx, db).require_session(session, scope)
    show(handle.delete() if delete else handle.clear(rebuild=rebuild), as_json)


@forget_group.command("memory")
@click.argument("memory_id", type=click.IntRange(min=1))
@scope_option
@_JSON
@db_option
@click.pass_context
def forget_memory(
    ctx: click.Context, memory_id: int, scope: str, as_json: bool, db: str | None
) -> None:
    """Forget one long-term memory of a scope."""
    show(open_engram(ctx, db).memories(scope).delete(memory_id), as_json)


@forget_group.command("memories")
@scope_option
@click.option("--yes", is_flag=True, help="Do it: every memory of the scope goes.")
@_JSON
@db_option
@click.pass_context
def forget_memories(
    ctx: click.Context, scope: str, yes: bool, as_json: bool, db: str | None
) -> None:
    """Forget every long-term memory of a scope (the audit trail stays, without their text)."""
    if not yes:
        raise click.UsageError(f"this deletes every memory of scope {scope!r}: add --yes")
    show(open_engram(ctx, db).memories(scope).clear(), as_json)


@forget_group.command("scope")
@click.argument("scope")
@click.option("--yes", is_flag=True, help="Do it: every session, memory and audit entry goes.")
@click.option(
    "--keep-audit",
    is_flag=True,
    help="Keep the audit trail (without the memories' text) and the model usage: delete only "
    "the sessions and memories.",
)
@_JSON
@db_option
@click.pass_context
def forget_scope(
    ctx: click.Context, scope: str, yes: bool, keep_audit: bool, as_json: bool, db: str | None
) -> None:
    """Forget a whole scope ("forget this user"); one audit entry with the receipt stays."""
    if not yes:
        raise click.UsageError(f"forgetting scope {scope!r} deletes everything it holds: add --yes")
    mem = open_engram(ctx, db)
    show(mem.delete_scope(scope) if keep_audit else mem.forget_scope(scope), as_json)


def show(receipt: Receipt, as_json: bool) -> None:
    """Print a receipt: the messages removed, then one line per derived thing."""
    if as_json:
        echo_json(receipt.to_dict())
        return
    where = f"{receipt.scope}/{receipt.session}" if receipt.session else receipt.scope
    counts = ", ".join(f"{n} {what}" for what, n in receipt.counts.items())
    click.echo(f"{receipt.action} in {where}: {counts or f'{receipt.message_count} message(s)'}")
    if receipt.message_ids:
        ranges = receipt.to_dict()["messages"]
        shown = ", ".join(f"#{a}" if a == b else f"#{a}-#{b}" for a, b in ranges)
        click.echo(f"  messages: {shown}")
    for line in receipt.derived:
        detail = f" ({line.detail})" if line.detail else ""
        click.echo(f"  {line.kind:<15} {line.ref:<22} {line.outcome}{detail}")
