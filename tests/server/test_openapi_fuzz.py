"""schemathesis over the whole API document: no 5xx, no response outside its schema, no
undocumented status code or content type (in-process ASGI, bounded examples).

Unknown query parameters are ignored, as HTTP APIs usually do, so schemathesis's
negative-data check (which expects them refused) is not run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

import engram
from engram.proxy import ProxySettings
from engram.server import ServerSettings, create_app
from engram.testing import FakeAnthropicServer, FakeLLMServer

#: Examples per operation: enough to reach every status path, small enough for make test.
EXAMPLES = 8

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]

_state: dict[str, Any] = {}


def _document() -> dict[str, Any]:
    # The document does not depend on the data: read it from an app over a throw-away store.
    with engram.open("memory://openapi-document", llm=None) as mem:
        document: dict[str, Any] = create_app(mem).openapi()
    return document


schema = schemathesis.openapi.from_dict(_document())


@pytest.fixture(scope="module", autouse=True)
def served_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The app under test, over SQLite with a session, messages, a memory and an admin key;
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
        _state["app"] = create_app(mem, settings)
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
    case.call_and_validate(headers=auth, checks=CHECKS, app=_state["app"])
