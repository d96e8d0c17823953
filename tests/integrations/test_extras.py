"""The adapters stay out of ``import engram`` (their missing-extra errors: tests/distribution)."""

from __future__ import annotations

import subprocess
import sys


def test_import_engram_loads_no_adapter() -> None:
    code = (
        "import sys, engram\n"
        "adapters = ('agents', 'langchain_core', 'langgraph', 'google.adk')\n"
        "print(sorted(m for m in adapters if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
