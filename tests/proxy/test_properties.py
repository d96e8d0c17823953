"""Random clients against the proxy and a strict upstream: no refused prompt, no duplicate.

Hypothesis plays a client: one that sends only its new messages or one that
re-sends its whole list, streaming or not, with or without idempotency keys,
through tool loops it answers fully, partly or not at all, Engram's own tool
rounds, retries of its last request, regenerated answers and edited turns.
After every request:

* the strict upstream (it answers 400 the way OpenAI does) refused nothing;
* the stored history, as the client sees it (Engram's own tool rounds left
  out), is exactly the client's own record of the conversation: every message
  once, in order;
* a retry reached no upstream and stored nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from tests.proxy.conftest import SCOPE, proxy_app
from tests.proxy.live import serving

import engram
from engram import tools
from engram.engine import Engram
from engram.testing import FakeLLMServer

#: One step of a client: what it does, and what the upstream answers.
STEPS = st.sampled_from(
    ["text", "text", "calls", "calls", "engram", "mixed", "retry", "regenerate", "edit"]
)
TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


@dataclass
class Client:
    """A client app and its own record of the conversation (what a full-history app sends)."""

    session: str
    full: bool
    stream: bool
    keyed: bool
    record: list[dict[str, Any]] = field(default_factory=list)
    last: list[dict[str, Any]] = field(default_factory=list)  # the messages last sent
    last_key: str | None = None
    pending: list[str] = field(default_factory=list)  # call ids the app has not answered
    counter: int = 0

    def text(self, what: str) -> str:
        self.counter += 1
        return f"{what} {self.counter} of {self.session[:8]}"


def _view(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Messages as compared: role, text, call ids, the call answered."""
    return [
        (
            m["role"],
            (m.get("content") or "").strip(),
            tuple(c["id"] for c in m.get("tool_calls") or []),
            m.get("tool_call_id"),
        )
        for m in messages
    ]


def _stored_view(mem: Engram, session: str) -> list[tuple[Any, ...]]:
    """The stored history as a client sees it: Engram's own tool rounds left out."""
    ours: set[str] = set()
    out = []
    for m in mem.session(session, SCOPE).messages(limit=1000):
        if m.role == "tool" and m.tool_call_id in ours:
            continue
        calls = m.tool_calls or []
        mine = [c["id"] for c in calls if c["function"]["name"] in tools.TOOLS]
        ours.update(mine)
        if calls and len(mine) == len(calls):
            continue
        shown = [c for c in calls if c["id"] not in mine]
        out.append(m.to_openai() | {"tool_calls": shown})
    return _view(out)


def _call(app: openai.OpenAI, client: Client, messages: list[dict[str, Any]], retry: int) -> Any:
    """Send ``messages``; return the answer as a chat message (streamed or not)."""
    headers = {"X-Engram-Session": client.session, "X-Engram-Scope": SCOPE}
    headers["x-stainless-retry-count"] = str(retry)
    if client.keyed:
        if not retry:
            client.last_key = uuid.uuid4().hex
        headers["Idempotency-Key"] = client.last_key or ""
    options: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages, "tools": [TOOL]}
    if not client.stream:
        reply = app.chat.completions.create(**options, extra_headers=headers)
        message = reply.choices[0].message
        return {
            "role": "assistant",
            "content": message.content,
            "tool_calls": [c.model_dump() for c in message.tool_calls or []],
        }
    text, calls = "", {}
    for chunk in app.chat.completions.create(**options, stream=True, extra_headers=headers):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for piece in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    piece.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = piece.id or call["id"]
                if piece.function:
                    call["function"]["name"] += piece.function.name or ""
                    call["function"]["arguments"] += piece.function.arguments or ""
    return {"role": "assistant", "content": text or None, "tool_calls": list(calls.values())}


def _script(upstream: FakeLLMServer, step: str, client: Client, data: st.DataObject) -> None:
    """Queue the upstream's answer(s) to the next request."""

    def call(name: str) -> dict[str, Any]:
        return {"name": name, "arguments": {}, "id": client.text(name).replace(" ", "_")}

    if step == "calls":
        count = data.draw(st.integers(1, 3), label="calls")
        upstream.reply_tool_calls([call("lookup") for _ in range(count)])
    elif step == "engram":
        upstream.reply_tool_calls([call("get_memory_stats")])
        upstream.reply(client.text("answer after a search"))
    elif step == "mixed":
        upstream.reply_tool_calls([call("get_memory_stats"), call("lookup")])
    else:
        upstream.reply(client.text("answer"))


