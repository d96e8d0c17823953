"""PostgreSQL down: opening fails fast, in one line, with libpq's cause, and logs nothing."""

from __future__ import annotations

import logging
import socket
import time

import pytest

pytest.importorskip("psycopg_pool")

import engram
from engram.errors import ConnectionLost

pytestmark = pytest.mark.postgres


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: refused


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        (f"postgresql://engram:secret@127.0.0.1:{_closed_port()}/engram", "refused"),
        ("postgresql://engram@no-such-host.invalid/engram", "no-such-host.invalid"),
    ],
    ids=["refused", "unknown host"],
)
def test_open_fails_fast_with_the_cause_on_one_line(
    url: str, cause: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="psycopg")
    started = time.monotonic()
    with pytest.raises(ConnectionLost) as caught:
        engram.open(url, llm=None, timeout=30)
    assert time.monotonic() - started < 10  # not the 30 s pool timeout
    message = str(caught.value)
    assert cause in message
    assert "\n" not in message
    assert "secret" not in message  # the password is masked
    assert not [r for r in caplog.records if r.name.startswith("psycopg")]  # no pool lines
