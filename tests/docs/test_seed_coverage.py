"""``docs/seed-coverage.md`` stays true: every code path and test it names exists.

The document maps each seed requirement to code and to the test that proves
it. This test parses its tables and checks, without importing anything:

* every ``src/...py`` path exists, and a ``::Name`` or ``::Class.member``
  after it is defined at the top level of that module (function, class or
  assigned name) or in that class's body;
* every ``tests/...py::test`` or ``tests/...py::Class::test`` names a test
  function that exists in that file (parsed with :mod:`ast`);
* every table row has four cells, and its test cell either names a test or
  says plainly why there is none ("no test", "not implemented", ...);
* each of the five seeds has its section, and the departures section exists.
"""

from __future__ import annotations

import ast
import re

import pytest
from tests.docs.references import ROOT, defines, module, names

DOC = ROOT / "docs" / "seed-coverage.md"

#: Section headings the document must have (one per seed, then the departures).
SECTIONS = (
    "## Seed 000",
    "## Seed 001",
    "## Seed 002",
    "## Seed 003",
    "## Seed 004",
    "## Where Engram departs from a seed, and why",
)
#: Words that may stand in a test cell instead of a test reference.
NO_TEST_WORDS = ("no test", "not implemented", "not built", "not measured", "n/a", "untested")

_SPAN = re.compile(r"`([^`]+)`")
_SRC_REF = re.compile(r"^(src/[\w/]+\.py)(?:::([\w.]+))?$")
_TEST_REF = re.compile(r"^(tests/[\w/]+\.py)::(\w+)(?:::(\w+))?$")


def _doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def _table_rows(text: str) -> list[list[str]]:
    """Body rows of every Markdown table (header and separator rows skipped)."""
    rows: list[list[str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if re.match(r"^\|\s*-{3,}", line) or re.match(r"^\|\s*-{3,}", nxt):
            continue  # separator, or the header above it
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        rows.append(cells)
    return rows


def _refs(text: str) -> tuple[set[str], set[str]]:
    sources: set[str] = set()
    tests: set[str] = set()
    for span in _SPAN.findall(text):
        span = span.strip()
        if span.startswith("src/") and span.split("::")[0].endswith(".py"):
            sources.add(span)
        elif span.startswith("tests/") and "::" in span:
            tests.add(span)
    return sources, tests


def test_document_exists_with_every_section() -> None:
    text = _doc_text()
    for heading in SECTIONS:
        assert any(line.startswith(heading) for line in text.splitlines()), heading


def _sections(text: str) -> dict[str, str]:
    """Text of each ``## `` section, keyed by its heading line."""
    out: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line
            out[current] = ""
        elif current:
            out[current] += line + "\n"
    return out


def test_rows_have_four_cells_and_an_honest_test_cell() -> None:
    total = 0
    for heading, body in _sections(_doc_text()).items():
        rows = _table_rows(body)
        total += len(rows)
        bad_width = [r for r in rows if len(r) != 4]
        assert bad_width == [], (heading, bad_width[:3])
        # Seed tables: requirement | code | test | notes. Departures: seed | says | does | proof.
        test_column = 3 if heading.startswith(SECTIONS[-1]) else 2
        for cells in rows:
            cell = cells[test_column]
            _, tests = _refs(cell)
            assert tests or any(w in cell.lower() for w in NO_TEST_WORDS), (heading, cells)
    assert total >= 100  # five seeds' worth of requirements, not a sketch


def _table_text() -> str:
    """Every table cell of the document (prose outside tables may show placeholders)."""
    return "\n".join(" | ".join(cells) for cells in _table_rows(_doc_text()))


def test_every_source_reference_exists() -> None:
    sources, _ = _refs(_table_text())
    assert sources
    missing: list[str] = []
    for ref in sorted(sources):
        match = _SRC_REF.match(ref)
        assert match, f"malformed source reference {ref!r}"
        path, symbol = match.groups()
        if not (ROOT / path).is_file():
            missing.append(ref)
            continue
        if symbol is not None and not defines(path, symbol):
            missing.append(ref)
    assert missing == []


def test_every_test_reference_exists() -> None:
    _, tests = _refs(_table_text())
    assert tests
    missing: list[str] = []
    for ref in sorted(tests):
        match = _TEST_REF.match(ref)
        assert match, f"malformed test reference {ref!r}"
        path, first, second = match.groups()
        if not (ROOT / path).is_file():
            missing.append(ref)
            continue
        top = names(module(path).body)
        if second is None:
            node = top.get(first)
            ok = isinstance(node, ast.FunctionDef) and first.startswith("test")
        else:
            cls = top.get(first)
            ok = (
                isinstance(cls, ast.ClassDef)
                and first.startswith("Test")
                and second.startswith("test")
                and isinstance(names(cls.body).get(second), ast.FunctionDef)
            )
        if not ok:
            missing.append(ref)
    assert missing == []


SRC_EXAMPLE = "src/engram/tokens.py::counter_for_model"
TEST_EXAMPLE = "tests/test_policy.py::TestPresets::test_by_name"


@pytest.mark.parametrize(
    ("text", "sources", "tests"),
    [
        (f"`{SRC_EXAMPLE}`", {SRC_EXAMPLE}, set()),
        (f"`{TEST_EXAMPLE}` `x`", set(), {TEST_EXAMPLE}),
        ("`tests/test_policy.py` (whole file)", set(), set()),
    ],
)
def test_reference_parsing(text: str, sources: set[str], tests: set[str]) -> None:
    assert _refs(text) == (sources, tests)
