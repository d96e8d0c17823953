from __future__ import annotations

from pathlib import Path

import pytest

from .harness import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)
