"""``engram prompts`` (list, show, diff recorded turns) and ``engram replay`` (what if).

Both only read: ``prompts`` rebuilds recorded prompts from the store, and
``replay`` plays a session's history again under other policies in a
private in-memory copy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from engram.cli._common import db_option, echo_json, open_engram, scope_option, stderr_is_tty
from engram.cli.query import omission_line
from engram.context import Omission
from engram.intake.images import readable
from engram.limits import MAX_PAGE
from engram.policy import CURRENT, PRESETS

if TYPE_CHECKING:  # the library loads these when a command first uses them
    from engram.provenance.diff import PromptDiff
    from engram.provenance.replay import Replay
    from engram.provenance.turns import TurnSummary
    from engram.provenance.whatif import WhatIf

#: ``--policy`` value that tries the session's own policy and every preset.
ALL = "all"

session_option = click.option(
    "--session", "session", required=True, metavar="ID", help="The conversation."
)


@click.group("prompts")
def prompts_group() -> None:
    """Recorded prompts: list the turns, show one exactly as sent, diff two."""


@prompts_group.command("list")
@session_option
@scope_option
@click.option("--after", type=click.IntRange(0), default=0, show_default=True,
              help="Start after this turn.")  # fmt: skip
@click.option("--limit", type=click.IntRange(1, MAX_PAGE), default=50, show_default=True,
              help="Most turns listed.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the turns as JSON.")
@db_option
@click.pass_context
def list_command(
    ctx: click.Context, session: str, scope: str, after: int, limit: int, as_json: bool,
    db: str | None,
) -> None:  # fmt: skip
    """List recorded turns: time, tokens, cacheable share and the provider's cached tokens."""
    handle = open_engram(ctx, db).require_session(session, scope)
    turns = handle.prompts(after=after, limit=limit)
    if as_json:
        echo_json([t.to_dict() for t in turns])
        return
    if not turns:
        click.echo(f"No recorded turns in session {session!r} after turn {after}.")
        return
    click.echo(f"{'turn':>5}  {'time (UTC)':<19}  {'tokens':>7}  {'budget':>7}  {'msgs':>4}  "
               f"{'cacheable':>9}  {'cached':>7}  via")  # fmt: skip
    for turn in turns:
        click.echo(_turn_line(turn))


def _turn_line(turn: TurnSummary) -> str:
    data = turn.to_dict()
    share = data["cacheable_share"]
    cacheable = "-" if share is None else f"{share:.0%}"
    cached = "-" if data["cached_tokens"] is None else str(data["cached_tokens"])
    at = turn.record.at.strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{turn.turn:>5}  {at:<19}  {data['tokens']:>7}  {data['budget']:>7}  "
        f"{data['messages']:>4}  {cacheable:>9}  {cached:>7}  {data['via']}"
    )


@prompts_group.command("show")
@session_option
@scope_option
@click.argument("turn", type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True, help="Print the turn as JSON.")
@db_option
@click.pass_context
def show_command(
    ctx: click.Context, session: str, scope: str, turn: int, as_json: bool, db: str | None
) -> None:
    """Show a recorded turn's prompt exactly as sent, its sections and what was left out."""
    replayed = open_engram(ctx, db).require_session(session, scope).prompt(turn)
    if as_json:
        echo_json(replayed.to_dict())
        return
    for line in replay_lines(replayed):
        click.echo(line)


