"""Overlapping chunking: each pool document is cut into word windows with a given overlap.

Windows of ``window_words`` words advance by ``window_words * (1 - overlap)`` words and inherit their
source document's identity. The pool is re-ranked over windows; with ``freeze_pool_size`` its candidate
count stays at the clean number of documents, so higher overlap packs more near-duplicates into it.
"""

from __future__ import annotations

from harness.core.types import Candidate, Pool
from harness.perturb.base import Perturbation, rerank
from harness.retrieve.dense import candidate_text, embeds_title


def word_windows(text: str, window_words: int, overlap: float) -> list[str]:
    words = text.split()
    if not words:
        return []
    stride = max(1, round(window_words * (1.0 - overlap)))
    windows = []
    for start in range(0, len(words), stride):
        windows.append(" ".join(words[start : start + window_words]))
        if start + window_words >= len(words):
            break
    return windows


class OverlappingChunks(Perturbation):
    def __init__(
        self, name: str = "chunk_overlap", overlap: float = 0.5, window_words: int = 60, freeze_pool_size: bool = True
    ) -> None:
        super().__init__(name)
        if not 0 <= overlap < 1:
            raise ValueError(f"perturb.overlap must be in [0, 1), got {overlap}")
        if window_words < 1:
            raise ValueError(f"perturb.window_words must be >= 1, got {window_words}")
        self.overlap = float(overlap)
        self.window_words = int(window_words)
        self.freeze_pool_size = freeze_pool_size

    def apply(self, pools: list[Pool], encoder, seed: int) -> list[Pool]:
        chunked: list[list[Candidate]] = []
        for pool in pools:
            windows = []
            for cand in pool.candidates:
                for j, text in enumerate(word_windows(cand.text, self.window_words, self.overlap)):
                    windows.append(
                        Candidate(
                            cand_id=f"{cand.cand_id}#w{j}",
                            text=text,
                            source_ids=cand.source_ids,
                            title=cand.title,
                            sentences=(text,),
                            score=cand.score,
                            kind="chunk",
                        )
                    )
            chunked.append(windows)
        view = embeds_title(encoder)
        vectors = encoder.encode_documents([candidate_text(c, view) for windows in chunked for c in windows])
        out, offset = [], 0
        for pool, windows in zip(pools, chunked, strict=False):
            emb = vectors[offset : offset + len(windows)]
            offset += len(windows)
            size = len(pool.candidates) if self.freeze_pool_size else None
            out.append(rerank(pool, windows, emb, size))
        return out
