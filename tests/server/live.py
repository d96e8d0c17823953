"""A real ``engram serve`` process on 127.0.0.1, for end-to-end tests and benchmarks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    """``engram serve --db URL`` in a subprocess; stopped (and waited for) on exit."""

    def __init__(self, url: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "engram.cli", "--db", url, "serve"]
        command += ["--host", "127.0.0.1", "--port", str(self.port), *args]
        environ = {**os.environ, **(env or {})}
        environ["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT / "src"), str(ROOT), environ.get("PYTHONPATH", "")]
        )
        self.process = subprocess.Popen(
            command, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def __enter__(self) -> LiveServer:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.stop()
                raise RuntimeError(f"engram serve exited {self.process.returncode}: {output}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("engram serve did not answer /healthz within 60 s")

    def stop(self) -> str:
        """Stop the server (SIGTERM, then kill after 20 s) and return what it printed."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stdout is None:
            return ""
        with self.process.stdout:
            return self.process.stdout.read()

    def __exit__(self, *exc: object) -> None:
        self.output = self.stop()