def replay_lines(replayed: Replay) -> list[str]:
    """A recorded turn for a person: how it was built, whether it matches, the messages."""
    data = replayed.to_dict()
    lines = [
        f"Turn {replayed.turn} at {data['at']} ({data['via']}): policy {data['policy']}, "
        f"{data['tokens']} tokens with {data['counter']}, limit "
        f"{data['budget'] - data['reserve']} = budget {data['budget']} - reserve {data['reserve']}."
    ]
    if replayed.missing:
        lines.append("Cannot rebuild this prompt: " + "; ".join(replayed.missing) + ".")
    elif replayed.verified:
        lines.append(f"Rebuilt byte for byte: SHA-256 {data['sha256']} matches what was sent.")
    else:
        lines.append(
            f"Rebuilt, but it differs from what was sent from message {replayed.mismatch} on "
            f"(recorded SHA-256 {data['sha256']})."
        )
    shown = [_source(s) for s in replayed.sections]
    lines.append("Sections: " + ("; ".join(shown) if shown else "none") + ".")
    for message in replayed.messages or []:
        content = readable(message.get("content"))
        if message.get("tool_calls"):
            calls = ", ".join(call["function"]["name"] for call in message["tool_calls"])
            content = f"{content}\n(calls {calls})".strip()
        lines.extend([f"--- {message['role']} ---", content])
    for omitted in data["omitted"]:
        lines.append(
            omission_line(Omission(**{**omitted, "message_ids": tuple(omitted["message_ids"])}))
        )
    lines.extend(f"Note: {note}" for note in data["notes"])
    if data["tools"]:
        lines.append(f"Tools offered: {', '.join(_tool_name(t) for t in data['tools'])}.")
    usage = data["usage"] or {}
    if usage.get("cached_tokens") is not None:
        lines.append(
            f"Provider: {usage['cached_tokens']} of {usage.get('prompt_tokens')} prompt tokens "
            "served from its cache."
        )
    return lines


def _source(section: dict[str, Any]) -> str:
    if section.get("kind") == "system":
        return "system prompt"
    if "version" in section:
        return f"{section['title']} ({section['kind']} version {section['version']})"
    if "memories" in section:
        ids = ", ".join(str(i) for i in section["memories"])
        return f"{section['title']} (memories {ids})"
    return str(section["title"])


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        return str(name)
    return "?"


@prompts_group.command("diff")
@session_option
@scope_option
@click.argument("a", type=click.IntRange(1))
@click.argument("b", type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@db_option
@click.pass_context
def diff_command(
    ctx: click.Context, session: str, scope: str, a: int, b: int, as_json: bool, db: str | None
) -> None:
    """Show what changed from turn A to turn B: window, sections and shared prefix."""
    found = open_engram(ctx, db).require_session(session, scope).prompt_diff(a, b)
    if as_json:
        echo_json(found.to_dict())
        return
    for line in diff_lines(found):
        click.echo(line)


def diff_lines(found: PromptDiff) -> list[str]:
    """A diff of two recorded turns for a person."""
    if found.identical:
        return [f"Turn {found.b} against turn {found.a}: identical."]
    lines = [f"Turn {found.b} against turn {found.a}:"]
    for label, ids in (("Entered the window", found.entered), ("Left the window", found.left)):
        if ids:
            lines.append(f"{label}: {len(ids)} message(s) (ids {_ids(ids)}).")
    for change in found.sections:
        lines.append(f"Section {change['title']}: {change['why']}.")
    if found.changed:
        lines.append(f"Changed: {', '.join(found.changed)}.")
    exact = "" if found.exact else " (at message granularity: a prompt could not be rebuilt)"
    lines.append(
        f"Shared prefix: {found.shared_messages} message(s), {found.shared_bytes} bytes of "
        f"{found.bytes_a} and {found.bytes_b}{exact}."
    )
    return lines


def _ids(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:10])
    return shown + (", ..." if len(ids) > 10 else "")


# -- replay ------------------------------------------------------------------------


@click.command("replay")
@session_option
@scope_option
@click.option("--policy", default=ALL, show_default=True,
              help=f"Preset to try, {CURRENT!r} (the session's own) or {ALL!r} (both, and "
              "every preset).")  # fmt: skip
@click.option("--budget", type=click.IntRange(1), default=None,
              help="Prompt budget (default: the newest recorded turn's, "
              "else each policy's).")  # fmt: skip
