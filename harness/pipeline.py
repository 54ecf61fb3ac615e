"""One evaluation run: load -> retrieve -> perturb -> tree -> diversify -> pack -> diagnose -> read -> score.

Every stage before ``read`` is reader-independent except token counting, and each is a pure function of
its config slice, so caches (embeddings, reader responses) make sweeps recompute only what changed.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from harness.metrics import context_diagnostics, exact_match, f1_score, retrieval_metrics
from harness.pack.base import PackingRequest
from harness.pack.snippets import make_snippets, render_context
from harness.tree.base import TreeServices
from harness.types import Context, Pool

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    """One question after packing: everything the reader needs and every reader-independent figure."""

    pool: Pool
    selected: Pool
    context: Context
    context_text: str
    prompt: str
    figures: dict[str, Any]


def flatten_config(cfg: DictConfig) -> dict[str, Any]:
    """Dotted config keys -> scalar values (lists as JSON), for one-row-per-question tables."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        elif isinstance(node, list):
            flat[prefix[:-1]] = json.dumps(node)
        else:
            flat[prefix[:-1]] = node

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return flat


def fit_to_budget(context: Context, tokens, budget: int | None) -> tuple[Context, str, int]:
    """Render the context and count it in reader tokens; drop trailing snippets in the (rare) case the
    rendered text exceeds the budget because tokens merged across a snippet boundary."""
    snippets = list(context.snippets)
    text = render_context(snippets)
    count = tokens.count(text) if text else 0
    while budget is not None and count > budget and snippets:
        snippets.pop()
        text = render_context(snippets)
        count = tokens.count(text) if text else 0
    context.snippets = snippets
    context.tokens = count
    return context, text, count


