from __future__ import annotations

import json
import urllib.request
from typing import Any, ClassVar

from engram.testing import FakeLLMServer, FakeResponse, RecordedRequest


def test_serves_openai_completion_and_records_request():
    with FakeLLMServer(model="m") as server:
        server.reply("hello")
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request(
            server.base_url + "/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            data = json.loads(response.read())
    assert data["choices"][0]["message"]["content"] == "hello"
    assert data["model"] == "m"
    assert data["usage"]["prompt_tokens"] > 0
    assert server.requests[0].messages == [{"role": "user", "content": "hi"}]


def test_default_responder_function():
    def responder(request: RecordedRequest) -> FakeResponse:
        return FakeResponse(content=str(len(request.messages)))

    with FakeLLMServer(default=responder) as server:
        body = json.dumps({"messages": [{"role": "user", "content": "a"}] * 3}).encode()
        request = urllib.request.Request(server.base_url + "/chat/completions", data=body)
        with urllib.request.urlopen(request, timeout=5) as response:
            assert json.loads(response.read())["choices"][0]["message"]["content"] == "3"


def test_stop_wakes_slow_answers_quickly():
    import threading
    import time

    server = FakeLLMServer().start()
    server.slow(30)
    errors: list[Exception] = []

    def call() -> None:
        body = json.dumps({"messages": []}).encode()
        try:
            request = urllib.request.Request(server.base_url + "/chat/completions", data=body)
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
        except Exception as exc:  # the server drops the answer on stop
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    while not server.requests:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    thread.join()
    assert time.monotonic() - started < 5
    assert errors


class TestStrict:
    """The strict fake refuses what OpenAI refuses, with OpenAI's 400 body."""

    CALL: ClassVar[dict[str, Any]] = {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }

    def _post(self, server: FakeLLMServer, body: dict) -> tuple[int, dict]:
        import urllib.error

        request = urllib.request.Request(
            server.base_url + "/chat/completions", data=json.dumps(body).encode()
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def test_unanswered_call_orphan_result_and_duplicate_result_are_refused(self) -> None:
        call = {"role": "assistant", "content": None, "tool_calls": [self.CALL]}
        result = {"role": "tool", "tool_call_id": "c1", "content": "r"}
        user = {"role": "user", "content": "hi"}
        bad = [
            ([user, call, user], "did not have response messages: c1"),
            ([user, call], "did not have response messages: c1"),
            ([user, result], "must be a response to a preceeding message"),
            ([user, call, result, result], "must be a response to a preceeding message"),
            ([user, call, call, result], "did not have response messages: c1"),
        ]
        with FakeLLMServer(strict=True) as server:
            server.reply("fine")
            for messages, message in bad:
                status, body = self._post(server, {"model": "m", "messages": messages})
                assert status == 400, messages
                assert message in body["error"]["message"]
                assert body["error"]["type"] == "invalid_request_error"
                assert body["error"]["param"].startswith("messages.[")
            status, body = self._post(server, {"model": "m", "messages": [user, call, result]})
            assert (status, body["choices"][0]["message"]["content"]) == (200, "fine")
            assert len(server.refused) == len(bad)
            status, body = self._post(
                server, {"model": "m", "messages": [user], "tool_choice": "auto"}
            )
            assert status == 400 and body["error"]["param"] == "tool_choice"

    def test_lenient_by_default_and_a_system_message_limit(self) -> None:
        orphan = [{"role": "tool", "tool_call_id": "x", "content": "r"}]
        with FakeLLMServer() as server:
            assert self._post(server, {"messages": orphan})[0] == 200
        system = [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}]
        with FakeLLMServer(strict=True, max_system_messages=1) as server:
            status, body = self._post(server, {"messages": system})
        assert status == 400 and "2 system messages" in body["error"]["message"]

    def test_response_headers_are_sent(self) -> None:
        import urllib.error

        with FakeLLMServer() as server:
            server.fail(429, "slow down", headers={"Retry-After": "7"})
            request = urllib.request.Request(
                server.base_url + "/chat/completions", data=b'{"messages": []}'
            )
            try:
                urllib.request.urlopen(request, timeout=5)
            except urllib.error.HTTPError as exc:
                assert exc.code == 429 and exc.headers["Retry-After"] == "7"
            else:
                raise AssertionError("expected 429")
