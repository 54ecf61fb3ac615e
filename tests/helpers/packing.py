"""Random packing requests for tests and benchmarks, costed in whitespace words."""

from __future__ import annotations

import numpy as np

from harness.core.types import Example, Pool, Snippet
from harness.pack.base import PackingRequest
from harness.text.tokens import WordCounter

VOCABULARY = [f"term{k}" for k in range(400)] + ["the", "of", "and", "in", "was", "by", "a", "to"]


def random_request(
    rng: np.random.Generator, n_snippets: int = 100, dim: int = 384, budget: int = 160, n_documents: int = 10
) -> PackingRequest:
    """One question with ``n_snippets`` random sentences spread over ``n_documents`` candidates."""
    tokens = WordCounter()
    question = " ".join(rng.choice(VOCABULARY[:60], size=8)) + "?"
    documents = rng.integers(0, n_documents, size=n_snippets)
    positions: dict[int, int] = {}
    snippets = []
    for d in documents.tolist():
        text = " ".join(rng.choice(VOCABULARY, size=int(rng.integers(6, 40))))
        positions[d] = positions.get(d, -1) + 1
        snippets.append(
            Snippet(
                text=text,
                cand_id=f"d{d}",
                source_ids=(f"d{d}",),
                tokens=tokens.count(text),
                position=positions[d],
                rank=d,
            )
        )
    embeddings = rng.standard_normal((n_snippets, dim)).astype(np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    query = rng.standard_normal(dim).astype(np.float32)
    query /= np.linalg.norm(query)
    example = Example(question_id="q", question=question, answers=("a",), gold_doc_ids=(), documents=())
    pool = Pool(example=example, candidates=[], embeddings=np.zeros((0, dim), np.float32), query_embedding=query)
    return PackingRequest(question, pool, snippets, embeddings, query, budget, tokens, seed=0)
