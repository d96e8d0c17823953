from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import pytest

from engram import tools
from engram.errors import ConfigError
from engram.models import JSON
from engram.tools import Length, Range, register, schemas, unregister
from engram.tools.schema import derive

RETRIEVAL = [
    "search_history",
    "get_messages_by_date",
    "get_extended_context",
    "get_message_by_id",
    "get_memory_stats",
    "expand",
]
JSON_TYPES = {"string", "integer", "number", "boolean"}


def parameters_of(flavor: str, schema: JSON) -> tuple[str, str, JSON]:
    """(name, description, parameters) of one tool schema in any flavor."""
    if flavor == "openai":
        assert set(schema) == {"type", "function"} and schema["type"] == "function"
        fn = schema["function"]
        assert set(fn) == {"name", "description", "parameters"}
        return fn["name"], fn["description"], fn["parameters"]
    if flavor == "responses":
        assert set(schema) == {"type", "name", "description", "parameters", "strict"}
        assert schema["type"] == "function" and schema["strict"] is False
        return schema["name"], schema["description"], schema["parameters"]
    key = "input_schema" if flavor == "anthropic" else "inputSchema"
    assert set(schema) == {"name", "description", key}
    return schema["name"], schema["description"], schema[key]


class TestFlavors:
    @pytest.mark.parametrize("flavor", ["openai", "responses", "anthropic", "mcp"])
    def test_every_retrieval_tool_in_every_flavor(self, flavor: str) -> None:
        listed = schemas(flavor)
        names = [parameters_of(flavor, s)[0] for s in listed]
        assert names[: len(RETRIEVAL)] == RETRIEVAL
        for schema in listed:
            name, description, parameters = parameters_of(flavor, schema)
            assert description and description[0].isupper() and description.endswith(".")
            assert "Args" not in description  # only the text before the sections
            assert parameters["type"] == "object"
            assert parameters["additionalProperties"] is False
            assert "session" not in parameters["properties"], name
            for prop_name, prop in parameters["properties"].items():
                assert prop["type"] in JSON_TYPES, (name, prop_name)
                assert prop["description"], (name, prop_name)
            for required in parameters.get("required", []):
                assert required in parameters["properties"]
            json.dumps(schema)  # plain JSON

    @pytest.mark.parametrize("flavor", ["openai", "responses", "anthropic", "mcp"])
    def test_parameters_are_valid_json_schema(self, flavor: str) -> None:
        jsonschema = pytest.importorskip("jsonschema")
        for schema in schemas(flavor):
            _, _, parameters = parameters_of(flavor, schema)
            jsonschema.Draft202012Validator.check_schema(parameters)

    def test_search_history_schema(self) -> None:
        (schema,) = schemas("anthropic", names=["search_history"])
        props = schema["input_schema"]["properties"]
        assert schema["input_schema"]["required"] == ["query"]
        assert list(props) == [
            "query", "limit", "role", "date", "all_sessions", "context", "as_of", "max_tokens",
        ]  # fmt: skip
        assert props["max_tokens"]["minimum"] == 200 and "default" not in props["max_tokens"]
        assert "ISO 8601" in props["as_of"]["description"]
        assert props["limit"] == {
            "type": "integer",
            "description": "Most results to return.",
            "minimum": 1,
            "maximum": 50,
            "default": 5,
        }
        assert props["role"]["enum"] == ["system", "user", "assistant", "tool"]
        assert "default" not in props["role"]  # None is not advertised
        assert props["all_sessions"]["default"] is False
        assert props["query"]["minLength"] == 1
        assert "monday" in props["date"]["description"]

    def test_extended_context_is_capped_at_50(self) -> None:
        (schema,) = schemas("openai", names=["get_extended_context"])
        props = schema["function"]["parameters"]["properties"]
        assert props["count"]["maximum"] == 50 and props["count"]["default"] == 30
        assert props["before_id"]["type"] == "integer"
        assert "required" not in schema["function"]["parameters"]

    def test_no_argument_tool(self) -> None:
        (schema,) = schemas("mcp", names=["get_memory_stats"])
        assert schema["inputSchema"]["properties"] == {}

    def test_names_select_and_order(self) -> None:
        listed = schemas("mcp", names=["get_message_by_id", "search_history"])
        assert [s["name"] for s in listed] == ["get_message_by_id", "search_history"]

    def test_copies_are_independent(self) -> None:
        first = schemas("openai")
        first[0]["function"]["parameters"]["properties"].clear()
        assert schemas("openai")[0]["function"]["parameters"]["properties"]

    def test_unknown_flavor(self) -> None:
        with pytest.raises(ConfigError, match="gemini"):
            schemas("gemini")
        with pytest.raises(ConfigError):
            schemas("gemini", names=[])

    def test_unknown_name(self) -> None:
        with pytest.raises(ConfigError, match="nope"):
            schemas("openai", names=["nope"])


