"""The public surface: ``engram.__all__`` names exactly what the package exports."""

from __future__ import annotations

import types

import engram


def test_all_lists_every_public_name_and_nothing_else() -> None:
    for name in engram.__all__:  # the names are loaded on first use: load them all first
        getattr(engram, name)
    public = {
        name
        for name, value in vars(engram).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    public |= {"chat", "tools", "__version__"}  # the chat and tools modules and the version are API
    assert set(engram.__all__) == public


def test_every_exported_name_resolves() -> None:
    for name in engram.__all__:
        assert getattr(engram, name) is not None, name


def test_import_engram_loads_no_submodule() -> None:
    """``import engram`` defines the names and loads them on first use (PEP 562)."""
    import subprocess
    import sys

    code = (
        "import sys, engram; print(sorted(m for m in sys.modules if m.startswith('engram.')));"
        "from engram import Engram, Message; print(engram.Engram is Engram, Message.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "True engram.models"]
    assert set(dir(engram)) >= set(engram.__all__)


def test_errors_share_one_base() -> None:
    errors = [getattr(engram, n) for n in engram.__all__ if n.endswith(("Error", "NotFound"))]
    errors += [engram.CorruptedData]
    assert errors and all(issubclass(e, engram.EngramError) for e in errors)


def test_import_engram_leaves_optional_parts_unloaded() -> None:
    """``import engram`` stays light: what only some programs use is loaded on first use.

    (The time itself is measured by ``benchmarks/import_time.py``, not asserted here.)
    """
    import subprocess
    import sys

    lazy = [
        "openai",  # the model client's SDK: when a model is used
        "dateutil",  # date phrases: on the first one that needs it
        "engram.search.dates",
        "tiktoken",  # token counting: with the first vocabulary
        "socket",  # the shared job queue: when a store offers one
        "engram.tools",  # tool schemas: on first use of engram.tools
        "engram.chat",  # the chat loop: on first use of engram.chat
        "engram.transfer.documents",  # session documents: export and import
        "engram.background.queue",
        "engram.exchanges",
    ]
    code = f"import sys, engram; print([m for m in {lazy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = "import engram; print(engram.tools.schemas('openai')[0]['function']['name'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "search_history"  # the lazy attribute still works
