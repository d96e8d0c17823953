"""A refused proxied request stores nothing and calls no model; upstream errors keep no key.

Everything that would fail after the first write is checked first: a scope or session
the response headers cannot carry (an emoji, a newline, from the body), a body nested
10,000 deep, a lone surrogate in ``system`` or ``model``, a number JSON cannot carry.
Each is a 422 naming the field. An upstream error body goes back with the configured
key, ``sk-...`` keys and bearer tokens redacted. A real server on 127.0.0.1, the
scripted upstream, every backend.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.proxy.live import serving

from engram.engine import Engram
from engram.proxy import ProxySettings
from engram.proxy.redact import redact
from engram.server import ServerSettings, create_app
from engram.testing import FakeLLMServer

#: Seconds a request may take: a loaded machine may be slow to answer.
TIMEOUT = 30

UPSTREAM_KEY = "upstream-key-7f3a9c1e"
JSON_TYPE = {"Content-Type": "application/json"}


@pytest.fixture
def site(mem: Engram) -> Iterator[tuple[str, FakeLLMServer]]:
    with FakeLLMServer() as upstream:
        proxy = ProxySettings(upstream.base_url, api_key=UPSTREAM_KEY, timeout=5)
        with serving(create_app(mem, ServerSettings(key_cache_seconds=0, proxy=proxy))) as url:
            yield url, upstream


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], **extra}


def _refused(url: str, body: str, field: str, headers: dict[str, str] | None = None) -> str:
    answer = httpx.post(
        f"{url}/v1/chat/completions",
        content=body,
        headers={**JSON_TYPE, **(headers or {})},
        timeout=TIMEOUT,
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["field"] == field, error
    return str(error["message"])


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"user": "\U0001f600"}, "user"),
        ({"user": "a\nb"}, "user"),
        ({"prompt_cache_key": "x\r\nSet-Cookie: a=b"}, "prompt_cache_key"),
        ({"metadata": {"session_id": "tab\there"}}, "metadata.session_id"),
        ({"user": "u", "metadata": {"scope": "\U0001f680"}}, "metadata.scope"),
    ],
)
def test_an_id_the_headers_cannot_carry_is_refused_before_anything(
    site: tuple[str, FakeLLMServer], mem: Engram, extra: dict[str, Any], field: str
) -> None:
    url, upstream = site
    message = _refused(url, json.dumps(_chat(**extra)), field)
    assert "headers cannot carry" in message
    assert upstream.requests == [] and mem.scopes() == []


def test_a_latin1_id_travels(site: tuple[str, FakeLLMServer], mem: Engram) -> None:
    url, upstream = site
    upstream.reply("Hola.")
    answer = httpx.post(f"{url}/v1/chat/completions", json=_chat(user="jos\u00e9"), timeout=TIMEOUT)
    assert answer.status_code == 200
    assert answer.headers["X-Engram-Session"].encode("latin-1") == "jos\u00e9".encode("latin-1")
    assert [m.content for m in mem.session("jos\u00e9", "default").messages()] == ["hi", "Hola."]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("[" * 10_000 + "]" * 10_000, "body"),
        (
            json.dumps(_chat(user="u"))[:-1] + ', "metadata": ' + '{"a": ' * 70 + "1" + "}" * 71,
            None,
        ),
        (
            json.dumps(_chat(user="u")).replace(
                '"hi"', '"hi"}, {"role": "system", "content": "a\\ud800"'
            ),
            "messages.1.content",
        ),
        (json.dumps(_chat(user="u")).replace('"gpt-4o-mini"', '"gpt\\udfff"'), "model"),
        (json.dumps(_chat(user="u"))[:-1] + ', "temperature": NaN}', "temperature"),
        (
            '{"\\ud83d": 1, ' + json.dumps(_chat(user="u"))[1:],
            "\\ud83d",
        ),  # quoted escaped: UTF-8 cannot carry it
    ],
)
def test_a_body_the_upstream_call_cannot_carry_is_refused_before_anything(
    site: tuple[str, FakeLLMServer], mem: Engram, body: str, field: str | None
) -> None:
    url, upstream = site
    answer = httpx.post(
        f"{url}/v1/chat/completions", content=body, headers=JSON_TYPE, timeout=TIMEOUT
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    if field is None:  # nested too deep: the path of the first level past the limit
        assert error["field"].startswith("metadata.a.a") and "deeper than 64" in error["message"]
    else:
        assert error["field"] == field
    assert upstream.requests == [] and mem.scopes() == []


def test_upstream_errors_come_back_without_credentials(
    site: tuple[str, FakeLLMServer], mem: Engram
) -> None:
    url, upstream = site
    quoted = (
        f"Incorrect API key provided: {UPSTREAM_KEY}. You sent Authorization: Bearer "
        f"{UPSTREAM_KEY}; did you mean sk-proj-AbC123dEf456gHi789 or egk_AAAABBBBCCCCDDDD?"
    )
    upstream.fail(401, quoted)
    answer = httpx.post(f"{url}/v1/chat/completions", json=_chat(user="u"), timeout=TIMEOUT)
    assert answer.status_code == 401
    text = answer.text
    for secret in (UPSTREAM_KEY, "sk-proj-AbC123dEf456gHi789", "egk_AAAABBBBCCCCDDDD"):
        assert secret not in text
    assert "Incorrect API key provided: [redacted]" in text
    assert "Bearer [redacted]" in text
    assert answer.json()["error"]["type"] == "server_error"  # the upstream's body, otherwise as is
    assert mem.session("u", "default").messages()[0].content == "hi"  # the question stays


def test_redaction_keeps_everything_else() -> None:
    body = b'{"error": "key sk-abcdefgh12345678 and BEARER tok.en-1= refused", "x": "\xff"}'
    out = redact(body + b"\xfe", ["tok.en-1="])
    assert out == (b'{"error": "key [redacted] and BEARER [redacted] refused", "x": "\xff"}\xfe')
    assert redact(b"a task-management sk-short plan") == b"a task-management sk-short plan"


def _response_id(payload: str) -> str:
    """A response id whose conversation is ``payload`` (JSON text), as a client could forge."""
    encoded = base64.urlsafe_b64encode(payload.encode("utf-8", "surrogatepass")).decode()
    return "resp_" + "0" * 24 + encoded.rstrip("=")


@pytest.mark.parametrize(
    "payload", ['["sc","a\\ud800"]', '["sc","a\\nb"]', '["\\ud83d\\ude80","s"]']
)
def test_a_response_id_naming_what_headers_cannot_carry_is_refused(
    site: tuple[str, FakeLLMServer], mem: Engram, payload: str
) -> None:
    url, upstream = site
    body = {"model": "gpt-4o-mini", "input": "hi", "previous_response_id": _response_id(payload)}
    answer = httpx.post(f"{url}/v1/responses", json=body, timeout=TIMEOUT)
    assert answer.status_code == 422, answer.text  # a lone surrogate was a 500
    assert answer.json()["error"]["field"] == "previous_response_id"
    assert upstream.requests == [] and mem.scopes() == []
