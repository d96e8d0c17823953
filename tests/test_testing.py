from __future__ import annotations

import json
import urllib.request

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
