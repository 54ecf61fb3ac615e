"""Sentence-transformers bi-encoder with an on-disk embedding cache keyed by model and text hash."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from harness.cache import ArrayStore, stable_hash
from harness.cache.fingerprint import code_fingerprint
from harness.core.devices import resolve_device
from harness.retrieve.offline_encoders import DEFAULT_MODELS_DIR, resolve_model_path

log = logging.getLogger(__name__)

# Vectors an Encoder keeps in memory above its SQLite cache (384-d: 1.5 KB each, 400 MB at most): every
# job of a sweep that sees a pool embeds the same snippets again, and a look-up here costs no key hash,
# query or checksum.
MEMORY_ENTRIES = 262_144


class Encoder:
    """Embeds texts into L2-normalised float32 rows, each text computed once across runs."""

    def __init__(
        self,
        model: str = "offline:all-MiniLM-L6-v2",
        cache_dir: str | None = None,
        batch_size: int = 64,
        truncate_dim: int | None = None,
        device: str = "auto",
        query_prefix: str = "",
        document_prefix: str = "",
        max_seq_length: int | None = None,
        show_progress: bool = True,
        embed_title: bool = True,
        models_dir: str | Path = DEFAULT_MODELS_DIR,
    ) -> None:
        self.model_name = model
        # Where split offline encoders (offline:all-mpnet-base-v2) are extracted; not part of the identity.
        self.models_dir = Path(models_dir)
        # Passages are embedded as "title: text" (true) or text only; see harness.retrieve.dense.embeds_title.
        self.embed_title = bool(embed_title)
        self.batch_size = batch_size
        self.truncate_dim = truncate_dim
        self.device = device
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.max_seq_length = max_seq_length
        self.show_progress = show_progress
        self._model = None
        self.calls = 0  # texts actually sent to the model (cache misses)
        self.requests = 0  # texts asked for
        self.cache = ArrayStore(Path(cache_dir) / "embeddings.sqlite", table="embeddings") if cache_dir else None
        self._memory: dict[str, np.ndarray] = {}  # text -> normalised float32 vector, this process only

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            path = resolve_model_path(self.model_name, self.models_dir)
            log.debug("loading encoder %s from %s", self.model_name, path)
            device = resolve_device(self.device, "retriever.encoder")
            self._model = SentenceTransformer(path, device=device, truncate_dim=self.truncate_dim)
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    @property
    def identity(self) -> str:
        return f"{self.model_name}|dim={self.truncate_dim}|max_len={self.max_seq_length}"

    def cache_key(self, text: str) -> str:
        return stable_hash(self.identity, code_fingerprint("encoder"), text)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode([self.query_prefix + t for t in texts])

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self.encode([self.document_prefix + t for t in texts])

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        self.requests += len(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        memory = self._memory
        unseen = [t for t in dict.fromkeys(texts) if t not in memory]
        if not unseen:
            return np.stack([memory[t] for t in texts])
        fresh = dict(zip(unseen, self._encode_stored(unseen), strict=True))
        # Stacked before the memo is remembered into: a full memo is cleared, and with it texts of this call.
        out = np.stack([fresh[t] if t in fresh else memory[t] for t in texts])
        if len(memory) + len(fresh) > MEMORY_ENTRIES:
            memory.clear()
        memory.update(fresh)
        return out

    def _encode_stored(self, texts: list[str]) -> np.ndarray:
        """Distinct ``texts`` through the on-disk cache, the misses through the model."""
        keys = [self.cache_key(t) for t in texts]
        found = self.cache.get_arrays(keys) if self.cache is not None else {}
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=False) if k not in found))
        if missing:
            self.calls += len(missing)
            vectors = self.model.encode(
                missing,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=self.show_progress and len(missing) > 256,
            ).astype(np.float32)
            new = {self.cache_key(t): v for t, v in zip(missing, vectors, strict=False)}
            if self.cache is not None:
                self.cache.put_arrays(new)
            found.update(new)
        out = np.stack([found[k] for k in keys]).astype(np.float32)
        # Truncated (Matryoshka) vectors must be renormalised for cosine = inner product.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    @property
    def dimension(self) -> int:
        return int(self.truncate_dim or self.model.get_embedding_dimension())
