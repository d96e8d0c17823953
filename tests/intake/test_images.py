"""Images in messages: stored whole, counted by OpenAI's documented rule, shown as given.

Expected token values are worked out by hand from OpenAI's vision guide
("Calculating costs"); the rule itself lives in ``engram.tokens``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.images import image_part, pillow_url, png_bytes, png_header_url, png_url

import engram
from engram import Engram
from engram.errors import InvalidMessage
from engram.intake.images import image_size
from engram.tokens import (
    DEFAULT_IMAGE_RULE,
    count_message,
    count_messages,
    counter_for_model,
    image_patches,
    image_rule_for_model,
    image_tiles,
    storage_counter,
)

QUESTION = "What is on this picture?"


def text_tokens(text: str = QUESTION) -> int:
    return count_message(storage_counter(), "user", text)


def rule_tokens(model: str, size: tuple[int, int] | None, detail: str | None) -> int:
    return image_rule_for_model(model).tokens(size, detail)


class TestImageRule:
    @pytest.mark.parametrize(
        ("model", "size", "detail", "expected"),
        [
            # 1024 x 1024: shortest side 1024 -> 768 x 768, 2 x 2 tiles: 85 + 4 * 170.
            ("gpt-4o", (1024, 1024), "high", 765),
            # 2048 x 4096 -> 1024 x 2048 (fit 2048) -> 768 x 1536, 2 x 3 tiles: 85 + 6 * 170.
            ("gpt-4o", (2048, 4096), "high", 1105),
            ("gpt-4o", (4096, 8192), "low", 85),
            ("gpt-4o", (1024, 1024), "auto", 765),
            # Small images are not enlarged: 128 x 64 is one tile.
            ("gpt-4o", (128, 64), "high", 255),
            ("gpt-4.1", (1024, 1024), "high", 765),
            ("gpt-4o-mini-2024-07-18", (1024, 1024), "high", 2833 + 4 * 5667),
            ("gpt-4o-mini", (1024, 1024), "low", 2833),
            ("o1", (1024, 1024), "high", 75 + 4 * 150),
            ("gpt-5", (1024, 1024), "high", 70 + 4 * 140),
            # Patches: 1024 x 1024 is 32 x 32 = 1024 patches, times the multiplier, rounded up.
            ("gpt-4.1-mini", (1024, 1024), "high", math.ceil(1024 * 1.62)),
            ("gpt-4.1-mini", (1024, 1024), "low", math.ceil(1024 * 1.62)),
            # 1800 x 2400 is scaled to 1056 x 1408: 33 x 44 = 1452 patches.
            ("gpt-4.1-nano", (1800, 2400), None, math.ceil(1452 * 2.46)),
            ("o4-mini-2025-04-16", (1800, 2400), "high", math.ceil(1452 * 1.72)),
        ],
    )
    def test_documented_examples(
        self, model: str, size: tuple[int, int], detail: str | None, expected: int
    ) -> None:
        assert rule_tokens(model, size, detail) == expected

    def test_patches_and_tiles_of_the_guides_examples(self) -> None:
        assert image_patches(1024, 1024) == 1024
        assert image_patches(1800, 2400) == 1452
        assert image_tiles(1024, 1024) == 4
        assert image_tiles(2048, 4096) == 6

    @pytest.mark.parametrize(
        ("model", "detail", "bound"),
        [
            ("gpt-4o", "high", 85 + 8 * 170),  # 768 x 2048 after scaling: 2 x 4 tiles
            ("gpt-4o", None, 85 + 8 * 170),  # no detail means auto: counted as high
            ("gpt-4o", "low", 85),
            ("gpt-4.1-mini", "high", math.ceil(1536 * 1.62)),
        ],
    )
    def test_unknown_size_counts_the_upper_bound(
        self, model: str, detail: str | None, bound: int
    ) -> None:
        assert rule_tokens(model, None, detail) == bound

    @given(st.integers(1, 20_000), st.integers(1, 20_000))
    def test_upper_bound_holds_for_every_size(self, width: int, height: int) -> None:
        for model in ("gpt-4o", "gpt-4o-mini", "o3", "gpt-4.1-mini", "o4-mini"):
            assert rule_tokens(model, (width, height), "high") <= rule_tokens(model, None, "high")
        assert image_patches(width, height) <= 1536

    @pytest.mark.parametrize(
        ("model", "name"),
        [
            (None, DEFAULT_IMAGE_RULE.name),
            ("gpt-4o-2024-08-06", "tiles(85+170)"),
            ("ft:gpt-4.1-nano:org::abc", "patches*2.46"),
            ("openai/o4-mini", "patches*1.72"),
            ("o3-mini", "tiles(75+150)"),
            ("claude-3-5-sonnet", DEFAULT_IMAGE_RULE.name),
        ],
    )
    def test_model_names(self, model: str | None, name: str) -> None:
        assert image_rule_for_model(model).name == name


class TestImageSize:
    @pytest.mark.parametrize("fmt", ["JPEG", "GIF", "WEBP"])
    def test_formats_read_from_the_header(self, fmt: str) -> None:
        assert image_size(pillow_url(1031, 517, fmt)) == (1031, 517)

    def test_png(self) -> None:
        assert image_size(png_url(640, 48)) == (640, 48)

    def test_unknown_sizes(self) -> None:
        assert image_size("https://example.com/cat.png") is None
        assert image_size("data:image/png;base64,bm90IGFuIGltYWdl") is None  # "not an image"


def _image_message(url: str, detail: str | None = "high") -> list[dict[str, Any]]:
    return [{"type": "text", "text": QUESTION}, image_part(url, detail)]


class TestStored:
    @pytest.mark.parametrize(
        ("size", "detail", "image"),
        [((1024, 1024), "high", 765), ((512, 512), "low", 85), ((2048, 1024), "high", 1105)],
    )
    def test_tokens_are_text_plus_the_rule(
        self, mem: Engram, size: tuple[int, int], detail: str, image: int
    ) -> None:
        # 2048 x 1024 -> shortest side 768: 1536 x 768, 3 x 2 tiles: 85 + 6 * 170 = 1105.
        stored = mem.session("s", scope="p").add("user", _image_message(png_url(*size), detail))
        assert stored.tokens == text_tokens() + image
        info = mem.session("s", scope="p").info()
        assert info is not None and info.token_count == stored.tokens

    def test_round_trip_byte_identical(self, mem: Engram) -> None:
        url = png_url(37, 21)
        chat = mem.session("s", scope="p")
        stored = chat.add("user", _image_message(url, "low"))
        assert stored.content == QUESTION
        for got in (chat.messages()[0], mem.message(stored.id, scope="p")):
            assert got.parts == _image_message(url, "low")
            assert got.parts is not None and got.parts[1]["image_url"]["url"] == url
        hit = chat.search("picture")[0]  # search reads the text
        assert hit.message.parts == stored.parts

    def test_image_only_message_has_empty_text(self, mem: Engram) -> None:
        stored = mem.session("s", scope="p").add("user", [image_part(png_url(8, 8), "low")])
        assert stored.content == ""
        assert stored.tokens == text_tokens("") + 85

    def test_context_shows_it_as_given_within_budget(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "Earlier question " * 50)
        chat.add("assistant", "Earlier answer " * 50)
        parts = _image_message(png_url(1024, 1024))
        chat.add("user", parts)
        for model in (None, "gpt-4o", "gpt-4o-mini", "gpt-4.1-mini", "gpt-4", "grok-2"):
            ctx = chat.context(budget=40_000, reserve=500, model=model)
            assert ctx.messages[-1]["content"] == parts
            assert ctx.tokens == count_messages(counter_for_model(model), ctx.messages)
            assert ctx.tokens <= 40_000 - 500
        small = chat.context(budget=900, reserve=100)
        assert small.tokens <= 800 and small.messages[-1]["content"] == parts
        assert len(small.message_ids) == 1  # the image leaves no room for the history

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        sizes=st.lists(st.tuples(st.integers(1, 5000), st.integers(1, 5000)), max_size=3),
        detail=st.sampled_from([None, "low", "high", "auto"]),
        budget=st.integers(200, 6000),
        model=st.sampled_from([None, "gpt-4o-mini", "o4-mini", "claude-3-5-sonnet"]),
    )
    def test_the_prompt_never_exceeds_the_budget(
        self,
        sqlite_engram: Engram,
        sizes: list[tuple[int, int]],
        detail: str | None,
        budget: int,
        model: str | None,
    ) -> None:
        chat = sqlite_engram.session(f"s{budget}-{len(sizes)}-{detail}-{model}", scope="p")
        chat.add("user", "Earlier question " * 30)
        chat.add("assistant", "Earlier answer " * 30)
        images = [image_part(png_header_url(w, h), detail) for w, h in sizes]
        chat.add("user", [{"type": "text", "text": QUESTION}, *images])
        ctx = chat.context(budget=budget, reserve=100, model=model, compact=False)
        assert ctx.tokens <= budget - 100
        assert ctx.tokens == count_messages(counter_for_model(model), ctx.messages)

    def test_too_large_for_the_budget_shows_the_text_with_a_marker(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        stored = chat.add("user", _image_message(png_url(1024, 1024)))
        ctx = chat.context(budget=300, reserve=50)
        assert ctx.tokens <= 250
        assert ctx.truncated_ids == [stored.id]
        shown = ctx.messages[-1]["content"]
        assert isinstance(shown, str) and "1 image(s) left out" in shown
        assert chat.messages()[0].parts == stored.parts  # the stored message stays whole

    def test_edit_keeps_the_images(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        old = chat.add("user", _image_message(png_url(4, 4), "low"))
        new = chat.edit(old.id, "And now?")
        assert new.content == "And now?"
        assert new.parts == [{"type": "text", "text": "And now?"}, image_part(png_url(4, 4), "low")]
        assert new.tokens == text_tokens("And now?") + 85


BAD_PARTS: list[tuple[Any, str]] = [
    (image_part("data:image/png;base64,@@@@"), r"content\[1\]\.image_url\.url: .*base64"),
    (image_part("ftp://example.com/x.png"), r"content\[1\]\.image_url\.url must be an http"),
    (image_part("data:text/plain;base64,aGk="), r"content\[1\]\.image_url\.url: media type"),
    (image_part(png_url(2, 2), "ultra"), r"content\[1\]\.image_url\.detail"),
    ({"type": "image_url"}, r"content\[1\]\.image_url must be an object"),
    ({"type": "image_url", "image_url": {"url": 7}}, r"content\[1\]\.image_url\.url must be"),
    (
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
        r"content\[1\]\.type: 'input_audio'",
    ),
    ({"type": "file", "file": {"file_id": "f"}}, r"content\[1\]\.type: 'file'"),
    (
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "%%"}},
        r"content\[1\]\.source\.data",
    ),
    (
        image_part("data:image/png;base64," + "A" * (5 * 1_048_576)),
        r"content\[1\]\.image_url\.url is \d+ bytes; the limit",
    ),
]


class TestRefused:
    @pytest.mark.parametrize(("part", "error"), BAD_PARTS)
    def test_malformed_part_names_the_field_and_writes_nothing(
        self, mem: Engram, part: Any, error: str
    ) -> None:
        chat = mem.session("s", scope="p")
        batch = [
            {"role": "user", "content": "fine"},
            {"role": "user", "content": [{"type": "text", "text": "look"}, part]},
        ]
        with pytest.raises(InvalidMessage, match=r"message #1: user message " + error):
            chat.add_many(batch)
        assert chat.messages() == []

    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        role=st.sampled_from(["user", "assistant", "system"]),
        content=st.lists(
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                lambda inner: (
                    st.lists(inner, max_size=3)
                    | st.dictionaries(
                        st.sampled_from(
                            ["type", "text", "image_url", "url", "detail", "source", "id", "input"]
                        ),
                        inner | st.sampled_from(["text", "image_url", "image", "tool_use", "low"]),
                        max_size=4,
                    )
                ),
                max_leaves=8,
            ),
            max_size=4,
        ),
    )
    def test_any_content_is_stored_or_refused_cleanly(
        self, sqlite_engram: Engram, role: str, content: list[Any]
    ) -> None:
        chat = sqlite_engram.session("fuzz", scope="p")
        before = len(chat.messages(limit=1000))
        try:
            stored = chat.add_many([{"role": role, "content": content}])
        except InvalidMessage:
            assert len(chat.messages(limit=1000)) == before
        else:
            assert len(chat.messages(limit=1000)) == before + len(stored) > before

    def test_too_many_bytes_of_parts(self, mem: Engram) -> None:
        big = image_part("data:image/png;base64," + "A" * (4 * 1_048_576))  # valid base64
        with pytest.raises(InvalidMessage, match=r"content holds \d+ bytes .*limit is 8388608"):
            mem.session("s", scope="p").add("user", [big, big])
        assert mem.session("s", scope="p").messages() == []

    def test_too_many_parts(self, mem: Engram) -> None:
        parts = [image_part(png_url(2, 2), "low") for _ in range(17)]
        with pytest.raises(InvalidMessage, match="17 parts; the limit is 16"):
            mem.session("s", scope="p").add("user", parts)

    @pytest.mark.parametrize("role", ["assistant", "system"])
    def test_images_only_in_user_messages(self, mem: Engram, role: str) -> None:
        with pytest.raises(InvalidMessage, match=f"images go in user messages.*'{role}'"):
            mem.session("s", scope="p").add(role, [image_part(png_url(2, 2))])


def test_a_remote_image_is_never_fetched_and_counts_the_bound(mem: Engram) -> None:
    url = "https://127.0.0.1:9/never-fetched.png"  # nothing listens there
    stored = mem.session("s", scope="p").add("user", _image_message(url))
    assert stored.parts is not None and stored.parts[1]["image_url"]["url"] == url
    assert stored.tokens == text_tokens() + 85 + 8 * 170


def test_png_helper_makes_real_pngs() -> None:
    from io import BytesIO

    from PIL import Image

    with Image.open(BytesIO(png_bytes(30, 20))) as image:
        image.load()
        assert image.size == (30, 20)


class TestAnthropicInput:
    def _conversation(self, data: str) -> list[dict[str, Any]]:
        return [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Is this chart up to date?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": data},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "check history", "signature": "x"},
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "search_history",
                        "input": {"query": "chart"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_02",
                        "name": "get_messages_by_date",
                        "input": {"date": "yesterday"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "no hits"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_02",
                        "content": [{"type": "text", "text": "one message"}],
                        "is_error": False,
                    },
                    {"type": "text", "text": "Well?"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "It is from May."}]},
        ]

    def test_blocks_become_openai_messages_in_order(self, mem: Engram) -> None:
        url = png_url(64, 32)
        data = url.split(",", 1)[1]
        chat = mem.session("s", scope="p")
        stored = chat.add_many(self._conversation(data))
        assert [(m.role, m.content) for m in stored] == [
            ("user", "Is this chart up to date?"),
            ("assistant", "Let me look."),
            ("tool", "no hits"),
            ("tool", "one message"),
            ("user", "Well?"),
            ("assistant", "It is from May."),
        ]
        assert stored[0].parts == [
            {"type": "text", "text": "Is this chart up to date?"},
            {"type": "image_url", "image_url": {"url": url}},
        ]
        calls = stored[1].tool_calls or []
        assert [(c["id"], c["function"]["name"]) for c in calls] == [
            ("toolu_01", "search_history"),
            ("toolu_02", "get_messages_by_date"),
        ]
        assert calls[0]["function"]["arguments"] == '{"query": "chart"}'
        assert [m.tool_call_id for m in stored[2:4]] == ["toolu_01", "toolu_02"]

    def test_to_anthropic_gives_it_back(self, mem: Engram) -> None:
        data = png_url(64, 32).split(",", 1)[1]
        chat = mem.session("s", scope="p")
        chat.add_many(self._conversation(data))
        sent = chat.context(budget=50_000).to_anthropic(cache=False)["messages"]
        (image,) = (b for b in sent[0]["content"] if b["type"] == "image")
        assert image["source"] == {"type": "base64", "media_type": "image/png", "data": data}
        tool_uses = [b for b in sent[1]["content"] if b["type"] == "tool_use"]
        assert [(b["id"], b["input"]) for b in tool_uses] == [
            ("toolu_01", {"query": "chart"}),
            ("toolu_02", {"date": "yesterday"}),
        ]
        results = [b for b in sent[2]["content"] if b["type"] == "tool_result"]
        assert [(b["tool_use_id"], b["content"]) for b in results] == [
            ("toolu_01", "no hits"),
            ("toolu_02", "one message"),
        ]
        assert sent[2]["content"][-1] == {"type": "text", "text": "Well?"}

    def test_the_anthropic_sdks_own_objects(self, mem: Engram) -> None:
        from anthropic.types import Message as AnthropicMessage

        response = AnthropicMessage.model_validate(
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 7},
                "content": [
                    {"type": "thinking", "thinking": "look it up", "signature": "sig"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_9", "name": "search", "input": {"q": "x"}},
                ],
            }
        )
        chat = mem.session("s", scope="p")
        chat.add("user", "What did we say?")
        # The response object itself, then its content blocks (pydantic objects) in a dict.
        (whole,) = chat.add_many([response])
        again = chat.add_many([{"role": "assistant", "content": response.content}])
        for stored in (whole, again[0]):
            assert stored.content == "Checking."
            assert stored.tool_calls is not None
            assert stored.tool_calls[0]["function"] == {"name": "search", "arguments": '{"q": "x"}'}
        assert whole.metadata["sdk"]["usage"]["output_tokens"] == 7
        assert whole.metadata["sdk"]["stop_reason"] == "tool_use"

    def test_url_image_source(self, mem: Engram) -> None:
        block = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
        stored = mem.session("s", scope="p").add("user", [block])
        assert stored.parts == [image_part("https://example.com/a.png")]

    @pytest.mark.parametrize(
        ("message", "error"),
        [
            (
                {"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f"}]},
                r"content\[0\]: a tool_use block belongs in an assistant message",
            ),
            (
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": 3}]},
                r"content\[0\]\.input must be an object",
            ),
            (
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]},
                r"tool_calls\[0\]\.function\.name must be a non-empty string",
            ),
            (
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}
                    ],
                },
                r"content\[0\]\.content\[0\] is a 'image' block",
            ),
        ],
    )
    def test_malformed_blocks_are_refused_naming_them(
        self, mem: Engram, message: dict[str, Any], error: str
    ) -> None:
        chat = mem.session("s", scope="p")
        with pytest.raises(InvalidMessage, match=r"message #0: " + error):
            chat.add_many([message])
        assert chat.messages() == []


class TestTransfer:
    def test_migrate_copies_parts(self, store_url: str, tmp_path: Any) -> None:
        from engram.store import open_store
        from engram.transfer.documents import copy_store_url

        source = f"sqlite:///{tmp_path}/source.db"
        url = png_url(300, 200)
        with engram.open(source) as mem:
            stored = mem.session("s", scope="p").add("user", _image_message(url, "low"))
        copy_store_url(source, store_url)
        target = open_store(store_url)
        try:
            (copied,) = target.tail("p", "s", limit=5)
        finally:
            target.close()
        assert copied.parts == stored.parts and copied.tokens == stored.tokens
        assert copied.parts is not None and copied.parts[1]["image_url"]["url"] == url

    def test_jsonl_export_and_import_round_trip(self, tmp_path: Any) -> None:
        from click.testing import CliRunner

        from engram.cli import main

        url = png_url(16, 9)
        first, second = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
        with engram.open(first) as mem:
            stored = mem.session("s", scope="p").add("user", _image_message(url))
        runner = CliRunner()
        out = tmp_path / "out.jsonl"
        exported = runner.invoke(
            main, ["export", "--db", first, "--scope", "p", "--format", "jsonl", "-o", str(out)]
        )
        assert exported.exit_code == 0, exported.output
        imported = runner.invoke(main, ["import", str(out), "--db", second, "--scope", "p"])
        assert imported.exit_code == 0, imported.output
        with engram.open(second) as mem:
            (again,) = mem.session("s", scope="p").messages()
        assert again.parts == stored.parts and again.tokens == stored.tokens


def test_retrieval_tools_say_a_message_holds_images(mem: Engram) -> None:
    import json

    from engram import tools

    chat = mem.session("s", scope="p")
    stored = chat.add("user", _image_message(png_url(8, 8), "low"))
    found = json.loads(tools.dispatch(chat, "get_message_by_id", {"message_id": stored.id}))
    assert found["content"] == QUESTION and found["images"] == 1
    assert "data:image" not in json.dumps(found)  # the image itself stays out of the result
