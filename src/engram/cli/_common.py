"""Pieces every command shares: the ``--db`` and ``--scope`` options and opening Engram."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

import engram
from engram.engine import Engram

F = TypeVar("F", bound=Callable[..., Any])

#: The scope used when a command is given none.
DEFAULT_SCOPE = "default"


@dataclass(slots=True)
class CliState:
    """What the ``engram`` group hands its commands."""

    db: str | None = None


def db_option(func: F) -> F:
    """Add ``--db URL`` to a command (it overrides the group's ``--db`` and ``ENGRAM_URL``)."""
    return click.option(
        "--db", "db", metavar="URL", default=None, help="Store URL; overrides engram --db."
    )(func)


def scope_option(func: F) -> F:
    """Add ``--scope S`` (default ``default``) to a command."""
    return click.option(
        "--scope",
        default=DEFAULT_SCOPE,
        show_default=True,
        help="Scope (project, app or user) to work in.",
    )(func)


def store_url(ctx: click.Context, db: str | None) -> str | None:
    """Pick the URL a command opens: its own ``--db``, else the group's, else the default."""
    if db:
        return db
    state = ctx.find_object(CliState)
    return state.db if state is not None else None


def open_engram(ctx: click.Context, db: str | None) -> Engram:
    """Open Engram for this command; it is closed when the command's context ends."""
    mem = engram.open(store_url(ctx, db))
    ctx.call_on_close(mem.close)
    return mem


def echo_json(value: Any) -> None:
    """Print JSON the same way in every command (UTF-8, stable key order, indented)."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def stderr_is_tty() -> bool:
    """Tell whether progress output would reach a person rather than a file or pipe."""
    return sys.stderr.isatty()


def first_line(text: str, width: int = 100) -> str:
    """Return the first non-empty line of ``text``, cut to ``width`` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"