@click.option("--model", default=None,
              help="Model whose tokenizer and prices count (default: the recorded one, "
              "else gpt-4o-mini).")  # fmt: skip
@click.option("--system", metavar="TEXT", default=None,
              help="System prompt (default: the newest recorded turn's).")  # fmt: skip
@click.option("--per-turn", is_flag=True, help="Also list every turn (one policy at a time).")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar (default: only when stderr is a terminal).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@db_option
@click.pass_context
def replay_command(
    ctx: click.Context, session: str, scope: str, policy: str, budget: int | None,
    model: str | None, system: str | None, per_turn: bool, progress: bool | None,
    as_json: bool, db: str | None,
) -> None:  # fmt: skip
    """What if a session had run under another policy? Replays its history, writing nothing."""
    mem = open_engram(ctx, db)
    mem.require_session(session, scope)
    names = [CURRENT, *PRESETS] if policy == ALL else [policy]
    show = stderr_is_tty() if progress is None else progress
    results: list[tuple[str, WhatIf]] = []
    for name in names:
        with _bar(show, name) as advance:
            found = mem.what_if(session, scope, policy=name, budget=budget, model=model,
                                system=system, progress=advance)  # fmt: skip
        label = f"current ({found.policy})" if name == CURRENT else found.policy
        results.append((label, found))
    if as_json:
        out = [{"label": label, **found.to_dict()} for label, found in results]
        echo_json(out if policy == ALL else out[0])
        return
    for line in whatif_lines(session, results, per_turn=per_turn):
        click.echo(line)


@contextmanager
def _bar(show: bool, name: str) -> Iterator[Callable[[int, int], None] | None]:
    if not show:
        yield None
        return
    with click.progressbar(length=1, label=f"Replaying under {name}", file=sys.stderr) as bar:

        def advance(done: int, total: int) -> None:
            bar.length = total
            bar.update(1)

        yield advance


def whatif_lines(session: str, results: list[tuple[str, WhatIf]], *, per_turn: bool) -> list[str]:
    """A what-if comparison for a person: one line per policy, then the notes."""
    first = results[0][1]
    lines = [
        f"Session {session!r}: {len(first.turns)} turns replayed, prices of {first.model}"
        + (", with the recorded system prompt." if first.system else "."),
        f"{'policy':<26} {'budget':>7} {'tokens':>9} {'cacheable':>9} {'cost $':>9} "
        f"{'cached $':>9} {'over':>4} {'compact':>7} {'evidence':>8}",
    ]
    for label, found in results:
        data = found.to_dict()
        kept = data["evidence_kept_share"]
        lines.append(
            f"{label:<26} {found.budget:>7} {found.tokens:>9} {_share(data['cacheable_share']):>9} "
            f"{_money(data['cost_usd']):>9} {_money(data['cost_cached_usd']):>9} "
            f"{data['budget_violations']:>4} {data['compactions']:>7} {_share(kept):>8}"
        )
    lines.append(
        "cacheable: share of prompt tokens repeating the previous prompt's start; cached $: "
        "input cost when the provider's cache serves them; over: turns whose question could "
        "not be shown whole; evidence: share of the rare words later questions share with "
        "earlier messages that the prompt kept in view."
    )
    lines.extend(f"Note: {note}" for note in first.notes)
    if per_turn and len(results) == 1:
        lines.append(f"{'turn':>5} {'msg id':>7} {'tokens':>7} {'window':>6} {'cacheable':>9} "
                     f"{'cached':>7} {'over':>4} {'compact':>7} {'evidence':>8}")  # fmt: skip
        for t in first.turns:
            lines.append(
                f"{t.turn:>5} {t.message_id:>7} {t.tokens:>7} {t.window:>6} "
                f"{t.cacheable_tokens:>9} {t.cached_tokens:>7} {'yes' if t.over_budget else '':>4} "
                f"{t.compactions:>7} {t.evidence_kept:>4}/{t.evidence:<3}"
            )
    return lines


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
