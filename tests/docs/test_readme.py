"""Every Python block in the README and docs runs, and every CLI command is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engram import telemetry
from engram.cli import main
from engram.testing import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def blocks(doc: Path) -> list[str]:
    return [match.group(1) for match in BLOCK.finditer(doc.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("doc", [d for d in DOCS if blocks(d)], ids=lambda d: d.name)
def test_python_blocks_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks of one document run in order, in one namespace, as a reader would."""
    monkeypatch.chdir(tmp_path)  # engram.open() writes ./engram.db here
    monkeypatch.setattr(telemetry, "_tracer", None)  # the traces example's provider ends here
    monkeypatch.delenv("ENGRAM_URL", raising=False)
    with FakeLLMServer() as server:
        # An example that talks to a model talks to the scripted one, as the SDK
        # would to OpenAI (OPENAI_BASE_URL / OPENAI_API_KEY are the SDK's variables).
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.delenv("ENGRAM_LLM_BASE_URL", raising=False)  # they come before the SDK's
        monkeypatch.delenv("ENGRAM_LLM_API_KEY", raising=False)
        server.reply("We chose $14 per month for Pro.")
        namespace: dict[str, object] = {"__name__": f"doc_{doc.stem}"}
        for index, code in enumerate(blocks(doc)):
            exec(compile(code, f"{doc.name}#block{index}", "exec"), namespace)
        # The reader's OPENAI_API_KEY is what reaches the server, never a placeholder.
        sent = {r.headers.get("authorization") for r in server.requests if r.method == "POST"}
        assert sent <= {"Bearer test"}
        for value in namespace.values():  # close what the example opened
            close = getattr(value, "close", None)
            if callable(close) and type(value).__module__.startswith("engram"):
                close()


def test_every_cli_command_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in main.commands:
        assert f"engram {name}" in readme, f"`engram {name}` is not documented in the README"


def test_every_setting_and_model_variable_is_in_the_readme() -> None:
    from engram.config import SETTINGS
    from engram.llm import client

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    model = [client.ENV_BASE_URL, client.ENV_API_KEY, client.ENV_MODEL, client.ENV_TIMEOUT]
    missing = [v for v in [s.env for s in SETTINGS.values()] + model if f"`{v}`" not in readme]
    assert missing == []
