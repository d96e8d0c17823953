"""The routes do what the library does, in HTTP shapes (SQLite, in-process ASGI client)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from tests.images import image_part, png_url

from engram.context.anatomy import RECENT, SYSTEM, describe
from engram.engine import Engram
from engram.idempotency import RECORD
from engram.memories.rendering import SECTION_TITLE as MEMORIES_TITLE
from engram.tokens import count_message, storage_counter

MESSAGES = "/v1/scopes/phoenix/sessions/chat-1/messages"
SESSION = "/v1/scopes/phoenix/sessions/chat-1"


def _seed(api: TestClient) -> list[int]:
    batch = [
        {"role": "user", "content": "What did we decide about pricing?"},
        {"role": "assistant", "content": "We chose $14 per month for Pro."},
        {"role": "user", "content": "And the launch date?", "created_at": "2025-03-06T10:00:00Z"},
    ]
    stored = api.post(MESSAGES, json={"messages": batch})
    assert stored.status_code == 201, stored.text
    return [m["id"] for m in stored.json()["messages"]]


class TestMessages:
    def test_append_one_then_a_batch_in_openai_format(self, api: TestClient) -> None:
        one = api.post(MESSAGES, json={"role": "user", "content": "hello"})
        assert one.status_code == 201
        body = one.json()
        assert body["count"] == 1 and body["messages"][0]["tokens"] == body["tokens"] > 0
        sdk_shaped = {  # what the OpenAI SDK's model_dump() of an assistant message holds
            "role": "assistant",
            "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}],
            "refusal": None,
            "audio": None,
            "function_call": None,
            "annotations": [],
        }
        batch = api.post(MESSAGES, json={"messages": [sdk_shaped]})
        assert batch.status_code == 201, batch.text
        assert batch.json()["messages"][0]["content"] == "Hi\nthere"

    def test_an_image_message_is_stored_whole_and_read_back(self, api: TestClient) -> None:
        parts = [{"type": "text", "text": "What is this?"}, image_part(png_url(1024, 1024), "high")]
        stored = api.post(MESSAGES, json={"role": "user", "content": parts})
        assert stored.status_code == 201, stored.text
        out = stored.json()["messages"][0]
        assert out["content"] == "What is this?" and out["parts"] == parts
        assert out["tokens"] == count_message(storage_counter(), "user", "What is this?") + 765
        assert api.get(MESSAGES).json()["messages"][0]["parts"] == parts

    def test_anthropic_tool_blocks_are_accepted(self, api: TestClient) -> None:
        batch = [
            {"role": "user", "content": "Find the plan"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "found"}],
            },
        ]
        stored = api.post(MESSAGES, json={"messages": batch})
        assert stored.status_code == 201, stored.text
        roles = [(m["role"], m["tool_call_id"]) for m in stored.json()["messages"]]
        assert roles == [("user", None), ("assistant", None), ("tool", "t1")]

    def test_a_malformed_image_is_refused_naming_the_field(self, api: TestClient) -> None:
        bad = [{"type": "text", "text": "x"}, image_part("data:image/png;base64,!!")]
        refused = api.post(MESSAGES, json={"messages": [{"role": "user", "content": bad}]})
        assert refused.status_code == 422
        assert "content[1].image_url.url" in refused.json()["error"]["message"]
        assert api.get(MESSAGES).status_code == 404  # nothing stored, not even the session

    def test_a_refused_batch_writes_nothing_and_names_the_message(self, api: TestClient) -> None:
        bad = [{"role": "user", "content": "fine"}, {"role": "robot", "content": "no"}]
        refused = api.post(MESSAGES, json={"messages": bad})
        assert refused.status_code == 422
        error = refused.json()["error"]
        assert error["type"] == "invalid_message" and "#1" in error["message"]
        assert api.get(MESSAGES).status_code == 404  # nothing stored, not even the session

    def test_a_retried_append_with_an_idempotency_key_stores_once(self, api: TestClient) -> None:
        once = {"Idempotency-Key": "append-1"}
        first = api.post(MESSAGES, json={"role": "user", "content": "hello"}, headers=once)
        again = api.post(MESSAGES, json={"role": "user", "content": "hello"}, headers=once)
        assert first.status_code == again.status_code == 201
        assert again.json()["messages"] == first.json()["messages"]
        assert len(api.get(MESSAGES).json()["messages"]) == 1
        blank = api.post(
            MESSAGES, json={"role": "user", "content": "x"}, headers={"Idempotency-Key": " "}
        )
        assert blank.status_code == 422 and "idempotency_key" in blank.json()["error"]["message"]
        assert blank.json()["error"]["field"] == "Idempotency-Key"

    def test_the_idempotency_record_never_appears_in_api_output(self, api: TestClient) -> None:
        once = {"Idempotency-Key": "append-1"}
        body = {"role": "user", "content": "hello pricing", "metadata": {"mine": 1}}
        shown = [api.post(MESSAGES, json=body, headers=once).json()["messages"][0]]
        shown += api.get(MESSAGES).json()["messages"]
        shown.append(api.get(f"/v1/scopes/phoenix/messages/{shown[0]['id']}").json())
        shown += [h["message"] for h in api.get(f"{SESSION}/search?q=pricing").json()["hits"]]
        assert len(shown) == 4
        assert all(message["metadata"] == {"mine": 1} for message in shown)

    def test_a_key_reused_with_another_body_is_422_naming_it(self, api: TestClient) -> None:
        key = {"Idempotency-Key": "append-1"}
        first = api.post(MESSAGES, json={"role": "user", "content": "hello"}, headers=key)
        other = api.post(MESSAGES, json={"role": "user", "content": "bye"}, headers=key)
        assert first.status_code == 201
        assert other.status_code == 422
        assert other.json()["error"] == {
            "type": "idempotency_conflict",
            "message": "idempotency key 'append-1' already stored other messages in session "
            "'chat-1': a retry must send the same messages, new messages need a new key",
            "field": "Idempotency-Key",
        }
        assert [m["content"] for m in api.get(MESSAGES).json()["messages"]] == ["hello"]

    def test_user_metadata_cannot_pose_as_an_idempotency_key(self, api: TestClient) -> None:
        mine = {"role": "user", "content": "first", "metadata": {"idempotency_key": "K"}}
        assert api.post(MESSAGES, json=mine).status_code == 201
        later = api.post(
            MESSAGES, json={"role": "user", "content": "second"}, headers={"Idempotency-Key": "K"}
        )
        assert later.status_code == 201
        assert [m["content"] for m in later.json()["messages"]] == ["second"]
        forged = {"role": "user", "content": "x", "metadata": {RECORD: {"key": "K2"}}}
        refused = api.post(MESSAGES, json=forged)
        assert refused.status_code == 422
        assert refused.json()["error"]["field"] == f"metadata.{RECORD}"
        contents = [m["content"] for m in api.get(MESSAGES).json()["messages"]]
        assert contents == ["first", "second"]

    def test_history_pages_with_a_cursor(self, api: TestClient) -> None:
        ids = _seed(api)
        first = api.get(MESSAGES, params={"limit": 2}).json()
        assert [m["id"] for m in first["messages"]] == ids[:2]
        rest = api.get(MESSAGES, params={"limit": 2, "after": first["next_after"]}).json()
        assert [m["id"] for m in rest["messages"]] == ids[2:]
        assert rest["next_after"] is None

    def test_one_message_by_id_only_within_its_scope(self, api: TestClient) -> None:
        ids = _seed(api)
        assert api.get(f"/v1/scopes/phoenix/messages/{ids[0]}").json()["id"] == ids[0]
        other = api.get(f"/v1/scopes/elsewhere/messages/{ids[0]}")
        assert other.status_code == 404
        assert other.json()["error"]["type"] == "message_not_found"


class TestScopesAndSessions:
    def test_scopes_with_totals(self, api: TestClient) -> None:
        _seed(api)
        scopes = api.get("/v1/scopes").json()["scopes"]
        assert [(s["scope"], s["sessions"], s["messages"]) for s in scopes] == [("phoenix", 1, 3)]
        assert scopes[0]["tokens"] > 0 and scopes[0]["last_activity"]

    def test_sessions_paginated_and_sorted_by_activity(self, api: TestClient) -> None:
        for name in ("a", "b", "c"):
            api.post(
                f"/v1/scopes/p/sessions/{name}/messages", json={"role": "user", "content": name}
            )
        recent = api.get("/v1/scopes/p/sessions", params={"limit": 2}).json()
        assert [s["session"] for s in recent["sessions"]] == ["c", "b"] and recent["total"] == 3
        oldest = api.get("/v1/scopes/p/sessions", params={"order": "oldest", "limit": 2}).json()
        assert [s["session"] for s in oldest["sessions"]] == ["a", "b"]
        tail = api.get("/v1/scopes/p/sessions", params={"order": "oldest", "offset": 2}).json()
        assert [s["session"] for s in tail["sessions"]] == ["c"]

    def test_create_with_a_policy_then_delete(self, api: TestClient) -> None:
        made = api.put("/v1/scopes/p/sessions/s", json={"policy": "summary_buffer"})
        assert made.status_code == 200 and made.json()["policy"]["name"] == "summary_buffer"
        assert api.get("/v1/scopes/p/sessions/s/stats").json()["policy"] == "summary_buffer"
        gone = api.delete("/v1/scopes/p/sessions/s").json()
        assert gone["success"] is True and gone["receipt"]["action"] == "delete_session"
        assert gone["receipt"]["counts"] == {"sessions": 1, "messages": 0}
        assert api.get("/v1/scopes/p/sessions/s").status_code == 404

    def test_delete_a_whole_scope(self, api: TestClient) -> None:
        _seed(api)
        api.post("/v1/scopes/phoenix/memories", json={"content": "Pro costs $14."})
        gone = api.delete("/v1/scopes/phoenix").json()
        receipt = gone.pop("receipt")
        assert gone == {
            "success": True,
            "sessions": 1,
            "messages": gone["messages"],
            "memories": 1,
            "forgotten": False,
        }
        assert receipt["action"] == "purge_scope" and receipt["counts"]["memories"] == 1
        assert gone["messages"] > 0
        assert api.get("/v1/scopes").json()["scopes"] == []


class TestPromptAndRetrieval:
    def test_context_fits_and_accounts_for_every_section(self, api: TestClient) -> None:
        ids = _seed(api)
        api.post("/v1/scopes/phoenix/memories", json={"content": "The team ships on Fridays."})
        ctx = api.post(
            "/v1/scopes/phoenix/sessions/chat-1/context",
            json={"budget": 2000, "reserve": 500, "system": "Be brief.", "model": "gpt-4o-mini"},
        ).json()
        assert ctx["tokens"] <= 1500 and ctx["message_ids"] == ids
        assert ctx["messages"][0] == {"role": "system", "content": "Be brief."}
        assert [s["title"] for s in ctx["sections"]] and all(
            s["tokens"] > 0 for s in ctx["sections"]
        )

    def test_section_tokens_are_those_the_dashboard_shows(
        self, api: TestClient, sqlite_engram: Engram
    ) -> None:
        _seed(api)
        api.post("/v1/scopes/phoenix/memories", json={"content": "The team ships on Fridays."})
        system = f"[{MEMORIES_TITLE}]\n" + "Answer in one short line. " * 40  # looks like one
        asked = {"budget": 4000, "system": system, "model": "gpt-4o-mini", "compact": False}
        rest = api.post("/v1/scopes/phoenix/sessions/chat-1/context", json=asked).json()
        built = sqlite_engram.session("chat-1", "phoenix").context(
            4000, system=system, model="gpt-4o-mini", compact=False
        )
        shown = describe(built, model="gpt-4o-mini")
        assert [g.title for g in shown.groups] == [SYSTEM, MEMORIES_TITLE, RECENT]
        assert rest["sections"] == [{"title": MEMORIES_TITLE, "tokens": shown.groups[1].tokens}]

    def test_search_by_date_extended_stats(self, api: TestClient) -> None:
        ids = _seed(api)
        hits = api.get("/v1/scopes/phoenix/search", params={"q": "pricing"}).json()["hits"]
        assert hits[0]["message"]["id"] == ids[0] and "[pricing]" in hits[0]["snippet"]
        only_assistant = api.get(
            "/v1/scopes/phoenix/sessions/chat-1/search",
            params={"q": "pricing", "role": "assistant"},
        ).json()["hits"]
        # The reply holds no "pricing" itself: found by its neighbour context (the question),
        # and the role filter holds.
        assert [h["message"]["role"] for h in only_assistant] == ["assistant"]
        assert "[pricing]" not in only_assistant[0]["snippet"]
        day = api.get(
            "/v1/scopes/phoenix/sessions/chat-1/by-date",
            params={"when": "2025-03-06", "tz": "Europe/Paris"},
        ).json()
        assert [m["id"] for m in day["messages"]] == [ids[2]]
        assert day["start"].startswith("2025-03-05T23:00:00")
        older = api.get(
            "/v1/scopes/phoenix/sessions/chat-1/extended", params={"before_id": ids[2]}
        ).json()
        assert [m["id"] for m in older["messages"]] == ids[:2]
        stats = api.get("/v1/scopes/phoenix/sessions/chat-1/stats").json()
        assert stats["total_messages"] == 3

    def test_search_and_by_date_read_dates_against_as_of(self, api: TestClient) -> None:
        ids = _seed(api)  # the last message is of 2025-03-06
        asked = {"q": "launch yesterday", "as_of": "2025-03-07T12:00:00Z", "partner": "true"}
        hits = api.get("/v1/scopes/phoenix/sessions/chat-1/search", params=asked).json()["hits"]
        assert hits[0]["message"]["id"] == ids[2] and hits[0].get("partner") is None
        scope_hits = api.get(
            "/v1/scopes/phoenix/search", params={"q": "pricing", "partner": "true"}
        ).json()["hits"]
        first = next(h for h in scope_hits if h["message"]["id"] == ids[0])
        assert first["partner"]["id"] == ids[1] and "$14" in first["partner_snippet"]
        day = api.get(
            "/v1/scopes/phoenix/sessions/chat-1/by-date",
            params={"when": "yesterday", "as_of": "2025-03-07T12:00:00Z"},
        ).json()
        assert [m["id"] for m in day["messages"]] == [ids[2]]
        bad = api.get("/v1/scopes/phoenix/search", params={"q": "x", "as_of": "soon"})
        assert bad.status_code == 422

    def test_a_bad_date_phrase_is_a_422_naming_it(self, api: TestClient) -> None:
        _seed(api)
        bad = api.get("/v1/scopes/phoenix/sessions/chat-1/by-date", params={"when": "blorp day"})
        assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_date"

    def test_tool_dispatcher(self, api: TestClient) -> None:
        ids = _seed(api)
        out = api.post(
            "/v1/scopes/phoenix/sessions/chat-1/tools/get_message_by_id",
            json={"arguments": {"message_id": ids[1]}},
        ).json()
        assert "$14" in out["text"] and out["name"] == "get_message_by_id"
        unknown = api.post("/v1/scopes/phoenix/sessions/chat-1/tools/rm_rf", json={}).json()
        assert unknown["result"]["error"]["type"] == "unknown_tool"


class TestCompactionAndMemories:
    def test_compact_state_and_end(self, api: TestClient, sqlite_engram: Engram) -> None:
        api.put("/v1/scopes/p/sessions/s", json={"policy": "summary_buffer"})
        words = "The roadmap covers pricing, hiring and the Phoenix launch in detail. " * 40
        for turn in range(6):
            api.post(
                "/v1/scopes/p/sessions/s/messages",
                json={
                    "messages": [
                        {"role": "user", "content": f"{turn} {words}"},
                        {"role": "assistant", "content": f"Noted {turn}. {words}"},
                    ]
                },
            )
        done = api.post("/v1/scopes/p/sessions/s/compact", json={}).json()
        state = api.get("/v1/scopes/p/sessions/s/compaction").json()
        assert state["summary_version"] >= 1 and state["watermark"] == done["watermark"] > 0
        paragraphs = state["summary"].split("\n\n")
        assert len(state["citations"]["summary"]) == len(paragraphs)
        assert all(low <= high <= state["watermark"] for c in state["citations"]["summary"]
                   for low, high in c)  # fmt: skip
        assert api.get("/v1/scopes/p/sessions/s/agent-state").json()["facts"] == []
        ended = api.post("/v1/scopes/p/sessions/s/end", json={"reason": "done"})
        assert ended.status_code == 202
        assert ended.json()["memories_url"] == "/v1/scopes/p/memories"
        assert sqlite_engram.wait_idle(30)
        assert len(api.get("/v1/scopes/p/memories").json()["memories"]) == 1

    def test_the_admin_api_shapes(self, api: TestClient) -> None:
        made = api.post("/v1/scopes/app/memories", json={"content": "Prefers short answers."})
        assert made.status_code == 201
        memory = made.json()
        assert set(memory) >= {"id", "content", "createdAt", "updatedAt"}
        edited = api.patch(
            f"/v1/scopes/app/memories/{memory['id']}", json={"content": "Prefers bullet points."}
        ).json()
        assert edited["content"] == "Prefers bullet points."
        listed = api.get("/v1/scopes/app/memories").json()
        assert [m["id"] for m in listed["memories"]] == [memory["id"]]
        deleted = api.delete(f"/v1/scopes/app/memories/{memory['id']}").json()
        assert deleted["success"] is True and deleted["action"] == "memory_delete"
        assert deleted["derived"][0]["ref"] == f"memory {memory['id']}"
        api.post("/v1/scopes/app/memories", json={"content": "Works in Paris."})
        api.post("/v1/scopes/app/memories", json={"content": "Ships on Fridays."})
        purged = api.delete("/v1/scopes/app/memories").json()
        assert purged["success"] is True and purged["deletedCount"] == 2
        assert purged["receipt"]["counts"] == {"memories": 2}
        events = [e["event"] for e in api.get("/v1/scopes/app/memories/audit").json()["events"]]
        assert events[0] == "purge" and "update" in events and "delete" in events
        missing = api.delete(f"/v1/scopes/app/memories/{memory['id']}")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "memory_not_found"


class TestForgetting:
    def test_a_deleted_message_comes_with_its_receipt(self, api: TestClient) -> None:
        ids = _seed(api)
        gone = api.delete(f"/v1/scopes/phoenix/messages/{ids[1]}", params={"rebuild": "true"})
        assert gone.status_code == 200, gone.text
        receipt = gone.json()
        assert receipt["messages"] == [[ids[1], ids[1]]] and receipt["message_count"] == 1
        assert receipt["rebuilt"] is True and receipt["session"] == "chat-1"
        kinds = {line["kind"]: line["outcome"] for line in receipt["derived"]}
        assert kinds["search_index"] == "removed"
        assert "$14" not in gone.text
        assert api.get(f"/v1/scopes/phoenix/messages/{ids[1]}").status_code == 404
        again = api.delete(f"/v1/scopes/phoenix/messages/{ids[1]}")
        assert again.status_code == 404 and again.json()["error"]["type"] == "message_not_found"
        audit = api.get("/v1/scopes/phoenix/memories/audit").json()["events"]
        assert audit[0]["receipt"]["messages"] == [[ids[1], ids[1]]]

    def test_clear_and_forget_a_scope(self, api: TestClient) -> None:
        _seed(api)
        cleared = api.delete(MESSAGES)
        assert cleared.status_code == 200 and cleared.json()["message_count"] == 3
        assert api.get(MESSAGES).json()["messages"] == []
        missing = api.delete("/v1/scopes/phoenix/sessions/nobody/messages")
        assert missing.status_code == 404
        _seed(api)
        forgotten = api.delete("/v1/scopes/phoenix", params={"forget": "true"})
        assert forgotten.status_code == 200, forgotten.text
        receipt = forgotten.json()["receipt"]
        assert receipt["counts"] == {"sessions": 1, "messages": 3, "memories": 0}
        assert receipt["action"] == "forget_scope" and forgotten.json()["messages"] == 3
        events = api.get("/v1/scopes/phoenix/memories/audit").json()["events"]
        assert [e["event"] for e in events] == ["scope_forgotten"]


class TestService:
    def test_health_ready_metrics_openapi(self, api: TestClient) -> None:
        assert api.get("/healthz").json() == {"status": "ok"}
        assert api.get("/readyz").json() == {"status": "ready"}
        _seed(api)
        api.post("/v1/scopes/phoenix/sessions/chat-1/context", json={"budget": 500})
        text = api.get("/metrics").text
        assert "engram_messages_stored_total 3.0" in text
        assert 'route="/v1/scopes/{scope}/sessions/{session}/messages",status="201"' in text
        assert "engram_prompt_tokens_sent_total" in text and "engram_llm_calls_total" in text
        assert "engram_memory_memories_created_total" in text
        doc = api.get("/openapi.json").json()
        assert "/v1/scopes/{scope}/memories" in doc["paths"]
        assert api.get("/docs").status_code == 200

    def test_every_compaction_is_counted_not_only_the_apis(
        self, sqlite_engram: Engram, api: TestClient
    ) -> None:
        chat = sqlite_engram.session("chat-1", "phoenix", policy="summary_buffer")
        for n in range(40):
            chat.add("user" if n % 2 == 0 else "assistant", f"Message {n}: launch plan. " * 30)
        assert chat.compact().committed  # a library call: the API never saw it
        api.post("/v1/scopes/phoenix/sessions/chat-1/compact", json={})  # nothing due now
        text = api.get("/metrics").text
        assert 'engram_compactions_total{outcome="offline"} 1.0' in text
        assert 'engram_compactions_total{outcome="skipped"} 1.0' in text
        assert 'engram_compaction_seconds_total{outcome="offline"}' in text

    def test_readyz_is_503_when_the_store_is_gone(
        self, sqlite_engram: Engram, make_api: Callable[..., TestClient]
    ) -> None:
        api = make_api(sqlite_engram)
        sqlite_engram.store.close()
        answer = api.get("/readyz")
        assert answer.status_code == 503 and answer.json()["error"]["type"] == "not_ready"


class TestErrors:
    def test_unknown_route_and_bad_json_share_the_error_shape(self, api: TestClient) -> None:
        missing = api.get("/v1/nothing")
        assert missing.status_code == 404 and set(missing.json()["error"]) == {
            "type",
            "message",
            "field",
        }
        broken = api.post(
            MESSAGES, content=b"{not json", headers={"content-type": "application/json"}
        )
        assert broken.status_code == 422 and broken.json()["error"]["type"] == "invalid_request"
        paged = api.get(MESSAGES, params={"limit": 100_000})
        assert paged.status_code == 422 and paged.json()["error"]["field"] == "limit"

    def test_a_body_over_the_limit_is_413(
        self, sqlite_engram: Engram, make_api: Callable[..., TestClient]
    ) -> None:
        from engram.server import ServerSettings, create_app

        small = TestClient(create_app(sqlite_engram, ServerSettings(max_body_bytes=1000)))
        declared = small.post(MESSAGES, json={"role": "user", "content": "x" * 2000})
        assert declared.status_code == 413
        assert declared.json()["error"]["type"] == "payload_too_large"

        def chunks():  # type: ignore[no-untyped-def]
            yield b'{"role": "user", "content": "'
            yield b"x" * 2000
            yield b'"}'

        streamed = small.post(
            MESSAGES, content=chunks(), headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413
        assert small.get(MESSAGES).status_code == 404  # nothing stored
        small.close()

    def test_a_batch_over_the_limit_is_refused(self, api: TestClient) -> None:
        from engram.server.settings import MAX_BATCH

        many = [{"role": "user", "content": "x"}] * (MAX_BATCH + 1)
        refused = api.post(MESSAGES, json={"messages": many})
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "messages"
