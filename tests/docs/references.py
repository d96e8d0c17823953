"""What the documents' references point at, read with :mod:`ast` (nothing is imported).

Shared by the tests of docs/seed-coverage.md and docs/architecture.md.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def module(path: str) -> ast.Module:
    """The parsed source of ``path`` (relative to the repository root)."""
    return ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)


def names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Functions, classes and assigned names defined directly in ``body``."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def class_members(node: ast.ClassDef) -> set[str]:
    """Names defined in a class body, dataclass fields (``name: type = default``) included."""
    return set(names(node.body))


def defines(path: str, symbol: str) -> bool:
    """Whether the module at ``path`` defines ``Name`` or ``Class.member`` at its top level."""
    head, _, member = symbol.partition(".")
    node = names(module(path).body).get(head)
    if node is None:
        return False
    if not member:
        return True
    return isinstance(node, ast.ClassDef) and member in class_members(node)
