"""`make run` runs from a venv of its own with only the server extra, never the tests' venv.

If both shared one venv, the test extras installed by ``make test`` would supply
a module the server extra forgets, and ``make run`` would work on the CI machine
but not on a fresh clone. ``.ci/check-make-run`` runs ``make run`` for real.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def recipe(target: str) -> list[str]:
    """The commands ``make`` would run for ``target`` from scratch (nothing is run)."""
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.splitlines()


def venvs_installed_into(lines: list[str]) -> dict[str, set[str]]:
    """``{venv: {pip install targets}}`` of the ``pip install -e`` lines."""
    found: dict[str, set[str]] = {}
    for line in lines:
        match = re.match(r"(\S+)/bin/python -m pip install .*-e '(\S+)'", line)
        if match:
            found.setdefault(match[1], set()).add(match[2])
    return found


def test_make_run_installs_only_the_server_extra_into_its_own_venv() -> None:
    run = recipe("run")
    installs = venvs_installed_into(run)
    assert list(installs.values()) == [{".[server]"}], installs
    (venv,) = installs
    assert run[-1].startswith(f"{venv}/bin/engram serve ")


def test_make_test_never_installs_into_the_run_venv() -> None:
    (run_venv,) = venvs_installed_into(recipe("run"))
    test_venvs = venvs_installed_into(recipe("test"))
    assert test_venvs and run_venv not in test_venvs, test_venvs


def test_the_ci_runs_the_make_run_check_after_the_tests() -> None:
    steps = [
        line
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert steps == ["make test", ".ci/check-make-run"]
