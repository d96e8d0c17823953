"""schemathesis over HTTP against the whole API document: the document and the server agree.

A real server on 127.0.0.1; for every operation: no 5xx, no response outside its
schema, no undocumented status code or content type, and no request the document
calls valid refused, except the refusals the README explains ("What the API
document cannot say": sizes in UTF-8 bytes, one field against another, what the
stored history must hold, date phrases and zone names, the proxy's OpenAI body).
Those are listed in :data:`EXPLAINED`, each matched by the field the error names
and its words, and a test checks the README names each.

Unknown query parameters are ignored, as HTTP APIs usually do, so schemathesis's
negative-data check (which expects them refused) is not run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks
from tests.proxy.live import serving

import engram
from engram.proxy import ProxySettings
from engram.server import ServerSettings, create_app
from engram.testing import FakeAnthropicServer, FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
#: Examples per operation: enough to reach every status path, small enough for make test
#: (ENGRAM_FUZZ_EXAMPLES=200 for a deeper run).
EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "8"))
#: A request the document calls valid may be refused with these (errors of state: a key
#: that lacks rights, a session or memory that does not exist, a conflict).
REFUSALS = {400, 413, 415, 422}

SESSION = "/v1/scopes/{scope}/sessions/{session}"
#: Refusals of schema-valid requests that the README explains: operation -> (the field the
#: error names, or its start; a regular expression its message matches).
EXPLAINED: dict[str, list[tuple[str, str]]] = {
    f"GET {SESSION}/by-date": [("when", "cannot read date"), ("tz", "time zone")],
    f"POST {SESSION}/messages": [
        ("content", r"bytes|image|block|tool_use|tool_result|part|data URL|empty"),
        ("tool_call_id", r"answers no|no tool call|not answer"),
        ("tool_calls", r"bytes"),
        ("metadata", r"bytes|deep|levels"),
        ("created_at", r"years 1-9999"),
        ("policy", r"must be below"),
        ("Idempotency-Key", r"already stored other messages"),
    ],
    f"POST {SESSION}/context": [
        ("reserve", r"a prompt needs at least"),
        ("policy", r"must be below"),
    ],
    f"PUT {SESSION}": [("policy", r"must be below")],
    f"POST {SESSION}/compact": [("policy", r"must be below")],
    "POST /v1/scopes/{scope}/memories": [("metadata", r"characters of JSON|deep|levels")],
    "PATCH /v1/scopes/{scope}/memories/{memory_id}": [
        ("metadata", r"characters of JSON|deep|levels")
    ],
    "POST /v1/chat/completions": [("", "")],  # OpenAI's request, checked by the proxy
    "POST /v1/responses": [("", "")],  # OpenAI's Responses request, checked by the proxy
    "POST /v1/messages": [("", "")],  # Anthropic's request, checked by the proxy
}

_state: dict[str, Any] = {}


def _document() -> dict[str, Any]:
    # The document does not depend on the data: read it from an app over a throw-away store.
    with engram.open("memory://openapi-document", llm=None) as mem:
        document: dict[str, Any] = create_app(mem).openapi()
    return document


schema = schemathesis.openapi.from_dict(_document())


def _explained(operation: str, error: dict[str, Any]) -> bool:
    field = re.sub(r"^messages\.\d+\.", "", error.get("field") or "")
    return any(
        field.startswith(start) and re.search(words, error.get("message", ""))
        for start, words in EXPLAINED.get(operation, [])
    )


@schemathesis.check
def valid_data_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
    """A request the document calls valid is not refused, unless the README explains it."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    if response.status_code not in REFUSALS:
        return None
    error = response.json().get("error", {})
    if _explained(case.operation.label, error):
        return None
    raise AssertionError(
        f"the document calls this request valid, the server refused it with "
        f"{response.status_code}: {error}"
    )


CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
    valid_data_accepted,
]


@pytest.fixture(scope="module", autouse=True)
def served_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A real server over SQLite with a session, messages, a memory and an admin key;
    the proxy's upstreams are the scripted models."""
    path: Path = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    with (
        engram.open(f"sqlite:///{path}", llm=None) as mem,
        FakeLLMServer() as upstream,
        FakeAnthropicServer(strict=False) as claude,
    ):
        chat = mem.session("s", "p", policy="summary_buffer")
        chat.add_many(
            [{"role": "user", "content": "pricing"}, {"role": "assistant", "content": "ok"}]
        )
        mem.memories("p").create("A memory to find.")
        _state["key"] = mem.api_keys().create(admin=True).secret
        proxy = ProxySettings(upstream.base_url, timeout=10)
        anthropic = ProxySettings(claude.base_url, timeout=10)
        settings = ServerSettings(key_cache_seconds=60, proxy=proxy, anthropic=anthropic)
        app = create_app(mem, settings)
        with serving(app) as url:
            _state["url"] = url
            yield


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_every_operation_conforms(case: Any) -> None:
    auth = {"Authorization": f"Bearer {_state['key']}"}
    case.call_and_validate(headers=auth, checks=CHECKS, base_url=_state["url"])


def test_the_readme_explains_every_exception() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("What the API document cannot say", 1)[1].split("\n\n", 1)[1]
    section = section.split("\n\n", 1)[0]
    assert "proxy" in section
    for operation, allowed in EXPLAINED.items():
        for field, _words in allowed:
            assert not field or f"`{field}`" in section, (operation, field)
