"""Without its extra, an adapter fails at import with an error naming the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("engram.integrations.openai_agents", "agents", "engram[agents]"),
        ("engram.integrations.langchain", "langchain_core", "engram[langchain]"),
    ],
)
def test_a_missing_extra_is_named(module: str, blocked: str, extra: str) -> None:
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from engram.errors import MissingDependency\n"
        f"try:\n    import {module}\n"
        "except MissingDependency as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert extra in out.stdout, out.stderr


def test_import_engram_loads_no_adapter() -> None:
    code = (
        "import sys, engram\n"
        "print(sorted(m for m in ('agents', 'langchain_core') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
