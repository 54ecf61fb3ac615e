"""Cross-encoder reranking of retrieved pools (before any tree, diversifier or packer).

The pool is reordered by cross-encoder relevance and each candidate's ``score`` becomes the
cross-encoder logit, which the RNG-Score's dissimilarity variant (``relevance: cross_encoder``)
reads as the query-document relevance. Scores are cached per (model, question, passage).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from harness.cache import TextStore, stable_hash
from harness.cache.fingerprint import code_fingerprint
from harness.core.devices import resolve_device
from harness.core.types import Pool
from harness.retrieve.dense import candidate_text

log = logging.getLogger(__name__)


class CrossEncoderReranker:
    def __init__(
        self,
        model: str = "BAAI/bge-reranker-v2-m3",
        batch_size: int = 32,
        max_length: int = 512,
        device: str = "auto",
        cache_dir: str | None = None,
    ) -> None:
        self.model_name = model
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self._model = None
        self.cache = TextStore(Path(cache_dir) / "rerank.sqlite", table="rerank") if cache_dir else None

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import CrossEncoder

            log.info("loading cross-encoder %s", self.model_name)
            device = resolve_device(self.device, "reranker")
            self._model = CrossEncoder(self.model_name, max_length=self.max_length, device=device)
        return self._model

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        keys = [stable_hash(self.model_name, self.max_length, code_fingerprint("rerank"), q, p) for q, p in pairs]
        found = self.cache.get_texts(keys) if self.cache is not None else {}
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            logits = self.model.predict(
                [pairs[i] for i in missing],
                batch_size=self.batch_size,
                show_progress_bar=len(missing) > 512,
                activation_fn=None,
            )
            new = {
                keys[i]: float(v)
                for i, v in zip(missing, np.asarray(logits, dtype=np.float64).reshape(-1), strict=False)
            }
            if self.cache is not None:
                self.cache.put_texts(new)
            found.update(new)
        return np.array([found[k] for k in keys], dtype=np.float64)

    def rerank(self, pools: list[Pool]) -> list[Pool]:
        pairs = [(pool.example.question, candidate_text(c)) for pool in pools for c in pool.candidates]
        scores = self.score(pairs)
        out, offset = [], 0
        for pool in pools:
            s = scores[offset : offset + len(pool.candidates)]
            offset += len(pool.candidates)
            order = np.argsort(-s, kind="stable")
            out.append(
                Pool(
                    pool.example,
                    [replace(pool.candidates[i], score=float(s[i])) for i in order],
                    pool.embeddings[order],
                    pool.query_embedding,
                )
            )
        return out
