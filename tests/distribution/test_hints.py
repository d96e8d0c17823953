"""Every install hint names Engram's own distribution, never the unrelated ``engram``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from engram.errors import DISTRIBUTION, MissingDependency, install_hint

ROOT = Path(__file__).resolve().parents[2]
#: ``engram[...]`` or ``pip install engram`` (the other project), not ``engram-conversation-...``.
FOREIGN = re.compile(r"(?<![\w-])engram\[|pip install (?:-U |--upgrade )?['\"]?engram(?![\w-])")
TEXTS = [
    ROOT / "README.md",
    ROOT / "Makefile",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(p for p in (ROOT / "src" / "engram").rglob("*") if p.suffix in {".py", ".html", ".md"}),
]


def test_the_distribution_is_the_one_pyproject_builds() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        assert tomllib.load(file)["project"]["name"] == DISTRIBUTION
    assert install_hint("server") == f"pip install '{DISTRIBUTION}[server]'"


def test_the_foreign_pattern_catches_old_hints() -> None:
    for old in ("pip install 'engram[mcp]'", "reinstall engram[embeddings]", "pip install engram"):
        assert FOREIGN.search(old), old
    assert not FOREIGN.search(install_hint("mcp"))
    assert not FOREIGN.search("pip install -e '.[server]' && engram serve")


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_text_names_the_foreign_package(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for m in FOREIGN.finditer(text)
    ]
    assert not found, f"{path.name} names the unrelated `engram` package: {found}"


def test_a_missing_dependency_names_the_extra_and_the_cause() -> None:
    error = MissingDependency.extra("engram serve", "server", ImportError("No module named 'x'"))
    assert str(error) == (
        f"engram serve needs the 'server' extra: pip install '{DISTRIBUTION}[server]'"
        " (No module named 'x')"
    )


@pytest.mark.parametrize(
    ("code", "blocked", "extra"),
    [
        ("import engram.server", "fastapi", "server"),
        ("import engram.store.postgres.connection", "psycopg", "postgres"),
        ("import engram.mcp", "mcp", "mcp"),
        ("import engram.integrations.openai_agents", "agents", "agents"),
        ("import engram.integrations.langchain", "langchain_core", "langchain"),
        ("import engram.integrations.langgraph", "langgraph", "langgraph"),
        ("import engram.integrations.adk", "google.adk", "adk"),
        ("import engram.search.embeddings as e; e.MiniLMEmbedder()", "onnxruntime", "embeddings"),
    ],
)
def test_a_missing_extra_is_named_with_the_distribution(
    code: str, blocked: str, extra: str
) -> None:
    script = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from engram.errors import MissingDependency\n"
        f"try:\n    {code}\n"
        "except MissingDependency as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert f"needs the '{extra}' extra: {install_hint(extra)}" in out.stdout, out.stderr


def test_engram_serve_without_the_server_extra_says_what_to_install(tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['uvicorn'] = None\n"
        "from engram.cli import main\n"
        f"main(['serve', '--db', 'sqlite:///{tmp_path / 'x.db'}'])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith(
        f"Error: engram serve needs the 'server' extra: {install_hint('server')}"
    )
    assert "Traceback" not in out.stderr
