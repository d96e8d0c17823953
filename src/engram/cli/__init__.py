"""The ``engram`` command line: one module per command group, registered here.

Every command's first docstring line is its help. Errors Engram raises on
purpose (:class:`~engram.errors.EngramError`) are turned into one ``Error: ...``
line and exit code 1 in :class:`EngramGroup`, the single place that does it;
usage errors exit 2, as click does.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from engram import __version__
from engram.cli._common import CliState
from engram.cli.demo import demo_command
from engram.cli.exporting import export_command
from engram.cli.forget import forget_group
from engram.cli.importing import import_command
from engram.cli.keys import keys_group
from engram.cli.mcp import mcp_command, mcp_config_command
from engram.cli.migrate import migrate_command
from engram.cli.prompts import prompts_group, replay_command
from engram.cli.query import context_command, search_command, stats_command
from engram.cli.serve import serve_command
from engram.errors import EngramError


class EngramGroup(click.Group):
    """A click group that reports Engram's expected failures as one line, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand, converting Engram and file errors into click errors."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # `engram export | head`: the reader has all it wanted. Quietly stop, like
            # other Unix tools; stdout goes to /dev/null so the final flush cannot fail.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise click.exceptions.Exit(0) from None
        except EngramError as exc:
            raise click.ClickException(str(exc)) from exc
        except OSError as exc:  # unreadable input, unwritable output, full disk
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror or exc}") from exc


@click.group(cls=EngramGroup)
@click.option(
    "--db",
    "db",
    envvar="ENGRAM_URL",
    metavar="URL",
    help="Store URL (sqlite:///path.db, postgresql://..., jsondir:///dir). "
    "Default: $ENGRAM_URL, else sqlite:///./engram.db.",
)
@click.version_option(version=__version__, prog_name="engram")
@click.pass_context
def main(ctx: click.Context, db: str | None) -> None:
    """Engram: conversation memory for LLM applications."""
    ctx.obj = CliState(db=db)


main.add_command(import_command)
main.add_command(export_command)
main.add_command(search_command)
main.add_command(context_command)
main.add_command(stats_command)
main.add_command(demo_command)
main.add_command(migrate_command)
main.add_command(serve_command)
main.add_command(keys_group)
main.add_command(mcp_command)
main.add_command(mcp_config_command)
main.add_command(forget_group)
main.add_command(prompts_group)
main.add_command(replay_command)

__all__ = ["EngramGroup", "main"]
