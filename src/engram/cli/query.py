"""Read-only commands: ``engram search``, ``engram context`` and ``engram stats``."""

from __future__ import annotations

from typing import Any

import click

from engram.cli._common import db_option, echo_json, first_line, open_engram, scope_option
from engram.context import Context, Omission
from engram.intake.images import readable
from engram.limits import MAX_PAGE
from engram.models import ROLES, SearchHit

#: Characters of message text shown per line in human-readable listings.
PREVIEW_WIDTH = 100


# -- search -----------------------------------------------------------------------------


@click.command("search")
@click.argument("query")
@scope_option
@click.option("--session", "session", metavar="ID", help="Search one session (default: all).")
@click.option(
    "--limit", type=click.IntRange(1, MAX_PAGE), default=10, show_default=True, help="Most hits."
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(sorted(ROLES)),
    help="Only messages of this role (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@db_option
@click.pass_context
def search_command(
    ctx: click.Context,
    query: str,
    scope: str,
    session: str | None,
    limit: int,
    roles: tuple[str, ...],
    as_json: bool,
    db: str | None,
) -> None:
    """Full-text search of stored messages, best match first, with snippets."""
    mem = open_engram(ctx, db)
    role_filter = list(roles) or None
    if session is not None:
        handle = mem.require_session(session, scope)
        hits = handle.search(query, limit=limit, roles=role_filter)
    else:
        hits = mem.search(query, scope, roles=role_filter, limit=limit)
    if as_json:
        echo_json([hit_dict(hit) for hit in hits])
        return
    if not hits:
        click.echo(f"No messages match {query!r} in scope {scope!r}.")
        return
    best = max(hit.score for hit in hits) or 1.0
    for rank, hit in enumerate(hits, start=1):
        message = hit.message
        stamp = message.created_at.strftime("%Y-%m-%d %H:%M")
        click.echo(
            f"{rank:>2}. [{message.session} #{message.id} {stamp} {message.role}] "
            f"relevance {hit.score / best:.0%} (score {hit.score:.4g})"
        )
        click.echo(f"    {first_line(hit.snippet, PREVIEW_WIDTH)}")


def hit_dict(hit: SearchHit) -> dict[str, Any]:
    """Turn a search hit into plain JSON: message fields plus ``score`` and ``snippet``."""
    out = hit.message.to_dict()
    out.update(score=hit.score, snippet=hit.snippet)
    return out


# -- context ----------------------------------------------------------------------------


@click.command("context")
@click.option("--session", "session", required=True, metavar="ID", help="The conversation.")
@scope_option
@click.option(
    "--budget", type=click.IntRange(1), default=8000, show_default=True, help="Prompt budget."
)
@click.option(
    "--reserve",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Tokens kept free for the answer.",
)
@click.option(
    "--model", default="gpt-4o-mini", show_default=True, help="Model whose tokenizer counts."
)
@click.option(
    "--policy",
    default=None,
    help="Show the prompt under this preset instead of the session's stored policy.",
)
@click.option(
    "--compact/--no-compact",
    default=False,
    show_default=True,
    help="Run a compaction first when one is due (this writes); by default nothing is written.",
)
@click.option("--system", metavar="TEXT", help="System prompt to put first.")
@click.option("--json", "as_json", is_flag=True, help="Print the prompt and its account as JSON.")
@db_option
@click.pass_context
def context_command(
    ctx: click.Context,
    session: str,
    scope: str,
    budget: int,
    reserve: int,
    model: str,
    policy: str | None,
    compact: bool,
    system: str | None,
    as_json: bool,
    db: str | None,
) -> None:
    """Show exactly what the model would receive for a session, and what was left out.

    The session's stored policy is used, and nothing is written unless --compact.
    """
    mem = open_engram(ctx, db)
    handle = mem.require_session(session, scope)
    built = handle.context(
        budget, reserve=reserve, system=system, model=model, policy=policy, compact=compact
    )
    if as_json:
        echo_json(built.to_dict())
        return
    for line in context_lines(built, width=None):
        click.echo(line)


def context_lines(built: Context, *, width: int | None) -> list[str]:
    """Describe a built context: each message (whole, or its first line), then totals.

    Args:
        built: The context to describe.
        width: Show only the first line of each message, cut to this width;
            None shows every message whole.

    """
    lines = []
    for message in built.messages:
        content = readable(message.get("content"))
        if message.get("tool_calls"):
            calls = ", ".join(call["function"]["name"] for call in message["tool_calls"])
            content = f"{content}\n(calls {calls})".strip()
        if width is None:
            lines.extend([f"--- {message['role']} ---", content])
        else:
            lines.append(f"  {message['role']:<9} {first_line(content, width)}")
    limit = built.budget - built.reserve
    estimate = "" if built.exact else " (an estimate)"
    lines.append(
        f"{len(built.messages)} messages, {built.tokens} tokens{estimate} with {built.counter}; "
        f"limit {limit} = budget {built.budget} - reserve {built.reserve}; policy {built.policy}."
    )
    ids = built.message_ids
    if ids:
        lines.append(f"Stored messages sent: {len(ids)} (ids {ids[0]}..{ids[-1]}).")
    lines.extend(omission_line(omission) for omission in built.omitted)
    if not built.omitted:
        lines.append("Left out: nothing.")
    lines.extend(f"Note: {note}" for note in built.notes)
    return lines


def omission_line(omission: Omission) -> str:
    """One line saying what was left out of a prompt, and why."""
    parts = []
    if omission.message_ids:
        shown = ", ".join(str(i) for i in omission.message_ids[:10])
        more = ", ..." if len(omission.message_ids) > 10 else ""
        parts.append(f"{len(omission.message_ids)} message(s) (ids {shown}{more})")
    if omission.before_id is not None:
        parts.append(f"every message before id {omission.before_id}")
    if omission.detail:
        parts.append(omission.detail)
    return f"Left out ({omission.reason}): {'; '.join(parts) or 'see JSON output'}."


# -- stats ------------------------------------------------------------------------------


@click.command("stats")
@scope_option
@click.option("--session", "session", metavar="ID", help="One session (default: every session).")
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
@db_option
@click.pass_context
def stats_command(
    ctx: click.Context, scope: str, session: str | None, as_json: bool, db: str | None
) -> None:
    """Message counts, stored tokens and dates, per session and for the scope."""
    mem = open_engram(ctx, db)
    if session is not None:
        rows = [mem.require_session(session, scope).stats()]
    else:
        rows = [mem.session(info.id, scope=scope).stats() for info in _all_sessions(mem, scope)]
    totals = {
        "scope": scope,
        "sessions": len(rows),
        "total_messages": sum(row["total_messages"] for row in rows),
        "stored_tokens": sum(row["stored_tokens"] for row in rows),
    }
    if as_json:
        echo_json({"totals": totals, "sessions": rows})
        return
    if not rows:
        others = [name for name in mem.scopes() if name != scope]
        hint = f" Scopes with data: {', '.join(others)}." if others else ""
        click.echo(f"No sessions in scope {scope!r}.{hint}")
        return
    width = max(len("session"), *(len(row["session"]) for row in rows))
    click.echo(f"{'session':<{width}} {'messages':>9} {'tokens':>10}  first .. last  title")
    for row in rows:
        first = (row["first_message_at"] or "")[:16].replace("T", " ")
        last = (row["last_message_at"] or "")[:16].replace("T", " ")
        click.echo(
            f"{row['session']:<{width}} {row['total_messages']:>9} {row['stored_tokens']:>10}"
            f"  {first} .. {last}  {row.get('title') or ''}".rstrip()
        )
    click.echo(
        f"Scope {scope!r}: {totals['sessions']} session(s), {totals['total_messages']} messages, "
        f"{totals['stored_tokens']} stored tokens."
    )


def _all_sessions(mem: Any, scope: str) -> list[Any]:
    found: list[Any] = []
    while True:
        page = mem.sessions(scope, limit=MAX_PAGE, offset=len(found))
        found.extend(page)
        if len(page) < MAX_PAGE:
            return sorted(found, key=lambda info: info.id)
