"""The public surface: ``engram.__all__`` names exactly what the package exports."""

from __future__ import annotations

import types

import engram


def test_all_lists_every_public_name_and_nothing_else() -> None:
    public = {
        name
        for name, value in vars(engram).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    public |= {"tools", "__version__"}  # the tools module and the version are part of the API
    public |= set(engram._ASYNC)  # the async facade, loaded on first use
    assert set(engram.__all__) == public


def test_every_exported_name_resolves() -> None:
    for name in engram.__all__:
        assert getattr(engram, name) is not None, name


def test_errors_share_one_base() -> None:
    errors = [getattr(engram, n) for n in engram.__all__ if n.endswith(("Error", "NotFound"))]
    errors += [engram.CorruptedData]
    assert errors and all(issubclass(e, engram.EngramError) for e in errors)
