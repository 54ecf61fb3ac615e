"""Near-duplicate injection at rate rho.

For a pool of m candidates, round(rho * m) sentence-shuffled copies are made, half drawn from gold passages
and half uniformly from the pool; copies keep their source identity (``source_ids``) so metrics credit a
source once. Copies are embedded with the run's encoder, the pool is re-ranked, and the question's candidate
count stays frozen at its clean value m, so more redundancy means fewer distinct sources within reach.
"""

from __future__ import annotations

import numpy as np

from harness.cache import stable_hash
from harness.core.types import Candidate, Pool
from harness.perturb.base import Perturbation, rerank
from harness.retrieve.dense import candidate_text, embeds_title


def shuffled_copy(candidate: Candidate, rng: np.random.Generator, copy_index: int) -> Candidate:
    sentences = list(candidate.units())
    if len(sentences) > 1:
        order = rng.permutation(len(sentences))
        # A permutation equal to the identity would be an exact duplicate; rotate instead.
        if np.all(order == np.arange(len(sentences))):
            order = np.roll(order, 1)
        sentences = [sentences[i] for i in order]
    return Candidate(
        cand_id=f"copy{copy_index}:{candidate.cand_id}",
        text=" ".join(sentences),
        source_ids=candidate.source_ids,
        title=candidate.title,
        sentences=tuple(sentences),
        score=candidate.score,
        kind="copy",
    )


class NearDuplicateInjection(Perturbation):
    def __init__(self, name: str = "inject", rho: float = 0.1, gold_share: float = 0.5) -> None:
        super().__init__(name)
        if rho < 0:
            raise ValueError(f"perturb.rho must be >= 0, got {rho}")
        if not 0 <= gold_share <= 1:
            raise ValueError(f"perturb.gold_share must be in [0, 1], got {gold_share}")
        self.rho = float(rho)
        self.gold_share = float(gold_share)

    def _copies(self, pool: Pool, rng: np.random.Generator) -> list[Candidate]:
        m = len(pool.candidates)
        n_copies = int(np.floor(self.rho * m + 0.5))  # half up: rho = 0.05 of 10 documents is one copy
        if n_copies == 0 or m == 0:
            return []
        gold = set(pool.example.gold_doc_ids)
        gold_idx = [i for i, c in enumerate(pool.candidates) if gold.intersection(c.source_ids)]
        n_gold = int(np.floor(self.gold_share * n_copies + 0.5)) if gold_idx else 0
        picks = list(rng.choice(gold_idx, size=n_gold, replace=True)) if n_gold else []
        picks += list(rng.integers(0, m, size=n_copies - n_gold))
        return [shuffled_copy(pool.candidates[i], rng, j) for j, i in enumerate(picks)]

    def apply(self, pools: list[Pool], encoder, seed: int) -> list[Pool]:
        out = []
        copies_per_pool = []
        for pool in pools:
            # One generator per question, seeded by its id: its copies do not depend on the rest of the run.
            rng = np.random.default_rng([int(seed), int(stable_hash(pool.example.question_id)[:12], 16)])
            copies_per_pool.append(self._copies(pool, rng))
        view = embeds_title(encoder)
        vectors = encoder.encode_documents([candidate_text(c, view) for copies in copies_per_pool for c in copies])
        offset = 0
        for pool, copies in zip(pools, copies_per_pool, strict=False):
            new_vectors = vectors[offset : offset + len(copies)]
            offset += len(copies)
            candidates = pool.candidates + copies
            embeddings = np.vstack([pool.embeddings, new_vectors]) if copies else pool.embeddings
            out.append(rerank(pool, candidates, embeddings, size=len(pool.candidates)))
        return out
