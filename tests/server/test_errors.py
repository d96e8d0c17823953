"""Errors over HTTP say what is wrong in words, and name the field at fault as a dotted path.

Real requests through the app (``TestClient`` is httpx over ASGI); each case is
one request and the exact ``{"error": {...}}`` it gets.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.images import image_part

MESSAGES = "/v1/scopes/p/sessions/s/messages"
JSON_TYPE = {"Content-Type": "application/json"}


def _error(answer: Any, status: int = 422) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert set(error) == {"type", "message", "field"}
    return error


class TestBody:
    def test_broken_json_says_where(self, api: TestClient) -> None:
        broken = b'{"role": "user", "content": "x" "name": "maya"}'
        error = _error(api.post(MESSAGES, content=broken, headers=JSON_TYPE))
        assert error == {
            "type": "invalid_request",
            "message": "the body is not valid JSON: Expecting ',' delimiter at line 1 column 33",
            "field": None,
        }

    def test_broken_json_on_a_later_line_says_what_json_says(self, api: TestClient) -> None:
        broken = '{\n  "role": "user",\n  "content": "x",\n}'
        with pytest.raises(json.JSONDecodeError) as decoded:
            json.loads(broken)
        said = decoded.value
        error = _error(api.post(MESSAGES, content=broken.encode(), headers=JSON_TYPE))
        assert error["message"] == (
            f"the body is not valid JSON: {said.msg} at line {said.lineno} column {said.colno}"
        )
        assert said.lineno == 4

    @pytest.mark.parametrize(
        ("headers", "said"),
        [
            ({}, "it has none"),
            ({"Content-Type": "text/plain"}, "this request's Content-Type is 'text/plain'"),
        ],
    )
    def test_a_body_not_sent_as_json_says_how_to_send_it(
        self, api: TestClient, headers: dict[str, str], said: str
    ) -> None:
        body = b'{"role": "user", "content": "hello"}'
        error = _error(api.post(MESSAGES, content=body, headers=headers), 415)
        assert error == {
            "type": "unsupported_media_type",
            "message": f"send the body as JSON with Content-Type: application/json ({said})",
            "field": "Content-Type",
        }
        assert api.get(MESSAGES).status_code == 404  # nothing stored

    @pytest.mark.parametrize("body", [b"", b"null"])
    def test_no_body(self, api: TestClient, body: bytes) -> None:
        error = _error(api.post(MESSAGES, content=body, headers=JSON_TYPE))
        assert error["message"] == (
            "the request needs a JSON object as its body (sent with Content-Type: application/json)"
        )

    @pytest.mark.parametrize(
        ("body", "kind"), [([1], "an array"), (5, "a number"), ("hi", "a string"), (True, "true")]
    )
    def test_a_body_that_is_no_object(self, api: TestClient, body: Any, kind: str) -> None:
        answer = api.post(MESSAGES, content=_dumps(body), headers=JSON_TYPE)
        assert _error(answer)["message"] == f"the body must be a JSON object, not {kind}"


class TestFields:
    @pytest.mark.parametrize(
        ("path", "body", "field", "says"),
        [
            (MESSAGES, {"content": "x"}, "role", "role: Field required"),
            (
                MESSAGES,
                {"messages": [{"role": "user", "content": "x"}, {"content": "y"}]},
                "messages.1.role",
                "messages.1.role: Field required",
            ),
            (
                MESSAGES,
                {"role": "user", "content": 5},
                "content",
                "content: Input should be a valid string or a valid list",
            ),
            (
                "/v1/scopes/p/sessions/s/tools/search_history",
                {"arguments": 5},
                "arguments",
                "arguments: Input should be a valid dictionary or a valid string",
            ),
        ],
    )
    def test_request_validation_names_the_field(
        self, api: TestClient, path: str, body: Any, field: str, says: str
    ) -> None:
        api.put("/v1/scopes/p/sessions/s", json={"policy": "lean"})
        error = _error(api.post(path, json=body))
        assert (error["type"], error["field"], error["message"]) == (
            "invalid_request",
            field,
            says,
        )

    def test_query_and_header_fields(self, api: TestClient) -> None:
        assert _error(api.get(MESSAGES, params={"limit": 0}))["field"] == "limit"
        long_key = {"Idempotency-Key": "k" * 300}
        error = _error(api.post(MESSAGES, json={"role": "user", "content": "x"}, headers=long_key))
        assert error["field"] == "Idempotency-Key"

    @pytest.mark.parametrize(
        ("body", "field", "starts"),
        [
            ({"role": "robot", "content": "x"}, "role", "role: unknown role 'robot'"),
            ({"role": "user", "content": "x", "name": "a b"}, "name", "name 'a b' must be"),
            ({"role": "user", "content": " "}, "content", "user message content is empty"),
            (
                {"role": "user", "content": [image_part("data:image/png;base64,!!")]},
                "content.0.image_url.url",
                "user message content[0].image_url.url: the data is not valid base64",
            ),
            (
                {"role": "user", "content": "x", "metadata": {"a": float("nan")}},
                "metadata.a",
                "metadata.a holds a non-finite number",
            ),
            (
                {"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}]},
                "messages.1.role",
                "message #1: role: unknown role 'robot'",
            ),
            (
                {"messages": [{"role": "tool", "content": "x", "tool_call_id": "c1"}]},
                "messages.0.tool_call_id",
                "message #0: tool result for 'c1' answers no earlier",
            ),
        ],
    )
    def test_a_refused_message_names_its_field(
        self, api: TestClient, body: Any, field: str, starts: str
    ) -> None:
        answer = api.post(MESSAGES, content=_dumps(body), headers=JSON_TYPE)
        error = _error(answer)
        assert (error["type"], error["field"]) == ("invalid_message", field)
        assert error["message"].startswith(starts), error["message"]
        assert api.get(MESSAGES).status_code == 404  # nothing stored

    @pytest.mark.parametrize(
        ("method", "path", "params", "body", "field"),
        [
            ("GET", "/v1/scopes/p/sessions/s/by-date", {"when": "blorp"}, None, "when"),
            (
                "GET",
                "/v1/scopes/p/sessions/s/by-date",
                {"when": "today", "tz": "Mars/X"},
                None,
                "tz",
            ),
            ("POST", "/v1/scopes/p/sessions/s/context", None, {"policy": "nope"}, "policy"),
            ("PUT", "/v1/scopes/p/sessions/s", None, {"policy": {"max_messages": -1}}, "policy"),
            ("POST", "/v1/scopes/p/memories", None, {"content": " "}, "content"),
            ("GET", "/v1/scopes/%09/sessions", None, None, "scope"),
            ("GET", "/v1/scopes/p/sessions/nobody/stats", None, None, "session"),
        ],
    )
    def test_library_errors_name_their_field(
        self,
        api: TestClient,
        method: str,
        path: str,
        params: Any,
        body: Any,
        field: str,
    ) -> None:
        api.put("/v1/scopes/p/sessions/s", json={"policy": "lean"})
        answer = api.request(method, path, params=params, json=body)
        assert answer.status_code in (404, 422), answer.text
        assert answer.json()["error"]["field"] == field, answer.text


def _dumps(value: Any) -> bytes:
    """JSON as Python's json writes it (NaN included, as a Python client would send it)."""
    return json.dumps(value).encode()


class TestUnreadableBody:
    def test_a_body_that_is_not_utf8(self, api: TestClient) -> None:
        body = b'{"role": "user", "content": "caf\xe9"}'
        error = _error(api.post(MESSAGES, content=body, headers=JSON_TYPE), 400)
        offset = body.index(b"\xe9")
        assert error["message"] == (
            f"the body is not valid JSON: it is not UTF-8 text (byte offset {offset})"
        )

    def test_a_body_nested_too_deeply(self, api: TestClient) -> None:
        body = b'{"role": "user", "content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        error = _error(api.post(MESSAGES, content=body, headers=JSON_TYPE), 400)
        assert error["message"] == "the body is not valid JSON: it is nested too deeply to read"