class Pipeline:
    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.encoder = instantiate(cfg.retriever.encoder)
        self.retriever = instantiate(cfg.retriever, encoder=self.encoder, _recursive_=False)
        self.perturbation = instantiate(cfg.perturb) if cfg.get("perturb") else None
        self.tree = instantiate(cfg.tree)
        self.diversifier = instantiate(cfg.diversifier)
        self.packer = instantiate(cfg.packer)
        self.reader = instantiate(cfg.reader, prompt=cfg.prompt)
        self.timings: dict[str, float] = {}

    def _timed(self, stage: str, start: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - start

    def load(self):
        start = time.perf_counter()
        examples = instantiate(self.cfg.dataset)
        if not examples:
            raise ValueError(f"dataset {self.cfg.dataset.get('name')!r} produced no examples")
        self._timed("load", start)
        return examples

    def prepare(self, examples) -> list[Prepared]:
        cfg = self.cfg
        start = time.perf_counter()
        pools = self.retriever.retrieve(examples)
        self._timed("retrieve", start)
        retrieval = [retrieval_metrics(pool, cfg.k) for pool in pools]

        if self.perturbation is not None:
            start = time.perf_counter()
            pools = self.perturbation.apply(pools, self.encoder, cfg.seed)
            self._timed("perturb", start)

        services = TreeServices(encoder=self.encoder, language_model=self.reader, tokens=self.reader.token_counter, seed=cfg.seed)
        tokens = self.reader.token_counter
        prepared: list[Prepared] = []
        selections: list[tuple[Pool, Pool, dict]] = []
        start = time.perf_counter()
        for pool in tqdm(pools, desc=f"tree={self.tree.name} diversifier={self.diversifier.name}", leave=False):
            pool = self.tree.expand(pool, services)
            # One BLAS thread per question: per-query kernels at m ~ 100 are slower with more.
            with threadpool_limits(1):
                if hasattr(self.diversifier, "select_with_info"):
                    indices, info = self.diversifier.select_with_info(pool)
                    selected = pool.subset(indices)
                else:
                    selected, info = self.diversifier.select(pool), {}
            selections.append((pool, selected, info))
        self._timed("select", start)

        # Snippets of every question are embedded in one batch (cached per text).
        start = time.perf_counter()
        all_snippets = [make_snippets(sel, tokens, **cfg.snippets) for _, sel, _ in selections]
        flat_texts = [s.text for snippets in all_snippets for s in snippets]
        flat_vectors = self.encoder.encode_documents(flat_texts)
        self._timed("snippets", start)

        start, offset = time.perf_counter(), 0
        for (pool, selected, info), snippets, retr in zip(
            selections, all_snippets, tqdm(retrieval, desc=f"pack={self.packer.name} B={cfg.budget}", leave=False)
        ):
            vectors = flat_vectors[offset : offset + len(snippets)]
            offset += len(snippets)
            request = PackingRequest(
                question=pool.example.question,
                pool=selected,
                snippets=snippets,
                snippet_embeddings=vectors,
                query_embedding=pool.query_embedding,
                budget=int(cfg.budget),
                tokens=tokens,
                seed=int(cfg.seed),
            )
            with threadpool_limits(1):
                context = self.packer.pack(request)
            budget = None if context.budget is None else int(cfg.budget)
            context, text, count = fit_to_budget(context, tokens, budget)
            prompt = self.reader.render_prompt(pool.example.question, text)
            figures = {
                **retr,
                **context_diagnostics(context, pool.example, text),
                **{f"selection_{k}": v for k, v in info.items()},
                "n_candidates": len(pool.candidates),
                "n_selected": len(selected.candidates),
                "n_snippets_available": len(snippets),
                "n_snippets": len(context.snippets),
                "context_tokens": count,
                "prompt_tokens": tokens.count(prompt),
            }
            prepared.append(Prepared(pool, selected, context, text, prompt, figures))
        self._timed("pack", start)
        return prepared

    def read(self, prepared: list[Prepared]) -> list[str]:
        start = time.perf_counter()
        answers = self.reader.answer([p.prompt for p in prepared])
        self._timed("read", start)
        return answers

    def rows(self, prepared: list[Prepared], answers: list[str], choices: dict[str, str]) -> pd.DataFrame:
        cfg = self.cfg
        config_columns = {f"cfg.{k}": v for k, v in flatten_config(cfg).items()}
        records = []
        for item, answer in zip(prepared, answers):
            ex = item.pool.example
            records.append(
                {
                    "question_id": ex.question_id,
                    "dataset": ex.dataset or cfg.dataset.get("name", ""),
                    "split": ex.split,
                    "question": ex.question,
                    "gold_answers": json.dumps(list(ex.answers)),
                    "hops": ex.hops,
                    "qtype": ex.qtype,
                    "retriever": choices.get("retriever", ""),
                    "perturb": choices.get("perturb", "none"),
                    "tree": self.tree.name,
                    "diversifier": self.diversifier.name,
                    "packer": self.packer.name,
                    "budget": int(cfg.budget),
                    "k": int(cfg.k),
                    "seed": int(cfg.seed),
                    "reader": self.reader.name,
                    "answer": answer,
                    "em": exact_match(answer, ex.answers),
                    "f1": f1_score(answer, ex.answers),
                    **item.figures,
                    "context": item.context_text,
                    **config_columns,
                }
            )
        return pd.DataFrame.from_records(records)


def run(cfg: DictConfig, output_dir: str | Path, choices: dict[str, str] | None = None) -> pd.DataFrame:
    """Run one configuration end to end and write rows, summary and config into ``output_dir``."""
    from harness.report.outputs import write_outputs

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    choices = choices or {}
    pipeline = Pipeline(cfg)
    examples = pipeline.load()
    log.info("%d questions from %s", len(examples), cfg.dataset.get("name"))
    prepared = pipeline.prepare(examples)
    answers = pipeline.read(prepared)
    rows = pipeline.rows(prepared, answers, choices)
    write_outputs(cfg, rows, output_dir, pipeline.timings, counters={
        "encoder_texts_requested": pipeline.encoder.requests,
        "encoder_texts_computed": pipeline.encoder.calls,
        "reader_prompts_requested": getattr(pipeline.reader, "requested", None),
        "reader_prompts_generated": getattr(pipeline.reader, "generated", None),
    })
    return rows
