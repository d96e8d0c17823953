"""The MCP server in-process, with the SDK's own client, on every backend."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_helpers import in_process, payload, run_client, seed

from engram import tools
from engram.engine import Engram
from engram.mcp import Binding
from engram.mcp.server import memories_uri, scope_tools, summary_uri


@pytest.fixture
def seeded(mem: Engram) -> Engram:
    return seed(mem)


READ_TOOLS = [t.name for t in tools.TOOLS.values()] + ["list_memories"]
WRITE_TOOLS = ["add_memory", "edit_memory", "delete_memory"]


class TestListing:
    def test_history_tools_are_the_typed_definitions_plus_a_session_argument(
        self, seeded: Engram
    ) -> None:
        async def body(client: Client) -> Any:
            return (await client.list_tools()).tools

        listed = run_client(in_process(seeded, Binding("proj", "chat")), body)
        assert [t.name for t in listed] == READ_TOOLS + WRITE_TOOLS
        for item in listed:
            source = {
                **tools.TOOLS,
                **{tools.declared(f).name: tools.declared(f) for f in tools.MEMORY_TOOLS},
            }[item.name]
            expected = source.schema("mcp")["inputSchema"]
            properties = dict(item.input_schema["properties"])
            if item.name in scope_tools():  # memories belong to the scope: no session
                assert "session" not in properties
            else:
                assert properties.pop("session")["type"] == "string"
            assert properties == expected["properties"]
            assert item.input_schema.get("required") == expected.get("required")
            assert item.description == source.description
            assert item.annotations.read_only_hint is (item.name not in WRITE_TOOLS)

    def test_read_only_binding_offers_and_runs_no_writing_tool(self, seeded: Engram) -> None:
        async def body(client: Client) -> Any:
            names = [t.name for t in (await client.list_tools()).tools]
            refused = await client.call_tool("delete_memory", {"memory_id": 1})
            return names, refused

        names, refused = run_client(
            in_process(seeded, Binding("proj", "chat", writable=False)), body
        )
        assert names == READ_TOOLS
        assert refused.is_error
        assert payload(refused)["error"]["type"] == "unknown_tool"
        assert len(seeded.memories("proj").list()) == 1


class TestCalls:
    def test_every_tool_answers(self, seeded: Engram) -> None:
        async def body(client: Client) -> dict[str, Any]:
            out: dict[str, Any] = {}
            calls = {
                "search_history": {"query": "pricing"},
                "get_messages_by_date": {"date": "2025-03-03"},
                "get_extended_context": {"count": 5},
                "get_memory_stats": {},
                "search_memories": {"query": "meetings"},
                "list_memories": {},
                "add_memory": {"content": "The launch is planned for June"},
            }
            for name, arguments in calls.items():
                out[name] = await client.call_tool(name, arguments)
            first = payload(out["search_history"])["results"][0]["id"]
            out["get_message_by_id"] = await client.call_tool(
                "get_message_by_id", {"message_id": first}
            )
            out["expand"] = await client.call_tool("expand", {"ids": f"#{first}"})
            added = payload(out["add_memory"])["memory"]["id"]
            out["edit_memory"] = await client.call_tool(
                "edit_memory", {"memory_id": added, "content": "The launch is planned for July"}
            )
            out["delete_memory"] = await client.call_tool("delete_memory", {"memory_id": added})
            return out

        results = run_client(in_process(seeded, Binding("proj", "chat")), body)
        assert set(results) == set(READ_TOOLS + WRITE_TOOLS)
        for name, result in results.items():
            assert not result.is_error, (name, result.content)
            assert result.structured_content == payload(result)
        assert payload(results["search_history"])["count"] >= 1
        assert payload(results["get_messages_by_date"])["count"] == 2
        assert payload(results["get_memory_stats"])["total_messages"] == 2
        assert "pricing" in payload(results["get_message_by_id"])["content"]
        assert "pricing" in payload(results["expand"])["messages"][0]["content"]
        assert payload(results["search_memories"])["count"] == 1
        assert payload(results["add_memory"])["status"] == "created"
        assert (
            payload(results["edit_memory"])["memory"]["content"] == "The launch is planned for July"
        )
        assert [m.content for m in seeded.memories("proj").list()] == [
            "User prefers meetings after 2pm"
        ]

    def test_session_argument_picks_a_conversation_of_the_bound_scope(self, seeded: Engram) -> None:
        async def body(client: Client) -> Any:
            return await client.call_tool("get_memory_stats", {"session": "second"})

        result = run_client(in_process(seeded, Binding("proj", "chat")), body)
        assert payload(result)["total_messages"] == 1


BAD_CALLS = [
    ("search_history", {}, "invalid_arguments"),
    ("search_history", {"query": "x", "limit": 0}, "invalid_arguments"),
    ("get_messages_by_date", {"date": "the day the moon fell"}, "invalid_date"),
    ("get_message_by_id", {"message_id": 999_999}, "not_found"),
    ("edit_memory", {"memory_id": 999_999, "content": "x"}, "not_found"),
    ("no_such_tool", {}, "unknown_tool"),
    ("get_memory_stats", {"session": "missing"}, "not_found"),
    ("get_memory_stats", {"session": 5}, "invalid_arguments"),
    ("add_memory", {"content": "x" * 601}, "invalid_arguments"),
]


class TestErrors:
    def test_bad_calls_are_tool_errors_naming_the_problem(self, seeded: Engram) -> None:
        async def body(client: Client) -> list[Any]:
            return [await client.call_tool(name, arguments) for name, arguments, _ in BAD_CALLS]

        results = run_client(in_process(seeded, Binding("proj", "chat")), body)
        for (name, _, kind), result in zip(BAD_CALLS, results, strict=True):
            assert result.is_error, name
            assert payload(result)["error"]["type"] == kind, (name, payload(result))
        assert len(seeded.memories("proj").list()) == 1


class TestIsolation:
    def test_no_tool_reaches_another_scope(self, seeded: Engram) -> None:
        secret = seeded.session("vault", "other").messages()[0].id
        other_memory = seeded.memories("other").list()[0].id

        async def body(client: Client) -> list[Any]:
            return [
                await client.call_tool("get_message_by_id", {"message_id": secret}),
                await client.call_tool("search_history", {"query": "zebra", "all_sessions": True}),
                await client.call_tool("search_history", {"query": "zebra", "session": "vault"}),
                await client.call_tool("search_memories", {"query": "zebras"}),
                await client.call_tool("delete_memory", {"memory_id": other_memory}),
                await client.call_tool("edit_memory", {"memory_id": other_memory, "content": "x"}),
            ]

        by_id, search, named, memories, delete, edit = run_client(
            in_process(seeded, Binding("proj", "chat")), body
        )
        assert payload(by_id)["error"]["type"] == "not_found"
        assert payload(search)["count"] == 0
        assert payload(named)["error"]["type"] == "not_found"
        assert payload(memories)["count"] == 0
        assert payload(delete)["error"]["type"] == "not_found"
        assert payload(edit)["error"]["type"] == "not_found"
        assert [m.id for m in seeded.memories("other").list()] == [other_memory]


class TestResources:
    def test_memories_and_summaries_of_the_bound_scope(self, seeded: Engram) -> None:
        async def body(client: Client) -> Any:
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            templates = (await client.list_resource_templates()).resource_templates
            memories = await client.read_resource(memories_uri("proj"))
            summary = await client.read_resource(summary_uri("proj", "chat"))
            return listed, templates, memories, summary

        listed, templates, memories, summary = run_client(
            in_process(seeded, Binding("proj", "chat")), body
        )
        assert listed[0] == memories_uri("proj")
        assert set(listed[1:]) == {summary_uri("proj", "chat"), summary_uri("proj", "second")}
        assert templates[0].uri_template == "engram://proj/sessions/{session}/summary"
        import json

        assert [m["content"] for m in json.loads(memories.contents[0].text)["memories"]] == [
            "User prefers meetings after 2pm"
        ]
        document = json.loads(summary.contents[0].text)
        assert (document["session"], document["summary_version"], document["watermark"]) == (
            "chat",
            0,
            0,
        )

    @pytest.mark.parametrize(
        "uri",
        [
            memories_uri("other"),
            summary_uri("other", "vault"),
            summary_uri("proj", "missing"),
            "engram://x",
        ],
    )
    def test_other_scopes_and_unknown_uris_are_not_found(self, seeded: Engram, uri: str) -> None:
        async def body(client: Client) -> Any:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            return refused.value

        refused = run_client(in_process(seeded, Binding("proj", "chat")), body)
        assert str(refused).startswith(("no resource", "no session"))
        assert "zebra" not in str(refused)


class TestQuestionTime:
    def test_search_history_reads_dates_against_as_of(self, seeded: Engram) -> None:
        # The pricing exchange happened on 2025-03-03: "yesterday" as of the 4th, not today.
        async def body(client: Client) -> list[Any]:
            arguments = {"query": "pricing", "date": "yesterday"}
            return [
                await client.call_tool("search_history", arguments),
                await client.call_tool(
                    "search_history", {**arguments, "as_of": "2025-03-04T09:00:00Z"}
                ),
            ]

        today, then = run_client(in_process(seeded, Binding("proj", "chat")), body)
        assert payload(today)["count"] == 0
        found = payload(then)  # the user message is the question being asked: left out
        assert found["count"] == 1 and found["from"].startswith("2025-03-03")
        (note,) = found["results"]
        assert note["role"] == "assistant" and note["partner"]["role"] == "user"
        assert "[pricing]" in note["partner"]["snippet"]
