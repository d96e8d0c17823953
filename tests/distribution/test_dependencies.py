"""Every third-party module imported under src/engram is declared where a user gets it.

An import must be declared by the core dependencies or by the extra that owns
the code importing it (:data:`OWNERS`): the extra a user installs to use that
code. The ``dev`` extra does not count: it is what the tests install, so it
would hide a dependency that ``pip install '...[server]'`` leaves out.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "engram"

#: Which extras own the code under a path of src/engram (the longest matching prefix
#: wins); code under no prefix is core. An import there may come from core or any of them.
OWNERS: dict[str, tuple[str, ...]] = {
    "server/": ("server",),
    "dashboard/": ("server",),
    "proxy/": ("server",),
    "cli/serve.py": ("server",),
    "store/postgres/": ("postgres",),
    "store/postgres/vectors.py": ("postgres", "embeddings"),
    "store/sqlite/vectors.py": ("embeddings",),
    "search/embeddings.py": ("embeddings",),
    "integrations/openai_agents.py": ("agents",),
    "integrations/langchain.py": ("langchain",),
    "integrations/langgraph.py": ("langgraph",),
    "integrations/adk/": ("adk",),
    "telemetry.py": ("otel",),
    "mcp/": ("mcp",),
    "mcp/http.py": ("mcp", "server"),  # MCP over HTTP, mounted by engram serve
    "cli/mcp.py": ("mcp",),
    "server/mcp_mount.py": ("server", "mcp"),
}


def normalized(name: str) -> str:
    """A distribution name as the index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution a requirement string names (``psycopg[binary]>=3.2`` -> ``psycopg``)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, f"unreadable requirement {requirement!r}"
    return normalized(match.group(1))


def project() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return dict(tomllib.load(file)["project"])


def declared() -> dict[str, set[str]]:
    """Distributions declared by core (key ``""``) and by each extra."""
    meta = project()
    own = normalized(str(meta["name"]))
    extras: dict[str, list[str]] = dict(meta.get("optional-dependencies", {}))  # type: ignore[arg-type]
    out = {"": {requirement_name(r) for r in meta["dependencies"]}}  # type: ignore[attr-defined]
    for extra, requirements in extras.items():
        out[extra] = {requirement_name(r) for r in requirements if requirement_name(r) != own}
    return out


def owners(relative: str) -> tuple[str, ...]:
    """The extras owning a module (empty: core), by the longest prefix in :data:`OWNERS`."""
    matches = [prefix for prefix in OWNERS if relative.startswith(prefix)]
    return OWNERS[max(matches, key=len)] if matches else ()


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def imported(tree: ast.AST) -> Iterator[str]:
    """Top-level names of every absolute import, at any depth (inside functions too).

    Imports under ``if TYPE_CHECKING:`` never run, so they need no distribution.
    """
    for node in ast.iter_child_nodes(tree):
        if _type_checking_only(node):
            assert isinstance(node, ast.If)
            for child in node.orelse:
                yield from imported(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.partition(".")[0]
        yield from imported(node)


def third_party(names: Iterator[str]) -> set[str]:
    skip = {"engram", "__future__", *sys.stdlib_module_names}
    return {name for name in names if name not in skip}


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_scan_sees_imports_inside_functions_and_skips_type_checking() -> None:
    tree = ast.parse(
        "import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import aa\n"
        "else:\n    import bb\n"
        "def f():\n    import cc.sub\n    from dd import x\n    from . import ee\n"
    )
    assert third_party(imported(tree)) == {"bb", "cc", "dd"}


def test_the_ownership_map_names_real_extras_and_paths() -> None:
    extras = set(declared()) - {""}
    for prefix, names in OWNERS.items():
        assert set(names) <= extras, f"{prefix}: no extra named {set(names) - extras}"
        assert any(p.relative_to(PACKAGE).as_posix().startswith(prefix) for p in modules()), prefix


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_every_third_party_import_is_declared(path: Path) -> None:
    relative = path.relative_to(PACKAGE).as_posix()
    names = third_party(imported(ast.parse(path.read_text(encoding="utf-8"))))
    if not names:
        return
    by_module = importlib.metadata.packages_distributions()
    groups = declared()
    where = ("", *owners(relative))
    allowed = set().union(*(groups[extra] for extra in where))
    shown = " or ".join(f"the '{e}' extra" if e else "the core dependencies" for e in where)
    for name in sorted(names):
        dists = by_module.get(name)
        assert dists, f"{relative} imports {name}, which no installed distribution provides"
        assert {normalized(d) for d in dists} & allowed, (
            f"{relative} imports {name} (from {', '.join(dists)}), not declared by {shown}"
        )
