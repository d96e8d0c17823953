"""The built distributions: what ``pip install 'engram-conversation-memory[server]'`` gets.

``python -m build`` makes an sdist and, from it, a wheel; both pass ``twine check``.
The wheel is installed with the server extra into a fresh virtual environment
and ``engram serve`` runs from there, in a temporary directory with no
``PYTHONPATH``: the dashboard, its templates and static files, the vendored API
docs, the sample conversation and the token vocabulary must all come from the
installed package, never from this source tree.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import engram
from engram.cli.demo import DEMO_SCOPE
from engram.errors import DISTRIBUTION, install_hint

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: Longest wait for the installed server to answer /healthz.
START_SECONDS = 90.0
#: Exercises the vocabulary beyond ASCII (the count must match this tree's exactly).
TEXT = "Pro is priced at $14 per month — décidé à Zürich, 価格は十四ドル. 🚀"


@dataclass(frozen=True)
class Installed:
    """A virtual environment holding only the wheel and its server extra."""

    venv: Path
    wheel: Path
    sdist: Path

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a new user: no PYTHONPATH, no Engram or model settings of ours."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key != "PYTHONPATH" and not key.startswith(("ENGRAM_", "OPENAI_", "VIRTUAL_ENV"))
    }
    env["HOME"] = str(home)
    return env


def run(args: list[object], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    out = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, f"{args} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    env = clean_env(base)
    dist = base / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=base, env=env)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=base, env=env)
    run([venv / "bin" / "python", "-m", "pip", "install", f"{wheel}[server]"], cwd=base, env=env)
    return Installed(venv, wheel, sdist)


def test_both_distributions_pass_twine_check(installed: Installed, tmp_path: Path) -> None:
    out = run(
        [sys.executable, "-m", "twine", "check", "--strict", installed.wheel, installed.sdist],
        cwd=tmp_path,
        env=clean_env(tmp_path),
    )
    assert out.count("PASSED") == 2, out


def test_the_wheel_is_named_and_versioned_as_engram(installed: Installed) -> None:
    name = DISTRIBUTION.replace("-", "_")
    assert installed.wheel.name.startswith(f"{name}-{engram.__version__}-")


def test_the_venv_imports_the_installed_package(installed: Installed, tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    code = "import engram, sys; print(engram.__file__)"
    where = Path(run([installed.bin("python"), "-c", code], cwd=tmp_path, env=env).strip())
    assert where.is_relative_to(installed.venv) and not where.is_relative_to(ROOT)
    version = run([installed.bin("engram"), "--version"], cwd=tmp_path, env=env)
    assert engram.__version__ in version


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, data: object = None) -> tuple[int, bytes]:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@dataclass(frozen=True)
class Served:
    """The installed ``engram serve``: its address and what it printed."""

    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def served(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``engram serve --sample`` from the installed package, in an empty directory."""
    work = tmp_path_factory.mktemp("serve")
    port = free_port()
    command = [
        installed.bin("engram"),
        "serve",
        "--db",
        f"sqlite:///{work / 'engram.db'}",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--sample",
    ]
    log = (work / "serve.log").open("w")
    env = clean_env(work) | {"PYTHONUNBUFFERED": "1"}  # the banner reaches the log at once
    process = subprocess.Popen(command, cwd=work, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert process.poll() is None, (work / "serve.log").read_text()
            try:
                if get(f"{url}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (work / "serve.log").read_text()
            time.sleep(0.25)
        yield Served(url, work / "serve.log")
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)
        log.close()


def test_the_dashboard_shows_the_sample_from_the_installed_package(served: Served) -> None:
    status, page = get(f"{served.url}/")
    assert status == 200
    assert DEMO_SCOPE in page.decode()  # a template rendered over the packaged sample


@pytest.mark.parametrize(
    ("path", "marker"),
    [
        ("/static/htmx.min.js", b"htmx"),
        ("/static/dashboard.css", b"{"),
        ("/docs/static/swagger-ui-bundle.js", b"SwaggerUIBundle"),
        ("/docs", b"/docs/static/swagger-ui-bundle.js"),
        ("/openapi.json", b'"openapi"'),
    ],
)
def test_static_files_and_documents_are_served(served: Served, path: str, marker: bytes) -> None:
    status, body = get(f"{served.url}{path}")
    assert status == 200 and marker in body


def test_the_banner_offers_mcp_only_with_its_extra(served: Served) -> None:
    banner = served.output()
    assert f"{served.url}/docs" in banner
    assert f"{served.url}/mcp" not in banner  # only the server extra: /mcp is not served
    assert f"MCP        not served: it needs the 'mcp' extra ({install_hint('mcp')})" in banner
    assert get(f"{served.url}/mcp")[0] == 404


def test_token_counts_match_this_tree(served: Served, tmp_path: Path) -> None:
    with engram.open(f"sqlite:///{tmp_path / 'ref.db'}", llm=None) as mem:
        expected = mem.session("counted", scope="wheel").add("user", TEXT).tokens
    status, body = get(
        f"{served.url}/v1/scopes/wheel/sessions/counted/messages", {"role": "user", "content": TEXT}
    )
    assert status == 201, body
    assert json.loads(body)["tokens"] == expected
