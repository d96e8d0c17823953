"""User-facing text speaks of features, never of where they came from.

The specifications ("seeds"), the design notes and the issue tracker live
outside this repository: a reader of the README, the docs, the OpenAPI
document, the CLI help, a docstring or a benchmark result cannot follow
"seed 003", "DESIGN invariant 6" or "issue 3". docs/seed-coverage.md is the
one map from the specifications, so it may name them by number, but it points
at no file outside the repository either.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest

import engram
from engram.cli import main
from engram.server import create_app

ROOT = Path(__file__).resolve().parents[2]
#: A path out of the repository, or the design notes kept there.
OUTSIDE = r"\.\./shared|\bDESIGN(\.md)?\b"
#: That, or a specification, an invariant or an issue by number.
INTERNAL = re.compile(rf"{OUTSIDE}|\b[Ss]eeds? ?-?0\d\d\b|\b[Ii]nvariants? \d|\b[Ii]ssues? #?\d")
SEED_MAP = ROOT / "docs" / "seed-coverage.md"

TEXT_FILES = sorted(
    {
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "benchmarks" / "results").glob("*.md"),
        *(ROOT / "src" / "engram").rglob("*.py"),
        *(ROOT / "benchmarks").rglob("*.py"),
    }
    - {SEED_MAP}
)


def internal(text: str, pattern: re.Pattern[str] = INTERNAL) -> list[str]:
    """Each line of ``text`` that makes an internal reference."""
    return [line.strip() for line in text.splitlines() if pattern.search(line)]


@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_files_make_no_internal_reference(path: Path) -> None:
    assert internal(path.read_text(encoding="utf-8")) == []


def test_the_seed_map_points_at_nothing_outside() -> None:
    assert internal(SEED_MAP.read_text(encoding="utf-8"), re.compile(OUTSIDE)) == []


def test_the_openapi_document_makes_no_internal_reference() -> None:
    with engram.open("memory://internal-references", llm=None) as mem:
        document = create_app(mem).openapi()
    assert internal(json.dumps(document, indent=1)) == []


def test_the_cli_help_makes_no_internal_reference() -> None:
    for name, command in main.commands.items():
        with click.Context(command, info_name=f"engram {name}") as context:
            assert internal(command.get_help(context)) == [], name


def test_the_pattern_finds_what_it_should() -> None:
    for text in ["seed 003's field names", "Seed-002 readers", "DESIGN invariant 6",
                 "(invariant 7)", "Savings curve (issue 3)", "`../shared/seeds/`"]:  # fmt: skip
        assert internal(text), text
    for text in ["random seed 32024", "a good design", "the issue is", "seed_001"]:
        assert not internal(text), text
