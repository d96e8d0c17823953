"""The API document refuses what the server refuses: a scope of "\\t", ``after=0``, ...

The values a schemathesis run found the document admitting and the server refusing,
checked against the document itself (JSON Schema 2020-12, as OpenAPI 3.1 says). The
whole agreement is property-tested in ``test_openapi_fuzz.py``.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

import engram
from engram.server import create_app


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    with engram.open("memory://openapi-rules", llm=None) as mem:
        found: dict[str, Any] = create_app(mem).openapi()
    return found


def _valid(document: dict[str, Any], schema: dict[str, Any], value: object) -> bool:
    validator = jsonschema.Draft202012Validator({**document, **schema})
    return validator.is_valid(value)


def _parameter(document: dict[str, Any], method: str, path: str, name: str) -> dict[str, Any]:
    operation = document["paths"][path][method]
    (found,) = [p for p in operation["parameters"] if p["name"] == name]
    schema: dict[str, Any] = found["schema"]
    return schema


def _body(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


MESSAGES = "/v1/scopes/{scope}/sessions/{session}/messages"


@pytest.mark.parametrize(
    ("value", "valid"), [("phoenix", True), ("\t", False), ("", False), ("a\x00b", False)]
)
def test_scope_and_session_ids(document: dict[str, Any], value: str, valid: bool) -> None:
    for name in ("scope", "session"):
        schema = _parameter(document, "get", MESSAGES, name)
        assert _valid(document, schema, value) is valid


def test_after_starts_at_one(document: dict[str, Any]) -> None:
    schema = _parameter(document, "get", MESSAGES, "after")
    assert not _valid(document, schema, 0) and _valid(document, schema, 1)


@pytest.mark.parametrize(
    ("body", "valid"),
    [
        ({"role": "user", "content": "hi"}, True),
        ({"role": "", "content": "hi"}, False),
        ({"role": "user", "content": " \t"}, False),
        ({"role": "user", "content": "a\x00"}, False),
        ({"role": "tool", "content": "42"}, False),  # no tool_call_id
        ({"role": "tool", "content": "42", "tool_call_id": "c1"}, True),
        ({"role": "user", "content": "hi", "tool_call_id": "c1"}, False),
        ({"role": "user", "content": "hi", "name": "Maya Lee"}, False),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]}, True),
        ({"role": "user", "content": [{"type": "text", "text": "hi"}]}, True),
        ({"role": "user", "content": [{"type": "audio"}]}, False),
        ({"role": "user", "content": "hi", "metadata": {"_engram_idempotency": {}}}, False),
        ({"role": "user", "content": "hi", "metadata": {"a": [{"b": "\x00"}]}}, False),
        ({"role": "user", "content": "hi", "created_at": 1e12}, False),
    ],
)
def test_messages(document: dict[str, Any], body: dict[str, Any], valid: bool) -> None:
    assert _valid(document, _body("MessageIn"), body) is valid


@pytest.mark.parametrize(
    ("policy", "valid"),
    [
        ("lean", True),
        ("nope", False),
        ({"name": "mine", "max_messages": 20}, True),
        ({"max_messages": 0}, False),
        ({"cache_chunk": 0.9}, False),
        ({"colour": "red"}, False),
    ],
)
def test_policies(document: dict[str, Any], policy: object, valid: bool) -> None:
    assert _valid(document, _body("SessionIn"), {"policy": policy}) is valid


def test_memories_and_budgets(document: dict[str, Any]) -> None:
    assert not _valid(document, _body("MemoryIn"), {"content": ""})
    assert not _valid(document, _body("MemoryIn"), {"content": "  "})
    assert not _valid(document, _body("MemoryIn"), {"content": "x" * 601})
    assert _valid(document, _body("MemoryIn"), {"content": "Maya owns the launch."})
    assert not _valid(document, _body("ContextIn"), {"budget": 15})
    assert _valid(document, _body("ContextIn"), {"budget": 16})


def test_every_body_route_documents_415(document: dict[str, Any]) -> None:
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method in ("post", "put", "patch"):
                assert "415" in operation["responses"], (method, path)
