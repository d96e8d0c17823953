"""``docs/architecture.md`` stays true to the tree: every path it names exists.

A path is taken from inline code (```` `x` ````) and from the fenced blocks
(the trees), in any of the forms the document uses:

* from the repository root: ``src/engram/...``, ``tests/...``, ``benchmarks/...``,
  ``docs/...``;
* relative to ``src/engram/``: ``store/base.py``, ``chat/``, ``engine.py``;
* a bare module name in a backend table (``backend.py``): some module of that
  name exists under ``src/engram/``.

A ``::Name`` or ``::Class.member`` after a ``.py`` path must be defined at the
top level of that module (or in that class's body).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.docs.references import ROOT, defines

DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "src" / "engram"

#: A path: folders ending in "/", or a file with an extension; then an optional ::symbol.
_PATH = re.compile(
    r"(?<![\w./:{-])((?:[\w-]+/)+(?:[\w-]+\.[a-z]+)?|[\w-]+\.(?:py|md|html|css|js))"
    r"(?:::([\w.]+))?(?![\w/])"
)
_FENCE = re.compile(r"```.*?\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")


def _spans(text: str) -> list[str]:
    """The fenced blocks and the inline code of ``text`` (prose is left out)."""
    blocks = _FENCE.findall(text)
    prose = _FENCE.sub("", text)
    return blocks + _INLINE.findall(prose)


def paths(text: str) -> set[tuple[str, str | None]]:
    """Every ``(path, symbol)`` named in the code spans of ``text``."""
    return {(m[1], m[2]) for span in _spans(text) for m in _PATH.finditer(span)}


def resolve(path: str) -> Path | None:
    """The file or folder ``path`` names, or None."""
    if "/" not in path:
        found = next(PACKAGE.rglob(path), None)
        return found if found is not None and found.is_file() else None
    for base in (ROOT, PACKAGE):
        candidate = base / path
        if candidate.exists() and (candidate.is_dir() or not path.endswith("/")):
            return candidate
    return None


def test_the_document_names_the_layout() -> None:
    named = {path for path, _ in paths(DOC.read_text(encoding="utf-8"))}
    for package in ("chat/", "tools/", "store/", "search/", "intake/", "transfer/", "context/"):
        assert package in named, package
    assert "tools/registry.py" in named  # the history-tools prompt lives with the tools


def test_every_path_exists() -> None:
    found = paths(DOC.read_text(encoding="utf-8"))
    assert len(found) > 80  # the document is a map, not a sketch
    missing = [path for path, _ in sorted(found, key=str) if resolve(path) is None]
    assert missing == []


def test_every_symbol_exists() -> None:
    missing = []
    for path, symbol in sorted(paths(DOC.read_text(encoding="utf-8")), key=str):
        if symbol is None:
            continue
        target = resolve(path)
        if target is None or target.suffix != ".py":
            missing.append(f"{path}::{symbol}")
        elif not defines(str(target.relative_to(ROOT)), symbol):
            missing.append(f"{path}::{symbol}")
    assert missing == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("`store/base.py`", {("store/base.py", None)}),
        ("`chat/loop.py::turn_steps`", {("chat/loop.py", "turn_steps")}),
        ("```\n interfaces   cli/  server/  engine.py\n```", {
            ("cli/", None), ("server/", None), ("engine.py", None)}),
        ("`tests/store/test_contract.py` and `src/engram/__init__.py`", {
            ("tests/store/test_contract.py", None), ("src/engram/__init__.py", None)}),
        ("`/v1/chat/completions` on http://127.0.0.1:8000/mcp, `{scope}/x`", set()),
        ("prose naming store/base.py outside code", set()),
    ],
)  # fmt: skip
def test_path_parsing(text: str, expected: set[tuple[str, str | None]]) -> None:
    assert paths(text) == expected


def test_a_missing_path_is_found_missing() -> None:
    assert resolve("store/nowhere.py") is None and resolve("nowhere/") is None
    assert resolve("nowhere.py") is None and resolve("store/") is not None
