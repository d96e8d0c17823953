"""The prompts of recorded cases are the same, byte for byte, as before the rows rewrite.

``tests/data/context_golden.json`` holds the SHA-256 of each case's whole
``Context`` (prompt, ids, omissions, notes, counts) as the builder that made a
``Message`` per row gave it; see :mod:`tests.context.golden`.
"""

from __future__ import annotations

import json

import pytest
from tests.context import golden

RECORDED: dict[str, str] = json.loads(golden.GOLDEN.read_text())


def _mismatches(digests: dict[str, str]) -> list[str]:
    return sorted(name for name, value in digests.items() if RECORDED.get(name) != value)


def test_every_case_is_recorded() -> None:
    assert len(RECORDED) == golden.LIBRARY_CASES + 2 * golden.STORE_SESSIONS * len(
        golden.STORE_CALLS
    )


@pytest.mark.slow
def test_library_prompts_unchanged() -> None:
    digests = dict(golden.library_digests())
    assert len(digests) == golden.LIBRARY_CASES
    assert _mismatches(digests) == []


@pytest.mark.parametrize("backend", sorted(golden.STORES))
def test_store_prompts_unchanged(backend: str) -> None:
    digests = {f"{backend}:{k}": v for k, v in golden.store_digests(golden.STORES[backend])}
    assert len(digests) == golden.STORE_SESSIONS * len(golden.STORE_CALLS)
    assert _mismatches(digests) == []
