from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.compaction.exchange_sizes import (
    TRUNCATED_SUMMARY_MARKER,
    answer_view,
    compress_summary,
    cut_utf8,
    utf8_len,
)
from engram.errors import ConfigError
from engram.llm import LLMClient
from engram.testing import FakeLLMServer


def sentences(n_bytes: int) -> str:
    text = "".join(f"Sentence number {i} says something useful. " for i in range(400))
    return text.encode()[:n_bytes].decode("utf-8", errors="ignore")


class TestAnswerViews:
    def test_750_bytes_unchanged(self):
        text = "a" * 750
        assert answer_view(text, 1) == text

    def test_751_bytes_become_500_byte_view(self):
        text = "word " * 150 + "x"  # 751 bytes
        assert utf8_len(text) == 751
        view = answer_view(text, 42)
        assert utf8_len(view) <= 500
        assert "message 42" in view and "751 bytes" in view
        assert text.startswith(view.split(" […]")[0])

    @settings(deadline=None)
    @given(st.text(min_size=200, max_size=1500))
    def test_view_is_valid_utf8_prefix_within_limit(self, text: str):
        view = answer_view(text, 7)
        if utf8_len(text) <= 750:
            assert view == text
        else:
            assert utf8_len(view) <= 500
            head = view.rsplit(" […] ", 1)[0]
            assert text.startswith(head)

    def test_multibyte_cut_at_character_boundary(self):
        assert cut_utf8("ééé", 3) == "é"
        assert cut_utf8("😀😀", 5) == "😀"

    def test_view_too_small_for_marker(self):
        with pytest.raises(ConfigError):
            answer_view("x" * 100, 1, over_bytes=10, view_bytes=20)


class TestSummaryCompression:
    def test_4097_bytes_truncated_to_3072_whole_sentences(self):
        summary = sentences(4097)
        assert utf8_len(summary) == 4097
        out = compress_summary(summary)
        assert out.method == "truncate"
        assert utf8_len(out.text) <= 3072
        body = out.text.removeprefix(TRUNCATED_SUMMARY_MARKER)
        assert out.text.startswith(TRUNCATED_SUMMARY_MARKER)
        assert body.startswith("Sentence number")  # a whole sentence
        assert summary.endswith(body) or body.rstrip(".") in summary

    def test_4096_bytes_untouched(self):
        summary = sentences(4096)
        assert compress_summary(summary).method == "none"

    def test_llm_compression(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply("Compressed summary.")
        out = compress_summary(sentences(5000), client=client)
        assert out.method == "llm" and out.text == "Compressed summary."
        assert out.usage[0].purpose == "summary_compression"

    def test_llm_failure_falls_back_to_truncation(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.fail(500).fail(500)
        out = compress_summary(sentences(5000), client=client)
        assert out.method == "truncate"
        assert out.fallback_reason and "500" in out.fallback_reason
        assert utf8_len(out.text) <= 3072

    def test_llm_answer_too_long_is_truncated(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply(sentences(3500))
        out = compress_summary(sentences(5000), client=client)
        assert out.method == "llm+truncate"
        assert utf8_len(out.text) <= 3072