def _new_messages(client: Client, step: str, data: st.DataObject) -> list[dict[str, Any]]:
    """The app's next messages: results for its pending calls (all, some, none), then a question."""
    out: list[dict[str, Any]] = []
    if client.pending:
        how = data.draw(st.sampled_from(["all", "all", "some", "none"]), label="answer calls")
        answered = {"all": client.pending, "some": client.pending[:1], "none": []}[how]
        out += [
            {"role": "tool", "tool_call_id": call_id, "content": client.text("result")}
            for call_id in answered
        ]
        client.pending = []
        if how == "all" and data.draw(st.booleans(), label="let the model answer"):
            return out
    out.append({"role": "user", "content": client.text("question")})
    return out


def _answered(client: Client, answer: dict[str, Any]) -> None:
    message = {k: v for k, v in answer.items() if v not in (None, [])}
    if message.get("content") or message.get("tool_calls"):
        client.record.append({"role": "assistant", **message})
    client.pending = [c["id"] for c in answer.get("tool_calls") or []]


def _step(
    app: openai.OpenAI,
    upstream: FakeLLMServer,
    mem: Engram,
    client: Client,
    step: str,
    data: st.DataObject,
) -> None:
    before = len(upstream.requests)
    if step == "retry":
        if not client.last or not client.record or client.record[-1]["role"] != "assistant":
            return
        stored = _stored_view(mem, client.session)
        answer = _call(app, client, client.last, retry=1)
        assert len(upstream.requests) == before, "a retry reached the upstream"
        assert _stored_view(mem, client.session) == stored, "a retry stored something"
        assert _view([{k: v for k, v in answer.items() if v not in (None, [])}]) == _view(
            [client.record[-1]]
        )
        return
    if step in ("regenerate", "edit"):
        if not client.full or not _edit(client, step, data):
            return
        _script(upstream, "text", client, data)
    else:
        _script(upstream, step, client, data)
        new = _new_messages(client, step, data)
        client.record += new
        client.last = list(client.record) if client.full else new
    answer = _call(app, client, list(client.last), retry=0)
    _answered(client, answer)


def _edit(client: Client, step: str, data: st.DataObject) -> bool:
    """Regenerate the last answer, or edit a question after the first answer; False: cannot."""
    record = client.record
    if step == "regenerate":
        end = len(record)
        while end and record[end - 1]["role"] == "assistant":
            end -= 1
        if end == len(record) or not any(m["role"] == "assistant" for m in record[:end]):
            return False  # a list with no answer in it is read as a new question
        client.record = record[:end]
    else:
        answered = [i for i, m in enumerate(record) if m["role"] == "assistant"]
        users = [i for i, m in enumerate(record) if m["role"] == "user" and answered
                 and i > answered[0]]  # fmt: skip
        if not users:
            return False
        at = data.draw(st.sampled_from(users), label="edited question")
        client.record = [*record[:at], {"role": "user", "content": client.text("edited")}]
    client.pending = []
    client.last = list(client.record)
    return True


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Engram, FakeLLMServer, str]]:
    with (
        engram.open(f"sqlite:///{tmp_path / 'props.db'}", llm=None) as mem,
        FakeLLMServer(strict=True) as upstream,
        serving(proxy_app(mem, upstream, timeout=10)) as url,
    ):
        yield mem, upstream, url


def _check(world: tuple[Engram, FakeLLMServer, str], examples: int, steps: int = 8) -> None:
    mem, upstream, url = world

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        derandomize=examples < 50,
    )
    @given(
        full=st.booleans(),
        stream=st.booleans(),
        keyed=st.booleans(),
        steps=st.lists(STEPS, min_size=1, max_size=steps),
        data=st.data(),
    )
    def run(full: bool, stream: bool, keyed: bool, steps: list[str], data: st.DataObject) -> None:
        client = Client(uuid.uuid4().hex, full, stream, keyed)
        upstream.clear()  # nothing left from an earlier (failed) example
        with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0, timeout=30) as app:
            for step in steps:
                note(f"{step}: record {_view(client.record)}")
                _step(app, upstream, mem, client, step, data)
                assert [m for _, m in upstream.refused] == []
                assert upstream.pending == 0
                assert _stored_view(mem, client.session) == _view(client.record)

    run()


def test_random_clients_leave_the_conversation_once_and_valid_prompts(
    world: tuple[Engram, FakeLLMServer, str],
) -> None:
    _check(world, 25)


@pytest.mark.slow
def test_random_clients_many(world: tuple[Engram, FakeLLMServer, str]) -> None:
    _check(world, 300, steps=20)  # long enough for an edit older than the first read


def test_the_view_reads_a_tool_round() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": json.dumps({})}}
    assert _view([{"role": "assistant", "content": None, "tool_calls": [call]}]) == [
        ("assistant", "", ("c",), None)
    ]