def _custom(
    session: Any,
    word: Annotated[str, Length(1, 10)],
    times: Annotated[int, Range(1, 3)] = 1,
    mood: Literal["calm", "loud"] | None = None,
) -> JSON:
    """Repeat a word.

    Longer explanation for the model.

    Args:
        word: The word to repeat.
        times: How often, at most
            three times.
        mood: How to say it.

    Returns:
        The repeated word.
    """
    text = " ".join([word] * times)
    return {"text": text.upper() if mood == "loud" else text}


@pytest.fixture
def custom_tool() -> Iterator[str]:
    register(_custom, name="repeat")
    yield "repeat"
    unregister("repeat")


class TestRegistration:
    def test_registered_tool_joins_schemas_and_dispatch(self, custom_tool: str) -> None:
        (schema,) = schemas("openai", names=[custom_tool])
        fn = schema["function"]
        assert fn["description"] == "Repeat a word. Longer explanation for the model."
        props = fn["parameters"]["properties"]
        assert props["times"]["description"] == "How often, at most three times."
        assert props["times"]["maximum"] == 3
        assert props["word"]["maxLength"] == 10
        assert props["mood"]["enum"] == ["calm", "loud"]
        assert custom_tool in [s["name"] for s in schemas("mcp")]
        answer = json.loads(
            tools.dispatch(None, custom_tool, '{"word": "hi", "times": 2, "mood": "loud"}')
        )  # type: ignore[arg-type]
        assert answer == {"text": "HI HI"}

    def test_name_clash_is_refused(self, custom_tool: str) -> None:
        with pytest.raises(ConfigError, match="already registered"):
            register(_custom, name=custom_tool)

    def test_decorator_with_options(self) -> None:
        @register(items_key="rows", name="rows_tool")
        def rows_tool(session: Any) -> JSON:
            """List rows."""
            return {"rows": []}

        try:
            assert tools.TOOLS["rows_tool"].items_key == "rows"
        finally:
            unregister("rows_tool")


class TestDerivationErrors:
    def test_no_docstring(self) -> None:
        def bare(session: Any, x: int) -> JSON:
            return {}

        with pytest.raises(ConfigError, match="docstring"):
            derive(bare)

    def test_undocumented_parameter(self) -> None:
        def half(session: Any, x: int, y: int) -> JSON:
            """Half documented.

            Args:
                x: The x.
            """
            return {}

        with pytest.raises(ConfigError, match="'y'"):
            derive(half)

    def test_unsupported_type(self) -> None:
        def listy(session: Any, xs: list[int]) -> JSON:
            """Takes a list.

            Args:
                xs: Numbers.
            """
            return {}

        with pytest.raises(ConfigError, match="unsupported type"):
            derive(listy)

    def test_kwargs_refused(self) -> None:
        def loose(session: Any, **kwargs: Any) -> JSON:
            """Takes anything."""
            return {}

        with pytest.raises(ConfigError, match="kwargs"):
            derive(loose)
