"""The pack step of a run: every question's packed context fitted to the budget in reader tokens, its
prompt and its reader-independent figures."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from threadpoolctl import ThreadpoolController
from tqdm.auto import tqdm

from harness.core.stage import stage_columns
from harness.core.types import Context, Pool, Snippet
from harness.metrics import context_diagnostics
from harness.metrics.provenance import context_columns
from harness.metrics.registry import CONTEXT_TOKENS, PROMPT_TOKENS
from harness.metrics.support import evidence_diagnostics
from harness.pack.base import PackingRequest
from harness.pack.snippets import render_context
from harness.read.base import PromptRequest
from harness.run.rows import Prepared

PROGRESS_DELAY = 2.0  # seconds before a stage shows a progress bar: short stages print only their line


class Selection(NamedTuple):
    """One question after the tree and the diversifier."""

    pool: Pool  # the pool the diversifier chose from (tree nodes included)
    selected: Pool
    columns: dict[str, Any]  # tree.* and diversify.* report columns
    metrics: dict[str, float]  # selection metrics (harness.metrics.diversity.selection_metrics)


def fit_to_budget(
    context: Context, tokens, budget: int | None, text: str | None = None, count: int | None = None
) -> tuple[Context, str, int, int]:
    """Render the context and count it in reader tokens; drop trailing snippets in the (rare) case the
    rendered text exceeds the budget because tokenization changed across a snippet boundary (a
    SentencePiece word loses its leading-space token after a newline). ``text`` and ``count``, when
    given, are the rendering and count of the whole context (counted in a batch by the caller). Returns
    the context, its text, its token count and how many snippets were dropped (the row's ``trimmed_snippets``)."""
    snippets = list(context.snippets)
    packed = len(snippets)
    if text is None or count is None:
        text = render_context(snippets)
        count = tokens.count(text) if text else 0
    elif not text:
        count = 0
    while budget is not None and count > budget and snippets:
        snippets.pop()
        text = render_context(snippets)
        count = tokens.count(text) if text else 0
    context.snippets = snippets
    context.tokens = count
    return context, text, count, packed - len(snippets)


def pack_selections(
    packer,
    reader,
    selections: list[Selection],
    all_snippets: list[list[Snippet]],
    flat_vectors: np.ndarray,
    retrieval: list[dict],
    budget: int,
    seed: int,
) -> list[Prepared]:
    """Every question's packed context, its prompt and the reader-independent figures."""
    tokens = reader.token_counter
    threadpools = ThreadpoolController()
    offset = 0
    contexts: list[Context] = []
    for (pool, selected, _, _), snippets in zip(
        selections,
        tqdm(all_snippets, desc=f"pack={packer.name} B={budget}", leave=False, delay=PROGRESS_DELAY),
        strict=True,
    ):
        vectors = flat_vectors[offset : offset + len(snippets)]
        offset += len(snippets)
        request = PackingRequest(
            question=pool.example.question,
            pool=selected,
            snippets=snippets,
            snippet_embeddings=vectors,
            query_embedding=pool.query_embedding,
            budget=budget,
            tokens=tokens,
            seed=seed,
        )
        with threadpools.limit(limits=1):
            try:
                contexts.append(packer.pack(request))
            except Exception as error:  # a packer's library failing on one question: say which one
                error.add_note(f"packing question {pool.example.question_id!r} with {packer.name!r} at B = {budget}")
                raise

    # Contexts and prompts are counted in one tokenizer call each, not one per question.
    texts = [render_context(context.snippets) for context in contexts]
    counts = tokens.count_many(texts)
    fitted = [
        fit_to_budget(context, tokens, None if context.budget is None else budget, text, count)
        for context, text, count in zip(contexts, texts, counts, strict=True)
    ]
    prompts = [
        reader.render(PromptRequest(sel.pool.example.question, text))
        for sel, (_, text, _, _) in zip(selections, fitted, strict=True)
    ]
    prompt_counts = reader.count_prompt_tokens_many(prompts)
    prepared: list[Prepared] = []
    for (pool, selected, stage_info, metrics), snippets, retr, (context, text, count, trimmed), prompt, n in zip(
        selections, all_snippets, retrieval, fitted, prompts, prompt_counts, strict=True
    ):
        figures = {
            **retr,
            **metrics,
            **context_diagnostics(context, pool.example, text),
            **evidence_diagnostics(context, pool.example),
            **stage_info,
            **stage_columns("pack", context.extra),
            "trimmed_snippets": trimmed,
            "n_candidates": len(pool.candidates),
            "n_selected": len(selected.candidates),
            "n_snippets_available": len(snippets),
            "n_snippets": len(context.snippets),
            CONTEXT_TOKENS: count,
            PROMPT_TOKENS: n,
        }
        figures.update(context_columns(context, text, pool))
        prepared.append(Prepared(pool, selected, context, text, prompt, figures))
    return prepared
